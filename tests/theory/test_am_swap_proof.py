"""Theorem 1 proof pieces (theory/am_swap.py)."""
import math

import mpmath as mp
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import am_swap as S


@pytest.mark.parametrize("n, m", [(2, 1), (3, 2), (5, 1)])
def test_induction_step(n, m):
    assert all(r.is_zero_matrix for r in S.induction_step(n, m))


def test_transposition_is_an_involution():
    P = S.transposition(5, 1, 3)
    assert P * P == sp.eye(5) and P.T == P


def test_inner_product_patterns():
    ideals, terms, coef = S.inner_product_patterns(4)
    assert ideals == {-1, 0, 1, 2} and terms == 4 and coef == 4
    # with three base indices a four-index pattern cannot occur
    ideals3, terms3, _ = S.inner_product_patterns(3)
    assert terms3 == 3 and ideals3 <= {-1, 0, 1, 2}


def test_exactness_interval():
    assert S.exactness_condition() == sp.Interval.open(0, sp.Rational(1, 8))


def test_kl_bound():
    e = sp.Symbol("epsilon", positive=True)
    assert all(c >= 0 for c in sp.Poly(S.kl_lower_bound_series(), e).coeffs())


@settings(max_examples=30)
@given(st.integers(2, 10 ** 7), st.sampled_from(["0.05", "0.1", "0.12", "0.124", "0.3"]))
def test_dimension_bound_is_the_smallest_valid(n, eps):
    d = S.dimension_bound(n, eps)
    with mp.workdps(50):
        phi = lambda dd: mp.mpf(n) * (n - 1) * mp.exp(-dd * S.kl(mp.mpf(eps)))  # noqa: E731
        assert phi(d) < 1 <= phi(d - 1)
    # KL ≥ ε²/2 gives the simple bound
    assert d <= 4 * math.log(n) / float(eps) ** 2 + 1


def test_dimension_constant():
    assert abs(S.dimension_constant("0.125") - mp.mpf("255.33")) < mp.mpf("0.01")
