"""Figures as functions of their parameters, for the notebooks' sliders.

Each explorer takes the model's parameters and returns ``(fig, data)`` like
:func:`make`; the numbers come from the same package functions the registered
figures and the claim checks use (the figures' own ``data`` functions where one
exists), so a slider never runs a copy of the logic.  :mod:`assocmem.interact`
puts sliders on them.
"""
from __future__ import annotations

import numpy as np

from assocmem.numerics import bl_filter
from assocmem.numerics.bl_analysis import rotation_angles
from assocmem.protocol import PUBLISHED, CollisionProtocol
from assocmem.theory.bl_geometry import theta_n_value
from assocmem.theory.bl_steady_state import g_inf_value

from . import am, bl_collision
from .core import COLORS, STYLE, _once_inline, make, plt


def steady_state(r2: float = 0.05, l2: float = 0.05, p0: float = 1.0, rho: float = 0.92, steps: int = 40):
    """Same-key repetition and write rotation at one setting (BL App. E.2, Prop. 3).

    Left: the write gain ``g_t`` of the float64 filter over ``steps`` writes of one
    unit key (prior ``p0 I``) against the closed-form floor ``g∞(r², ℓ²)``.
    Right: the angle between ``u = P̄ k_A`` and ``k_A`` after ``n`` writes of B,
    closed form (line) and filter (points), against ``arcsin ρ``.
    """
    steps = int(steps)
    keys = np.zeros((steps, 2))
    keys[:, 0] = 1.0
    gains = bl_filter(keys, np.zeros((steps, 1)), l2=l2, r2=r2, p0=p0).gain
    g_inf = float(g_inf_value(r2, l2))
    n = np.unique(np.geomspace(1, 2000, 120).astype(int))
    n_sim = np.array([1, 3, 10, 30, 100, 300, 1000])
    theory = theta_n_value(rho, p0, r2, l2, n)
    sim = rotation_angles(rho, n_sim, p0=p0, r2=r2, l2=l2)
    data = {"r2": r2, "l2": l2, "p0": p0, "rho": rho, "step": np.arange(1, steps + 1), "gain": gains,
            "g_inf": g_inf, "n": n, "theta": theory, "n_sim": n_sim, "theta_sim": sim}
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(6.8, 2.4))
        ax1, ax2 = fig.subplots(1, 2)
        ax1.plot(data["step"], gains, "o-", ms=2, color=COLORS["mc"], label="filter $g_t$")
        ax1.axhline(g_inf, ls="--", color=COLORS["exact"], label=rf"closed form $g_\infty = {g_inf:.4f}$")
        ax1.set_xlabel("write $t$ of the same key")
        ax1.set_ylabel("write gain")
        ax1.set_ylim(0, 1.02)
        ax1.legend(loc="upper right")
        ax2.plot(n, np.degrees(theory), color=COLORS["exact"], label="closed form")
        ax2.plot(n_sim, np.degrees(sim), "o", ms=3, color=COLORS["mc"], label="filter")
        ax2.axhline(np.degrees(np.arcsin(rho)), ls="--", color="0.5", label=r"$\arcsin\rho$")
        ax2.set_xscale("log")
        ax2.set_xlabel("number of B writes $n$")
        ax2.set_ylabel(r"angle$(u, k_A)$ [deg]")
        ax2.legend(loc="lower right")
        fig.suptitle(rf"$r^2={r2:g}$, $\ell^2={l2:g}$, $P_0={p0:g}\,I$, $\rho={rho:g}$", fontsize=8)
        fig.tight_layout()
    _once_inline(fig)
    return fig, data


def collision(rho: float = 0.92, r2: float = 0.05, l2: float = 0.05, p0: float = 3.0):
    """BL Fig. 3(a) (the App. E.4 protocol) at another setting: the registered
    ``bl_fig3a`` figure drawn from ``fig3a_data`` of that protocol."""
    protocol = CollisionProtocol(rho=rho, r2=r2, l2=l2, p0=p0)
    data = bl_collision.fig3a_data(protocol)
    fig, data = make("bl_fig3a", data=data)
    final = {v: float(p[-1]) for v, p in data["p_ab"].items()}
    paper = protocol == CollisionProtocol()
    ref = PUBLISHED["p_ab_final"]
    label = ", ".join(f"{v} {final[v]:.5f}" + (f" [{ref[v]:.5f}]" if paper and v in ref else "")
                      for v in ("dense", "reset", "linear"))
    fig.suptitle(rf"$\rho={rho:g}$, $r^2={r2:g}$, $\ell^2={l2:g}$, $P_0={p0:g}$: $p^{{AB}}(T)$ {label}",
                 fontsize=7)
    return fig, data


def inverse_snr(d: int = am.SNR_D, tau: float = am.SNR_TAU, samples: int = 1000):
    """AM §2.1 at key dimension ``d`` and temperature ``tau``: the registered
    ``am_snr`` figure drawn from ``snr_data`` (leading order, exact, Monte Carlo)."""
    fig, data = make("am_snr", data=am.snr_data(samples=int(samples), d=int(d), tau=float(tau)))
    fig.suptitle(rf"$d={int(d)}$, exp kernel at $\tau={float(tau):g}$, Monte Carlo {int(samples)} samples",
                 fontsize=7, y=1.02)
    return fig, data
