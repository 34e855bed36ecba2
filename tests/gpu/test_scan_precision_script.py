"""benchmarks/cpu_scan_precision.py: a launch configuration measured beside the default chunk op."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_scan_precision.py"


def test_a_chunk_config_is_measured_beside_the_default(tmp_path):
    """``--chunk-config``: one more op, named by the fields that differ from the defaults, in every
    regime, forward and gradients, with an fp32-level error on the benchmark's inputs."""
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--T", "32", "--grad-T", "16", "--D", "16",
                        "--chunk-config", "BV=16,mean_warps=2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(out.read_text())
    label = "chunk_C16 BV=16,mean_warps=2"
    for part in ("forward", "gradients"):
        assert res[part] and all(label in ops and "chunk_C16" in ops for ops in res[part].values())
    bench = [v for k, v in res["forward"].items() if k.endswith("bench inputs")][0]
    assert bench[label]["o"] < 1e-5
    bad = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "q.json"), "--chunk-config", "BV=7"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--chunk-config" in bad.stderr and not (tmp_path / "q.json").exists()
