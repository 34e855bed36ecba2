r"""The BL filter chunk by chunk, in float64 numpy (BL App. D, p.16; the form the chunked kernel follows).

Within a chunk of ``C`` tokens ``τ = 0..C−1`` starting from the posterior
``(M_0, P_0)`` of the previous token (one value column ``s`` shown; all columns
of a noise group share the covariance):

* decay ratios ``R[τ, i] = α_{i+1} ⊙ … ⊙ α_τ`` (``τ ≥ i``; 1 on the diagonal),
  formed as products (no division, so ``α = 0`` is fine), ``γ_τ = α_0 ⊙ R[τ, 0]``;
* prior given the chunk start: ``Π_τ = Cov(s_τ) = diag(γ_τ) P_0 diag(γ_τ) + diag(c_τ)``,
  ``c_τ = Σ_{j≤τ} ℓ_j² R[τ, j]²``, and ``Cov(s_τ, s_i) = diag(R[τ, i]) Π_i`` (``τ ≥ i``);
* the observations ``y_τ = k_τᵀ s_τ + e_τ`` have
  ``Σ_y[τ, i] = k_τᵀ (R[τ, i] ⊙ ω_i) + r_τ² δ_{τi}``, ``ω_i = Π_i k_i``.

**Covariance pass.**  ``Σ_y = L diag(d) Lᵀ`` (``L`` unit lower triangular): the
filter's innovation precisions are ``β_τ = 1/d_τ`` and its write directions
``u_τ = P̄_τ k_τ = Σ_{i≤τ} (L^{-1})_{τi} R[τ, i] ⊙ ω_i``; the chunk-end
covariance is ``P_C = Π_{C−1} − Σ_i β_i ũ_i ũ_iᵀ`` with ``ũ_i = R[C−1, i] ⊙ u_i``.

**Mean pass (WY / UT form).**  Given ``β, u`` the mean recursion is a
generalised delta rule, and its innovations ``e_τ = v_τ − k_τᵀ(A_τ M_{τ−1})``
solve the unit lower-triangular system ``(I + A) E = V − K̃ M_0`` with
``A[τ, i] = β_i k_τᵀ (R[τ, i] ⊙ u_i)`` (``i < τ``) and ``K̃`` rows
``(γ_τ ⊙ k_τ)ᵀ`` -- the same shapes as DeltaNet's WY machinery.  (It is the
same triangle: ``I + A = L``; :func:`chunk_covariance` returns ``L`` so the
identity can be checked.)  Then
``y_τ = M_0ᵀ(γ_τ ⊙ q_τ) + Σ_{i≤τ} β_i (q_τ · R[τ, i] ⊙ u_i) e_i`` and
``M_C = γ_{C−1} ⊙ M_0 + Σ_i β_i ũ_i e_iᵀ``.

Only the ``D×D`` chunk-end covariance and ``M`` pass from chunk to chunk.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
from scipy.linalg import solve_triangular

from assocmem import validate as V


class ChunkTrace(NamedTuple):
    M: np.ndarray                  # [D, m] final mean
    P: np.ndarray                  # [D, D] ([G, D, D] with groups) final covariance
    y: Optional[np.ndarray]        # [T, m] read-outs M_tᵀ q_t
    beta: np.ndarray               # [T] ([T, G])
    u: np.ndarray                  # [T, D] ([T, G, D])
    L_minus_WY: float              # max |L − (I + A)| over chunks and groups


def _ratios(a: np.ndarray) -> np.ndarray:
    """``R[τ, i, :] = Π_{j=i+1}^{τ} a[j, :]`` for ``τ ≥ i``, 0 above the diagonal."""
    C, D = a.shape
    R = np.zeros((C, C, D))
    for i in range(C):
        R[i, i] = 1.0
        for t in range(i + 1, C):
            R[t, i] = R[t - 1, i] * a[t]
    return R


def chunk_covariance(P0, k, a, l2, r2):
    """Covariance pass of one chunk for one noise group.

    ``P0 [D, D]``, ``k [C, D]``, ``a [C, D]`` decays, ``l2 [C]``, ``r2 [C]``.
    Returns ``beta [C]``, ``u [C, D]``, chunk-end ``P [D, D]``, ``L [C, C]``,
    the ratios ``R`` and ``gamma [C, D]``.
    """
    C, D = k.shape
    R = _ratios(a)
    gamma = a[0] * R[:, 0]                                   # γ_τ = α_0 ⊙ … ⊙ α_τ
    c = np.einsum("j,tjd->td", l2, R ** 2)                   # c_τ = Σ_{j≤τ} ℓ_j² R[τ,j]²
    Pi = gamma[:, :, None] * P0[None] * gamma[:, None, :] + c[:, :, None] * np.eye(D)
    omega = np.einsum("tij,tj->ti", Pi, k)                   # ω_i = Π_i k_i
    Sy = np.einsum("td,tid,id->ti", k, R, omega)             # lower triangle (τ ≥ i), R = 0 above
    Sy = np.tril(Sy) + np.tril(Sy, -1).T + np.diag(r2)
    Ch = np.linalg.cholesky(Sy)
    dsq = np.diag(Ch)
    L = Ch / dsq[None, :]
    beta = 1.0 / dsq ** 2
    Linv = solve_triangular(L, np.eye(C), lower=True, unit_diagonal=True)
    u = np.einsum("ti,tid,id->td", Linv, R, omega)
    ut = R[-1] * u                                           # ũ_i = R[C−1, i] ⊙ u_i
    P_end = Pi[-1] - np.einsum("i,id,ie->de", beta, ut, ut)
    return beta, u, 0.5 * (P_end + P_end.T), L, R, gamma


def chunk_mean(M0, k, v, q, beta, u, R, gamma):
    """Mean pass of one chunk (WY / UT form): innovations, read-outs, chunk-end mean.

    Returns ``y [C, m]`` (or None), ``M_end [D, m]``, and ``I + A [C, C]``.
    """
    C = k.shape[0]
    Ru = R * u[None, :, :]                                   # R[τ,i] ⊙ u_i
    A = np.tril(np.einsum("td,tid->ti", k, Ru) * beta[None, :], -1)
    IA = np.eye(C) + A
    E = solve_triangular(IA, v - (gamma * k) @ M0, lower=True, unit_diagonal=True)
    y = None
    if q is not None:
        W = np.tril(np.einsum("td,tid->ti", q, Ru) * beta[None, :])
        y = (gamma * q) @ M0 + W @ E
    M_end = gamma[-1][:, None] * M0 + (Ru[-1] * beta[:, None]).T @ E
    return y, M_end, IA


class DenseInputs(NamedTuple):
    """The checked inputs of a dense BL filter run (:func:`dense_inputs`)."""
    keys: np.ndarray            # [T, D]
    values: np.ndarray          # [T, m]
    queries: Optional[np.ndarray]
    l2: np.ndarray              # [T]
    r2: np.ndarray              # [T, G]
    alpha: Optional[np.ndarray]  # [T, D] or None (no decay)
    P0: np.ndarray              # [G, D, D]
    M0: np.ndarray              # [D, m]
    T: int
    D: int
    m: int
    G: int
    mg: int


def dense_inputs(keys, values, queries=None, *, l2=0.0, r2=1.0, p0=1.0, alpha=None, groups: int = 1,
                 M0=None) -> DenseInputs:
    """Check and broadcast the inputs shared by the dense BL filter forms (chunked here, parallel in
    time in :mod:`.bl_parallel`); a bad one raises a ``ValueError`` naming it."""
    keys, values = V.finite("keys", keys), V.finite("values", values)
    if keys.ndim != 2 or values.ndim != 2 or keys.shape[0] != values.shape[0]:
        raise ValueError("keys and values must have shapes [T, D] and [T, m] with the same T")
    T, D = keys.shape
    m = values.shape[1]
    G = V.count("groups", groups, 1)
    if m % G:
        raise ValueError(f"groups={G} must divide the value width m={m}")
    if queries is not None:
        queries = V.finite("queries", queries)
        if queries.shape != (T, D):
            raise ValueError(f"queries must have shape {(T, D)} (got {queries.shape})")
    try:
        l2a = np.broadcast_to(V.nonnegative("l2", l2), (T,)).astype(float)
    except ValueError:
        raise ValueError(f"l2 of shape {np.shape(l2)} does not broadcast to (T,) = {(T,)}") from None
    r2a = V.positive("r2", r2)
    if r2a.ndim == 1:                      # per token, shared by the groups
        r2a = r2a[:, None]
    try:
        r2a = np.broadcast_to(r2a, (T, G)).astype(float)
    except ValueError:
        raise ValueError(f"r2 of shape {np.shape(r2)} does not broadcast to (T, G) = {(T, G)}") from None
    if alpha is not None:
        try:
            alpha = np.broadcast_to(V.finite("alpha", alpha), (T, D)).astype(float)
        except ValueError:
            raise ValueError(f"alpha of shape {np.shape(alpha)} does not broadcast to (T, D) = {(T, D)}") from None
    p0a = V.finite("p0", p0)
    if p0a.ndim == 0:
        if p0a < 0:
            raise ValueError(f"p0 must be >= 0 (got {float(p0a)!r})")
        P0 = np.broadcast_to(float(p0a) * np.eye(D), (G, D, D)).copy()
    else:
        if p0a.shape not in ((D, D), (G, D, D)):
            raise ValueError(f"p0 must be a scalar, [D, D] or [G, D, D] = {(G, D, D)} (got {p0a.shape})")
        P0 = np.broadcast_to(V.psd("p0", p0a), (G, D, D)).copy()
    M0a = np.zeros((D, m)) if M0 is None else V.finite("M0", M0)
    if M0a.shape != (D, m):
        raise ValueError(f"M0 must have shape {(D, m)} (got {M0a.shape})")
    return DenseInputs(keys, values, queries, l2a, r2a, alpha, P0, M0a, T, D, m, G, m // G)


def bl_chunked(keys, values, queries=None, *, l2=0.0, r2=1.0, p0=1.0, alpha=None, groups: int = 1,
               chunk: int = 16, M0=None) -> ChunkTrace:
    """The BL filter (dense covariance, diagonal dynamics) computed chunk by chunk.

    ``keys [T, D]``, ``values [T, m]``, ``queries [T, D]`` or None; ``l2`` scalar
    or ``[T]``; ``r2`` scalar, ``[T]`` or ``[T, G]`` with ``groups=G``; ``alpha``
    ``[T, D]`` decays (default 1); ``p0`` scalar, ``[D, D]`` or ``[G, D, D]``;
    ``chunk`` ≥ 1 (the last chunk may be shorter).  Same results as
    ``bl_filter(..., variant="dense")`` up to round-off.
    """
    x = dense_inputs(keys, values, queries, l2=l2, r2=r2, p0=p0, alpha=alpha, groups=groups, M0=M0)
    chunk = V.count("chunk", chunk, 1)
    keys, values, queries, l2, r2 = x.keys, x.values, x.queries, x.l2, x.r2
    T, D, m, G, mg = x.T, x.D, x.m, x.G, x.mg
    alpha = np.ones((T, D)) if x.alpha is None else x.alpha
    P, M = x.P0.copy(), x.M0.astype(float).copy()

    betas, us = np.empty((T, G)), np.empty((T, G, D))
    ys = np.empty((T, m)) if queries is not None else None
    worst = 0.0
    for s in range(0, T, chunk):
        e = min(s + chunk, T)
        k, a = keys[s:e], alpha[s:e]
        q = None if queries is None else queries[s:e]
        for g in range(G):
            cols = slice(g * mg, (g + 1) * mg)
            beta, u, P[g], L, R, gamma = chunk_covariance(P[g], k, a, l2[s:e], r2[s:e, g])
            y, M_end, IA = chunk_mean(M[:, cols], k, values[s:e, cols], q, beta, u, R, gamma)
            worst = max(worst, float(np.abs(L - IA).max()))
            M[:, cols] = M_end
            betas[s:e, g], us[s:e, g] = beta, u
            if ys is not None:
                ys[s:e, cols] = y
    if G == 1:
        return ChunkTrace(M, P[0], ys, betas[:, 0], us[:, 0], worst)
    return ChunkTrace(M, P, ys, betas, us, worst)
