"""Figures of the deterministic collision experiment (BL Fig. 3(a,b), Fig. 6, App. E.4.2)."""
from __future__ import annotations

import numpy as np

from assocmem.numerics.collision import run_collision
from assocmem.protocol import PAPER

from .core import COLORS, LABELS, data_for, figure, shade_phases


@figure("bl_fig3a", "Pairwise retrieval p^{AB} = e^{y_B}/(e^{y_A}+e^{y_B}) read at k_B after every step of the "
        "App. E.4 protocol (rho = 0.92, P0 = 3I, r^2 = l^2 = 0.05). Shaded: B reinforcement (13-52) and A writes "
        "(53-112). Computed by the float64 numpy filter family; BL ends at 0.72309 as App. E.4 states "
        "(the main-text Fig. 3(a) draws about 0.60; see bl.fig3a_plateau).")
def _draw_fig3a(d, fig):
    ax = fig.add_subplot()
    t = d["step"]
    for v in ("dense", "diag", "reset", "linear"):
        ax.plot(t, d["p_ab"][v], color=COLORS[v], label=LABELS[v])
    ax.axhline(0.5, color="0.5", lw=0.6, ls=":")
    shade_phases(ax, d["phases"])
    ax.set_xlabel("step $t$")
    ax.set_ylabel(r"$p^{AB}_t$ at $k_B$")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="lower left")


@data_for("bl_fig3a")
def fig3a_data(protocol=PAPER):
    """The figure's curves for ``protocol`` (default: the paper's setting)."""
    runs = run_collision(protocol, variants=("dense", "diag", "reset", "linear"))
    return {"step": np.arange(1, protocol.T + 1), "phases": protocol.phases(),
            "p_ab": {v: r.p_ab for v, r in runs.items()}}


@figure("bl_fig3b", "Posterior variance along k_A and k_B (k^T P_t k after the update at step t), dense BL vs the "
        "diagonal-covariance ablation. B reinforcement shrinks the B direction; with the dense covariance the "
        "later A writes are steered into the part of k_A orthogonal to k_B.")
def _draw_fig3b(d, fig):
    ax = fig.add_subplot()
    t = d["step"]
    for v, ls in (("dense", "-"), ("diag", "--")):
        ax.plot(t, d["var_a"][v], color=COLORS["reset"], ls=ls, label=f"A direction, {LABELS[v]}")
        ax.plot(t, d["var_b"][v], color=COLORS["dense"], ls=ls, label=f"B direction, {LABELS[v]}")
    shade_phases(ax, d["phases"])
    ax.set_yscale("log")
    ax.set_xlabel("step $t$")
    ax.set_ylabel(r"$k^\top P_t\, k$")
    ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.28))


@data_for("bl_fig3b")
def fig3b_data():
    runs = run_collision(PAPER, variants=("dense", "diag"), uncertainty=True)
    return {"step": np.arange(1, PAPER.T + 1), "phases": PAPER.phases(),
            "var_a": {v: r.var_a for v, r in runs.items()}, "var_b": {v: r.var_b for v, r in runs.items()}}


@figure("bl_fig6_gain", "Scalar write gain g_t = k^T Pbar k/(r^2 + k^T Pbar k) over the protocol. BL's gain jumps when "
        "the written address changes and relaxes to the steady state g_inf = x_inf/(r^2 + x_inf) "
        "(dotted; (sqrt 5 - 1)/2 at r^2 = l^2); reset and linear attention keep 0.5.")
def _draw_fig6_gain(d, fig):
    ax = fig.add_subplot()
    for v in ("dense", "diag", "reset", "linear"):
        ax.plot(d["step"], d["gain"][v], color=COLORS[v], label=LABELS[v],
                ls="--" if v == "linear" else "-")
    ax.axhline(d["g_inf"], color="0.3", ls=":", lw=0.8, label=r"$g_\infty$")
    shade_phases(ax, d["phases"])
    ax.set_xlabel("step $t$")
    ax.set_ylabel("gain $g_t$")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower left", ncol=2)


@data_for("bl_fig6_gain")
def fig6_gain_data():
    runs = run_collision(PAPER, variants=("dense", "diag", "reset", "linear"))
    r2, l2 = PAPER.r2, PAPER.l2
    # The steady-state line from the fixed point of the same-key variance map
    # x -> r² x/(r² + x) + ℓ² (App. E.2, Eq. 42), solved here by its quadratic.
    x = (l2 + np.sqrt(l2 ** 2 + 4 * r2 * l2)) / 2
    return {"step": np.arange(1, PAPER.T + 1), "phases": PAPER.phases(),
            "gain": {v: r.gain for v, r in runs.items()}, "g_inf": x / (r2 + x)}


@figure("bl_fig6_overlap", "Final pairwise retrieval p^{AB}(112) against the key overlap rho (other settings as in "
        "App. E.4). The diagonal-covariance ablation lies between dense BL and reset at every rho; dense BL too "
        "degrades as rho -> 1, and at rho = 1 (identical keys) the last write wins.")
def _draw_fig6_overlap(d, fig):
    ax = fig.add_subplot()
    for v in ("dense", "diag", "reset"):
        ax.plot(d["rho"], d["final"][v], color=COLORS[v], label=LABELS[v])
    ax.axhline(0.5, color="0.5", lw=0.6, ls=":")
    ax.axvline(PAPER.rho, color="0.6", lw=0.6, ls="--")
    ax.set_xlabel(r"overlap $\rho = k_A^\top k_B$")
    ax.set_ylabel(r"final $p^{AB}$")
    ax.legend(loc="lower left")


@data_for("bl_fig6_overlap")
def fig6_overlap_data():
    rho = np.linspace(0.0, 1.0, 201)
    runs = run_collision(PAPER, variants=("dense", "diag", "reset"), rho=rho)
    return {"rho": rho, "final": {v: r.p_ab[:, -1] for v, r in runs.items()}}


ISO_C = (0.01, 0.05, 0.10, 0.50, 1.0, 3.0)


@figure("bl_iso_ablation", "Fixed isotropic prior Pbar = cI (App. E.4.2): the write gain c/(r^2 + c) and the final "
        "margin Delta = 2p^{AB} - 1 for each c; every c ends with a negative margin, while BL (dashed) keeps "
        "+0.446.", size=(3.4, 2.2))
def _draw_iso(d, fig):
    ax1, ax2 = fig.subplots(1, 2)
    ax1.semilogx(d["c"], d["gain"], "o-", color=COLORS["iso"])
    ax1.set_xlabel("$c$")
    ax1.set_ylabel("gain")
    ax2.semilogx(d["c"], d["margin"], "o-", color=COLORS["iso"], label="isotropic $cI$")
    ax2.axhline(d["bl_margin"], color=COLORS["dense"], ls="--", label="BL")
    ax2.axhline(0, color="0.5", lw=0.6, ls=":")
    ax2.set_xlabel("$c$")
    ax2.set_ylabel(r"final margin $\Delta$")
    ax2.legend(loc="center right")
    fig.tight_layout()


@data_for("bl_iso_ablation")
def iso_data():
    c = np.array(ISO_C)
    iso = run_collision(PAPER, variants=("iso",), iso_c=c)["iso"]
    bl = run_collision(PAPER, variants=("dense",))["dense"]
    return {"c": c, "gain": iso.gain[:, PAPER.first_a - 1], "margin": iso.margin[:, -1],
            "bl_margin": float(bl.margin[-1])}
