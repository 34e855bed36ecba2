r"""Triton kernels of the diagonal-covariance BL's covariance pass (forward and backward).

Loaded by :mod:`assocmem.gpu.tasks.diag_fused` (compiled, or interpreted under
``TRITON_INTERPRET=1``).  One program per (batch, head) walks the sequence
with the kept diagonal ``p`` (``D`` values) in registers; per token

.. math::  \bar p = p + \ell_t^2,\quad u_t = \bar p \odot k_t,\quad
           \beta_t = 1/(r_t^2 + k_t^\top u_t),\quad p \leftarrow \bar p - \beta_t\, u_t \odot u_t .

The forward saves ``p̄_t`` (from which ``u_t`` and ``β_t`` are recomputed);
the backward walks the sequence in reverse with ``∂L/∂p`` carried in
registers:

* ``g_β = ∂L/∂β_t − Σ_d u_d² g_{p,d}``,  ``g_u = ∂L/∂u_t − 2 β_t u_t ⊙ g_p``;
* ``g_s = −β_t² g_β`` (``s = r² + kᵀu``): ``∂L/∂r_t² = g_s``, ``g_u += g_s k_t``;
* ``∂L/∂k_t = g_s u_t + g_u ⊙ p̄_t``, ``g_{p̄} = g_p + g_u ⊙ k_t``;
* ``∂L/∂ℓ_t² = Σ_d g_{p̄,d}``, and ``g_p ← g_{p̄}`` for the previous token.

The arithmetic runs in the inputs' dtype (float32 in training, float64 in
the tests).  Layouts: ``k, u, p̄, ∂k: [B, T, H, D]`` and ``ℓ², r², β: [B, T, H]``,
all contiguous; ``p: [B, H, D]``.
"""
import triton
import triton.language as tl

# tl.sum is itself a @jit library function, built compiled or interpreted when triton is first
# imported, so it cannot be called from a kernel loaded in the other mode; tl.reduce with the
# standard combiner works in both (the interpreter recognises _sum_combine), as in gpu/_kernel_common.py.


@triton.jit
def _sum(x):
    return tl.reduce(x, 0, tl.standard._sum_combine)


@triton.jit
def diag_cov_fwd_kernel(k_ptr, l2_ptr, r2_ptr, p_ptr, u_ptr, beta_ptr, pbar_ptr, T, H, D,
                        BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // H
    h = pid % H
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    p = tl.load(p_ptr + pid * D + d, mask=dm, other=0.0)
    for t in range(0, T):
        row = (b * T + t) * H + h
        kt = tl.load(k_ptr + row * D + d, mask=dm, other=0.0)
        l2 = tl.load(l2_ptr + row)
        r2 = tl.load(r2_ptr + row)
        pbar = p + l2
        u = pbar * kt
        beta = 1.0 / (r2 + _sum(u * kt))
        p = pbar - beta * u * u
        tl.store(u_ptr + row * D + d, u, mask=dm)
        tl.store(pbar_ptr + row * D + d, pbar, mask=dm)
        tl.store(beta_ptr + row, beta)
    tl.store(p_ptr + pid * D + d, p, mask=dm)


@triton.jit
def diag_cov_bwd_kernel(k_ptr, r2_ptr, pbar_ptr, gu_ptr, gbeta_ptr, gp_ptr, gk_ptr, gl2_ptr, gr2_ptr, T, H, D,
                        BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // H
    h = pid % H
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    gp = tl.load(gp_ptr + pid * D + d, mask=dm, other=0.0)      # ∂L/∂p_T on entry, ∂L/∂p_0 on exit
    for i in range(0, T):
        t = T - 1 - i
        row = (b * T + t) * H + h
        kt = tl.load(k_ptr + row * D + d, mask=dm, other=0.0)
        pbar = tl.load(pbar_ptr + row * D + d, mask=dm, other=0.0)
        r2 = tl.load(r2_ptr + row)
        gu = tl.load(gu_ptr + row * D + d, mask=dm, other=0.0)
        gb = tl.load(gbeta_ptr + row)
        u = pbar * kt
        beta = 1.0 / (r2 + _sum(u * kt))
        g_beta = gb - _sum(u * u * gp)
        g_u = gu - 2.0 * beta * u * gp
        g_s = -beta * beta * g_beta
        g_u = g_u + g_s * kt
        gk = g_s * u + g_u * pbar
        g_pbar = gp + g_u * kt
        tl.store(gk_ptr + row * D + d, gk, mask=dm)
        tl.store(gl2_ptr + row, _sum(g_pbar))
        tl.store(gr2_ptr + row, g_s)
        gp = g_pbar
    tl.store(gp_ptr + pid * D + d, gp, mask=dm)
