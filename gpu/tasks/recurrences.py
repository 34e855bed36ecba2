r"""Recurrent cores of the baseline mixers, as plain torch (autograd-friendly).

Every baseline of the learned tasks is a member of the BL filter family
(BL §3, Table 1, p.6; App. A) and is checked against the float64 numpy filter
:func:`assocmem.numerics.bl_filter.bl_filter` with the matching ``variant``:

===================  ===========================================================  ==============
mixer                recurrence (per head; memory ``M`` is ``D × m``)              numpy variant
===================  ===========================================================  ==============
reset                ``M_t = M + η_t k_t (v_t − Mᵀk_t)ᵀ``,                         ``reset``
                     ``η_t = ℓ_t²/(r_t² + ℓ_t²‖k_t‖²)`` (BL Prop. 2, Eq. 17)       (``lam = ℓ²``)
delta (DeltaNet)     same with a free gate ``η_t = β_t ∈ (0, 1)``                   ``reset``
linear attention     ``M_t = M + ω_t k_t v_tᵀ``, ``ω_t = λ_t/(λ_t + r_t²)`` (§3.2)   ``linear``
GLA-style            ``M_t = diag(α_t) M + k_t v_tᵀ`` (per-key-dimension decay)     ``linear``, alpha
diagonal-cov. BL     BL with only ``diag(P_t)`` kept after each update (Fig. 6)     ``diag``
===================  ===========================================================  ==============

The paper's "-style" baselines are the recurrent cores only (no short
convolutions, output gates or normalisations of the original models); so are
these.  Read-out ``o_t = M_tᵀ q_t`` after the update at ``t`` (as the BL op).

Two implementations of the residual (delta-type) update are kept:
:func:`sequential_delta` (one token at a time, the readable reference) and
:func:`chunk_delta` (chunkwise, exact, the one used for training).  The
chunk form is the usual WY / UT-transform argument: inside a chunk starting
from ``M_0``, the innovations ``δ_i = v_i − M_{i−1}ᵀ k_i`` satisfy

.. math::  \delta_i + \sum_{j<i} \beta_j (k_i^\top w_j)\, \delta_j = v_i - M_0^\top k_i ,

a unit lower-triangular system; then ``o_t = M_0ᵀ q_t + Σ_{j≤t} β_j (q_tᵀ w_j) δ_j`` and
``M_C = M_0 + Σ_j β_j w_j δ_jᵀ``.  ``w = k`` gives the delta rule; ``w = u``
(the BL write direction ``P̄ k``) gives the BL mean update once the
covariance pass has produced ``u_t, β_t`` (used by the diagonal-covariance BL).

Shapes follow flash-linear-attention: ``q, k, w: [B, T, H, D]``,
``v: [B, T, H, m]``, per-token scalars ``[B, T, H]``, states ``[B, H, D, m]``.
"""
from __future__ import annotations

import torch


def _check_qkv(q, k, v):
    if q.ndim != 4 or k.shape != q.shape or v.ndim != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"q, k must be [B, T, H, D] and v [B, T, H, m] with matching B, T, H "
                         f"(got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)})")


def sequential_delta(q, k, v, beta, w=None, M0=None):
    """Token-by-token generalised delta rule ``M_t = M + β_t w_t (v_t − Mᵀk_t)ᵀ``.

    ``w=None`` means ``w = k`` (the delta rule).  Returns ``(o, M_T)``.
    """
    _check_qkv(q, k, v)
    w = k if w is None else w
    B, T, H, D = q.shape
    m = v.shape[-1]
    M = q.new_zeros(B, H, D, m) if M0 is None else M0
    outs = []
    for t in range(T):
        pred = torch.einsum("bhdm,bhd->bhm", M, k[:, t])
        M = M + torch.einsum("bhd,bhm->bhdm", beta[:, t, :, None] * w[:, t], v[:, t] - pred)
        outs.append(torch.einsum("bhdm,bhd->bhm", M, q[:, t]))
    return torch.stack(outs, 1), M


def chunk_delta(q, k, v, beta, w=None, M0=None, chunk_size: int = 64):
    """Chunkwise exact form of :func:`sequential_delta` (see the module docstring).

    Sequential over ``T / chunk_size`` chunks, parallel inside a chunk; the
    triangular solve is ``torch.linalg.solve_triangular`` (differentiable).
    """
    _check_qkv(q, k, v)
    w = k if w is None else w
    B, T, H, D = q.shape
    m = v.shape[-1]
    C = max(1, min(int(chunk_size), T))
    # heads first: [B, H, T, .]
    qh, kh, wh = (x.transpose(1, 2) for x in (q, k, w))
    vh = v.transpose(1, 2)
    bh = beta.transpose(1, 2)
    M = q.new_zeros(B, H, D, m) if M0 is None else M0
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    outs = []
    for s in range(0, T, C):
        e = min(s + C, T)
        n = e - s
        Kc, Wc, Qc, Vc, bc = kh[:, :, s:e], wh[:, :, s:e], qh[:, :, s:e], vh[:, :, s:e], bh[:, :, s:e]
        Wb = Wc * bc[..., None]                                    # β_j w_j
        L = torch.tril(Kc @ Wb.transpose(-1, -2), diagonal=-1)     # L[i, j] = β_j k_iᵀ w_j, j < i
        rhs = Vc - Kc @ M                                          # v_i − M_0ᵀ k_i
        delta = torch.linalg.solve_triangular(eye[:n, :n] + L, rhs, upper=False, unitriangular=True)
        att = torch.tril(Qc @ Wb.transpose(-1, -2))                # β_j q_tᵀ w_j, j ≤ t
        outs.append(Qc @ M + att @ delta)
        M = M + Wb.transpose(-1, -2) @ delta
    return torch.cat(outs, 2).transpose(1, 2), M


def reset_gain(l2, r2, k):
    """Covariance-reset gain ``η = ℓ²/(r² + ℓ²‖k‖²)`` (BL Prop. 2 with ``λ = ℓ²``)."""
    return l2 / (r2 + l2 * (k * k).sum(-1))


def additive(q, k, v, omega=None, log_alpha=None, M0=None, chunk_size: int = 16):
    r"""Additive family ``M_t = diag(α_t) M_{t−1} + ω_t k_t v_tᵀ`` (linear attention, GLA).

    ``omega``: ``[B, T, H]`` write weights (default 1); ``log_alpha``:
    ``[B, T, H, D]`` log-decays ≤ 0 (default none).  Chunkwise: inside a chunk
    with cumulative log-decay ``G_t = Σ_{s≤t} log α_s``,

    .. math::  o_t = (e^{G_t} \odot q_t)^\top M_0 + \sum_{i\le t}
               \Big(\sum_d q_{t,d} k_{i,d} e^{G_{t,d}-G_{i,d}}\Big) \omega_i v_i ,

    with the decay ratios formed explicitly as ``exp(G_t − G_i)`` (never
    ``e^{G_t}/e^{G_i}``, which under/overflows for strong decays).
    """
    _check_qkv(q, k, v)
    B, T, H, D = q.shape
    m = v.shape[-1]
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if omega is not None:
        vh = vh * omega.transpose(1, 2)[..., None]
    M = q.new_zeros(B, H, D, m) if M0 is None else M0
    if log_alpha is None:
        # no decay: one causal matmul per chunk of 64 is plenty
        C = max(1, min(64, T))
        outs = []
        for s in range(0, T, C):
            Qc, Kc, Vc = qh[:, :, s:s + C], kh[:, :, s:s + C], vh[:, :, s:s + C]
            outs.append(Qc @ M + torch.tril(Qc @ Kc.transpose(-1, -2)) @ Vc)
            M = M + Kc.transpose(-1, -2) @ Vc
        return torch.cat(outs, 2).transpose(1, 2), M
    gh = log_alpha.transpose(1, 2)
    C = max(1, min(int(chunk_size), T))
    outs = []
    for s in range(0, T, C):
        Qc, Kc, Vc = qh[:, :, s:s + C], kh[:, :, s:s + C], vh[:, :, s:s + C]
        G = torch.cumsum(gh[:, :, s:s + C], dim=2)                 # [B, H, n, D]
        n = Qc.shape[2]
        diff = G[:, :, :, None, :] - G[:, :, None, :, :]           # G_t − G_i  [B, H, n, n, D]
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool, device=q.device))
        diff = torch.where(mask[..., None], diff, torch.full_like(diff, -torch.inf))
        A = torch.einsum("bhtd,bhid,bhtid->bhti", Qc, Kc, torch.exp(diff))
        outs.append((Qc * torch.exp(G)) @ M + A @ Vc)
        Glast = G[:, :, -1:, :]
        M = torch.exp(Glast[:, :, 0, :, None]) * M + (Kc * torch.exp(Glast - G)).transpose(-1, -2) @ Vc
    return torch.cat(outs, 2).transpose(1, 2), M


def diag_covariance_pass(k, l2, r2, p0: float = 1.0, P0=None):
    r"""Covariance pass of the diagonal-covariance BL (the Fig. 6 ablation).

    With ``p`` the kept diagonal of ``P``: ``p̄ = p + ℓ²``, ``u = p̄ ⊙ k``,
    ``β = 1/(r² + kᵀu)``, ``p ← p̄ − β u ⊙ u`` (the diagonal of BL's
    ``P̄ − β u uᵀ``; the off-diagonal terms are dropped after every update).
    The pass does not depend on the values, so the mean follows from
    :func:`chunk_delta` with ``w = u``.  Returns ``(u [B,T,H,D], β [B,T,H], p_T)``.
    """
    B, T, H, D = k.shape
    p = k.new_full((B, H, D), float(p0)) if P0 is None else P0
    us, bs = [], []
    for t in range(T):
        pbar = p + l2[:, t, :, None]
        u = pbar * k[:, t]
        beta = 1.0 / (r2[:, t] + (u * k[:, t]).sum(-1))
        p = pbar - beta[..., None] * u * u
        us.append(u)
        bs.append(beta)
    return torch.stack(us, 1), torch.stack(bs, 1), p


def diag_bl(q, k, v, l2, r2, p0: float = 1.0, chunk_size: int = 64, fused=None):
    """Diagonal-covariance BL: covariance pass then the chunked mean pass.

    ``fused``: run the covariance pass as Triton kernels
    (:mod:`.diag_fused`: one launch forward and one backward instead of a
    dozen per token); ``None`` picks them for CUDA tensors, and for CPU
    tensors under ``TRITON_INTERPRET=1``.
    """
    from . import diag_fused as DF
    if fused is None:
        fused = DF.use_fused(k.device)
    u, beta, _ = (DF.diag_covariance_pass_fused if fused else diag_covariance_pass)(k, l2, r2, p0)
    return chunk_delta(q, k, v, beta, w=u, chunk_size=chunk_size)[0]
