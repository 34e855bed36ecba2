"""The chunked Triton kernels (``chunk_bl`` on the kernel path), through Triton's interpreter.

Every kernel buffer is NaN-poisoned first (``interpret`` fixture).  References:
the float64 numpy filter (``numerics.bl_filter``, an independent implementation),
float64 ``naive_bl`` and the token-by-token kernel.  Shapes are tiny (the
interpreter runs each program's loops in Python); the device run is
``assocmem gpu bench``.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from assocmem.gpu import ChunkConfig, chunk_bl, chunk_bl_trace, fused_recurrent_bl, naive_bl  # noqa: E402

pytestmark = pytest.mark.gpu

FP32 = 1e-5          # relative RMS error allowed for fp32 arithmetic (measured ~2e-7)


def _decays(x, kind, T):
    g = torch.Generator().manual_seed(7)
    if kind == "strong":
        x["alpha"] = x["alpha"] * 0.4                                  # 0.2 … 0.4
    elif kind == "signed_zeros":
        x["alpha"] = x["alpha"] * torch.sign(torch.randn(x["alpha"].shape, generator=g, dtype=torch.float64))
        x["alpha"][:, T // 2] = 0.0
    return x


CASES = [  # (B, T, H, D, m, G, C, decay, init, l2_zero)
    (1, 17, 2, 6, 4, 1, 16, "weak", True, False),           # one boundary, D not a power of two
    (1, 1, 1, 4, 4, 1, 16, "weak", False, False),           # a single token
    (1, 40, 1, 8, 8, 2, 16, "strong", False, False),        # grouped noise, three chunks, strong decay
    (1, 35, 1, 5, 4, 1, 32, "signed_zeros", True, False),   # negative and zero decays (products, no division)
    (1, 33, 1, 16, 16, 1, 32, "none", True, True),          # identity dynamics, no process noise
    (1, 70, 1, 4, 8, 2, 64, "weak", True, False),           # C = 64 with a partial chunk, groups
]


@pytest.mark.parametrize("kernel", ["auto", "rows"])
@pytest.mark.parametrize("B,T,H,D,m,G,C,decay,init,l2_zero", CASES)
def test_kernel_equals_numpy_filter_and_recurrences(interpret, make_inputs, numpy_reference, relerr,
                                                    B, T, H, D, m, G, C, decay, init, l2_zero, kernel):
    """Both covariance kernels: ``auto`` takes the quotient (matmul) form unless a chunk's
    cumulative decay reaches 0 (the signed-zeros case), ``rows`` the products-only form."""
    from assocmem.gpu.chunk import _decays_safe

    x = make_inputs(B, T, H, D, m, G, alpha=decay != "none", init=init, seed=T + C + D)
    x = _decays(x, decay, T)
    if l2_zero:
        x["l2"] = torch.zeros_like(x["l2"])
    if kernel == "auto" and decay != "none":
        assert _decays_safe(x["alpha"], C) == (decay != "signed_zeros")
    if kernel == "auto" and C == 64:
        kernel = "matmul"                  # auto takes the row kernel at C = 64: test the quotient one too
    o_np, M_np, P_np, _ = numpy_reference(x)
    o, (M, P) = chunk_bl(**x, chunk_size=C, output_final_state=True, config=ChunkConfig(cov_kernel=kernel))
    assert not (torch.isnan(o).any() or torch.isnan(M).any() or torch.isnan(P).any())
    assert o.dtype == x["v"].dtype and M.dtype == torch.float32
    P_np = np.asarray(P_np) if G > 1 else np.asarray(P_np)
    assert relerr(o_np, o) < FP32
    assert relerr(M_np, M) < FP32
    assert relerr(P_np.reshape(P.shape), P) < FP32
    assert bool((P == P.transpose(-1, -2)).all())                      # symmetrised at every chunk end
    # the token-by-token kernel (same arithmetic precision) and float64 naive_bl
    of, (Mf, Pf) = fused_recurrent_bl(**x, output_final_state=True)
    o_r, _ = naive_bl(**x, output_final_state=True)
    assert relerr(of, o) < FP32 and relerr(Pf, P) < FP32 and relerr(o_r, o) < FP32


def test_segment_ranges():
    """The forward's segments cover the chunks in order, none empty; "auto" is one segment on a
    CPU, below 16 chunks and when the covariance programs fill more than half the SMs (S1, S2 on
    an H200), else at most 8 segments of at least 8 chunks (S3)."""
    from assocmem.gpu.chunk import _segments

    for NT in (1, 2, 7, 16, 63, 128, 512):
        for S in ("auto", 1, 3, 8, 1000):
            for cuda in (False, True):
                segs = _segments(S, NT, cuda, 64, 132)
                assert segs[0][0] == 0 and segs[-1][1] == NT
                assert all(a < b for a, b in segs) and all(segs[i][1] == segs[i + 1][0] for i in range(len(segs) - 1))
    assert len(_segments("auto", 512, False, 64, 132)) == 1 and len(_segments("auto", 15, True, 64, 132)) == 1
    assert len(_segments("auto", 512, True, 64, 132)) == 8 and len(_segments("auto", 24, True, 64, 132)) == 3
    assert len(_segments("auto", 128, True, 128, 132)) == 1 and len(_segments("auto", 128, True, 66, 132)) == 8
    # a 4-warp mean program of the wide tile fits beside a covariance program: one of those an SM is room
    # enough (S1, S2, where it was measured); narrower tiles keep the older rule (not measured)
    assert len(_segments("auto", 128, True, 128, 132, mean_warps=4, mean_tile=4096)) == 8
    assert len(_segments("auto", 128, True, 133, 132, mean_warps=4, mean_tile=4096)) == 1
    assert len(_segments("auto", 128, True, 128, 132, mean_warps=8, mean_tile=4096)) == 1
    assert len(_segments("auto", 128, True, 128, 132, mean_warps=4, mean_tile=1024)) == 1
    assert all(b - a >= 8 for a, b in _segments("auto", 100, True, 64, 132))
    for bad in (0, -1, 2.0, True, "many"):
        with pytest.raises(ValueError, match="config.segments"):
            ChunkConfig(segments=bad)


# the last case is the default mean launch at S1-S3 on a GPU (4 warps, BV = 64, 3xTF32), which the
# interpreter's own default never takes
@pytest.mark.parametrize("kernel,segments,with_grads,mean", [
    ("matmul", 3, True, {}), ("matmul", 100, False, {}), ("rows", 2, False, {}),
    ("matmul", 3, True, {"BV": 64, "mean_warps": 4, "mean_precision": "tf32x3"})])
def test_segmented_forward_equals_one_launch(interpret, make_inputs, numpy_reference, relerr, kernel, segments,
                                             with_grads, mean):
    """Running the chunks as several launches (the states handed over through buffers between
    segments, as the GPU path does to overlap the passes) gives the float64 filter's outputs,
    final states and the same u, β as one launch; the gradients through it too."""
    x = make_inputs(1, 70, 2, 8, 6, 2, alpha=True, init=True, seed=11)
    o_np, M_np, P_np, _ = numpy_reference(x)
    cfg = ChunkConfig(cov_kernel=kernel, segments=segments, **mean)
    o, (M, P) = chunk_bl(**x, chunk_size=16, output_final_state=True, config=cfg)
    assert relerr(o_np, o) < FP32 and relerr(M_np, M) < FP32
    assert relerr(np.asarray(P_np).reshape(P.shape), P) < FP32
    _, _, u1, b1 = chunk_bl_trace(**x, chunk_size=16, config=ChunkConfig(cov_kernel=kernel, segments=1))
    _, _, u2, b2 = chunk_bl_trace(**x, chunk_size=16, config=cfg)
    assert torch.equal(u1, u2) and torch.equal(b1, b2)
    if not with_grads:
        return
    grads = []
    for c in (cfg, ChunkConfig(cov_kernel=kernel, segments=1)):
        leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2", "alpha")}
        out, _ = chunk_bl(**{**x, **leaves}, chunk_size=16, config=c)
        out.square().sum().backward()
        grads.append({n: t.grad for n, t in leaves.items()})
    for n in grads[0]:
        assert relerr(grads[1][n], grads[0][n]) < FP32, n


@pytest.mark.parametrize("kernel", ["matmul", "rows"])
def test_write_direction_and_precision_equal_the_recurrence(interpret, make_inputs, relerr, kernel):
    """u_t and β_t (the fused backward's inputs) equal the token-by-token kernel's."""
    from assocmem.gpu import fused_recurrent_bl_trace

    x = make_inputs(1, 37, 2, 8, 4, 2, alpha=True, init=True, seed=3)
    _, _, u, b = chunk_bl_trace(**x, chunk_size=16, config=ChunkConfig(cov_kernel=kernel))
    _, _, uf, bf = fused_recurrent_bl_trace(**x)
    assert u.shape == uf.shape and b.shape == bf.shape
    assert relerr(uf, u) < FP32 and relerr(bf, b) < FP32


@pytest.mark.parametrize("path", ["torch", "kernel"])
def test_quotient_form_guard(interpret, path):
    """``_decays_safe`` bounds |log γ| inside each chunk (not over the whole sequence); the
    Triton guard pass and the torch form agree on every case."""
    from assocmem.gpu import chunk as ch
    from assocmem.gpu.chunk import LOG_GAMMA_BOUND

    K = ch.chunk_kernels(True) if path == "kernel" else None
    _decays_safe = lambda a, C: ch._decays_safe(a, C, K)  # noqa: E731

    a = torch.full((1, 64, 1, 3), 0.5)
    # 16 tokens of 0.5 per chunk: |log γ| ≤ 16 log 2 ≈ 11; over 64 tokens it would be 44
    assert _decays_safe(a, 16) and _decays_safe(a, 64)
    deep = float(torch.exp(torch.tensor(-LOG_GAMMA_BOUND / 10)))   # 16 of these: 1.6x the bound
    a[0, :16, 0, 1] = deep
    assert not _decays_safe(a, 16)
    b = torch.full((1, 64, 1, 3), 0.5)
    b[0, 21, 0, 1] = deep                        # one deep decay in chunk 1: |log γ| = 6 + 15 log 2
    b[0, 32:, 0, 1] = deep                       # chunks 2 and 3: sixteen each, past the bound
    assert not _decays_safe(b, 16)
    b[0, 32:, 0, 1] = 1.0
    assert _decays_safe(b, 16)
    z = torch.full((1, 20, 1, 2), 0.9)
    z[0, 3, 0, 0] = 0.0
    assert not _decays_safe(z, 16)                                 # γ = 0: no quotient
    assert _decays_safe(None, 16)
    big = torch.full((1, 16, 1, 1), 1e3)                           # growth overflows the other way
    assert not _decays_safe(big, 16)
    assert _decays_safe(big[:, :8], 16)                            # 8 log(1e3) ≈ 55 ≤ 60 (padding adds 0)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 40), C=st.sampled_from([16, 32]),
       D=st.integers(1, 9), G=st.sampled_from([1, 2]))
def test_kernel_equals_recurrence_property(interpret, make_inputs, relerr, seed, T, C, D, G):
    x = make_inputs(1, T, 1, D, 2 * G, G, alpha=True, init=bool(seed % 2), seed=seed)
    o, (M, P) = chunk_bl(**x, chunk_size=C, output_final_state=True)
    o_r, (M_r, P_r) = naive_bl(**x, output_final_state=True)
    assert relerr(o_r, o) < FP32 and relerr(M_r, M) < FP32 and relerr(P_r, P) < FP32


def test_gradients_equal_float64_recurrence(interpret, make_inputs, relerr):
    """Chunked forward + the fused Triton backward: every input's gradient, the
    final-state cotangents included, against autograd through float64 naive_bl."""
    x = make_inputs(1, 21, 2, 4, 4, 2, alpha=True, init=True, seed=40)
    w = torch.randn(1, 21, 2, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    grads = []
    for fn, kw in ((naive_bl, {}), (chunk_bl, {"chunk_size": 16})):
        leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2", "alpha")}
        st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
        o, (M, P) = fn(**leaves, initial_state=st0, output_final_state=True, **kw)
        ((o * w).sum() + (M * M).sum() + (P ** 2).sum()).backward()
        gP = st0[1].grad
        grads.append([t.grad for t in leaves.values()] + [st0[0].grad, 0.5 * (gP + gP.transpose(-1, -2))])
    for ref, got in zip(*grads):
        assert not torch.isnan(got).any()
        assert relerr(ref, got) < 1e-4


def test_log_decay_and_bf16_inputs(interpret, make_inputs, relerr):
    x = make_inputs(1, 20, 1, 8, 8, alpha=True, seed=5)
    o_ref, _ = naive_bl(**x)
    g = torch.log(x.pop("alpha"))
    o, _ = chunk_bl(**x, g=g, chunk_size=16)
    assert relerr(o_ref, o) < FP32
    xb = {n: (t.to(torch.bfloat16) if n in ("q", "k", "v") else t) for n, t in x.items()}
    ob, _ = chunk_bl(**xb, g=g, chunk_size=16)
    assert ob.dtype == torch.bfloat16
    o32, _ = naive_bl(**{n: (t.double() if torch.is_tensor(t) else t) for n, t in xb.items()}, g=g)
    assert relerr(o32, ob) < 1e-2                                    # bf16 output rounding only


def test_dispatch_and_bad_input(monkeypatch, make_inputs):
    x = make_inputs(1, 9, 1, 4, 4, alpha=True, seed=6)
    o_r, _ = naive_bl(**x)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    o_t, _ = chunk_bl(**x, chunk_size=16)                 # CPU, no interpreter: the float64 torch form
    assert float((o_t - o_r).abs().max()) < 1e-12
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    o_k, _ = chunk_bl(**x, chunk_size=16)                 # the kernels: fp32 arithmetic
    err = float((o_k - o_r).abs().max())
    assert 0 < err < 1e-5
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_bl(**x, chunk_size=8)
    big = make_inputs(1, 2, 1, 129, 2, seed=1)
    with pytest.raises(ValueError, match="D=129"):
        chunk_bl(**big)
    bad = dict(x, l2=-x["l2"])
    with pytest.raises(ValueError, match="l2"):
        chunk_bl(**bad)
    with pytest.raises(ValueError, match="config.cov_kernel"):
        ChunkConfig(cov_kernel="fast")
    for bad in ({"BV": 8}, {"bwd_BV": 24}, {"cov_warps": 5}, {"mean_precision": "tf32"},
                {"bwd_precision": "fp16"}, {"bwd_reduce": "tree"}):
        with pytest.raises(ValueError, match=f"config.{next(iter(bad))}"):
            ChunkConfig(**bad)
    with pytest.raises(ValueError, match="ChunkConfig"):
        chunk_bl(**x, chunk_size=16, config={"cov_kernel": "rows"})
    with pytest.raises(ValueError, match="backward"):
        chunk_bl(**x, chunk_size=16, backward="sideways")
    with pytest.raises(ValueError, match="chunk_bl_trace"):
        monkeypatch.delenv("TRITON_INTERPRET")
        chunk_bl_trace(**x)


def test_bl_chunked_triton_claim_layer(monkeypatch):
    """The ``bl.chunked`` triton check passes, reports its gap, and fails at a zero tolerance."""
    from assocmem.claims import bl_chunked
    from assocmem.registry import Evidence

    ev = Evidence()
    bl_chunked.chunked_triton(ev)
    assert ev.layers_run == ["triton"]
    assert not ev.failures, [f.name for f in ev.failures]
    assert 0 < ev.computed["triton_worst_rel_rms"] < bl_chunked.FP32_REL
    monkeypatch.setattr(bl_chunked, "FP32_REL", 0.0)
    ev = Evidence()
    bl_chunked.chunked_triton(ev)
    assert ev.failures


def test_covariance_kernel_choice(interpret):
    """``auto`` takes the quotient kernel only where it is valid and was measured faster (D ≤ 64 with C ≤ 32 on
    the H200; D = 128 with C = 16, at 8 warps, on an H100: ``benchmarks/h100_S2_fwd_quotient.json``)."""
    from assocmem.gpu.chunk import _cov_kernel, chunk_kernels, default_chunk_config

    K = chunk_kernels(True)
    a = torch.full((1, 40, 1, 8), 0.9)
    pick = lambda D, C, a=a, **kw: _cov_kernel(K, ChunkConfig(**kw), a, C, D)  # noqa: E731
    assert pick(64, 16) == (K.chunk_cov_fwd_mm_kernel, 4)
    assert pick(64, 32) == (K.chunk_cov_fwd_mm_kernel, 8)
    assert pick(64, 64) == (K.chunk_cov_fwd_kernel, 8)
    assert pick(128, 16) == (K.chunk_cov_fwd_mm_kernel, 8)
    assert pick(128, 32) == (K.chunk_cov_fwd_kernel, 8)
    assert pick(128, 16, cov_warps=4) == (K.chunk_cov_fwd_mm_kernel, 4)
    assert pick(16, 16, a=None) == (K.chunk_cov_fwd_mm_kernel, 4)
    z = a.clone()
    z[0, 3, 0, 2] = 0.0
    assert pick(64, 16, a=z) == (K.chunk_cov_fwd_kernel, 8)
    assert pick(128, 16, a=z) == (K.chunk_cov_fwd_kernel, 8)
    assert pick(64, 16, a=z, cov_kernel="matmul", cov_warps=2) == (K.chunk_cov_fwd_mm_kernel, 2)
    assert default_chunk_config(128, 128, 1).mean_precision == "tf32x3"
    assert default_chunk_config(64, 64, 1).mean_precision == "ieee"


@pytest.mark.parametrize("shape, mean", [
    ((8, 16, 64, 64), (64, 4, "tf32x3")),        # S1: 128 covariance programs, one an SM; overlapped
    ((32, 4, 128, 128), (64, 4, "tf32x3")),      # S2
    ((4, 16, 64, 64), (64, 4, "tf32x3")),        # S3: 64 programs
    ((256, 4, 16, 16), (16, 4, "ieee")),         # S4: 1,024 programs, more than the SMs: the older rule
    ((1, 8, 64, 64), (16, 4, "ieee")),           # 8 programs: not measured with the overlap, older rule
    ((32, 4, 16, 16), (16, 4, "ieee")),          # 128 programs but a narrow tile: not measured, older rule
    ((16, 4, 64, 32), (16, 4, "ieee")),          # 64 programs, 32 value columns: older rule
    ((64, 4, 64, 64), (64, 8, "ieee")),          # 256 programs
])
def test_default_mean_launch_by_shape(shape, mean):
    """Where the covariance pass has 64 to one-an-SM programs (S1–S3 on an H200's 132 SMs) the default
    mean launch is the 4-warp one that fits beside a covariance program (BV ≤ 64, 3xTF32 on the wide
    tiles), and "auto" segments then overlap the passes; elsewhere the older launch rule holds, and the
    interpreter (no SM count) keeps it too."""
    from assocmem.gpu.chunk import _segments, default_chunk_config

    B, H, D, m = shape
    cfg = default_chunk_config(D, m, 1, B * H, 132)
    assert (cfg.BV, cfg.mean_warps, cfg.mean_precision) == mean
    assert (cfg.bwd_BV, cfg.bwd_warps) == (min(32, m), 4 if D <= 64 else 8)     # the backward is unchanged
    overlapped = len(_segments(cfg.segments, 2048 // 16, True, B * H, 132, cfg.mean_warps,
                               cfg.BV * max(16, D))) > 1
    # up to half the SMs the older rule overlaps too; above, only the measured wide 4-warp launch does
    assert overlapped == (B * H <= 66 or (B * H <= 132 and mean == (64, 4, "tf32x3")))
    assert default_chunk_config(D, m, 1, B * H) == default_chunk_config(D, m, 1, B * H, 0)
    assert default_chunk_config(D, m, 1, 0, 132).mean_warps == (8 if D * min(m, 64) >= 4096 else 4)


def test_default_chunk_size_is_the_fastest_measured(interpret, make_inputs):
    """chunk_bl's default is the chunk size that the committed H200 grids measured fastest at every shape
    (covariance pass and forward+backward, over every warp setting), and calling without ``chunk_size``
    runs exactly that configuration (bitwise equal to ``chunk_size=16``, not to 64)."""
    import inspect
    import json
    from pathlib import Path

    from assocmem.gpu.naive import DEFAULT_CHUNK_SIZE, chunk_bl_torch

    root = Path(__file__).resolve().parents[2] / "benchmarks"
    for name in ("h200_chunk_grid_cov.json", "h200_chunk_grid_fb.json"):
        for shape, entries in json.loads((root / name).read_text())["shapes"].items():
            best = {}
            for key, ms in entries.items():
                if isinstance(ms, float):                      # "<mode>|C<size>|<launch>": ms
                    C = int(key.split("|")[1][1:])
                    best[C] = min(best.get(C, float("inf")), ms)
            assert set(best) == {16, 32, 64} and min(best, key=best.get) == DEFAULT_CHUNK_SIZE, (name, shape, best)
    for f in (chunk_bl, chunk_bl_trace, chunk_bl_torch):
        assert inspect.signature(f).parameters["chunk_size"].default == DEFAULT_CHUNK_SIZE
    x = make_inputs(1, 40, 1, 4, 4, alpha=True, dtype=torch.float32, seed=3)
    o = chunk_bl(**x)[0]
    assert torch.equal(o, chunk_bl(**x, chunk_size=16)[0]) and not torch.equal(o, chunk_bl(**x, chunk_size=64)[0])
    assert torch.equal(chunk_bl_trace(**x)[2], chunk_bl_trace(**x, chunk_size=16)[2])


def _grads(fn, x, w, **kw):
    """Gradients of ``(o·w).sum() + ΣM + ΣP²`` for every input given (``alpha`` may be None) and both
    initial states (the covariance's symmetrised)."""
    names = [n for n in ("q", "k", "v", "l2", "r2", "alpha") if x[n] is not None]
    leaves = {n: x[n].clone().requires_grad_(True) for n in names}
    st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
    o, (M, P) = fn(**{**x, **leaves, "initial_state": st0}, output_final_state=True, **kw)
    ((o * w).sum() + M.sum() + (P ** 2).sum()).backward()
    gP = st0[1].grad
    return [t.grad for t in leaves.values()] + [st0[0].grad, 0.5 * (gP + gP.transpose(-1, -2))]


@pytest.mark.parametrize("decay", ["none", "weak"])
@pytest.mark.parametrize("init", [False, True])
def test_state_left_equals_state_right(interpret, make_inputs, numpy_reference, relerr, decay, init):
    """``ChunkConfig(state_dot="left")``: the quotient kernel and the chunked backward's covariance kernels
    form their ``C×D`` by ``D×D`` products with the symmetric state as the left operand (far fewer
    register spills offline); the same filter and the same gradients as ``"right"``, to fp32 rounding,
    and the float64 filter's."""
    x = make_inputs(1, 40, 2, 8, 8, alpha=decay != "none", init=True, seed=7)
    x = _decays(x, decay, 40)
    if not init:
        x["initial_state"] = (torch.zeros_like(x["initial_state"][0]), x["initial_state"][1])
    o_np, M_np, P_np, _ = numpy_reference(x)
    w = torch.randn(1, 40, 2, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    outs, grads = {}, {}
    for sd in ("right", "left"):
        cfg = ChunkConfig(cov_kernel="matmul", state_dot=sd)
        o, (M, P) = chunk_bl(**x, chunk_size=16, output_final_state=True, config=cfg)
        assert relerr(o_np, o) < FP32 and relerr(M_np, M) < FP32
        assert relerr(np.asarray(P_np).reshape(P.shape), P) < FP32
        outs[sd] = (o, P)
        grads[sd] = _grads(chunk_bl, x, w, chunk_size=16, backward="chunked", config=cfg)
    assert relerr(outs["right"][0], outs["left"][0]) < 1e-6
    assert relerr(outs["right"][1], outs["left"][1]) < 1e-6
    ref = _grads(naive_bl, x, w)
    for g_r, g_l, g64 in zip(grads["right"], grads["left"], ref):
        assert not torch.isnan(g_l).any()
        assert relerr(g_r, g_l) < 1e-5 and relerr(g64, g_l) < 1e-4


def test_state_dot_is_checked():
    with pytest.raises(ValueError, match="config.state_dot must be one of 'right', 'left'"):
        ChunkConfig(state_dot="up")
    with pytest.raises(ValueError, match="config.bwd_state_dot must be one of 'right', 'left'"):
        ChunkConfig(bwd_state_dot="up")


def test_backward_state_dot_is_its_own(interpret, make_inputs, relerr, monkeypatch):
    """``bwd_state_dot`` places the state in the backward's covariance kernels alone (None: as
    ``state_dot``; ``"right"`` by default): the forward left with the backward right gives the gradients of both right, and the
    backward's kernels are launched with the backward's setting, the forward's with the forward's."""
    from assocmem.gpu import chunk as chunk_mod

    x = make_inputs(1, 40, 2, 8, 8, alpha=True, init=True, seed=5)
    w = torch.randn(1, 40, 2, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    launched = []
    real = chunk_mod.chunk_bwd_kernels

    class Spy:
        def __init__(self, K):
            self.K = K

        def __getattr__(self, name):
            kern = getattr(self.K, name)
            if not hasattr(kern, "__getitem__"):
                return kern

            class Launch:
                def __getitem__(_, grid):
                    def run(*a, **kw):
                        if "STATE_LEFT" in kw:
                            launched.append(kw["STATE_LEFT"])
                        return kern[grid](*a, **kw)
                    return run
            return Launch()

    monkeypatch.setattr(chunk_mod, "chunk_bwd_kernels", lambda interp: Spy(real(interp)))
    g_mixed = _grads(chunk_bl, x, w, chunk_size=16, backward="chunked",
                     config=ChunkConfig(cov_kernel="matmul", state_dot="left", bwd_state_dot="right"))
    assert launched and not any(launched)
    launched.clear()
    g_left = _grads(chunk_bl, x, w, chunk_size=16, backward="chunked",
                    config=ChunkConfig(cov_kernel="matmul", state_dot="left", bwd_state_dot=None))
    assert launched and all(launched)
    launched.clear()
    g_right = _grads(chunk_bl, x, w, chunk_size=16, backward="chunked",
                     config=ChunkConfig(cov_kernel="matmul", state_dot="right"))
    assert launched and not any(launched)
    # the default is the split: the forward's state on the left, the backward's on the right
    assert (ChunkConfig().state_dot, ChunkConfig().bwd_state_dot) == ("left", "right")
    for a, b, c in zip(g_mixed, g_right, g_left):
        assert relerr(b, a) < 1e-5 and relerr(c, a) < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the compiled kernels")
def test_cuda_state_left_equals_state_right(make_inputs, numpy_reference, relerr):
    """Compiled on the GPU at the benchmark's D = 64, C = 16: both places of the state in the covariance
    kernels' products give the float64 filter to fp32 rounding, forward and gradients."""
    x = make_inputs(2, 256, 2, 64, 64, alpha=True, init=True, seed=3, dtype=torch.float32)
    o_np, _, P_np, _ = numpy_reference(x)
    xc = {k: (v.cuda() if torch.is_tensor(v) else tuple(t.cuda() for t in v) if v is not None else None)
          for k, v in x.items()}
    outs = []
    grads = []
    for sd in ("right", "left"):
        cfg = ChunkConfig(cov_kernel="matmul", state_dot=sd)
        o, (M, P) = chunk_bl(**xc, chunk_size=16, output_final_state=True, config=cfg)
        assert relerr(o_np, o.cpu()) < 1e-4 and relerr(np.asarray(P_np).reshape(P.shape), P.cpu()) < 1e-4
        outs.append(o)
        leaves = {n: xc[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2", "alpha")}
        o2, _ = chunk_bl(**leaves, initial_state=xc["initial_state"], chunk_size=16, backward="chunked", config=cfg)
        o2.sum().backward()
        grads.append([t.grad for t in leaves.values()])
    assert relerr(outs[0].double().cpu(), outs[1].cpu()) < 1e-5
    for g_r, g_l in zip(*grads):
        assert relerr(g_r.double().cpu(), g_l.cpu()) < 1e-4


@pytest.mark.parametrize("kernel,sd", [("matmul", "left"), ("matmul", "right"), ("rows", "left")])
def test_s2_key_width_kernels_equal_numpy_filter(interpret, make_inputs, numpy_reference, relerr, kernel, sd):
    """At S2's key width (``D = 128``, one ``128×128`` tile) both covariance kernels, the quotient one with the
    state on either side, give the float64 filter's output and states to fp32 rounding: the quotient kernel
    at 8 warps with the state left is the S2 candidate that the device times (docs/gpu.md), so its
    arithmetic at that width is checked here first."""
    x = make_inputs(1, 40, 1, 128, 8, alpha=True, init=True, seed=128)
    x = _decays(x, "weak", 40)
    o_np, M_np, P_np, _ = numpy_reference(x)
    o, (M, P) = chunk_bl(**x, chunk_size=16, output_final_state=True,
                         config=ChunkConfig(cov_kernel=kernel, state_dot=sd, cov_warps=8))
    assert not (torch.isnan(o).any() or torch.isnan(P).any())
    assert relerr(o_np, o) < FP32 and relerr(M_np, M) < FP32
    assert relerr(np.asarray(P_np).reshape(P.shape), P) < FP32
