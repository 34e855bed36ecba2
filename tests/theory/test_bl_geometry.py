"""theory/bl_geometry.py: cross shrinkage, rotation angle, ρ → 1 vs ρ = 1."""
from fractions import Fraction

import mpmath as mp
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import bl_geometry as geo
from assocmem.theory import bl_mp
from assocmem.theory.bl_common import mp_digits, to_mp


def _all_hold(d):
    res = d.verify()
    assert all(res.values()), [k for k, v in res.items() if not v]


@pytest.mark.parametrize("D", [2, 3])
def test_cross_shrinkage(D):
    _all_hold(geo.cross_shrinkage(D))


def test_rotation_equivariance():
    _all_hold(geo.rotation_equivariance())


def test_rotation_derivation_and_limits():
    d = geo.rotation()
    _all_hold(d)
    assert d.objects["limit_rho_to_1_of_limit"] == sp.pi / 2
    assert d.objects["limit_rho_to_1_at_fixed_n"] == 0


@settings(max_examples=10, deadline=None)
@given(t=st.fractions(min_value=Fraction(1, 20), max_value=Fraction(19, 20), max_denominator=100),
       p0=st.fractions(min_value=Fraction(1, 10), max_value=Fraction(3), max_denominator=100),
       r2=st.fractions(min_value=Fraction(1, 100), max_value=Fraction(1), max_denominator=100),
       l2=st.one_of(st.just(Fraction(0)), st.fractions(min_value=Fraction(1, 100), max_value=Fraction(1),
                                                       max_denominator=100)),
       n=st.integers(1, 30))
def test_theta_closed_form_vs_recurrence(t, p0, r2, l2, n):
    # rational unit k_A = ((1−t²), 2t)/(1+t²) with k_B = e_1
    kA = [(1 - t * t) / (1 + t * t), 2 * t / (1 + t * t)]
    with mp.workdps(60):
        tr = bl_mp.bl_filter_mp([[1, 0]] * n, [[0]] * n, l2=to_mp(l2), r2=to_mp(r2), p0=to_mp(p0))
        Pbar = mp.matrix(tr.P) + to_mp(l2) * mp.eye(2)
        u = Pbar * mp.matrix(to_mp(kA))
        ang = mp.acos((u.T * mp.matrix(to_mp(kA)))[0] / mp.norm(u))
        assert mp_digits(ang, geo.theta_n_mp(kA[0], p0, r2, l2, n)) >= 50
        assert ang < mp.asin(to_mp(kA[0]))        # approached from below


def test_rate_coefficient_limits():
    c = geo.rate_coefficient_mp("0.92", 3, "0.05", "0.05")
    # n(θ_n − arcsin ρ) at large n approaches c (closed form at n = 1e8)
    n = 10 ** 8
    dev = geo.theta_n_mp("0.92", 3, "0.05", "0.05", n) - mp.asin(mp.mpf("0.92"))
    assert abs(n * dev / c - 1) < 1e-5
    # the constant blows up as ρ → 1: the limit in n is not uniform
    assert abs(geo.rate_coefficient_mp("0.999999", 3, "0.05", "0.05")) > 1000 * abs(c) / 10


def test_delta_b_limit_edges():
    assert geo.delta_b_limit(1.0, 0.3) == 0.0          # ρ = 1: B fully observed through A
    assert geo.delta_b_limit(0.0, 0.3) == 0.3          # orthogonal keys: pure process noise
    assert geo.delta_b_limit(0.5, 0.0) == 0.0          # ℓ² = 0


def test_theta_value_vectorised_matches_mpmath():
    import numpy as np
    ns = np.array([0, 1, 7, 40, 1000])
    for rho, p0, r2, l2 in [(0.92, 3.0, 0.05, 0.05), (0.3, 0.5, 0.2, 0.0), (0.99, 1.0, 1.0, 0.01)]:
        v = geo.theta_n_value(rho, p0, r2, l2, ns)
        ref = [float(geo.theta_n_mp(Fraction(rho), Fraction(p0), Fraction(r2), Fraction(l2), int(n))) for n in ns]
        assert np.allclose(v, ref, rtol=1e-12, atol=1e-14)
    assert np.allclose(geo.theta_n_value(1.0, 3.0, 0.05, 0.05, ns), 0.0)   # ρ = 1: no rotation
