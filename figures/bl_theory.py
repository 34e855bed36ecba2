"""Figures of the BL analysis (App. E.2): steady-state gain, write rotation, cross shrinkage.

Lines are the closed forms of :mod:`assocmem.theory`; points are float64
simulations of the filter (:mod:`assocmem.numerics`), so each figure shows the
two independent layers meeting.
"""
from __future__ import annotations

import numpy as np

from assocmem.numerics import bl_filter
from assocmem.numerics.bl_analysis import cross_shrinkage_run, rotation_angles
from assocmem.theory.bl_geometry import delta_b_limit, theta_n_value
from assocmem.theory.bl_steady_state import g_inf_value

from .core import COLORS, data_for, figure


def _simulated_long_run_gain(r2, l2, T=600):
    """Same unit key written T times (A = I): the gain of the last write, per (r², ℓ²)."""
    r2, l2 = np.broadcast_arrays(np.asarray(r2, float), np.asarray(l2, float))
    keys = np.zeros(r2.shape + (T, 2))
    keys[..., 0] = 1.0
    tr = bl_filter(keys, np.zeros(r2.shape + (T, 1)), l2=l2[..., None], r2=r2[..., None], p0=1.0)
    return tr.gain[..., -1]


@figure("bl_steady_state", "Steady-state write gain of same-key repetition (App. E.2, Eq. 42). Left: g_inf over "
        "(r^2, l^2); on the diagonal r^2 = l^2 (dashed) it is exactly (sqrt 5 - 1)/2. Right: g_inf against "
        "kappa = r^2/l^2 (closed form, line; 600-step filter simulation, points) with the large-process-noise "
        "asymptote as printed, 1 - kappa/2, and as corrected, 1 - kappa. Far right: the error of each asymptote; the "
        "printed one is off at first order (kappa/2), the corrected one only at second (2 kappa^2).",
        size=(7.0, 2.3))
def _draw_steady(d, fig):
    ax1, ax2, ax3 = fig.subplots(1, 3)
    R, L = np.meshgrid(d["r2"], d["l2"])
    cs = ax1.contourf(R, L, d["g_grid"], levels=np.linspace(0, 1, 21), cmap="viridis")
    ax1.contour(R, L, d["g_grid"], levels=[(np.sqrt(5) - 1) / 2], colors="w", linewidths=0.8)
    ax1.plot(d["r2"], d["r2"], "w--", lw=0.8)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel(r"$r^2$")
    ax1.set_ylabel(r"$\ell^2$")
    fig.colorbar(cs, ax=ax1, label=r"$g_\infty$")
    k = d["kappa"]
    ax2.semilogx(k, d["g_kappa"], color=COLORS["exact"], label=r"exact $g_\infty$")
    ax2.semilogx(d["kappa_sim"], d["g_sim"], "o", ms=3, color=COLORS["mc"], label="filter simulation")
    small = k < 0.6
    ax2.semilogx(k[small], 1 - k[small] / 2, "--", color=COLORS["printed"], label=r"printed $1-\kappa/2$")
    ax2.semilogx(k[small], 1 - k[small], ":", color=COLORS["corrected"], label=r"corrected $1-\kappa$")
    ax2.axhline((np.sqrt(5) - 1) / 2, color="0.6", lw=0.6)
    ax2.set_xlabel(r"$\kappa = r^2/\ell^2$")
    ax2.set_ylabel(r"$g_\infty$")
    ax2.set_ylim(0, 1.02)
    ax2.legend(loc="lower left", fontsize=6)
    exact = d["g_kappa"][small]
    ax3.loglog(k[small], np.abs(1 - k[small] / 2 - exact), "--", color=COLORS["printed"], label="printed")
    ax3.loglog(k[small], np.abs(1 - k[small] - exact), ":", color=COLORS["corrected"], label="corrected")
    ax3.set_xlabel(r"$\kappa$")
    ax3.set_ylabel(r"$|$asymptote $- g_\infty|$")
    ax3.legend(loc="upper left", fontsize=6)
    fig.tight_layout()


@data_for("bl_steady_state")
def steady_data():
    r2 = np.geomspace(1e-3, 10, 81)
    l2 = np.geomspace(1e-3, 10, 81)
    kappa = np.geomspace(1e-3, 1e3, 200)
    kappa_sim = np.geomspace(1e-2, 1e2, 13)
    return {"r2": r2, "l2": l2, "g_grid": g_inf_value(r2[None, :], l2[:, None]),
            "kappa": kappa, "g_kappa": g_inf_value(kappa, 1.0),
            "kappa_sim": kappa_sim, "g_sim": _simulated_long_run_gain(kappa_sim * 0.05, 0.05)}


ROT_RHO = (0.3, 0.6, 0.8, 0.92, 0.98)
ROT_SETTING = {"p0": 3.0, "r2": 0.05, "l2": 0.05}


@figure("bl_rotation", "Angle between the A write direction u = Pbar k_A and k_A after n writes of B (P0 = 3I, "
        "r^2 = l^2 = 0.05, A = I): closed form (lines) and float64 filter (points). The angle tends to "
        "arcsin rho (dashed) from below, as -c/n. At rho = 1 the keys coincide and the angle is 0.")
def _draw_rotation(d, fig):
    ax = fig.add_subplot()
    cmap = matplotlib_cmap()
    for i, rho in enumerate(d["rho"]):
        c = cmap(i / max(1, len(d["rho"]) - 1))
        ax.plot(d["n"], np.degrees(d["theory"][i]), color=c, label=fr"$\rho={rho}$")
        ax.plot(d["n_sim"], np.degrees(d["sim"][i]), "o", ms=2.5, color=c)
        ax.axhline(np.degrees(np.arcsin(rho)), color=c, ls="--", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("number of B writes $n$")
    ax.set_ylabel(r"angle$(u, k_A)$ [deg]")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=6)


def matplotlib_cmap():
    import matplotlib

    return matplotlib.colormaps["viridis"]


@data_for("bl_rotation")
def rotation_data(rho=ROT_RHO, p0=ROT_SETTING["p0"], r2=ROT_SETTING["r2"], l2=ROT_SETTING["l2"]):
    """The figure's curves; the defaults are the caption's setting (sliders pass others)."""
    n = np.unique(np.geomspace(1, 2000, 120).astype(int))
    n_sim = np.array([1, 3, 10, 30, 100, 300, 1000])
    rho = np.atleast_1d(np.asarray(rho, dtype=float))
    setting = {"p0": p0, "r2": r2, "l2": l2}
    theory = theta_n_value(rho[:, None], p0, r2, l2, n[None, :])
    sim = np.stack([rotation_angles(r, n_sim, **setting) for r in rho])
    return {"rho": rho, "n": n, "theory": theory, "n_sim": n_sim, "sim": sim}


SHRINK_RHO = (0.0, 0.5, 0.8, 0.95)


@figure("bl_shrinkage", "Change of B's posterior variance Delta_B = k_B^T P_t k_B - k_B^T P_{t-1} k_B while A is "
        "written repeatedly from a random PSD prior (r^2 = l^2 = 0.05, D = 4): the float64 filter (lines) "
        "approaches (1 - rho^2) l^2 (dashed), the process noise that writes of A cannot remove.")
def _draw_shrinkage(d, fig):
    ax = fig.add_subplot()
    cmap = matplotlib_cmap()
    t = np.arange(1, d["delta_B"].shape[1] + 1)
    for i, rho in enumerate(d["rho"]):
        c = cmap(i / max(1, len(d["rho"]) - 1))
        ax.plot(t, d["delta_B"][i], color=c, label=fr"$\rho={rho}$")
        ax.axhline(d["limit"][i], color=c, ls="--", lw=0.7)
    ax.set_xlabel("number of A writes $t$")
    ax.set_ylabel(r"$\Delta_B$")
    ax.set_ylim(min(-0.05, float(np.min(d["delta_B"][:, 1:])) * 1.1), 0.06)
    ax.legend(loc="lower right", fontsize=6)


@data_for("bl_shrinkage")
def shrinkage_data(n_writes: int = 60):
    rho = np.array(SHRINK_RHO)
    runs = [cross_shrinkage_run(r, r2=0.05, l2=0.05, n_writes=n_writes, seed=5) for r in rho]
    return {"rho": rho, "delta_B": np.stack([r["delta_B"] for r in runs]),
            "limit": np.array([delta_b_limit(float(r), 0.05) for r in rho])}
