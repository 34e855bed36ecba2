r"""``fused_recurrent_bl``: the token-by-token BL filter as a differentiable torch op.

Forward (BL Prop. 1, Eqs. 9-13, p.4; grouped noise App. D): see
:mod:`assocmem.gpu.naive` for the recurrence.  The Triton kernels are in
:mod:`assocmem.gpu._fused_recurrent_kernels`; this module allocates, launches and assembles.

Backward: reverse-time adjoints.  Write ``w_t = β_t u_t``, ``e_t`` the
innovation, ``Ā_t = diag(α_t)``; ``G_t = ∂L/∂M_t`` and ``H_t`` the symmetric
part of ``∂L/∂P_t`` (all uses of ``H`` go through its symmetric part because
``P`` is symmetric).  Per step, going backwards:

* mean: ``G_t += q_t do_tᵀ``; ``de_t = G_tᵀ w_t`` (``= dv_t``);
  ``dw_t = G_t e_t``; ``G_{t-1} = Ā_t (G_t − k_t de_tᵀ)``;
* covariance: ``c = H_t u_t``; ``dβ_t = u_t·dw_t − u_tᵀ c``;
  ``ds_t = dr²_t = −β_t² dβ_t``; ``du_t = −2β_t c + ds_t k_t + β_t dw_t``;
  ``dℓ²_t = tr H_t + du_t·k_t``; ``H_{t-1} = Ā_t sym(H_t + du_t k_tᵀ) Ā_t``;
* ``dk_t = −Ā_t M_{t-1} de_t + ds_t u_t + P̄_t du_t`` and ``dq_t = M_t do_t``:
  these need the states, which two forward passes recompute from the initial
  state (the checkpoint) while reading the per-token vectors above.

Decay gradient without per-token states: for ``g = log α`` the scaling
identities ``Σ_j ∂L/∂M̄_ij M̄_ij = (rowsum(G ⊙ M))`` telescoped over time give

``∂L/∂g_t = Σ_{s≥t} [q_s⊙dq_s − Σ_groups w_s⊙dw_s + k_s⊙dk^{mean}_s
+ Σ_groups (z_s + k_s⊙x_s)] + rowsum(dM_T ⊙ M_T) + Σ_groups 2 rowsum(sym(dP_T) ⊙ P_T)``

with ``x_s = P̄_s du_s``, ``z_s = 2β u⊙c + du⊙u − 2ℓ²(diag H + du⊙k)``;
``∂L/∂α = (∂L/∂g)/α``, so gradients with respect to ``α``
need ``α ≠ 0`` (pass ``g=`` to train strong forgetting).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ._dispatch import kernels
from ._launch import _empty, _pow2, decays, enter, final_state, initial_states
from .config import FusedConfig
from .naive import naive_bl

def default_config(D: int, m: int, G: int, BH: int = 0) -> FusedConfig:
    """The launch parameters by shape (``BH``: batch × heads; 0 for the interpreter, which runs
    programs one after another and so wants few, large ones).

    * mean pass: one warp per block of ``BV`` value columns, as fla's fused recurrent kernels:
      with ``D`` on the 32 lanes every reduction and every per-token vector stays inside the
      warp.  The pass is latency-bound, so ``BV`` is the largest of 16, 8, 4 that still gives
      about 2048 programs (warps) to hide latency; with groups it divides ``m/G``.
    * covariance pass: the whole ``D×D`` matrix in one program; 8 warps for ``32 < D ≤ 128``,
      one for ``D ≤ 32``.

    These are the best settings of the H200 launch sweep.
    """
    BD = _pow2(D)
    mg = m // G
    low = mg & (-mg)                       # largest power of two dividing m/G
    BV = min(16, _pow2(m)) if G == 1 else min(16, low)
    while BV > 4 and BH and BH * -(-m // BV) < 2048:
        BV //= 2
    return FusedConfig(BV=BV, cov_warps=1 if BD <= 32 else 8 if BD <= 128 else 16,
                       mean_warps=1 if BV * BD <= 4096 else 2)


def resolve_config(config, D, m, G, BH, interpret) -> FusedConfig:
    """``config`` (a :class:`FusedConfig` or None) with its unset fields taken from :func:`default_config`."""
    if config is None:
        config = FusedConfig()
    elif not isinstance(config, FusedConfig):
        raise ValueError(f"config must be a FusedConfig or None (got {type(config).__name__})")
    base = default_config(D, m, G, 0 if interpret else BH)
    cfg = replace(config, **{f: getattr(base, f) for f in ("BV", "cov_warps", "mean_warps")
                             if getattr(config, f) is None})
    if G > 1 and (m // G) % cfg.BV:
        raise ValueError(f"config.BV={cfg.BV} must divide the group width m/G={m // G}")
    return cfg


def _forward(K, q, k, v, l2, r2, a, M0t, P0, cfg, need_e):
    """Launch the two forward passes.  ``M0t [B, H, m, D]`` is the initial mean,
    transposed; ``P0 [B, H, G, D, D]``; both always given (the loads fix the
    kernels' register layouts)."""
    B, T, H, D = q.shape
    m = v.shape[-1]
    G = r2.shape[-1]
    dev = q.device
    f32 = torch.float32
    dummy = torch.zeros(1, dtype=f32, device=dev)
    u = _empty((B, T, H, G, D), f32, dev)
    beta = _empty((B, T, H, G), f32, dev)
    PT = _empty((B, H, G, D, D), f32, dev)
    BD, BV = _pow2(D), cfg.BV
    NV = -(-m // BV)
    K.cov_fwd_kernel[(B * H * G,)](
        k, a if a is not None else dummy, l2, r2, P0, u, beta, PT, T,
        H=H, G=G, D=D, BD=BD, HAS_ALPHA=a is not None, num_warps=cfg.cov_warps)
    o = _empty((B, T, H, m), v.dtype, dev)
    e = _empty((B, T, H, m), f32, dev) if need_e else dummy
    MTt = _empty((B, H, m, D), f32, dev)
    K.mean_fwd_kernel[(B * H * NV,)](
        q, k, v, a if a is not None else dummy, u, beta, M0t, o, e, MTt, T,
        H=H, G=G, D=D, M=m, MG=m // G, BD=BD, BV=BV, NV=NV,
        HAS_ALPHA=a is not None, STORE_E=need_e, num_warps=cfg.mean_warps)
    return o, MTt, PT, u, beta, e


def _backward(K, q, k, a, l2, M0t, P0, u, beta, e, MTt, PT, do, dMTt, dPT, cfg, need_dg):
    """The four backward passes and the assembly of the gradients (``dM0`` is
    returned transposed, ``[B, H, m, D]``, like ``M0t``/``MTt``/``dMTt``)."""
    B, T, H, D = q.shape
    m = do.shape[-1]
    G = u.shape[3]
    mg = m // G
    dev = q.device
    f32 = torch.float32
    dummy = torch.zeros(1, dtype=f32, device=dev)
    BD, BV = _pow2(D), cfg.BV
    NV = -(-m // BV)
    NTOK = B * T * H
    do = do.contiguous()
    has_a = a is not None

    de = _empty((B, T, H, m), f32, dev)
    dM0t = _empty((B, H, m, D), f32, dev)
    # value blocks add their parts of dw, dq, dk atomically into one buffer each (``bwd_reduce =
    # "atomic"``, the default) or write per-block partials [NV, B, T, H, D] summed here
    # (``"partials"``: deterministic, NV times the memory)
    atomic = NV > 1 and cfg.bwd_reduce == "atomic"
    if atomic:
        dw = torch.zeros((B, T, H, G, D), dtype=f32, device=dev)
    elif NV == 1:                                  # one block (so G = 1): a plain store
        dw = _empty((B, T, H, G, D), f32, dev)
    else:
        dw = _empty((NV, B, T, H, D), f32, dev)
    K.mean_bwd_rev_kernel[(B * H * NV,)](
        q, k, a if has_a else dummy, u, beta, e, do, dMTt,
        de, dw, dM0t, T, NTOK,
        H=H, G=G, D=D, M=m, MG=mg, BD=BD, BV=BV, NV=NV,
        HAS_ALPHA=has_a, ATOMIC=atomic, num_warps=cfg.mean_warps)
    if not (NV == 1 or atomic):
        if G == 1:
            dw = dw.sum(0)[:, :, :, None, :]
        else:
            # blocks of one group are consecutive (BV divides m/G)
            dw = dw.view(G, NV // G, B, T, H, D).sum(1).permute(1, 2, 3, 0, 4)
        dw = dw.contiguous()

    du = _empty((B, T, H, G, D), f32, dev)
    z = _empty((B, T, H, G, D), f32, dev)
    dPd = _empty((B, T, H, G, D), f32, dev)       # diag(dP̄_t): dℓ²_t = Σ_g tr dP̄_t
    ds = _empty((B, T, H, G), f32, dev)
    dP0 = _empty((B, H, G, D, D), f32, dev)
    K.cov_bwd_rev_kernel[(B * H * G,)](
        k, a if has_a else dummy, l2, u, beta, dw, dPT, du, z, dPd, ds, dP0, T,
        H=H, G=G, D=D, BD=BD, HAS_ALPHA=has_a, num_warps=cfg.cov_warps)
    # every [B, T, H, G, D] buffer is freed once its last reader has been queued (the caching allocator
    # reuses it in stream order): dPd now, du after the next pass, z unless the decay gradient needs it
    dl2 = dPd.sum((-1, -2))
    del dPd
    if need_dg:
        # the decay gradient's −β u ⊙ dw terms, added into z now (β folded into dw in place), so that dw,
        # read by no later pass, is freed before the next two allocate
        for gi in range(G):
            z[:, :, :, gi].addcmul_(u[:, :, :, gi], dw[:, :, :, gi].mul_(beta[:, :, :, gi, None]), value=-1.0)
    else:
        del z
    del dw

    x = _empty((B, T, H, G, D), f32, dev)
    K.cov_bwd_fwd_kernel[(B * H * G,)](
        a if has_a else dummy, l2, P0, u, beta, du, x, T,
        H=H, G=G, D=D, BD=BD, HAS_ALPHA=has_a, num_warps=cfg.cov_warps)
    del du
    if atomic:
        dq = torch.zeros((B, T, H, D), dtype=f32, device=dev)
        dk_mean = torch.zeros((B, T, H, D), dtype=f32, device=dev)
    elif NV == 1:
        dq = _empty((B, T, H, D), f32, dev)
        dk_mean = _empty((B, T, H, D), f32, dev)
    else:
        dq = _empty((NV, B, T, H, D), f32, dev)
        dk_mean = _empty((NV, B, T, H, D), f32, dev)
    K.mean_bwd_fwd_kernel[(B * H * NV,)](
        a if has_a else dummy, u, beta, e, de, do, M0t, dq, dk_mean,
        T, NTOK,
        H=H, G=G, D=D, M=m, MG=mg, BD=BD, BV=BV, NV=NV,
        HAS_ALPHA=has_a, ATOMIC=atomic, num_warps=cfg.mean_warps)

    if not (NV == 1 or atomic):
        dq, dk_mean = dq.sum(0), dk_mean.sum(0)
    # the assembly in place, with no [B, T, H, D] temporary: dk = dk_mean + Σ_g (x + ds u), and
    # dg = revcumsum_t(Σ_g (z − β u ⊙ dw) + q ⊙ dq + k ⊙ dk_mean + Σ_g k ⊙ x) + the final-state terms,
    # its per-token sum built in z's own buffer (z already holds z − β u ⊙ dw, above).  With dw freed
    # early, this holds at most eight [B, T, H, D] buffers, as the passes above do (it held eleven:
    # docs/gpu.md, "Memory")
    kf = k.to(f32)
    dg = None
    if need_dg:
        term = z[:, :, :, 0]
        for gi in range(1, G):
            term.add_(z[:, :, :, gi])
        del z
        term.addcmul_(q.to(f32), dq).addcmul_(kf, dk_mean)
        for gi in range(G):
            term.addcmul_(kf, x[:, :, :, gi])
    dk = dk_mean
    for gi in range(G):
        dk.add_(x[:, :, :, gi]).addcmul_(ds[:, :, :, gi, None], u[:, :, :, gi])
    del x
    if need_dg:
        dg = term.flip(1)
        del term
        dg = dg.cumsum_(1).flip(1)
        # final-state terms: rowsum(dM_T ⊙ M_T) + Σ_g 2 rowsum(sym(dP_T) ⊙ P_T)
        final = (dMTt * MTt).sum(2) + 2.0 * (dPT * PT).sum(-1).sum(2)
        dg.add_(final[:, None])
    return dq, dk, de, dl2, ds, dg, dM0t, dP0


class _BLFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, l2, r2, dec, M0t, P0, log_alpha, interpret, cfg):
        K = kernels(interpret)
        q, k, v, l2, r2 = (t.contiguous() for t in (q, k, v, l2, r2))
        a = decays(dec, log_alpha)
        M0c, P0c = M0t.contiguous(), P0.contiguous()
        need_grad = any(ctx.needs_input_grad[:8])
        o, MTt, PT, u, beta, e = _forward(K, q, k, v, l2, r2, a, M0c, P0c, cfg, need_grad)
        if need_grad:
            ctx.save_for_backward(q, k, l2, a, M0c, P0c, u, beta, e, MTt, PT)
            ctx.meta = (log_alpha, interpret, cfg, v.dtype, r2.dtype, None if dec is None else dec.dtype,
                        M0t.dtype, P0.dtype)
        ctx.set_materialize_grads(False)
        return o, MTt, PT

    @staticmethod
    def backward(ctx, do, dMTt, dPT):
        q, k, l2, a, M0t, P0, u, beta, e, MTt, PT = ctx.saved_tensors
        grads = bl_backward(q, k, l2, a, M0t, P0, u, beta, e, MTt, PT, do, dMTt, dPT, ctx.meta,
                            ctx.meta[2], a is not None and ctx.needs_input_grad[5])
        *rest, dM0t, dP0 = grads
        return (*rest, dM0t.to(ctx.meta[6]), dP0, None, None, None)


def bl_backward(q, k, l2, a, M0t, P0, u, beta, e, MTt, PT, do, dMTt, dPT, meta, cfg, need_dg):
    """The reverse-time Triton backward from what a BL forward saved; shared by
    the token-by-token and the chunked ops (both save the same per-token vectors).

    Mean states are transposed, ``[B, H, m, D]`` fp32 (``dMTt`` too, or None).
    Returns ``(dq, dk, dv, dl2, dr2, ddec, dM0t, dP0)`` in the inputs' dtypes,
    except ``dM0t`` (fp32, transposed: the caller converts it back).
    """
    log_alpha, interpret, _, vdt, r2dt, decdt, _, p0dt = meta
    B, T, H, D = q.shape
    m = e.shape[-1]
    G = u.shape[3]
    dev = q.device
    do = torch.zeros(B, T, H, m, dtype=torch.float32, device=dev) if do is None else do
    dMTt = (torch.zeros(B, H, m, D, dtype=torch.float32, device=dev) if dMTt is None
            else dMTt.float().contiguous())
    if dPT is None:
        dPT = torch.zeros(B, H, G, D, D, dtype=torch.float32, device=dev)
    else:
        dPT = dPT.float()
        dPT = (0.5 * (dPT + dPT.transpose(-1, -2))).contiguous()
    dq, dk, dv, dl2, dr2, dg, dM0t, dP0 = _backward(
        kernels(interpret), q, k, a, l2, M0t, P0, u, beta, e, MTt, PT, do, dMTt, dPT, cfg, need_dg)
    ddec = None
    if need_dg:
        ddec = dg if log_alpha else dg / a.float()
        ddec = ddec.to(decdt)
    return (dq.to(q.dtype), dk.to(k.dtype), dv.to(vdt), dl2.to(l2.dtype), dr2.to(r2dt), ddec, dM0t,
            dP0.to(p0dt))


def fused_recurrent_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
                       *, g=None, validate: bool = True, config: FusedConfig | None = None, write_mask=None):
    r"""The Bayesian Layer, token by token, as a differentiable op (fla conventions).

    Parameters
    ----------
    q, k : ``[B, T, H, D]`` queries and keys; v : ``[B, T, H, m]`` values.
    l2 : ``[B, T, H]`` process-noise variance ℓ² ≥ 0 (a number is broadcast).
    r2 : ``[B, T, H]`` observation-noise variance r² > 0, or ``[B, T, H, G]``
        for ``G`` noise groups (``G`` divides ``m``; BL App. D).
    alpha : ``[B, T, H, D]`` diagonal dynamics (``None``: identity);
        g : the same as a log-decay ``α = exp(g)`` (keyword; exclusive with alpha).
    p0 : prior scale (``P_0 = p0 I``, ``M_0 = 0``) when ``initial_state`` is None.
    initial_state : ``(M [B, H, D, m], P [B, H, D, D])`` (``P [B, H, G, D, D]`` with groups).
    validate : check values (finite, signs, PSD) at the cost of a device sync.
    config : launch parameters (:class:`FusedConfig`; None: :func:`default_config`).
    write_mask : bool ``[B, T, H]`` (None: every token writes).  A token with
        False is a missing observation: decay and process noise apply, the
        update does not, the read-out still happens (see :mod:`._inputs`).

    Returns ``(o [B, T, H, m], final_state or None)``; ``o_t = M_tᵀ q_t`` after
    the update at ``t``, in ``v``'s dtype; the state is float32.

    CUDA tensors run the compiled Triton kernels (``D ≤ 128``), CPU tensors with
    ``TRITON_INTERPRET=1`` the same kernels interpreted, other CPU tensors
    :func:`naive_bl`.
    """
    x, mode = enter("fused_recurrent_bl", q, k, v, l2, r2, alpha, p0, initial_state, g=g, validate=validate,
                    write_mask=write_mask)
    if mode == "naive":
        return naive_bl(q, k, v, l2, r2, alpha, p0, initial_state, output_final_state, g=g,
                        validate=False, write_mask=write_mask)
    B, T, H, D, m = x.dims
    cfg = resolve_config(config, D, m, x.G, B * H, mode == "interpret")
    M0, P0 = initial_states(x)
    o, MTt, PT = _BLFunction.apply(x.q, x.k, x.v, x.l2, x.r2, x.alpha, M0.transpose(-1, -2), P0, x.log_alpha,
                                   mode == "interpret", cfg)
    if not output_final_state:
        return o, None
    return o, final_state(x, MTt.transpose(-1, -2), PT)


def fused_recurrent_bl_trace(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, *, g=None,
                             validate: bool = True, config: FusedConfig | None = None, write_mask=None):
    """Forward only, also returning the kernel's per-token filter quantities.

    Returns ``(o, (M_T, P_T), u [B, T, H, G, D], beta [B, T, H, G])``; the
    gain of the write at ``t`` is ``β_t k_tᵀ u_t``.  Used by the claim checks
    (``bl.collision_table``'s triton layer).  Needs a Triton mode (GPU or
    ``TRITON_INTERPRET=1``).
    """
    x, mode = enter("fused_recurrent_bl_trace", q, k, v, l2, r2, alpha, p0, initial_state, g=g,
                    validate=validate, write_mask=write_mask, needs_kernels=True)
    B, T, H, D, m = x.dims
    cfg = resolve_config(config, D, m, x.G, B * H, mode == "interpret")
    M0, P0 = initial_states(x)
    with torch.no_grad():
        o, MTt, PT, u, beta, _ = _forward(
            kernels(mode == "interpret"), x.q.contiguous(), x.k.contiguous(), x.v.contiguous(),
            x.l2.contiguous(), x.r2.contiguous(), decays(x.alpha, x.log_alpha),
            M0.transpose(-1, -2).contiguous(), P0.contiguous(), cfg, False)
    return o, final_state(x, MTt.transpose(-1, -2), PT), u, beta
