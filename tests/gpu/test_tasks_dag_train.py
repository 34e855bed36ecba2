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


def test_factored_edge_embedding_is_the_sum_of_its_endpoints_rows():
    pr = Tr.resolve_protocol("dag_reachability", {"edge_tokens": "single", "edge_embedding": "factored"})
    net = Tr.build_model("dag_reachability", "deltaformer-linear", pr)
    cfg = Tr.dag_config(pr)
    b = Dg.dag_batch(cfg, 2, generator=torch.Generator().manual_seed(1))
    n, voc = cfg.n_nodes, Dg.dag_vocab(cfg)
    h = net.embed(b.tokens)
    t = int(torch.nonzero(b.is_edge[0])[0])                    # the first edge token of row 0
    assert int(b.tokens[0, t]) < n * n
    u, v = int(b.src[0, t]), int(b.dst[0, t])
    want = net.emb_from.weight[u] + net.emb_to.weight[v]
    assert torch.allclose(h[0, t], want)
    ans = int(torch.nonzero(b.tokens[0] == voc.ans)[0])        # other tokens keep their own row
    assert torch.allclose(h[0, ans], net.emb.weight[voc.ans])
    logits, _ = Tr.forward(net, "dag_reachability", b, pr)
    logits.sum().backward()                                    # both tables learn
    assert net.emb_from.weight.grad.abs().sum() > 0 and net.emb_to.weight.grad.abs().sum() > 0


def test_factored_edge_embedding_needs_one_token_edges():
    with pytest.raises(ValueError, match="protocol edge_embedding"):
        Tr.resolve_protocol("dag_reachability", {"edge_embedding": "factored"})   # default pair edges
    with pytest.raises(ValueError, match="edge_embedding"):
        Tr.resolve_protocol("dag_reachability", {"edge_tokens": "single", "edge_embedding": "sum"})


def test_cli_takes_options_that_need_each_other_in_any_order(tmp_path, capsys):
    from assocmem.gpu.tasks.cli import parse_protocol

    got = parse_protocol("dag_reachability", ["edge_embedding=factored", "edge_tokens=single"])
    assert got == {"edge_embedding": "factored", "edge_tokens": "single"}
    rc = main(["gpu", "train", "dag_reachability", "--model", "transformer-1", "--device", "cpu", "--steps", "1",
               "--out", str(tmp_path / "runs"), "--protocol", "edge_embedding=factored"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--protocol edge_embedding=factored" in err[0] and "one-token" in err[0]
    assert not (tmp_path / "runs").exists()


def test_per_node_read_out_trains_and_records_its_protocol(tmp_path):
    pr = Tr.resolve_protocol("dag_reachability", {"output": "per_node"})
    net = Tr.build_model("dag_reachability", "deltaformer-linear", pr)
    b = Dg.dag_batch(Tr.dag_config(pr), 3, generator=torch.Generator().manual_seed(0))
    logits, labels = Tr.forward(net, "dag_reachability", b, pr)
    assert logits.shape == (*b.tokens.shape, 2) and labels.dtype == torch.long
    assert bool((labels[b.is_query] >= 0).all()) and bool((labels[~b.is_query] == Dg.IGNORE).all())
    Tr.train("dag_reachability", "transformer-1", steps=2, batch_size=4, device="cpu", out=tmp_path, progress=False,
             protocol={"output": "per_node"})
    rec = json.loads((tmp_path / "dag_reachability" / "transformer-1__output-per_node_s0.json").read_text())
    assert rec["protocol"]["output"] == "per_node" and 0 <= rec["eval"]["acc_set"] <= rec["eval"]["acc_node"] <= 1


@pytest.mark.parametrize("flip,want", [(False, 1.0), (True, 0.0)])
def test_per_node_evaluation_maps_each_answer_to_the_node_it_asks(monkeypatch, flip, want):
    """An oracle answering every query right scores 1 per node and per set; one answering every
    query wrong scores 0: the answers are put back at the names the query tokens ask about."""
    pr = Tr.resolve_protocol("dag_reachability", {"output": "per_node"})
    real = Tr.forward

    def oracle(net, task, batch, protocol=None):
        lab = batch.labels.clamp_min(0)
        lab = 1 - lab if flip else lab
        return torch.nn.functional.one_hot(lab, 2).float() * 10, batch.labels

    monkeypatch.setattr(Tr, "forward", oracle)
    res = Tr._eval_dag(None, {"n_seqs": 40}, torch.device("cpu"), 16, pr)
    monkeypatch.setattr(Tr, "forward", real)
    assert res["acc_node"] == want and res["acc_set"] == want


def test_write_query_solves_the_general_deltaformer_recursion():
    """u_t = v_t − β_t Σ_{i<t} κ1(k_i, w_t) u_i, solved token by token here, against the triangular
    solve; with w = k it is the key-only form."""
    from assocmem.gpu.tasks import models as Mo

    g = torch.Generator().manual_seed(3)
    k, w = torch.randn(1, 2, 7, 4, generator=g, dtype=torch.float64), torch.randn(1, 2, 7, 4, generator=g,
                                                                                 dtype=torch.float64)
    v = torch.randn(1, 2, 7, 3, generator=g, dtype=torch.float64)
    beta = torch.rand(1, 2, 7, generator=g, dtype=torch.float64)
    for kind in ("linear", "relu"):
        got = Mo.deltaformer_u(v, k, beta, kind, w)
        u = torch.zeros_like(v)
        for t in range(7):
            s = (k[..., :t, :] * w[..., t:t + 1, :]).sum(-1)                 # κ1 argument k_i · w_t
            a = s if kind == "linear" else s.clamp_min(0)
            u[..., t, :] = v[..., t, :] - beta[..., t, None] * (a[..., None] * u[..., :t, :]).sum(-2)
        assert torch.allclose(got, u, atol=1e-12)
        assert torch.equal(Mo.deltaformer_u(v, k, beta, kind, k), Mo.deltaformer_u(v, k, beta, kind))


def test_write_query_is_a_deltaformer_option_and_trains(tmp_path):
    pr = Tr.resolve_protocol("dag_reachability", {"deltaformer_write": "query"}, "deltaformer-round2")
    net = Tr.build_model("dag_reachability", "deltaformer-round2", pr)
    assert net.layers[0].wq is not None
    assert Tr.build_model("dag_reachability", "deltaformer-round2").layers[0].wq is None
    with pytest.raises(ValueError, match="protocol deltaformer_write: applies to the DeltaFormers"):
        Tr.resolve_protocol("dag_reachability", {"deltaformer_write": "query"}, "transformer-1")
    Tr.train("dag_reachability", "deltaformer-linear", steps=2, batch_size=4, device="cpu", out=tmp_path,
             progress=False, protocol={"deltaformer_write": "query"})
    rec = json.loads((tmp_path / "dag_reachability" / "deltaformer-linear__deltaformer_write-query_s0.json")
                     .read_text())
    assert rec["protocol"]["deltaformer_write"] == "query"


@pytest.mark.parametrize("model", ["transformer-2", "deltaformer-relu"])
@pytest.mark.parametrize("heads", [1, 8])
def test_head_layout_is_an_option_every_model_takes(tmp_path, model, heads):
    pr = Tr.resolve_protocol("dag_reachability", {"n_heads": str(heads)}, model)
    net = Tr.build_model("dag_reachability", model, pr)
    assert {(a.H, a.dh) for a in net.layers} == {(heads, 128 // heads)}
    assert {(a.H, a.dh) for a in Tr.build_model("dag_reachability", model).layers} == {(4, 32)}
    Tr.train("dag_reachability", model, steps=2, batch_size=4, device="cpu", out=tmp_path, progress=False,
             protocol={"n_heads": heads})
    rec = json.loads((tmp_path / "dag_reachability" / f"{model}__n_heads-{heads}_s0.json").read_text())
    assert rec["protocol"]["n_heads"] == heads


@pytest.mark.parametrize("flags, needle", [(["--protocol", "n_heads=3"], "--protocol n_heads=3"),
                                           (["--protocol", "d_model=12", "--protocol", "n_heads=8"],
                                            "n_heads: 8 heads do not divide d_model = 12")])
def test_cli_rejects_a_head_layout_that_does_not_fit(tmp_path, capsys, flags, needle):
    rc = main(["gpu", "train", "dag_reachability", "--model", "transformer-1", "--device", "cpu", "--steps", "1",
               "--out", str(tmp_path / "runs"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0]
    assert not (tmp_path / "runs").exists()


def test_a_negative_beta_lets_a_non_negative_kernel_add_the_parents_u():
    """A chain of three edges whose write query matches the previous key exactly (κ1 = 1 for ReLU): with
    β = −1 each u is its own value plus the previous u (the path so far); with β = +1 the previous u is
    subtracted, so the signs alternate along the path."""
    from assocmem.gpu.tasks import models as Mo

    e = torch.eye(4, dtype=torch.float64)
    k = e[:3][None, None]                                        # keys e0, e1, e2
    w = torch.stack([e[3], e[0], e[1]])[None, None]             # w_t = k_{t-1}: κ1(k_{t-1}, w_t) = 1
    v = torch.eye(3, dtype=torch.float64)[None, None]
    for sign, want in ((-1.0, [[1, 0, 0], [1, 1, 0], [1, 1, 1]]), (1.0, [[1, 0, 0], [-1, 1, 0], [1, -1, 1]])):
        beta = torch.full((1, 1, 3), sign, dtype=torch.float64)
        got = Mo.deltaformer_u(v, k, beta, "relu", w)[0, 0]
        assert torch.equal(got, torch.tensor(want, dtype=torch.float64))


@pytest.mark.parametrize("beta, lo, hi", [("positive", 0.0, 2.0), ("signed", -2.0, 2.0)])
def test_write_strength_range_is_a_deltaformer_option(tmp_path, monkeypatch, beta, lo, hi):
    from assocmem.gpu.tasks import models as Mo

    pr = Tr.resolve_protocol("dag_reachability", {"deltaformer_beta": beta}, "deltaformer-relu")
    net = Tr.build_model("dag_reachability", "deltaformer-relu", pr)
    att = net.layers[0]
    seen, real = [], Mo.deltaformer_u
    monkeypatch.setattr(Mo, "deltaformer_u", lambda v, k, b, *a: seen.append(b) or real(v, k, b, *a))
    with torch.no_grad():                                    # heads driven to both ends of β's range
        att.beta.weight.zero_()
        att.beta.bias.copy_(torch.tensor([-40.0, -1.0, 1.0, 40.0]))
        att(torch.randn(2, 5, 128, generator=torch.Generator().manual_seed(0)))
    got = seen[0][0, :, 0]
    assert float(got[0]) == pytest.approx(lo, abs=1e-6) and float(got[-1]) == pytest.approx(hi, abs=1e-6)
    assert (float(got[1]) < 0) == (beta == "signed") and float(got[2]) > 0
    monkeypatch.setattr(Mo, "deltaformer_u", real)
    assert att.signed_beta == (beta == "signed")
    assert float(got.min()) == pytest.approx(lo, abs=1e-6) and float(got.max()) == pytest.approx(hi, abs=1e-6)
    with pytest.raises(ValueError, match="protocol deltaformer_beta: applies to the DeltaFormers"):
        Tr.resolve_protocol("dag_reachability", {"deltaformer_beta": beta if beta != "positive" else "signed"},
                            "transformer-2")
    Tr.train("dag_reachability", "deltaformer-relu", steps=2, batch_size=4, device="cpu", out=tmp_path,
             progress=False, protocol={"deltaformer_beta": beta})
    tag = "" if beta == "positive" else "__deltaformer_beta-signed"
    rec = json.loads((tmp_path / "dag_reachability" / f"deltaformer-relu{tag}_s0.json").read_text())
    assert rec["protocol"]["deltaformer_beta"] == beta and math.isfinite(rec["curve"][-1]["loss"])


def test_cli_says_when_a_run_is_not_evaluated_in_full_and_how_to_evaluate_its_final_checkpoint(tmp_path, capsys):
    """On a CPU `--eval auto` is the quick grid, which the claims skip: the run says so in one line, and the command
    it names evaluates the final checkpoint in full without training further (the curve is unchanged)."""
    argv = ["gpu", "train", "dag_reachability", "--model", "transformer-1", "--device", "cpu", "--steps", "25",
            "--batch-size", "4", "--ckpt-every", "25", "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("note: quick evaluation (--eval auto on a CPU); `assocmem verify` reads only full "
                              "evaluations: the same command with --resume --force --eval full"), err
    path = tmp_path / "dag_reachability" / "transformer-1_s0.json"
    quick = json.loads(path.read_text())
    assert main(argv + ["--resume", "--force", "--eval", "full"]) == 0
    assert "note:" not in capsys.readouterr().err
    full = json.loads(path.read_text())
    assert (quick["eval_mode"], full["eval_mode"]) == ("quick", "full") and full["curve"] == quick["curve"]
    assert full["provenance"]["segments"][-1]["steps"] == [25, 25]
