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


def test_am_snr_exact_within_monte_carlo_for_linear_and_relu():
    d = FIGURES["am_snr"].data()
    for k in ("linear", "relu"):
        ex, m, se = (np.asarray(d[k][x]) for x in ("exact", "mc_mean", "mc_se"))
        assert np.all(np.abs(ex - m) <= 5 * se), k


def test_am_ratio_rises_towards_e4():
    d = FIGURES["am_snr_exp_ratio"].data()
    r = np.asarray(d["ratio"])
    assert np.all(np.diff(r) > 0) and r[-1] < np.exp(4) and r[-1] > 0.9 * np.exp(4)


def test_am_swap_exact_kernel_never_errs():
    d = FIGURES["am_swap"].data()
    assert max(d["exact"]["mismatches"]) == 0 and max(d["linear"]["mismatches"]) > 0


def test_am_chunk_work_counts():
    d = FIGURES["am_deltaformer_chunk"].data(T=64, d=8, repeats=1)
    assert d["chunk"][0] == 1 and len(d["seconds"]) == len(d["chunk"])
    assert d["sequential_steps"] == [int(np.ceil(64 / c)) for c in d["chunk"]]


def test_bl_steady_state_two_layers_meet():
    d = FIGURES["bl_steady_state"].data()
    diag = np.diag(d["g_grid"])     # r² = ℓ² on the shared grid
    np.testing.assert_allclose(diag, (np.sqrt(5) - 1) / 2, rtol=1e-12)
    closed = np.interp(np.log(d["kappa_sim"]), np.log(d["kappa"]), d["g_kappa"])
    np.testing.assert_allclose(d["g_sim"], closed, rtol=5e-3)   # interpolation on the plotting grid


def test_bl_rotation_closed_form_matches_filter():
    d = FIGURES["bl_rotation"].data()
    idx = [int(np.where(d["n"] == n)[0][0]) for n in d["n_sim"] if n in d["n"]]
    sel = [i for i, n in enumerate(d["n_sim"]) if n in d["n"]]
    np.testing.assert_allclose(d["sim"][:, sel], d["theory"][:, idx], atol=1e-9)
    assert np.all(d["theory"][:, -1] < np.arcsin(d["rho"]))


def test_bl_shrinkage_reaches_limit():
    d = FIGURES["bl_shrinkage"].data()
    np.testing.assert_allclose(d["delta_B"][:, -1], d["limit"], atol=1e-6)
