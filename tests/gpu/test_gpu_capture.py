"""CUDA graph capture: nothing in ``chunk_bl``'s forward may synchronise with the host while a stream
captures.  The kernel choice (``_cov_kernel``) and the input validation are the two places that read
data on the host; the CPU tests here drive them with the capture flag set, the CUDA test captures and
replays a forward and compares it with the eager call."""
import types

import pytest
import torch

from assocmem.gpu import chunk as ch
from assocmem.gpu import _launch


def _fake_kernels():
    return types.SimpleNamespace(chunk_cov_fwd_mm_kernel="matmul", chunk_cov_fwd_kernel="rows")


def _refuse(*a, **k):
    raise AssertionError("_decays_safe synchronises with the host: it must not run during a capture")


@pytest.mark.parametrize("D,C", [(16, 16), (64, 16), (64, 32), (32, 32)])
def test_auto_takes_the_row_kernel_for_decays_during_a_capture(monkeypatch, D, C):
    monkeypatch.setattr(ch, "capturing", lambda t: True)
    monkeypatch.setattr(ch, "_decays_safe", _refuse)
    a = torch.full((1, 2 * C, 2, D), 0.9)
    kern, warps = ch._cov_kernel(_fake_kernels(), ch.ChunkConfig(), a, C, D)
    assert kern == "rows" and warps == (4 if D <= 32 else 8)


@pytest.mark.parametrize("D,C", [(16, 16), (64, 32)])
def test_without_decays_or_when_named_the_quotient_kernel_is_captured(monkeypatch, D, C):
    monkeypatch.setattr(ch, "capturing", lambda t: True)
    monkeypatch.setattr(ch, "_decays_safe", _refuse)
    assert ch._cov_kernel(_fake_kernels(), ch.ChunkConfig(), None, C, D)[0] == "matmul"
    a = torch.full((1, 2 * C, 2, D), 0.9)
    assert ch._cov_kernel(_fake_kernels(), ch.ChunkConfig(cov_kernel="matmul"), a, C, D)[0] == "matmul"


@pytest.mark.parametrize("safe", [True, False])
def test_outside_a_capture_auto_still_reads_the_decays(monkeypatch, safe):
    monkeypatch.setattr(ch, "capturing", lambda t: False)
    seen = []
    monkeypatch.setattr(ch, "_decays_safe", lambda a, C, K=None: seen.append(C) or safe)
    a = torch.full((1, 32, 2, 64), 0.9)
    kern, _ = ch._cov_kernel(_fake_kernels(), ch.ChunkConfig(), a, 16, 64)
    assert seen == [16] and kern == ("matmul" if safe else "rows")


def test_capturing_is_false_off_cuda():
    assert not _launch.capturing(torch.zeros(3)) and not _launch.capturing(None)


def test_validation_during_a_capture_is_refused_by_name(monkeypatch, make_inputs):
    monkeypatch.setattr(_launch, "capturing", lambda t: True)
    x = make_inputs(1, 8, 2, 4, 4, alpha=True, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"chunk_bl: validate=True .* CUDA graph capture .* validate=False"):
        ch.chunk_bl(**x, validate=True)
    o, _ = ch.chunk_bl(**x, validate=False)                     # off the capture's rules: runs
    assert torch.isfinite(o).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("D,alpha", [(64, True), (64, False), (128, True)])
def test_forward_captures_and_replays_as_the_eager_call(make_inputs, D, alpha):
    x = {k: (v.cuda() if torch.is_tensor(v) else v)
         for k, v in make_inputs(2, 256, 4, D, 64, alpha=alpha, dtype=torch.float32).items()}
    cfg = ch.ChunkConfig(cov_kernel="rows") if alpha and D <= 64 else None     # what auto takes in a capture
    eager = ch.chunk_bl(**x, validate=False, config=cfg)[0]
    ch.chunk_bl(**x, validate=False)                                              # compile outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ch.chunk_bl(**x, validate=False)[0]
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-6)
