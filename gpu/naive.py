r"""The Bayesian Layer as a readable torch recurrence: the GPU layer's reference.

One step per token, per batch ``b``, head ``h`` and noise group ``g``
(BL Prop. 1, Eqs. 9-13, p.4; grouped noise App. D, pp.16-17):

.. math::

    \bar P_t = A_t P_{t-1} A_t + \ell_t^2 I,\qquad u_t = \bar P_t k_t,\qquad
    \beta_t = (r_t^2 + k_t^\top u_t)^{-1},

    M_t = A_t M_{t-1} + \beta_t u_t (v_t - (A_t M_{t-1})^\top k_t)^\top,\qquad
    P_t = \bar P_t - \beta_t u_t u_t^\top,\qquad o_t = M_t^\top q_t ,

with ``A_t = diag(α_t)``.  With ``G`` noise groups the ``m`` value columns
split into ``G`` contiguous blocks of ``m/G``; block ``g`` has its own
observation noise ``r²_{t,g}`` and its own covariance ``P^{(g)}``.

This is the test reference on CPU (any dtype, float64 included, so
``torch.autograd.gradcheck`` runs on it) and the fallback when no GPU (and no
Triton interpreter) is present.  Arithmetic runs in ``promote(dtype, float32)``.
"""
from __future__ import annotations

import torch

from ._inputs import check_inputs

COV_FORMS = ("plain", "symmetrised", "joseph")


def naive_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
             *, g=None, cov_form: str = "plain", validate: bool = True, write_mask=None):
    """Run the BL filter token by token.

    Parameters follow :func:`assocmem.gpu.fused_recurrent_bl`; ``g`` is the
    log-decay (``α = exp(g)``), an alternative to ``alpha``.

    ``cov_form`` selects the covariance update, for the numerical study of
    ``docs/gpu.md``: ``"plain"`` ``P = P̄ − β u uᵀ`` (what the kernel does),
    ``"symmetrised"`` the plain update followed by ``(P + Pᵀ)/2``, ``"joseph"``
    ``P = (I − β u kᵀ) P̄ (I − β u kᵀ)ᵀ + r² β² u uᵀ`` evaluated with matrix
    products (equal in exact arithmetic).

    Returns ``(o [B, T, H, m], final_state)``; ``final_state`` is
    ``(M [B, H, D, m], P [B, H, D, D])`` (``P [B, H, G, D, D]`` when ``r2`` has
    a group axis) or ``None`` unless ``output_final_state``.
    """
    if cov_form not in COV_FORMS:
        raise ValueError(f"cov_form must be one of {', '.join(COV_FORMS)} (got {cov_form!r})")
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate, write_mask=write_mask)
    B, T, H, D, m = x.dims
    G = x.G
    mg = m // G
    dt = torch.promote_types(x.q.dtype, torch.float32)
    dev = x.q.device
    qf, kf, vf = x.q.to(dt), x.k.to(dt), x.v.to(dt)
    l2f, r2f = x.l2.to(dt), x.r2.to(dt)
    a = None
    if x.alpha is not None:
        a = torch.exp(x.alpha.to(dt)) if x.log_alpha else x.alpha.to(dt)
    eye = torch.eye(D, dtype=dt, device=dev)
    if x.M0 is None:
        M = torch.zeros(B, H, D, G, mg, dtype=dt, device=dev)
        P = (x.p0 * eye).expand(B, H, G, D, D)
    else:
        M = x.M0.to(dt).reshape(B, H, D, G, mg)
        P = x.P0.to(dt)
    outs = []
    for t in range(T):
        kt = kf[:, t]                                              # [B, H, D]
        if a is not None:
            at = a[:, t]
            Mbar = at[..., :, None, None] * M
            Ppred = at[:, :, None, :, None] * P * at[:, :, None, None, :]
        else:
            Mbar, Ppred = M, P
        Pbar = Ppred + l2f[:, t, :, None, None, None] * eye         # [B, H, G, D, D]
        u = (Pbar @ kt[:, :, None, :, None])[..., 0]                # [B, H, G, D]
        s = (u * kt[:, :, None, :]).sum(-1)                         # [B, H, G]
        beta = 1.0 / (r2f[:, t] + s)
        pred = torch.einsum("bhdgc,bhd->bhgc", Mbar, kt)            # (A M)ᵀ k per group
        e = vf[:, t].reshape(B, H, G, mg) - pred                    # innovation
        M = Mbar + torch.einsum("bhgd,bhgc->bhdgc", beta[..., None] * u, e)
        if cov_form == "joseph":
            gk = (beta[..., None] * u)[..., :, None] * kt[:, :, None, None, :]   # β u kᵀ
            F = eye - gk
            P = F @ Pbar @ F.transpose(-1, -2) + (r2f[:, t] * beta ** 2)[..., None, None] * (
                u[..., :, None] * u[..., None, :])
        else:
            P = Pbar - beta[..., None, None] * (u[..., :, None] * u[..., None, :])
            if cov_form == "symmetrised":
                P = 0.5 * (P + P.transpose(-1, -2))
        outs.append(torch.einsum("bhdgc,bhd->bhgc", M, qf[:, t]).reshape(B, H, m))
    o = torch.stack(outs, dim=1).to(x.q.dtype)
    if not output_final_state:
        return o, None
    Pout = P if x.grouped else P[:, :, 0]
    return o, (M.reshape(B, H, D, m), Pout)
