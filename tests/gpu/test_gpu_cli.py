"""``assocmem gpu bench`` on CPU (Triton interpreter, the 'tiny' shape)."""
import json

import pytest

from assocmem.cli import main

pytestmark = pytest.mark.gpu


def test_gpu_help_lists_bench(capsys):
    assert main(["gpu", "--help"]) == 0
    assert "bench" in capsys.readouterr().out


def test_gpu_without_subcommand_is_usage_error(capsys):
    assert main(["gpu"]) == 2


def test_bench_rejects_unknown_shape(capsys):
    assert main(["gpu", "bench", "--shapes", "S9"]) == 2
    err = capsys.readouterr().err
    assert "--shapes" in err and "S9" in err and "Traceback" not in err


def test_bench_tiny_on_cpu_interpreter(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)
    assert main(["gpu", "bench", "--shapes", "tiny"]) == 0
    out = tmp_path / "runs" / "gpu_bench.json"             # the JSON is written by default
    res = json.loads(out.read_text())
    chk = res["shapes"]["tiny"]["check"]
    assert chk["nan_free"] and chk["grad_nan_free"]
    assert chk["fwd_o"] < 1e-5 and chk["grad_k"] < 1e-4
    import torch

    if torch.cuda.is_available():
        return
    assert res["provenance"]["device"].startswith("cpu")
    # the interpreter's run times are not kernel timings: none reported
    assert "times_default" not in res["shapes"]["tiny"] and "no timings" in res["shapes"]["tiny"]["times"]
    text = capsys.readouterr().out
    assert "| tiny | — | — |" in text and "no timings" in text and "runs/gpu_bench.json" in text
