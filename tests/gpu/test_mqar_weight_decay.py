"""The ``wd_exempt`` protocol option (MQAR) and what a run records of the fla mixers' decay: the
option's checks, the parameter groups it builds, the decay-only factor against torch's own AdamW,
``mixer_dynamics`` against values set by hand, a CPU run's record, and ``scripts/mqar_decay_drift.py``
on checkpoints made by hand (decayed as predicted, or left at the start) and on bad arguments."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu.tasks import mqar_models as Mm, train as T  # noqa: E402

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def _fla():
    pytest.importorskip("fla.layers", reason="flash-linear-attention (gpu extra) is not installed")


def test_the_option_is_checked_and_named_in_the_tag():
    pr = T.resolve_protocol("mqar", {"variant": "update", "wd_exempt": "marked"}, "mamba2")
    assert T.protocol_tag("mqar", pr) == "variant-update__wd_exempt-marked"
    assert T.protocol_tag("mqar", T.resolve_protocol("mqar", {"variant": "update"}, "mamba2")) == "variant-update"
    with pytest.raises(ValueError, match="protocol wd_exempt: applies to gdn, gdn-conv and mamba2.*not 'bl'"):
        T.resolve_protocol("mqar", {"wd_exempt": "marked"}, "bl")
    with pytest.raises(ValueError, match="wd_exempt"):
        T.resolve_protocol("mqar", {"wd_exempt": "all"}, "mamba2")


@pytest.mark.parametrize("model, marked", [("mamba2", ("A_log", "dt_bias", "D")), ("gdn", ("A_log", "dt_bias")),
                                           ("gdn-conv", ("A_log", "dt_bias"))])
def test_marked_puts_exactly_the_marked_parameters_at_zero_decay(model, marked):
    _fla()
    pr = T.resolve_protocol("mqar", {"variant": "update", "wd_exempt": "marked", "d_model": 32}, model)
    net = T.build_model("mqar", model, pr)
    groups, skip = T.optimizer_groups(net, "mqar", pr)
    assert sorted(skip) == sorted(f"mixers.{i}.layer.{n}" for i in range(2) for n in marked)
    assert len(groups) == 2 and groups[1]["weight_decay"] == 0.0 and "weight_decay" not in groups[0]
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in net.parameters()) and len(set(ids)) == len(ids)
    # the default: one group, every parameter decayed
    pr0 = T.resolve_protocol("mqar", {"variant": "update", "d_model": 32}, model)
    groups0, skip0 = T.optimizer_groups(net, "mqar", pr0)
    assert skip0 == [] and len(groups0) == 1 and len(groups0[0]["params"]) == len(list(net.parameters()))


@pytest.mark.parametrize("step, steps, lr, warmup, wd", [(0, 10, 1e-3, 2, 0.1), (7, 10, 3e-3, 2, 0.1),
                                                         (40, 40, 1e-2, 5, 0.5), (25, 30, 0.1, 0, 0.2)])
def test_the_decay_only_factor_is_torch_adamw_on_a_zero_gradient(step, steps, lr, warmup, wd):
    p = torch.nn.Parameter(torch.tensor([2.0, -3.0], dtype=torch.float64))
    opt = torch.optim.AdamW([p], lr=lr, weight_decay=wd, betas=(0.9, 0.95))
    for t in range(step):
        opt.param_groups[0]["lr"] = lr * T.lr_factor(t, steps, warmup)
        p.grad = torch.zeros_like(p)
        opt.step()
    f = T.decay_only_factor(step, steps, lr, warmup, wd)
    torch.testing.assert_close(p.detach(), torch.tensor([2.0, -3.0], dtype=torch.float64) * f,
                               rtol=1e-12, atol=0)
    assert (step == 0) == (f == 1.0)


def test_mixer_dynamics_reads_a_and_dt_as_the_layers_use_them():
    _fla()
    net = T.build_model("mqar", "mamba2", T.resolve_protocol("mqar", {"d_model": 32}, "mamba2"))
    L = net.mixers[1].layer
    with torch.no_grad():
        L.A_log.copy_(torch.log(torch.arange(1.0, L.num_heads + 1)))
        L.dt_bias.fill_(math.log(math.e - 1.0))          # softplus = 1
    row = Mm.mixer_dynamics(net)[1]
    assert row["layer"] == 1
    assert row["A"] == pytest.approx([-(h + 1.0) for h in range(L.num_heads)])
    assert row["dt"] == pytest.approx([1.0] * L.num_heads)
    assert row["retention"] == pytest.approx([math.exp(-(h + 1.0)) for h in range(L.num_heads)])
    bl = T.build_model("mqar", "bl", T.resolve_protocol("mqar", {"d_model": 32}, "bl"))
    assert Mm.mixer_dynamics(bl) is None


def test_a_cpu_run_records_the_exempt_parameters_and_the_dynamics(tmp_path):
    _fla()
    pr = {"variant": "update", "pool_size": 8, "d_model": 16, "wd_exempt": "marked", "lr": 0.05}
    rec = T.train("mqar", "mamba2", steps=2, batch_size=2, device="cpu", out=tmp_path, progress=False,
                  eval_mode="none", protocol=pr)
    assert rec["protocol"]["wd_exempt"] == "marked"
    assert sorted(rec["optimizer"]["no_weight_decay"]) == sorted(
        f"mixers.{i}.layer.{n}" for i in range(2) for n in ("A_log", "dt_bias", "D"))
    dyn = rec["mixer_dynamics"]
    assert [r["layer"] for r in dyn["init"]] == [0, 1] == [r["layer"] for r in dyn["final"]]
    assert dyn["init"] != dyn["final"]                  # two steps at lr 0.05 move the biases
    name = "mamba2__variant-update__d_model-16__lr-0.05__pool_size-8__wd_exempt-marked_s0.json"
    saved = json.loads((tmp_path / "mqar" / name).read_text())
    assert saved["mixer_dynamics"] == dyn
    bl = T.train("mqar", "bl", steps=1, batch_size=2, device="cpu", out=tmp_path, progress=False,
                 eval_mode="none", protocol={"variant": "update", "pool_size": 8, "d_model": 16})
    assert "mixer_dynamics" not in bl and "no_weight_decay" not in bl["optimizer"]


def _script(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "mqar_decay_drift.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def _script_main(*args) -> int:
    """The script's ``main`` in this process (the same code as :func:`_script` without a Python and torch
    start-up per call; the refusals below run it as a user does)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mqar_decay_drift", ROOT / "scripts" / "mqar_decay_drift.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.main([str(a) for a in args])


@pytest.mark.parametrize("exempt", ["none", "marked"])
def test_the_drift_script_separates_decay_from_gradient(tmp_path, exempt):
    """Checkpoints made by hand from the rebuilt initial values: scaled by the decay-only factor (the
    share of the drift the decay accounts for is 1) and left as they were (0); with ``wd_exempt=marked``
    the decay predicts no drift, so the share is undefined (None) and the prediction is the start."""
    _fla()
    over = {"variant": "update", "d_model": 16, "lr": 0.01, "wd_exempt": exempt}
    pr = T.resolve_protocol("mqar", over, "mamba2")
    torch.manual_seed(3)
    net = T.build_model("mqar", "mamba2", pr)
    steps = T.default_steps("mqar", "mamba2", pr)
    step = 5000
    f = T.decay_only_factor(step, steps, 0.01, pr["warmup_steps"], 0.1)
    assert f < 0.9
    sd = {k: v.clone() for k, v in net.state_dict().items()}
    decayed = {k: (v * f if k.endswith(("A_log", "dt_bias")) and exempt == "none" else v) for k, v in sd.items()}
    for name, state, want in (("decayed", decayed, 1.0), ("still", sd, 0.0)):
        ck = tmp_path / f"{name}.ckpt.pt"
        torch.save({"model": state, "step": step}, ck)
        out = tmp_path / f"{name}.json"
        assert _script_main(ck, "--model", "mamba2", "--seed", 3, "--out", out,
                            *[a for k, v in over.items() for a in ("--protocol", f"{k}={v}")]) == 0
        rec = json.loads(out.read_text())
        assert rec["decay_only_factor"] == pytest.approx(f)
        shares = rec["drift_share_of_decay_only"]
        assert len(shares) == 4
        for v in shares.values():
            if exempt == "marked":
                assert v is None
            else:
                assert v == pytest.approx(want, abs=1e-9)
        if exempt == "marked":
            assert rec["decay_only"] == rec["init"]
        else:
            assert rec["decay_only"][0]["A"] != pytest.approx(rec["init"][0]["A"])


def test_the_drift_script_refuses_an_existing_output_and_a_bl_model(tmp_path):
    out = tmp_path / "x.json"
    out.write_text("{}")
    ck = tmp_path / "c.pt"
    ck.write_bytes(b"")
    r = _script(ck, "--model", "mamba2", "--out", out)
    assert r.returncode == 2 and "--out" in r.stderr and "not overwritten" in r.stderr
    assert out.read_text() == "{}"
    r = _script(ck, "--model", "bl", "--out", tmp_path / "y.json")
    assert r.returncode == 2 and "--model" in r.stderr and not (tmp_path / "y.json").exists()
