r"""Write geometry: cross-direction shrinkage and rotation of the write direction
(BL Prop. 3, Cor. 4, Eq. 16; App. E.2, p.19).

Setting throughout: ``A = I``, constant ``r² > 0``, ``ℓ² ≥ 0``, unit keys with
overlap ``ρ = k_Aᵀ k_B``, ``k_A = ρ k_B + √(1 − ρ²) k_⊥``.

Cross shrinkage (:func:`cross_shrinkage`).  Writing ``A`` changes the posterior
variance along ``k_B`` by

.. math::

    Δ_B = k_B^T P_t k_B - k_B^T P_{t-1} k_B
        = \ell^2 \|k_B\|^2 - \frac{(k_B^T \bar P_t k_A)^2}{r^2 + k_A^T \bar P_t k_A},

the shrink term is at most ``g_A · k_Bᵀ P̄ k_B`` (Cauchy–Schwarz in the ``P̄``
inner product, proved through Lagrange's identity), and under long repetition
of ``A`` the cross covariance between ``k_A`` and its orthogonal complement
decays like ``∏ (1 − g_j)`` while ``k_Aᵀ P̄ k_A → x_∞``; with ``x_∞ g_∞ = ℓ²``
this gives ``Δ_B → (1 − ρ²) ℓ²``.

Rotation (:func:`rotation`).  After ``n`` writes of ``B`` from an isotropic prior
``p0 I`` the predicted covariance is ``b_n k_B k_Bᵀ + w_n (I − k_B k_Bᵀ)`` with
``b_n = x_{n+1}`` (same-key recurrence, closed form in
:mod:`.bl_steady_state`) and ``w_n = p0 + (n+1) ℓ²``.  The next ``A`` write
direction ``u = P̄ k_A = ρ b_n k_B + √(1−ρ²) w_n k_⊥`` makes with ``k_A`` the angle

.. math::

    θ_n = \arcsin ρ - \arctan\frac{ρ\, b_n}{\sqrt{1-ρ^2}\, w_n}
    \;\longrightarrow\; \arcsin ρ ,\qquad
    n(θ_n - \arcsin ρ) \to -\frac{ρ\, x_\infty}{\sqrt{1-ρ^2}\,\ell^2}
    \ (\ell^2 > 0),\quad -\frac{ρ\, r^2}{\sqrt{1-ρ^2}\, p_0}\ (\ell^2 = 0).

So the angle approaches ``arcsin ρ`` from below like ``1/n``, with a constant
that blows up as ``ρ → 1``: the limits ``n → ∞`` and ``ρ → 1`` do not commute
(``lim_ρ lim_n = π/2``, ``lim_n lim_ρ = 0``), and at ``ρ = 1`` (same key) ``u`` is
parallel to ``k_A`` for every ``n`` while two conflicting values cannot both be
read out linearly.
"""
from __future__ import annotations

import mpmath as mp
import sympy as sp

from .bl_common import Derivation, Field, mpf, sym_matrix, sym_symmetric, sym_vector
from .bl_steady_state import x_inf_expr, x_n_closed_mp

r2 = sp.Symbol("r2", positive=True)
l2 = sp.Symbol("ell2", positive=True)
rho = sp.Symbol("rho", positive=True)


def _write(P, k, l2v, r2v):
    """One write with ``A = I`` (recurrence steps 1, 2, 3, 5): returns P_t and P̄_t."""
    Pbar = P + l2v * sp.eye(P.shape[0])
    u = Pbar * k
    beta = 1 / (r2v + (k.T * u)[0, 0])
    return Pbar - beta * u * u.T, Pbar


def cross_shrinkage(D: int = 2) -> Derivation:
    P = sym_symmetric("P", D)
    kA, kB = sym_vector("a", D), sym_vector("b", D)
    l2s = sp.Symbol("ell2", nonnegative=True)
    fld = Field(P, kA, kB, l2s, r2)
    # Δ_B by running the write (field arithmetic), against the formula
    Pf, kAf, kBf = fld.mat(P), fld.mat(kA), fld.mat(kB)
    Pbar = Pf + fld.eye(D) * fld.s(l2s)
    u = Pbar * kAf
    beta = fld.K.one / (fld.s(r2) + fld.scalar_of(kAf.transpose() * u))
    Pt = Pbar - u * u.transpose() * beta
    delta_run = fld.scalar_of(kBf.transpose() * Pt * kBf) - fld.scalar_of(kBf.transpose() * Pf * kBf)
    cAB = fld.scalar_of(kBf.transpose() * Pbar * kAf)
    sA = fld.scalar_of(kAf.transpose() * Pbar * kAf)
    delta_formula = fld.s(l2s) * fld.scalar_of(kBf.transpose() * kBf) - cAB ** 2 / (fld.s(r2) + sA)
    # Cauchy-Schwarz via Lagrange's identity, P̄ = L Lᵀ, at D = 2 and 3
    ids = {f"Δ_B = ℓ²‖k_B‖² − (k_BᵀP̄k_A)²/(r² + k_AᵀP̄k_A) (D={D})":
           fld.K.to_sympy(delta_run - delta_formula)}
    for d in (2, 3):
        L = sym_matrix("L", d, d)
        a, b = sym_vector("a", d), sym_vector("b", d)
        xa, xb = L.T * a, L.T * b
        gram = (a.T * L * L.T * a)[0] * (b.T * L * L.T * b)[0] - ((a.T * L * L.T * b)[0]) ** 2
        lagr = sum((xa[i] * xb[j] - xa[j] * xb[i]) ** 2 for i in range(d) for j in range(i + 1, d))
        ids[f"Lagrange identity (aᵀP̄a)(bᵀP̄b) − (aᵀP̄b)² = Σ_{{i<j}}(…)² (D={d})"] = sp.expand(gram - lagr)
    # block recursion under repeated A writes, k_A = e_1, D = 3 (1 + 2 blocks)
    a_, r2_ = sp.Symbol("a", positive=True), r2
    c = sym_vector("c", 2)
    Q = sym_symmetric("Q", 2)
    Pb = sp.Matrix(sp.BlockMatrix([[sp.Matrix([[a_]]), c.T], [c, Q]]))
    e1 = sp.Matrix([1, 0, 0])
    fb = Field(Pb, r2_, l2s)
    Pbf, e1f = fb.mat(Pb), fb.mat(e1)
    uu = Pbf * e1f
    bb = fb.K.one / (fb.s(r2_) + fb.scalar_of(e1f.transpose() * uu))
    Pnext = Pbf - uu * uu.transpose() * bb + fb.eye(3) * fb.s(l2s)     # update, then next predict
    Pnext_s = fb.sym(Pnext)
    a_next = a_ * r2_ / (r2_ + a_) + l2s
    c_next = c * r2_ / (r2_ + a_)
    Q_next = Q - c * c.T / (r2_ + a_) + l2s * sp.eye(2)
    ids["block recursion: a' = r²a/(r²+a) + ℓ²"] = sp.together(Pnext_s[0, 0] - a_next)
    ids["block recursion: c' = c r²/(r² + a) = (1 − g) c"] = (Pnext_s[1:, 0] - c_next).applyfunc(sp.together)
    ids["block recursion: Q' = Q − ccᵀ/(r² + a) + ℓ² I"] = (Pnext_s[1:, 1:] - Q_next).applyfunc(sp.together)
    # the limit: Δ_B with unit k_B = ρ e_1 + √(1−ρ²) e_2, in terms of (a, c_⊥)
    cp = sp.Symbol("c_perp", real=True)
    sq = sp.sqrt(1 - rho ** 2)
    delta_ac = l2 - (rho * a_ + sq * cp) ** 2 / (r2 + a_)
    xi = x_inf_expr(r2, l2)
    lim = delta_ac.subs({cp: 0, a_: xi})
    ids["Δ_B(a = x∞, c_⊥ = 0) = (1 − ρ²) ℓ²"] = sp.simplify(lim - (1 - rho ** 2) * l2)
    # bound: shrink ≤ g_A σ̄_B² given c² ≤ s_A s_B
    sA_, sB_ = sp.symbols("s_A s_B", nonnegative=True)
    g_A = sA_ / (r2 + sA_)
    return Derivation(
        claim="bl.cross_shrinkage",
        statement="Δ_B = ℓ²‖k_B‖² − (k_BᵀP̄k_A)²/(r²+k_AᵀP̄k_A); shrink term ≤ g_A k_BᵀP̄k_B < k_BᵀP̄k_B; "
                  "under repetition of A, cross terms decay like ∏(1−g_j) and Δ_B → (1−ρ²)ℓ²",
        assumptions=f"A = I, r² > 0, ℓ² ≥ 0; Δ_B identity with general symmetric P and keys at D={D}; "
                    "Lagrange identity at D = 2, 3; block recursion at D = 3 with k_A = e_1 "
                    "(rotation-equivariance of the filter, see `rotation_equivariance`); "
                    "limit for unit keys",
        objects={"delta_formula": fld.K.to_sympy(delta_formula), "delta_limit": (1 - rho ** 2) * l2,
                 "shrink_bound": g_A * sB_, "delta_in_a_cperp": delta_ac},
        identities=ids,
        facts={"shrink ≤ g_A s_B < s_B since c² ≤ s_A s_B and g_A < 1":
               sp.simplify(1 - g_A).is_positive},
        sizes=f"D={D} (Δ_B), D=2,3 (Cauchy–Schwarz), D=3 (block recursion)",
    )


def rotation_equivariance(D: int = 2) -> Derivation:
    """With ``A = I`` and isotropic noise, one write is equivariant under rotations:
    keys ``Rk`` and covariance ``RPRᵀ`` give ``R P⁺ Rᵀ``; so ``k_A = e_1`` is no loss
    of generality (symbolic rotation at ``D = 2``, rationally parametrised)."""
    # rational parametrisation of the rotation group (all angles but π):
    # cos θ = (1−t²)/(1+t²), sin θ = 2t/(1+t²), so the check stays in QQ(symbols)
    t = sp.Symbol("t", real=True)
    c, s_ = (1 - t ** 2) / (1 + t ** 2), 2 * t / (1 + t ** 2)
    R = sp.Matrix([[c, -s_], [s_, c]])
    P = sym_symmetric("P", D)
    k = sym_vector("k", D)
    l2s = sp.Symbol("ell2", nonnegative=True)
    fld = Field(P, k, l2s, r2, t)

    def write(Pm, km):
        Pb = Pm + fld.eye(D) * fld.s(l2s)
        u = Pb * km
        beta = fld.K.one / (fld.s(r2) + fld.scalar_of(km.transpose() * u))
        return Pb - u * u.transpose() * beta

    Rf, Pf, kf = fld.mat(R), fld.mat(P), fld.mat(k)
    diff = fld.sym(write(Rf * Pf * Rf.transpose(), Rf * kf) - Rf * write(Pf, kf) * Rf.transpose())
    return Derivation(claim="bl.cross_shrinkage", statement="write(RPRᵀ, Rk) = R write(P, k) Rᵀ",
                      assumptions="A = I, isotropic process noise, D = 2, symbolic angle",
                      identities={"rotation equivariance (D=2)": diff}, sizes="D=2")


def rotation() -> Derivation:
    b, w = sp.symbols("b w", positive=True)
    n = sp.Symbol("n", positive=True)
    p0 = sp.Symbol("p0", positive=True)
    sq = sp.sqrt(1 - rho ** 2)
    cos_theta = (rho ** 2 * b + (1 - rho ** 2) * w) / sp.sqrt(rho ** 2 * b ** 2 + (1 - rho ** 2) * w ** 2)
    theta = sp.asin(rho) - sp.atan(rho * b / (sq * w))
    # clean setting at D = 2 in the (k_B, k_⊥) basis: B writes keep P diagonal
    bb, ww = sp.symbols("b w", positive=True)
    l2s = sp.Symbol("ell2", nonnegative=True)
    Pd = sp.diag(bb, ww)
    Pn, _ = _write(Pd, sp.Matrix([1, 0]), l2s, r2)
    kA = sp.Matrix([rho, sq])
    u = sp.diag(bb, ww) * kA
    xi = x_inf_expr(r2, l2)
    theta_n_l2 = sp.asin(rho) - sp.atan(rho * xi / (sq * (p0 + (n + 1) * l2)))
    coef_l2 = sp.limit(n * (theta_n_l2 - sp.asin(rho)), n, sp.oo)
    theta_n_0 = sp.asin(rho) - sp.atan(rho * (p0 * r2 / (r2 + n * p0)) / (sq * p0))
    coef_0 = sp.limit(n * (theta_n_0 - sp.asin(rho)), n, sp.oo)
    lim_rho_then = sp.limit(sp.asin(1 - sp.Symbol("epsilon", positive=True)), sp.Symbol("epsilon", positive=True), 0, "+")
    # at fixed n: the arctan argument ρb/(√(1−ρ²)w) → +∞ as ρ → 1⁻, so θ_n → asin 1 − atan ∞
    # (limits are taken as ε → 0⁺ with ρ = 1 − ε: sympy 1.14 returns −∞ for
    # limit(1/sqrt(1 − ρ), ρ, 1, "-") when ρ carries positive=True)
    eps = sp.Symbol("epsilon", positive=True)
    arg_lim = sp.limit((rho * b / (sq * w)).subs(rho, 1 - eps), eps, 0, "+")
    lim_n_fixed = sp.asin(1) - sp.atan(arg_lim)
    # same key: conflicting values, one read-out y
    y, vA, vB = sp.symbols("y v_A v_B", real=True)
    split = (y - vA) ** 2 + (y - vB) ** 2 - (2 * (y - (vA + vB) / 2) ** 2 + (vA - vB) ** 2 / 2)
    return Derivation(
        claim="bl.rotation",
        statement="θ_n = arcsin ρ − arctan(ρ b_n/(√(1−ρ²) w_n)) → arcsin ρ, approached from below like "
                  "−c/n with c = ρ x∞/(√(1−ρ²) ℓ²) (ℓ² > 0) or ρ r²/(√(1−ρ²) p0) (ℓ² = 0); "
                  "ρ → 1 (limit π/2) differs from ρ = 1 (angle 0)",
        assumptions="A = I, P_0 = p0 I, n writes of B then one of A, unit keys, 0 < ρ < 1 unless stated; "
                    "b_n = x_{n+1} → x∞ geometrically (Möbius closed form), w_n = p0 + (n+1)ℓ²",
        objects={"theta": theta, "cos_theta": cos_theta, "u": u, "rate_coefficient_l2": sp.simplify(coef_l2),
                 "rate_coefficient_l2_zero": sp.simplify(coef_0), "limit_rho_to_1_of_limit": lim_rho_then,
                 "limit_rho_to_1_at_fixed_n": lim_n_fixed},
        identities={
            # both sides are positive (θ_n ∈ (0, arcsin ρ)), so squares suffice
            "cos² θ_n = (k_Aᵀu)²/‖u‖² for the arctan form":
                sp.simplify(sp.expand_trig(sp.cos(theta)) ** 2 - cos_theta ** 2),
            "k_Aᵀu / ‖u‖ for u = diag(b, w) k_A": sp.simplify(
                (kA.T * u)[0] / sp.sqrt((u.T * u)[0]) - cos_theta),
            "B write keeps the (k_B, k_⊥) basis: off-diagonal stays 0": sp.simplify(Pn[0, 1]),
            "B write leaves the orthogonal variance: w + ℓ²": sp.simplify(Pn[1, 1] - ww - l2s),
            "n(θ_n − arcsin ρ) → −ρ x∞/(√(1−ρ²) ℓ²)": sp.simplify(coef_l2 + rho * xi / (sq * l2)),
            "ℓ² = 0: n(θ_n − arcsin ρ) → −ρ r²/(√(1−ρ²) p0)": sp.simplify(coef_0 + rho * r2 / (sq * p0)),
            # so for identical keys (one read-out y for both) the total squared error is
            # at least (v_A − v_B)²/2 > 0 whenever the values conflict
            "ρ = 1: (y−v_A)² + (y−v_B)² = 2(y − v̄)² + (v_A − v_B)²/2": sp.expand(split),
        },
        facts={
            "lim_{n→∞} θ_n = arcsin ρ (b/w → 0)": sp.limit(theta.subs(b, 1).subs(w, n), n, sp.oo) == sp.asin(rho),
            "lim_{ρ→1} arcsin ρ = π/2": lim_rho_then == sp.pi / 2,
            "at fixed n: lim_{ρ→1} θ_n = 0": lim_n_fixed == 0,
            "ρ = 1: u = P̄ k_B = b k_B, angle 0": sp.simplify((sp.diag(bb, ww) * sp.Matrix([1, 0]))
                                                          - bb * sp.Matrix([1, 0])) == sp.zeros(2, 1),
        },
        sizes="closed form (D = 2 basis; any D by rotation equivariance)",
    )


# ----------------------------------------------------------------------------
# mpmath / float evaluation
# ----------------------------------------------------------------------------


def theta_n_mp(rho_v, p0, r2v, l2v, n: int, dps: int = 60):
    """Exact angle (radians) between the next A write direction and ``k_A`` after
    ``n`` B writes from ``p0 I`` (closed form, mpmath)."""
    with mp.workdps(dps):
        rh = mpf(rho_v)
        b = x_n_closed_mp(r2v, l2v, mpf(p0) + mpf(l2v), n, dps)   # x_1 = p0 + ℓ², b_n = x_{n+1}
        w = mpf(p0) + (n + 1) * mpf(l2v)
        return mp.asin(rh) - mp.atan(rh * b / (mp.sqrt(1 - rh * rh) * w))


def rate_coefficient_mp(rho_v, p0, r2v, l2v, dps: int = 60):
    """``lim n(θ_n − arcsin ρ)``."""
    with mp.workdps(dps):
        rh, r, l = mpf(rho_v), mpf(r2v), mpf(l2v)
        sq = mp.sqrt(1 - rh * rh)
        if l == 0:
            return -rh * r / (sq * mpf(p0))
        xi = (l + mp.sqrt(l * l + 4 * r * l)) / 2
        return -rh * xi / (sq * l)


def delta_b_limit(rho_v, l2v):
    """``(1 − ρ²) ℓ²`` (float or mpf in, same out)."""
    return (1 - rho_v * rho_v) * l2v


def theta_n_value(rho_v, p0, r2v, l2v, n):
    """Float / numpy evaluation of the closed-form angle θ_n (for figures):
    broadcasts over all arguments; ``n`` = number of B writes (≥ 0)."""
    import numpy as np

    rh, p0, r, l, n = (np.asarray(x, dtype=float) for x in (rho_v, p0, r2v, l2v, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        x1 = p0 + l                                            # x_1 = p0 + ℓ²
        sq = np.sqrt(l * l + 4 * r * l)
        p, q = (l + sq) / 2, (l - sq) / 2
        K = (r + q) / (r + p)
        z = K ** n * (x1 - p) / (x1 - q)
        b_pos = (p - q * z) / (1 - z)
        b_zero = x1 * r / (r + n * x1)
        b = np.where(l > 0, np.where(x1 == p, p, b_pos), b_zero)   # b_n = x_{n+1}
        w = p0 + (n + 1) * l
        return np.arcsin(rh) - np.arctan(rh * b / (np.sqrt(1 - rh * rh) * w))
