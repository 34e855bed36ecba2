"""theory/bl_steady_state.py: fixed point, golden ratio, contraction, Möbius form, expansion."""
from fractions import Fraction

import mpmath as mp
import numpy as np
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import bl_steady_state as ss
from assocmem.theory.bl_common import mp_digits

pos = st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(10), max_denominator=10_000)


def test_derivation_holds():
    d = ss.steady_state()
    res = d.verify()
    assert all(res.values()), [k for k, v in res.items() if not v]
    assert sp.simplify(d.objects["rate_golden"] - (7 - 3 * sp.sqrt(5)) / 2) == 0


def test_golden_ratio_exact_for_every_equal_noise():
    l2 = sp.Symbol("ell2", positive=True)
    assert sp.simplify(ss.g_inf_expr(l2, l2) - (sp.sqrt(5) - 1) / 2) == 0


def test_expansion_corrects_the_printed_form():
    d = ss.steady_state_expansion(order=7)
    assert all(d.verify().values())
    assert d.objects["first_order_coefficient"] == -1
    assert d.objects["coefficients"][:4] == [1, -1, 2, -5]
    assert d.objects["printed_first_order_coefficient"] != d.objects["first_order_coefficient"]


@settings(deadline=None)
@given(r2=pos, l2=pos)
def test_fixed_point_and_rate_mpmath(r2, l2):
    with mp.workdps(60):
        xi = ss.x_inf_mp(r2, l2)
        f = lambda x: mp.mpf(r2.numerator) / r2.denominator * x / (mp.mpf(r2.numerator) / r2.denominator + x) \
            + mp.mpf(l2.numerator) / l2.denominator  # noqa: E731
        assert mp_digits(f(xi), xi) >= 55
        g = ss.g_inf_mp(r2, l2)
        assert 0 < g < 1
        assert mp_digits(mp.diff(f, xi), (1 - g) ** 2) >= 40
        # x∞ g∞ = ℓ²
        assert mp_digits(xi * g, mp.mpf(l2.numerator) / l2.denominator) >= 55


@settings(deadline=None)
@given(r2=pos, l2=pos, x0=pos, n=st.integers(0, 60))
def test_mobius_closed_form_equals_iteration(r2, l2, x0, n):
    a = ss.x_n_closed_mp(r2, l2, x0, n)
    b = ss.iterate_map_mp(r2, l2, x0, n)[-1]
    assert mp_digits(a, b) >= 50


def test_edge_cases():
    # ℓ² = 0: fixed point 0, x_n = x0 r²/(r² + n x0), gain → 0 like 1/n
    xs = ss.iterate_map_mp("0.05", 0, 3, 100)
    assert mp_digits(xs[100], ss.x_n_closed_mp("0.05", 0, 3, 100)) >= 55
    assert float(ss.g_inf_value(0.05, 0.0)) == 0.0
    # tiny r²: g∞ → 1 with 1 − g∞ ≈ r²/ℓ²
    g = ss.g_inf_mp("1e-20", 1)
    assert abs((1 - g) / mp.mpf("1e-20") - 1) < 1e-15
    # large κ (small process noise): g∞ ≈ 1/√κ
    assert abs(float(ss.g_inf_value(1e6, 1.0)) * 1e3 - 1) < 1e-3
    # vectorised float evaluation agrees with mpmath
    r, l = np.array([0.05, 0.3, 2.0]), np.array([0.05, 0.01, 0.7])
    ref = [float(ss.g_inf_mp(Fraction(float(a)), Fraction(float(b)))) for a, b in zip(r, l)]
    assert np.allclose(ss.g_inf_value(r, l), ref, rtol=1e-14, atol=0)


@settings(deadline=None)
@given(kap=st.fractions(min_value=Fraction(1, 10**5), max_value=Fraction(1, 5), max_denominator=10**6))
def test_series_bounds(kap):
    """0 ≤ g∞ − (1 − κ) ≤ 2κ² for κ < 1/4 (alternating Catalan series)."""
    with mp.workdps(50):
        k = mp.mpf(kap.numerator) / kap.denominator
        g = ss.g_inf_mp(kap, 1)
        assert 0 <= g - (1 - k) <= 2 * k * k
        assert abs(g - (1 - k / 2)) > k / 2 - 2 * k * k
