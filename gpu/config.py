"""The launch configurations of the two kernel ops, frozen dataclasses checked on construction.

:class:`FusedConfig` (:func:`.fused_recurrent.fused_recurrent_bl`) and :class:`ChunkConfig`
(:func:`.chunk.chunk_bl`) hold the launch parameters that matter; a field left ``None`` is
chosen by shape (:func:`.fused_recurrent.default_config`, :func:`.chunk.default_chunk_config`).
A bad field raises ``ValueError`` naming it (``config.BV must be …``).  This module does not
import torch, so the command line can parse a configuration before torch loads.
"""
from __future__ import annotations

from dataclasses import dataclass

WARPS = (1, 2, 4, 8, 16)
BWD_REDUCES = ("atomic", "partials")
COV_KERNELS = ("auto", "matmul", "rows", "device")
STATE_DOTS = ("right", "left")
PRECISIONS = ("ieee", "tf32x3")
BACKWARDS = ("auto", "recurrent", "chunked")


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"config.{name} must be one of {', '.join(map(repr, choices))} (got {value!r})")


def check_pow2(name: str, value, lo: int = 1, hi: int = 1024) -> None:
    """``None`` (chosen by shape) or a power of two in ``[lo, hi]``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or value > hi or value & (value - 1):
        raise ValueError(f"config.{name} must be a power of two in [{lo}, {hi}] or None (got {value!r})")


def check_warps(name: str, value) -> None:
    if value is None:
        return
    if isinstance(value, bool) or value not in WARPS:
        raise ValueError(f"config.{name} must be one of {', '.join(map(str, WARPS))} warps or None (got {value!r})")


@dataclass(frozen=True)
class FusedConfig:
    """Launch parameters of :func:`.fused_recurrent.fused_recurrent_bl` (``None``: chosen by shape,
    :func:`.fused_recurrent.default_config`).

    ``BV``: value columns per mean-pass program (a power of two; with noise groups it must
    divide ``m/G``, so that a program serves one group); ``cov_warps`` / ``mean_warps``: warps
    of the covariance and mean passes; ``bwd_reduce``: how the mean-pass value blocks combine
    their parts of ``dw, dq, dk`` in the backward, ``"atomic"`` (one buffer, atomic adds; the
    summation order varies, so gradients are reproducible to fp32 rounding only) or
    ``"partials"`` (one buffer per block, summed afterwards: deterministic, ``m/BV`` times the
    memory).
    """

    BV: int | None = None
    cov_warps: int | None = None
    mean_warps: int | None = None
    bwd_reduce: str = "atomic"

    def __post_init__(self):
        check_pow2("BV", self.BV)
        check_warps("cov_warps", self.cov_warps)
        check_warps("mean_warps", self.mean_warps)
        check_choice("bwd_reduce", self.bwd_reduce, BWD_REDUCES)


@dataclass(frozen=True)
class ChunkConfig:
    """Launch parameters of :func:`.chunk.chunk_bl` (``None``: chosen by shape,
    :func:`.chunk.default_chunk_config`).

    Forward: ``cov_kernel`` ``"auto"`` (the quotient kernel where :func:`.chunk._decays_safe` allows
    it, ``D ≤ 64`` and ``chunk_size ≤ 32``, else the row kernel), ``"matmul"`` (the quotient
    kernel), ``"rows"`` (products only) or ``"device"`` (``"auto"``'s choice made on the device:
    where it depends on the decays both kernels are launched and the one the guard pass rules out
    returns at once: no host read, so the forward can be captured in a CUDA graph, for one more
    launch a segment: at S1 the forward took 2.063 ms against ``"auto"``'s 2.190 and ``"matmul"``'s
    2.006, ``h200_cov_device_S1.json``; the default if S3 confirms it; :func:`.chunk._cov_launches`);
    ``cov_warps`` (None: by kernel and chunk size,
    :func:`.chunk._cov_kernel`); ``BV`` value columns per mean-pass program and ``mean_warps``;
    ``mean_precision`` of the value-side products, ``"ieee"`` (full fp32) or ``"tf32x3"``
    (three TF32 tensor-core products with the rounding residues: fp32's accuracy without fp32
    ``D = 128`` tiles' register spills).  The covariance side is always full fp32 (TF32 there
    loses three digits in the factorisation's pivots).  ``state_dot``: where the symmetric ``D×D``
    state (``P₀``, and in the chunked backward ``dP`` and ``H``) goes in the ``C×D`` by ``D×D``
    products of the quotient covariance kernel and the backward's covariance kernels: ``"right"``
    (``X S``) or ``"left"`` (``(S Xᵀ)ᵀ``, the same for symmetric ``S``).  Compiled offline for the
    H200, ``"right"`` spills (2.6 KB a thread in the forward at 4 warps, 12.4 KB in the backward's
    covariance outputs) and ``"left"`` far less (``benchmarks/cpu_kernel_resources.json``).
    ``bwd_state_dot``: the same choice for the backward's kernels alone (None: as ``state_dot``).
    Timed on the H200 with one setting for both, ``"left"`` made the forward 4–6 % faster and
    forward+backward 8–13 % slower (``h200_state_dot.json``), so the two are separate settings, and
    the default is the split, ``"left"`` forward and ``"right"`` backward: side by side with right in
    both, forward 0.98 / 1.00 / 0.96 and forward+backward 1.00 / 1.00 / 0.98 of its time at S1 / S2 /
    S3 (``h200_state_dot_split.json``), with fp32 errors in the collapsing regime 0.76–1.01× right's
    (``h200_scan_precision_split.json``).
    ``segments``: ``"auto"`` or a number of
    chunk ranges launched one after the other so that the mean pass of one overlaps the
    covariance pass of the next (:func:`.chunk._segments`).

    Backward: ``bwd_BV``, ``bwd_warps``, ``bwd_precision`` of the chunked backward kernels;
    ``bwd_segment_chunks``: None (default: one pass over all chunks) or an integer ``L ≥ 1``, the
    chunked backward then runs in segments of ``L`` chunks from the last segment to the first,
    recomputing each segment's chunk-start states from stored segment-start states, so that its
    four per-chunk state buffers (two ``[B, H, G, L, D, D]``, two ``[B, H, L, D, m]``, fp32) hold
    ``L`` chunks instead of all of them (the same gradients, for one more pass of the state scans;
    :func:`.chunk._chunk_backward`); ``bwd_start_every``: with ``S`` segments, keep the start states of
    every ``K``-th segment only and refill the ``K − 1`` between them from the kept one when the reverse
    pass reaches their group (one more pass of the state scans again): ``⌊(S−1)/K⌋ + K − 1`` start
    states held instead of ``S − 1``; None (default) takes the integer nearest √S, 1 keeps every one;
    ``bwd_reduce`` of the token-by-token backward when that one runs (see :class:`FusedConfig`).
    """

    cov_kernel: str = "auto"
    cov_warps: int | None = None
    state_dot: str = "left"
    bwd_state_dot: str | None = "right"
    BV: int | None = None
    mean_warps: int | None = None
    mean_precision: str | None = None
    segments: int | str = "auto"
    bwd_BV: int | None = None
    bwd_warps: int | None = None
    bwd_precision: str | None = None
    bwd_reduce: str = "atomic"
    bwd_segment_chunks: int | None = None
    bwd_start_every: int | None = None

    def __post_init__(self):
        check_choice("cov_kernel", self.cov_kernel, COV_KERNELS)
        check_warps("cov_warps", self.cov_warps)
        check_choice("state_dot", self.state_dot, STATE_DOTS)
        if self.bwd_state_dot is not None:
            check_choice("bwd_state_dot", self.bwd_state_dot, STATE_DOTS)
        check_pow2("BV", self.BV, 16)               # tl.dot needs tiles of at least 16
        check_warps("mean_warps", self.mean_warps)
        if self.mean_precision is not None:
            check_choice("mean_precision", self.mean_precision, PRECISIONS)
        S = self.segments
        if S != "auto" and (isinstance(S, bool) or not isinstance(S, int) or S < 1):
            raise ValueError(f"config.segments must be 'auto' or an integer >= 1 (got {S!r})")
        check_pow2("bwd_BV", self.bwd_BV, 16)
        check_warps("bwd_warps", self.bwd_warps)
        if self.bwd_precision is not None:
            check_choice("bwd_precision", self.bwd_precision, PRECISIONS)
        check_choice("bwd_reduce", self.bwd_reduce, BWD_REDUCES)
        L = self.bwd_segment_chunks
        if L is not None and (isinstance(L, bool) or not isinstance(L, int) or L < 1):
            raise ValueError(f"config.bwd_segment_chunks must be None or an integer >= 1 (got {L!r})")
        K = self.bwd_start_every
        if K is not None and (isinstance(K, bool) or not isinstance(K, int) or K < 1):
            raise ValueError(f"config.bwd_start_every must be None or an integer >= 1 (got {K!r})")
