"""theory/bl_families.py, bl_capacity.py, bl_dynamics.py, bl_tables.py."""
from fractions import Fraction

import mpmath as mp
import pytest
import sympy as sp

from assocmem.theory import bl_capacity, bl_dynamics, bl_families, bl_tables


def _all_hold(d):
    res = d.verify()
    assert res and all(res.values()), [k for k, v in res.items() if not v]


@pytest.mark.parametrize("build", [bl_families.delta_reset, bl_families.additive, bl_families.delta_plateau,
                                   bl_capacity.capacity, bl_dynamics.complex_dynamics, bl_dynamics.cost])
def test_derivations_hold(build):
    _all_hold(build())


def test_additive_covariance_is_not_zero():
    d = bl_families.additive()
    assert d.objects["trace_C1_example"] == sp.Rational(1, 2)
    C = bl_families.additive_covariance_mp([[1, 0], [0, 1]], lam=1, r2=1)
    assert C[0, 0] == mp.mpf("0.5") and C[1, 1] == mp.mpf("0.5")


def test_plateau_mp_limit():
    with mp.workdps(60):
        b = bl_families.plateau_mp("0.3", "0.1", 1, "0.92", "0.5", 400)
        assert abs(b - (mp.mpf("0.1") - mp.mpf("0.92") * (mp.mpf("0.3") - 1))) < mp.mpf(10) ** -50


def test_capacity_rank_nullity():
    assert bl_capacity.rank_nullity(8, 8) == {"rank": 8, "solvable_for_all_V": True, "unique": True,
                                              "solution_set_dimension_per_column": 0, "left_null_dimension": 0}
    assert bl_capacity.rank_nullity(8, 4)["solution_set_dimension_per_column"] == 4
    r = bl_capacity.rank_nullity(4, 9)
    assert not r["solvable_for_all_V"] and r["left_null_dimension"] == 5


def test_op_count_polynomial_predicts_new_sizes():
    d = bl_dynamics.cost()
    D, m, G = sp.symbols("D m G", positive=True, integer=True)
    f = d.objects["fitted"]
    for Dv, mv, Gv in [(11, 6, 3), (16, 16, 4), (3, 9, 1)]:
        assert f.subs({D: Dv, m: mv, G: Gv}) == bl_dynamics.op_count(Dv, mv, Gv)["total"]
    with pytest.raises(ValueError, match="G=4 must divide m=6"):
        bl_dynamics.op_count(4, 6, 4)


def test_tables_arithmetic():
    ch = bl_tables.table2_changes()
    assert str(bl_tables.round_half_up(ch["ar_hit_ppl_BL_vs_GDN"])) == "-23.48"
    assert str(bl_tables.round_half_up(ch["all_ppl_BL_vs_GDN"])) == "6.72"
    d6 = bl_tables.table6_differences()
    assert d6["BL_minus_GDN-zero"]["8192"] == Fraction(319, 100)
    inc = bl_tables.table7_increases()
    assert [str(bl_tables.round_half_up(x)) for x in inc["SlimPajama-heldout"]["range"]] == ["2.30", "2.38"]
    chk = bl_tables.abstract_range_check()
    assert chk["SlimPajama-heldout"]["entirely_below_claim"]
    assert chk["WikiText-103"]["within_claim_at_one_decimal"]
    # the source is recorded with the data
    assert "2605.31163" in bl_tables.load_tables()["source"]


def test_exact_decimal_parsing():
    assert bl_tables.F("12.34") == Fraction(1234, 100)
    assert str(bl_tables.round_half_up(Fraction(2745, 1000))) == "2.75"
