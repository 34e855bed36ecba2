r"""The Bayesian Layer in readable torch: the GPU layer's references and CPU fallbacks.

:func:`naive_bl` is the recurrence, :func:`chunk_bl_torch` the same filter chunk by chunk
(the algorithm of :mod:`.chunk`'s kernels), as fla's ``naive.py`` holds an op's recurrent and
chunkwise references.

The recurrence, one step per token, per batch ``b``, head ``h`` and noise group ``g``
(BL Prop. 1, Eqs. 9-13, p.4; grouped noise App. D, pp.16-17):

.. math::

    \bar P_t = A_t P_{t-1} A_t + \ell_t^2 I,\qquad u_t = \bar P_t k_t,\qquad
    \beta_t = (r_t^2 + k_t^\top u_t)^{-1},

    M_t = A_t M_{t-1} + \beta_t u_t (v_t - (A_t M_{t-1})^\top k_t)^\top,\qquad
    P_t = \bar P_t - \beta_t u_t u_t^\top,\qquad o_t = M_t^\top q_t ,

with ``A_t = diag(α_t)``.  With ``G`` noise groups the ``m`` value columns
split into ``G`` contiguous blocks of ``m/G``; block ``g`` has its own
observation noise ``r²_{t,g}`` and its own covariance ``P^{(g)}``.

Both are test references on CPU (any dtype, float64 included, so
``torch.autograd.gradcheck`` runs on them) and the fallbacks when no GPU (and no
Triton interpreter) is present.  Arithmetic runs in ``promote(dtype, float32)``.

The covariance update is the plain ``P = P̄ − β u uᵀ``, as in the kernels (bitwise symmetric in
fp32; a symmetrised or Joseph form is no more accurate with the exact gain).
"""
from __future__ import annotations

import torch

from ._inputs import check_inputs

CHUNK_SIZES = (16, 32, 64)
# the fastest chunk size at every shape measured on the H200, forward and forward+backward: S1-S4 against
# C = 64 (issue 19's table: forward 3.62 / 17.0, 11.1 / 66.7, 9.88 / 31.9, 1.04 / 1.55 ms), and S1 / S3
# against C = 32, 64 with every warp setting (benchmarks/h200_chunk_grid_cov.json: covariance pass 1.70 /
# 6.92 ms at C = 16, 2.14 / 8.52 at 32, 5.43 / 18.4 at 64; h200_chunk_grid_fb.json: fwd+bwd 10.8 / 29.3 at
# 16, 13.9 / 34.7 at 32, 32.6 / 75.8 at 64)
DEFAULT_CHUNK_SIZE = 16


def naive_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
             *, g=None, validate: bool = True, write_mask=None):
    """Run the BL filter token by token.

    Parameters follow :func:`assocmem.gpu.fused_recurrent_bl`; ``g`` is the
    log-decay (``α = exp(g)``), an alternative to ``alpha``.

    Returns ``(o [B, T, H, m], final_state)``; ``final_state`` is
    ``(M [B, H, D, m], P [B, H, D, D])`` (``P [B, H, G, D, D]`` when ``r2`` has
    a group axis) or ``None`` unless ``output_final_state``.
    """
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
        P = Pbar - beta[..., None, None] * (u[..., :, None] * u[..., None, :])
        outs.append(torch.einsum("bhdgc,bhd->bhgc", M, qf[:, t]).reshape(B, H, m))
    o = torch.stack(outs, dim=1).to(x.q.dtype)
    if not output_final_state:
        return o, None
    Pout = P if x.grouped else P[:, :, 0]
    return o, (M.reshape(B, H, D, m), Pout)


def _ratios(a):
    """``R[..., τ, i, :] = Π_{j=i+1}^{τ} a[..., j, :]`` for ``τ ≥ i`` (1 on the diagonal, 0 above).

    ``a``: ``[..., C, D]``.  Built by a cumulative product along ``τ`` of ``a``
    with the factors ``j ≤ i`` replaced by 1.
    """
    C = a.shape[-2]
    idx = torch.arange(C, device=a.device)
    keep = (idx[:, None] > idx[None, :])                     # [j, i]: factor j enters R[·, i] if j > i
    fac = torch.where(keep[..., None], a[..., :, None, :], torch.ones_like(a[..., :, None, :]))
    R = torch.cumprod(fac, dim=-3)                           # [..., τ, i, D]
    causal = (idx[:, None] >= idx[None, :])[..., None]
    return R * causal


def chunk_bl_torch(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
                   chunk_size: int = DEFAULT_CHUNK_SIZE, *, g=None, validate: bool = True,
                   return_saved: bool = False, write_mask=None):
    """The BL filter computed chunk by chunk with torch ops (the algorithm of :mod:`.chunk`);
    same contract as :func:`naive_bl`.

    ``chunk_size`` ∈ {16, 32, 64} (default 16, the kernels' fastest: :data:`DEFAULT_CHUNK_SIZE`).
    Returns ``(o, final_state or None)``, and with
    ``return_saved`` a third item ``(u [B, T, H, G, D], β [B, T, H, G], e [B, T, H, m])``: what
    the chunked kernels keep for the backward.  Ratios of decays are formed as products (exact for
    zero, negative and strong decays); differentiable through autograd.
    """
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate, write_mask=write_mask)
    B, T, H, D, m = x.dims
    G = x.G
    mg = m // G
    dt = torch.promote_types(x.q.dtype, torch.float32)
    dev = x.q.device
    # [B, H, T, ...] layouts
    qf = x.q.to(dt).transpose(1, 2)
    kf = x.k.to(dt).transpose(1, 2)
    vf = x.v.to(dt).transpose(1, 2).reshape(B, H, T, G, mg).transpose(2, 3)      # [B, H, G, T, mg]
    l2f = x.l2.to(dt).transpose(1, 2)                                           # [B, H, T]
    r2f = x.r2.to(dt).permute(0, 2, 3, 1)                                       # [B, H, G, T]
    if x.alpha is None:
        af = torch.ones(B, H, T, D, dtype=dt, device=dev)
    else:
        af = (torch.exp(x.alpha.to(dt)) if x.log_alpha else x.alpha.to(dt)).transpose(1, 2)
    eye = torch.eye(D, dtype=dt, device=dev)
    if x.M0 is None:
        M = torch.zeros(B, H, G, D, mg, dtype=dt, device=dev)
        P = (x.p0 * eye).expand(B, H, G, D, D)
    else:
        M = x.M0.to(dt).reshape(B, H, D, G, mg).permute(0, 1, 3, 2, 4)          # [B, H, G, D, mg]
        P = x.P0.to(dt)
    outs, saved = [], []
    for s0 in range(0, T, chunk_size):
        s1 = min(T, s0 + chunk_size)
        C = s1 - s0
        a = af[:, :, s0:s1]                                  # [B, H, C, D]
        kc, qc = kf[:, :, s0:s1], qf[:, :, s0:s1]
        R = _ratios(a)                                       # [B, H, C(τ), C(i), D]
        gam = a[:, :, :1] * R[:, :, :, 0]                    # γ_τ = α_0 R[τ, 0]
        c = torch.einsum("bhtjd,bhj->bhtd", R * R, l2f[:, :, s0:s1])      # Σ_j ℓ_j² R[τ,j]²
        gk = gam * kc                                        # γ_τ ⊙ k_τ
        # ω_i = Π_i k_i = γ_i ⊙ (P_0 (γ_i ⊙ k_i)) + c_i ⊙ k_i, per group
        om = gam[:, :, None] * torch.einsum("bhgde,bhte->bhgtd", P, gk) + (c * kc)[:, :, None]
        Sy = torch.einsum("bhtd,bhtid,bhgid->bhgti", kc, R, om)          # lower triangle (τ ≥ i)
        low = torch.tril(Sy)
        Sy = low + torch.tril(Sy, -1).transpose(-1, -2) + torch.diag_embed(r2f[:, :, :, s0:s1])
        Lc = torch.linalg.cholesky(Sy)                       # Σ_y = Lc Lcᵀ = L diag(d) Lᵀ
        dg = torch.diagonal(Lc, dim1=-2, dim2=-1)
        Lu = Lc / dg[..., None, :]                           # unit lower triangular L
        beta = 1.0 / (dg * dg)
        Id = torch.eye(C, dtype=dt, device=dev).expand_as(Lu)
        Linv = torch.linalg.solve_triangular(Lu, Id, upper=False, unitriangular=True)
        u = torch.einsum("bhgti,bhtid,bhgid->bhgtd", Linv, R, om)          # u_τ = P̄_τ k_τ
        mu = torch.einsum("bhtd,bhgdc->bhgtc", gk, M)        # prior mean of y_τ
        E = torch.linalg.solve_triangular(Lu, vf[:, :, :, s0:s1] - mu, upper=False, unitriangular=True)
        bE = beta[..., None] * E                             # β_i e_i
        Aqu = torch.einsum("bhtd,bhtid,bhgid->bhgti", qc, R, u)          # q_τ · R[τ,i] ⊙ u_i
        o = torch.einsum("bhtd,bhgdc->bhgtc", gam * qc, M) + torch.einsum("bhgti,bhgic->bhgtc", Aqu, bE)
        outs.append(o)
        if return_saved:
            saved.append((u, beta, E))
        ut = R[:, :, -1][:, :, None] * u                     # ũ_i = R[C-1,i] ⊙ u_i
        M = gam[:, :, -1][:, :, None, :, None] * M + torch.einsum("bhgid,bhgic->bhgdc", ut, bE)
        PiC = ((gam[:, :, -1, :, None] * gam[:, :, -1, None, :])[:, :, None] * P
               + torch.diag_embed(c[:, :, -1])[:, :, None])
        P = PiC - torch.einsum("bhgi,bhgid,bhgie->bhgde", beta, ut, ut)
    o = torch.cat(outs, dim=3)                               # [B, H, G, T, mg]
    o = o.permute(0, 3, 1, 2, 4).reshape(B, T, H, m).to(x.v.dtype)
    final = None
    if output_final_state:
        final = (M.permute(0, 1, 3, 2, 4).reshape(B, H, D, m), P if x.grouped else P[:, :, 0])
    if not return_saved:
        return o, final
    us, bs, es = (torch.cat(z, dim=3) for z in zip(*saved))          # [B, H, G, T, ...]
    return o, final, (us.permute(0, 3, 1, 2, 4), bs.permute(0, 3, 1, 2),
                      es.permute(0, 3, 1, 2, 4).reshape(B, T, H, m))
