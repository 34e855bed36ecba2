"""theory/bl_posterior.py: the Kalman-on-vec-S step equals the five-step recurrence."""
import mpmath as mp
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import bl_mp
from assocmem.theory import bl_posterior as bp
from assocmem.theory.bl_common import RationalSampler, is_zero, mp_digits, sym_symmetric, sym_vector, to_mp


def _all_hold(d):
    res = d.verify()
    assert res and all(res.values()), [k for k, v in res.items() if not v]


def test_kronecker_lemmas():
    _all_hold(bp.kronecker_lemmas())


def test_general_sizes():
    d = bp.posterior_general()
    _all_hold(d)
    assert "general" in d.sizes


@pytest.mark.parametrize("D, m, diag", [(2, 1, False), (2, 2, False), (3, 2, False), (2, 3, True)])
def test_explicit_small_sizes(D, m, diag):
    _all_hold(bp.posterior_explicit(D, m, diagonal_A=diag))


def test_two_step_joint_conditioning():
    _all_hold(bp.conditioning_two_steps())


@pytest.mark.slow
def test_larger_sizes_and_general_prior():
    _all_hold(bp.posterior_explicit(3, 3))
    _all_hold(bp.posterior_explicit(4, 2))
    _all_hold(bp.conditioning_two_steps(general_prior=True))


def test_wrong_recurrence_is_detected():
    """Negative control: β replaced by β/2 must not pass the same zero test."""
    from assocmem.theory.bl_common import Field
    Pb, Mb = sym_symmetric("Pb", 2), sp.Matrix(2, 1, sp.symbols("m0 m1"))
    k, v = sym_vector("k", 2), sym_vector("v", 1)
    r2 = sp.Symbol("r2", positive=True)
    fld = Field(Pb, Mb, k, v, r2)
    Mk, Sk, Mr, covs = bp._update_field(fld, Pb, Mb, k, v, [r2])
    assert is_zero(Mk - Mr) and is_zero(Sk - covs[0])
    u = Pb * k
    wrong = Pb - u * u.T / (2 * (r2 + (k.T * u)[0]))
    assert not is_zero(Sk - wrong)


def test_kronecker_failure_per_column_noise():
    d = bp.kronecker_failure(2, 2)
    _all_hold(d)
    # the gap between column blocks is not identically zero
    assert not is_zero(d.objects["block_gap"])


def test_gated_gain_readout():
    for d in (bp.gated_form(), bp.gain_bound(), bp.readout_covariance(2, 2), bp.readout_covariance(3, 1)):
        _all_hold(d)
    g = bp.gain_bound()
    assert g.objects["beta_example"] == 5 and g.objects["g_example"] == sp.Rational(1, 2)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), D=st.integers(1, 3), m=st.integers(1, 2), T=st.integers(1, 4))
def test_joint_conditioning_mp_equals_recurrence(seed, D, m, T):
    rs = RationalSampler(seed)
    keys = [rs.normal_vector(D) for _ in range(T)]
    vals = [rs.normal_vector(m) for _ in range(T)]
    l2 = [rs.uniform("0", "0.5") for _ in range(T)]
    r2 = [rs.log_uniform("0.001", "2") for _ in range(T)]
    p0 = rs.uniform("0.1", "3")
    Mj, Cj = bp.joint_posterior_mp(keys, vals, l2=l2, r2=r2, p0=p0)
    with mp.workdps(60):
        tr = bl_mp.bl_filter_mp(to_mp(keys), to_mp(vals), l2=to_mp(l2), r2=to_mp(r2), p0=to_mp(p0))
        for d in range(D):
            for j in range(m):
                assert mp_digits(Mj[d][j], tr.M[d][j]) >= 50 or abs(Mj[d][j] - tr.M[d][j]) < mp.mpf(10) ** -55
        for a in range(D):
            for b in range(D):
                assert abs(Cj[a, b] - tr.P[a][b]) < mp.mpf(10) ** -50


def test_joint_conditioning_edge_cases():
    """ℓ² = 0 and a tiny r² (near-noiseless observation) still agree at 60 digits."""
    keys, vals = [[1, 2], [3, -1], [0, 1]], [[1], [-2], [0]]
    for l2, r2 in [(0, "0.3"), ("0.2", "1e-30")]:
        Mj, Cj = bp.joint_posterior_mp(keys, vals, l2=l2, r2=r2, p0=2)
        with mp.workdps(60):
            tr = bl_mp.bl_filter_mp(keys, vals, l2=mp.mpf(l2), r2=mp.mpf(r2), p0=2)
            assert max(abs(Mj[d][0] - tr.M[d][0]) for d in range(2)) < mp.mpf(10) ** -40


def test_general_size_argument_detects_a_wrong_update():
    """Negative control for the I_m ⊗ X algebra: β → 2β in step 5 is not an identity."""
    D, m = sp.symbols("D m", integer=True, positive=True)
    A, P, k = sp.MatrixSymbol("A", D, D), sp.MatrixSymbol("P", D, D), sp.MatrixSymbol("k", D, 1)
    l2, r2, s = sp.symbols("ell2 r2 s", positive=True)
    Pbar = A * P * A.T + l2 * sp.Identity(D)
    beta = 1 / (r2 + s)
    Sb = bp.KronI(A) * bp.KronI(P) * bp.KronI(A).T + bp.KronI(l2 * sp.Identity(D))
    K = Sb * bp.KronI(k.T).T * bp.KronI(beta * sp.Identity(1))
    cov = (Sb - K * bp.KronI((1 / beta) * sp.Identity(1)) * K.T).X
    u = Pbar * k
    assert is_zero(bp._mexpand(cov - (Pbar - beta * u * u.T), {P.T: P}))
    assert not is_zero(bp._mexpand(cov - (Pbar - 2 * beta * u * u.T), {P.T: P}))
