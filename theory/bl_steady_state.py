r"""Same-key repetition: fixed point, golden-ratio gain, contraction, expansion
(BL App. E.2, Eq. 42, p.19).

With ``A = I``, a unit key written again and again and constant ``r², ℓ²``, the
predicted variance along the key, ``x_t = k^T \bar P_t k``, obeys

.. math::

    x_{t+1} = f(x_t) = \frac{r^2 x_t}{r^2 + x_t} + \ell^2 ,\qquad
    x_\infty = \frac{\ell^2 + \sqrt{\ell^4 + 4 r^2 \ell^2}}{2},\qquad
    g_\infty = \frac{x_\infty}{r^2 + x_\infty}.

Results proved here (sympy, general positive ``r², ℓ²`` unless stated):

* ``x_∞`` is the only non-negative fixed point (the other root is negative);
  ``f`` is increasing and concave, so the iteration converges monotonically from
  any ``x_0 ≥ 0``; the contraction rate at the fixed point is
  ``f'(x_∞) = (1 − g_∞)² ∈ (0, 1)``.
* ``g_∞`` depends on ``κ = r²/ℓ²`` only: ``g_∞ = 2/(1 + √(1 + 4κ))``; at
  ``r² = ℓ²`` it is exactly ``(√5 − 1)/2`` (and the contraction rate ``1/φ⁴``).
* ``x_∞ g_∞ = ℓ²`` (used by the cross-shrinkage limit).
* ``f`` is a Möbius map, so ``x_n`` has a closed form:
  ``(x_n − x_∞)/(x_n − x_-) = K^n (x_0 − x_∞)/(x_0 − x_-)``, ``K = (1 − g_∞)²``,
  ``x_-`` the negative root.
* Edge case ``ℓ² = 0``: the fixed point is 0 with ``f'(0) = 1`` (no contraction):
  ``x_n = x_0 r²/(r² + n x_0)`` exactly, the gain decays like ``1/n``.
* Expansion (:func:`steady_state_expansion`): ``g_∞ = Σ_n (−1)^n C_n κ^n``
  (Catalan numbers, radius ``1/4``) ``= 1 − κ + 2κ² − …``; the paper prints
  ``1 − κ/2``, whose first-order coefficient is wrong.
"""
from __future__ import annotations

import mpmath as mp
import sympy as sp

from .bl_common import Derivation, mpf

r2, l2 = sp.symbols("r2 ell2", positive=True)
kappa = sp.Symbol("kappa", positive=True)
x = sp.Symbol("x", nonnegative=True)


def f_map(xv=x, r2v=r2, l2v=l2):
    """One same-key step of the predicted variance: ``r² x/(r² + x) + ℓ²``."""
    return r2v * xv / (r2v + xv) + l2v


def x_inf_expr(r2v=r2, l2v=l2):
    return (l2v + sp.sqrt(l2v ** 2 + 4 * r2v * l2v)) / 2


def g_inf_expr(r2v=r2, l2v=l2):
    xi = x_inf_expr(r2v, l2v)
    return xi / (r2v + xi)


def g_inf_kappa(k=kappa):
    """``g_∞`` as a function of ``κ = r²/ℓ²``: ``2/(1 + √(1 + 4κ))``."""
    return 2 / (1 + sp.sqrt(1 + 4 * k))


def steady_state() -> Derivation:
    xi = x_inf_expr()
    xm = (l2 - sp.sqrt(l2 ** 2 + 4 * r2 * l2)) / 2
    g = g_inf_expr()
    fp = sp.diff(f_map(), x)
    fpp = sp.diff(f_map(), x, 2)
    rate = fp.subs(x, xi)
    # Möbius closed form: with p = x∞, q = x₋ (Vieta: p + q = ℓ², pq = −ℓ² r²)
    p, q, z = sp.symbols("p q z")
    l2_pq, r2_pq = p + q, -p * q / (p + q)
    K = (r2_pq + q) / (r2_pq + p)
    xn = (p - q * z) / (1 - z)                 # z = K^n τ_0
    xn1 = (p - q * K * z) / (1 - K * z)
    f_pq = r2_pq * xn / (r2_pq + xn) + l2_pq
    # ℓ² = 0 closed form
    n = sp.Symbol("n", integer=True, nonnegative=True)
    x0 = sp.Symbol("x0", positive=True)
    x_n0 = x0 * r2 / (r2 + n * x0)
    golden = (sp.sqrt(5) - 1) / 2
    g_eq = sp.simplify(g.subs(r2, l2))
    return Derivation(
        claim="bl.steady_state",
        statement="x∞ = (ℓ² + √(ℓ⁴ + 4r²ℓ²))/2 is the attracting fixed point of x ↦ r²x/(r²+x) + ℓ²; "
                  "g∞ = x∞/(r²+x∞) = 2/(1+√(1+4κ)), κ = r²/ℓ²; exactly (√5−1)/2 when r² = ℓ²; "
                  "contraction rate f'(x∞) = (1−g∞)²",
        assumptions="A = I, unit key written repeatedly, constant r² > 0, ℓ² > 0 (ℓ² = 0 treated separately)",
        objects={"f": f_map(), "x_inf": xi, "x_minus": xm, "g_inf": g, "g_inf_kappa": g_inf_kappa(),
                 "rate": sp.simplify(rate), "rate_golden": sp.nsimplify(sp.simplify((1 - golden) ** 2)),
                 "x_n_mobius": "(x_n − x∞)/(x_n − x₋) = K^n (x_0 − x∞)/(x_0 − x₋), K = (1 − g∞)²",
                 "x_n_l2_zero": x_n0},
        identities={
            "f(x∞) = x∞": f_map(xi) - xi,
            "x∞ solves x² − ℓ² x − ℓ² r² = 0": sp.expand(xi ** 2 - l2 * xi - l2 * r2),
            "g∞ = 2/(1 + √(1 + 4κ)) with κ = r²/ℓ²": g - g_inf_kappa(r2 / l2),
            "g∞(r² = ℓ²) = (√5 − 1)/2": g_eq - golden,
            "f'(x∞) = (1 − g∞)²": rate - (1 - g) ** 2,
            "x∞ g∞ = ℓ²": xi * g - l2,
            "Möbius multiplier K = (r²+x₋)/(r²+x∞) = (1 − g∞)² (via Vieta)": _mobius_K_check(),
            "Vieta: p + q = ℓ², pq = −ℓ² r² for p = x∞, q = x₋":
                sp.Matrix([sp.expand(xi + xm - l2), sp.expand(xi * xm + l2 * r2)]),
            "Möbius closed form: f(x_n) = x_{n+1}": f_pq - xn1,
            "ℓ² = 0: f(x_n) = x_{n+1} for x_n = x0 r²/(r² + n x0)":
                f_map(x_n0, r2, 0) - x_n0.subs(n, n + 1),
        },
        facts={
            "other root x₋ < 0": sp.simplify(xm).is_negative
                                   or sp.simplify(l2 ** 2 - (l2 ** 2 + 4 * r2 * l2)).is_negative,
            "f increasing: f' = r⁴/(r²+x)² > 0": sp.simplify(fp).is_positive,
            "f concave: f'' < 0": sp.simplify(fpp).is_negative,
            "0 < g∞ < 1": g.is_positive and sp.simplify(1 - g).is_positive,
            "ℓ² = 0: f'(0) = 1 (no geometric contraction)": sp.diff(f_map(x, r2, 0), x).subs(x, 0) == 1,
        },
    )


def _mobius_K_check():
    """K = (r² + q)/(r² + p) equals (r²/(r² + p))² when p, q are the two roots.

    (Kept separate because it needs Vieta: r⁴ = (r² + p)(r² + q).)"""
    p, q = sp.symbols("p q")
    r2_pq = -p * q / (p + q)
    return sp.together((r2_pq + q) / (r2_pq + p) - (r2_pq / (r2_pq + p)) ** 2)


def steady_state_expansion(order: int = 6) -> Derivation:
    """Series of ``g_∞`` in ``κ = r²/ℓ²`` (large process noise), against the printed
    ``1 − κ/2`` (BL App. E.2, p.19)."""
    g = g_inf_kappa()
    ser = sp.series(g, kappa, 0, order).removeO()
    coeffs = [ser.coeff(kappa, j) for j in range(order)]
    catalan = [(-1) ** j * sp.catalan(j) for j in range(order)]
    first = sp.limit((1 - g) / kappa, kappa, 0)
    printed = 1 - kappa / 2
    # generating function of the Catalan numbers: c(y) = (1 − √(1 − 4y))/(2y); g∞ = c(−κ)
    cat_gf = (1 - sp.sqrt(1 + 4 * kappa)) / (-2 * kappa)
    return Derivation(
        claim="bl.steady_state_expansion",
        statement="g∞ = 1 − κ + 2κ² − 5κ³ + … = Σ (−1)^n C_n κ^n (κ = r²/ℓ² < 1/4); "
                  "the printed 1 − r²/(2ℓ²) has the wrong first-order coefficient",
        assumptions="κ = r²/ℓ² > 0; series about κ = 0 (ℓ² ≫ r²)",
        objects={"series": ser, "coefficients": coeffs, "first_order_coefficient": -first,
                 "printed": printed, "printed_first_order_coefficient": sp.Rational(-1, 2),
                 "small_noise_limit": sp.limit(g * sp.sqrt(kappa), kappa, sp.oo)},
        identities={
            "g∞ = Catalan generating function at −κ": g - cat_gf,
            f"series coefficients = (−1)^n C_n, n < {order}": sp.Matrix(coeffs) - sp.Matrix(catalan),
            "lim (1 − g∞)/κ = 1": first - 1,
        },
        facts={"printed coefficient −1/2 ≠ −1": sp.Rational(-1, 2) != -first,
               "large κ (small process noise): g∞ √κ → 1": sp.limit(g * sp.sqrt(kappa), kappa, sp.oo) == 1},
        sizes="scalar",
    )


# ----------------------------------------------------------------------------
# mpmath evaluation
# ----------------------------------------------------------------------------


def x_inf_mp(r2v, l2v, dps: int = 60):
    with mp.workdps(dps):
        r, l = mpf(r2v), mpf(l2v)
        return (l + mp.sqrt(l * l + 4 * r * l)) / 2


def g_inf_mp(r2v, l2v, dps: int = 60):
    with mp.workdps(dps):
        xi = x_inf_mp(r2v, l2v, dps)
        return xi / (mpf(r2v) + xi)


def rate_mp(r2v, l2v, dps: int = 60):
    """Contraction rate ``(1 − g∞)²`` at the fixed point."""
    with mp.workdps(dps):
        return (1 - g_inf_mp(r2v, l2v, dps)) ** 2


def iterate_map_mp(r2v, l2v, x0, n: int, dps: int = 60) -> list:
    """``[x_0, x_1, …, x_n]`` of the same-key recurrence, iterated in mpmath."""
    with mp.workdps(dps):
        r, l, xv = mpf(r2v), mpf(l2v), mpf(x0)
        out = [xv]
        for _ in range(n):
            xv = r * xv / (r + xv) + l
            out.append(xv)
        return out


def x_n_closed_mp(r2v, l2v, x0, n: int, dps: int = 60):
    """Closed-form ``x_n`` (Möbius iteration) in mpmath."""
    with mp.workdps(dps):
        r, l, xv0 = mpf(r2v), mpf(l2v), mpf(x0)
        if l == 0:
            return xv0 * r / (r + n * xv0)
        p = (l + mp.sqrt(l * l + 4 * r * l)) / 2
        q = (l - mp.sqrt(l * l + 4 * r * l)) / 2
        K = (r + q) / (r + p)
        z = K ** n * (xv0 - p) / (xv0 - q)
        return (p - q * z) / (1 - z)


def g_inf_value(r2v, l2v):
    """Float / numpy-array evaluation of ``g∞`` (for figures): ``2/(1+√(1+4κ))``;
    ``ℓ² = 0`` gives 0."""
    import numpy as np

    r, l = np.asarray(r2v, dtype=float), np.asarray(l2v, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        kap = r / l
        out = 2.0 / (1.0 + np.sqrt(1.0 + 4.0 * kap))
    return np.where(l > 0, out, 0.0)
