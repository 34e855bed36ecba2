"""DAG reachability in the training loop (AM Fig. 7, issue 16): loss, evaluation, protocol, CLI."""
import json
import math

import pytest

torch = pytest.importorskip("torch")

from assocmem.cli import main  # noqa: E402
from assocmem.gpu.tasks import dag as Dg, train as Tr  # noqa: E402

pytestmark = pytest.mark.gpu


def test_multilabel_loss_and_accuracy_by_hand():
    logits = torch.tensor([[2.0, -1.0, 0.5], [-3.0, 1.0, -0.2]])
    targets = torch.tensor([[True, False, False], [False, True, True]])
    loss, acc = Tr.loss_and_acc(logits, targets)
    sig = lambda x: 1 / (1 + math.exp(-x))                      # noqa: E731
    want = -(math.log(sig(2)) + math.log(1 - sig(-1)) + math.log(1 - sig(0.5))
             + math.log(1 - sig(-3)) + math.log(sig(1)) + math.log(sig(-0.2))) / 6
    assert abs(float(loss) - want) < 1e-6
    assert abs(float(acc) - 4 / 6) < 1e-7                        # wrong: node 2 of row 0, node 2 of row 1


def test_forward_reads_the_answer_token(tmp_path):
    pr = Tr.resolve_protocol("dag_reachability", {"root_position": "last"})
    net = Tr.build_model("dag_reachability", "transformer-1", pr)
    b = Dg.dag_batch(Tr.dag_config(pr), 3, generator=torch.Generator().manual_seed(0))
    logits, labels = Tr.forward(net, "dag_reachability", b, pr)
    assert logits.shape == (3, 32) and labels.dtype == torch.bool and labels.shape == (3, 32)
    assert bool((b.tokens[b.is_query] == Dg.dag_vocab(Tr.dag_config(pr)).ans).all())


@pytest.mark.parametrize("model", ["transformer-2", "deltaformer-round2"])
def test_cpu_run_writes_result_with_protocol(tmp_path, model):
    r = Tr.train("dag_reachability", model, steps=2, batch_size=4, device="cpu", out=tmp_path, progress=False,
                 protocol={"root_position": "last", "family": "narrow"})
    path = tmp_path / "dag_reachability" / f"{model}__root_position-last__family-narrow_s0.json"
    rec = json.loads(path.read_text())
    assert rec["protocol"]["root_position"] == "last" and rec["protocol"]["family"] == "narrow"
    ev = rec["eval"]
    assert 0 <= ev["acc_set"] <= ev["acc_node"] <= 1 and set(ev["by_family"]) == {"narrow"}
    assert r["curve"][-1]["step"] == 2


def test_cli_rejects_a_bad_root_position(tmp_path, capsys):
    rc = main(["gpu", "train", "dag_reachability", "--model", "transformer-1", "--device", "cpu", "--steps", "1",
               "--out", str(tmp_path / "runs"), "--protocol", "root_position=middle"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--protocol root_position=middle" in err[0]
    assert not (tmp_path / "runs").exists()
