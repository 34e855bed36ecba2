"""numerics/bl_analysis.py: simulations through the filter, against theory closed forms."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics import bl_filter, vec_kalman_filter
from assocmem.numerics import bl_analysis as ba
from assocmem.theory import bl_geometry as geo
from assocmem.theory import bl_steady_state as ss

rhos = st.floats(min_value=-0.97, max_value=0.97)
noise = st.floats(min_value=1e-2, max_value=1.0)


def test_readout_monte_carlo_matches_closed_form():
    rng = np.random.default_rng(0)
    M, B = rng.normal(size=(3, 2)), rng.normal(size=(3, 3))
    P, q = B @ B.T, rng.normal(size=3)
    mc = ba.readout_monte_carlo(M, P, q, n_samples=40_000, seed=1)
    var = 1 + q @ P @ q
    assert np.all(np.abs(mc["mean"] - M.T @ q) < 5 * mc["se_mean"])
    assert np.all(np.abs(mc["cov"] - var * np.eye(2)) < 5 * mc["se_cov"])
    # a wrong variance (without the +1 of the read-out noise) is rejected
    assert np.any(np.abs(mc["cov"] - (var - 1) * np.eye(2)) > 5 * mc["se_cov"])


def test_readout_singular_P():
    mc = ba.readout_monte_carlo(np.zeros((2, 1)), np.zeros((2, 2)), np.ones(2), n_samples=20_000)
    assert abs(mc["cov"][0, 0] - 1) < 5 * mc["se_cov"][0, 0]


@settings(deadline=None)
@given(r2=noise, l2=noise, p0=st.floats(0.0, 5.0))
def test_same_key_gain_converges_to_g_inf(r2, l2, p0):
    run = ba.same_key_run(r2, l2, p0, T=400)
    assert np.isclose(run["gain"][-1], ss.g_inf_value(r2, l2), rtol=1e-12, atol=0)
    assert np.all((run["gain"] >= 0) & (run["gain"] < 1))


def test_same_key_edge_cases():
    # ℓ² = 0: gain decays like 1/t, no floor
    g = ba.same_key_run(0.05, 0.0, 2.0, T=1000)["gain"]
    assert np.isclose(g[-1] * 1000, 1, rtol=1e-3) and np.all(np.diff(g) < 0)
    # tiny r²: gain ≈ 1 − r²/ℓ²
    g = ba.same_key_run(1e-12, 0.05, 1.0, T=20)["gain"]
    assert np.isclose(1 - g[-1], 1e-12 / 0.05, rtol=1e-3)


@settings(max_examples=20, deadline=None)
@given(rho=rhos, r2=noise, l2=noise, seed=st.integers(0, 1000))
def test_cross_shrinkage_formula_and_limit(rho, r2, l2, seed):
    run = ba.cross_shrinkage_run(rho, r2=r2, l2=l2, n_writes=300, D=3, seed=seed)
    formula = l2 - run["cross"] ** 2 / (r2 + run["s_A"])
    assert np.allclose(run["delta_B"], formula, rtol=0, atol=1e-12 * max(1, l2))
    tail = run["delta_B"][-1]
    if (1 - ss.g_inf_value(r2, l2)) ** 250 < 1e-13:
        assert np.isclose(tail, geo.delta_b_limit(rho, l2), rtol=0, atol=1e-10)


def test_cross_shrinkage_rho_one_and_orthogonal():
    assert abs(ba.cross_shrinkage_run(1.0, r2=0.05, l2=0.05, n_writes=300)["delta_B"][-1]) < 1e-12
    assert np.isclose(ba.cross_shrinkage_run(0.0, r2=0.05, l2=0.05, n_writes=300)["delta_B"][-1], 0.05, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(rho=st.floats(0.05, 0.98), p0=st.floats(0.1, 3.0), r2=noise, l2=st.one_of(st.just(0.0), noise))
def test_rotation_angles_closed_form(rho, p0, r2, l2):
    ns = np.array([0, 1, 3, 20, 150])
    ang = ba.rotation_angles(rho, ns, p0=p0, r2=r2, l2=l2)
    th = [float(geo.theta_n_mp(Fraction(rho), Fraction(p0), Fraction(r2), Fraction(l2), int(n))) for n in ns]
    assert np.allclose(ang, th, rtol=1e-11, atol=1e-13)
    assert np.all(ang <= np.arcsin(rho) + 1e-15)


def test_rotation_rho_one_and_prefix():
    assert np.all(ba.rotation_angles(1.0, [1, 50], p0=3.0, r2=0.05, l2=0.05) < 1e-6)
    # a prefix with cross terms (random writes) still converges to arcsin ρ
    rng = np.random.default_rng(3)
    prefix = (rng.normal(size=(6, 4)), rng.normal(size=(6, 2)))
    ang = ba.rotation_angles(0.7, [5000], p0=1.0, r2=0.05, l2=0.05, D=4, prefix=prefix)
    assert abs(ang[0] - np.arcsin(0.7)) < 2e-3


def test_rotation_rate_fit_recovers_a_one_over_n_decay():
    n = np.array([10, 100, 1000, 10_000])
    n0, c, exponent = ba.rotation_rate_fit(n, -2.5 / (n + 61.0))
    assert abs(n0 - 61.0) < 1e-6 and abs(c - 2.5) < 1e-9 and abs(exponent + 1) < 1e-9
    # a measured curve: the filter's own angles at the paper's setting
    ns = np.unique(np.round(np.logspace(0, 4, 13)).astype(int))
    n0, c, exponent = ba.rotation_rate_fit(ns, ba.rotation_angles(0.92, ns, p0=3.0, r2=0.05, l2=0.05) - np.arcsin(0.92))
    assert abs(exponent + 1) < 1e-3 and abs(n0 - 61) < 1
    with pytest.raises(ValueError, match="n_values"):
        ba.rotation_rate_fit([1, 2, 3], [-1.0, -0.5, -0.3])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["deltanet", "gdn", "kda"]))
def test_reset_filter_is_the_delta_rule(seed, kind):
    rng = np.random.default_rng(seed)
    T, D, m = 7, 4, 2
    keys, values = rng.normal(size=(T, D)), rng.normal(size=(T, m))
    lam, r2 = 10.0 ** rng.uniform(-1, 1, T), 10.0 ** rng.uniform(-1, 0, T)
    eta = lam / (r2 + lam * np.sum(keys ** 2, 1))
    alpha = {"deltanet": None, "gdn": rng.uniform(0.5, 1, T), "kda": rng.uniform(0.5, 1, (T, D))}[kind]
    a_f = None if alpha is None else (alpha[:, None] * np.ones(D) if alpha.ndim == 1 else alpha)
    tr = bl_filter(keys, values, r2=r2, variant="reset", lam=lam, alpha=a_f)
    ref = ba.delta_rule_reference(keys, values, eta=eta, kind=kind, alpha=alpha)
    assert np.allclose(tr.M.T, ref, rtol=1e-12, atol=1e-12)


def test_longhorn_per_column():
    rng = np.random.default_rng(5)
    T, D, m = 6, 3, 3
    keys, values = rng.normal(size=(T, D)), rng.normal(size=(T, m))
    lam, r2c = 0.7, 10.0 ** rng.uniform(-1, 0, (T, m))
    tr = bl_filter(keys, values, r2=r2c, variant="reset", lam=np.full((T, m), lam), groups=m)
    b = lam / r2c
    eps = b / (1 + b * np.sum(keys ** 2, 1)[:, None])
    assert np.allclose(tr.M.T, ba.delta_rule_reference(keys, values, eta=eps, kind="longhorn"), rtol=1e-12)


def test_latent_input_posterior_mean_and_covariance():
    rng = np.random.default_rng(2)
    T, D, m = 5, 3, 2
    keys, values = rng.normal(size=(T, D)), rng.normal(size=(T, m))
    lam, r2, alpha = rng.uniform(0.2, 2, T), rng.uniform(0.1, 1, T), rng.uniform(0.5, 1, (T, D))
    mean, cov = ba.latent_input_posterior(keys, values, lam=lam, r2=r2, alpha=alpha)
    tr = bl_filter(keys, values, variant="linear", omega=lam / (lam + r2), alpha=alpha)
    assert np.allclose(mean, tr.M, rtol=1e-12, atol=1e-13)
    C = np.zeros((D, D))
    for t in range(T):                      # the recursion C_t = A C Aᵀ + c k kᵀ
        C = alpha[t][:, None] * C * alpha[t][None, :] + lam[t] * r2[t] / (lam[t] + r2[t]) * np.outer(keys[t], keys[t])
    assert np.allclose(cov, np.kron(np.eye(m), C), rtol=1e-12, atol=1e-13)
    assert np.trace(cov) > 0


@settings(max_examples=20, deadline=None)
@given(rho=rhos, gamma=st.floats(0.02, 0.98), seed=st.integers(0, 1000))
def test_plateau(rho, gamma, seed):
    run = ba.plateau_run(rho, gamma, 40, seed=seed)
    a0, b0, vA = run["a"][0], run["b"][0], run["vA"]
    n = np.arange(41)[:, None]
    assert np.allclose(run["b"], b0 - rho * (1 - (1 - gamma) ** n) * (a0 - vA), rtol=1e-12, atol=1e-12)
    assert np.allclose(run["gain"], gamma, rtol=1e-13)


@pytest.mark.parametrize("D, n, solvable", [(4, 2, True), (4, 4, True), (4, 5, False), (6, 12, False)])
def test_capacity_probe(D, n, solvable):
    pr = ba.capacity_probe(D, n)
    assert pr["rank"] == min(D, n)
    if solvable:
        assert pr["lstsq_residual"] < 1e-12 and pr["bl_residual"] < 1e-6
    else:
        assert pr["lstsq_residual"] > 0.05 and np.isclose(pr["bl_residual"], pr["lstsq_residual"], rtol=1e-6)


def test_rotation_dynamics_is_complex_multiplication():
    rng = np.random.default_rng(1)
    a = rng.uniform(0.1, 1, 4) * np.exp(1j * rng.uniform(-3, 3, 4))
    z = rng.normal(size=4) + 1j * rng.normal(size=4)
    x = np.stack([z.real, z.imag], -1).reshape(-1)
    y = ba.rotation_dynamics(a) @ x
    assert np.allclose(y[0::2] + 1j * y[1::2], a * z, rtol=1e-14, atol=1e-15)
    # composition = product of the complex factors
    b = rng.uniform(0.1, 1, 4) * np.exp(1j * rng.uniform(-3, 3, 4))
    assert np.allclose(ba.rotation_dynamics(a) @ ba.rotation_dynamics(b), ba.rotation_dynamics(a * b), atol=1e-14)


def test_structured_noise_posterior_is_kronecker_and_differs_from_isotropic():
    rng = np.random.default_rng(4)
    T, dd, m = 6, 2, 2
    a = 0.9 * np.exp(1j * rng.uniform(-3, 3, (T, dd)))
    keys, values = rng.normal(size=(T, 2 * dd)), rng.normal(size=(T, m))
    means, covs = ba.structured_noise_posterior(keys, values, a=a, l2=0.3, r2=0.2)
    D = 2 * dd
    assert np.allclose(covs[-1][:D, :D], covs[-1][D:, D:], atol=1e-13) and np.allclose(covs[-1][:D, D:], 0, atol=1e-13)
    iso = bl_filter(keys, values, l2=0.3, r2=0.2, A=ba.rotation_dynamics(a))
    assert np.abs(iso.M - means[-1]).max() > 1e-3


def test_structured_q_reduces_to_isotropic():
    """Q = ℓ² I in the Kalman reference reproduces the isotropic filter (the Q path is exercised)."""
    rng = np.random.default_rng(6)
    keys, values = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    m1, c1 = vec_kalman_filter(keys, values, l2=0.0, r2=0.3, Q=0.2 * np.eye(3))
    m2, c2 = vec_kalman_filter(keys, values, l2=0.2, r2=0.3)
    assert np.allclose(m1, m2, atol=1e-14) and np.allclose(c1, c2, atol=1e-14)


@pytest.mark.parametrize("D, m, G", [(4, 2, 1), (16, 6, 2), (8, 8, 4)])
def test_state_bytes(D, m, G):
    sb = ba.state_bytes(D, m, G)
    assert sb["M_bytes"] + sb["P_bytes"] == 8 * (D * m + G * D * D)


@pytest.mark.parametrize("call, name", [
    (lambda: ba.overlap_pair(1.5, 3), "rho"),
    (lambda: ba.overlap_pair(0.5, 1), "D"),
    (lambda: ba.readout_monte_carlo(np.zeros((2, 1)), -np.eye(2), np.ones(2)), "P"),
    (lambda: ba.readout_monte_carlo(np.zeros((2, 1)), np.eye(2), np.ones(2), n_samples=5), "n_samples"),
    (lambda: ba.plateau_run(0.5, 1.0, 10), "gamma"),
    (lambda: ba.rotation_angles(0.5, [-1], p0=1.0, r2=0.1, l2=0.1), "n"),
    (lambda: ba.latent_input_posterior(np.ones((2, 2)), np.ones((2, 1)), lam=0.0, r2=1.0), "lam"),
    (lambda: ba.delta_rule_reference(np.ones((2, 2)), np.ones((2, 1)), eta=0.5, kind="mamba"), "kind"),
    (lambda: ba.real_row_noise(2, -1.0), "l2"),
    (lambda: ba.state_bytes(0, 2), "D"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
