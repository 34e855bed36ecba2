"""Figures of the associative-memory paper (AM §2.1 inverse SNR, Theorem 1, App. D.3)."""
from __future__ import annotations

import time

import numpy as np

from assocmem.numerics.am_deltaformer import blockwise_cost_curve, deltaformer_blockwise
from assocmem.numerics.am_snr import mc_curve
from assocmem.numerics.am_swap import tracking_curve
from assocmem.theory.am_snr import exp_ratio_curve, inverse_snr_curve

from .core import COLORS, data_for, figure

SNR_D = 32
SNR_N = (2, 4, 8, 16, 32, 64, 128)
SNR_TAU = 4.0


@figure("am_snr", "Inverse SNR E[||r||^2/(c^2 ||v_i||^2)] against N/d for i.i.d. standard Gaussian keys "
        "(d = 32, equal-norm values): the paper's leading order (dashed), the exact finite-N, finite-d value from "
        "the sympy/mpmath derivation (solid) and a Monte Carlo that forms r and c literally (points, ±2 s.e.). "
        "Exponential kernel at tau = 4, where the per-memory ratio is heavy-tailed (finite variance, but "
        "the Monte Carlo mean converges slowly).", size=(6.8, 2.3))
def _draw_snr(d, fig):
    axes = fig.subplots(1, 3)
    for ax, k in zip(axes, ("linear", "relu", "exp")):
        x = np.asarray(d["N"]) / d["d"]
        ax.plot(x, d[k]["leading"], ls="--", color=COLORS["leading"], label="leading order")
        ax.plot(x, d[k]["exact"], color=COLORS["exact"], label="exact")
        ax.errorbar(x, d[k]["mc_mean"], yerr=2 * np.asarray(d[k]["mc_se"]), fmt="o", ms=2.5,
                    color=COLORS["mc"], label="Monte Carlo")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("$N/d$")
        ax.set_title({"linear": "linear", "relu": "ReLU", "exp": rf"exp, $\tau={d['tau']:g}$"}[k])
    axes[0].set_ylabel(r"SNR$^{-1}$")
    axes[0].legend(loc="upper left")
    fig.tight_layout()


@data_for("am_snr")
def snr_data(samples: int = 3000, d: int = SNR_D, tau: float = SNR_TAU, ns=SNR_N):
    """The figure's curves; the defaults are the caption's setting (sliders pass others)."""
    out = {"d": d, "N": list(ns), "tau": tau}
    for k in ("linear", "relu", "exp"):
        t = tau if k == "exp" else None
        lead, ex = inverse_snr_curve(k, d, ns, t)
        m, s = mc_curve(k, d, ns, tau=t, samples=samples, seed=7)
        out[k] = {"leading": lead, "exact": ex, "mc_mean": m.tolist(), "mc_se": s.tolist()}
    return out


@figure("am_snr_exp_ratio", "Exponential kernel at tau = sqrt(d): exact inverse SNR divided by the paper's "
        "leading order N exp(-2(tau-1)d/tau^2). The ratio does not tend to 1; it climbs towards e^4 (dotted) "
        "because the key norms ||k_i||^2 fluctuate around d by O(sqrt d) inside the exponential.")
def _draw_ratio(d, fig):
    ax = fig.add_subplot()
    ax.semilogx(d["d"], d["ratio"], "o-", ms=3, color=COLORS["exact"], label="exact / leading")
    ax.axhline(np.exp(4), ls=":", color="0.4", label="$e^4$")
    ax.set_xlabel("key dimension $d$  ($\\tau=\\sqrt{d}$)")
    ax.set_ylabel("ratio")
    ax.legend(loc="lower right")


@data_for("am_snr_exp_ratio")
def ratio_data():
    dims = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536]
    return {"d": dims, "ratio": exp_ratio_curve(dims)}


@figure("am_swap", "State-swap theorem: a long random sequence of swaps written into the memory (write key "
        "k_a - k_b, value 0), with near-orthogonal keys (max |k_i^T k_j| <= 0.12). After each swap, the number of "
        "positions whose read-out decodes to the wrong element. The exact kernel tracks the permutation "
        "with zero errors; the linear and two-decimal rounding kernels lose it.")
def _draw_swap(d, fig):
    ax = fig.add_subplot()
    x = np.arange(1, len(d["exact"]["mismatches"]) + 1)
    for k, lab in (("exact", "exact kernel $f$"), ("round2", "round to 2 decimals"), ("linear", "linear")):
        ax.plot(x, d[k]["mismatches"], color=COLORS.get(k, "k"), label=lab)
    ax.set_xlabel("number of swaps")
    ax.set_ylabel(f"wrong read-outs (of n = {d['n']})")
    ax.set_title(f"n = {d['n']}, d = {d['d']}, max|$k_i^\\top k_j$| = {d['max_abs_inner']:.3f}")
    ax.legend(loc="center right")


@data_for("am_swap")
def swap_data():
    return tracking_curve(32, 400, seed=3)


@figure("am_deltaformer_chunk", "Blockwise DeltaFormer solve U = (I + A)^{-1} V with chunk size C (T = 512, d = d_v = 32): "
        "counted multiply-adds of the run (left axis) and measured CPU time (right axis). T/C sequential "
        "block steps; the work is O(T^2 d + T C d + T C^2).")
def _draw_chunk(d, fig):
    ax = fig.add_subplot()
    ax.loglog(d["chunk"], d["total"], "o-", ms=3, color=COLORS["exact"], label="counted work")
    ax.set_xlabel("chunk size $C$")
    ax.set_ylabel("multiply-adds")
    ax2 = ax.twinx()
    ax2.loglog(d["chunk"], d["seconds"], "s--", ms=3, color=COLORS["mc"], label="CPU time")
    ax2.set_ylabel("seconds")
    ax2.spines["right"].set_visible(True)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center")


@data_for("am_deltaformer_chunk")
def chunk_data(T: int = 512, d: int = 32, repeats: int = 3):
    chunks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    out = blockwise_cost_curve(T, d, d, chunks)
    rng = np.random.default_rng(0)
    K = rng.standard_normal((T, d)) / np.sqrt(d)
    V = rng.standard_normal((T, d))
    secs = []
    for C in chunks:
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            deltaformer_blockwise(K, V, chunk=C, beta=0.5)
            best = min(best, time.perf_counter() - t0)
        secs.append(best)
    out["seconds"] = secs
    return out
