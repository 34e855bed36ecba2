r"""``chunk_bl_segments``: the chunked BL forward parallel over segments (issue 19), from the chunk kernels.

The chunked op's covariance pass is one chain of ``T/C`` dependent chunk steps per (batch, head):
at S1 128 programs on 132 SMs, each busy a tenth of the time (docs/gpu.md, section 4).  The
two-level form (:mod:`assocmem.numerics.bl_segments`) cuts the sequence into ``T/L`` segments of
``L`` tokens and runs every segment at once, twice, with the same chunk kernels:

1. **every segment's element**, from its own tokens: the chunked forward of the segment from
   ``P₀ = 0`` with ``D`` more value columns, ``M₀ = [0 | I]`` and values ``[v | 0]``.  Given a
   deterministic start ``x`` the segment's end state is ``A x + b``, so the final mean is
   ``[b | A]`` and the final covariance is ``C``.  The innovations of the extra columns are
   ``e^A_t = −(Āᵀ_t k_t)ᵀ`` (``Ā_t`` the decayed map before token ``t``), so the information of the
   segment's observations about ``x`` is ``J = Σ_t β_t e^{A}_tᵀ e^A_t`` and
   ``η = −Σ_t β_t e^{A}_tᵀ e^m_t`` (the log-likelihood ``−½ Σ_t β_t ‖e^m_t + e^A_t x‖²``);
2. **the states at the segment starts**: a scan over the ``T/L`` elements behind the initial state,
   in float64 torch operations (``M ← A F⁻¹(M + P η) + b``, ``P ← A F⁻¹ P Aᵀ + C``,
   ``F = I + P J``: the combine of :mod:`assocmem.numerics.bl_parallel` with the prior);
3. **every segment's read-outs**: the chunked forward of each segment from its start state.

Each chain is ``L/C`` chunk steps, and ``B·H·T/L`` chains run at once instead of ``B·H``; the price
is a second forward (with ``m + D`` value columns) and the ``T/L`` sequential ``D×D`` solves of
level 2.  Forward only (no autograd), no write mask, one noise group: a prototype to measure
(``assocmem gpu bench --ops segments``, each level timed alone by :func:`anatomy`) before the lever is
built into ``chunk_bl``.  It is the removed super-chunk forward (commit 4f35600, docs/gpu.md section 5:
exact, slower as a whole) again, so that its levels can be timed apart.
"""
from __future__ import annotations

import torch

from ._launch import enter, final_state, initial_states, decays
from .chunk import _ForwardPasses, _chunk_forward, _resolve, _do_bench, chunk_kernels, pass_times
from .naive import CHUNK_SIZES, DEFAULT_CHUNK_SIZE

DEFAULT_SEGMENT_TOKENS = 256


def _segments(t: torch.Tensor, NS: int) -> torch.Tensor:
    """``[B, T, ...]`` → ``[B·NS, T/NS, ...]`` (a view: segments as batch rows)."""
    B, T = t.shape[:2]
    return t.reshape(B * NS, T // NS, *t.shape[2:])


def segment_elements(K, q, k, v, l2, r2, a, C: int, cfg_ext):
    """Level 1 on inputs already cut into segments (``[B·NS, L, H, ·]``, fp32 kernel inputs): every
    segment's element as ``(A, b, C, η, J)``, ``A, C, J [B·NS, H, D, D]``, ``b, η [B·NS, H, D, m]``,
    float64."""
    BS, L, H, D = k.shape
    m = v.shape[-1]
    dev = k.device
    v_ext = torch.cat([v, v.new_zeros(BS, L, H, D)], -1).contiguous()
    M0 = torch.zeros(BS, H, D, m + D, dtype=torch.float32, device=dev)
    M0[..., m:] = torch.eye(D, dtype=torch.float32, device=dev)
    P0 = torch.zeros(BS, H, 1, D, D, dtype=torch.float32, device=dev)
    _, MT, PT, _, beta, e, _ = _chunk_forward(K, q, k, v_ext, l2, r2, a, M0, P0, C, cfg_ext, True)
    beta = beta[..., 0].double()                                    # [BS, L, H]
    eA, em = e[..., m:].double(), e[..., :m].double()               # [BS, L, H, D], [BS, L, H, m]
    J = torch.einsum("blhd,blhe,blh->bhde", eA, eA, beta)
    eta = -torch.einsum("blhd,blhc,blh->bhdc", eA, em, beta)
    MT = MT.double()
    return MT[..., m:], MT[..., :m], PT[:, :, 0].double(), eta, J


def segment_starts(A, b, Cs, eta, J, M0, P0):
    """Level 2: from the segments' elements ``[B, NS, H, ·, ·]`` (float64) and the initial state
    ``M0 [B, H, D, m]``, ``P0 [B, H, D, D]``, the state before every segment
    (``[B, NS, H, D, m]``, ``[B, NS, H, D, D]``) and after the last."""
    NS = A.shape[1]
    D = A.shape[-1]
    I = torch.eye(D, dtype=torch.float64, device=A.device)
    M, P = M0.double(), P0.double()
    Ms, Ps = [], []
    for s in range(NS):
        Ms.append(M)
        Ps.append(P)
        F = I + P @ J[:, s]
        X = torch.linalg.solve(F, torch.cat([M + P @ eta[:, s], P], -1))
        XM, XP = X[..., :M.shape[-1]], X[..., M.shape[-1]:]
        M = A[:, s] @ XM + b[:, s]
        P = A[:, s] @ XP @ A[:, s].transpose(-1, -2) + Cs[:, s]
        P = 0.5 * (P + P.transpose(-1, -2))
    return torch.stack(Ms, 1), torch.stack(Ps, 1), M, P


def _check_segment_tokens(segment_tokens, chunk_size: int, T: int) -> None:
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} (got {chunk_size!r})")
    if not isinstance(segment_tokens, int) or isinstance(segment_tokens, bool) or segment_tokens < chunk_size \
            or segment_tokens % chunk_size or T % segment_tokens:
        raise ValueError(f"segment_tokens must be a multiple of chunk_size ({chunk_size}) that divides T ({T}) "
                         f"(got {segment_tokens!r})")


def chunk_bl_segments(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
                      chunk_size: int = DEFAULT_CHUNK_SIZE, segment_tokens: int = DEFAULT_SEGMENT_TOKENS, *, g=None,
                      validate: bool = True, config=None):
    """The chunked BL forward in the two-level form; the contract of :func:`.chunk.chunk_bl` (same
    arguments and results), forward only, without ``write_mask`` and with one noise group.
    ``segment_tokens``: the segment length ``L``, a multiple of ``chunk_size`` that divides ``T``.
    Needs a Triton mode (CUDA, or ``TRITON_INTERPRET=1`` on a CPU)."""
    x, mode = enter("chunk_bl_segments", q, k, v, l2, r2, alpha, p0, initial_state, g=g, validate=validate,
                    write_mask=None, needs_kernels=True)
    B, T, H, D, m = x.dims
    if x.G != 1:
        raise ValueError(f"r2: chunk_bl_segments takes one noise group (got G = {x.G})")
    _check_segment_tokens(segment_tokens, chunk_size, T)
    lv = _Levels(x, mode == "interpret", chunk_size, T // segment_tokens, config)
    with torch.no_grad():
        o = lv.readouts(lv.starts(lv.elements()))
    MT, PT = lv.final
    o = o.reshape(B, T, H, m).to(v.dtype)
    if not output_final_state:
        return o, None
    return o, final_state(x, MT.float(), PT.float()[:, :, None])


class _Levels:
    """The three levels of :func:`chunk_bl_segments` on validated inputs, run one after the other as
    ``readouts(starts(elements()))`` (separate so that :func:`anatomy` can time each alone); ``final``
    is the final state ``(M [B, H, D, m], P [B, H, D, D])`` once :meth:`starts` has run."""

    def __init__(self, x, interp: bool, C: int, NS: int, config):
        B, T, H, D, m = self.dims = x.dims
        self.K, self.C, self.NS = chunk_kernels(interp), C, NS
        a = decays(x.alpha, x.log_alpha)
        self.ins = [_segments(t.contiguous(), NS).contiguous() for t in (x.q, x.k, x.v, x.l2, x.r2)]
        self.a = None if a is None else _segments(a, NS).contiguous()
        self.cfg_ext = _resolve(config, D, m + D, 1, B * NS * H, interp)
        self.cfg = _resolve(config, D, m, 1, B * NS * H, interp)
        self.M0, self.P0 = initial_states(x)
        self.final = None

    def elements(self):
        return segment_elements(self.K, *self.ins, self.a, self.C, self.cfg_ext)

    def starts(self, el):
        B, T, H, D, m = self.dims
        NS = self.NS
        Mst, Pst, MT, PT = segment_starts(*(t.reshape(B, NS, *t.shape[1:]) for t in el), self.M0, self.P0[:, :, 0])
        self.final = (MT, PT)
        return (Mst.reshape(B * NS, H, D, m).float().contiguous(),
                Pst.reshape(B * NS, H, 1, D, D).float().contiguous())

    def readouts(self, st):
        return self.readout_passes(st).run()[0]

    def readout_passes(self, st):
        return _ForwardPasses(self.K, *self.ins, self.a, st[0], st[1], self.C, self.cfg, False)


def anatomy(q, k, v, l2, r2, alpha=None, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
            segment_tokens: int = DEFAULT_SEGMENT_TOKENS, config=None, bench=None) -> dict:
    """Each level of :func:`chunk_bl_segments` timed alone (``bench(fn) -> ms``; default Triton's
    ``do_bench`` median on CUDA): ``{"elements_ms", "starts_ms", "readouts_ms"}``, the three summing to
    about the op's forward (the inputs' validation and reshapes aside), and the read-outs' two kernels
    each alone, ``readouts_cov_ms`` and ``readouts_mean_ms`` (:func:`.chunk.pass_times`); ``config`` as
    for the op.
    With ``state_dot="left"`` (no spills in the chunk kernels) it asks whether the chains, many to an
    SM here, were slowed by the spill traffic they share."""
    x, mode = enter("anatomy", q, k, v, l2, r2, alpha, 1.0, None, g=None, validate=False, write_mask=None,
                    needs_kernels=True)
    bench = bench or _do_bench
    T = x.dims[1]
    _check_segment_tokens(segment_tokens, chunk_size, T)
    lv = _Levels(x, mode == "interpret", chunk_size, T // segment_tokens, config)
    with torch.no_grad():
        el = lv.elements()
        st = lv.starts(el)
        out = {"elements_ms": bench(lv.elements), "starts_ms": bench(lambda: lv.starts(el)),
               "readouts_ms": bench(lambda: lv.readouts(st))}
        split = pass_times(lv.readout_passes(st), bench)
        return {**out, "readouts_cov_ms": split["cov_ms"], "readouts_mean_ms": split["mean_ms"]}
