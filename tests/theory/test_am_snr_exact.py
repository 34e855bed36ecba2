"""Exact inverse SNR (theory/am_snr.py): derivations, finiteness, asymptotics."""
import math

import mpmath as mp
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import am_snr as A


@pytest.mark.parametrize("kernel, F, cond", [
    ("linear", 1 / (A.d - 2), sp.Gt(A.d, 2)),
    ("relu", 1 / (2 * (A.d - 2)), sp.Gt(A.d, 2)),
])
def test_derived_F_and_condition(kernel, F, cond):
    der = A.derive(kernel)
    assert sp.simplify(der.F - F) == 0
    assert sp.simplify(sp.Xor(der.condition, cond)) == sp.false


def test_exp_F_and_threshold():
    der = A.derive("exp")
    assert sp.simplify(der.F - (1 + 4 * (A.tau - 1) / A.tau ** 2) ** (-A.d / 2)) == 0
    # condition b > 0 is τ²+4τ−4 > 0
    lhs = der.condition.lhs - der.condition.rhs
    assert sp.simplify(2 * lhs - (A.tau ** 2 + 4 * A.tau - 4)) == 0


@pytest.mark.parametrize("kernel, printed", [
    ("linear", A.N / A.d), ("relu", A.N / (2 * A.d)),
    ("exp", A.N * sp.exp(-2 * (A.tau - 1) * A.d / A.tau ** 2)),
])
def test_leading_order_is_the_papers(kernel, printed):
    assert sp.simplify(A.derive(kernel).leading - printed) == 0


def test_gaussian_values_factor():
    for k in A.KERNELS:
        der = A.derive(k)
        assert sp.simplify(der.exact_gaussian / der.exact_sphere - A.dv / (A.dv - 2)) == 0


@pytest.mark.parametrize("args", [
    ("linear", 8, 2, None, "sphere", None), ("relu", 8, 1, None, "sphere", None),
    ("exp", 8, 8, "0.8284", "sphere", None), ("exp", 8, 8, None, "sphere", None),
    ("exp", 8, 8, "-1", "sphere", None), ("linear", 0, 8, None, "sphere", None),
    ("linear", 8, "8.5", None, "sphere", None), ("linear", 8, 8, None, "gaussian", 2),
    ("linear", 8, 8, None, "gaussian", None), ("cosine", 8, 8, None, "sphere", None),
    ("linear", 8, 8, None, "uniform", None),
])
def test_check_finite_rejects(args):
    with pytest.raises(ValueError):
        A.check_finite(*args)


def test_finite_boundaries_accepted():
    A.check_finite("linear", 8, 3)
    A.check_finite("exp", 8, 1, "0.8285")
    A.check_finite("relu", 1, 3, values="gaussian", dv_=3)


def test_single_pair_has_no_interference():
    for k, t in (("linear", None), ("relu", None), ("exp", "3")):
        assert A.inverse_snr_exact(k, 1, 9, t) == 0


@settings(max_examples=6)
@given(st.integers(3, 40), st.sampled_from(["linear", "relu"]))
def test_F_quadrature_matches_closed_form(dd, kernel):
    with mp.workdps(50):
        q = A.F_by_quadrature(kernel, dd, dps=50)
        c = A.inverse_snr_exact(kernel, 2, dd, dps=50)
        assert abs(q - c) <= mp.mpf("1e-40") * abs(c)


@settings(max_examples=6)
@given(st.integers(1, 60), st.sampled_from(["0.9", "1", "1.5", "3", "7.25"]))
def test_exp_F_quadrature(dd, tt):
    with mp.workdps(50):
        q = A.F_by_quadrature("exp", dd, tt, dps=50)
        c = A.inverse_snr_exact("exp", 2, dd, tt, dps=50)
        assert abs(q - c) <= mp.mpf("1e-40") * abs(c)


@pytest.mark.parametrize("kernel, uu, tt", [("linear", "0.3", None), ("relu", "12", None), ("exp", "5", "1.7"),
                                             ("exp", "50", "7")])
def test_step1_gaussian_integral(kernel, uu, tt):
    der = A.derive(kernel)
    subs = {A.u: sp.Rational(uu)}
    if tt:
        subs[A.tau] = sp.Rational(tt)
    with mp.workdps(60):
        cs = mp.mpf(str(sp.N(der.conditional.subs(subs), 60)))
        cq = A.conditional_by_quadrature(kernel, uu, tt)
        assert abs(cq - cs) <= mp.mpf("1e-40") * abs(cs)


@settings(max_examples=25)
@given(st.integers(1, 400), st.floats(1.05, 30), st.integers(2, 10 ** 6))
def test_ratio_function_equals_exact_over_leading(dd, tt, n):
    with mp.workdps(50):
        r = A.exp_ratio_exact_over_leading(dd, repr(tt), n)
        e = A.inverse_snr_exact("exp", n, dd, repr(tt)) / A.inverse_snr_leading("exp", n, dd, repr(tt))
        assert abs(r - e) <= mp.mpf("1e-40") * e


def test_ratio_at_sqrt_d_tends_to_e4():
    ser, lim = A.exp_sqrt_d_asymptotics()
    assert lim == 4
    rs = [A.exp_ratio_exact_over_leading(dd) for dd in (16, 256, 4096, 10 ** 6)]
    assert all(a < b for a, b in zip(rs, rs[1:]))
    assert abs(rs[-1] - mp.e ** 4) < 1.1          # 4 − 56/(3·1000) in the log
    assert 10.8 < A.exp_ratio_exact_over_leading(64) < 10.9


def test_fixed_tau_ratio_grows_exponentially():
    r64, r128 = A.exp_ratio_exact_over_leading(64, "2"), A.exp_ratio_exact_over_leading(128, "2")
    # log ratio is linear in d at fixed τ: d (s − ½ log(1+2s)) with s = ½
    assert abs(mp.log(r128) - 2 * mp.log(r64)) < mp.mpf("1e-40")
    assert abs(mp.log(r64) / 64 - (mp.mpf("0.5") - mp.log(2) / 2)) < mp.mpf("1e-40")


@settings(max_examples=15)
@given(st.integers(2, 60), st.floats(0.01, 100))
def test_dimension_for_target_solves(k, target):
    with mp.workdps(50):
        n = mp.mpf(10) ** k
        c = mp.mpf(repr(target))
        de = A.dimension_for_target("exp", n, repr(target))
        x = mp.sqrt(de)
        if (n - 1) > c:            # otherwise d = 1 (F = 1) already meets the target
            val = (n - 1) * (1 + 4 * (x - 1) / x ** 2) ** (-de / 2)
            assert abs(val / c - 1) < mp.mpf("1e-30")
        else:
            assert de == 1
        dl = A.dimension_for_target("exp", n, repr(target), "leading")
        assert abs(n * mp.exp(-2 * (mp.sqrt(dl) - 1)) / c - 1) < mp.mpf("1e-30")


def test_linear_dimension_for_target_is_proportional_to_N():
    for n in (10, 1000, 10 ** 6):
        de = A.dimension_for_target("linear", n, 2)
        assert A.inverse_snr_exact("linear", n, 3, dps=30) > 0
        assert abs((n - 1) / (de - 2) - 2) < 1e-30


def test_curves_shapes():
    lead, ex = A.inverse_snr_curve("relu", 16, [4, 8, 16])
    assert len(lead) == len(ex) == 3 and all(e > 0 for e in ex)
    assert ex == pytest.approx([(n - 1) / 28 for n in (4, 8, 16)], rel=1e-14)
    assert A.exp_ratio_curve([4, 16]) == pytest.approx([float(A.exp_ratio_exact_over_leading(4)),
                                                        float(A.exp_ratio_exact_over_leading(16))])
    assert math.isclose(lead[0], 4 / 32)
