r"""``chunk_bl``: the BL filter chunk by chunk (the innovations / LDLᵀ form).

Two implementations of one algorithm (issue 6):

* :func:`chunk_bl_torch`, torch tensor ops: the readable form, any float dtype
  (arithmetic in ``promote(dtype, float32)``), differentiable through autograd;
  the float64 reference of the kernels and the CPU fallback;
* the Triton kernels of :mod:`._chunk_kernels` (CUDA tensors, or CPU tensors
  with ``TRITON_INTERPRET=1``): a chunked covariance pass (rows of the LDLᵀ
  factor by the innovations recursion, products-only decay ratios) and a
  matmul-only mean pass; fp32 arithmetic whatever the input dtype.  Gradients:
  the forward keeps ``u_t, β_t`` and the innovations ``e_t`` (and ``W``), from
  which either the chunked backward kernels of :mod:`._chunk_bwd_kernels`
  (hand-differentiated chunk formulas, :mod:`.chunk_backward`; the default at
  ``D ≤ 64``, ``C ≤ 32``) or :mod:`.fused_recurrent`'s token-by-token Triton
  backward compute exact gradients (not an approximation).

:func:`chunk_bl` dispatches like :func:`fused_recurrent_bl`.

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


def chunk_bl_torch(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
                   chunk_size: int = 64, *, g=None, validate: bool = True, return_saved: bool = False,
                   write_mask=None):
    """The BL filter computed chunk by chunk with torch ops; same contract as :func:`fused_recurrent_bl`.

    ``chunk_size`` ∈ {16, 32, 64}.  Returns ``(o, final_state or None)``, and with
    ``return_saved`` a third item ``(u [B, T, H, G, D], β [B, T, H, G], e [B, T, H, m])``: what
    the chunked kernels keep for the backward (:mod:`.chunk_backward`).
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


# --------------------------------------------------------------------------
# Triton path
# --------------------------------------------------------------------------
def chunk_kernels(interpret: bool):
    """:mod:`._chunk_kernels`, compiled or interpreted (see :func:`._dispatch.kernels`)."""
    from ._dispatch import kernels

    return kernels(interpret, "_chunk_kernels.py")


def default_chunk_config(D: int, m: int, G: int, C: int, BH: int = 0) -> dict:  # noqa: ARG001 (C: API)
    """Launch parameters of the two chunked passes.

    ``BD``: the key dimension padded to a power of two ≥ 16 (``tl.dot`` needs 16);
    ``BV``: value columns per mean program (power of two ≥ 16, at most 64);
    warps per pass (``cov_warps=None``: chosen with the covariance kernel, see
    :func:`_cov_kernel`); ``stages=1``: no software pipelining of the chunk loop
    (Triton's default of 3 stages triples the shared memory of the loads, past
    the H200's 227 KB at ``C = 64``).  The sweeps behind the choices:
    ``benchmarks/h200_chunk.json`` (products-only kernel) and
    ``benchmarks/h200_chunk_mm.json`` (quotient kernel, value-side precision).
    """
    from .fused_recurrent import _pow2

    BD = max(16, _pow2(D))
    mg = m // G
    # H200 sweeps (benchmarks/h200_chunk_mm.json, h200_chunk_mm3.json): 64 value columns a program
    # with 8 warps when there are >= 128 (batch, head, group) programs (S1: 0.67 ms against 1.06
    # with 16), 16 columns when there are fewer (S3, 64 of them: 2.12 ms against 2.60 with 64).
    # At D = 128 the fp32 products of BV = 64 spill (19.2 ms) and 3xTF32 runs them on tensor
    # cores without spilling (1.92 ms against 3.19 for the best fp32 block; error against
    # float64 3.6e-7 vs 3.8e-7)
    BV = max(16, min(64 if BH * G >= 128 or BH == 0 else 16, _pow2(mg)))
    mean_warps = 8 if BV * BD >= 4096 else 4
    mean_precision = "ieee" if BD <= 64 else "tf32x3"
    return {"BD": BD, "BV": BV, "cov_warps": None, "mean_warps": mean_warps, "mean_precision": mean_precision,
            "cov_precision": "ieee", "cov_kernel": "auto"}


# |log γ| bound inside a chunk for the quotient form of the covariance pass: e^60 ≈ 1e26 keeps
# γ_τ/γ_i, c_i/γ_i and their products with keys inside fp32's range (≈ 1e±38) with room to spare
LOG_GAMMA_BOUND = 60.0          # < 69 = |log 1e-30|, the floor at which the guard kernel counts α = 0
COV_KERNELS = ("auto", "matmul", "rows")


def _decays_safe(a, C: int, K=None, bound: float = LOG_GAMMA_BOUND) -> bool:
    """Whether the quotient form of the covariance pass is safe for these decays: inside every
    chunk, ``Σ_τ |log|α_τ|| ≤ LOG_GAMMA_BOUND`` (so every cumulative decay relative to the
    chunk start, ``γ_τ = α_0 ⊙ … ⊙ α_τ``, is non-zero with ``|log|γ_τ|| ≤`` the bound: a
    sufficient condition).  ``a``: decays ``[B, T, H, D]``.  With the kernel module ``K``
    one Triton pass (:func:`._chunk_kernels._abs_log_decay_sum`; H200: 0.16 ms at S1 for
    the five torch passes it replaces), else torch ops.  One host synchronisation."""
    if a is None:
        return True
    B, T, H, D = a.shape
    NT = -(-T // C)
    if K is not None:
        from .fused_recurrent import _pow2

        out = torch.zeros(1, dtype=torch.float32, device=a.device)
        K._abs_log_decay_sum[(B * NT * H,)](a.contiguous(), out, T, NT, H=H, D=D, BD=max(16, _pow2(D)), C=C)
        return bool(out[0] <= bound)                            # NaN/inf compare False
    la = torch.log(a.detach().abs().float()).abs_()            # +inf where α = 0
    if NT * C != T:
        la = torch.cat([la, la.new_zeros(B, NT * C - T, H, D)], 1)
    return bool(la.view(B, NT, C, H, D).sum(2).amax() <= bound)


def _cov_kernel(K, cfg, a, C):
    """The covariance-pass kernel and its warps, ``(kernel, warps)``.

    ``cfg["cov_kernel"]``: ``"matmul"`` (quotient form), ``"rows"`` (products
    only) or ``"auto"``: the quotient form where it is valid (:func:`_decays_safe`)
    and faster (H200, ``benchmarks/h200_chunk_mm.json``), i.e. ``BD ≤ 64`` and
    ``C ≤ 32`` (S1: 1.92 ms at ``C = 16``, 2.66 at 32, against 2.92 and 4.45 for
    the row kernel); at ``BD = 128`` or ``C = 64`` its registers spill (S2: 30 ms
    against 7.6; S1 at ``C = 64``: 16.8 against 6.5).  Warps, unless
    ``cfg["cov_warps"]`` sets them: quotient kernel 4 at ``C = 16`` (against 2.24
    ms with 8), 8 at ``C = 32`` (against 16.9 with 4); row kernel 8 above ``BD = 32``.
    """
    kind = cfg.get("cov_kernel", "auto")
    if kind not in COV_KERNELS:
        raise ValueError(f"config['cov_kernel'] must be one of {COV_KERNELS} (got {kind!r})")
    if kind == "auto":
        kind = "matmul" if cfg["BD"] <= 64 and C <= 32 and _decays_safe(a, C, K) else "rows"
    warps = cfg.get("cov_warps")
    if warps is None:
        if kind == "matmul":
            warps = 4 if C <= 16 else 8
        else:
            warps = 4 if cfg["BD"] <= 32 else 8
    return (K.chunk_cov_fwd_mm_kernel if kind == "matmul" else K.chunk_cov_fwd_kernel), warps


def _maxnreg(cfg, key) -> dict:
    """``{"maxnreg": N}`` for a kernel launch when ``cfg[key]`` sets a register cap, else ``{}``.

    ptxas left alone gives the 4-warp quotient kernel 72 registers and 2.1 KB of spills
    (sm_90, triton 3.6); ``maxnreg=255`` lets it keep 255 and spill 1 KB."""
    n = cfg.get(key)
    if n is None:
        return {}
    if isinstance(n, bool) or not isinstance(n, int) or not 24 <= n <= 255:
        raise ValueError(f"config[{key!r}] must be an integer register cap in [24, 255] (got {n!r})")
    return {"maxnreg": n}


def _mm_variant(cfg) -> dict:
    """The quotient kernel's constexpr variants from the config (see
    :func:`._chunk_kernels.chunk_cov_fwd_mm_kernel`): ``unroll`` and the timing-only
    ``cov_ldl`` (``False`` skips the factorisation: wrong results, for the benchmark)."""
    return {"UNROLL": bool(cfg.get("unroll", False)), "LDL": bool(cfg.get("cov_ldl", True))}


def _segments(cfg, NT: int, cuda: bool, programs: int = 0, sms: int = 0) -> list[tuple[int, int]]:
    """Chunk ranges ``[(n0, n1), …]`` that :func:`_chunk_forward` launches one after the other.

    ``cfg["segments"]``: an integer ``S ≥ 1`` or ``"auto"`` (default).  With several segments the
    mean pass of segment ``s`` runs on a second stream while the covariance pass of segment
    ``s + 1`` runs.  That pays only where the covariance pass leaves whole SMs idle: H200
    (``benchmarks/h200_chunk_segments.json``, forward ms for 1 / 4 / 8 / 16 segments) S3, 64
    covariance programs on 132 SMs: 9.22 / 9.27 / 8.46 / 8.25 (fwd+bwd 30.1 → 28.0 at 8); S1 and S2,
    128 programs: 2.59 / 2.68 / 2.61 / 2.64 and 9.63 / 9.57 / 9.65 / 9.64 (the two passes then
    share SMs and slow each other down).  So ``"auto"`` takes 8 segments (of at least 8 chunks)
    on a GPU when the covariance pass has at most half as many ``programs`` as the device has
    ``sms``, and one segment otherwise (and on a CPU).  Ranges are as even as chunks allow and
    never empty."""
    S = cfg.get("segments", "auto")
    if S == "auto":
        S = max(1, min(8, NT // 8)) if cuda and 0 < 2 * programs <= sms else 1
    elif isinstance(S, bool) or not isinstance(S, int) or S < 1:
        raise ValueError(f"config['segments'] must be 'auto' or an integer >= 1 (got {S!r})")
    S = min(S, NT)
    cuts = [NT * i // S for i in range(S + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(S)]


_SIDE_STREAMS: dict = {}


def _side_stream(dev):
    """One side stream per CUDA device, for the mean passes of :func:`_chunk_forward`."""
    key = dev.index if dev.index is not None else torch.cuda.current_device()
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = torch.cuda.Stream(device=key)
    return _SIDE_STREAMS[key]


def _chunk_forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e, keep_w=False):
    """Launch the chunked passes.  ``M0 [B, H, D, m]``, ``P0 [B, H, G, D, D]`` (fp32, contiguous).

    Returns ``o, M_T [B, H, D, m], P_T [B, H, G, D, D], u [B, T, H, G, D], β [B, T, H, G], e``.

    The sequence runs as the segments of :func:`_segments`: covariance pass of segment ``s`` on
    the current stream, then its mean pass on a side stream (after an event), so that it overlaps
    the covariance pass of segment ``s + 1``; the states between segments go through small
    ``[B, H, G, D, D]`` / ``[B, H, D, m]`` buffers, and the current stream waits for the side
    stream before returning (so every buffer is safe to free or reuse in stream order).
    """
    from .fused_recurrent import _empty

    B, T, H, D = q.shape
    m = v.shape[-1]
    G = r2.shape[-1]
    mg = m // G
    dev = q.device
    f32 = torch.float32
    NT = -(-T // C)
    dummy = torch.zeros(1, dtype=f32, device=dev)
    ap = a if a is not None else dummy
    u = _empty((B, T, H, G, D), f32, dev)
    beta = _empty((B, T, H, G), f32, dev)
    W = _empty((B, H, G, NT, C, C), f32, dev)
    Aq = _empty((B, H, G, NT, C, C), f32, dev)
    Ut = _empty((B, H, G, NT, C, D), f32, dev)
    PT = _empty((B, H, G, D, D), f32, dev)
    o = _empty((B, T, H, m), v.dtype, dev)
    e = _empty((B, T, H, m), f32, dev) if need_e else dummy
    MT = _empty((B, H, D, m), f32, dev)
    kern, warps = _cov_kernel(K, cfg, a, C)
    cov_kw = dict(H=H, G=G, D=D, BD=cfg["BD"], C=C, HAS_ALPHA=a is not None,
                  PREC=cfg.get("cov_precision", "ieee"), num_warps=warps, num_stages=cfg.get("stages", 1),
                  **(_mm_variant(cfg) if kern is K.chunk_cov_fwd_mm_kernel else {}), **_maxnreg(cfg, "cov_maxnreg"))
    BV = cfg["BV"]
    NVG = -(-mg // BV)
    mean_kw = dict(H=H, G=G, D=D, M=m, MG=mg, BD=cfg["BD"], BV=BV, NVG=NVG, C=C, HAS_ALPHA=a is not None,
                   STORE_E=need_e, PREC=cfg.get("mean_precision", "ieee"), num_warps=cfg["mean_warps"],
                   num_stages=cfg.get("stages", 1), **_maxnreg(cfg, "mean_maxnreg"))
    cuda = dev.type == "cuda"
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if cuda else 0
    segs = _segments(cfg, NT, cuda, B * H * G, sms)
    S = len(segs)
    Ps = [P0] + [torch.empty_like(PT) for _ in range(S - 1)] + [PT]     # state before segment s: Ps[s]
    Ms = [M0] + [torch.empty_like(MT) for _ in range(S - 1)] + [MT]
    overlap = cuda and S > 1
    if overlap:
        main, side = torch.cuda.current_stream(dev), _side_stream(dev)
        side.wait_stream(main)                      # the inputs and buffers above are ready
    for s, (n0, n1) in enumerate(segs):
        kern[(B * H * G,)](q, k, ap, l2, r2, Ps[s], u, beta, W, Aq, Ut, Ps[s + 1], T, NT, n0, n1, **cov_kw)
        if overlap:
            side.wait_stream(main)
            with torch.cuda.stream(side):
                K.chunk_mean_fwd_kernel[(B * H * G * NVG,)](q, k, v, ap, beta, W, Aq, Ut, Ms[s], o, e, Ms[s + 1],
                                                            T, NT, n0, n1, **mean_kw)
        else:
            K.chunk_mean_fwd_kernel[(B * H * G * NVG,)](q, k, v, ap, beta, W, Aq, Ut, Ms[s], o, e, Ms[s + 1],
                                                        T, NT, n0, n1, **mean_kw)
    if overlap:
        main.wait_stream(side)
    if keep_w:                          # the chunked backward reads W = diag(β) L⁻¹
        return o, MT, PT, u, beta, e, W
    return o, MT, PT, u, beta, e


def _super_chunks(cfg) -> int:
    S = cfg.get("super_chunks", 1)
    if isinstance(S, bool) or not isinstance(S, int) or S < 1:
        raise ValueError(f"config['super_chunks'] must be an integer >= 1 (got {S!r})")
    return S


def _forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e):
    """:func:`_chunk_forward`, or its two-level form when ``cfg["super_chunks"] > 1``."""
    S = _super_chunks(cfg)
    if S == 1:
        return _chunk_forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e)
    from .chunk_parallel import two_level_forward

    return two_level_forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e, S, _chunk_forward)


BACKWARDS = ("auto", "recurrent", "chunked")
# |log γ| bound inside a chunk for the chunked backward's quotient form: it divides by γ² and
# forms c/γ² (≤ e^80 ≈ 6e34 < fp32's 3e38), a tighter condition than the forward's
LOG_GAMMA_BOUND_BWD = 40.0


def chunk_bwd_kernels(interpret: bool):
    """:mod:`._chunk_bwd_kernels`, compiled or interpreted (see :func:`._dispatch.kernels`)."""
    from ._dispatch import kernels

    return kernels(interpret, "_chunk_bwd_kernels.py")


def _backward_kind(cfg) -> str:
    kind = cfg.get("backward", "auto")
    if kind not in BACKWARDS:
        raise ValueError(f"config['backward'] must be one of {BACKWARDS} (got {kind!r})")
    return kind


def _use_chunked_backward(cfg, D: int, C: int) -> bool:
    """``"auto"``: the chunked backward where it was measured faster on the H200
    (``benchmarks/h200_chunk_bwd.json``: D = 64, C = 16/32, S1 and S3: fwd+bwd 10.7 / 29.2 ms
    against the token-by-token backward's 15.9 / 58.1 ms at C = 16); the token-by-token one
    elsewhere (D = 128 and C = 64 spill in the offline sm_90 compile and are unmeasured).
    Either way the decay guard can still send a call to the token-by-token backward."""
    kind = _backward_kind(cfg)
    if _super_chunks(cfg) != 1 or kind == "recurrent":
        return False
    return kind == "chunked" or (D <= 64 and C <= 32)


def _chunk_backward(KB, q, k, v, l2, a, M0, P0, u, beta, e, W, do, dMT, dPT, C, cfg, need_dg):
    """The chunked backward's four Triton passes and the torch epilogue (quotient form of
    :func:`.chunk_backward.chunk_bl_backward_quotient_torch`).  ``M0, dMT [B, H, D, m]``,
    ``P0, dPT [B, H, G, D, D]`` fp32 (``dPT`` symmetric), ``W [B, H, G, NT, C, C]`` from the forward.

    Returns ``(dq, dk, dv, dl2, dr2 [B, T, H, G], dg or None, dM0, dP0)`` in fp32.
    """
    from .fused_recurrent import _empty, _pow2

    B, T, H, D = q.shape
    m = e.shape[-1]
    G = u.shape[3]
    mg = m // G
    dev = q.device
    f32 = torch.float32
    NT = -(-T // C)
    BD = max(16, _pow2(D))
    # H200 (benchmarks/h200_chunk_bwd.json, parallel form, D = 64, C = 16): 4 warps and BV = 32
    # took 10.7 / 29.2 ms fwd+bwd at S1 / S3 against 13.6 / 36.5 ms with 8 warps and BV = 64;
    # at D = 128 (unmeasured) BV = 32 is what the offline sm_90 compile fits without spills
    BV = int(cfg.get("bwd_BV", max(16, min(32, _pow2(mg)))))
    NVG = -(-mg // BV)
    warps = int(cfg.get("bwd_warps", 4 if BD <= 64 else 8))
    prec = cfg.get("bwd_precision", "ieee" if BD <= 64 else "tf32x3")
    has_a = a is not None
    dummy = torch.zeros(1, dtype=f32, device=dev)
    ap = a if has_a else dummy
    do = torch.zeros(B, T, H, m, dtype=f32, device=dev) if do is None else do.contiguous()
    dMT = torch.zeros(B, H, D, m, dtype=f32, device=dev) if dMT is None else dMT.float().contiguous()
    dPT = (torch.zeros(B, H, G, D, D, dtype=f32, device=dev) if dPT is None
           else (0.5 * (dPT.float() + dPT.float().transpose(-1, -2))).contiguous())
    kw = dict(H=H, G=G, D=D, BD=BD, C=C, HAS_ALPHA=has_a, PREC=prec, num_warps=warps, num_stages=1,
              **_maxnreg(cfg, "bwd_maxnreg"))
    vkw = dict(kw, M=m, MG=mg, BV=BV, NVG=NVG)
    # pass 1: chunk-start states
    Ps = _empty((B, H, G, NT, D, D), f32, dev)
    Ms = _empty((B, H, NT, D, m), f32, dev)
    KB.chunk_bwd_pstate_kernel[(B * H * G,)](k, ap, l2, u, beta, P0, Ps, T, NT, **kw)
    KB.chunk_bwd_mstate_kernel[(B * H * G * NVG,)](ap, u, beta, e, M0, Ms, T, NT, **vkw)
    # the adjoints that value blocks (and groups) share are added atomically
    z = lambda *shape: torch.zeros(shape, dtype=f32, device=dev)  # noqa: E731
    dv = _empty((B, T, H, m), f32, dev)
    dM0 = _empty((B, H, D, m), f32, dev)
    dAq, dN = z(B, H, G, NT, C, C), z(B, H, G, NT, C, C)
    dUt = z(B, H, G, NT, C, D)
    dbeta = z(B, T, H, G)
    dgC, dcC = z(B, H, NT, D), z(B, H, NT, D)
    dQg, dKg, dKd, dc, dgam = (z(B, T, H, D) for _ in range(5))
    dr2 = _empty((B, T, H, G), f32, dev)
    dP0 = _empty((B, H, G, D, D), f32, dev)
    form = cfg.get("bwd_form", "parallel")
    if form == "sequential":
        # pass 2: mean adjoint; pass 3: covariance adjoint, each one program per sequence, all work
        # of a chunk inside the reverse chain
        KB.chunk_bwd_mean_kernel[(B * H * G * NVG,)](
            q, k, v, ap, u, beta, e, do, W, Ms, dMT, dv, dM0, dAq, dN, dUt, dbeta, dgC, dQg, dKg, T, NT, **vkw)
        KB.chunk_bwd_cov_kernel[(B * H * G,)](
            q, k, ap, l2, u, beta, W, Ps, dPT, dAq, dN, dUt, dbeta, dr2, dP0, dQg, dKg, dKd, dc, dgam, dgC, dcC,
            T, NT, **kw)
    elif form == "parallel":
        # the chains carry only the adjoints (G ← ΓG − Xᵀ(ŨG) + s, H ← ΦᵀHΦ + S); the rest runs with
        # one program per chunk from the stored chunk-end adjoints
        Gs = _empty((B, H, NT, D, m), f32, dev)
        Hs = _empty((B, H, G, NT, D, D), f32, dev)
        KB.chunk_bwd_gstate_kernel[(B * H * G * NVG,)](q, k, ap, u, beta, do, W, dMT, Gs, dM0, T, NT, **vkw)
        KB.chunk_bwd_mean_par_kernel[(B * H * G * NVG * NT,)](
            q, k, v, ap, u, beta, e, do, W, Ms, Gs, dv, dAq, dN, dUt, dbeta, dgC, dQg, dKg, T, NT, **vkw)
        cargs = (q, k, ap, l2, u, beta, W, Ps, Hs, dAq, dN, dUt, dbeta, dr2, dQg, dKg, dKd, dc, dgam, dgC, dcC, T, NT)
        KB.chunk_bwd_cov_par_kernel[(B * H * G * NT,)](*cargs, OUT=False, **kw)        # sources S_n
        KB.chunk_bwd_hstate_kernel[(B * H * G,)](k, ap, u, W, dPT, Hs, dP0, T, NT, **kw)
        KB.chunk_bwd_cov_par_kernel[(B * H * G * NT,)](*cargs, OUT=True, **kw)         # the outputs
    else:
        raise ValueError(f"config['bwd_form'] must be 'sequential' or 'parallel' (got {form!r})")
    # epilogue: γ, c per token (relative to the chunk) and the reverse cumulative sums
    if cfg.get("bwd_epilogue", "triton") == "torch":
        dq, dk, dl2, dg = _chunk_backward_epilogue_torch(q, k, l2, a, dQg, dKg, dKd, dc, dgam, dgC, dcC, C, need_dg)
        return dq, dk, dv, dl2, dr2, dg, dM0, dP0
    need = need_dg and has_a
    dq, dk = _empty((B, T, H, D), f32, dev), _empty((B, T, H, D), f32, dev)
    dl2 = _empty((B, T, H), f32, dev)
    dg = _empty((B, T, H, D), f32, dev) if need else dummy
    KB.chunk_bwd_epilogue_kernel[(B * NT * H,)](
        q, k, ap, l2, dQg, dKg, dKd, dc, dgam, dgC, dcC, dq, dk, dl2, dg, T, NT,
        H=H, D=D, BD=BD, C=C, HAS_ALPHA=has_a, NEED_DG=need, num_warps=max(4, C // 4))   # sm_90 compile: no spills
    return dq, dk, dv, dl2, dr2, dg if need else None, dM0, dP0


def _chunk_backward_epilogue_torch(q, k, l2, a, dQg, dKg, dKd, dc, dgam, dgC, dcC, C, need_dg):
    """The epilogue of :func:`_chunk_backward` as torch operations (``config["bwd_epilogue"] =
    "torch"``; the reference of ``chunk_bwd_epilogue_kernel``).  Returns ``dq, dk, dl2, dg``
    reordered by the caller."""
    B, T, H, D = q.shape
    NT = -(-T // C)
    Tp = NT * C

    def ch(t, value=0.0):                       # [B, T, H, X] -> [B, NT, C, H, X]
        t = t.float()
        if Tp != T:
            t = torch.cat([t, t.new_full((B, Tp - T) + tuple(t.shape[2:]), value)], 1)
        return t.view(B, NT, C, H, t.shape[-1])

    Kc, Qc = ch(k), ch(q)
    L2 = ch(l2[..., None])
    if a is not None:
        gam = torch.cumprod(ch(a, 1.0), 2)
        g2 = gam * gam
        cc = g2 * torch.cumsum(L2 / g2, 2)
    else:
        gam, g2 = torch.ones_like(Kc), torch.ones_like(Kc)
        cc = torch.cumsum(L2, 2).expand_as(Kc)
    dQg_, dKg_ = ch(dQg), ch(dKg)
    dq = gam * dQg_
    dk = ch(dKd) + gam * dKg_
    dc_ = ch(dc)
    dc_[:, :, -1] += dcC.permute(0, 2, 1, 3)
    rs = (g2 * dc_).flip(2).cumsum(2).flip(2)              # Σ_{τ≥j} dc_τ γ_τ²
    dl2 = (rs / g2).sum(-1)
    dg = None
    if need_dg and a is not None:
        dgam_ = ch(dgam) + Kc * dKg_ + Qc * dQg_
        dgam_[:, :, -1] += dgC.permute(0, 2, 1, 3)
        dgam_ = dgam_ + 2.0 * (cc / gam) * dc_ - 2.0 * L2 * (rs / g2) / gam
        dg = (dgam_ * gam).flip(2).cumsum(2).flip(2).reshape(B, Tp, H, D)[:, :T]
    back = lambda t: t.reshape(B, Tp, H, -1)[:, :T]  # noqa: E731
    return back(dq), back(dk), back(dl2[..., None])[..., 0], dg


class _ChunkBLFunction(torch.autograd.Function):
    """Forward: the chunked kernels.  Backward: the token-by-token op's Triton backward
    (:func:`.fused_recurrent._backward`, fed with the ``u, β, e`` and final states that the
    chunked forward produced), or with ``config={"backward": "chunked"}`` the chunked backward
    kernels (:func:`_chunk_backward`) where the decays allow its quotient form."""

    @staticmethod
    def forward(ctx, q, k, v, l2, r2, dec, M0, P0, log_alpha, interpret, C, cfg, bcfg):
        K = chunk_kernels(interpret)
        q, k, v, l2, r2 = (t.contiguous() for t in (q, k, v, l2, r2))
        a = None
        if dec is not None:
            a = (torch.exp(dec.float()) if log_alpha else dec).contiguous()
        M0c = M0.float().contiguous()
        P0c = P0.float().contiguous()
        need_grad = any(ctx.needs_input_grad[:8])
        chunked = need_grad and _use_chunked_backward(cfg, q.shape[-1], C)
        W = None
        if chunked:
            o, MT, PT, u, beta, e, W = _chunk_forward(K, q, k, v, l2, r2, a, M0c, P0c, C, cfg, True, keep_w=True)
        else:
            o, MT, PT, u, beta, e = _forward(K, q, k, v, l2, r2, a, M0c, P0c, C, cfg, need_grad)
        if need_grad:
            ctx.save_for_backward(q, k, v if chunked else None, l2, a, M0c, P0c, u, beta, e, MT, PT, W)
            ctx.meta = (log_alpha, interpret, bcfg, v.dtype, r2.dtype, None if dec is None else dec.dtype,
                        M0.dtype, P0.dtype)
            ctx.chunk = (C, cfg)
        ctx.set_materialize_grads(False)
        return o, MT, PT

    @staticmethod
    def backward(ctx, do, dMT, dPT):
        from .fused_recurrent import bl_backward

        q, k, v, l2, a, M0, P0, u, beta, e, MT, PT, W = ctx.saved_tensors
        C, cfg = ctx.chunk
        log_alpha, interpret, _, vdt, r2dt, decdt, m0dt, p0dt = ctx.meta
        need_dg = a is not None and ctx.needs_input_grad[5]
        if W is not None and (a is None or _decays_safe(a, C, chunk_kernels(interpret), LOG_GAMMA_BOUND_BWD)):
            dq, dk, dv, dl2, dr2, dg, dM0, dP0 = _chunk_backward(
                chunk_bwd_kernels(interpret), q, k, v, l2, a, M0, P0, u, beta, e, W, do, dMT, dPT, C, cfg, need_dg)
            ddec = None
            if need_dg:
                ddec = (dg if log_alpha else dg / a.float()).to(decdt)
            return (dq.to(q.dtype), dk.to(k.dtype), dv.to(vdt), dl2.to(l2.dtype), dr2.to(r2dt), ddec,
                    dM0.to(m0dt), dP0.to(p0dt), None, None, None, None, None)
        # the chunked forward keeps means as [B, H, D, m]; the shared backward wants them transposed
        t = lambda x: None if x is None else x.transpose(-1, -2).contiguous()  # noqa: E731
        *rest, dM0t, dP0 = bl_backward(q, k, l2, a, t(M0), P0, u, beta, e, t(MT), PT, do, t(dMT), dPT,
                                       ctx.meta, ctx.meta[2], need_dg)
        return (*rest, dM0t.transpose(-1, -2).to(m0dt), dP0, None, None, None, None, None)


def chunk_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
             chunk_size: int = 64, *, g=None, validate: bool = True, config: dict | None = None,
             write_mask=None):
    r"""The BL filter computed chunk by chunk; same contract as :func:`fused_recurrent_bl`
    (``write_mask`` included: a non-writing token is a missing observation).

    ``chunk_size`` ∈ {16, 32, 64}.  Returns ``(o, final_state or None)``.

    CUDA tensors run the chunked Triton kernels (fp32 state and arithmetic,
    ``D ≤ 128``), CPU tensors with ``TRITON_INTERPRET=1`` the same kernels
    interpreted, other CPU tensors :func:`chunk_bl_torch`.  Gradients by the
    chunked backward kernels or the token-by-token op's Triton backward (``backward``
    below); the same rule as :func:`fused_recurrent_bl` for ``alpha`` with exact zeros.
    ``config`` overrides launch parameters (:func:`default_chunk_config`; register caps
    ``cov_maxnreg``, ``mean_maxnreg``, ``bwd_maxnreg``; ``segments``, see :func:`_segments`);
    ``config={"backward": "chunked"}`` takes the chunked backward kernels
    (:mod:`._chunk_bwd_kernels`; ``bwd_form`` "parallel" (default) or "sequential", launch keys
    ``bwd_BV``, ``bwd_warps``, ``bwd_precision``, ``bwd_epilogue`` "triton" | "torch") where
    every chunk's ``Σ|log|α||`` is at most ``LOG_GAMMA_BOUND_BWD``, else the token-by-token
    backward; ``"recurrent"`` forces the token-by-token backward, and the default ``"auto"``
    takes the chunked one at ``D ≤ 64``, ``chunk_size ≤ 32`` (measured faster on the H200,
    ``benchmarks/h200_chunk_bwd.json``) and the token-by-token one otherwise;
    ``config={"super_chunks": S}`` runs the two-level form parallel over time
    (:mod:`.chunk_parallel`; exact, opt-in: slower than one level on the H200 as written).
    ``chunk_size=16`` was the fastest on the H200 at S1-S3, forward and backward
    (``benchmarks/h200_chunk.json``, ``h200_chunk_grid_cov.json``, ``h200_chunk_grid_fb.json``);
    the default of 64 is the issue's API, and at 64 the forward takes the products-only
    covariance kernel and the backward the token-by-token one.
    """
    from ._dispatch import mode_for
    from .fused_recurrent import MAX_D, _launch_cfg, _prepare_states

    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate, write_mask=write_mask)
    mode = mode_for(x.q.device)
    if mode == "naive":
        return chunk_bl_torch(q, k, v, l2, r2, alpha, p0, initial_state, output_final_state, chunk_size,
                              g=g, validate=False, write_mask=write_mask)
    if validate and x.alpha is not None and not x.log_alpha and x.alpha.requires_grad \
            and bool((x.alpha == 0).any()):
        raise ValueError("alpha has exact zeros: its gradient is computed as dL/dlog(alpha) / alpha; "
                         "pass the log-decay as g= instead")
    B, T, H, D, m = x.dims
    if D > MAX_D:
        raise ValueError(f"q/k head dimension D={D} is above {MAX_D}: the chunked kernel keeps the D×D "
                         "covariance in one program's registers; use chunk_bl_torch or naive_bl")
    interp = mode == "interpret"
    cfg = default_chunk_config(D, m, x.G, chunk_size, 0 if interp else B * H)
    if config:
        cfg.update(config)
    _super_chunks(cfg)
    _backward_kind(cfg)
    # the token-by-token backward's launch parameters; config["bwd_reduce"] ("atomic" | "partials")
    # passes through (how its value blocks combine dw, dq, dk: see fused_recurrent._backward)
    bcfg = _launch_cfg(D, m, x.G, T, B * H,
                       {"bwd_reduce": cfg["bwd_reduce"]} if "bwd_reduce" in cfg else None, interp)
    M0t, P0 = _prepare_states(x, B, H, D, m, x.G, x.q.device)
    M0 = M0t.transpose(-1, -2)
    o, MT, PT = _ChunkBLFunction.apply(x.q, x.k, x.v, x.l2, x.r2, x.alpha, M0, P0, x.log_alpha,
                                       interp, chunk_size, cfg, bcfg)
    if not output_final_state:
        return o, None
    return o, (MT, PT if x.grouped else PT[:, :, 0])


def chunk_bl_trace(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, chunk_size: int = 64, *, g=None,
                   validate: bool = True, config: dict | None = None, write_mask=None):
    """Forward only through the chunked kernels, also returning ``u [B, T, H, G, D]`` and
    ``β [B, T, H, G]`` (as :func:`.fused_recurrent.fused_recurrent_bl_trace`; the
    gain of the write at ``t`` is ``β_t k_tᵀ u_t``).  Needs a Triton mode."""
    from ._dispatch import mode_for
    from .fused_recurrent import _prepare_states

    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate, write_mask=write_mask)
    mode = mode_for(x.q.device)
    if mode == "naive":
        raise ValueError("chunk_bl_trace needs CUDA tensors or TRITON_INTERPRET=1")
    B, T, H, D, m = x.dims
    interp = mode == "interpret"
    cfg = default_chunk_config(D, m, x.G, chunk_size, 0 if interp else B * H)
    if config:
        cfg.update(config)
    a = None
    if x.alpha is not None:
        a = (torch.exp(x.alpha.float()) if x.log_alpha else x.alpha).contiguous()
    M0t, P0 = _prepare_states(x, B, H, D, m, x.G, x.q.device)
    with torch.no_grad():
        o, MT, PT, u, beta, _ = _forward(
            chunk_kernels(interp), x.q.contiguous(), x.k.contiguous(), x.v.contiguous(), x.l2.contiguous(),
            x.r2.contiguous(), a, M0t.transpose(-1, -2).float().contiguous(), P0.float().contiguous(),
            chunk_size, cfg, False)
    return o, (MT, PT if x.grouped else PT[:, :, 0]), u, beta
