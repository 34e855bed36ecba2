r"""float64 simulations for the BL analysis claims, all *through* the model.

Every quantity here is produced by running the design model's filter
(:func:`~assocmem.numerics.bl_filter.bl_filter`), the Kalman filter on
``vec S`` (:func:`~assocmem.numerics.kalman.vec_kalman_filter`), sampling, or
conditioning a joint Gaussian written from a model's definition.  None of
these functions evaluates the closed forms of :mod:`assocmem.theory` they are
checked against; the claim checks (``assocmem.claims.bl_*``) compare.

Contents (by claim ID):

* :func:`readout_monte_carlo` -- ``bl.readout_cov``: sample ``S ~ N(M, I_m ⊗ P)``
  and ``Z | S ~ N(Sᵀq, I_m)``; sample mean / covariance with standard errors.
* :func:`same_key_run` -- ``bl.steady_state``: gains and predicted variances
  of repeated writes of one unit key.
* :func:`cross_shrinkage_run` -- ``bl.cross_shrinkage``: ``Δ_B`` per step from
  the filter's posterior covariances while ``A`` is written repeatedly.
* :func:`rotation_angles` -- ``bl.rotation``: the angle between the filter's
  write direction ``u`` at an ``A`` write and ``k_A``, after ``n`` writes of ``B``;
  :func:`rotation_rate_fit` measures how fast it approaches ``arcsin ρ``.
* :func:`delta_rule_reference` -- ``bl.delta_reset``: DeltaNet / Gated DeltaNet /
  KDA / Longhorn in their own published conventions.
* :func:`latent_input_posterior` -- ``bl.additive``: posterior of ``vec S_T``
  in the latent-input model by conditioning its joint Gaussian (no recursion).
* :func:`plateau_run` -- ``bl.delta_plateau``: read-outs at ``k_A``, ``k_B`` under
  repeated fixed-gain ``A`` writes.
* :func:`capacity_probe` -- ``bl.capacity``: least-squares residuals of
  ``KᵀM = V`` and the read-out error of a BL memory written with tiny ``r²``.
* :func:`rotation_dynamics` / :func:`real_row_noise` -- ``bl.complex_dynamics``.
* :func:`state_bytes` -- ``bl.cost``: bytes of the filter's state.
"""
from __future__ import annotations

import numpy as np

from assocmem import validate as V

from .bl_filter import bl_filter
from .kalman import vec_kalman_filter


def _unit(x):
    x = np.asarray(x, dtype=float)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def overlap_pair(rho: float, D: int, rng=None):
    """Unit ``k_A``, ``k_B`` in ``R^D`` with ``k_Aᵀk_B = ρ`` (random orientation
    when ``rng`` is given, else ``k_B = e_1``, ``k_A = ρ e_1 + √(1−ρ²) e_2``)."""
    rho = float(V.in_closed("rho", rho, -1.0, 1.0))
    D = V.count("D", D, 2)
    Q = np.eye(D) if rng is None else np.linalg.qr(rng.normal(size=(D, D)))[0]
    kB = Q[:, 0]
    kA = rho * Q[:, 0] + np.sqrt(max(1.0 - rho * rho, 0.0)) * Q[:, 1]
    return kA, kB


# ----------------------------------------------------------------------------
# bl.readout_cov
# ----------------------------------------------------------------------------


def readout_monte_carlo(M, P, q, *, n_samples: int = 200_000, seed: int = 0) -> dict:
    """Monte Carlo of the read-out model (BL Eqs. 7-8).

    ``S = M + L E`` with ``L Lᵀ = P`` (symmetric square root, so singular ``P``
    is fine) and ``E`` standard normal ``D×m`` (so ``vec S ~ N(vec M, I_m ⊗ P)``),
    then ``Z = Sᵀq + ε``, ``ε ~ N(0, I_m)``.  Returns the sample mean, sample
    covariance and their standard errors (Gaussian formulas:
    ``SE(mean_j) = √(C_jj/n)``, ``SE(C_ij) = √((C_ii C_jj + C_ij²)/n)``).
    """
    M = V.finite("M", M)
    P = V.psd("P", P)
    q = V.finite("q", q)
    n = V.count("n_samples", n_samples, 100)
    D, m = M.shape
    w, U = np.linalg.eigh(P)
    L = U * np.sqrt(np.clip(w, 0.0, None))
    rng = np.random.default_rng(seed)
    E = rng.standard_normal(size=(n, D, m))
    S = M + np.einsum("ij,njk->nik", L, E)
    Z = np.einsum("nik,i->nk", S, q) + rng.standard_normal(size=(n, m))
    mean = Z.mean(axis=0)
    C = np.cov(Z, rowvar=False).reshape(m, m)
    d = np.diag(C)
    return {"mean": mean, "cov": C, "se_mean": np.sqrt(d / n),
            "se_cov": np.sqrt((np.outer(d, d) + C ** 2) / n), "n": n}


# ----------------------------------------------------------------------------
# bl.steady_state
# ----------------------------------------------------------------------------


def same_key_run(r2, l2, p0, T: int, D: int = 3, seed: int = 0) -> dict:
    """Write one random unit key ``T`` times (``A = I``) through ``bl_filter``.

    Returns per-step gains ``g_t`` and predicted variances ``x_t = kᵀP̄_t k``
    (read off the filter as ``kᵀu_t``).  ``r2, l2, p0`` may be arrays (a batch).
    """
    T = V.count("T", T, 1)
    rng = np.random.default_rng(seed)
    k = _unit(rng.normal(size=D))
    r2, l2, p0 = (np.asarray(x, dtype=float) for x in (r2, l2, p0))
    batch = np.broadcast_shapes(r2.shape, l2.shape, p0.shape)
    keys = np.broadcast_to(k, batch + (T, D))
    values = np.ones(batch + (T, 1))
    tr = bl_filter(keys, values, l2=np.broadcast_to(l2, batch)[..., None], r2=np.broadcast_to(r2, batch)[..., None],
                   p0=np.broadcast_to(p0, batch), variant="dense")
    x = np.einsum("...td,d->...t", tr.u, k)
    return {"gain": tr.gain, "x": x, "beta": tr.beta, "key": k}


# ----------------------------------------------------------------------------
# bl.cross_shrinkage
# ----------------------------------------------------------------------------


def random_psd(D: int, rng, scale: float = 1.0):
    B = rng.normal(size=(D, D))
    return scale * (B @ B.T / D + 0.05 * np.eye(D))


def cross_shrinkage_run(rho, *, r2, l2, n_writes: int, D: int = 4, seed: int = 0, P0=None) -> dict:
    """Write ``k_A`` ``n_writes`` times from a random PSD prior (``A = I``).

    Returns, per write ``t``: ``delta_B[t] = k_BᵀP_t k_B − k_BᵀP_{t−1}k_B`` (from
    the filter's covariances), and the filter's ``u_t = P̄_t k_A`` projected on
    ``k_B`` and ``k_A`` (``cross[t] = k_Bᵀu_t``, ``s_A[t] = k_Aᵀu_t``).
    """
    rng = np.random.default_rng(seed)
    kA, kB = overlap_pair(rho, D, rng)
    P0 = random_psd(D, rng) if P0 is None else V.psd("P0", P0)
    n = V.count("n_writes", n_writes, 1)
    keys = np.broadcast_to(kA, (n, D))
    tr = bl_filter(keys, np.zeros((n, 1)), l2=l2, r2=r2, p0=P0, keep_states=True)
    var_B = np.concatenate([[kB @ P0 @ kB], np.einsum("i,tij,j->t", kB, tr.Ps, kB)])
    return {"delta_B": np.diff(var_B), "cross": tr.u @ kB, "s_A": tr.u @ kA, "gain": tr.gain,
            "kA": kA, "kB": kB, "P0": P0}


# ----------------------------------------------------------------------------
# bl.rotation
# ----------------------------------------------------------------------------


def rotation_angles(rho, n_values, *, p0, r2, l2, D: int = 2, prefix=None) -> np.ndarray:
    """Angle (radians) between the write direction ``u`` of an ``A`` write and
    ``k_A``, after ``n`` writes of ``B`` (for each ``n`` in ``n_values``).

    ``k_B = e_1``, ``k_A = ρ e_1 + √(1−ρ²) e_2``, ``A = I``, prior ``p0 I``.
    ``prefix``: optional ``(keys [T0, D], values [T0, m])`` written before the B
    writes (e.g. the collision protocol's two rounds).  All ``n`` run as one
    batch of sequences of equal length: sequence ``j`` writes B ``n_j`` times,
    then A, then A again (padding that does not affect step ``n_j``).
    """
    n_values = np.asarray([V.count("n", n, 0) for n in np.atleast_1d(n_values)])
    kA, kB = overlap_pair(rho, D)
    N = int(n_values.max())
    T0 = 0 if prefix is None else len(prefix[0])
    m = 1 if prefix is None else np.asarray(prefix[1]).shape[1]
    T = T0 + N + 1
    keys = np.empty((len(n_values), T, D))
    values = np.zeros((len(n_values), T, m))
    if prefix is not None:
        keys[:, :T0] = np.asarray(prefix[0], dtype=float)
        values[:, :T0] = np.asarray(prefix[1], dtype=float)
    for j, n in enumerate(n_values):
        keys[j, T0:T0 + n] = kB
        keys[j, T0 + n:] = kA
    tr = bl_filter(keys, values, l2=l2, r2=r2, p0=p0)
    u = tr.u[np.arange(len(n_values)), T0 + n_values]          # u at the first A write
    # atan2 of the parts across and along k_A: arccos of the cosine would lose half the
    # digits near 0 (an angle of 0 came out as 2e-8 from a cosine one ulp below 1)
    along = u @ kA
    return np.arctan2(np.linalg.norm(u - along[:, None] * kA, axis=-1), along)


def rotation_rate_fit(n_values, deviation) -> tuple[float, float, float]:
    """Fit ``θ_n − arcsin ρ ≈ −c/(n + n0)`` to measured angles: ``(n0, c, exponent)``.

    ``deviation`` is ``θ_n − arcsin ρ`` at the increasing ``n_values`` (from
    :func:`rotation_angles`).  ``n0`` and ``c`` solve the model through the two
    largest ``n``; ``exponent`` is the least-squares slope of
    ``log|θ_n − arcsin ρ|`` against ``log(n + n0)`` over the four largest (−1
    when the decay is ``1/n``).  A measurement of the simulated curve: the
    closed-form ``c`` and ``n0`` it is compared with are the theory's.
    """
    n, dev = np.asarray(n_values), np.asarray(deviation, dtype=float)
    if n.ndim != 1 or n.shape != dev.shape or len(n) < 4:
        raise V.ParamError("n_values", f"n_values and deviation must be 1-d of one length >= 4 "
                                       f"(got {n.shape} and {dev.shape})")
    (n1, n2), (d1, d2) = n[-2:], dev[-2:]
    n0 = (n2 * d2 - n1 * d1) / (d1 - d2)
    c = float(-d1 * (n1 + n0))
    exponent = float(np.polyfit(np.log(n[-4:] + n0), np.log(-dev[-4:]), 1)[0])
    return float(n0), c, exponent


# ----------------------------------------------------------------------------
# bl.delta_reset: the Table 1 members in their own conventions
# ----------------------------------------------------------------------------


def delta_rule_reference(keys, values, *, eta, kind: str = "deltanet", alpha=None, S0=None) -> np.ndarray:
    """Final state of a delta-rule family member, each in its published form.

    State ``S`` is ``m×D`` (value × key, as in DeltaNet / GDN / Longhorn papers):

    * ``deltanet``: ``S_t = S_{t−1}(I − η_t k_t k_tᵀ) + η_t v_t k_tᵀ``;
    * ``gdn``: ``S_t = α_t S_{t−1}(I − η_t k_t k_tᵀ) + η_t v_t k_tᵀ`` (scalar ``α_t``);
    * ``kda``: ``S_t = (S_{t−1} Diag(α_t))(I − η_t k_t k_tᵀ) + η_t v_t k_tᵀ``
      (channel-wise ``α_t ∈ R^D``);
    * ``longhorn``: row ``j`` (value coordinate) has its own step
      ``ε_{t,j}``: ``S_t = S_{t−1} − diag(ε_t)(S_{t−1}k_t − v_t) k_tᵀ``; here ``eta``
      is ``[T, m]``.

    Returns ``S_T`` (``m×D``).
    """
    V.choice("kind", kind, ("deltanet", "gdn", "kda", "longhorn"))
    keys, values = V.finite("keys", keys), V.finite("values", values)
    T, D = keys.shape
    m = values.shape[1]
    S = np.zeros((m, D)) if S0 is None else np.array(S0, dtype=float)
    eta = np.asarray(eta, dtype=float)
    for t in range(T):
        k, v = keys[t], values[t]
        if kind == "longhorn":
            S = S - eta[t][:, None] * np.outer(S @ k - v, k)
            continue
        e = float(np.broadcast_to(eta, (T,))[t])
        if kind == "gdn":
            S = float(np.broadcast_to(alpha, (T,))[t]) * S
        elif kind == "kda":
            S = S * np.asarray(alpha)[t][None, :]
        S = S @ (np.eye(D) - e * np.outer(k, k)) + e * np.outer(v, k)
    return S


# ----------------------------------------------------------------------------
# bl.additive
# ----------------------------------------------------------------------------


def latent_input_posterior(keys, values, *, lam, r2, alpha=None):
    """Posterior of ``vec S_T`` in the latent-input model (BL §3.2, App. A).

    ``φ_t ~ N(0, λ_t I_m)`` independent, ``v_t | φ_t ~ N(φ_t, r_t² I_m)``,
    ``S_t = A_t S_{t−1} + k_t φ_tᵀ``, ``S_0 = 0``, ``A_t = diag(alpha_t)`` (or I).
    ``vec S_T = Σ_t (I_m ⊗ Φ_{T,t} k_t) φ_t`` with ``Φ_{T,t} = A_T ⋯ A_{t+1}``;
    the mean and covariance come from conditioning the joint Gaussian of
    ``(φ_1..T, e_1..T)``.  Returns mean ``[D, m]`` and covariance ``[Dm, Dm]``.
    """
    keys, values = V.finite("keys", keys), V.finite("values", values)
    T, D = keys.shape
    m = values.shape[1]
    lam = np.broadcast_to(V.positive("lam", lam), (T,))
    r2 = np.broadcast_to(V.positive("r2", r2), (T,))
    alpha = np.ones((T, D)) if alpha is None else np.broadcast_to(V.finite("alpha", alpha), (T, D))
    n = D * m
    n_src = 2 * T * m                                  # φ_1..T, e_1..T
    var = np.concatenate([np.repeat(lam, m), np.repeat(r2, m)])
    L_S = np.zeros((n, n_src))
    L_v = np.zeros((T * m, n_src))
    Im = np.eye(m)
    for t in range(T):
        phi_k = keys[t].copy()
        for s in range(t + 1, T):
            phi_k = alpha[s] * phi_k                   # Φ_{T,t} k_t
        L_S[:, t * m:(t + 1) * m] = np.kron(Im, phi_k[:, None])
        L_v[t * m:(t + 1) * m, t * m:(t + 1) * m] = Im
        L_v[t * m:(t + 1) * m, T * m + t * m: T * m + (t + 1) * m] = Im
    C_sv = (L_S * var) @ L_v.T
    C_vv = (L_v * var) @ L_v.T
    C_ss = (L_S * var) @ L_S.T
    mean = C_sv @ np.linalg.solve(C_vv, values.reshape(-1))
    cov = C_ss - C_sv @ np.linalg.solve(C_vv, C_sv.T)
    return mean.reshape(m, D).T, 0.5 * (cov + cov.T)


# ----------------------------------------------------------------------------
# bl.delta_plateau
# ----------------------------------------------------------------------------


def plateau_run(rho, gamma, n: int, *, D: int = 4, m: int = 3, seed: int = 0) -> dict:
    """Fixed-gain writes of ``A`` (covariance reset with ``λ = γ r²/(1−γ)``, unit
    ``k_A``, so the gain is ``γ``) from a random memory ``M_0``.

    Returns the read-outs ``a_t = M_tᵀk_A``, ``b_t = M_tᵀk_B`` for ``t = 0..n``
    (``[n+1, m]``), ``M_0``, ``v_A`` and the filter's gains.
    """
    gamma = float(V.in_closed("gamma", gamma, 0.0, 1.0))
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must lie in (0, 1) (got {gamma!r})")
    n = V.count("n", n, 1)
    rng = np.random.default_rng(seed)
    kA, kB = overlap_pair(rho, D, rng)
    M0 = rng.normal(size=(D, m))
    vA = rng.normal(size=m)
    r2 = 0.05
    lam = gamma * r2 / (1.0 - gamma)
    keys = np.broadcast_to(kA, (n, D))
    tr = bl_filter(keys, np.broadcast_to(vA, (n, m)), l2=0.0, r2=r2, variant="reset", lam=lam,
                   M0=M0, keep_states=True)
    Ms = np.concatenate([M0[None], tr.Ms])
    return {"a": Ms.transpose(0, 2, 1) @ kA, "b": Ms.transpose(0, 2, 1) @ kB, "M0": M0, "vA": vA,
            "gain": tr.gain, "kA": kA, "kB": kB}


# ----------------------------------------------------------------------------
# bl.capacity
# ----------------------------------------------------------------------------


def capacity_probe(D: int, n: int, m: int = 3, *, seed: int = 0, r2: float = 1e-10) -> dict:
    """Random Gaussian keys ``K`` (``D×n``) and targets ``V`` (``n×m``).

    ``lstsq_residual``: ``min_M ‖KᵀM − V‖_F / ‖V‖_F`` (numpy least squares);
    ``rank``: numerical rank of ``K``; ``bl_residual``: the same error for the
    mean of a BL memory (``ℓ² = 0``, prior ``I``, tiny ``r²``) after writing the
    ``n`` pairs once -- the filter's posterior mean, not a solver.
    """
    rng = np.random.default_rng(seed)
    K = rng.normal(size=(D, n)) / np.sqrt(D)
    Vt = rng.normal(size=(n, m))
    M, *_ = np.linalg.lstsq(K.T, Vt, rcond=None)
    tr = bl_filter(K.T, Vt, l2=0.0, r2=r2, p0=1.0)
    norm = np.linalg.norm(Vt)
    return {"lstsq_residual": np.linalg.norm(K.T @ M - Vt) / norm, "rank": int(np.linalg.matrix_rank(K)),
            "bl_residual": np.linalg.norm(K.T @ tr.M - Vt) / norm}


# ----------------------------------------------------------------------------
# bl.complex_dynamics
# ----------------------------------------------------------------------------


def rotation_dynamics(a) -> np.ndarray:
    """Real block-diagonal ``A`` (``[..., 2d, 2d]``) from complex diagonal
    dynamics ``a`` (``[..., d]``): block ``i`` is ``|a_i| R(arg a_i)``, acting on
    the pair (real, imaginary) of coordinate ``i``."""
    a = np.asarray(a, dtype=complex)
    d = a.shape[-1]
    A = np.zeros(a.shape[:-1] + (2 * d, 2 * d))
    A[..., 0::2, 0::2][..., range(d), range(d)] = a.real
    A[..., 1::2, 1::2][..., range(d), range(d)] = a.real
    A[..., 0::2, 1::2][..., range(d), range(d)] = -a.imag
    A[..., 1::2, 0::2][..., range(d), range(d)] = a.imag
    return A


def real_row_noise(d: int, l2: float) -> np.ndarray:
    """Process noise injected on the real rows only: ``ℓ² diag(1, 0, 1, 0, …)``."""
    return float(V.nonnegative("l2", l2)) * np.diag(np.tile([1.0, 0.0], d))


def structured_noise_posterior(keys, values, *, a, l2, r2, p0=1.0):
    """Exact posterior (vec-S Kalman) of the design model with complex diagonal
    dynamics ``a`` (``[T, d]``) in its real form and real-row noise ``ℓ² E``."""
    A = rotation_dynamics(a)
    d = np.asarray(a).shape[-1]
    return vec_kalman_filter(keys, values, l2=0.0, r2=r2, P0=p0, A=A, Q=real_row_noise(d, l2))


# ----------------------------------------------------------------------------
# bl.cost
# ----------------------------------------------------------------------------


def state_bytes(D: int, m: int, G: int = 1) -> dict:
    """Bytes of the state ``(M, P)`` that ``bl_filter`` carries between tokens."""
    D, m, G = V.count("D", D, 1), V.count("m", m, 1), V.count("G", G, 1)
    rng = np.random.default_rng(0)
    tr = bl_filter(rng.normal(size=(2, D)), rng.normal(size=(2, m)), l2=0.1,
                   r2=np.full((2, G), 0.5) if G > 1 else 0.5, groups=G)
    return {"M_bytes": tr.M.nbytes, "P_bytes": tr.P.nbytes, "itemsize": tr.M.itemsize,
            "M_shape": tr.M.shape, "P_shape": tr.P.shape}
