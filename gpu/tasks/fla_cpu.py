r"""flash-linear-attention's GatedDeltaNet and Mamba2 layers on a CPU: torch stand-ins for its Triton pieces.

The MQAR baselines (:mod:`.mqar_models`) are fla's own layers,
``fla.layers.GatedDeltaNet`` and ``fla.layers.Mamba2`` (fla 0.6.0).  On a GPU
they run as they are.  On a CPU every Triton kernel they launch fails (fla's
kernels do not run under Triton's interpreter either: the autotuner needs a
driver, and with a single config the chunked delta-rule kernel still fails in
``chunk_delta_h``), so :func:`torch_ops` runs the *same* layer forward with
each Triton piece replaced by torch code, fla's own reference code wherever
fla ships one:

==============================  ==============================================
Triton piece (fla 0.6.0)        CPU stand-in
==============================  ==============================================
``chunk_gated_delta_rule``,     :func:`gated_delta_rule`: the in-kernel
``fused_recurrent_gated_        options (q/k L2 norm, ``sigmoid`` β, the gate
delta_rule``                    ``-exp(A_log) softplus(a + dt_bias)`` =
                                fla's ``naive_gdn_gate``), then fla's
                                ``naive_recurrent_gated_delta_rule``
``causal_conv1d`` (GDN's short  :func:`causal_conv1d`: depthwise
convolutions)                   ``F.conv1d`` with ``W - 1`` left padding,
                                then SiLU
``FusedRMSNormGated`` (GDN's    fla's ``rms_norm_ref`` (norm, weight, then
output norm and gate)           ``x · silu(g)``)
``RMSNormGated`` (Mamba2)       fla's ``rms_norm_ref`` (gate, then group norm)
Mamba2's ``act`` (Triton SiLU)  ``F.silu``
==============================  ==============================================

Everything else (projections, reshapes, Mamba2's ``torch_forward`` with its
naive chunked SSD scan, which fla itself takes whenever ``mamba_ssm`` is
missing) is the layer's own code.  fla's naive ops compute in float32 whatever
the input dtype, so a CPU forward is float32-accurate, not float64.  The
patches last only for the ``with`` block (a process-wide lock serialises
them); every patched attribute must exist, so an fla version that renamed one
fails loudly here rather than silently running Triton.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Optional

import torch
import torch.nn.functional as F

FLA_VERSION = "0.6.0"
_LOCK = threading.RLock()


def fla_version() -> Optional[str]:
    """The installed fla version, or None when ``fla.layers`` cannot be imported (fla or transformers missing)."""
    try:
        import fla
        import fla.layers  # noqa: F401  (needs transformers)
    except ImportError:
        return None
    return getattr(fla, "__version__", "unknown")


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """fla's ``l2norm_fwd``: ``x / sqrt(Σ x² + eps)`` per row (computed in at least float32)."""
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    return (xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + eps)).to(x.dtype)


def gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, *,
                     use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None, dt_bias=None,
                     use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
                     cu_seqlens=None, recurrence: str = "recurrent", **kwargs):
    """Stand-in for fla's ``chunk_gated_delta_rule`` / ``fused_recurrent_gated_delta_rule`` (same signature).

    Applies what the fused kernels do before the recurrence, then runs fla's
    ``naive_recurrent_gated_delta_rule`` token by token.  Variable lengths,
    context parallelism and grouped value heads are not supported (MQAR does
    not use them).
    """
    from fla.ops.gated_delta_rule.gate import naive_gdn_gate
    from fla.ops.gated_delta_rule.naive import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule

    if recurrence not in ("recurrent", "chunk"):
        raise ValueError(f"recurrence must be 'recurrent' or 'chunk' (got {recurrence!r})")

    if cu_seqlens is not None or kwargs.get("cp_context") is not None:
        raise NotImplementedError("the CPU gated delta rule has no variable-length or context-parallel mode")
    if q.shape[2] != v.shape[2]:
        raise NotImplementedError("the CPU gated delta rule needs as many value heads as key heads")
    if use_qk_l2norm_in_kernel:
        q, k = _l2norm(q), _l2norm(k)
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(beta.float()) * (2.0 if allow_neg_eigval else 1.0)
    elif allow_neg_eigval:
        raise ValueError("allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True (as in fla)")
    if use_gate_in_kernel:
        if A_log is None:
            raise ValueError("A_log must be provided when use_gate_in_kernel=True (as in fla)")
        g = naive_gdn_gate(g, A_log, dt_bias)
    h0 = initial_state
    if h0 is not None and state_v_first:
        h0 = h0.transpose(-1, -2)
    if recurrence == "chunk":        # fla's chunked (WY) torch reference: the GPU fallback (gdn_backend)
        o, ht = naive_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64, scale=scale, initial_state=h0,
                                             output_final_state=output_final_state)
        o = o[:, : q.shape[1]]
    else:
        o, ht = naive_recurrent_gated_delta_rule(q, k, v, beta, g, scale=scale, initial_state=h0,
                                                 output_final_state=output_final_state)
    if ht is not None and state_v_first:
        ht = ht.transpose(-1, -2)
    return o.to(v.dtype), ht


def causal_conv1d(x, weight=None, bias=None, residual=None, initial_state=None, output_final_state=False,
                  activation=None, backend=None, cu_seqlens=None, **kwargs):
    """Stand-in for fla's ``causal_conv1d`` (``x [B, T, D]``, ``weight [D, W]``):
    ``y_t = Σ_j w[:, j] x_{t-W+1+j} (+ bias)``, then SiLU, then ``+ residual``."""
    if initial_state is not None or output_final_state or cu_seqlens is not None \
            or kwargs.get("cp_context") is not None:
        raise NotImplementedError("the CPU causal convolution has no cache, variable-length or context-parallel mode")
    B, T, D = x.shape
    W = weight.shape[-1]
    y = F.conv1d(x.transpose(1, 2), weight.reshape(D, 1, W).to(x.dtype),
                 None if bias is None else bias.to(x.dtype), padding=W - 1, groups=D)[..., :T].transpose(1, 2)
    if activation in ("silu", "swish"):
        y = F.silu(y)
    elif activation is not None:
        raise ValueError(f"unsupported activation {activation!r} (fla supports silu/swish)")
    if residual is not None:
        y = y + residual
    return y, None


def _fused_rms_norm_gated(mod):
    from fla.modules.norm.layernorm_gated import rms_norm_ref

    if mod.activation not in ("swish", "silu"):
        raise NotImplementedError(f"CPU FusedRMSNormGated supports the swish gate only (got {mod.activation!r})")

    def forward(x, g, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None or prenorm:
            raise NotImplementedError("CPU FusedRMSNormGated: no residual / prenorm")
        w = mod.weight if mod.weight is not None else torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
        return rms_norm_ref(x, w, mod.bias, z=g, eps=mod.eps, norm_before_gate=True)
    return forward


def _rms_norm_gated(mod):
    from fla.modules.norm.layernorm_gated import rms_norm_ref

    def forward(x, z=None):
        return rms_norm_ref(x, mod.weight, mod.bias, z=z, eps=mod.eps, group_size=mod.group_size,
                            norm_before_gate=mod.norm_before_gate)
    return forward


def _rms_norm(mod):
    from fla.modules.norm.layernorm import rms_norm_ref

    def forward(x, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None or prenorm:
            raise NotImplementedError("CPU RMSNorm: no residual / prenorm")
        return rms_norm_ref(x, mod.weight, mod.bias, eps=mod.eps, upcast=True)
    return forward


def _patches(layer: torch.nn.Module, recurrence: str = "recurrent") -> list:
    import functools

    import fla.layers.gated_deltanet as gdn_mod
    import fla.modules.causal_conv1d.ops as conv_mod
    from fla.layers import Mamba2
    from fla.modules import FusedRMSNormGated, RMSNorm
    from fla.modules.layernorm_gated import RMSNormGated

    rule = functools.partial(gated_delta_rule, recurrence=recurrence)
    out = [(gdn_mod, "chunk_gated_delta_rule", rule),
           (gdn_mod, "fused_recurrent_gated_delta_rule", rule),
           (gdn_mod, "causal_conv1d", causal_conv1d),
           (conv_mod, "causal_conv1d", causal_conv1d)]
    for m in layer.modules():
        if isinstance(m, FusedRMSNormGated):
            out.append((m, "forward", _fused_rms_norm_gated(m)))
        elif isinstance(m, RMSNormGated):
            out.append((m, "forward", _rms_norm_gated(m)))
        elif isinstance(m, RMSNorm):
            out.append((m, "forward", _rms_norm(m)))
        if isinstance(m, Mamba2):
            if m.activation not in ("silu", "swish"):
                raise NotImplementedError(f"CPU Mamba2 supports the silu activation only (got {m.activation!r})")
            out.append((m, "act", F.silu))
    return out


@contextlib.contextmanager
def torch_ops(layer: torch.nn.Module, recurrence: str = "recurrent"):
    """Within the block, ``layer`` (a GatedDeltaNet or Mamba2 of fla 0.6.0) runs on torch ops only.

    ``recurrence``: the gated delta rule token by token (fla's ``naive_recurrent_...``, the CPU
    default) or chunk by chunk (fla's ``naive_chunk_...``: the GPU fallback where fla's Triton
    backward is refused, :func:`gdn_backend`)."""
    with _LOCK:
        saved = []
        try:
            for obj, name, new in _patches(layer, recurrence):
                if not hasattr(obj, name):
                    raise RuntimeError(f"fla {fla_version()}: {type(obj).__name__}.{name} is missing "
                                       f"(the CPU path is written for fla {FLA_VERSION})")
                own = isinstance(obj, torch.nn.Module) and name in obj.__dict__
                saved.append((obj, name, getattr(obj, name), own))
                setattr(obj, name, new)
            yield layer
        finally:
            for obj, name, old, own in reversed(saved):
                if isinstance(obj, torch.nn.Module) and not own and name == "forward":
                    del obj.__dict__[name]           # back to the class's forward
                else:
                    setattr(obj, name, old)


def fla_refuses_gated_backward() -> bool:
    """fla 0.6.0's own condition for refusing its gated ``chunk_bwd_dqkwg`` (wrong results with Triton
    ≥ 3.4.0 and < 3.7.1 on Hopper, fla issue #640): true on the H200 with Triton 3.6."""
    try:
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except ImportError:
        return False
    return bool(IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1)


def gdn_backend(requested: str = "auto", device=None) -> str:
    """The GDN core on a GPU: ``"triton"`` (fla's kernels), ``"torch"`` (fla's chunked torch
    reference under autograd, with the torch stand-ins of :func:`torch_ops`) or ``"hybrid"`` (fla's
    kernels with the refused one replaced, :mod:`.fla_hybrid`).

    ``"auto"`` takes Triton unless fla refuses its backward here (:func:`fla_refuses_gated_backward`);
    where it refuses, ``auto`` takes the hybrid once :func:`.fla_hybrid.self_check` has passed on
    ``device`` (one check per process and GPU, against a float64 token-by-token recursion), and
    fla's torch reference if that check fails (or without a ``device`` to check on).  An explicit
    ``"triton"`` there is refused with the reason rather than failing mid-run."""
    if requested not in ("auto", "triton", "torch", "hybrid"):
        raise ValueError(f"gdn_backend must be auto, triton, torch or hybrid (got {requested!r})")
    if requested == "torch":
        return "torch"
    if requested == "hybrid":                     # fla's kernels, the refused one by torch ops where refused
        return "hybrid" if fla_refuses_gated_backward() else "triton"
    if fla_refuses_gated_backward():
        if requested == "triton":
            raise ValueError("protocol gdn_backend: fla refuses its gated backward on Hopper with Triton >= 3.4 "
                             "and < 3.7.1 (wrong results, fla #640); use auto or torch, or Triton >= 3.7.1")
        if device is not None and torch.device(device).type == "cuda":
            from .fla_hybrid import self_check
            return "hybrid" if self_check(device)["passed"] else "torch"
        return "torch"
    return "triton"
