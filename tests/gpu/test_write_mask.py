"""The write mask of every BL op and every baseline core (missing-observation semantics).

References: the float64 numpy filter with ``write_mask`` (which skips the update
itself; tests/numerics/test_write_mask_np.py checks it against the Kalman filter
with those observations dropped) — not the ops' own key-zeroing mechanism.
Kernels run through Triton's interpreter with NaN-poisoned buffers.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

torch = pytest.importorskip("torch")

from assocmem.gpu import chunk_bl, fused_recurrent_bl, naive_bl  # noqa: E402
from assocmem.gpu.chunk import chunk_bl_torch  # noqa: E402
from assocmem.gpu.tasks import recurrences as R  # noqa: E402
from assocmem.numerics.bl_filter import bl_filter  # noqa: E402

pytestmark = pytest.mark.gpu

FP32 = 1e-5


def _mask(B, T, H, seed, p=0.5):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(B, T, H, generator=g) < p


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 1000), T=st.integers(1, 12), D=st.sampled_from([2, 4, 5]), alpha=st.booleans(),
       p=st.sampled_from([0.0, 0.3, 0.7, 1.0]))
def test_naive_and_chunk_torch_equal_numpy_filter(make_inputs, numpy_reference, relerr, seed, T, D, alpha, p):
    x = make_inputs(2, T, 2, D, 3, alpha=alpha, init=seed % 2 == 1, seed=seed)
    wm = _mask(2, T, 2, seed, p)
    o_np, M_np, P_np, _ = numpy_reference(x, write_mask=wm)
    o, (M, P) = naive_bl(**x, output_final_state=True, write_mask=wm)
    assert relerr(o_np, o) < 1e-12 and relerr(M_np, M) < 1e-12 and relerr(P_np, P) < 1e-12
    oc, (Mc, Pc) = chunk_bl_torch(**x, output_final_state=True, chunk_size=16, write_mask=wm)
    assert relerr(o_np, oc) < 1e-11 and relerr(M_np, Mc) < 1e-11 and relerr(P_np, Pc) < 1e-11


CASES = [  # (B, T, H, D, m, G, alpha, init, p)
    (1, 19, 2, 4, 4, 1, True, False, 0.5),
    (2, 9, 1, 3, 4, 2, False, True, 0.3),          # grouped noise, initial state
    (1, 33, 1, 8, 8, 1, True, True, 0.8),          # several chunks
    (1, 5, 1, 4, 4, 1, False, False, 0.0),         # nothing writes: the prediction only
]


@pytest.mark.parametrize("op", ["fused_recurrent", "chunk"])
@pytest.mark.parametrize("B,T,H,D,m,G,alpha,init,p", CASES)
def test_triton_kernels_with_write_mask(interpret, make_inputs, numpy_reference, relerr, op,
                                        B, T, H, D, m, G, alpha, init, p):
    x = make_inputs(B, T, H, D, m, G, alpha=alpha, init=init, seed=T + D, dtype=torch.float32)
    wm = _mask(B, T, H, T, p)
    o_np, M_np, P_np, _ = numpy_reference(x, write_mask=wm)
    f = fused_recurrent_bl if op == "fused_recurrent" else (lambda **kw: chunk_bl(**kw, chunk_size=16))
    o, (M, P) = f(**x, output_final_state=True, write_mask=wm)
    assert not torch.isnan(o).any()
    assert relerr(o_np, o) < FP32 and relerr(M_np, M) < FP32
    assert relerr(np.asarray(P_np).reshape(P.shape), P) < FP32


@pytest.mark.parametrize("op", ["fused_recurrent", "chunk"])
def test_triton_gradients_with_write_mask(interpret, make_inputs, op):
    """Gradients of every input against float64 autograd through ``naive_bl`` with the same
    mask; a non-writing token's key and value get exactly zero gradient, its query does not."""
    x64 = make_inputs(1, 21, 2, 4, 4, alpha=True, init=True, seed=5)
    wm = _mask(1, 21, 2, 9, 0.5)
    names = ["q", "k", "v", "l2", "r2", "alpha"]

    def grads(f, dtype):
        x = {kk: (vv.detach().to(dtype).requires_grad_(kk in names) if torch.is_tensor(vv) else vv)
             for kk, vv in x64.items() if kk != "initial_state"}
        x["initial_state"] = tuple(t.to(dtype) for t in x64["initial_state"])
        o, _ = f(**x, write_mask=wm)
        w = torch.sin(torch.arange(o.numel(), dtype=dtype)).reshape(o.shape)
        (o * w).sum().backward()
        return {n: x[n].grad.double() for n in names}

    ref = grads(naive_bl, torch.float64)
    f = fused_recurrent_bl if op == "fused_recurrent" else (lambda **kw: chunk_bl(**kw, chunk_size=16))
    got = grads(f, torch.float32)
    for n in names:
        assert float((got[n] - ref[n]).norm() / ref[n].norm()) < 1e-4, n
    off = ~wm
    assert bool((got["k"][off] == 0).all()) and bool((got["v"][off] == 0).all())
    assert bool((got["r2"][off] == 0).all())
    assert float(got["q"][off].abs().sum()) > 0            # the read-out still happens


def test_write_mask_is_validated(make_inputs):
    x = make_inputs(1, 4, 2, 3, 2)
    with pytest.raises(ValueError, match="write_mask must be a bool"):
        naive_bl(**x, write_mask=torch.ones(1, 4, 2))
    with pytest.raises(ValueError, match=r"write_mask must have shape \[B, T, H\]"):
        naive_bl(**x, write_mask=torch.ones(1, 4, dtype=torch.bool))


# ---------------------------------------------------------------------------
# the baseline cores: a zero write key is each family's "no write"
# ---------------------------------------------------------------------------
def _np_bh(t):
    return np.moveaxis(t.detach().double().numpy(), 2, 1)


@pytest.mark.parametrize("core", ["reset", "delta", "linear", "gla", "diag"])
def test_baseline_cores_with_write_mask_equal_numpy_variants(core):
    """reset / Delta: step size 0; linear attention: no write; GLA: decay only; diagonal BL:
    prediction only — each against the numpy filter variant given the same mask."""
    g = torch.Generator().manual_seed(2)
    B, T, H, D, m = 2, 13, 2, 4, 3
    k = torch.nn.functional.normalize(torch.randn(B, T, H, D, generator=g, dtype=torch.float64), dim=-1)
    q = torch.randn(B, T, H, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, T, H, m, generator=g, dtype=torch.float64)
    wm = _mask(B, T, H, 4, 0.6)
    kw_ = torch.where(wm[..., None], k, torch.zeros_like(k))          # the cores' write keys
    l2 = torch.rand(B, T, H, generator=g, dtype=torch.float64) * 0.2 + 0.01
    r2 = torch.rand(B, T, H, generator=g, dtype=torch.float64) * 0.2 + 0.05
    npkw = dict(write_mask=np.swapaxes(wm.numpy(), 1, 2))
    if core == "reset":
        o = R.chunk_delta(q, kw_, v, R.reset_gain(l2, r2, k), chunk_size=4)[0]
        tr = bl_filter(_np_bh(k), _np_bh(v), _np_bh(q), r2=np.swapaxes(r2.numpy(), 1, 2),
                       variant="reset", lam=np.swapaxes(l2.numpy(), 1, 2), **npkw)
    elif core == "delta":
        eta = torch.rand(B, T, H, generator=g, dtype=torch.float64)
        o = R.chunk_delta(q, kw_, v, eta, chunk_size=4)[0]
        # the delta rule's step η = λ/(r² + λ) on unit keys: λ = η r²/(1 − η) with r² = 1
        lam = (eta / (1 - eta)).numpy()
        tr = bl_filter(_np_bh(k), _np_bh(v), _np_bh(q), r2=1.0, variant="reset",
                       lam=np.swapaxes(lam, 1, 2), **npkw)
    elif core == "linear":
        om = torch.rand(B, T, H, generator=g, dtype=torch.float64)
        o = R.additive(q, kw_, v, omega=om)[0]
        tr = bl_filter(_np_bh(k), _np_bh(v), _np_bh(q), variant="linear", omega=np.swapaxes(om.numpy(), 1, 2),
                       **npkw)
    elif core == "gla":
        la = -torch.rand(B, T, H, D, generator=g, dtype=torch.float64) * 0.3
        o = R.additive(q, kw_, v, log_alpha=la, chunk_size=4)[0]
        tr = bl_filter(_np_bh(k), _np_bh(v), _np_bh(q), variant="linear", omega=1.0,
                       alpha=_np_bh(la.exp()), **npkw)
    else:
        o = R.diag_bl(q, kw_, v, l2, r2, 1.0, chunk_size=4, fused=False)
        tr = bl_filter(_np_bh(k), _np_bh(v), _np_bh(q), l2=np.swapaxes(l2.numpy(), 1, 2),
                       r2=np.swapaxes(r2.numpy(), 1, 2), variant="diag", **npkw)
    ref = np.moveaxis(tr.y, 1, 2)
    assert float(np.linalg.norm(o.numpy() - ref) / np.linalg.norm(ref)) < 1e-12
