"""benchmarks/cpu_bwd_rows_precision.py: the chunked backward's fp32 gradient error at D = 128 with the covariance
passes' matrices whole and in row blocks, through the interpreter, as a user runs it (a subprocess: the script
sets TRITON_INTERPRET for its own process)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_bwd_rows_precision.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, flag", [(["--T", "0"], "--T 0"), (["--h-rows", "0,x"], "--h-rows"),
                                        (["--h-rows", "24"], "--h-rows 24")])
def test_bad_arguments_name_the_flag_exit_2_and_write_nothing(tmp_path, args, flag):
    out = tmp_path / "p.json"
    r = _run(*args, "--out", str(out))
    assert r.returncode == 2 and flag in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()


def test_both_forms_give_fp32_level_gradients_in_every_regime(tmp_path):
    """A short sequence (two chunks and a partial one): every gradient of both forms and of the token-by-token
    backward within 1e-4 of float64 (measured about 1e-6), each regime and form reported with its provenance."""
    out = tmp_path / "p.json"
    r = _run("--T", "37", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["shape"] == {"B": 1, "T": 37, "H": 1, "D": 128, "m": 16} and got["provenance"]["interpreter"]
    assert set(got["regimes"]) == {"l2=0, r2=1e-3, no decay", "l2=0, r2=1e-4, weak decay", "bench inputs"}
    for reg, forms in got["regimes"].items():
        assert set(forms) == {"chunked, h_rows 0", "chunked, h_rows 32", "token by token"}, reg
        for form, err in forms.items():
            assert {"q", "k", "v", "l2", "r2"} <= set(err) and err["max"] == max(v for k, v in err.items() if k != "max")
            assert 0 < err["max"] < 1e-4, (reg, form, err)
