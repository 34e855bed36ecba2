"""benchmarks/kernel_resources.py: the chunked forward's kernels compiled offline for sm_90a (no GPU),
their registers, spills and shared memory read from ptxas, and the programs that fit an SM."""
import importlib.util
import os
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
pytestmark = pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas is missing")


def _module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_resources.py"
    spec = importlib.util.spec_from_file_location("kernel_resources", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_small_covariance_kernel_compiles_and_reports(monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kr = _module()
    from assocmem.gpu import _chunk_kernels as K

    r = kr.resources(K.chunk_cov_fwd_mm_kernel, dict(H=2, G=1, D=16, BD=16, C=16, HAS_ALPHA=True, PREC="ieee"), 4)
    assert 16 <= r["registers"] <= 255 and r["warps"] == 4 and r["shared_bytes"] >= 0
    assert r["stack_bytes"] >= 0
    # ptxas -v reports the spill traffic; a ptxas older than Triton's PTX leaves cuobjdump, which does not
    assert (r["spill_store_bytes"] >= 0) if r["tool"] == "ptxas -v" else r["spill_store_bytes"] is None
    assert r["local_bytes_per_program"] == r["stack_bytes"] * 128
    # the residency bound: registers (allocated per warp in units of 256), shared memory, warps, blocks
    per_warp = -(-r["registers"] * 32 // 256) * 256
    by_regs = 65536 // (per_warp * 4)
    assert r["programs_per_sm"] <= min(by_regs, 16, 32)
    assert r["programs_per_sm"] >= 1


def test_the_resource_limit_is_named():
    kr = _module()
    assert kr.SM["regs"] == 65536 and kr.SHAPES["S1"] == (8, 2048, 16, 64, 64)
    assert os.path.basename(kr.__file__) == "kernel_resources.py"


def test_the_mean_kernel_compiles_at_a_chosen_value_block(monkeypatch):
    """``mean_resources``: the forward's mean kernel at a chosen ``BV`` and warps, with the same report (the
    residency that decides whether many chains, the two-level form's segments, share an SM)."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kr = _module()
    r = kr.mean_resources(16, 2, D=16, m=16)
    assert r["warps"] == 2 and 16 <= r["registers"] <= 255 and r["programs_per_sm"] >= 1
    per_warp = -(-r["registers"] * 32 // 256) * 256
    assert r["programs_per_sm"] <= 65536 // (per_warp * 2)
