r"""Reference posteriors of the BL design model that take no Kronecker shortcut.

The design model (BL Def. 1): :math:`S_t = A_t S_{t-1} + W_t`,
:math:`\operatorname{vec} W_t \sim N(0, \ell_t^2 I_{Dm})`,
:math:`v_t = S_t^\top k_t + e_t`, :math:`e_t \sim N(0, R_t)` with
:math:`R_t = \operatorname{diag}(r_{t,1}^2, \dots, r_{t,m}^2)` (one noise level per
value column is allowed here, to exhibit when the Kronecker form breaks), and
:math:`\operatorname{vec} S_0 \sim N(0, \Sigma_0)`.

``vec`` stacks columns: ``vec(S)[j*D + i] = S[i, j]``.

* :func:`vec_kalman_filter` -- the textbook Kalman filter on the ``Dm``-vector
  ``vec S_t`` with transition ``I_m ⊗ A_t`` and observation matrix ``I_m ⊗ k_tᵀ``.
* :func:`joint_gaussian_posterior` -- no recursion at all: every variable is
  written as a linear map of the independent Gaussian sources
  ``(vec S_0, vec W_1..T, e_1..T)``, and the posterior of ``vec S_T`` given
  ``v_1..T`` comes from conditioning that joint Gaussian.  Small sizes only.
"""
from __future__ import annotations

import numpy as np

from assocmem import validate as V


def _vec(S):
    return S.reshape(-1, order="F")


def _unvec(x, D, m):
    return x.reshape(D, m, order="F")


def _prepare(keys, values, l2, r2, P0, A):
    keys = V.finite("keys", keys)
    values = V.finite("values", values)
    T, D = keys.shape
    m = values.shape[1]
    l2 = np.broadcast_to(V.nonnegative("l2", l2), (T,))
    r2 = np.broadcast_to(V.positive("r2", r2), (T, m)) if np.ndim(r2) == 2 else \
        np.broadcast_to(V.positive("r2", r2), (T,))[:, None] * np.ones(m)
    if A is None:
        A = np.broadcast_to(np.eye(D), (T, D, D))
    else:
        A = np.asarray(A, dtype=float)
        if A.shape == (T, D):          # diagonal dynamics
            A = np.einsum("ti,ij->tij", A, np.eye(D))
        A = np.broadcast_to(A, (T, D, D))
    P0 = np.asarray(P0, dtype=float)
    Sigma0 = P0 * np.eye(D * m) if P0.ndim == 0 else (
        np.kron(np.eye(m), V.psd("P0", P0)) if P0.shape == (D, D) else V.psd("P0", P0))
    return keys, values, l2, r2, A, Sigma0, T, D, m


def _observed(observed, T):
    """The per-step observation flags ``[T]`` (default: every step observed)."""
    if observed is None:
        return np.ones(T, dtype=bool)
    obs = np.asarray(observed)
    if obs.dtype != bool or obs.shape != (T,):
        raise ValueError(f"observed must be a bool array of shape ({T},) (got {obs.dtype} {obs.shape})")
    return obs


def vec_kalman_filter(keys, values, *, l2, r2, P0=1.0, A=None, Q=None, observed=None):
    """Kalman filter on ``vec S_t``; returns per-step means ``[T, D, m]`` and
    covariances ``[T, Dm, Dm]``.

    ``observed``: bool ``[T]``; at a step with ``observed[t] = False`` the
    observation is missing: the prediction (dynamics and process noise) runs,
    the update does not (the textbook missing-observation rule).

    ``P0``: scalar, a ``D×D`` matrix (prior ``I_m ⊗ P0``) or a full ``Dm×Dm``
    covariance.  ``r2``: ``[T]`` or per-column ``[T, m]``.  ``A``: ``[T, D]``
    (diagonal) or ``[T, D, D]``.  ``Q``: optional structured process noise,
    ``[D, D]`` or ``[T, D, D]`` PSD; the noise is then ``I_m ⊗ Q_t`` instead of
    ``ℓ_t² I`` (``l2`` is ignored), e.g. real-row noise for complex dynamics (App. D).
    """
    keys, values, l2, r2, A, Sigma, T, D, m = _prepare(keys, values, l2, r2, P0, A)
    obs = _observed(observed, T)
    if Q is not None:
        Q = np.broadcast_to(V.psd("Q", Q), (T, D, D))
    x = np.zeros(D * m)
    Im = np.eye(m)
    means, covs = np.empty((T, D, m)), np.empty((T, D * m, D * m))
    for t in range(T):
        F = np.kron(Im, A[t])
        H = np.kron(Im, keys[t][None, :])           # m x Dm
        x = F @ x
        Sigma = F @ Sigma @ F.T + (l2[t] * np.eye(D * m) if Q is None else np.kron(Im, Q[t]))
        if not obs[t]:
            means[t], covs[t] = _unvec(x, D, m), Sigma
            continue
        S_innov = H @ Sigma @ H.T + np.diag(r2[t])
        K = np.linalg.solve(S_innov, H @ Sigma).T   # Sigma H^T S^-1 (S symmetric)
        x = x + K @ (values[t] - H @ x)
        Sigma = Sigma - K @ S_innov @ K.T
        Sigma = 0.5 * (Sigma + Sigma.T)
        means[t], covs[t] = _unvec(x, D, m), Sigma
    return means, covs


def joint_gaussian_posterior(keys, values, *, l2, r2, P0=1.0, A=None, observed=None):
    """Posterior mean ``[D, m]`` and covariance ``[Dm, Dm]`` of ``vec S_T``
    given all observations, by conditioning the joint Gaussian directly.

    ``observed``: bool ``[T]``; only the observations of the steps marked
    True are conditioned on (the others are simply left out of the joint)."""
    keys, values, l2, r2, A, Sigma0, T, D, m = _prepare(keys, values, l2, r2, P0, A)
    obs = _observed(observed, T)
    n = D * m
    n_src = n + T * n + T * m                    # vec S_0, vec W_t, e_t
    # prior covariance of the sources (block diagonal)
    src_var = np.zeros((n_src, n_src))
    src_var[:n, :n] = Sigma0
    for t in range(T):
        o = n + t * n
        src_var[o:o + n, o:o + n] = l2[t] * np.eye(n)
        oe = n + T * n + t * m
        src_var[oe:oe + m, oe:oe + m] = np.diag(r2[t])
    # linear maps from sources to vec S_t and v_t
    L_S = np.zeros((n, n_src))
    L_S[:, :n] = np.eye(n)
    L_v = np.zeros((T * m, n_src))
    Im = np.eye(m)
    for t in range(T):
        L_S = np.kron(Im, A[t]) @ L_S
        L_S[:, n + t * n: n + (t + 1) * n] += np.eye(n)
        L_v[t * m:(t + 1) * m] = np.kron(Im, keys[t][None, :]) @ L_S
        L_v[t * m:(t + 1) * m, n + T * n + t * m: n + T * n + (t + 1) * m] += np.eye(m)
    rows = np.repeat(obs, m)                     # the observed entries of (v_1..T)
    L_v = L_v[rows]
    C_sv = L_S @ src_var @ L_v.T
    C_vv = L_v @ src_var @ L_v.T
    C_ss = L_S @ src_var @ L_S.T
    v = values.reshape(-1)[rows]
    mean = C_sv @ np.linalg.solve(C_vv, v)
    cov = C_ss - C_sv @ np.linalg.solve(C_vv, C_sv.T)
    return _unvec(mean, D, m), 0.5 * (cov + cov.T)
