"""Figures: check the data each figure plots, and that every figure renders."""
import numpy as np
import pytest

from assocmem.figures import FIGURES, make, render
from assocmem.protocol import PUBLISHED


def test_fig3a_data():
    d = FIGURES["bl_fig3a"].data()
    assert len(d["step"]) == 112
    assert round(float(d["p_ab"]["dense"][-1]), 5) == PUBLISHED["p_ab_final"]["dense"]
    assert round(float(d["p_ab"]["reset"][-1]), 5) == PUBLISHED["p_ab_final"]["reset"]


def test_fig3b_data_b_direction_shrinks_during_b_phase():
    d = FIGURES["bl_fig3b"].data()
    vb = d["var_b"]["dense"]
    assert vb[51] < 0.1 * vb[0]
    # dense BL constrains B more tightly than the diagonal ablation does
    assert d["var_b"]["dense"][51] < d["var_b"]["diag"][51]


def test_fig6_gain_line_is_the_long_run_gain():
    d = FIGURES["bl_fig6_gain"].data()
    assert d["gain"]["dense"][-1] == pytest.approx(d["g_inf"], rel=1e-10)


def test_fig6_overlap_ordering():
    d = FIGURES["bl_fig6_overlap"].data()
    f = d["final"]
    assert np.all(f["reset"] <= f["diag"] + 1e-12) and np.all(f["diag"] <= f["dense"] + 1e-12)


def test_iso_data():
    d = FIGURES["bl_iso_ablation"].data()
    assert np.all(d["margin"] < 0) and d["bl_margin"] > 0.4


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_figure_renders(name, tmp_path):
    paths = render(name, tmp_path, formats=("png",))
    png, cap = paths
    assert png.stat().st_size > 5000
    assert len(cap.read_text()) > 40


def test_make_returns_figure_and_data():
    fig, data = make("bl_fig3a")
    assert fig.axes and "p_ab" in data
