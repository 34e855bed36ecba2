r"""``chunk_bl``: the BL filter chunk by chunk (the innovations / LDLᵀ form), in torch.

This is the chunked *algorithm* of issue 6, written with torch tensor ops and
verified against the token-by-token filter; it is not yet the Triton chunked
kernel (see docs/gpu.md).  Differentiable through autograd; any float dtype
(arithmetic in ``promote(dtype, float32)``).

Within a chunk of ``C`` tokens ``τ = 0..C-1`` that starts from the posterior
``(M_0, P_0)`` of the previous token, write ``R[τ, i] = α_{i+1} ⊙ … ⊙ α_τ``
(``τ ≥ i``, elementwise over the key dimension, exactly 1 on the diagonal —
ratios of cumulative decays *relative to the chunk*, formed as products so that
zero and negative decays are fine and nothing overflows), ``γ_τ = α_0 ⊙ R[τ, 0]``
and ``c_τ = Σ_{j≤τ} ℓ_j² R[τ, j]²``.  Given only the chunk start, the memory
column ``s_τ`` has covariance ``Π_τ = diag(γ_τ) P_0 diag(γ_τ) + diag(c_τ)`` and
``Cov(s_τ, s_i) = diag(R[τ, i]) Π_i`` for ``τ ≥ i``, so the chunk's
observations ``y_τ = k_τᵀ s_τ + ε`` have (BL App. D; PERF.md's lead)

``Σ_y[τ, i] = Σ_d k_{τ,d} R[τ,i,d] ω_{i,d} + r_τ² δ_{τi}``,  ``ω_i = Π_i k_i``.

With ``Σ_y = L diag(d) Lᵀ`` (``L`` unit lower triangular) the filter's
quantities are the innovations': ``β_τ = 1/d_τ``,
``u_τ = P̄_τ k_τ = Σ_{i≤τ} (L⁻¹)_{τi} R[τ,i] ⊙ ω_i``; the innovations of the
values are ``E = L⁻¹ (V − Γ K M_0)``; the read-out and the chunk-end state are

``o_τ = M_0ᵀ (γ_τ ⊙ q_τ) + Σ_{i≤τ} β_i (q_τ · R[τ,i] ⊙ u_i) e_i``,
``M_C = diag(γ_{C-1}) M_0 + Σ_i (R[C-1,i] ⊙ u_i) β_i e_iᵀ``,
``P_C = Π_{C-1} − Σ_i β_i ũ_i ũ_iᵀ``, ``ũ_i = R[C-1,i] ⊙ u_i``.

Only the ``D×D`` chunk-end covariance (and ``M``) is sequential across chunks.
"""
from __future__ import annotations

import torch

from ._inputs import check_inputs

CHUNK_SIZES = (16, 32, 64)


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


def chunk_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
             chunk_size: int = 64, *, g=None, validate: bool = True):
    """The BL filter computed chunk by chunk; same contract as :func:`fused_recurrent_bl`.

    ``chunk_size`` ∈ {16, 32, 64}.  Returns ``(o, final_state or None)``.
    """
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate)
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
    outs = []
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
        ut = R[:, :, -1][:, :, None] * u                     # ũ_i = R[C-1,i] ⊙ u_i
        M = gam[:, :, -1][:, :, None, :, None] * M + torch.einsum("bhgid,bhgic->bhgdc", ut, bE)
        PiC = (gam[:, :, -1, :, None] * gam[:, :, -1, None, :])[:, :, None] * P + torch.diag_embed(c[:, :, -1])[:, :, None]
        P = PiC - torch.einsum("bhgi,bhgid,bhgie->bhgde", beta, ut, ut)
    o = torch.cat(outs, dim=3)                               # [B, H, G, T, mg]
    o = o.permute(0, 3, 1, 2, 4).reshape(B, T, H, m).to(x.v.dtype)
    if not output_final_state:
        return o, None
    Mout = M.permute(0, 1, 3, 2, 4).reshape(B, H, D, m)
    return o, (Mout, P if x.grouped else P[:, :, 0])
