"""numpy sides of bl.posterior, bl.gated_form and bl.gain_bound.

The BL filter (:func:`numerics.bl_filter`) is compared with references that
take no Kronecker shortcut: the Kalman filter on ``vec S`` and the posterior
obtained by conditioning the joint Gaussian of the design model directly.
Settings are drawn at random (seeded) over sizes, dynamics, noise levels and
PSD priors; the property-based versions live in ``tests/numerics``.
"""
from __future__ import annotations

import numpy as np

from assocmem.registry import Evidence, check

SEED = 1729


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


@check("bl.posterior")
def posterior_numpy(ev: Evidence) -> None:
    from assocmem.numerics import bl_filter, joint_gaussian_posterior, vec_kalman_filter

    rng = np.random.default_rng(SEED)
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
    ev.summary = (f"numpy: recurrence = vec-S Kalman ({worst_kf:.1e}) = joint conditioning "
                  f"({worst_joint:.1e}) on {n} random settings")


@check("bl.gated_form")
def gated_form_numpy(ev: Evidence) -> None:
    from assocmem.numerics import bl_filter

    rng = np.random.default_rng(SEED + 1)
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
    ev.summary = f"numpy: gated = residual form to {worst:.1e}; |offdiag F| up to {offdiag:.2f}"


@check("bl.gain_bound")
def gain_bound_numpy(ev: Evidence) -> None:
    from assocmem.numerics import bl_filter

    rng = np.random.default_rng(SEED + 2)
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
    ev.summary = (f"numpy: g ≥ {gmin:.2g}, 1−g ≥ {slack_min:.2g} over {n} random steps; "
                  f"β={tr.beta[0]:.3f} > 1 with g={tr.gain[0]:.3f}")
