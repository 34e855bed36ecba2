"""The chunked backward in segments (``ChunkConfig(bwd_segment_chunks=L)``): the chunks run in
segments of ``L`` from the last to the first, so that the four per-chunk state buffers hold ``L``
chunks; the gradients must be those of the one-segment backward (Triton interpreter, NaN-poisoned
buffers) and of float64 autograd.
"""
import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu import ChunkConfig, chunk_bl, naive_bl  # noqa: E402
from conftest import _make as make  # noqa: E402  (tests/gpu/)
from test_chunk_backward import FP32, _autograd, _calls, _decays  # noqa: E402  (tests/gpu/)

pytestmark = pytest.mark.gpu

# Segmented vs one segment: the same fp32 operations on the same values (the state scans restart
# from the stored fp32 state, the adjoint chains from the stored fp32 adjoint), and every per-chunk
# accumulator receives its atomic additions in the same order under the interpreter: measured
# bitwise equal.  The tolerance leaves room for a GPU, where the order of the atomic additions of
# the value blocks and groups varies between runs (a few fp32 ulps of the summed terms).
SAME = 1e-6

CASES = {  # id: (B, T, H, D, m, G, C, decay, init, bwd_BV), the L to try
    # NT = 5, last chunk of 11 tokens: L = 1, 2 and 3 (not dividing NT), L = NT, L > NT
    "mid": ((1, 75, 1, 4, 4, 1, 16, "mid", True, None), (1, 2, 3, 5, 8)),
    "nodecay": ((1, 70, 1, 5, 3, 1, 16, "none", False, None), (1, 2, 8)),       # D padded, prior start
    "groups": ((1, 60, 2, 4, 4, 2, 16, "strong", True, None), (1, 3)),          # G = 2, two heads, NT = 4
    "blocks": ((1, 40, 1, 4, 64, 2, 16, "mid", True, 16), (1, 2)),             # NVG = 2 value blocks a group
    "c32": ((1, 100, 1, 4, 4, 1, 32, "weak", True, None), (1, 3)),            # C = 32, NT = 4
    # two batch rows and two heads: the segment's accumulator rows of batch row 1 start at TA·H
    "batch": ((2, 50, 2, 4, 4, 1, 16, "mid", True, None), (1, 3)),
    # BD = 128: the covariance passes read P and H in row blocks (H_ROWS); G = 2, NT = 3
    "wide": ((1, 37, 1, 100, 4, 2, 16, "strong", True, None), (1, 2)),
}
PARAMS = [(cid, L) for cid, (_, Ls) in CASES.items() for L in Ls]

_BASE: dict = {}


def _case(cid):
    """Inputs, loss weights, the float64 autograd reference and the one-segment kernel gradients
    of a case (computed once per module)."""
    if cid not in _BASE:
        (B, T, H, D, m, G, C, decay, init, BV), _ = CASES[cid]
        x = _decays(make(B, T, H, D, m, G, alpha=decay != "none", init=init, seed=T + D), decay, T)
        w = torch.randn(B, T, H, m, generator=torch.Generator().manual_seed(T), dtype=torch.float64)
        ref = _autograd(naive_bl, x, w)
        base = _autograd(chunk_bl, x, w, chunk_size=C, backward="chunked", config=ChunkConfig(bwd_BV=BV))
        _BASE[cid] = (x, w, ref, base)
    return _BASE[cid]


@pytest.mark.parametrize("cid,L", PARAMS)
def test_segmented_backward_equals_one_segment_and_float64(interpret, monkeypatch, relerr, cid, L):
    """Every input's gradient (q, k, v, ℓ², r², decay, M0, P0) with ``bwd_segment_chunks = L``
    equals the one-segment chunked backward's (to ``SAME``) and float64 autograd (to ``FP32``, as
    in ``test_chunk_backward.py``)."""
    x, w, ref, base = _case(cid)
    (B, T, H, D, m, G, C, decay, init, BV), _ = CASES[cid]
    calls = _calls(monkeypatch)
    got = _autograd(chunk_bl, x, w, chunk_size=C, backward="chunked",
                    config=ChunkConfig(bwd_BV=BV, bwd_segment_chunks=L))
    assert calls == [1]                                    # the chunked kernels ran, not the fallback
    assert set(got) == set(base) == set(ref)
    for n in ref:
        assert not torch.isnan(got[n]).any(), n
        assert relerr(base[n], got[n]) <= SAME, (n, float((base[n] - got[n]).abs().max()))
        assert relerr(ref[n], got[n]) < FP32, n


@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, None])
def test_start_states_kept_every_K_segments_give_the_same_gradients(interpret, monkeypatch, relerr, K):
    """``bwd_start_every = K`` (the start states of every K-th segment kept, the others refilled per group
    in the reverse pass) with ``L = 1`` over ``NT = 5`` chunks (five segments: groups of K, a last group
    shorter or whole) gives the one-segment gradients to ``SAME``."""
    x, w, ref, base = _case("mid")
    (B, T, H, D, m, G, C, decay, init, BV), _ = CASES["mid"]
    calls = _calls(monkeypatch)
    got = _autograd(chunk_bl, x, w, chunk_size=C, backward="chunked",
                    config=ChunkConfig(bwd_BV=BV, bwd_segment_chunks=1, bwd_start_every=K))
    assert calls == [1]
    for n in ref:
        assert not torch.isnan(got[n]).any(), n
        assert relerr(base[n], got[n]) <= SAME, (n, float((base[n] - got[n]).abs().max()))


def _state_shapes(monkeypatch, x, w, C, L, K=None):
    """The shapes that the backward allocates through ``chunk._empty`` (the forward's not recorded)."""
    import assocmem.gpu.chunk as ch

    shapes, on = [], [False]
    orig = ch._empty

    def rec(shape, dtype, device):
        if on[0]:
            shapes.append(tuple(shape))
        return orig(shape, dtype, device)

    orig_views = ch._views

    def rec_views(view_shapes, device, align=32):
        # the accumulators are views of one buffer: their shapes are what the model counts
        was, on[0] = on[0], False
        if was:
            shapes.extend(tuple(sh) for sh in view_shapes)
        try:
            return orig_views(view_shapes, device, align)
        finally:
            on[0] = was

    monkeypatch.setattr(ch, "_empty", rec)
    monkeypatch.setattr(ch, "_views", rec_views)
    leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2", "alpha")}
    st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
    o, (M, P) = chunk_bl(**leaves, initial_state=st0, output_final_state=True, chunk_size=C, backward="chunked",
                         config=ChunkConfig(bwd_segment_chunks=L, bwd_start_every=K))
    on[0] = True
    ((o * w).sum() + (M * M).sum() + (P ** 2).sum()).backward()
    return shapes, {n: t.grad for n, t in leaves.items()}


@pytest.mark.parametrize("L,NB", [(None, 5), (2, 2), (3, 3), (8, 5)])
def test_segmented_backward_state_buffers_hold_L_chunks(interpret, monkeypatch, make_inputs, L, NB):
    """``Ps``, ``Hs`` ``[B, H, G, NB, D, D]`` and ``Ms``, ``Gs`` ``[B, H, NB, D, m]`` with
    ``NB = min(L, NT)`` chunks (``NT = 5``; sizes chosen so that no other buffer has these shapes),
    and none over all ``NT`` chunks when ``L < NT``; then the passes' accumulators also hold one
    segment (five per-token ``[B, NB·C, H, D]``, ``dA_q, dN`` ``[B, H, G, NB, C, C]``), and the only
    ``[B, T, H, D]`` buffers are the gradients dq, dk, dg."""
    B, T, H, D, m, G, C = 1, 75, 1, 8, 12, 2, 16
    NT = -(-T // C)
    x = make_inputs(B, T, H, D, m, G, alpha=True, init=True, seed=5)
    w = torch.randn(B, T, H, m, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    shapes, grads = _state_shapes(monkeypatch, x, w, C, L)
    assert shapes.count((B, H, G, NB, D, D)) == 2, shapes                 # Ps, Hs
    assert shapes.count((B, H, NB, D, m)) == 2, shapes                    # Ms, Gs
    if NB < NT:
        assert (B, H, G, NT, D, D) not in shapes and (B, H, NT, D, m) not in shapes, shapes
    # the segment-start states (P, M at the start of every segment but the first) and the two
    # buffers of each adjoint carried between segments, beside dM0, dP0
    S = -(-NT // NB)
    carried = min(2, S - 1)
    assert shapes.count((B, H, G, D, D)) == (S - 1) + carried + 1, shapes
    assert shapes.count((B, H, D, m)) == (S - 1) + carried + 1, shapes
    if NB < NT:
        assert shapes.count((B, NB * C, H, D)) == 5, shapes
        assert shapes.count((B, H, G, NB, C, C)) == 2 and (B, H, G, NT, C, C) not in shapes, shapes
        assert shapes.count((B, T, H, D)) == 3, shapes
    else:
        assert shapes.count((B, T, H, D)) == 5 + 3, shapes
    assert all(not torch.isnan(g).any() for g in grads.values())


@pytest.mark.parametrize("K,held", [(1, 4), (2, 2 + 1), (3, 1 + 2), (4, 1 + 3), (5, 0 + 4), (None, 2 + 1)])
def test_start_states_held_are_the_kept_ones_and_the_slots(interpret, monkeypatch, make_inputs, K, held):
    """Five segments (``L = 1``, ``NT = 5``): the backward holds the start states of segments K, 2K, … ≤ 4
    and ``K − 1`` slots for the others (``None``: K = 2, the integer nearest √5), each a ``[B, H, G, D, D]``
    and a ``[B, H, D, m]``, beside the two buffers of each carried adjoint and dP0, dM0; K = 1 holds all
    four as before."""
    B, T, H, D, m, G, C = 1, 75, 1, 8, 12, 2, 16
    x = make_inputs(B, T, H, D, m, G, alpha=True, init=True, seed=5)
    w = torch.randn(B, T, H, m, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    shapes, grads = _state_shapes(monkeypatch, x, w, C, 1, K)
    assert shapes.count((B, H, G, D, D)) == held + 2 + 1, shapes
    assert shapes.count((B, H, D, m)) == held + 2 + 1, shapes
    assert all(not torch.isnan(g).any() for g in grads.values())


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_bad_bwd_start_every(bad):
    with pytest.raises(ValueError, match=r"config\.bwd_start_every"):
        ChunkConfig(bwd_start_every=bad)


def test_backward_buffer_bytes_are_the_shapes_allocated(interpret, monkeypatch, make_inputs):
    """``chunk.backward_buffer_bytes`` (the model that the bench reports beside its measured peak and
    the CUDA test checks the peak against) counts the state, accumulator and segment-start buffers
    that the backward allocates, with and without segments (sizes chosen so that the shapes it counts
    are told apart; with one segment the per-token accumulators share their shape with dq, dk, dg)."""
    import math

    from assocmem.gpu.chunk import backward_buffer_bytes

    B, T, H, D, m, G, C = 2, 75, 3, 8, 12, 1, 16
    NT = -(-T // C)
    x = make_inputs(B, T, H, D, m, G, alpha=True, init=True, seed=6)
    w = torch.randn(B, T, H, m, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    # L = 8 >= NT is one segment: the model says so without running it again (the run is None's)
    assert backward_buffer_bytes(B, T, H, D, m, G, C, 8) == backward_buffer_bytes(B, T, H, D, m, G, C, None)
    for L, K in ((None, None), (2, None), (1, 1), (1, 2), (1, 3)):
        shapes, _ = _state_shapes(monkeypatch, x, w, C, L, K)
        n = lambda s: shapes.count(s)                                     # noqa: E731
        by = lambda s: 4 * math.prod(s)                                   # noqa: E731
        NB = min(L or NT, NT)
        S = -(-NT // NB)
        NA, TA = (NB, NB * C) if S > 1 else (NT, T)
        assert n((B, TA, H, D)) == (5 if S > 1 else 5 + 3), (L, shapes)   # + dq, dk, dg with one segment
        assert n((B, H, G, NA, C, C)) == 2 and n((B, H, G, NA, C, D)) == 1 and n((B, H, NA, D)) == 2, (L, shapes)
        assert n((B, T, H, G)) == 2, (L, shapes)                           # dβ and dr²
        d = backward_buffer_bytes(B, T, H, D, m, G, C, L, K)
        assert d["states"] == 2 * by((B, H, G, NB, D, D)) + 2 * by((B, H, NB, D, m))
        assert n((B, H, G, NB, D, D)) == 2 and n((B, H, NB, D, m)) == 2
        assert d["accumulators"] == (5 * by((B, TA, H, D)) + 2 * by((B, H, G, NA, C, C)) + by((B, H, G, NA, C, D))
                                     + 2 * by((B, H, NA, D)) + by((B, T, H, G)))
        # the segment-start states and carried adjoints: every [B, H, G, D, D] / [B, H, D, m] but dP0, dM0
        assert d["segment_states"] == (n((B, H, G, D, D)) - 1) * by((B, H, G, D, D)) + \
            (n((B, H, D, m)) - 1) * by((B, H, D, m)), (L, d)
        assert (d["segment_states"] == 0) is (S == 1)


def test_accumulator_views_are_disjoint_aligned_and_cleared_together():
    """``chunk._views``: the shapes asked for, contiguous, each starting at a multiple of 32 elements
    (128 bytes), none overlapping another, all inside the one buffer, so one ``zero_()`` clears them."""
    from assocmem.gpu.chunk import _views

    shapes = ((2, 3, 5), (7,), (1, 1, 33), (4, 4))
    flat, views = _views(shapes, "cpu")
    assert [tuple(v.shape) for v in views] == list(shapes)
    base = flat.data_ptr()
    spans = []
    for v in views:
        assert v.is_contiguous() and v.data_ptr() >= base
        a = (v.data_ptr() - base) // 4
        assert a % 32 == 0
        spans.append((a, a + v.numel()))
    assert all(e0 <= a1 for (_, e0), (a1, _) in zip(spans, spans[1:])) and spans[-1][1] <= flat.numel()
    for i, v in enumerate(views):
        v.fill_(i + 1.0)
    assert [float(v.mean()) for v in views] == [1.0, 2.0, 3.0, 4.0]      # no view wrote into another
    flat.zero_()
    assert all(float(v.abs().max()) == 0.0 for v in views)


def test_bwd_segments_ranges():
    from assocmem.gpu.chunk import _bwd_segments

    assert _bwd_segments(None, 5) == [(0, 5)]
    assert _bwd_segments(5, 5) == [(0, 5)] and _bwd_segments(9, 5) == [(0, 5)]
    assert _bwd_segments(1, 3) == [(0, 1), (1, 2), (2, 3)]
    assert _bwd_segments(2, 5) == [(0, 2), (2, 4), (4, 5)]
    assert _bwd_segments(16, 128) == [(16 * i, 16 * i + 16) for i in range(8)]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, False, "4"])
def test_bad_bwd_segment_chunks(bad):
    with pytest.raises(ValueError, match=r"config\.bwd_segment_chunks"):
        ChunkConfig(bwd_segment_chunks=bad)


def test_good_bwd_segment_chunks():
    for good in (None, 1, 3, 1 << 20):
        assert ChunkConfig(bwd_segment_chunks=good).bwd_segment_chunks == good


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the compiled kernels")
@pytest.mark.parametrize("decay", ("mid", "none"))
def test_cuda_segmented_backward_equals_one_segment_in_less_memory(relerr, decay):
    """Compiled on a GPU (fp32 inputs, C = 16, NT = 64): ``bwd_segment_chunks = 16`` gives the one-segment
    gradients to ``SAME`` (the atomic additions' order may differ) and a lower peak of allocated memory."""
    B, T, H, D, m = 2, 1024, 4, 64, 64
    x = _decays(make(B, T, H, D, m, alpha=decay != "none", init=True, seed=7, dtype=torch.float32), decay, T)
    x = {k: (v.cuda() if torch.is_tensor(v) else tuple(t.cuda() for t in v) if isinstance(v, tuple) else v)
         for k, v in x.items()}
    w = torch.randn(B, T, H, m, device="cuda")
    out, peak = {}, {}
    for L in (None, 16):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out[L] = _autograd(chunk_bl, x, w, chunk_size=16, backward="chunked",
                           config=ChunkConfig(bwd_segment_chunks=L))
        torch.cuda.synchronize()
        peak[L] = torch.cuda.max_memory_allocated() - base
    for n in out[None]:
        assert relerr(out[16][n].double(), out[None][n].double()) <= SAME, n
    assert peak[16] < peak[None], peak
    # from the shapes: the four state buffers and the segment-local accumulators hold 16 of the 64
    # chunks, for a few segment-start states; at least three quarters of that saving must show
    from assocmem.gpu.chunk import backward_buffer_bytes
    saved = sum(backward_buffer_bytes(B, T, H, D, m, 1, 16, None).values()) - sum(
        backward_buffer_bytes(B, T, H, D, m, 1, 16, 16).values())
    assert saved > 0.6 * sum(backward_buffer_bytes(B, T, H, D, m, 1, 16, None).values())
    assert peak[None] - peak[16] >= 0.75 * saved, (peak, saved)
