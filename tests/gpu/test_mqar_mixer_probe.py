"""scripts/mqar_mixer_probe.py: the fresh-data MQAR probe (issue 16) runs, records, never overwrites."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mqar_mixer_probe.py"


def _run(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_probe_trains_on_fresh_batches_and_reports_accuracy_per_pair_count(tmp_path):
    out = tmp_path / "probe.json"
    p = _run("bl", "bl:decay", "--config", "16,2,2", "--vocab", "16", "--d-model", "16", "--batch-size", "4",
             "--steps", "3", "--log-every", "1", "--n-test", "8", "--threads", "1", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    assert [r["spec"] for r in d["runs"]] == ["bl", "bl:decay"]
    for r in d["runs"]:
        assert r["steps_done"] == 3 and [c["step"] for c in r["curve"]] == [1, 2, 3]
        (row,) = r["test"]
        assert row["n_pairs"] == 2 and 0.0 <= row["acc"] <= 1.0 and row["chance_one_of_values"] == 0.5
    assert d["settings"]["config"] == "16,2,2" and "commit" in d
    r = d["runs"][0]                            # the generator's and optimiser's choices are recorded
    assert r["train_configs"][0]["block_size"] == 2 and r["train_configs"][0]["filler"] == "pad"
    assert r["optimizer"]["betas"] == [0.9, 0.95] and r["optimizer"]["weight_decay"] == 0.1
    assert "bl P2U0:" in p.stdout


def test_probe_refuses_to_overwrite_and_names_the_flag(tmp_path):
    out = tmp_path / "probe.json"
    out.write_text("{}")
    p = _run("bl", "--steps", "1", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 2 and "--out" in p.stderr and "never overwrites" in p.stderr
    assert out.read_text() == "{}"


def test_probe_names_a_bad_spec(tmp_path):
    out = tmp_path / "probe.json"
    p = _run("bl:fast", "--config", "16,2,2", "--vocab", "16", "--d-model", "16", "--batch-size", "2", "--steps", "1",
             "--out", str(out), cwd=tmp_path)
    assert p.returncode == 2 and "spec" in p.stderr and "bl:fast" in p.stderr and not out.exists()
    assert "Traceback" not in p.stderr


def test_probe_steps_profile_reports_phases_and_ops(tmp_path, capsys):
    """``scripts/probe_steps.py --profile K``: per spec, the three phases' mean wall times and the
    operators with the most time per step, written to the JSON; a negative K is refused in one line."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "probe_steps.py"
    spec = importlib.util.spec_from_file_location("probe_steps", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "p.json"
    rc = mod.main(["--device", "cpu", "--steps", "1", "--warmup", "1", "--batch-size", "2", "--profile", "1",
                   "--out", str(out), "mqar:bl:variant=block,pool_size=8"])
    assert rc == 0
    row = json.loads(out.read_text())["rows"][0]
    prof = row["profile"]
    assert prof["steps"] == 1 and set(prof["phases"]) == {"forward_s", "backward_s", "optimizer_s"}
    assert all(v > 0 for v in prof["phases"].values())
    assert prof["top_ops"] and all(op["self_ms_per_step"] >= 0 and op["name"] for op in prof["top_ops"])
    assert prof["top_ops"][0]["self_ms_per_step"] >= prof["top_ops"][-1]["self_ms_per_step"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        mod.main(["--profile", "-1", "mqar:bl"])
    assert e.value.code == 2 and "--profile" in capsys.readouterr().err


def test_mamba2_chunk_changes_speed_not_the_model():
    """--mamba2-chunk sets the SSD scan's chunk of the probe's Mamba2 (fla's torch scan on a CPU is
    quadratic in it): the same weights give the same logits at chunk 8 and at the default 64."""
    pytest.importorskip("fla")
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("mqar_mixer_probe", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    a = mod.build("mamba2", 20, 16, 16, "zoology")
    b = mod.build("mamba2", 20, 16, 16, "zoology", mamba2_chunk=8)
    b.load_state_dict(a.state_dict())
    assert a.mixers[0].layer.chunk_size == 64 and b.mixers[0].layer.chunk_size == 8
    tok = torch.randint(0, 17, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(b(tok), a(tok), rtol=1e-4, atol=1e-5)


def test_probe_refuses_a_negative_mamba2_chunk(tmp_path):
    out = tmp_path / "probe.json"
    p = _run("mamba2", "--mamba2-chunk", "-1", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 2 and "--mamba2-chunk" in p.stderr and not out.exists()


def test_probe_records_the_initialisation_and_refuses_an_unknown_one(tmp_path):
    """--init is the init protocol option: recorded in the settings, with the commit the probe ran at
    (the checkout's when ASSOCMEM_COMMIT is unset); an unknown value exits 2 naming the flag, no file."""
    out = tmp_path / "probe.json"
    p = _run("bl", "--init", "zoology", "--config", "16,2,2", "--vocab", "16", "--d-model", "16", "--batch-size", "2",
             "--steps", "1", "--n-test", "4", "--threads", "1", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    assert d["settings"]["init"] == "zoology" and d["commit"] != "unknown"
    bad = tmp_path / "bad.json"
    p = _run("bl", "--init", "xavier", "--steps", "1", "--out", str(bad), cwd=tmp_path)
    assert p.returncode == 2 and "--init" in p.stderr and "xavier" in p.stderr and not bad.exists()
    assert "Traceback" not in p.stderr
