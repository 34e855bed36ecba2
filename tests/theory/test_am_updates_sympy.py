"""Update rules as gradient steps, Softmax as a normalised memory, DeltaNet fixed point (sympy)."""
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import am_updates as U


@pytest.mark.parametrize("m, n", [(1, 2), (2, 2), (3, 2)])
def test_jacobian_asymmetry_identity(m, n):
    assert U.jacobian_asymmetry_identity(m, n).is_zero_matrix


@pytest.mark.parametrize("m, n, kind", [(2, 3, "symmetric"), (3, 2, "antisymmetric"), (2, 2, "antisymmetric")])
def test_quadratic_objective_gives_the_update(m, n, kind):
    assert U.objective_residual(m, n, kind).is_zero_matrix


def test_nonsymmetric_field_has_circulation():
    circ, asym = U.nonsymmetric_counterexample()
    assert circ == -1 and not asym.is_zero_matrix


def test_named_rules():
    assert U.deltanet_step_residual().is_zero_matrix
    resid, lim = U.linear_attention_unbounded()
    assert resid.is_zero_matrix and lim == -sp.oo
    assert U.gated_linear_attention_objective().is_zero_matrix


def _asym(A, B):
    J = np.eye(A.shape[0] * B.shape[0]) - np.kron(B.T, A)
    return np.abs(J - J.T).max()


@settings(max_examples=30)
@given(st.integers(0, 2 ** 31), st.integers(1, 4), st.integers(1, 4))
def test_classification_numerically(seed, m, n):
    """The Jacobian identity predicts symmetry exactly for sym/sym and anti/anti pairs
    and asymmetry for mixed ones (checked with numpy Kronecker products)."""
    rng = np.random.default_rng(seed)
    G1, G2 = rng.standard_normal((m, m)), rng.standard_normal((n, n))
    assert _asym(G1 + G1.T, G2 + G2.T) < 1e-12
    assert _asym(G1 - G1.T, G2 - G2.T) < 1e-12
    if m > 1 and n > 1:
        assert _asym(G1 + G1.T, G2 - G2.T) > 1e-6
        # identity: J − Jᵀ = −2 (B_s ⊗ A_a − B_a ⊗ A_s) for general A, B
        A, B = G1, G2
        As, Aa, Bs, Ba = (A + A.T) / 2, (A - A.T) / 2, (B + B.T) / 2, (B - B.T) / 2
        J = np.eye(m * n) - np.kron(B.T, A)
        np.testing.assert_allclose(J - J.T, -2 * (np.kron(Bs, Aa) - np.kron(Ba, As)), atol=1e-12)


def test_running_mean_and_moments():
    assert all(r == 0 for r in U.running_mean_residuals(6))
    q2, tau, t, mu, second, rel = U.exp_denominator_moments()
    assert sp.simplify(rel - (sp.exp(q2 / tau ** 2) - 1) / t) == 0
    assert sp.simplify(second - mu ** 4) == 0          # lognormal: E κ² = μ⁴


def test_carry_over_weights():
    t0, T = sp.symbols("t0 T", positive=True, integer=True)
    assert sp.simplify(U.carry_over_weight(t0, T) - t0 / T) == 0
    w2 = U.carry_over_weight(t0, T, "1/t2")
    assert sp.simplify(w2 - t0 * (T + 1) / (T * (t0 + 1))) == 0
    assert U.carry_over_weight(3, 12) == sp.Rational(1, 4)
    hs, h2 = U.harmonic_divergence()
    assert hs == sp.oo and h2 == sp.pi ** 2 / 6


def test_fixed_point_square():
    normal, grad, det = U.fixed_point_square_residuals(2, 2)
    assert normal.is_zero_matrix and grad.is_zero_matrix and det == 0
    normal, grad, det = U.fixed_point_square_residuals(2, 1)
    assert normal.is_zero_matrix and grad.is_zero_matrix and det == 0


def test_fixed_point_low_rank_depends_on_covariance():
    s, a, b = U.fixed_point_low_rank_example()
    assert a == 0 and b == sp.Rational(4, 5)


@settings(max_examples=20)
@given(st.integers(0, 2 ** 31))
def test_ls_optimum_formula_minimises(seed):
    """The general formula at a random low-rank instance beats random perturbations."""
    rng = np.random.default_rng(seed)
    D, h, m = 4, 2, 3
    Wk, Wv = rng.standard_normal((h, D)), rng.standard_normal((m, D))
    G = rng.standard_normal((D, D))
    Sig = G @ G.T + 0.1 * np.eye(D)
    S = np.array(U.ls_optimum(sp.Matrix(Wk), sp.Matrix(Wv), sp.Matrix(Sig)), dtype=float)
    loss = lambda S_: float(np.trace((S_ @ Wk - Wv) @ Sig @ (S_ @ Wk - Wv).T))  # noqa: E731
    base = loss(S)
    for _ in range(5):
        assert loss(S + 1e-3 * rng.standard_normal(S.shape)) >= base - 1e-9
