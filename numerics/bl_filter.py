r"""The Bayesian-Layer filter family in float64 numpy (BL Prop. 1, Eqs. 9-13).

For each step :math:`t` (dynamics :math:`A_t`, process noise :math:`\ell_t^2`,
observation noise :math:`r_t^2`)

.. math::

    \bar P_t = A_t P_{t-1} A_t^\top + \ell_t^2 I,\quad
    u_t = \bar P_t k_t,\quad
    \beta_t = (r_t^2 + k_t^\top u_t)^{-1},

    M_t = A_t M_{t-1} + \beta_t u_t (v_t - (A_t M_{t-1})^\top k_t)^\top,\quad
    P_t = \bar P_t - \beta_t u_t u_t^\top .

Variants (``variant=``), one mechanism with the covariance handled differently:

* ``dense``  -- the full filter above;
* ``diag``   -- diagonal-covariance ablation: only ``diag(P_t)`` is kept after each update;
* ``reset``  -- covariance reset :math:`\bar P_t = \lambda_t I` (delta-rule family,
  BL Prop. 2); default :math:`\lambda_t = r_t^2`, i.e. gain 1/2 for unit keys;
* ``iso``    -- fixed isotropic prior :math:`\bar P_t = c I` (App. E.4.2), i.e.
  ``reset`` with :math:`\lambda = c`;
* ``linear`` -- additive (latent-input) family / linear attention,
  :math:`M_t = A_t M_{t-1} + \omega_t k_t v_t^\top` (BL §3.2), default ``omega = 0.5``.

Grouped observation noise (App. D): with ``groups=G`` the ``m`` value columns
are split into ``G`` contiguous groups of ``m/G`` columns, ``r2`` carries a
trailing ``G`` axis, and each group has its own covariance (``P: [..., G, D, D]``).

Everything is batched: leading axes of the inputs are independent
configurations and broadcast against each other.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from assocmem import validate as V

VARIANTS = ("dense", "diag", "reset", "iso", "linear")


class FilterTrace(NamedTuple):
    """Final state and per-step diagnostics of :func:`bl_filter`.

    ``gain``/``beta`` have shape ``[..., T]`` (``[..., T, G]`` when ``groups > 1``),
    ``u`` ``[..., T, D]`` (``[..., T, G, D]``).  ``y`` is the read-out
    ``M_tᵀ q_t`` after the update at step t.  ``Ms``/``Ps`` are the per-step
    states when ``keep_states=True``.  For ``linear`` the covariance and ``u``,
    ``beta`` are not defined and are ``None``.
    """

    M: np.ndarray
    P: Optional[np.ndarray]
    y: Optional[np.ndarray]
    gain: np.ndarray
    beta: Optional[np.ndarray]
    u: Optional[np.ndarray]
    Ms: Optional[np.ndarray] = None
    Ps: Optional[np.ndarray] = None
    # q_tᵀ P_t q_t: the read-out's predictive variance is (1 + q_tᵀ P_t q_t) per
    # value column (BL Eqs. 7-8); [..., T] ([..., T, G]); None without queries
    # or for ``linear``.
    y_var: Optional[np.ndarray] = None


def _per_step(name, x, batch, T, trailing=()):
    a = np.asarray(x, dtype=float)
    try:
        return np.broadcast_to(a, batch + (T,) + trailing)
    except ValueError:
        raise ValueError(f"{name} of shape {a.shape} does not broadcast to {batch + (T,) + trailing}") from None


def bl_filter(keys, values, queries=None, *, l2=0.0, r2=1.0, p0=1.0, alpha=None, A=None,
              variant: str = "dense", lam=None, iso_c=None, omega=0.5, groups: int = 1,
              M0=None, keep_states: bool = False, write_mask=None) -> FilterTrace:
    """Run the BL filter family over a sequence.

    Parameters
    ----------
    keys : array ``[..., T, D]``; values : ``[..., T, m]``; queries : ``[..., T, D]`` or None.
    l2 : process-noise variance ℓ², ≥ 0, broadcastable to ``[..., T]``.
    r2 : observation-noise variance r², > 0, broadcastable to ``[..., T]``
        (``[..., T, G]`` with ``groups=G``).
    p0 : prior covariance: a scalar (``p0 I``), an array of per-configuration
        scalars broadcastable to the batch shape, or a PSD matrix ``[..., D, D]``
        (``[..., G, D, D]`` with groups).  An array whose last two axes are an
        ``n x n`` block with ``n > 1`` is read as a matrix and must have ``n = D``
        (a batch of scalars with such a shape needs a trailing axis of 1).

    Every array argument must be numeric and finite; a bad one raises
    ``ValueError`` naming it (``keys must be numeric (got 'abc')``).
    alpha : diagonal dynamics ``[..., T, D]``; A : full dynamics ``[..., T, D, D]``;
        at most one of them (default: identity).
    variant : one of :data:`VARIANTS`.
    lam : reset level λ for ``reset`` (default r²); iso_c : c for ``iso``;
    omega : additive gain ω for ``linear``.
    M0 : initial mean ``[..., D, m]`` (default 0).
    write_mask : bool, broadcastable to ``[..., T]`` (default: every step writes).
        A step with ``False`` is a *missing observation*: the prediction runs
        (dynamics, process noise; ``reset``/``iso`` set their prior level),
        the update does not (``M_t = A_t M_{t-1}``, ``P_t = P̄_t``; for
        ``linear`` no write, decay only); the read-out at that step still
        happens.  Its ``gain``, ``beta`` and ``u`` are reported as 0.
    """
    V.choice("variant", variant, VARIANTS)
    groups = V.count("groups", groups, 1)
    keys = V.finite("keys", keys)
    values = V.finite("values", values)
    if keys.ndim < 2 or values.ndim < 2:
        raise ValueError("keys and values must have shape [..., T, D] and [..., T, m]")
    T, D = keys.shape[-2:]
    # a p0 ending in a square n x n block is a covariance: it must be D x D, not a batch of scalars
    ps = np.shape(p0)
    if len(ps) >= 2 and ps[-1] == ps[-2] > 1 and ps[-1] != D:
        raise V.ParamError("p0", f"p0 of shape {ps} ends in a {ps[-1]}x{ps[-1]} matrix but the keys have D={D}: "
                                 f"give a scalar, per-configuration scalars, or a [..., {D}, {D}] covariance")
    m = values.shape[-1]
    if values.shape[-2] != T:
        raise ValueError(f"values has {values.shape[-2]} steps but keys has {T}")
    if m % groups:
        raise ValueError(f"groups={groups} must divide the value width m={m}")
    mg = m // groups
    if queries is not None:
        queries = V.finite("queries", queries)
        if queries.shape[-2:] != (T, D):
            raise ValueError(f"queries must end in (T, D) = {(T, D)} (got {queries.shape})")
    if alpha is not None and A is not None:
        raise ValueError("give at most one of alpha (diagonal dynamics) and A (full dynamics)")

    # --- batch shape from every per-configuration input ------------------
    shapes = [keys.shape[:-2], values.shape[:-2]]
    if queries is not None:
        shapes.append(queries.shape[:-2])
    l2a = V.nonnegative("l2", l2)
    r2a = V.positive("r2", r2)
    r2_trailing = (groups,) if groups > 1 else ()
    def lead(a, n_trailing):      # batch axes of a per-step array [..., T, *trailing]
        return a.shape[:max(a.ndim - 1 - n_trailing, 0)]
    shapes.append(lead(l2a, 0))
    shapes.append(lead(r2a, len(r2_trailing)))
    if variant == "reset" and lam is not None:
        shapes.append(lead(V.positive("lam", lam), len(r2_trailing)))
    if variant == "iso" and iso_c is not None:
        shapes.append(lead(V.positive("iso_c", iso_c), 0))
    if variant == "linear":
        shapes.append(lead(V.nonnegative("omega", omega), 0))
    if alpha is not None:
        alpha = V.finite("alpha", alpha)
        shapes.append(alpha.shape[:-2] if alpha.ndim >= 2 else ())
    if A is not None:
        A = V.finite("A", A)
        if A.ndim < 3 or A.shape[-2:] != (D, D):
            raise ValueError(f"A must have shape [..., T, D, D] (got {A.shape})")
        shapes.append(A.shape[:-3])
    p0a = V.finite("p0", p0)
    p0_is_matrix = p0a.ndim >= 2 and p0a.shape[-2:] == (D, D)
    if p0_is_matrix:
        V.psd("p0", p0a)
        shapes.append(p0a.shape[:-3] if (groups > 1 and p0a.ndim >= 3 and p0a.shape[-3] == groups)
                      else p0a.shape[:-2])
    else:
        if np.any(p0a < 0):
            raise ValueError(f"p0 must be >= 0 (got {p0a.min()!r})")
        shapes.append(p0a.shape)
    if write_mask is not None:
        wm = np.asarray(write_mask)
        if wm.dtype != bool:
            raise ValueError(f"write_mask must be a bool array broadcastable to [..., T] (got dtype {wm.dtype})")
        shapes.append(wm.shape[:-1] if wm.ndim >= 1 else ())
    try:
        batch = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"batch shapes of the inputs do not broadcast: {shapes}") from None

    keys = np.broadcast_to(keys, batch + (T, D))
    values = np.broadcast_to(values, batch + (T, m)).reshape(batch + (T, groups, mg))
    if queries is not None:
        queries = np.broadcast_to(queries, batch + (T, D))
    l2s = _per_step("l2", l2a, batch, T)
    r2s = _per_step("r2", r2a, batch, T, r2_trailing)
    if groups == 1:
        r2s = r2s[..., None]
    if alpha is not None:
        alpha = _per_step("alpha", alpha, batch, T, (D,))
    if A is not None:
        A = np.broadcast_to(A, batch + (T, D, D))
    writes = None
    if write_mask is not None:
        try:
            writes = np.broadcast_to(np.asarray(write_mask), batch + (T,))
        except ValueError:
            raise ValueError(f"write_mask of shape {np.shape(write_mask)} does not broadcast to "
                             f"{batch + (T,)}") from None

    if variant == "reset":
        lams = r2s if lam is None else _per_step("lam", V.positive("lam", lam), batch, T, r2_trailing)
        if lam is not None and groups == 1:
            lams = lams[..., None]
    elif variant == "iso":
        if iso_c is None:
            raise ValueError("iso_c is required for variant='iso'")
        lams = np.broadcast_to(_per_step("iso_c", V.positive("iso_c", iso_c), batch, T)[..., None],
                               batch + (T, groups))
    elif variant == "linear":
        omegas = _per_step("omega", V.nonnegative("omega", omega), batch, T)

    # --- initial state ---------------------------------------------------
    eye = np.eye(D)
    if p0_is_matrix:
        P = np.array(np.broadcast_to(p0a if p0a.ndim >= 3 and groups > 1 and p0a.shape[-3] == groups
                                     else p0a[..., None, :, :], batch + (groups, D, D)))
    else:
        P = np.broadcast_to(p0a, batch)[..., None, None, None] * eye
        P = np.array(np.broadcast_to(P, batch + (groups, D, D)))
    if M0 is None:
        M = np.zeros(batch + (D, groups, mg))
    else:
        M0 = V.finite("M0", M0)
        if M0.shape[-2:] != (D, m):
            raise ValueError(f"M0 must have shape [..., D, m] = [..., {D}, {m}] (got {M0.shape})")
        M = np.array(np.broadcast_to(M0, batch + (D, m))).reshape(batch + (D, groups, mg))

    gains = np.empty(batch + (T, groups))
    covariant = variant != "linear"
    betas = np.empty(batch + (T, groups)) if covariant else None
    us = np.empty(batch + (T, groups, D)) if covariant else None
    ys = np.empty(batch + (T, m)) if queries is not None else None
    yvars = np.empty(batch + (T, groups)) if (queries is not None and covariant) else None
    Ms = np.empty(batch + (T, D, m)) if keep_states else None
    Ps = np.empty(batch + (T, groups, D, D)) if (keep_states and covariant) else None

    for t in range(T):
        k = keys[..., t, :]
        v = values[..., t, :, :]
        # predict
        if alpha is not None:
            a = alpha[..., t, :]
            Mbar = a[..., :, None, None] * M
            Ppred = a[..., None, :, None] * P * a[..., None, None, :]
        elif A is not None:
            At = A[..., t, :, :]
            Mbar = np.einsum("...ij,...jgc->...igc", At, M)
            Ppred = At[..., None, :, :] @ P @ np.swapaxes(At, -1, -2)[..., None, :, :]
        else:
            Mbar, Ppred = M, P
        pred = np.einsum("...dgc,...d->...gc", Mbar, k)          # (A M)^T k per group
        wr = None if writes is None else writes[..., t]          # [batch] True where step t writes
        if variant == "linear":
            w = omegas[..., t]
            if wr is not None:
                w = np.where(wr, w, 0.0)
            M = Mbar + w[..., None, None, None] * k[..., :, None, None] * v[..., None, :, :]
            gains[..., t, :] = w[..., None]
        else:
            if variant in ("dense", "diag"):
                Pbar = Ppred + l2s[..., t, None, None, None] * eye
            else:  # reset / iso: the prior covariance is replaced every step
                Pbar = lams[..., t, :, None, None] * eye
            u = Pbar @ k[..., None, :, None]                       # (..., G, D, 1)
            u = u[..., 0]
            s = np.einsum("...gd,...d->...g", u, k)
            beta = 1.0 / (r2s[..., t, :] + s)
            innov = v - pred                                       # (..., G, mg)
            M = Mbar + (beta[..., None, :, None] * np.swapaxes(u, -1, -2)[..., :, :, None]
                        * innov[..., None, :, :])
            P = Pbar - beta[..., None, None] * u[..., :, None] * u[..., None, :]
            if variant == "diag":
                P = np.diagonal(P, axis1=-2, axis2=-1)[..., :, None] * eye
            if wr is not None:               # missing observation: keep the prediction
                M = np.where(wr[..., None, None, None], M, Mbar)
                P = np.where(wr[..., None, None, None], P, Pbar)
                beta = np.where(wr[..., None], beta, 0.0)
                u = np.where(wr[..., None, None], u, 0.0)
            gains[..., t, :] = s * beta
            betas[..., t, :] = beta
            us[..., t, :, :] = u
        if ys is not None:
            ys[..., t, :] = np.einsum("...dgc,...d->...gc", M, queries[..., t, :]).reshape(batch + (m,))
            if yvars is not None:
                qt = queries[..., t, None, :]
                yvars[..., t, :] = np.einsum("...gi,...gij,...gj->...g", qt, P, qt)
        if Ms is not None:
            Ms[..., t, :, :] = M.reshape(batch + (D, m))
        if Ps is not None:
            Ps[..., t, :, :, :] = P

    squeeze = groups == 1
    def sq(x, axis):
        return None if x is None else (np.take(x, 0, axis=axis) if squeeze else x)
    nb = len(batch)
    return FilterTrace(
        M=M.reshape(batch + (D, m)),
        P=sq(P, nb) if covariant else None,
        y=ys,
        gain=sq(gains, nb + 1),
        beta=sq(betas, nb + 1),
        u=sq(us, nb + 1),
        Ms=Ms,
        Ps=sq(Ps, nb + 1),
        y_var=sq(yvars, nb + 1),
    )
