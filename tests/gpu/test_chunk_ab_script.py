"""benchmarks/chunk_ab.py: the chunked forward of whichever assocmem is importable, timed alike."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "chunk_ab.py"
spec = importlib.util.spec_from_file_location("chunk_ab", SCRIPT)
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)


@pytest.mark.parametrize("text, want", [
    ("", {}), (None, {}), ("segments=1", {"segments": 1}),
    ("BV=64,mean_precision=tf32x3,cov_warps=8", {"BV": 64, "mean_precision": "tf32x3", "cov_warps": 8}),
    ("x=0.5,flag=true,off=false", {"x": 0.5, "flag": True, "off": False}),
])
def test_config_overrides_are_read_as_typed_values(text, want):
    assert ab.parse_config(text) == want


def test_a_config_item_without_a_value_is_refused_by_name():
    with pytest.raises(ValueError, match="'BV' is not key=value"):
        ab.parse_config("BV")


@pytest.mark.parametrize("seed", [0, 2])
def test_its_inputs_are_the_benchmark_runners(seed):
    """The same draws as ``assocmem gpu bench``'s, so its times compare with the committed JSONs."""
    from assocmem.gpu.bench import inputs

    shape = (2, 8, 3, 16, 8)
    mine, bench = ab.inputs(torch, shape, "cpu", seed), inputs(torch, shape, "cpu", seed)
    assert mine.keys() == bench.keys()
    for n in mine:
        assert torch.equal(mine[n], bench[n]), n


@pytest.mark.parametrize("args, flag", [(["--reps", "0"], "--reps"), (["--config", "BV"], "--config"),
                                        (["--shape", "S9"], "--shape")])
def test_bad_flags_exit_2_naming_the_flag_and_write_nothing(tmp_path, args, flag):
    out = tmp_path / "ab.jsonl"
    r = subprocess.run([sys.executable, str(SCRIPT), "--tag", "t", "--out", str(out), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and flag in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is the CPU's")
def test_on_a_cpu_it_refuses_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "ab.jsonl"
    r = subprocess.run([sys.executable, str(SCRIPT), "--tag", "t", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "chunk_ab: needs a CUDA GPU (the interpreter's times mean nothing)"
    assert not out.exists()


def test_the_machine_state_is_read_from_nvidia_smi_or_left_empty(monkeypatch, tmp_path):
    """Driver and clocks beside the times where nvidia-smi answers; nothing (not an error) where it is missing."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '570.10, 1980 MHz, 1980 MHz, 3201 MHz, 700.00 W, 41'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    state = ab.gpu_state()
    assert state == {"driver_version": "570.10", "clocks.sm": "1980 MHz", "clocks.max.sm": "1980 MHz",
                     "clocks.mem": "3201 MHz", "power.limit": "700.00 W", "temperature.gpu": "41"}
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert ab.gpu_state() == {}


def test_dump_writes_each_specialisation_with_its_key_and_assembly(tmp_path):
    """``--dump``: one row per compiled specialisation (key, registers, spills, shared memory) and its PTX and
    TTGIR beside it, so that two commits' kernels can be compared as launched."""
    import json
    from types import SimpleNamespace

    def compiled(regs, ptx):
        return SimpleNamespace(n_regs=regs, n_spills=regs // 2, asm={"ptx": ptx, "ttgir": b"#ttg", "cubin": b"\0"},
                               metadata=SimpleNamespace(shared=65536, num_warps=8, num_stages=1))

    fns = {"cov": SimpleNamespace(device_caches={0: ({"k1": compiled(255, ".version 8.7"), "k2": compiled(128, "x")},
                                                     None, None, None)}),
           "helper": SimpleNamespace(device_caches={0: ({}, None, None, None)})}
    rows = ab.dump_kernels(tmp_path / "d", fns)
    assert [(r["kernel"], r["key"], r["n_regs"], r["n_spills"], r["shared"]) for r in rows] == \
        [("cov", "k1", 255, 127, 65536), ("cov", "k2", 128, 64, 65536)]
    assert (tmp_path / "d" / "cov.0.ptx").read_text() == ".version 8.7"
    assert (tmp_path / "d" / "cov.1.ttgir").read_text() == "#ttg"
    assert not list((tmp_path / "d").glob("*.cubin"))
    assert json.loads((tmp_path / "d" / "kernels.json").read_text()) == rows
