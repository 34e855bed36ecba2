"""The command line: verify, collision; bad input gives one line and exit 2."""
import json
import subprocess
import sys

import pytest

from assocmem import registry
from assocmem.cli import main


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "assocmem", *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_collision_json_schema():
    rc, out, err = run_cli("collision", "--json", "--variants", "dense,reset")
    assert rc == 0, err
    obj = json.loads(out)
    assert set(obj) >= {"params", "variants"}
    assert obj["params"]["rho"] == 0.92
    for v in ("dense", "reset"):
        assert len(obj["variants"][v]["p_ab"]) == 112 and len(obj["variants"][v]["gain"]) == 112
    assert round(obj["variants"]["dense"]["p_ab"][111], 5) == 0.72309


def test_collision_human_output_shows_published_inputs(capsys):
    assert main(["collision"]) == 0
    out = capsys.readouterr().out
    assert "0.72309 [0.72309]" in out and "published" in out


def test_collision_other_setting_has_no_published_column(capsys):
    assert main(["collision", "--rho", "0.5", "--variants", "iso", "--iso-c", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "[" not in out.split("\n", 2)[2]


@pytest.mark.parametrize("args, word", [
    (["collision", "--r2", "0"], "--r2"), (["collision", "--rho", "2"], "--rho"),
    (["collision", "--l2", "-1"], "--l2"), (["collision", "--variants", "iso"], "--iso-c"),
    (["collision", "--variants", "nope"], "--variants"), (["collision", "--n-a", "-3"], "--n-a"),
    (["collision", "--p0", "nan"], "--p0"), (["verify", "--only", "zz.*"], "--only"),
])
def test_bad_input_one_line_exit_2(args, word):
    rc, out, err = run_cli(*args)
    assert rc == 2
    lines = [l for l in err.strip().splitlines() if l]
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in err


def test_verify_json_and_report(tmp_path):
    rep = tmp_path / "r.md"
    rc, out, err = run_cli("verify", "--json", "--only", "bl.collision_table,bl.iso_ablation", "--report", str(rep))
    assert rc == 0, err
    obj = json.loads(out)
    ids = [c["id"] for c in obj["claims"]]
    assert ids == ["bl.collision_table", "bl.iso_ablation"]
    for c in obj["claims"]:
        assert {"id", "status", "layers", "source", "published", "computed", "detail"} <= set(c)
        assert c["status"] == "confirmed" and "numpy" in c["layers"]
    assert "bl.collision_table" in rep.read_text()


def test_verify_exits_nonzero_when_a_check_fails(monkeypatch, capsys):
    reg = registry.load()
    claim = reg["bl.iso_ablation"]

    def broken(ev):
        ev.close("numpy", "deliberately wrong", 1.0, 2.0, abs_tol=1e-3)

    monkeypatch.setattr(claim, "check", broken)
    assert main(["verify", "--only", "bl.iso_ablation", "--no-progress"]) == 1
    assert "failed" in capsys.readouterr().out
