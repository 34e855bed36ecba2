r"""Triton helpers shared by every BL kernel file (token-by-token :mod:`._fused_recurrent_kernels`,
chunked :mod:`._chunk_kernels` and :mod:`._chunk_bwd_kernels`): reduction / scan combiners, the
``(γ, c)`` scan, and the kernels' prologue pieces (program-id decomposition, tile ranges, token rows).

Loaded like the kernel files, compiled or interpreted (:func:`._dispatch.kernels`); each kernel
file loads this one in its own mode when it is loaded (a compiled kernel can only call compiled
helpers, an interpreted one interpreted helpers).
"""
import os

import triton
import triton.language as tl


# Under the interpreter, sums and cumulative products use tl.standard's
# combiners, which it recognises and runs with numpy (element-by-element
# otherwise: 30x slower); compiled, our own jitted combiners (tl.standard's are
# built in whatever mode triton was first imported in, and a compiled kernel
# cannot call an interpreted function).
if os.environ.get("TRITON_INTERPRET", "0") == "1":
    _sum = tl.standard._sum_combine
    _mul = tl.standard._prod_combine
    _max = tl.standard._elementwise_max
else:
    @triton.jit
    def _sum(a, b):
        return a + b

    @triton.jit
    def _mul(a, b):
        return a * b

    @triton.jit
    def _max(a, b):
        return tl.maximum(a, b)


@triton.jit
def _decay_noise(g1, c1, g2, c2):
    # composition of x -> g1 x (products) and c -> g1² c + c1: (γ, c) scan,
    # c_τ = α_τ² c_{τ-1} + ℓ_τ², γ_τ = α_τ γ_{τ-1}
    return g1 * g2, c1 * (g2 * g2) + c2


@triton.jit
def _head_group(pid, T, H: tl.constexpr, G: tl.constexpr):
    """``pid = (b·H + h)·G + g`` → ``(g, b·H + h, tok)`` with ``tok = b·T·H + h`` (the token offset
    of ``(b, t = 0, h)`` in ``[B, T, H, …]``)."""
    i_g = pid % G
    i_bh = pid // G
    i_b = i_bh // H
    i_h = i_bh % H
    return i_g, i_bh, i_b * T * H + i_h


@triton.jit
def _value_block(pid, T, H: tl.constexpr, G: tl.constexpr, MG: tl.constexpr, BV: tl.constexpr,
                 NVG: tl.constexpr):
    """``pid = ((b·H + h)·G + g)·NVG + v`` → ``(b·H·G + h·G + g, g, b·H + h, tok)`` and the value
    block's columns ``cv = g·MG + v·BV + [0, BV)`` (``[1, BV]``) with their mask."""
    i_v = pid % NVG
    i_bhg = pid // NVG
    i_g, i_bh, tok = _head_group(i_bhg, T, H, G)
    jv = i_v * BV + tl.arange(0, BV)[None, :]
    return i_bhg, i_g, i_bh, tok, i_g * MG + jv, jv < MG


@triton.jit
def _value_block_t(pid, T, H: tl.constexpr, G: tl.constexpr, MG: tl.constexpr, BV: tl.constexpr,
                   NVG: tl.constexpr):
    """:func:`_value_block` for a state block held transposed (values along the rows, as the
    token-by-token kernels hold ``Mᵀ``): ``(g, b·H + h, tok)``, the columns ``cv [BV, 1]`` and
    their mask."""
    i_v = pid % NVG
    i_g, i_bh, tok = _head_group(pid // NVG, T, H, G)
    jv = i_v * BV + tl.arange(0, BV)[:, None]
    return i_g, i_bh, tok, i_g * MG + jv, jv < MG


@triton.jit
def _dims(D: tl.constexpr, BD: tl.constexpr):
    """Key-dimension rows / columns ``rr [BD, 1]``, ``rc [1, BD]`` with their masks."""
    rd = tl.arange(0, BD)
    rr = rd[:, None]
    rc = rd[None, :]
    return rr, rc, rr < D, rc < D


@triton.jit
def _tiles(D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr):
    """:func:`_dims` and the chunk rows / columns ``ri [C, 1]``, ``ci [1, C]``."""
    rr, rc, mr, mc = _dims(D, BD)
    return rr, rc, mr, mc, tl.arange(0, C)[:, None], tl.arange(0, C)[None, :]


@triton.jit
def _rows(ri, n, tok, T, H: tl.constexpr, C: tl.constexpr):
    """Chunk ``n``'s rows: valid mask ``t < T`` and token index ``tok + t·H`` (``[C, 1]``)."""
    tr = n * C + ri
    return tr < T, tok + tr * H


@triton.jit
def _last_row(x, ri, C: tl.constexpr):
    """Row ``C − 1`` of ``x [C, BD]`` as ``[1, BD]``."""
    return tl.reduce(tl.where(ri == C - 1, x, 0.), 0, _sum, keep_dims=True)


@triton.jit
def _by_state(X, S, PREC: tl.constexpr, STATE_LEFT: tl.constexpr):
    """``X S`` for a ``C×D`` ``X`` and a symmetric ``D×D`` ``S`` (a covariance state or its adjoint):
    directly, or as ``(S Xᵀ)ᵀ`` (``STATE_LEFT``, ``ChunkConfig.state_dot="left"``: the state as the left
    operand; compiled for the H200 the direct fp32 product spills, ``benchmarks/kernel_resources.py``)."""
    if STATE_LEFT:
        return tl.trans(tl.dot(S, tl.trans(X), input_precision=PREC))
    return tl.dot(X, S, input_precision=PREC)
