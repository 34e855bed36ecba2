"""The same-key steady state: ``bl.steady_state``, ``bl.steady_state_expansion`` (BL App. E.2, Eq. 42, p.19).

sympy and mpmath from :mod:`assocmem.theory.bl_steady_state` (fixed point, gain,
contraction rate, Möbius closed form, the series in κ = r²/ℓ²) against the
recurrence iterated at 60 digits; numpy: the filter's gains after many writes of
one key (:func:`numerics.bl_analysis.same_key_run`).
"""
from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import numpy as np

from assocmem.claims._common import DPS, MIN_DIGITS, SEED, digits, rel, sympy_derivation, unit_rational
from assocmem.numerics.bl_analysis import same_key_run
from assocmem.registry import Evidence
from assocmem.theory import bl_mp
from assocmem.theory import bl_steady_state as ss
from assocmem.theory.bl_common import RationalSampler, to_mp


def _steady_params():
    """The paper's (r², ℓ²) plus seeded random admissible ones (rationals)."""

    rs = RationalSampler(SEED)
    out = [(Fraction(1, 20), Fraction(1, 20))]
    for _ in range(4):
        l2 = rs.log_uniform("0.01", "1")
        kap = rs.log_uniform("0.05", "20")
        out.append((kap * l2, l2))
    return out


def steady_state(ev: Evidence) -> None:
    d = ss.steady_state()
    sympy_derivation(ev, d)
    # --- mpmath: closed forms vs the recurrence iterated at 60 digits ----------
    worst_x, worst_g, worst_rate, worst_mob = mp.inf, mp.inf, mp.inf, mp.inf
    key = unit_rational(2, 1)                                  # (3/5, 4/5)
    for r2, l2 in _steady_params():
        with mp.workdps(DPS):
            xi, gi, rate = ss.x_inf_mp(r2, l2, DPS), ss.g_inf_mp(r2, l2, DPS), ss.rate_mp(r2, l2, DPS)
            n = int(mp.ceil(62 * mp.log(10) / -mp.log(rate))) + 5      # enough steps for 60 digits
            xs = ss.iterate_map_mp(r2, l2, 3, n, DPS)
            worst_x = min(worst_x, digits(xs[-1], xi))
            tr = bl_mp.bl_filter_mp([to_mp(key)] * n, [[1]] * n, l2=to_mp(l2), r2=to_mp(r2), p0=3, dps=DPS)
            worst_g = min(worst_g, digits(tr.gain[-1], gi))
            f = lambda x: to_mp(r2) * x / (to_mp(r2) + x) + to_mp(l2)   # noqa: E731
            worst_rate = min(worst_rate, digits(mp.diff(f, xi), rate))
            for k in (1, 7, 23):
                worst_mob = min(worst_mob, digits(ss.x_n_closed_mp(r2, l2, 3, k, DPS), xs[k]))
    ev.holds("mpmath", f"x∞ closed form = iterated map (≥ {MIN_DIGITS} digits, 5 settings)", worst_x >= MIN_DIGITS,
             computed=float(worst_x))
    ev.holds("mpmath", f"g∞ closed form = gain of the D=2 filter iterated in mpmath (≥ {MIN_DIGITS} digits)",
             worst_g >= MIN_DIGITS, computed=float(worst_g))
    ev.holds("mpmath", f"contraction f'(x∞) (numerical derivative) = (1 − g∞)² (≥ 40 digits)",
             worst_rate >= 40, computed=float(worst_rate))
    ev.holds("mpmath", f"Möbius closed form x_n = iterated x_n, n = 1, 7, 23 (≥ {MIN_DIGITS} digits)",
             worst_mob >= MIN_DIGITS, computed=float(worst_mob))
    with mp.workdps(DPS):
        g_paper = ss.g_inf_mp("0.05", "0.05", DPS)
        golden = (mp.sqrt(5) - 1) / 2
        ev.holds("mpmath", "g∞(0.05, 0.05) = (√5−1)/2 to 60 digits", digits(g_paper, golden) >= 59,
                 computed=mp.nstr(g_paper, 20))
    ev.close("mpmath", "published g∞ ≈ 0.618034 (6 decimals)", float(g_paper), 0.618034, abs_tol=5e-7)
    # --- numpy: the model's filter --------------------------------------------
    rng = np.random.default_rng(SEED)
    l2s = 10.0 ** rng.uniform(-2, 0, size=16)
    r2s = l2s * 10.0 ** rng.uniform(-1.3, 1.3, size=16)
    p0s = rng.uniform(0.0, 5.0, size=16)
    run = same_key_run(r2s, l2s, p0s, T=400, D=3, seed=SEED)
    g_th = ss.g_inf_value(r2s, l2s)
    ev.close("numpy", "float64 filter gain after 400 writes = g∞ (16 random settings)",
             rel(run["gain"][:, -1], g_th), 0.0, abs_tol=1e-12)
    # contraction measured from the simulated errors: (x_{t+1} − x∞)/(x_t − x∞)
    x_th = np.array([float(ss.x_inf_mp(Fraction(float(r)), Fraction(float(l)))) for r, l in zip(r2s, l2s)])
    err = run["x"] - x_th[:, None]
    rates_measured, rates_th = [], []
    for i in range(16):
        t = int(np.argmax(np.abs(err[i]) < 1e-6 * x_th[i]))
        if t > 0 and abs(err[i, t]) > 1e-9 * x_th[i]:
            rates_measured.append(err[i, t + 1] / err[i, t])
            rates_th.append((1 - g_th[i]) ** 2)
    ev.close("numpy", "measured contraction (x_{t+1}−x∞)/(x_t−x∞) = (1 − g∞)² (where error ≈ 1e-6)",
             rel(rates_measured, rates_th), 0.0, abs_tol=1e-4, note=f"{len(rates_measured)} settings")
    # edge cases: ℓ² = 0 (no floor, 1/n decay), tiny r² (g∞ → 1)
    r0 = same_key_run(0.05, 0.0, 2.0, T=200, D=3, seed=SEED)
    tt = np.arange(200)
    g0_closed = 2.0 / (0.05 + (tt + 1) * 2.0)     # g_t = x_t/(r²+x_t), x_t = x0 r²/(r² + t x0), x0 = p0
    ev.close("numpy", "ℓ² = 0: g_t = x0/(r² + (t+1)x0) → 0 (no steady floor)", rel(r0["gain"], g0_closed), 0.0,
             abs_tol=1e-12)
    rt = same_key_run(1e-12, 0.05, 3.0, T=50, D=3, seed=SEED)
    ev.close("numpy", "tiny r² = 1e-12: gain = g∞ ≈ 1 − r²/ℓ²", 1.0 - rt["gain"][-1],
             1.0 - float(ss.g_inf_value(1e-12, 0.05)), rel_tol=1e-6)
    ev.record(g_inf_paper=mp.nstr(g_paper, 30), contraction_rate_paper=mp.nstr(ss.rate_mp("0.05", "0.05"), 20),
              mpmath_min_digits={"x_inf": float(worst_x), "g_inf": float(worst_g), "rate": float(worst_rate),
                                 "mobius": float(worst_mob)})
    ev.summary = (f"sympy: fixed point, g∞ = 2/(1+√(1+4κ)), exactly (√5−1)/2 at r²=ℓ², rate (1−g∞)² "
                  f"(= 1/φ⁴ ≈ 0.1459); mpmath ≥ {float(min(worst_x, worst_g, worst_mob)):.0f} digits vs the "
                  f"iterated recurrence; numpy gains = g∞ to 1e-12; ℓ²=0 and tiny r² edge cases")


def steady_state_expansion(ev: Evidence) -> None:
    d = ss.steady_state_expansion()
    sympy_derivation(ev, d)
    ev.refutes("sympy", "printed first-order coefficient −1/2 (g∞ ≈ 1 − r²/(2ℓ²))", -0.5,
               float(d.objects["first_order_coefficient"]), abs_tol=0.1,
               note="exact series: 1 − κ + 2κ² − 5κ³ + …, κ = r²/ℓ²")
    rs = RationalSampler(SEED + 7)
    worst_ratio, printed_gap_min = 0.0, np.inf
    with mp.workdps(DPS):
        for _ in range(6):
            kap = rs.log_uniform("1e-4", "1e-2")
            g = ss.g_inf_mp(kap, 1, DPS)
            k = mp.mpf(kap.numerator) / kap.denominator
            err_correct = abs(g - (1 - k))
            err_printed = abs(g - (1 - k / 2))
            ev.holds("mpmath", f"κ = {float(kap):.3g}: |g∞ − (1 − κ)| ≤ 2κ²", err_correct <= 2 * k * k,
                     computed=mp.nstr(err_correct, 8), expected=mp.nstr(2 * k * k, 8))
            ev.refutes("mpmath", f"κ = {float(kap):.3g}: printed 1 − κ/2", float(1 - k / 2), float(g),
                       abs_tol=float(2 * k * k), note="the printed form is off by ≈ κ/2, far outside O(κ²)")
            worst_ratio = max(worst_ratio, float(err_correct / (k * k)))
            printed_gap_min = min(printed_gap_min, float(err_printed / k))
    ev.record(series=str(d.objects["series"]), correct_first_order=-1, printed_first_order=-0.5,
              max_error_of_1_minus_kappa_over_kappa2=worst_ratio, min_printed_error_over_kappa=printed_gap_min)
    ev.summary = ("printed 1 − r²/(2ℓ²) is wrong: g∞ = 1 − κ + 2κ² − 5κ³ + 14κ⁴ … (signed Catalan numbers, "
                  f"κ = r²/ℓ² < 1/4); mpmath at κ ∈ [1e-4, 1e-2]: error of 1 − κ ≤ {worst_ratio:.2f}κ², "
                  f"printed form off by ≥ {printed_gap_min:.3f}κ")
