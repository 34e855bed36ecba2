"""naive_bl (the torch reference) against the float64 numpy filter, autograd and validation."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

torch = pytest.importorskip("torch")

from assocmem.gpu import naive_bl  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("T", [1, 7, 63])
@pytest.mark.parametrize("D,m,G", [(4, 3, 1), (5, 6, 2), (8, 8, 4)])
@pytest.mark.parametrize("alpha,init", [(False, False), (True, True)])
def test_naive_matches_numpy_filter(make_inputs, numpy_reference, T, D, m, G, alpha, init):
    x = make_inputs(2, T, 3, D, m, G, alpha=alpha, init=init, seed=T + D)
    o, (M, P) = naive_bl(**x, p0=1.7, output_final_state=True)
    o_ref, M_ref, P_ref, _ = numpy_reference(x, p0=1.7)
    # same quantity in float64 by two implementations: 1e-12 relative
    for ref, out in ((o_ref, o), (M_ref, M), (P_ref, P)):
        ref = np.asarray(ref)
        assert np.abs(ref - out.numpy()).max() <= 1e-12 * max(1.0, np.abs(ref).max())
    assert P.shape == ((2, 3, D, D) if G == 1 else (2, 3, G, D, D))


def test_naive_gradcheck_float64(make_inputs):
    x = make_inputs(1, 4, 2, 3, 4, 2, alpha=True, init=True, seed=3)
    M0, P0 = x["initial_state"]
    leaves = [x["q"], x["k"], x["v"], x["l2"], x["r2"], x["alpha"], M0]
    leaves = [t.clone().requires_grad_(True) for t in leaves]
    # P0 enters through a factor so that perturbations stay symmetric
    L0 = torch.linalg.cholesky(P0).clone().requires_grad_(True)

    def f(q, k, v, l2, r2, a, M0, L0):
        o, (M, P) = naive_bl(q, k, v, l2, r2, a, initial_state=(M0, L0 @ L0.transpose(-1, -2)),
                             output_final_state=True, validate=False)
        return o, M, P

    assert torch.autograd.gradcheck(f, (*leaves, L0), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_naive_gradcheck_log_decay(make_inputs):
    x = make_inputs(1, 5, 1, 3, 2, alpha=True, seed=4)
    g = torch.log(x["alpha"]).clone().requires_grad_(True)
    k = x["k"].clone().requires_grad_(True)

    def f(g, k):
        return naive_bl(x["q"], k, x["v"], x["l2"], x["r2"], g=g, validate=False)[0]

    assert torch.autograd.gradcheck(f, (g, k), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_equal_group_noise_is_the_ungrouped_filter(make_inputs):
    """Kronecker closure (BL App. C): with the same r² in every group the G
    covariances coincide and the grouped filter is the ungrouped one."""
    x = make_inputs(2, 9, 2, 5, 6, alpha=True, seed=6)
    o1, (M1, P1) = naive_bl(**x, output_final_state=True)
    x["r2"] = x["r2"][..., None].expand(*x["r2"].shape, 3).contiguous()
    o3, (M3, P3) = naive_bl(**x, output_final_state=True)
    assert torch.allclose(o1, o3, rtol=0, atol=1e-14)
    assert P3.shape[2] == 3
    for g in range(3):
        assert torch.allclose(P3[:, :, g], P1, rtol=0, atol=1e-15)


@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 12), D=st.integers(1, 6),
       l2s=st.floats(0.0, 2.0), r2lo=st.floats(1e-3, 1.0))
def test_covariance_stays_psd_and_gain_in_unit_interval(seed, T, D, l2s, r2lo):
    """Posterior covariances are symmetric PSD and each write's gain
    g = kᵀP̄k/(r² + kᵀP̄k) lies in [0, 1) (BL p.4), for any valid inputs."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(1, T, 1, D, generator=gen, dtype=torch.float64) * 2
    q = torch.randn(1, T, 1, D, generator=gen, dtype=torch.float64)
    v = torch.randn(1, T, 1, 2, generator=gen, dtype=torch.float64)
    l2 = torch.rand(1, T, 1, generator=gen, dtype=torch.float64) * l2s
    r2 = torch.rand(1, T, 1, generator=gen, dtype=torch.float64) + r2lo
    a = torch.rand(1, T, 1, D, generator=gen, dtype=torch.float64) * 2 - 1   # any real decay
    _, (M, P) = naive_bl(q, k, v, l2, r2, a, p0=1.0, output_final_state=True)
    P = P[0, 0]
    assert torch.equal(P, P.T) or torch.allclose(P, P.T, atol=1e-12)
    lam = torch.linalg.eigvalsh(P)
    assert float(lam.min()) >= -1e-12 * max(1.0, float(lam.abs().max()))
    # gain of a further write along a random key
    kk = k[0, -1, 0]
    s = float(kk @ P @ kk)
    gain = s / (float(r2[0, -1, 0]) + s)
    assert 0.0 <= gain < 1.0


def test_low_precision_inputs_compute_in_float32(make_inputs):
    x = make_inputs(1, 10, 2, 8, 8, alpha=True, seed=7)
    o64, _ = naive_bl(**x)
    xb = {k: (v.to(torch.bfloat16) if torch.is_tensor(v) else v) for k, v in x.items()}
    ob, st_ = naive_bl(**xb, output_final_state=True)
    assert ob.dtype == torch.bfloat16 and st_[0].dtype == torch.float32
    # bf16 rounding of the inputs dominates: a few 1e-3 relative
    assert float((ob.double() - o64).norm() / o64.norm()) < 2e-2


def test_forgetting_everything_resets_to_the_prior(make_inputs):
    """α = 0 (g = −inf) at a step erases the past: the next step equals a fresh
    filter started from M = 0, P = ℓ² I (an edge case of the decay)."""
    x = make_inputs(1, 6, 1, 4, 3, alpha=True, seed=8)
    g = torch.log(x["alpha"])
    g[:, 3] = -math.inf
    o, _ = naive_bl(x["q"], x["k"], x["v"], x["l2"], x["r2"], g=g)
    sl = slice(3, None)
    l2_3 = float(x["l2"][0, 3, 0])
    # fresh start at step 3 with prior p0 = 0: P̄_3 = ℓ²_3 I, exactly as after full forgetting
    g2 = g[:, sl].clone()
    g2[:, 0] = 0.0
    o2, _ = naive_bl(x["q"][:, sl], x["k"][:, sl], x["v"][:, sl], x["l2"][:, sl], x["r2"][:, sl],
                     g=g2, p0=0.0)
    assert l2_3 > 0
    assert torch.allclose(o[:, sl], o2, rtol=1e-13, atol=1e-14)


# -- bad input ---------------------------------------------------------------
def _base(make_inputs):
    return make_inputs(1, 3, 2, 4, 4, 2, alpha=True, init=True, seed=9)


@pytest.mark.parametrize("mutate,name", [
    (lambda x: x.update(k=x["k"][..., :3]), "k"),
    (lambda x: x.update(v=x["v"][:, :2]), "v"),
    (lambda x: x.update(l2=x["l2"][..., :1]), "l2"),
    (lambda x: x.update(r2=torch.cat([x["r2"], x["r2"][..., :1]], -1)), "r2"),   # G=3 does not divide m=4
    (lambda x: x.update(alpha=x["alpha"][..., :2]), "alpha"),
    (lambda x: x.update(r2=x["r2"] * 0), "r2"),
    (lambda x: x.update(r2=-x["r2"]), "r2"),
    (lambda x: x.update(l2=x["l2"] - 1.0), "l2"),
    (lambda x: x["q"].__setitem__((0, 1, 0, 0), float("nan")), "q"),
    (lambda x: x["v"].__setitem__((0, 1, 0, 0), float("inf")), "v"),
    (lambda x: x["alpha"].__setitem__((0, 1, 0, 0), float("nan")), "alpha"),
    (lambda x: x.update(initial_state=(x["initial_state"][0], -x["initial_state"][1])), "initial_state"),
    (lambda x: x.update(initial_state=(x["initial_state"][0][..., :2], x["initial_state"][1])), "initial_state"),
    (lambda x: x.update(initial_state=x["initial_state"][0]), "initial_state"),
    (lambda x: x.update(q=x["q"].long()), "q"),
])
def test_bad_input_raises_value_error_naming_the_argument(make_inputs, mutate, name):
    x = _base(make_inputs)
    mutate(x)
    with pytest.raises(ValueError, match=name):
        naive_bl(**x)


def test_bad_scalars_raise(make_inputs):
    x = _base(make_inputs)
    with pytest.raises(ValueError, match="p0"):
        naive_bl(**x, p0=-1.0)
    x2 = dict(x)
    with pytest.raises(ValueError, match="alpha"):
        naive_bl(**x2, g=x["alpha"])
