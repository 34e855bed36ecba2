r"""The two other families of the design-model view: covariance reset (delta rule)
and the latent-input (additive) model; and the fixed-gain plateau.

* :func:`delta_reset` -- BL Prop. 2, Eq. 17, p.6; Table 1.  With ``P̄_t ← λ_t I``
  the mean update is the delta rule with
  ``η_t = λ_t/(r_t² + λ_t‖k_t‖²)``; DeltaNet (``A = I``), Gated DeltaNet
  (``A = αI``), KDA (``A = diag α``) and Longhorn (per-column noise ``r_j²``,
  ``ε_j = β_j/(1 + β_j‖k‖²)`` with ``β_j = λ/r_j²``) are the special cases; every
  step size ``η ∈ (0, 1/‖k‖²)`` is reached by exactly one ``λ > 0``.
* :func:`additive` -- §3.2, pp.6-7; App. A.  Latent input ``φ_t ~ N(0, λ_t I_m)``,
  ``v_t | φ_t ~ N(φ_t, r_t² I_m)``, ``S_t = A_t S_{t-1} + k_t φ_tᵀ``:
  ``M_t = A_t M_{t-1} + ω_t k_t v_tᵀ``, ``ω_t = λ_t/(λ_t + r_t²)``, and the
  posterior covariance of ``vec S_t`` is ``I_m ⊗ C_t`` with
  ``C_t = A_t C_{t-1} A_tᵀ + c_t k_t k_tᵀ``, ``c_t = λ_t r_t²/(λ_t + r_t²) > 0``:
  not zero (the paper's wording "no posterior uncertainty" is too strong), it
  just never enters the mean.  Setting BL's ``P̄ = 0`` instead gives zero gain.
* :func:`delta_plateau` -- App. E.3, pp.20-21.  Fixed gain ``γ``, unit ``k_A``,
  overlap ``ρ``: ``b_n = b_0 − ρ(1 − (1−γ)^n)(a_0 − v_A)``, ``b_∞ = b_0 − ρ(a_0 − v_A)``.
"""
from __future__ import annotations

import mpmath as mp
import sympy as sp
from sympy import Identity, MatrixSymbol

from .bl_common import Derivation, mpf, mpf_exact, sym_matrix, sym_vector
from .bl_posterior import KronI, _mexpand

lam = sp.Symbol("lambda", positive=True)
r2 = sp.Symbol("r2", positive=True)
_t = sp.Symbol("t", positive=True)


def delta_reset() -> Derivation:
    D, m = sp.symbols("D m", integer=True, positive=True)
    A, M = MatrixSymbol("A", D, D), MatrixSymbol("M", D, m)
    k, v = MatrixSymbol("k", D, 1), MatrixSymbol("v", m, 1)
    nk = sp.Symbol("n_k", positive=True)            # ‖k‖² (the 1×1 kᵀk)
    ID = Identity(D)
    Pbar = lam * ID
    u = Pbar * k
    beta = 1 / (r2 + lam * nk)                       # 1/(r² + kᵀ(λI)k)
    eta = lam / (r2 + lam * nk)
    delta = v - (A * M).T * k
    bl = A * M + beta * u * delta.T
    delta_rule = A * M + eta * k * delta.T
    # Table 1 members, each in its own published convention (S = Mᵀ is m×D)
    a_s = sp.Symbol("alpha", positive=True)
    Sdn = M.T                                        # DeltaNet / GDN state, m × D
    deltanet = Sdn * (ID - eta * k * k.T) + eta * v * k.T
    gdn = a_s * Sdn * (ID - eta * k * k.T) + eta * v * k.T
    bl_I = M + eta * k * (v - M.T * k).T
    bl_gdn = a_s * M + eta * k * (v - (a_s * M).T * k).T
    Ad = MatrixSymbol("Diag_alpha", D, D)            # KDA: diagonal A, state D × m
    kda = (ID - eta * k * k.T) * Ad * M + eta * k * v.T
    bl_kda = Ad * M + eta * k * (v - (Ad * M).T * k).T
    # Longhorn: per value column j, ε_j = β_j/(1 + β_j ‖k‖²), β_j = λ/r_j²
    rj = sp.Symbol("r2_j", positive=True)
    beta_j = lam / rj
    eps_j = beta_j / (1 + beta_j * nk)
    eta_j = lam / (rj + lam * nk)
    # every η ∈ (0, 1/‖k‖²) is reached: λ(η) = η r²/(1 − η‖k‖²)
    e = sp.Symbol("eta", positive=True)
    lam_of_eta = e * r2 / (1 - e * nk)
    return Derivation(
        claim="bl.delta_reset",
        statement="P̄ ← λI gives M = AM + η k (v − (AM)ᵀk)ᵀ with η = λ/(r² + λ‖k‖²); "
                  "DeltaNet (A=I), GDN (A=αI), KDA (A=diag α), Longhorn (per-column r_j²) follow",
        assumptions="general D, m (MatrixSymbol); kᵀk identified with the scalar ‖k‖² (1×1); λ, r² > 0",
        objects={"eta": eta, "lambda_of_eta": lam_of_eta, "longhorn_eps": eps_j},
        identities={
            "BL with P̄ = λI is the delta rule": _mexpand(bl - delta_rule),
            "DeltaNet: Mᵀ update = S(I − η kkᵀ) + η v kᵀ": _mexpand(bl_I.T - deltanet),
            "Gated DeltaNet (A = αI)": _mexpand(bl_gdn.T - gdn),
            "KDA (A = diag α): (I − η kkᵀ) Diag(α) M + η k vᵀ": _mexpand(bl_kda - kda),
            "Longhorn: λ/(r_j² + λ‖k‖²) = β_j/(1 + β_j‖k‖²), β_j = λ/r_j²": sp.simplify(eta_j - eps_j),
            "λ(η) = η r²/(1 − η‖k‖²) inverts η(λ)": sp.simplify(eta.subs(lam, lam_of_eta) - e),
        },
        facts={"η < 1/‖k‖² for every λ > 0": sp.simplify(1 / nk - eta).is_positive,
               # η = t/(‖k‖²(1+t)), t > 0, sweeps (0, 1/‖k‖²)
               "λ(η) > 0 for 0 < η < 1/‖k‖²": sp.simplify(lam_of_eta.subs(e, _t / (nk * (1 + _t)))).is_positive},
        sizes="general D, m",
    )


def additive() -> Derivation:
    # scalar Gaussian conditioning: φ ~ N(0, λ), v | φ ~ N(φ, r²)
    cov_phi_v, var_v = lam, lam + r2
    omega = cov_phi_v / var_v
    c = lam - cov_phi_v ** 2 / var_v
    # general sizes: vec(k φᵀ) = (I_m ⊗ k) φ (rule L7), φ | v ~ N(ω v, c I_m)
    D = sp.Symbol("D", integer=True, positive=True)
    A, C = MatrixSymbol("A", D, D), MatrixSymbol("C", D, D)
    k = MatrixSymbol("k", D, 1)
    cs = sp.Symbol("c", positive=True)
    cov_next = (KronI(A) * KronI(C) * KronI(A).T + KronI(k) * KronI(cs * Identity(1)) * KronI(k).T).X
    # BL with P̄ = 0: u = 0 and the mean does not move
    Dn = 2
    k2 = sym_vector("k", Dn)
    Pzero = sp.zeros(Dn, Dn)
    u0 = Pzero * k2
    M2, v2 = sym_matrix("M", Dn, 2), sym_vector("v", 2)
    beta0 = 1 / (r2 + (k2.T * u0)[0])
    M_after = M2 + beta0 * u0 * (v2 - M2.T * k2).T
    # the printed claim "no posterior uncertainty", at an example: λ = r² = 1, unit k, C_0 = 0
    c_ex = c.subs({lam: 1, r2: 1})
    return Derivation(
        claim="bl.additive",
        statement="M = AM + ω k vᵀ, ω = λ/(λ+r²); Cov(vec S_t | v_1..t) = I_m ⊗ C_t, "
                  "C_t = A C_{t−1} Aᵀ + c_t k kᵀ, c_t = λr²/(λ+r²) > 0 (not zero)",
        assumptions="φ_t independent over t, N(0, λ_t I_m); v_t | φ_t ~ N(φ_t, r_t² I_m); S_0 known; λ, r² > 0",
        objects={"omega": omega, "c": sp.simplify(c), "C_next": cov_next, "trace_C1_example": c_ex},
        identities={
            "ω = Cov(φ, v)/Var(v) = λ/(λ + r²)": omega - lam / (lam + r2),
            "c = λ − λ²/(λ + r²) = λ r²/(λ + r²)": c - lam * r2 / (lam + r2),
            "Cov(vec S_t) = I_m ⊗ (A C Aᵀ + c k kᵀ) (general D, m)":
                _mexpand(cov_next - (A * C * A.T + cs * k * k.T)),
            "BL with P̄ = 0: zero gain, M unchanged": M_after - M2,
        },
        facts={"c > 0 for λ, r² > 0": sp.simplify(c).is_positive,
               "tr C_t ≥ c_t ‖k_t‖² > 0 (k ≠ 0): the covariance is not zero": c_ex == sp.Rational(1, 2)},
        sizes="scalar conditioning; covariance recursion for general D, m; P̄ = 0 at D = 2",
    )


def delta_plateau() -> Derivation:
    g, rh = sp.symbols("gamma rho", positive=True)
    a0, b0, vA = sp.symbols("a_0 b_0 v_A", real=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    a_n = vA + (1 - g) ** n * (a0 - vA)
    b_n = b0 - rh * (1 - (1 - g) ** n) * (a0 - vA)
    # one fixed-gain write of A, explicit at D = 2 (one value column)
    M = sym_vector("M", 2)
    th = sp.Symbol("rho", positive=True)
    kA = sp.Matrix([1, 0])
    kB = sp.Matrix([th, sp.sqrt(1 - th ** 2)])
    v = sp.Symbol("v_A", real=True)
    a = (M.T * kA)[0]
    M1 = M + g * kA * (v - a)
    # 1 − γ ∈ (0, 1) parametrised as 1/(1 + t), t > 0 (γ = t/(1+t) ∈ (0, 1))
    t = sp.Symbol("t", positive=True)
    b_n_t = b_n.subs(g, t / (1 + t))
    return Derivation(
        claim="bl.delta_plateau",
        statement="b_n = b_0 − ρ(1 − (1−γ)^n)(a_0 − v_A) → b_∞ = b_0 − ρ(a_0 − v_A) (0 < γ < 1; "
                  "the same limit holds for 0 < γ < 2)",
        assumptions="fixed gain γ (covariance reset), A = I, unit k_A, k_Bᵀk_A = ρ; per value coordinate",
        objects={"a_n": a_n, "b_n": b_n, "b_inf": b0 - rh * (a0 - vA)},
        identities={
            "one write (D=2): a' = a + γ(v_A − a)": (M1.T * kA)[0] - (a + g * (v - a)),
            "one write (D=2): b' = b + γρ(v_A − a)": sp.expand((M1.T * kB)[0] - ((M.T * kB)[0] + g * th * (v - a))),
            "a_{n+1} = a_n + γ(v_A − a_n)": sp.expand(a_n.subs(n, n + 1) - (a_n + g * (vA - a_n))),
            "b_{n+1} = b_n + γρ(v_A − a_n)": sp.expand(b_n.subs(n, n + 1) - (b_n + g * rh * (vA - a_n))),
            "b_0 = b_0": b_n.subs(n, 0) - b0,
            "lim b_n = b_0 − ρ(a_0 − v_A) for 0 < γ < 1":
                sp.limit(b_n_t, n, sp.oo) - (b0 - rh * (a0 - vA)),
        },
        sizes="closed form in n (induction)",
    )


def plateau_mp(a0, b0, vA, rho_v, gamma, n: int, dps: int = 60):
    """``b_n`` of the fixed-gain plateau in mpmath."""
    with mp.workdps(dps):
        return mpf(b0) - mpf(rho_v) * (1 - (1 - mpf(gamma)) ** n) * (mpf(a0) - mpf(vA))


def additive_covariance_mp(keys, *, lam, r2, alpha=None, dps: int = 60):
    """``C_T`` of the latent-input model by the recursion
    ``C_t = A_t C_{t-1} A_tᵀ + c_t k_t k_tᵀ`` (``C_0 = 0``), in mpmath
    (floats are taken at their exact binary value)."""
    with mp.workdps(dps):
        T, D = len(keys), len(keys[0])
        per = (lambda x: [mpf_exact(x[t]) for t in range(T)] if isinstance(x, (list, tuple))  # noqa: E731
               else [mpf_exact(x)] * T)
        lams, r2s = per(lam), per(r2)
        C = mp.zeros(D, D)
        for t in range(T):
            a = [mpf_exact(x) for x in alpha[t]] if alpha is not None else [mp.mpf(1)] * D
            k = [mpf_exact(x) for x in keys[t]]
            c = lams[t] * r2s[t] / (lams[t] + r2s[t])
            C = mp.matrix([[a[i] * C[i, j] * a[j] + c * k[i] * k[j] for j in range(D)] for i in range(D)])
        return C
