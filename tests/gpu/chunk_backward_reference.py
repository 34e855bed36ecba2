r"""The chunked backward of the BL filter in torch ops: the test reference of the chunked backward
kernels (``gpu/_chunk_bwd_kernels.py``), float64-capable, in the product form (exact for zero,
negative and strong decays; the kernels use the quotient form ``R[τ, i] = γ_τ/γ_i``).

It reads only what the chunked forward keeps — the per-token write directions ``u_t``,
precisions ``β_t`` and value innovations ``e_t`` — plus the inputs and the initial state,
and it never refactorises anything: every step below is a matrix product, an elementwise
operation, a prefix sum, or the inverse of a unit lower-triangular ``C×C`` matrix that
does not depend on the adjoints.  Only the ``D×D`` covariance adjoint ``H`` and the ``D×m``
mean adjoint ``G`` travel from chunk to chunk (reverse order).  Derivation: docs/gpu.md,
"The chunked backward".

Per chunk of ``C`` tokens (notation of :mod:`.chunk`; ``R[τ, i] = α_{i+1} ⊙ … ⊙ α_τ``,
``γ_τ = R[τ, -1]``, ``c_τ = Σ_j ℓ²_j R[τ, j]²``; one noise group shown):

* recomputed, independent of the adjoints: the chunk-start states by the cheap linear
  scan ``M ← γ_C ⊙ M + Ũᵀ (β ⊙ E)``, ``P ← γ_Cγ_Cᵀ ⊙ P + diag(c_C) − Ũᵀ diag(β) Ũ``
  (``Ũ_i = R[C−1, i] ⊙ u_i``); the unit lower-triangular ``L = I + stril(β-weighted
  k_τ · (R[τ, i] ⊙ u_i))`` of ``Σ_y = L diag(1/β) Lᵀ`` (the mean's erase/write
  interaction: ``E = L⁻¹(V − Kγ M)``) and ``N = L⁻¹``; ``Ω_i = γ_i ⊙ (P (γ_i ⊙ k_i)) + c_i ⊙ k_i``;
* mean adjoints (given ``G``, ``dO``): ``d(βE) = Aquᵀ dO + Ũ G``, ``dV = Nᵀ (β ⊙ d(βE))``,
  ``G_prev = γ_C ⊙ G + Qγᵀ dO − Kγᵀ dV``, and the adjoints of ``Ũ, Aqu, β, N``;
* covariance adjoints (given ``H``): through ``P' = γ_Cγ_Cᵀ ⊙ P + diag(c_C) − Ũᵀ diag(β) Ũ``,
  ``U = (N ∘ R) Ω``, and the LDLᵀ factorisation
  (``Σ̄_y = sym(Nᵀ Ψ N)``, ``Ψ = −stril(N̄ Nᵀ diag(β)) − diag(β² β̄)``) down to
  ``K, ℓ², r², α`` and ``H_prev = γ_Cγ_Cᵀ ⊙ H + sym(Σ_i (γ_i ⊙ Ω̄_i) (γ_i ⊙ k_i)ᵀ)``.

The decay gradient is returned with respect to ``g = log α`` (``∂L/∂α = (∂L/∂g)/α``, as the
token-by-token op).
"""
from __future__ import annotations

import torch

from assocmem.gpu._inputs import check_inputs
from assocmem.gpu.naive import CHUNK_SIZES, _ratios, chunk_bl_torch


def _sym(X):
    return 0.5 * (X + X.transpose(-1, -2))


def chunk_bl_backward_torch(q, k, l2, a, M0, P0, u, beta, e, do=None, dMT=None, dPT=None,
                            chunk_size: int = 16, need_dg: bool = True):
    r"""Gradients of the BL filter, chunk by chunk, from the forward's saved tensors.

    Parameters (fla layout, any float dtype; arithmetic in ``promote(dtype, float32)``):
    ``q, k [B, T, H, D]``, ``l2 [B, T, H]``, ``a [B, T, H, D]`` the decays ``α`` (or None),
    ``M0 [B, H, D, m]``, ``P0 [B, H, G, D, D]`` the initial state, ``u [B, T, H, G, D]``,
    ``beta [B, T, H, G]``, ``e [B, T, H, m]`` (the forward's), and the cotangents
    ``do [B, T, H, m]``, ``dMT [B, H, D, m]``, ``dPT [B, H, G, D, D]`` (None: zero).

    Returns ``(dq, dk, dv, dl2, dr2 [B, T, H, G], dg [B, T, H, D] or None, dM0, dP0)``;
    ``dg`` is the gradient with respect to the log-decay ``g = log α``; ``dP0`` symmetric.
    """
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    B, T, H, D = q.shape
    G = u.shape[3]
    m = e.shape[-1]
    mg = m // G
    dt = torch.promote_types(u.dtype, torch.float32)
    dev = q.device
    f = lambda t: t.to(dt)  # noqa: E731
    Qf, Kf = f(q).transpose(1, 2), f(k).transpose(1, 2)                          # [B, H, T, D]
    l2f = f(l2).transpose(1, 2)                                                  # [B, H, T]
    Uf = f(u).permute(0, 2, 3, 1, 4)                                             # [B, H, G, T, D]
    bf = f(beta).permute(0, 2, 3, 1)                                             # [B, H, G, T]
    grp = lambda t: f(t).transpose(1, 2).reshape(B, H, T, G, mg).transpose(2, 3)  # noqa: E731
    Ef = grp(e)                                                                  # [B, H, G, T, mg]
    dOf = grp(do) if do is not None else torch.zeros(B, H, G, T, mg, dtype=dt, device=dev)
    af = None if a is None else f(a).transpose(1, 2)
    M = f(M0).reshape(B, H, D, G, mg).permute(0, 1, 3, 2, 4)                    # [B, H, G, D, mg]
    P = _sym(f(P0))
    bounds = [(s0, min(T, s0 + chunk_size)) for s0 in range(0, T, chunk_size)]

    def decays(s0, s1):
        C = s1 - s0
        ac = torch.ones(B, H, C, D, dtype=dt, device=dev) if af is None else af[:, :, s0:s1]
        R = _ratios(ac)                                                          # [B, H, C, C, D]
        gam = ac[:, :, :1] * R[:, :, :, 0]
        c = torch.einsum("bhtjd,bhj->bhtd", R * R, l2f[:, :, s0:s1])
        return R, gam, c

    # forward scan over chunks: the chunk-start states (linear in the saved tensors, no factorisation)
    starts = []
    for s0, s1 in bounds:
        starts.append((M, P))
        R, gam, c = decays(s0, s1)
        Ut = R[:, :, -1][:, :, None] * Uf[:, :, :, s0:s1]
        bE = bf[:, :, :, s0:s1, None] * Ef[:, :, :, s0:s1]
        gC = gam[:, :, -1]
        M = gC[:, :, None, :, None] * M + torch.einsum("bhgid,bhgic->bhgdc", Ut, bE)
        P = _sym((gC[..., :, None] * gC[..., None, :])[:, :, None] * P + torch.diag_embed(c[:, :, -1])[:, :, None]
                 - torch.einsum("bhgi,bhgid,bhgie->bhgde", bf[:, :, :, s0:s1], Ut, Ut))

    Gm = (torch.zeros(B, H, G, D, mg, dtype=dt, device=dev) if dMT is None
          else f(dMT).reshape(B, H, D, G, mg).permute(0, 1, 3, 2, 4))
    Hc = torch.zeros(B, H, G, D, D, dtype=dt, device=dev) if dPT is None else _sym(f(dPT))
    dq = torch.zeros(B, H, T, D, dtype=dt, device=dev)
    dk = torch.zeros_like(dq)
    dg = torch.zeros_like(dq) if (need_dg and af is not None) else None
    dl2 = torch.zeros(B, H, T, dtype=dt, device=dev)
    dr2 = torch.zeros(B, H, G, T, dtype=dt, device=dev)
    dv = torch.zeros(B, H, G, T, mg, dtype=dt, device=dev)
    for n in range(len(bounds) - 1, -1, -1):
        s0, s1 = bounds[n]
        C = s1 - s0
        M, P = starts[n]
        R, gam, c = decays(s0, s1)
        K, Q = Kf[:, :, s0:s1], Qf[:, :, s0:s1]
        U, bt, E, dO = Uf[:, :, :, s0:s1], bf[:, :, :, s0:s1], Ef[:, :, :, s0:s1], dOf[:, :, :, s0:s1]
        gC = gam[:, :, -1]
        RC = R[:, :, -1]                                                          # R[C−1, i], [B, H, C, D]
        Kg, Qg = gam * K, gam * Q
        Id = torch.eye(C, dtype=dt, device=dev)
        # recomputed forward quantities (independent of the adjoints)
        Lm = torch.tril(torch.einsum("bhtd,bhtid,bhgid->bhgti", K, R, U) * bt[..., None, :], -1) + Id
        N = torch.linalg.solve_triangular(Lm, Id.expand_as(Lm), upper=False, unitriangular=True)
        X = torch.einsum("bhgde,bhie->bhgid", P, Kg)                              # P (γ_i ⊙ k_i)
        Om = gam[:, :, None] * X + (c * K)[:, :, None]                              # ω_i = Π_i k_i
        Aqu = torch.einsum("bhtd,bhtid,bhgid->bhgti", Q, R, U)                      # q_τ · R[τ,i] ⊙ u_i
        Ut = RC[:, :, None] * U
        bE = bt[..., None] * E
        LE = Lm @ E                                                                 # V − Kγ M
        # ---- mean side: O = Qγ M + Aqu βE,  M' = γ_C ⊙ M + Ũᵀ βE,  βE = β ⊙ N (V − Kγ M)
        dbE = Aqu.transpose(-1, -2) @ dO + Ut @ Gm                                  # [B, H, G, C, mg]
        dUt = bE @ Gm.transpose(-1, -2) - 2.0 * bt[..., None] * (Ut @ Hc)           # (P' uses Ũ too)
        dbeta = -torch.einsum("bhgid,bhgde,bhgie->bhgi", Ut, Hc, Ut) + (E * dbE).sum(-1)
        dE = bt[..., None] * dbE
        dV = N.transpose(-1, -2) @ dE                                              # = dv, and −d(Kγ M)
        dN = torch.tril(dE @ LE.transpose(-1, -2), -1)
        QM = torch.einsum("bhgtc,bhgdc->bhtd", dO, M)
        KM = torch.einsum("bhgtc,bhgdc->bhtd", dV, M)
        dMs = (gC[:, :, None, :, None] * Gm + torch.einsum("bhtd,bhgtc->bhgdc", Qg, dO)
               - torch.einsum("bhtd,bhgtc->bhgdc", Kg, dV))
        dQ = gam * QM
        dgam = Q * QM
        dKg = -KM
        dAq = torch.tril(dO @ bE.transpose(-1, -2))                                 # [B, H, G, τ, i]
        dQ = dQ + torch.einsum("bhgti,bhtid,bhgid->bhtd", dAq, R, U)
        dR = torch.einsum("bhgti,bhtd,bhgid->bhtid", dAq, Q, U)
        dU = torch.einsum("bhgti,bhtid,bhtd->bhgid", dAq, R, Q) + RC[:, :, None] * dUt
        dR[:, :, -1] += (dUt * U).sum(2)
        dgC = (Gm * M).sum((-1, 2)) + 2.0 * torch.einsum("bhgde,bhgde,bhe->bhd", Hc, P, gC)
        dcC = torch.diagonal(Hc, dim1=-2, dim2=-1).sum(2)
        dP = (gC[..., :, None] * gC[..., None, :])[:, :, None] * Hc
        # ---- covariance side: U = (N ∘ R) Ω, then the LDLᵀ factorisation Σ_y = L diag(1/β) Lᵀ
        dN = dN + torch.tril(torch.einsum("bhgtd,bhtid,bhgid->bhgti", dU, R, Om), -1)
        dR = dR + torch.einsum("bhgti,bhgtd,bhgid->bhtid", N, dU, Om)
        dOm = torch.einsum("bhgti,bhtid,bhgtd->bhgid", N, R, dU)
        Psi = -torch.tril(dN @ N.transpose(-1, -2), -1) * bt[..., None, :] - torch.diag_embed(bt * bt * dbeta)
        dS = _sym(N.transpose(-1, -2) @ Psi @ N)                                    # dL/dΣ_y (symmetric)
        dr2[:, :, :, s0:s1] = torch.diagonal(dS, dim1=-2, dim2=-1)
        dS = 2.0 * torch.tril(dS, -1) + torch.diag_embed(torch.diagonal(dS, dim1=-2, dim2=-1))
        # Σ_y[τ, i] = k_τ · (R[τ, i] ⊙ ω_i), τ ≥ i
        dK = torch.einsum("bhgti,bhtid,bhgid->bhtd", dS, R, Om)
        dR = dR + torch.einsum("bhgti,bhtd,bhgid->bhtid", dS, K, Om)
        dOm = dOm + torch.einsum("bhgti,bhtid,bhtd->bhgid", dS, R, K)
        # ω_i = γ_i ⊙ (P (γ_i ⊙ k_i)) + c_i ⊙ k_i
        dgam = dgam + (dOm * X).sum(2)
        dX = gam[:, :, None] * dOm
        dP = dP + _sym(torch.einsum("bhgid,bhie->bhgde", dX, Kg))
        dKg = dKg + torch.einsum("bhgde,bhgie->bhid", P, dX)
        dc = (dOm * K[:, :, None]).sum(2)
        dK = dK + c * dOm.sum(2) + gam * dKg
        dgam = dgam + K * dKg
        dgam[:, :, -1] += dgC
        dc[:, :, -1] += dcC
        # ℓ² and the decays through γ, c and R
        RR = R * R
        dl2[:, :, s0:s1] = torch.einsum("bhtd,bhtjd->bhj", dc, RR)
        if dg is not None:
            # ∂γ_τ/∂g_j = γ_τ [j ≤ τ]; ∂R[τ,i]/∂g_j = R[τ,i] [i < j ≤ τ]; ∂c_τ/∂g_j = Σ_{i<j} 2ℓ²_i R[τ,i]² [j ≤ τ]
            Y = dR * R + 2.0 * dc[:, :, :, None] * l2f[:, :, None, s0:s1, None] * RR       # [B, H, τ, i, D]
            Zx = torch.cumsum(Y, dim=3) - Y                                               # Σ_{i<j} Y[τ, i]
            cm = torch.tril(torch.ones(C, C, dtype=dt, device=dev))[..., None]            # [τ, j]: j ≤ τ
            dgc = (Zx * cm).sum(2) + (dgam * gam).flip(2).cumsum(2).flip(2)
            dg[:, :, s0:s1] = dgc
        dq[:, :, s0:s1] = dQ
        dk[:, :, s0:s1] = dK
        dv[:, :, :, s0:s1] = dV
        Gm, Hc = dMs, dP
    dM0 = Gm.permute(0, 1, 3, 2, 4).reshape(B, H, D, m)
    back = lambda t: t.transpose(1, 2)  # noqa: E731
    dvo = dv.permute(0, 3, 1, 2, 4).reshape(B, T, H, m)
    return (back(dq), back(dk), dvo, back(dl2), dr2.permute(0, 3, 1, 2),
            None if dg is None else back(dg), dM0, Hc)


class _ChunkTorchFunction(torch.autograd.Function):
    """Forward :func:`assocmem.gpu.naive.chunk_bl_torch` (keeping ``u, β, e``), backward :func:`chunk_bl_backward_torch`."""

    @staticmethod
    def forward(ctx, q, k, v, l2, r2, dec, M0, P0, log_alpha, C):
        kw = {"g": dec} if log_alpha else {"alpha": dec}
        G = r2.shape[-1]
        o, (MT, PT), (u, beta, e) = chunk_bl_torch(q, k, v, l2, r2, initial_state=(M0, P0), output_final_state=True,
                                                   chunk_size=C, validate=False, return_saved=True, **kw)
        if PT.ndim == 4:
            PT = PT[:, :, None]
        a = None if dec is None else (torch.exp(dec) if log_alpha else dec)
        ctx.save_for_backward(q, k, l2, a, M0, P0, u, beta, e)
        ctx.meta = (log_alpha, C, G, r2.ndim)
        ctx.set_materialize_grads(False)
        return o, MT, PT

    @staticmethod
    def backward(ctx, do, dMT, dPT):
        q, k, l2, a, M0, P0, u, beta, e = ctx.saved_tensors
        log_alpha, C, G, r2nd = ctx.meta
        need_dg = a is not None and ctx.needs_input_grad[5]
        dq, dk, dv, dl2, dr2, dg, dM0, dP0 = chunk_bl_backward_torch(
            q, k, l2, a, M0, P0, u, beta, e, do, dMT, dPT, C, need_dg)
        ddec = None
        if need_dg:
            ddec = dg if log_alpha else dg / a
        return dq, dk, dv, dl2, dr2, ddec, dM0, dP0, None, None


def chunk_bl_torch_grad(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
                        chunk_size: int = 16, *, g=None, validate: bool = True):
    """:func:`assocmem.gpu.naive.chunk_bl_torch` with :func:`chunk_bl_backward_torch` as its backward (instead of
    autograd through the factorisation); same contract as :func:`assocmem.gpu.fused_recurrent_bl`."""
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate)
    B, T, H, D, m = x.dims
    dt = torch.promote_types(x.q.dtype, torch.float32)
    if x.M0 is None:
        M0 = torch.zeros(B, H, D, m, dtype=dt, device=x.q.device)
        P0 = (x.p0 * torch.eye(D, dtype=dt, device=x.q.device)).expand(B, H, x.G, D, D).contiguous()
    else:
        M0, P0 = x.M0, x.P0
    o, MT, PT = _ChunkTorchFunction.apply(x.q, x.k, x.v, x.l2, x.r2, x.alpha, M0, P0, x.log_alpha, chunk_size)
    if not output_final_state:
        return o, None
    return o, (MT, PT if x.grouped else PT[:, :, 0])
