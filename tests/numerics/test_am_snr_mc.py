"""Monte Carlo inverse SNR (numerics/am_snr.py): the literal estimator."""
import numpy as np
import pytest

from assocmem.numerics import am_snr as M
from assocmem.theory import am_snr as T


def _loop_ratio(kernel, K, V, i, tau=None):
    """Reference: r and c formed term by term in Python."""
    g = {"linear": lambda s: s, "relu": lambda s: max(s, 0.0), "exp": lambda s: np.exp(s / tau)}[kernel]
    c = g(float(K[i] @ K[i]))
    r = sum(g(float(K[j] @ K[i])) * V[j] for j in range(len(K)) if j != i)
    return float(r @ r) / (c ** 2 * float(V[i] @ V[i]))


@pytest.mark.parametrize("kernel, tau", [("linear", None), ("relu", None), ("exp", 2.5)])
def test_batched_ratio_matches_term_by_term(kernel, tau):
    rng = np.random.default_rng(1)
    K, V = rng.standard_normal((5, 7, 4)), rng.standard_normal((5, 7, 3))
    i = np.array([0, 3, 6, 2, 2])
    got = M._ratios(kernel, K, V, i, tau)
    want = [_loop_ratio(kernel, K[b], V[b], i[b], tau) for b in range(5)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_orthogonal_keys_give_zero_linear_interference():
    K = np.eye(4)[None]
    V = np.random.default_rng(0).standard_normal((1, 4, 2))
    assert M._ratios("linear", K, V, np.array([1]), None)[0] == 0.0
    assert M._ratios("relu", K, V, np.array([2]), None)[0] == 0.0


def test_single_pair_is_noise_free():
    r = M.mc_inverse_snr("exp", 1, 5, tau=2.0, samples=20)
    assert r.mean == 0.0 and r.stderr == 0.0


def test_seeded_and_batch_independent():
    a = M.mc_inverse_snr("relu", 12, 6, samples=300, seed=4)
    b = M.mc_inverse_snr("relu", 12, 6, samples=300, seed=4)
    c = M.mc_inverse_snr("relu", 12, 6, samples=300, seed=5)
    assert a.mean == b.mean and a.mean != c.mean


def test_sphere_values_have_unit_norm_and_radius_cancels():
    r = M.mc_inverse_snr("linear", 10, 9, samples=200, seed=2, keep=True)
    assert r.values.shape == (200,) and np.all(r.values >= 0)


@pytest.mark.parametrize("kernel, n, d, tau, values, dv, S", [
    ("linear", 32, 10, None, "sphere", None, 6000),
    ("relu", 32, 10, None, "gaussian", 9, 6000),
    ("exp", 32, 16, 4.0, "sphere", None, 6000),
])
def test_mc_agrees_with_exact(kernel, n, d, tau, values, dv, S):
    r = M.mc_inverse_snr(kernel, n, d, tau=tau, values=values, dv=dv, samples=S, seed=11)
    ex = float(T.inverse_snr_exact(kernel, n, d, None if tau is None else repr(tau), values, dv))
    assert abs(r.mean - ex) < 4.5 * r.stderr


def test_mc_separates_exact_from_leading_for_exp():
    r = M.mc_inverse_snr("exp", 64, 16, tau=4.0, samples=4000, seed=3)
    lead = float(T.inverse_snr_leading("exp", 64, 16, "4"))
    assert r.mean - lead > 10 * r.stderr


@pytest.mark.parametrize("kw", [dict(kernel="cos", n=4, d=4), dict(kernel="linear", n=0, d=4),
                                dict(kernel="exp", n=4, d=4), dict(kernel="exp", n=4, d=4, tau=-1.0),
                                dict(kernel="linear", n=4, d=4, samples=1),
                                dict(kernel="linear", n=4, d=4, values="cube")])
def test_validation(kw):
    with pytest.raises(ValueError):
        M.mc_inverse_snr(**kw)


def test_variance_finite_conditions():
    assert not M.variance_finite("linear", 4) and M.variance_finite("linear", 5)
    assert not M.variance_finite("exp", 9, 1.6) and M.variance_finite("exp", 9, 1.7)
    assert not M.variance_finite("relu", 8, values="gaussian", dv=4)


def test_softmax_decomposition_identities():
    dec = M.softmax_decomposition(24, 12, tau=2.0, samples=400, seed=9)
    np.testing.assert_allclose(dec.ratio_softmax, dec.ratio_unnorm, rtol=1e-12)
    assert np.all(dec.o_sm_norm <= dec.max_v_norm * (1 + 1e-12))
    pred = dec.a_i[:, None] * dec.r_over_c - (1 - dec.a_i)[:, None] * dec.v_i
    np.testing.assert_allclose(dec.o_sm - dec.v_i, pred, atol=1e-12)
    assert dec.logZ.std() > 0.1


def test_mc_curve():
    m, s = M.mc_curve("linear", 8, [2, 8], samples=100)
    assert m.shape == s.shape == (2,) and m[1] > m[0]
