r"""``chunk_bl``: the BL filter chunk by chunk (the innovations / LDLᵀ form), Triton kernels.

The forward is two passes, as the token-by-token op's: a covariance pass (one program per
(batch, head, noise group), ``P`` in registers, sequential over chunks) that writes per token
``u_t, β_t`` and per chunk the factors the values need, and a matmul-only mean pass (one program
per block of value columns).  The covariance pass has two kernels (:mod:`._chunk_kernels`): the
*quotient* kernel (decay ratios ``γ_τ/γ_i``: five matmuls a chunk and a ``C×C`` row recursion)
where the decays allow it and it is the faster one, the *products-only* row kernel (exact for
zero, negative and strong decays) elsewhere.  The forward keeps ``u_t, β_t``, the innovations
``e_t`` and ``W = diag(β) L⁻¹``, from which either the chunked backward kernels
(:mod:`._chunk_bwd_kernels`: the chunk formulas differentiated by hand, only the ``D×m`` and
``D×D`` adjoints crossing chunks) or :mod:`.fused_recurrent`'s token-by-token backward compute
exact gradients.  :func:`.naive.chunk_bl_torch` is the same algorithm in torch ops (the
reference and the CPU fallback).

Within a chunk of ``C`` tokens ``τ = 0..C-1`` that starts from the posterior
``(M_0, P_0)`` of the previous token, write ``R[τ, i] = α_{i+1} ⊙ … ⊙ α_τ``
(``τ ≥ i``, elementwise over the key dimension, exactly 1 on the diagonal —
ratios of cumulative decays *relative to the chunk*, formed as products so that
zero and negative decays are fine and nothing overflows), ``γ_τ = α_0 ⊙ R[τ, 0]``
and ``c_τ = Σ_{j≤τ} ℓ_j² R[τ, j]²``.  Given only the chunk start, the memory
column ``s_τ`` has covariance ``Π_τ = diag(γ_τ) P_0 diag(γ_τ) + diag(c_τ)`` and
``Cov(s_τ, s_i) = diag(R[τ, i]) Π_i`` for ``τ ≥ i``, so the chunk's
observations ``y_τ = k_τᵀ s_τ + ε`` have (BL App. D)

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

from dataclasses import replace
import math

import torch

from ._dispatch import kernels
from ._launch import _empty, _pow2, capturing, decays, enter, final_state, initial_states
from .config import BACKWARDS, ChunkConfig, FusedConfig
from .fused_recurrent import bl_backward, resolve_config
# chunk_bl_torch: also importable from here
from .naive import CHUNK_SIZES, DEFAULT_CHUNK_SIZE, chunk_bl_torch  # noqa: F401

# |log γ| bound inside a chunk for the quotient form of the covariance pass: e^60 ≈ 1e26 keeps
# γ_τ/γ_i, c_i/γ_i and their products with keys inside fp32's range (≈ 1e±38) with room to spare
LOG_GAMMA_BOUND = 60.0          # < 69 = |log 1e-30|, the floor at which the guard kernel counts α = 0
# the chunked backward's quotient form divides by γ² and forms c/γ² (≤ e^80 ≈ 6e34 < fp32's 3e38):
# a tighter condition than the forward's
LOG_GAMMA_BOUND_BWD = 40.0


def _block_d(D: int) -> int:
    """The key dimension padded to a power of two ≥ 16 (``tl.dot`` needs 16)."""
    return max(16, _pow2(D))


def _sms(dev) -> int:
    """The streaming multiprocessors of ``dev`` (0 off CUDA)."""
    return torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 0


def default_chunk_config(D: int, m: int, G: int, BH: int = 0, sms: int = 0) -> ChunkConfig:
    """The launch parameters by shape (``BH``: batch × heads; 0 for the interpreter; ``sms``: the
    device's SMs, 0 when unknown).

    Mean pass, where the covariance pass has between 64 programs and one an SM (``64 ≤ BH·G ≤ sms``)
    and the value tile is the wide one (``D ≥ 64``, at least 64 value columns a group: S1–S3 on an
    H200, the shapes measured): 64 value columns a program at 4 warps with ``tf32x3`` products (fp32
    ones spill at 4 warps), so that a mean program fits beside a covariance program on one SM and
    :func:`_segments` overlaps the two passes (forward 0.90 /
    0.92 / 0.94 of the earlier default at S1 / S2 / S3, ``h200_overlap_pair_*.json``, with the same
    fp32 error in the collapsing regime, ``h200_scan_precision_overlap.json``).  Elsewhere: 64
    columns (8 warps at ``BV·BD ≥ 4096``) with at least 128 programs, 16 with fewer (more programs
    to hide the chain's latency); ``tf32x3`` at ``D > 64``, where fp32 ``BV = 64`` tiles spill.
    Chunked backward: 4 warps and ``BV = 32`` at ``D ≤ 64`` (8 warps and ``tf32x3`` above).
    These are the best settings of the H200 launch sweeps.
    """
    BD = _block_d(D)
    mg = m // G
    bwd = dict(bwd_BV=max(16, min(32, _pow2(mg))), bwd_warps=4 if BD <= 64 else 8,
               bwd_precision="ieee" if BD <= 64 else "tf32x3")
    if 64 <= BH * G <= sms and BD >= 64 and mg >= 64:
        return ChunkConfig(BV=64, mean_warps=4, mean_precision="tf32x3", **bwd)
    BV = max(16, min(64 if BH * G >= 128 or BH == 0 else 16, _pow2(mg)))
    return ChunkConfig(BV=BV, mean_warps=8 if BV * BD >= 4096 else 4,
                       mean_precision="ieee" if BD <= 64 else "tf32x3", **bwd)


def _h_rows(BD: int) -> int:
    """Rows of a ``D×D`` block the backward's covariance passes read at a time (``H_ROWS`` of the ``hstate`` and
    ``cov_par`` kernels), 0 for the whole matrix in registers.  At ``BD > 64`` 32: compiled offline for
    ``sm_90a`` at S2 (``D = 128``, ``tf32x3``, 8 warps) the spills a thread fall from 524 / 584 / 1,760 B to
    0 / 0 / 100 (the ``H`` chain, the sources, the outputs; ``benchmarks/cpu_bwd_resources_S2.json``)."""
    return 32 if BD > 64 else 0


def _resolve(config, D, m, G, BH, interpret, sms: int = 0) -> ChunkConfig:
    """``config`` (a :class:`ChunkConfig` or None) with its unset fields from :func:`default_chunk_config`
    (``cov_warps`` stays None: it depends on the covariance kernel, :func:`_cov_kernel`)."""
    if config is None:
        config = ChunkConfig()
    elif not isinstance(config, ChunkConfig):
        raise ValueError(f"config must be a ChunkConfig or None (got {type(config).__name__})")
    base = default_chunk_config(D, m, G, 0 if interpret else BH, 0 if interpret else sms)
    return replace(config, **{f: getattr(base, f) for f in ("BV", "mean_warps", "mean_precision", "bwd_BV",
                                                            "bwd_warps", "bwd_precision")
                              if getattr(config, f) is None})


def chunk_kernels(interpret: bool):
    """:mod:`._chunk_kernels`, compiled or interpreted (see :func:`._dispatch.kernels`)."""
    return kernels(interpret, "_chunk_kernels.py")


def chunk_bwd_kernels(interpret: bool):
    """:mod:`._chunk_bwd_kernels`, compiled or interpreted (see :func:`._dispatch.kernels`)."""
    return kernels(interpret, "_chunk_bwd_kernels.py")


def _decays_safe(a, C: int, K=None, bound: float = LOG_GAMMA_BOUND) -> bool:
    """Whether the quotient form is safe for these decays: inside every chunk,
    ``Σ_τ |log|α_τ|| ≤ bound`` (so every cumulative decay relative to the chunk start,
    ``γ_τ = α_0 ⊙ … ⊙ α_τ``, is non-zero with ``|log|γ_τ|| ≤`` the bound: a sufficient
    condition).  ``a``: decays ``[B, T, H, D]``.  With the kernel module ``K`` one Triton pass
    (:func:`._chunk_kernels._abs_log_decay_sum`), else torch ops.  One host synchronisation."""
    if a is None:
        return True
    if K is not None:
        return bool(_decay_guard(K, a, C)[0] <= bound)          # NaN/inf compare False
    B, T, H, D = a.shape
    NT = -(-T // C)
    la = torch.log(a.detach().abs().float()).abs_()            # +inf where α = 0
    if NT * C != T:
        la = torch.cat([la, la.new_zeros(B, NT * C - T, H, D)], 1)
    return bool(la.view(B, NT, C, H, D).sum(2).amax() <= bound)


def _decay_guard(K, a, C: int):
    """The guard pass (:func:`._chunk_kernels._abs_log_decay_sum`) launched, its result left on the device:
    a one-element fp32 tensor, ``max`` over chunks and dimensions of ``Σ_τ |log|α_τ||``; the decays are
    safe for the quotient form where it is ``≤`` the bound (NaN compares False).  No synchronisation."""
    B, T, H, D = a.shape
    NT = -(-T // C)
    out = torch.zeros(1, dtype=torch.float32, device=a.device)      # the sums are ≥ 0: the max starts at 0
    K._abs_log_decay_sum[(B * NT * H,)](a.contiguous(), out, T, NT, H=H, D=D, BD=_block_d(D), C=C)
    return out


def _quotient_shape(BD: int, C: int) -> bool:
    """Whether ``"auto"`` may take the quotient covariance kernel at this padded key width and chunk size
    (its decays aside, :func:`_decays_safe`): ``D ≤ 64`` with ``C ≤ 32`` (faster than the row kernel on the
    H200), and ``D = 128`` with ``C = 16`` at 8 warps (S2 on an H100: forward 5.36 ms against the row
    kernel's 9.60, under CUDA graphs 5.36 against 9.73, ``benchmarks/h100_S2_fwd_quotient.json`` and
    ``h100_S2_fwd_rows_vs_fla.json``; offline 36 B of spills a thread against the row kernel's 1,628,
    ``cpu_cov_S2_candidates.json``; fp32 error in the collapsing regime within 1.0-1.5x of token by
    token, ``cpu_scan_precision_D128_quotient.json``).
    ``C = 32`` and ``64`` at ``D = 128`` spill (not measured on a GPU)."""
    return (BD <= 64 and C <= 32) or (BD == 128 and C <= 16)


def _cov_warps(cfg: ChunkConfig, matmul: bool, C: int, BD: int) -> int:
    """The covariance kernel's warps: ``cfg.cov_warps``, else the quotient kernel 4 at ``C = 16`` and 8 at
    ``C = 32`` (8 at ``D = 128``: 4 spill), the row kernel 8 above ``D = 32`` (else 4)."""
    if cfg.cov_warps is not None:
        return cfg.cov_warps
    return (4 if C <= 16 and BD <= 64 else 8) if matmul else (4 if BD <= 32 else 8)


def _cov_kernel(K, cfg: ChunkConfig, a, C: int, D: int):
    """The covariance-pass kernel and its warps, ``(kernel, warps)``.

    ``"auto"`` takes the quotient kernel where it is valid (:func:`_decays_safe`) and was measured
    the faster one (:func:`_quotient_shape`: ``D ≤ 64`` with ``C ≤ 32``, ``D = 128`` with
    ``C = 16``).  Inside a CUDA graph capture the decays cannot be read on the host, so
    ``"auto"`` with decays takes the row kernel there (valid for every decay); name
    ``cov_kernel="matmul"`` to capture the quotient kernel for decays known to be safe, or
    ``"device"``, which makes ``"auto"``'s choice on the device (:func:`_cov_launches`; here it is
    ``"auto"`` where the choice needs no decays).  Warps: :func:`_cov_warps`.
    """
    BD = _block_d(D)
    kind = cfg.cov_kernel
    if kind in ("auto", "device"):
        if not _quotient_shape(BD, C):
            kind = "rows"
        elif a is None:
            kind = "matmul"
        elif kind == "device":
            raise ValueError("cov_kernel='device' with decays launches both kernels: see _cov_launches")
        elif capturing(a):
            kind = "rows"                                   # _decays_safe would synchronise
        else:
            kind = "matmul" if _decays_safe(a, C, K) else "rows"
    matmul = kind == "matmul"
    return (K.chunk_cov_fwd_mm_kernel if matmul else K.chunk_cov_fwd_kernel), _cov_warps(cfg, matmul, C, BD)


# Register cap of the row covariance kernel at 8 warps (``D > 32``; S2).  Left alone, the device's ptxas
# (Triton 3.6, CUDA 12.8) gives it 128 registers a thread (two programs an SM) and 2,984 bytes of spill
# stores; with the cap named it keeps 255 and spills 1,628 (the kernel of e1436b3, which ptxas gave 255
# unasked, its PTX differing only in where the token offset is computed).  On one H100 that kernel took
# 8.37 ms at S2 (255 registers) against 11.7-13.2 (128): docs/gpu.md, "The S2 regression".
ROW_KERNEL_MAXNREG = 255


def _cov_maxnreg(K, kern, warps: int) -> dict:
    """``{"maxnreg": …}`` for the row covariance kernel at 8 warps, else nothing (at 16 warps a thread can
    hold at most 128 registers anyway; at 4 and fewer nothing was measured)."""
    return {"maxnreg": ROW_KERNEL_MAXNREG} if kern is K.chunk_cov_fwd_kernel and warps == 8 else {}


def _cov_launches(K, cfg: ChunkConfig, a, C: int, D: int):
    """The covariance pass's launches, ``[(kernel, warps, select), …]`` in launch order.

    One launch (``select = 0``, :func:`_cov_kernel`) except for ``cov_kernel="device"`` where
    ``"auto"`` would read the decays on the host (decays, :func:`_quotient_shape`): then both
    kernels, the quotient one with ``select = 1`` (it runs if the guard pass, :func:`_decay_guard`,
    finds the decays safe) and the row one with ``select = 2`` (it runs if not), each with the warps
    it would have alone.  The kernel that is not picked returns before it reads or writes anything,
    so the order does not matter and the outputs are the picked kernel's, bit for bit."""
    BD = _block_d(D)
    if cfg.cov_kernel == "device" and a is not None and _quotient_shape(BD, C):
        return [(K.chunk_cov_fwd_mm_kernel, _cov_warps(cfg, True, C, BD), 1),
                (K.chunk_cov_fwd_kernel, _cov_warps(cfg, False, C, BD), 2)]
    return [(*_cov_kernel(K, cfg, a, C, D), 0)]


def _segments(S, NT: int, cuda: bool, programs: int = 0, sms: int = 0, mean_warps: int = 8,
              mean_tile: int = 0) -> list[tuple[int, int]]:
    """Chunk ranges ``[(n0, n1), …]`` that :func:`_chunk_forward` launches one after the other.

    ``S``: ``config.segments``, an integer ``≥ 1`` or ``"auto"``.  With several segments the mean
    pass of segment ``s`` runs on a second stream while the covariance pass of segment ``s + 1``
    runs.  That pays where the covariance pass leaves whole SMs idle, or where each SM holds at
    most one covariance program and the mean program is a 4-warp one that fits beside it (measured
    with the wide value tile, ``mean_tile = BV·BD ≥ 4096``, at S1 and S2); with an 8-warp mean
    program on shared SMs the two passes slowed each other down
    (``h200_chunk_segments.json``: S1 2.59 ms at one segment, 2.61 at eight; with the 4-warp one
    2.34 against 2.59, ``h200_overlap_pair_*.json``).  So ``"auto"`` takes 8 segments (of at
    least 8 chunks) on a GPU when the covariance pass has at most half as many ``programs`` as the
    device has ``sms``, or at most as many with such a 4-warp wide mean program, and one segment otherwise (and
    on a CPU).  Ranges are as even as chunks allow and never empty."""
    if S == "auto":
        room = 0 < 2 * programs <= sms or (0 < programs <= sms and mean_warps <= 4 and mean_tile >= 4096)
        S = max(1, min(8, NT // 8)) if cuda and room else 1
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


def _chunk_forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg: ChunkConfig, need_e):
    """Launch the chunked passes.  ``M0 [B, H, D, m]``, ``P0 [B, H, G, D, D]`` (fp32, contiguous).

    Returns ``o, M_T [B, H, D, m], P_T [B, H, G, D, D], u [B, T, H, G, D], β [B, T, H, G], e, W``
    (``W = diag(β) L⁻¹ [B, H, G, NT, C, C]``, read by the chunked backward).

    The sequence runs as the segments of :func:`_segments`: covariance pass of segment ``s`` on
    the current stream, then its mean pass on a side stream (after an event), so that it overlaps
    the covariance pass of segment ``s + 1``; the states between segments go through small
    ``[B, H, G, D, D]`` / ``[B, H, D, m]`` buffers, and the current stream waits for the side
    stream before returning (so every buffer is safe to free or reuse in stream order).
    Launches use one pipeline stage: Triton's default of 3 triples the shared memory of the
    loads, past the H200's 227 KB at ``C = 64``.
    """
    return _ForwardPasses(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e).run()


class _ForwardPasses:
    """The buffers and launches of :func:`_chunk_forward`: :meth:`run` is the forward; :meth:`cov` and
    :meth:`mean` launch one segment's covariance or mean pass alone, so that :func:`pass_times` can
    time each kernel by itself (each reads only what :meth:`run` left in the buffers, so repeating
    either after a run rewrites the same values; with ``cov_kernel="device"`` the guard pass runs once,
    here, and :meth:`cov` launches both covariance kernels)."""

    def __init__(self, K, q, k, v, l2, r2, a, M0, P0, C, cfg: ChunkConfig, need_e):
        B, T, H, D = q.shape
        m = v.shape[-1]
        G = r2.shape[-1]
        mg = m // G
        dev = q.device
        f32 = torch.float32
        NT = -(-T // C)
        BD = _block_d(D)
        dummy = torch.zeros(1, dtype=f32, device=dev)
        ap = a if a is not None else dummy
        self.u = _empty((B, T, H, G, D), f32, dev)
        self.beta = _empty((B, T, H, G), f32, dev)
        self.W = _empty((B, H, G, NT, C, C), f32, dev)
        Aq = _empty((B, H, G, NT, C, C), f32, dev)
        Ut = _empty((B, H, G, NT, C, D), f32, dev)
        self.PT = PT = _empty((B, H, G, D, D), f32, dev)
        self.o = _empty((B, T, H, m), v.dtype, dev)
        self.e = _empty((B, T, H, m), f32, dev) if need_e else dummy
        self.MT = MT = _empty((B, H, D, m), f32, dev)
        launches = _cov_launches(K, cfg, a, C, D)
        self.covs = []                                          # (kernel, keywords) of each launch
        for kern, warps, select in launches:
            kw = dict(H=H, G=G, D=D, BD=BD, C=C, HAS_ALPHA=a is not None, num_warps=warps, num_stages=1,
                      **_cov_maxnreg(K, kern, warps))
            if kern is K.chunk_cov_fwd_mm_kernel:
                kw["STATE_LEFT"] = cfg.state_dot == "left"
            if select:
                kw["SELECT"] = select
            self.covs.append((kern, kw))
        # cov_kernel="device": the guard's result stays on the device, the kernels read it (None: no check)
        self.guard = (_decay_guard(K, a, C), LOG_GAMMA_BOUND) if len(launches) > 1 else (None, None)
        NVG = -(-mg // cfg.BV)
        self.mean_kw = dict(H=H, G=G, D=D, M=m, MG=mg, BD=BD, BV=cfg.BV, NVG=NVG, C=C, HAS_ALPHA=a is not None,
                            STORE_E=need_e, PREC=cfg.mean_precision, num_warps=cfg.mean_warps, num_stages=1)
        self.cuda = dev.type == "cuda"
        self.dev = dev
        self.segs = _segments(cfg.segments, NT, self.cuda, B * H * G, _sms(dev), cfg.mean_warps, cfg.BV * BD)
        S = len(self.segs)
        self.Ps = [P0] + [torch.empty_like(PT) for _ in range(S - 1)] + [PT]     # state before segment s: Ps[s]
        self.Ms = [M0] + [torch.empty_like(MT) for _ in range(S - 1)] + [MT]
        self.K = K
        self.grid_cov, self.grid_mean = (B * H * G,), (B * H * G * NVG,)
        self.args_cov = (q, k, ap, l2, r2)
        self.args_mean = (q, k, v, ap, self.beta, self.W, Aq, Ut)
        self.cov_out = (self.u, self.beta, self.W, Aq, Ut)     # what the covariance pass writes
        self.T, self.NT = T, NT

    def cov(self, s: int) -> None:
        n0, n1 = self.segs[s]
        for kern, kw in self.covs:                              # with two, one returns at once (_cov_launches)
            kern[self.grid_cov](*self.args_cov, self.Ps[s], *self.cov_out, self.Ps[s + 1], self.T, self.NT, n0, n1,
                                *self.guard, **kw)

    def mean(self, s: int) -> None:
        n0, n1 = self.segs[s]
        self.K.chunk_mean_fwd_kernel[self.grid_mean](*self.args_mean, self.Ms[s], self.o, self.e, self.Ms[s + 1],
                                                     self.T, self.NT, n0, n1, **self.mean_kw)

    def run(self):
        overlap = self.cuda and len(self.segs) > 1
        if overlap:
            main, side = torch.cuda.current_stream(self.dev), _side_stream(self.dev)
            side.wait_stream(main)                      # the inputs and buffers above are ready
        for s in range(len(self.segs)):
            self.cov(s)
            if overlap:
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    self.mean(s)
            else:
                self.mean(s)
        if overlap:
            main.wait_stream(side)
        return self.o, self.MT, self.PT, self.u, self.beta, self.e, self.W


def pass_times(passes: _ForwardPasses, bench) -> dict:
    """The forward's two kernels timed apart after one :meth:`_ForwardPasses.run` (``bench(fn) -> ms``):
    ``cov_ms``, every segment's covariance pass alone, and ``mean_ms``, every mean pass alone (no
    overlap between them).  Where the forward's time is under their sum, the two overlapped.

    Where the covariance pass is the quotient kernel, also ``cov_without_rows_ms``: the same launches with
    its ``C×C`` row recursion replaced by a diagonal stand-in (the kernel's ``ROWS=False``, a timing
    ablation whose outputs are wrong), run after the two timings above, on the same buffers; the covariance
    pass then runs once more in full, so the buffers hold the forward's values again.
    ``cov_ms − cov_without_rows_ms`` is what the recursion costs the chain under load (issue 19: the one part
    of the chunk step not yet timed alone)."""
    passes.run()
    S = len(passes.segs)
    out = {"cov_ms": bench(lambda: [passes.cov(s) for s in range(S)]),
           "mean_ms": bench(lambda: [passes.mean(s) for s in range(S)])}
    if any(kern is passes.K.chunk_cov_fwd_mm_kernel for kern, _ in passes.covs):
        full = passes.covs
        passes.covs = [(kern, {**kw, "ROWS": False} if kern is passes.K.chunk_cov_fwd_mm_kernel else kw)
                       for kern, kw in full]
        try:
            out["cov_without_rows_ms"] = bench(lambda: [passes.cov(s) for s in range(S)])
        finally:
            passes.covs = full
            for s in range(S):                  # in order: segment s reads the state segment s - 1 wrote
                passes.cov(s)
    return out


def _use_chunked_backward(backward: str, D: int, C: int) -> bool:
    """``"auto"``: the chunked backward where it was measured faster than the token-by-token one
    on the H200 (``D ≤ 64``, ``C ≤ 32``; at ``D = 128`` and ``C = 64`` its passes spill
    registers); ``"chunked"`` always, ``"recurrent"`` never.  Either way the decay guard can
    still send a call to the token-by-token backward."""
    return backward == "chunked" or (backward == "auto" and D <= 64 and C <= 32)


def _bwd_segments(L, NT: int) -> list[tuple[int, int]]:
    """The chunk ranges ``[(n0, n1), …]`` of :func:`_chunk_backward`, first to last: one over all
    ``NT`` chunks for ``L = None`` (``config.bwd_segment_chunks``), else ranges of ``L`` chunks
    (the last one shorter where ``L`` does not divide ``NT``)."""
    if L is None or L >= NT:
        return [(0, NT)]
    return [(n0, min(n0 + L, NT)) for n0 in range(0, NT, L)]


def _start_every(K, S: int) -> int:
    """Every how many segments the chunked backward keeps a segment's start state
    (``config.bwd_start_every``): ``K`` as given, or for ``None`` the integer nearest √S (the fewest
    buffers, ``⌊(S−1)/K⌋`` kept and ``K − 1`` slots), 1 for one segment."""
    if K is not None:
        return K
    return max(1, round(math.sqrt(S)))


def backward_buffer_bytes(B, T, H, D, m, G=1, C=16, L=None, K=None) -> dict[str, int]:
    """Bytes of the chunked backward's fp32 buffers that ``bwd_segment_chunks = L`` (and
    ``bwd_start_every = K``) changes, from the shapes :func:`_chunk_backward` allocates: ``states``
    (``Ps, Hs, Ms, Gs``), ``accumulators`` (the passes' five per-token and five per-chunk ones, ``dβ``
    whole), ``segment_states`` (the states at the segments' starts, kept and in slots, and the adjoints
    carried between segments)."""
    NT = -(-T // C)
    segs = _bwd_segments(L, NT)
    S = len(segs)
    K = _start_every(K, S)
    starts = (S - 1) // K + min(K - 1, S - 1)     # kept start states (segments K, 2K, … ≤ S−1) and slots
    NB = max(n1 - n0 for n0, n1 in segs)
    NA, TA = (NB, NB * C) if S > 1 else (NT, T)
    pd, md = B * H * G * D * D, B * H * D * m
    return {"states": 4 * NB * (2 * pd + 2 * md),
            "accumulators": 4 * (5 * B * TA * H * D + B * H * G * NA * C * (2 * C + D) + 2 * B * H * NA * D
                                 + B * T * H * G),
            "segment_states": 4 * (starts * (pd + md) + min(2, S - 1) * (pd + md))}


def _views(shapes, dev, align=32):
    """One fp32 buffer and contiguous views of it with ``shapes``, each starting at a multiple of
    ``align`` elements (128 bytes: the pointers keep the alignment Triton specialises on)."""
    sizes = [math.prod(sh) for sh in shapes]
    starts, n = [], 0
    for sz in sizes:
        starts.append(n)
        n += -(-sz // align) * align
    flat = _empty((max(n, 1),), torch.float32, dev)
    return flat, tuple(flat[a:a + sz].view(sh) for a, sz, sh in zip(starts, sizes, shapes))


def _chunk_backward(KB, q, k, v, l2, a, M0, P0, u, beta, e, W, do, dMT, dPT, C, cfg: ChunkConfig, need_dg):
    """The chunked backward's Triton passes.  ``M0, dMT [B, H, D, m]``, ``P0, dPT [B, H, G, D, D]``
    fp32 (``dPT`` symmetric), ``W [B, H, G, NT, C, C]`` from the forward.

    The reverse chains carry only the adjoints, ``G ← ΓG − Xᵀ(ŨG) + s_n`` (mean) and
    ``H ← ΦᵀHΦ + S_n`` (covariance, ``Φ = Γ − ŨᵀX``, ``X = W Kγ``, ``Γ = diag(γ_C)``); everything
    else runs with one program per chunk from the stored chunk-end adjoints:

    1. chunk-start states ``P``, ``M`` (a linear scan of the stored ``u, β, e``);
    2. the ``G`` chain, then the mean outputs per chunk;
    3. the covariance sources ``S_n`` per chunk, the ``H`` chain over them, the covariance
       outputs per chunk;
    4. an elementwise epilogue (``γ, c`` and the reverse cumulative sums of the decay gradient).

    With ``cfg.bwd_segment_chunks = L`` the chunks run in segments of ``L`` (:func:`_bwd_segments`),
    so that the four per-chunk state buffers (``Ps``, ``Hs`` ``[B, H, G, L, D, D]``, ``Ms``, ``Gs``
    ``[B, H, L, D, m]``) hold one segment instead of all ``NT`` chunks: step 1 runs forward over the
    segments keeping only each segment's start states (``[B, H, G, D, D]``, ``[B, H, D, m]``; the
    last segment's chunk states stay in the buffers), then steps 2–3 run segment by segment from
    the last to the first, each segment recomputing its chunk states from its start states
    (except the last) and carrying the adjoints ``G``, ``H`` at its start to the segment before.
    Within a segment the order is the same as for the whole sequence (the ``G`` chain, the mean
    outputs, the sources, the ``H`` chain, the covariance outputs): a chunk's per-chunk passes
    read only that chunk's rows.  So the accumulators of those passes (every one but ``dβ``: the
    per-token ``d(Qγ), d(Kγ), dK, dc, dγ``, the per-chunk ``dA_q, dN, dŨ, dγ_C, dc_C``) hold one
    segment too, step 4 runs after each segment on its chunks, and they are cleared for the next.  The same gradients (the same arithmetic, except that the order
    of the atomic additions into the per-token adjoints may differ on a GPU); step 1's scans run
    once more for all but the last segment.

    Returns ``(dq, dk, dv, dl2, dr2 [B, T, H, G], dg or None, dM0, dP0)`` in fp32.
    """
    B, T, H, D = q.shape
    m = e.shape[-1]
    G = u.shape[3]
    mg = m // G
    dev = q.device
    f32 = torch.float32
    NT = -(-T // C)
    BD = _block_d(D)
    BV = cfg.bwd_BV
    NVG = -(-mg // BV)
    has_a = a is not None
    dummy = torch.zeros(1, dtype=f32, device=dev)
    ap = a if has_a else dummy
    do = torch.zeros(B, T, H, m, dtype=f32, device=dev) if do is None else do.contiguous()
    dMT = torch.zeros(B, H, D, m, dtype=f32, device=dev) if dMT is None else dMT.float().contiguous()
    dPT = (torch.zeros(B, H, G, D, D, dtype=f32, device=dev) if dPT is None
           else (0.5 * (dPT.float() + dPT.float().transpose(-1, -2))).contiguous())
    kw = dict(H=H, G=G, D=D, BD=BD, C=C, HAS_ALPHA=has_a, PREC=cfg.bwd_precision, num_warps=cfg.bwd_warps,
              num_stages=1)
    vkw = dict(kw, M=m, MG=mg, BV=BV, NVG=NVG)
    # the kernels with the D×D state in their products (bwd_state_dot: the backward's own choice, else state_dot's)
    skw = dict(kw, STATE_LEFT=(cfg.bwd_state_dot or cfg.state_dot) == "left")
    h_rows = _h_rows(BD)
    segs = _bwd_segments(cfg.bwd_segment_chunks, NT)
    S = len(segs)
    NB = max(n1 - n0 for n0, n1 in segs)       # chunks held by the four per-chunk state buffers
    # 1. chunk-start states (with segments: the segments' start states, the last segment's chunk states).
    # Two levels (bwd_start_every = K): the start states of segments 0, K, 2K, … are kept for the whole
    # backward; those of the segments between (a group's inner ones) live in K − 1 slots that every
    # group shares, refilled from the group's kept state when the reverse pass reaches the group.
    K = _start_every(cfg.bwd_start_every, S)
    Ps = _empty((B, H, G, NB, D, D), f32, dev)
    Ms = _empty((B, H, NB, D, m), f32, dev)
    kept, slots = {0: (P0, M0)}, {}

    def start(j, alloc=False):
        """The (P, M) buffers that hold segment j's start state (j ≥ 1: kept or its group's slot)."""
        table, key = (kept, j) if j % K == 0 else (slots, j % K)
        if alloc and key not in table:
            table[key] = (_empty((B, H, G, D, D), f32, dev), _empty((B, H, D, m), f32, dev))
        return table[key]

    def scan(j, store_end):
        """Segment j's state scans from its start state: its chunk states into Ps, Ms and, with
        ``store_end``, the next segment's start state."""
        (p0, m0), (p1, m1) = start(j), (start(j + 1, alloc=True) if store_end else (dummy, dummy))
        n0, n1 = segs[j]
        KB.chunk_bwd_pstate_kernel[(B * H * G,)](k, ap, l2, u, beta, p0, Ps, p1, T, NT, n0, n1,
                                                 STORE_END=store_end, **kw)
        KB.chunk_bwd_mstate_kernel[(B * H * G * NVG,)](ap, u, beta, e, m0, Ms, m1, T, NT, n0, n1,
                                                       STORE_END=store_end, **vkw)

    for j in range(S):
        scan(j, j < S - 1)
    # the slots now hold the inner start states of the last group
    filled = set(range(S - 1 - (S - 1) % K + 1, S)) if K > 1 else set()
    # the adjoints that value blocks (and groups) share are added atomically.  With segments the
    # accumulators that only a chunk's own programs touch (every one but dβ) hold one segment's chunks
    # (NA = NB chunks, TA = NB·C token rows from the segment's first chunk, A0), the epilogue runs per
    # segment, and they are cleared for the next; else all chunks (TA = T, A0 = 0: the rows as before)
    local = S > 1
    NA, TA = (NB, NB * C) if local else (NT, T)
    dv = _empty((B, T, H, m), f32, dev)
    dM0 = _empty((B, H, D, m), f32, dev)
    dbeta = _empty((B, T, H, G), f32, dev).zero_()
    # the ten cleared accumulators are views of one buffer, so a segment clears them in one launch
    acc_flat, acc = _views(((B, H, G, NA, C, C), (B, H, G, NA, C, C), (B, H, G, NA, C, D), (B, H, NA, D),
                            (B, H, NA, D)) + ((B, TA, H, D),) * 5, dev)
    acc_flat.zero_()
    dAq, dN, dUt, dgC, dcC, dQg, dKg, dKd, dc, dgam = acc
    dr2 = _empty((B, T, H, G), f32, dev)
    need = need_dg and has_a
    dq, dk = _empty((B, T, H, D), f32, dev), _empty((B, T, H, D), f32, dev)
    dl2 = _empty((B, T, H), f32, dev)
    dg = _empty((B, T, H, D), f32, dev) if need else dummy

    def epilogue(n0, n1, a0):
        # 4. per token: dq, dk, dℓ², dg from the accumulators of chunks n0 … n1−1
        KB.chunk_bwd_epilogue_kernel[(B * (n1 - n0) * H,)](
            q, k, ap, l2, dQg, dKg, dKd, dc, dgam, dgC, dcC, dq, dk, dl2, dg, T, NT, n0, n1, TA, NA, a0,
            H=H, D=D, BD=BD, C=C, HAS_ALPHA=has_a, NEED_DG=need, num_warps=max(4, C // 4))  # sm_90: no spills

    dP0 = _empty((B, H, G, D, D), f32, dev)
    Gs = _empty((B, H, NB, D, m), f32, dev)
    Hs = _empty((B, H, G, NB, D, D), f32, dev)
    # the adjoints between segments: segment s reads those at its end and writes those at its start
    # (the first segment into dM0, dP0; the others alternate between two buffers)
    carry = {}
    gin, hin = dMT, dPT
    for s in reversed(range(S)):
        n0, n1 = segs[s]
        ns = n1 - n0
        a0 = n0 if local else 0
        if s < S - 1:                           # the last segment's states are still in Ps, Ms
            if s % K and s not in filled:       # the first segment reached of its group: refill the slots
                c = s - s % K
                for j in range(c, s):
                    scan(j, True)
                filled = set(range(c + 1, s + 1))
            scan(s, False)
            acc_flat.zero_()                    # the later segment's epilogue has read them
        if s == 0:
            gout, hout = dM0, dP0
        else:
            if s % 2 not in carry:
                carry[s % 2] = (_empty((B, H, D, m), f32, dev), _empty((B, H, G, D, D), f32, dev))
            gout, hout = carry[s % 2]
        # 2. mean side
        KB.chunk_bwd_gstate_kernel[(B * H * G * NVG,)](q, k, ap, u, beta, do, W, gin, Gs, gout, T, NT, n0, n1,
                                                       **vkw)
        KB.chunk_bwd_mean_par_kernel[(B * H * G * NVG * ns,)](
            q, k, v, ap, u, beta, e, do, W, Ms, Gs, dv, dAq, dN, dUt, dbeta, dgC, dQg, dKg, T, NT, n0, n1,
            TA, NA, a0, **vkw)
        # 3. covariance side
        cargs = (q, k, ap, l2, u, beta, W, Ps, Hs, hin, dAq, dN, dUt, dbeta, dr2, dQg, dKg, dKd, dc, dgam, dgC, dcC,
                 T, NT, n0, n1, TA, NA, a0)
        KB.chunk_bwd_cov_par_kernel[(B * H * G * ns,)](*cargs, OUT=False, H_ROWS=h_rows, **skw)   # sources S_n
        KB.chunk_bwd_hstate_kernel[(B * H * G,)](k, ap, u, W, hin, Hs, hout, T, NT, n0, n1, H_ROWS=h_rows, **skw)
        KB.chunk_bwd_cov_par_kernel[(B * H * G * ns,)](*cargs, OUT=True, H_ROWS=h_rows, **skw)    # the outputs
        if local:
            epilogue(n0, n1, a0)
        gin, hin = gout, hout
    if not local:
        epilogue(0, NT, 0)
    return dq, dk, dv, dl2, dr2, dg if need else None, dM0, dP0


class _ChunkBLFunction(torch.autograd.Function):
    """Forward: the chunked kernels.  Backward: the chunked backward kernels (:func:`_chunk_backward`)
    where ``backward`` asks for them and the decays allow their quotient form, else the
    token-by-token op's Triton backward (:func:`.fused_recurrent.bl_backward`, fed with the
    ``u, β, e`` and final states that the chunked forward produced: the same gradients)."""

    @staticmethod
    def forward(ctx, q, k, v, l2, r2, dec, M0, P0, log_alpha, interpret, C, cfg, bcfg, backward):
        K = chunk_kernels(interpret)
        q, k, v, l2, r2 = (t.contiguous() for t in (q, k, v, l2, r2))
        a = decays(dec, log_alpha)
        M0c = M0.float().contiguous()
        P0c = P0.float().contiguous()
        need_grad = any(ctx.needs_input_grad[:8])
        o, MT, PT, u, beta, e, W = _chunk_forward(K, q, k, v, l2, r2, a, M0c, P0c, C, cfg, need_grad)
        if need_grad:
            chunked = _use_chunked_backward(backward, q.shape[-1], C)
            ctx.save_for_backward(q, k, v if chunked else None, l2, a, M0c, P0c, u, beta, e, MT, PT,
                                  W if chunked else None)
            ctx.meta = (log_alpha, interpret, bcfg, v.dtype, r2.dtype, None if dec is None else dec.dtype,
                        M0.dtype, P0.dtype)
            ctx.chunk = (C, cfg)
        ctx.set_materialize_grads(False)
        return o, MT, PT

    @staticmethod
    def backward(ctx, do, dMT, dPT):
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
                    dM0.to(m0dt), dP0.to(p0dt), None, None, None, None, None, None)
        # the chunked forward keeps means as [B, H, D, m]; the shared backward wants them transposed
        t = lambda x: None if x is None else x.transpose(-1, -2).contiguous()  # noqa: E731
        *rest, dM0t, dP0 = bl_backward(q, k, l2, a, t(M0), P0, u, beta, e, t(MT), PT, do, t(dMT), dPT,
                                       ctx.meta, ctx.meta[2], need_dg)
        return (*rest, dM0t.transpose(-1, -2).to(m0dt), dP0, None, None, None, None, None, None)


def _chunk_entry(op, chunk_size, backward, q, k, v, l2, r2, alpha, p0, initial_state, g, validate, write_mask,
                 needs_kernels=False):
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    if backward not in BACKWARDS:
        raise ValueError(f"backward must be one of {', '.join(map(repr, BACKWARDS))} (got {backward!r})")
    return enter(op, q, k, v, l2, r2, alpha, p0, initial_state, g=g, validate=validate, write_mask=write_mask,
                 needs_kernels=needs_kernels)


def chunk_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
             chunk_size: int = DEFAULT_CHUNK_SIZE, *, g=None, validate: bool = True, backward: str = "auto",
             config: ChunkConfig | None = None, write_mask=None):
    r"""The BL filter computed chunk by chunk; same contract as :func:`.fused_recurrent.fused_recurrent_bl`
    (``write_mask`` included: a non-writing token is a missing observation).

    ``chunk_size`` ∈ {16, 32, 64}; the default, 16 (:data:`DEFAULT_CHUNK_SIZE`), was the fastest on the
    H200 at every shape measured, forward and backward.  Returns ``(o, final_state or None)``.

    ``backward``: ``"auto"`` (default) takes the chunked backward kernels at ``D ≤ 64``,
    ``chunk_size ≤ 32`` and the token-by-token Triton backward elsewhere; ``"chunked"`` the
    chunked kernels wherever every chunk's ``Σ|log|α||`` is at most ``LOG_GAMMA_BOUND_BWD``
    (beyond it, and for zero decays, the token-by-token backward runs); ``"recurrent"`` the
    token-by-token backward.  All give exact gradients of the same function; the same rule as
    :func:`.fused_recurrent.fused_recurrent_bl` for ``alpha`` with exact zeros.
    ``config``: launch parameters (:class:`ChunkConfig`; None: :func:`default_chunk_config`).

    CUDA tensors run the chunked Triton kernels (fp32 state and arithmetic, ``D ≤ 128``), CPU
    tensors with ``TRITON_INTERPRET=1`` the same kernels interpreted, other CPU tensors
    :func:`.naive.chunk_bl_torch`.
    """
    x, mode = _chunk_entry("chunk_bl", chunk_size, backward, q, k, v, l2, r2, alpha, p0, initial_state, g,
                           validate, write_mask)
    if mode == "naive":
        return chunk_bl_torch(q, k, v, l2, r2, alpha, p0, initial_state, output_final_state, chunk_size,
                              g=g, validate=False, write_mask=write_mask)
    B, T, H, D, m = x.dims
    interp = mode == "interpret"
    cfg = _resolve(config, D, m, x.G, B * H, interp, _sms(x.q.device))
    bcfg = resolve_config(FusedConfig(bwd_reduce=cfg.bwd_reduce), D, m, x.G, B * H, interp)
    M0, P0 = initial_states(x)
    o, MT, PT = _ChunkBLFunction.apply(x.q, x.k, x.v, x.l2, x.r2, x.alpha, M0, P0, x.log_alpha,
                                       interp, chunk_size, cfg, bcfg, backward)
    if not output_final_state:
        return o, None
    return o, final_state(x, MT, PT)


def chunk_bl_pass_times(q, k, v, l2, r2, alpha=None, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                        config: ChunkConfig | None = None, bench=None) -> dict:
    """:func:`chunk_bl`'s forward split into its two kernels, each timed alone (``bench(fn) -> ms``;
    default Triton's ``do_bench`` median on CUDA): ``{"cov_ms", "mean_ms"}`` (:func:`pass_times`).
    Beside the two-level form's read-outs (:func:`.segments.anatomy`, the same kernels over more and
    shorter chains) it says which kernel keeps its time when the chains are many."""
    x, mode = _chunk_entry("chunk_bl_pass_times", chunk_size, "auto", q, k, v, l2, r2, alpha, 1.0, None, None,
                           False, None, needs_kernels=True)
    with torch.no_grad():
        return pass_times(_entered_passes(x, mode, chunk_size, config), bench or _do_bench)


def _entered_passes(x, mode, chunk_size, config) -> _ForwardPasses:
    """The forward's passes on inputs from :func:`_chunk_entry` (contiguous, fp32 states, no ``e``)."""
    B, T, H, D, m = x.dims
    interp = mode == "interpret"
    cfg = _resolve(config, D, m, x.G, B * H, interp, _sms(x.q.device))
    M0, P0 = initial_states(x)
    return _ForwardPasses(chunk_kernels(interp), x.q.contiguous(), x.k.contiguous(), x.v.contiguous(),
                          x.l2.contiguous(), x.r2.contiguous(), decays(x.alpha, x.log_alpha),
                          M0.float().contiguous(), P0.float().contiguous(), chunk_size, cfg, False)


def _do_bench(fn) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=60, return_mode="median"))


def chunk_bl_trace(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                   *, g=None,
                   validate: bool = True, config: ChunkConfig | None = None, write_mask=None):
    """Forward only through the chunked kernels, also returning ``u [B, T, H, G, D]`` and
    ``β [B, T, H, G]`` (as :func:`.fused_recurrent.fused_recurrent_bl_trace`; the
    gain of the write at ``t`` is ``β_t k_tᵀ u_t``).  Needs a Triton mode."""
    x, mode = _chunk_entry("chunk_bl_trace", chunk_size, "auto", q, k, v, l2, r2, alpha, p0, initial_state, g,
                           validate, write_mask, needs_kernels=True)
    with torch.no_grad():
        o, MT, PT, u, beta, _, _ = _entered_passes(x, mode, chunk_size, config).run()
    return o, final_state(x, MT, PT), u, beta
