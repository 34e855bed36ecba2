"""``chunk_bl_segments`` (gpu/segments.py, issue 19's two-level prototype) through Triton's interpreter:
the same read-outs and final state as the float64 filter, for segment counts from one to eight, with and
without decays and initial states, and in the collapsing regime; the segment elements equal the numpy
two-level form's; bad arguments name themselves."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu.naive import naive_bl  # noqa: E402
from assocmem.gpu.segments import chunk_bl_segments  # noqa: E402

FP32 = 2e-5


@pytest.mark.parametrize("T,C,L", [(64, 16, 64), (64, 16, 32), (64, 16, 16), (128, 16, 16), (64, 32, 32)])
@pytest.mark.parametrize("decay,init", [(False, False), (True, True)])
def test_segments_equal_the_float64_filter(interpret, make_inputs, numpy_reference, relerr, T, C, L, decay, init):
    x = make_inputs(1, T, 2, 8, 8, alpha=decay, init=init, seed=T + C + L)
    o_np, M_np, P_np, _ = numpy_reference(x)
    o, (M, P) = chunk_bl_segments(**x, chunk_size=C, segment_tokens=L, output_final_state=True)
    assert not (torch.isnan(o).any() or torch.isnan(M).any() or torch.isnan(P).any())
    assert o.shape == x["v"].shape and o.dtype == x["v"].dtype
    assert relerr(o_np, o) < FP32 and relerr(M_np, M) < FP32 and relerr(np.asarray(P_np).reshape(P.shape), P) < FP32


@pytest.mark.parametrize("L", [16, 64])
@pytest.mark.parametrize("decay", [False, True])
def test_collapsing_covariance_is_no_worse_than_the_chunk_op(interpret, make_inputs, relerr, L, decay):
    """ℓ² = 0 and r² ≈ 1e-4: the covariance shrinks by orders of magnitude.  Against float64 the
    two-level form's fp32 error is at most the one-chain chunked op's (measured here: read-outs 1.7e-4
    to 6.1e-4 against 6.7e-4 without decays; the final P 3e-8 against 4e-4, its level 2 being float64)."""
    from assocmem.gpu import chunk_bl

    x = make_inputs(1, 128, 2, 8, 8, alpha=decay, seed=3, r2_lo=1e-4)
    x["l2"] = torch.zeros_like(x["l2"])
    x["r2"] = x["r2"] * 1e-3 + 1e-4
    o_ref, (_, P_ref) = naive_bl(**x, output_final_state=True)
    o_c, (_, P_c) = chunk_bl(**x, chunk_size=16, output_final_state=True)
    o, (_, P) = chunk_bl_segments(**x, chunk_size=16, segment_tokens=L, output_final_state=True)
    e_o, e_P, c_o, c_P = relerr(o_ref, o), relerr(P_ref, P), relerr(o_ref, o_c), relerr(P_ref, P_c)
    print(f"collapsing, L = {L}, decay {decay}: read-outs {e_o:.1e} (chunk op {c_o:.1e}), "
          f"final P {e_P:.1e} (chunk op {c_P:.1e})")
    assert e_o <= 1.1 * c_o and e_P <= 1.1 * c_P


def test_segment_elements_equal_the_numpy_two_level_form(interpret, make_inputs):
    """Level 1 (the chunk forward from P₀ = 0 with M₀ = [0 | I]) gives each segment's (A, b, C, η, J) as
    numerics.bl_segments computes it in float64."""
    from assocmem.gpu.chunk import _resolve, chunk_kernels
    from assocmem.gpu.segments import _segments, segment_elements
    from assocmem.numerics.bl_parallel import chunk_factors
    from assocmem.numerics.bl_segments import segment_elements as np_elements

    B, T, H, D, m, C, L = 1, 64, 1, 8, 8, 16, 32
    x = make_inputs(B, T, H, D, m, alpha=True, seed=11)
    NS = T // L
    f32 = {n: _segments(x[n].float(), NS).contiguous() for n in ("q", "k", "v", "l2", "alpha")}
    r2 = _segments(x["r2"].float()[..., None], NS).contiguous()
    got = segment_elements(chunk_kernels(True), f32["q"], f32["k"], f32["v"], f32["l2"], r2, f32["alpha"], C,
                           _resolve(None, D, m + D, 1, NS * H, True))
    k, v, l2, r2n, al = (x[n][0, :, 0].numpy() for n in ("k", "v", "l2", "r2", "alpha"))
    want = np_elements(chunk_factors(k, v, l2, r2n, al, C), L // C)
    for name, g, w in zip(("A", "b", "C", "eta", "J"), got, want):
        g = g[:, 0].numpy()
        assert np.abs(g - w).max() <= 1e-4 * max(1.0, np.abs(w).max()), name


@pytest.mark.parametrize("kw,match", [(dict(segment_tokens=24), "segment_tokens"),
                                      (dict(segment_tokens=8), "segment_tokens"),
                                      (dict(segment_tokens=48), "segment_tokens"),
                                      (dict(chunk_size=8), "chunk_size")])
def test_bad_arguments_name_the_parameter(interpret, make_inputs, kw, match):
    x = make_inputs(1, 64, 1, 8, 8)
    with pytest.raises(ValueError, match=match):
        chunk_bl_segments(**x, **kw)


def test_grouped_noise_is_refused(interpret, make_inputs):
    x = make_inputs(1, 32, 1, 8, 8, G=2)
    with pytest.raises(ValueError, match="r2"):
        chunk_bl_segments(**x, segment_tokens=16)
