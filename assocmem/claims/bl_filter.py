"""The BL filter itself: ``bl.posterior``, ``bl.kronecker``, ``bl.gated_form``,
``bl.gain_bound``, ``bl.readout_cov`` (BL Prop. 1, Eqs. 7-13, p.4; App. B-C).

sympy (:mod:`assocmem.theory.bl_posterior`): the five-step recurrence is the
Kalman filter on ``vec S`` for general D, m (Kronecker rules), entry by entry at
small sizes, and the two-step joint conditioning.  mpmath: the posterior by
conditioning the joint Gaussian at 60 digits against the recurrence rerun at 60
digits.  numpy: the filter (:func:`numerics.bl_filter`) against references that
take no Kronecker shortcut, the Kalman filter on ``vec S`` and the posterior
obtained by conditioning the design model's joint Gaussian directly; settings
drawn at random (seeded) over sizes, dynamics, noise levels and PSD priors (the
property-based versions are in the test suite).
"""
from __future__ import annotations

import mpmath as mp
import numpy as np

from assocmem.claims._common import DPS, MIN_DIGITS, SEED, min_digits, rel, sympy_derivation
from assocmem.numerics import bl_filter, joint_gaussian_posterior, vec_kalman_filter
from assocmem.numerics.bl_analysis import readout_monte_carlo
from assocmem.registry import Evidence
from assocmem.theory import bl_mp
from assocmem.theory import bl_posterior as bp
from assocmem.theory.bl_common import RationalSampler, is_zero, to_mp

# the random settings of the filter-against-references comparisons
FILTER_SEED = 1729


def random_case(rng, D, m, T, *, dynamics="full", rank_deficient_p0=False):
    """A random admissible design-model setting (keys, values, A, ℓ², r², P0)."""
    keys = rng.normal(size=(T, D)) / np.sqrt(D)
    values = rng.normal(size=(T, m))
    if dynamics == "full":
        A = rng.normal(size=(T, D, D)) / np.sqrt(D)
    elif dynamics == "diag":
        A = rng.uniform(0.2, 1.0, size=(T, D))
    else:
        A = None
    l2 = rng.uniform(0.0, 0.3, size=T)
    r2 = 10.0 ** rng.uniform(-2, 0.5, size=T)
    B = rng.normal(size=(D, D if not rank_deficient_p0 else max(D - 1, 1)))
    P0 = B @ B.T / D + (0 if rank_deficient_p0 else 0.1 * np.eye(D))
    return keys, values, A, l2, r2, P0


# -- bl.posterior ------------------------------------------------------------
def posterior(ev: Evidence) -> None:
    numpy = _posterior_numpy(ev)
    _posterior_sympy(ev)
    ev.slow(posterior_sympy_larger)
    worst = _posterior_mpmath(ev)
    ev.summary = (f"sympy: Kalman on vec S = five-step recurrence for general D, m (Kronecker rules), "
                  f"entry by entry at (D,m)=(2,1),(2,2),(3,2), two-step joint conditioning at D=2; "
                  f"mpmath: conditioning = recurrence to {float(worst):.0f} digits; {numpy}")


def _posterior_numpy(ev: Evidence) -> str:
    rng = np.random.default_rng(FILTER_SEED)
    worst_kf, worst_joint, n = 0.0, 0.0, 0
    for D, m, T in [(2, 1, 5), (3, 2, 6), (4, 3, 5), (5, 2, 7), (6, 1, 4), (3, 3, 8)]:
        for dyn in ("full", "diag", "identity"):
            keys, values, A, l2, r2, P0 = random_case(rng, D, m, T, dynamics=dyn,
                                                      rank_deficient_p0=(D == 4))
            kw = dict(alpha=A) if dyn == "diag" else dict(A=A)
            tr = bl_filter(keys, values, l2=l2, r2=r2, p0=P0, keep_states=True, **kw)
            means, covs = vec_kalman_filter(keys, values, l2=l2, r2=r2, P0=P0, A=A)
            scale = max(1.0, np.abs(means).max())
            kron = np.stack([np.kron(np.eye(m), P) for P in tr.Ps])
            worst_kf = max(worst_kf, np.abs(tr.Ms - means).max() / scale,
                           np.abs(kron - covs).max() / max(1.0, np.abs(covs).max()))
            mj, cj = joint_gaussian_posterior(keys, values, l2=l2, r2=r2, P0=P0, A=A)
            worst_joint = max(worst_joint, np.abs(tr.M - mj).max() / scale,
                              np.abs(np.kron(np.eye(m), tr.P) - cj).max() / max(1.0, np.abs(cj).max()))
            n += 1
    ev.close("numpy", "five-step recurrence vs Dm×Dm Kalman on vec S (every step, mean and I_m⊗P)",
             worst_kf, 0.0, abs_tol=1e-12, note=f"{n} random settings, D≤6, m≤3, full/diagonal/identity A")
    ev.close("numpy", "five-step recurrence vs joint-Gaussian conditioning (no recursion)",
             worst_joint, 0.0, abs_tol=1e-10,
             note="conditioning the joint covariance loses a few digits to its condition number")
    ev.record(numpy_max_rel_error_vs_kalman=worst_kf, numpy_max_rel_error_vs_joint=worst_joint,
              numpy_settings=n)
    return (f"numpy: recurrence = vec-S Kalman ({worst_kf:.1e}) = joint conditioning "
            f"({worst_joint:.1e}) on {n} random settings")


def _posterior_sympy(ev: Evidence) -> None:
    sympy_derivation(ev, bp.kronecker_lemmas(), "lemma ")
    sympy_derivation(ev, bp.posterior_general(), "general D, m: ")
    for D, m in ((2, 1), (2, 2), (3, 2)):
        sympy_derivation(ev, bp.posterior_explicit(D, m))
    sympy_derivation(ev, bp.posterior_explicit(2, 2, diagonal_A=True), "diagonal A: ")
    sympy_derivation(ev, bp.conditioning_two_steps(), "no filter: ")
    ev.record(sympy_sizes="general D, m via Kronecker rules (rules checked at (D,m)=(2,2),(3,2),(2,3)); "
                          "entry by entry at (2,1), (2,2), (3,2); joint conditioning D=2, m=1, T=2")


def posterior_sympy_larger(ev: Evidence) -> None:
    """The slow part: entry by entry at (D, m) = (3, 3), (4, 2); joint conditioning with a general prior."""
    for D, m in ((3, 3), (4, 2)):
        sympy_derivation(ev, bp.posterior_explicit(D, m))
    sympy_derivation(ev, bp.conditioning_two_steps(general_prior=True), "no filter, general P0: ")


def _posterior_mpmath(ev: Evidence):
    """Joint conditioning = the recurrence at 60 digits; returns the fewest matching digits."""
    worst = mp.inf
    cases = [(2, 1, 4), (3, 2, 5), (4, 2, 4)]
    for i, (D, m, T) in enumerate(cases):
        rs = RationalSampler(SEED + i)
        keys = [rs.normal_vector(D) for _ in range(T)]
        vals = [rs.normal_vector(m) for _ in range(T)]
        alpha = [[rs.uniform("0.3", "1") for _ in range(D)] for _ in range(T)]
        l2 = [rs.uniform("0", "0.5") for _ in range(T)]
        r2 = [rs.log_uniform("0.01", "2") for _ in range(T)]
        p0 = rs.uniform("0.1", "3")
        Mj, Cj = bp.joint_posterior_mp(keys, vals, l2=l2, r2=r2, p0=p0, alpha=alpha, dps=DPS)
        with mp.workdps(DPS):
            tr = bl_mp.bl_filter_mp(to_mp(keys), to_mp(vals), l2=to_mp(l2), r2=to_mp(r2), p0=to_mp(p0),
                                    alpha=to_mp(alpha), dps=DPS)
            pairs = [(Mj[d][j], tr.M[d][j]) for d in range(D) for j in range(m)]
            pairs += [(Cj[j * D + a, j * D + b], tr.P[a][b]) for j in range(m) for a in range(D) for b in range(D)]
            off = max((abs(Cj[a, D + b]) for a in range(D) for b in range(D)), default=mp.mpf(0)) if m > 1 else 0
            worst = min(worst, min_digits(pairs))
            ev.holds("mpmath", f"joint conditioning: cross-column blocks vanish (D={D}, m={m})",
                     m == 1 or off < mp.mpf(10) ** (-MIN_DIGITS), computed=str(off) if m > 1 else 0)
    ev.holds("mpmath", f"posterior by joint conditioning = recurrence to ≥ {MIN_DIGITS} digits (worst of 3)",
             worst >= MIN_DIGITS, computed=float(worst),
             note="random rational parameters, diagonal dynamics, per-step ℓ², r²; T ≤ 5; 60-digit arithmetic")
    ev.record(mpmath_min_matching_digits=float(worst), mpmath_sizes="(D,m,T) = " + ", ".join(map(str, cases)))
    return worst


# -- bl.kronecker ------------------------------------------------------------
def kronecker(ev: Evidence) -> None:
    d = bp.posterior_general()
    for name in ("predict: Σ̄ = I_m ⊗ P̄", "covariance update (step 5)"):
        ev.holds("sympy", "closure, general D, m: " + name, is_zero(d.identities[name]), note=d.assumptions)
    sympy_derivation(ev, bp.kronecker_failure(2, 2), "per-column noise: ")
    # numpy: grouped filter vs the full Kalman filter with per-column noise
    rng = np.random.default_rng(SEED)
    worst, gap_min, n = 0.0, np.inf, 0
    for D, m, G, T in [(3, 2, 2, 6), (4, 4, 2, 5), (2, 3, 3, 7), (5, 6, 3, 4)]:
        keys = rng.normal(size=(T, D)) / np.sqrt(D)
        values = rng.normal(size=(T, m))
        alpha = rng.uniform(0.5, 1.0, size=(T, D))
        l2 = rng.uniform(0, 0.3, size=T)
        r2g = 10.0 ** rng.uniform(-1.5, 0.5, size=(T, G))
        r2col = np.repeat(r2g, m // G, axis=1)
        tr = bl_filter(keys, values, l2=l2, r2=r2g, alpha=alpha, p0=1.5, groups=G, keep_states=True)
        means, covs = vec_kalman_filter(keys, values, l2=l2, r2=r2col, P0=1.5, A=alpha)
        mg = m // G
        expected = np.zeros_like(covs)               # blockdiag over columns of the group covariances
        for j in range(m):
            expected[:, j * D:(j + 1) * D, j * D:(j + 1) * D] = tr.Ps[:, j // mg]
        worst = max(worst, rel(tr.Ms, means), rel(expected, covs))
        # the exact posterior is not I_m ⊗ P: two groups' blocks differ
        gap = np.abs(covs[-1][:D, :D] - covs[-1][(m - 1) * D:, (m - 1) * D:]).max()
        gap_min = min(gap_min, gap)
        n += 1
    ev.close("numpy", "grouped-noise filter (G covariances) = Dm×Dm Kalman with per-column r² (every step)",
             worst, 0.0, abs_tol=1e-12, note=f"{n} random settings, diagonal dynamics")
    ev.holds("numpy", "with distinct r² per group the exact covariance blocks differ (no single I_m ⊗ P)",
             gap_min > 1e-4, computed=float(gap_min))
    # equal noise: one P suffices (closure), numerically
    keys, values = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    tr = bl_filter(keys, values, l2=0.1, r2=0.3, p0=1.0, keep_states=True)
    _, covs = vec_kalman_filter(keys, values, l2=0.1, r2=0.3, P0=1.0)
    ev.close("numpy", "equal noise: Kalman covariance = I_m ⊗ P at every step",
             rel(np.stack([np.kron(np.eye(2), P) for P in tr.Ps]), covs), 0.0, abs_tol=1e-12)
    ev.record(numpy_max_rel_error=worst, numpy_min_block_gap=float(gap_min))
    ev.summary = (f"sympy: closure for general D, m; per-column noise → blockdiag(P̄ − β_j uuᵀ) at D=m=2; "
                  f"numpy: grouped filter = full Kalman to {worst:.1e}, blocks differ by ≥ {gap_min:.2g}")


# -- bl.gated_form, bl.gain_bound ------------------------------------------------
def gated_form(ev: Evidence) -> None:
    numpy = _gated_form_numpy(ev)
    d = bp.gated_form()
    sympy_derivation(ev, d)
    ev.record(sympy_F_example=str(d.objects["F_example"].tolist()))
    ev.summary = ("sympy: residual = gated form for general D, m; F u = (1−g)u, F = I on k⊥, "
                  "off-diagonal −β u_i k_j; " + numpy)


def _gated_form_numpy(ev: Evidence) -> str:
    rng = np.random.default_rng(FILTER_SEED + 1)
    worst, offdiag, outside = 0.0, 0.0, 0
    for D, m, T in [(3, 2, 6), (5, 4, 8), (8, 3, 10)]:
        keys, values, A, l2, r2, P0 = random_case(rng, D, m, T, dynamics="full")
        tr = bl_filter(keys, values, l2=l2, r2=r2, p0=P0, A=A, keep_states=True)
        M_prev = np.zeros((D, m))
        for t in range(T):
            F = np.eye(D) - tr.beta[t] * np.outer(tr.u[t], keys[t])
            gated = F @ A[t] @ M_prev + tr.beta[t] * np.outer(tr.u[t], values[t])
            worst = max(worst, np.abs(gated - tr.Ms[t]).max() / max(1.0, np.abs(tr.Ms[t]).max()))
            offdiag = max(offdiag, np.abs(F - np.diag(np.diag(F))).max())
            outside += int(np.any((F < 0) | (F > 1)))
            M_prev = tr.Ms[t]
    ev.close("numpy", "F A M + β u vᵀ equals the residual-form update", worst, 0.0, abs_tol=1e-12)
    ev.holds("numpy", "F_t has non-zero off-diagonal entries (not an elementwise gate)", offdiag > 1e-3,
             computed=offdiag)
    ev.record(numpy_max_rel_error=worst, max_offdiagonal_of_F=offdiag, steps_with_F_entries_outside_0_1=outside)
    return f"numpy: gated = residual form to {worst:.1e}; |offdiag F| up to {offdiag:.2f}"


def gain_bound(ev: Evidence) -> None:
    numpy = _gain_bound_numpy(ev)
    d = bp.gain_bound()
    sympy_derivation(ev, d)
    ev.record(sympy_beta_example=str(d.objects["beta_example"]), sympy_gain_example=str(d.objects["g_example"]))
    ev.summary = "sympy: 1−g = r²/(r²+s) > 0, g ≥ 0, β ≤ 1/r²; exact example β = 5, g = 1/2; " + numpy


def _gain_bound_numpy(ev: Evidence) -> str:
    rng = np.random.default_rng(FILTER_SEED + 2)
    # 1 − g = r²β exactly; computing it that way keeps "< 1" meaningful in
    # float64 even when kᵀP̄k ≫ r² (where g itself rounds to 1.0).
    gmin, slack_min, n = np.inf, np.inf, 0
    for D in (1, 2, 4, 8, 16):
        for _ in range(20):
            rank = int(rng.integers(0, D + 1))
            B = rng.normal(size=(D, rank)) * 10.0 ** rng.uniform(-3, 3)
            P0 = B @ B.T
            T = 6
            keys = rng.normal(size=(T, D)) * 10.0 ** rng.uniform(-2, 2)
            r2 = 10.0 ** rng.uniform(-6, 3, size=T)
            tr = bl_filter(keys, rng.normal(size=(T, 2)), l2=10.0 ** rng.uniform(-6, 1, size=T) * rng.integers(0, 2),
                           r2=r2, p0=P0)
            gmin, slack_min, n = min(gmin, tr.gain.min()), min(slack_min, (r2 * tr.beta).min()), n + T
    ev.holds("numpy", "g_t ∈ [0, 1) over random PSD (incl. singular) covariances, keys and r² > 0",
             bool(gmin >= 0 and slack_min > 0), computed={"min g": float(gmin), "min 1-g": float(slack_min)},
             note=f"{n} steps; 1-g computed as r²β")
    # β is a precision, not a fraction: it exceeds 1 when r² + kᵀP̄k < 1.
    tr = bl_filter(np.array([[1.0, 0.0]]), np.array([[1.0]]), l2=0.0, r2=0.05, p0=0.1)
    ev.holds("numpy", "β > 1 example (unit key, r²=0.05, P̄=0.1 I)", bool(tr.beta[0] > 1),
             computed={"beta": float(tr.beta[0]), "gain": float(tr.gain[0])})
    ev.record(numpy_gain_min=float(gmin), numpy_min_one_minus_gain=float(slack_min),
              numpy_beta_example=float(tr.beta[0]))
    return (f"numpy: g ≥ {gmin:.2g}, 1−g ≥ {slack_min:.2g} over {n} random steps; "
            f"β={tr.beta[0]:.3f} > 1 with g={tr.gain[0]:.3f}")


# -- bl.readout_cov ----------------------------------------------------------
def readout_cov(ev: Evidence) -> None:
    sympy_derivation(ev, bp.readout_covariance(2, 2))
    rng = np.random.default_rng(SEED)
    D, m, T = 4, 3, 7
    keys, values, q = rng.normal(size=(T, D)), rng.normal(size=(T, m)), rng.normal(size=(T, D))
    tr = bl_filter(keys, values, q, l2=0.2, r2=0.3, p0=2.0)
    qT = q[-1]
    mc = readout_monte_carlo(tr.M, tr.P, qT, n_samples=200_000, seed=SEED)
    # the closed form, evaluated at the filter's state
    var = 1.0 + qT @ tr.P @ qT
    z_mean = np.abs(mc["mean"] - tr.M.T @ qT) / mc["se_mean"]
    z_cov = np.abs(mc["cov"] - var * np.eye(m)) / mc["se_cov"]
    ev.holds("numpy", "Monte Carlo mean within 5 SE of M_Tᵀq_T", z_mean.max() < 5, computed=float(z_mean.max()),
             note=f"n = {mc['n']} samples")
    ev.holds("numpy", "Monte Carlo covariance within 5 SE of (1 + qᵀPq) I_m (all m² entries)",
             z_cov.max() < 5, computed=float(z_cov.max()))
    ev.close("numpy", "filter's y_var = q_tᵀ P_t q_t (predictive variance minus 1)", tr.y_var[-1], var - 1.0,
             rel_tol=1e-12)
    ev.record(readout_variance=float(var), mc_variance_diag=np.diag(mc["cov"]).tolist(),
              mc_max_z_mean=float(z_mean.max()), mc_max_z_cov=float(z_cov.max()))
    ev.summary = (f"sympy: Cov Z = (1+qᵀPq) I_m (general D, m; explicit D=m=2); numpy Monte Carlo "
                  f"({mc['n']} samples): variance {var:.4f}, |z| ≤ {max(z_mean.max(), z_cov.max()):.2f}")
