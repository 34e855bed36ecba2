"""Stress-test pieces of theory/am_swap.py: Welch bound, scaled rounding, the
rounding table, the structured keys' coherence, the nonnegative-read obstruction."""
import mpmath as mp
import pytest
import sympy as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assocmem.theory import am_swap as S


def test_frame_identities_are_zero():
    assert all(sp.simplify(r) == 0 for r in S.frame_identities())


def test_welch_derivation():
    n, d = sp.symbols("n d", positive=True)
    bound, coeff, cond = S.welch_derivation()
    assert sp.simplify(bound - (n - d) / (d * (n - 1))) == 0
    assert sp.simplify(coeff - n * (n - 1)) == 0
    assert "tight frame" in cond and "equiangular" in cond
    assert sp.simplify(S.welch_bound_expr() ** 2 - bound) == 0


@pytest.mark.parametrize("n, d, expected", [
    (512, 128, "0.07662141663581953"), (256, 128, None), (128, 128, "0"), (129, 128, "0.0078125"), (2, 1, "1"),
])
def test_welch_values(n, d, expected):
    with mp.workdps(50):
        v = S.welch_bound(n, d)
        if expected is None:
            assert abs(v - 1 / mp.sqrt(255)) < mp.mpf("1e-45")
        else:
            assert abs(v - mp.mpf(expected)) < mp.mpf("1e-15")


def test_welch_rejects_bad_sizes():
    with pytest.raises(ValueError):
        S.welch_bound(1, 3)


def test_round2_cannot_be_exact_on_unit_keys_beyond_d():
    # d = 128: already n = d + 1 forces an overlap >= 1/128 > 0.005
    assert S.welch_min_n(128) == 129
    assert S.welch_bound(129, 128) > mp.mpf("0.005")
    # d <= 200: n = d + 1 suffices (Welch(d+1, d) = 1/d); beyond, more keys are needed
    assert S.welch_min_n(200) == 201 and S.welch_min_n(201) > 202
    assert S.welch_min_n(40000) is None          # d δ² = 1: the bound stays below δ


@settings(max_examples=40)
@given(st.integers(1, 600), st.sampled_from(["0.005", "0.01", "0.05", "0.1"]))
@example(316, "0.05")           # threshold exactly 1501: the bound equals 0.05 there
def test_welch_min_n_is_minimal(d, delta):
    n0 = S.welch_min_n(d, delta)
    dl = sp.Rational(delta)

    def sq(n):          # the squared bound, exactly
        return sp.Rational(n - d, d * (n - 1)) if n > d else 0

    if n0 is None:
        assert d * dl ** 2 >= 1
        return
    assert sq(n0) >= dl ** 2
    if n0 - 1 >= 2:
        assert sq(n0 - 1) < dl ** 2


def test_scaled_rounding():
    c, beta, res = S.scaled_rounding(2)
    assert c == sp.Rational(1, 10) and beta == 100 and res == 0
    c3, beta3, res3 = S.scaled_rounding(3)
    assert sp.simplify(c3 ** 2 - sp.Rational(1, 1000)) == 0 and beta3 == 1000 and res3 == 0


def test_rounding_table():
    rows = S.rounding_table(4)
    assert {i for _, i, _ in rows} == {-2, -1, 0, 1, 2}
    # the binding case: (k_a - k_b).(k_c - k_d) with four distinct indices, ideal 0, four epsilons
    assert max(rows, key=lambda r: r[2]) == ("swap.swap", 0, 4)
    assert min(sp.Rational(1, 2 * l1) for _, _, l1 in rows if l1) == sp.Rational(1, 8)
    table = {(k, i): l1 for k, i, l1 in rows}
    assert table[("init.init", 0)] == 1          # unit keys: needs |g| < 1/2 only
    assert table[("swap.swap", 2)] == 2          # self term 2 - 2 g_ab: needs |g_ab| < 1/4
    assert table[("init.swap", 0)] == 2          # g_ac - g_bc
    assert ("swap.init", 0) not in table         # no init token follows a swap
    # three base indices cannot give the four-term pattern
    assert max(l1 for _, _, l1 in S.rounding_table(3)) == 3


def test_rounding_margin():
    assert S.rounding_margin("0.1155", 128, "1.1102230246251565e-16") > mp.mpf("0.0379")
    assert S.rounding_margin("0.1155", 128, mp.mpf(2) ** -24) > mp.mpf("0.0379")
    assert S.rounding_margin("0.1155", 128, mp.mpf(2) ** -11) < 0        # TF32: worst case not covered
    assert abs(S.rounding_margin("0.125", 128, 0)) < mp.mpf("1e-25")


def test_gauss_sum_lemma():
    for m, count in ((1, 2), (2, 16), (3, 224)):
        checked, bad = S.gauss_sum_lemma(m)
        assert checked == count and bad == []


@pytest.mark.parametrize("D, B, expected", [
    (64, 4, sp.sqrt(2 + sp.sqrt(2)) / 16), (64, 2, sp.sqrt(2) / 16), (64, 3, sp.sqrt(3) / 16), (64, 1, 0),
])
def test_structured_coherence(D, B, expected):
    value, enumerated = S.structured_coherence(D, B)
    assert sp.simplify(value - expected) == 0 and sp.simplify(enumerated - expected) == 0


def test_structured_coherence_below_one_eighth():
    v, _ = S.structured_coherence(64, 4)
    # (16 v)^2 = 2 + sqrt 2 < 4
    assert sp.simplify((16 * v) ** 2 - (2 + sp.sqrt(2))) == 0 and 2 + sp.sqrt(2) < 4
    assert mp.mpf(str(sp.N(v, 30))) < mp.mpf(1) / 8
    v32, _ = S.structured_coherence(32, 2)
    assert sp.simplify(v32 - sp.Rational(1, 8)) == 0     # d = 64: exactly 1/8, not enough


def test_nonnegative_read_obstruction():
    total, w, margins = S.nonnegative_read_obstruction()
    phi_s = sp.Symbol("phi_s", real=True)
    assert sp.simplify(total + 2 * phi_s) == 0
    assert margins == (1, 1) and w[phi_s] == -1
