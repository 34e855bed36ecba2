"""Protocol options of the learned tasks (issue 14): resolution, naming, the CLI, and what
``queries_write`` changes in a model — query tokens read without writing by default."""
import json

import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from assocmem.cli import main  # noqa: E402
from assocmem.gpu.tasks import data as Dt, train as Tr  # noqa: E402

pytestmark = pytest.mark.gpu


def test_defaults_are_the_documented_ones():
    for task in ("collision_recall", "random_keys"):
        pr = Tr.resolve_protocol(task)
        assert pr["queries_write"] is False and pr["gates"] == "token" and pr["n_layers"] == 2 and pr["p0"] == 1.0
        assert Tr.protocol_tag(task, pr) == "" and Tr.run_name("bl", 0, Tr.protocol_tag(task, pr)) == "bl_s0"
    assert Tr.resolve_protocol("random_keys")["train_n"] == [16, 32, 48, 64]
    assert Tr.resolve_protocol("swap_tracking")["queries_write"] is True


@pytest.mark.parametrize("task,over,match", [
    ("collision_recall", {"nope": 1}, "no option 'nope'"),
    ("collision_recall", {"gates": "wide"}, "gates must be one of token, head"),
    ("collision_recall", {"p0": "nan"}, "p0 must be a finite number > 0"),
    ("collision_recall", {"p0": 0}, "p0 must be a finite number > 0"),
    ("collision_recall", {"n_layers": 9}, r"n_layers must lie in \[1, 8\]"),
    ("collision_recall", {"queries_write": "maybe"}, "queries_write must be true or false"),
    ("random_keys", {"train_n": "16,x"}, "train_n must be comma-separated integers"),
    ("random_keys", {"train_n": "4"}, r"train_n needs integers in \[8, 1024\]"),
    ("random_keys", {"opening_rounds": 1}, "no option 'opening_rounds'"),
    ("swap_tracking", {"queries_write": False}, "they must write"),
    ("swap_tracking", {"stress_keys": "orthogonal"}, "stress_keys must be one of"),
])
def test_bad_options_name_themselves(task, over, match):
    with pytest.raises(ValueError, match=match):
        Tr.resolve_protocol(task, over)


@settings(max_examples=40, deadline=None)
@given(qw=st.booleans(), gates=st.sampled_from(["token", "head"]), layers=st.integers(1, 3),
       p0=st.sampled_from([0.1, 1.0, 3.0]), rounds=st.integers(0, 2))
def test_tags_name_exactly_the_non_default_options(qw, gates, layers, p0, rounds):
    over = {"queries_write": qw, "gates": gates, "n_layers": layers, "p0": p0, "opening_rounds": rounds}
    pr = Tr.resolve_protocol("collision_recall", over)
    tag = Tr.protocol_tag("collision_recall", pr)
    named = {part.split("-", 1)[0] for part in tag.split("__") if part}
    defaults = Tr.resolve_protocol("collision_recall")
    assert named == {k for k in over if pr[k] != defaults[k]}
    # the tag of a saved result is recomputed from its protocol block
    assert Tr.result_tag("collision_recall", {"protocol": pr}) == tag
    assert Tr.result_tag("collision_recall", {}) is None


def _logits(model, batch, qw):
    with torch.no_grad():
        return Tr.forward(model, "collision_recall", batch, Tr.resolve_protocol("collision_recall",
                                                                                {"queries_write": qw}))[0]


@pytest.mark.parametrize("mixer", ["bl", "delta", "reset", "linear", "gla", "diag"])
def test_queries_read_without_writing(mixer):
    """With the default protocol a query's read-out does not depend on the queries before it (they do not
    write); with queries writing it does.  Checked by changing the address of the first query token."""
    torch.manual_seed(0)
    net = Tr.build_model("collision_recall", mixer).double().eval()
    if mixer == "gla":
        # GLA's non-writing tokens still decay the memory (by a gate of their own input): pin the
        # decay to 1 so that only the writes are compared
        for mix in net.mixers:
            torch.nn.init.zeros_(mix.gate.weight)
            torch.nn.init.constant_(mix.gate.bias, 60.0)
    b = Dt.collision_batch(2, n_f=1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    first_q = int(b.is_query[0].nonzero()[0])
    x2, k2 = b.x.clone(), b.keys.clone()
    k2[:, first_q] = torch.nn.functional.normalize(torch.randn(2, k2.shape[-1], dtype=torch.float64), dim=-1)
    x2[:, first_q, 1:1 + k2.shape[-1]] = k2[:, first_q]
    b2 = b._replace(x=x2, keys=k2)
    later = slice(first_q + 1, None)
    for qw, same in ((False, True), (True, False)):
        d = float((_logits(net, b, qw)[:, later] - _logits(net, b2, qw)[:, later]).abs().max())
        assert (d < 1e-10) == same, (mixer, qw, d)


def test_cli_bad_protocol_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    for args, flag in ((["--protocol", "gates=wide"], "--protocol gates=wide"),
                       (["--protocol", "nope=1"], "--protocol nope=1"),
                       (["--protocol", "gates"], "--protocol takes KEY=VALUE"),
                       (["--queries-write", "--protocol", "queries_write=false"], "--queries-write contradicts")):
        rc = main(["gpu", "train", "collision_recall", "--model", "bl", "--device", "cpu", "--steps", "1",
                   "--out", str(out), *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and flag in err[0] and "Traceback" not in err[0]
    rc = main(["gpu", "train", "swap_tracking", "--model", "transformer-1", "--device", "cpu", "--steps", "1",
               "--out", str(out), "--protocol", "queries_write=false"])
    assert rc == 2 and "must write" in capsys.readouterr().err
    assert not out.exists()


def test_cli_queries_write_run_records_its_protocol(tmp_path, capsys):
    out = tmp_path / "runs"
    rc = main(["gpu", "train", "random_keys", "--model", "reset", "--device", "cpu", "--steps", "1",
               "--batch-size", "2", "--eval", "none", "--out", str(out), "--queries-write",
               "--protocol", "gates=head"])
    assert rc == 0
    files = sorted(p.name for p in (out / "random_keys").glob("*.json"))
    assert files == ["reset__queries_write-true__gates-head_s0.json"]
    rec = json.loads((out / "random_keys" / files[0]).read_text())
    assert rec["protocol"]["queries_write"] is True and rec["protocol"]["gates"] == "head"
    assert rec["protocol"]["train_n"] == [16, 32, 48, 64]


# --- swap tracking: where the loss goes, and the position encoding (the Transformer-depth ablations)
@pytest.mark.parametrize("model", ["stress-round2-128", "curriculum-round2-nope", "direct-linear-rope"])
@pytest.mark.parametrize("over", [{"supervision": "last"}, {"pos": "nope"}])
def test_swap_plain_options_refuse_other_models(model, over):
    with pytest.raises(ValueError, match=f"protocol {next(iter(over))}: applies to the plain swap models"):
        Tr.resolve_protocol("swap_tracking", over, model)
    Tr.resolve_protocol("swap_tracking", over, "transformer-4")            # fine for a plain model


def test_last_supervision_labels_only_the_final_token():
    pr = Tr.resolve_protocol("swap_tracking", {"supervision": "last"})
    full = Tr.sample_train("swap_tracking", "transformer-1", 32, torch.Generator().manual_seed(5))
    last = Tr.sample_train("swap_tracking", "transformer-1", 32, torch.Generator().manual_seed(5), protocol=pr)
    assert torch.equal(last.tokens, full.tokens)                            # the same sequences
    assert (last.labels[:, :-1] == Dt.IGNORE).all()
    # the final label is still the element at position 0 after all swaps (a replay, not the code under test)
    for b in range(4):
        arr = list(range(5))
        pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
        for t in last.tokens[b].tolist():
            i, j = pairs[t]
            arr[i], arr[j] = arr[j], arr[i]
        assert int(last.labels[b, -1]) == arr[0] == int(full.labels[b, -1])


def test_nope_transformer_ignores_position_encoding_and_evaluates_where_the_loss_is(tmp_path):
    pr = Tr.resolve_protocol("swap_tracking", {"pos": "nope", "supervision": "last"}, "transformer-2")
    net = Tr.build_model("swap_tracking", "transformer-2", pr)
    assert all(layer.pos == "nope" for layer in net.layers)
    ev = Tr.evaluate(net, "swap_tracking", "transformer-2", {"n_seqs": 8}, "cpu", protocol=pr)
    assert ev["acc_by_position"][:-1] == [None] * 15 and ev["acc_by_position"][-1] == pytest.approx(ev["acc"])
