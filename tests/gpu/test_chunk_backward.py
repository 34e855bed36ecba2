"""The backward of the BL ops: the value-block reduction of the token-by-token Triton
backward (interpreter) and the chunked backward (``gpu/chunk_backward.py``).

References are autograd through float64 ``naive_bl`` / ``chunk_bl_torch`` (independent
of the code under test: the chunked backward never calls autograd).
"""
import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu import chunk_bl, fused_recurrent_bl, naive_bl  # noqa: E402

pytestmark = pytest.mark.gpu

NAMES = ("q", "k", "v", "l2", "r2", "alpha")


def _autograd(fn, x, w, **kw):
    """Gradients of ``Σ o⊙w + Σ M_T² + Σ P_T²`` with respect to every input (the initial
    covariance's gradient symmetrised)."""
    leaves = {n: x[n].clone().requires_grad_(True) for n in NAMES if x.get(n) is not None}
    st0 = None
    if x.get("initial_state") is not None:
        st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
    o, (M, P) = fn(**leaves, initial_state=st0, output_final_state=True, **kw)
    ((o * w).sum() + (M * M).sum() + (P ** 2).sum()).backward()
    out = {n: t.grad for n, t in leaves.items()}
    if st0 is not None:
        gP = st0[1].grad
        out["M0"], out["P0"] = st0[0].grad, 0.5 * (gP + gP.transpose(-1, -2))
    return out


# --------------------------------------------------------------------------
# stage 0: the token-by-token backward's value blocks add into one buffer
# --------------------------------------------------------------------------
@pytest.mark.parametrize("G", [1, 2])
def test_atomic_value_block_reduction_equals_partials(interpret, make_inputs, relerr, G):
    """``bwd_reduce="atomic"`` (default: one ``[B, T, H, D]`` buffer per gradient) and
    ``"partials"`` (``[NV, B, T, H, D]`` summed afterwards) give the same gradients, both equal
    to float64 autograd; ``BV = 2`` forces several value blocks per group."""
    x = make_inputs(1, 19, 2, 4, 8, G, alpha=True, init=True, seed=11 + G)
    w = torch.randn(1, 19, 2, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref = _autograd(naive_bl, x, w)
    got = {r: _autograd(fused_recurrent_bl, x, w, config={"BV": 2, "bwd_reduce": r})
           for r in ("atomic", "partials")}
    for n in ref:
        assert relerr(got["partials"][n], got["atomic"][n]) < 1e-6, n
        assert relerr(ref[n], got["atomic"][n]) < 1e-5, n
    # the chunked op passes the choice through to the same backward
    gc = _autograd(chunk_bl, x, w, chunk_size=16, config={"bwd_reduce": "partials"})
    for n in ref:
        assert relerr(ref[n], gc[n]) < 1e-5, n

