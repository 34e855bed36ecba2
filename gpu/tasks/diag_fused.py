r"""The diagonal-covariance BL's covariance pass as two Triton kernels (one launch each way).

:func:`assocmem.gpu.tasks.recurrences.diag_covariance_pass` is the readable
torch form: one token at a time, about a dozen small operations per token and
layer, each a kernel launch on the GPU plus its autograd node.  At the
learned tasks' sizes that made a diagonal-covariance run several times slower
than every other mixer (launch-bound: ~11k operations per training step at
``T = 56`` against ~2.5k for Delta), and it did not finish inside the first
device session's budget.  :func:`diag_covariance_pass_fused` computes the same
recursion in one forward and one backward kernel (``_diag_kernels.py``; the
backward is derived there) and is checked against the torch form, values and
gradients, in ``tests/gpu/test_tasks_models.py``.

Dispatch (:func:`use_fused`), as for the BL op: CUDA tensors run the compiled
kernels; CPU tensors run the interpreted kernels when ``TRITON_INTERPRET=1``;
otherwise the torch form runs.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .._dispatch import kernels as _load, mode_for

_KERNEL_FILE = Path(__file__).with_name("_diag_kernels.py")


def _kernels(interpret: bool):
    """The kernel module, compiled or interpreted (:func:`assocmem.gpu._dispatch.kernels`)."""
    return _load(interpret, _KERNEL_FILE)


def use_fused(device) -> bool:
    """True when the kernels run for tensors on ``device`` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    return mode_for(device) != "naive"


class _DiagCovPass(torch.autograd.Function):
    @staticmethod
    def forward(ctx, k, l2, r2, P0):
        B, T, H, D = k.shape
        k, l2, r2 = k.contiguous(), l2.contiguous(), r2.contiguous()
        p = P0.to(k.dtype).contiguous().clone()
        u = torch.empty_like(k)
        pbar = torch.empty_like(k)
        beta = torch.empty(B, T, H, dtype=k.dtype, device=k.device)
        kern = _kernels(k.device.type != "cuda")
        BD = max(16, 1 << (D - 1).bit_length())
        if T > 0:
            kern.diag_cov_fwd_kernel[(B * H,)](k, l2, r2, p, u, beta, pbar, T, H, D, BLOCK_D=BD)
        ctx.save_for_backward(k, r2, pbar)
        ctx.BD = BD
        return u, beta, p

    @staticmethod
    def backward(ctx, gu, gbeta, gp):
        k, r2, pbar = ctx.saved_tensors
        B, T, H, D = k.shape
        gu = torch.zeros_like(k) if gu is None else gu.to(k.dtype).contiguous()
        gbeta = torch.zeros_like(r2) if gbeta is None else gbeta.to(k.dtype).contiguous()
        gp = (torch.zeros(B, H, D, dtype=k.dtype, device=k.device) if gp is None
              else gp.to(k.dtype).contiguous().clone())
        gk = torch.empty_like(k)
        gl2 = torch.empty_like(r2)
        gr2 = torch.empty_like(r2)
        kern = _kernels(k.device.type != "cuda")
        if T > 0:
            kern.diag_cov_bwd_kernel[(B * H,)](k, r2, pbar, gu, gbeta, gp, gk, gl2, gr2, T, H, D, BLOCK_D=ctx.BD)
        return gk, gl2, gr2, gp


def diag_covariance_pass_fused(k, l2, r2, p0: float = 1.0, P0=None):
    """Same contract as :func:`..recurrences.diag_covariance_pass`: ``(u, β, p_T)``, differentiable in
    ``k``, ``ℓ²``, ``r²`` (and ``P0`` when given)."""
    if k.ndim != 4 or l2.shape != k.shape[:3] or r2.shape != k.shape[:3]:
        raise ValueError(f"k must be [B, T, H, D] and l2, r2 [B, T, H] (got k {tuple(k.shape)}, "
                         f"l2 {tuple(l2.shape)}, r2 {tuple(r2.shape)})")
    B, T, H, D = k.shape
    if P0 is None:
        P0 = k.new_full((B, H, D), float(p0))
    return _DiagCovPass.apply(k, l2.to(k.dtype), r2.to(k.dtype), P0)
