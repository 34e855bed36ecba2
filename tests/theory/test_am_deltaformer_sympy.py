"""DeltaFormer algebra (theory/am_deltaformer.py)."""
import math

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.theory import am_deltaformer as D


@pytest.mark.parametrize("T, p, dv, gated", [(3, 2, 2, True), (2, 3, 1, False), (4, 1, 1, True)])
def test_kernel_recursion_is_the_feature_delta_rule(T, p, dv, gated):
    assert all(r.is_zero_matrix for r in D.equivalence_residuals(T, p, dv, gated))


def test_general_model_gap_is_the_kernel_mismatch():
    gap = D.general_model_gap()[0]
    a = sp.symbols("a0_0 a0_1", real=True)
    b0 = sp.symbols("b0_0 b0_1", real=True)
    w1 = sp.symbols("w1_0 w1_1", real=True)
    k1 = a[0] * w1[0] + a[1] * w1[1]          # κ1(k_1, w_2) = φ1(k_1)ᵀ φ1(w_2)
    b1 = sp.symbols("b1_0 b1_1", real=True)
    k2 = b0[0] * b1[0] + b0[1] * b1[1]        # κ2(k_1, k_2)
    assert gap != 0
    # the gap is a multiple of κ1(k_1, w_2) − κ2(k_1, k_2)
    assert sp.simplify(gap / (k1 - k2)).free_symbols.isdisjoint(set(a) | set(w1))


@pytest.mark.parametrize("T", [1, 2, 4])
def test_triangular_solve(T):
    assert D.triangular_residual(T, 2).is_zero_matrix


@pytest.mark.parametrize("T, C", [(4, 2), (5, 2), (4, 3), (3, 5), (4, 1)])
def test_blockwise_forward_substitution(T, C):
    assert D.blockwise_residual(T, C, 1).is_zero_matrix


def test_work_closed_form():
    _, total, diff = D.blockwise_work_closed_form()
    assert diff == 0


@settings(max_examples=40)
@given(st.integers(1, 30), st.integers(1, 12), st.integers(1, 9), st.integers(1, 9))
def test_work_sum_matches_closed_form_when_C_divides_T(m, C, d, dv):
    T = m * C
    w = D.blockwise_work(T, C, d, dv)
    assert w["total"] == (d + dv) * T * (T + C) + T * C * (C - 1) // 2
    assert w["sequential_steps"] == m


@settings(max_examples=40)
@given(st.integers(1, 200), st.integers(1, 64))
def test_sequential_steps_ceil(T, C):
    assert D.blockwise_work(T, C, 2, 2)["sequential_steps"] == math.ceil(T / C)


def test_big_o_ratio_bounded():
    rs = [D.work_big_o_ratio(512, C, 16) for C in (1, 8, 64, 512)]
    assert all(0.5 <= r <= 3 for r in rs)
