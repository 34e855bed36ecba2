"""``cov_kernel="device"``: the forward's choice between the quotient and the row covariance kernel made
on the device (issue 19).  The guard pass leaves its result in a device buffer, both kernels are launched
and the one it rules out returns at once, so no host read and the forward captures in a CUDA graph.

Through the interpreter (NaN-poisoned buffers): the outputs, final states and gradients equal, bit for bit,
those of the kernel the decays call for (``"matmul"`` where the guard finds them safe, ``"rows"`` where
not, ``"auto"`` without decays); each launch alone writes everything or nothing as the guard's value
says (NaN and inf: unsafe); no ``_decays_safe`` on the path.  On CUDA: captured and replayed, also
with the decays switched between replays.
"""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from assocmem.gpu import ChunkConfig, chunk_bl  # noqa: E402
from assocmem.gpu import chunk as ch  # noqa: E402

pytestmark = pytest.mark.gpu

SHAPES = [  # (B, T, H, D, m, G, C): T not a multiple of C throughout
    (1, 37, 2, 16, 8, 1, 16),
    (1, 45, 1, 32, 8, 2, 32),               # noise groups
    (1, 19, 1, 24, 8, 2, 16),               # D not a power of two (BD = 32)
    (1, 21, 1, 64, 16, 1, 16),
    (2, 40, 1, 64, 8, 1, 32),
    (1, 21, 1, 100, 8, 1, 16),              # BD = 128: the quotient kernel at 8 warps where safe
]
# what cov_kernel="device" must equal: the kernel the decays call for
EXPECT = {"safe": "matmul", "tiny": "rows", "zero": "rows", "deep": "rows", "none": "auto"}


def _decays(x, kind, C):
    """Decays of ``kind``: ``safe`` (α in [0.5, 1): every chunk's Σ|log α| ≤ C log 2, far below the
    bound), ``tiny`` (one α = 1e-30: |log| ≈ 69), ``zero`` (one α = 0: log = -inf), ``deep`` (no tiny
    α, but α = 0.02 on one key dimension throughout: a full chunk sums C · 3.9 ≥ 62 > 60), ``none``."""
    if kind == "none":
        x["alpha"] = None
        return x
    a = x["alpha"].clone()
    t = min(C + 3, a.shape[1] - 1)            # in the second chunk, where there is one
    if kind == "tiny":
        a[:, t, :, 1] = 1e-30
    elif kind == "zero":
        a[:, t, :, 1] = 0.0
    elif kind == "deep":
        a[..., 0] = 0.02
    x["alpha"] = a
    return x


def _inputs(make_inputs, shape, kind, seed):
    B, T, H, D, m, G, C = shape
    x = make_inputs(B, T, H, D, m, G, alpha=True, init=True, dtype=torch.float32, seed=seed)
    return _decays(x, kind, C), C


def _forward(x, C, kernel):
    with torch.no_grad():
        o, (M, P) = chunk_bl(**x, chunk_size=C, output_final_state=True, config=ChunkConfig(cov_kernel=kernel))
    return o, M, P


def _equal(got, ref):
    for g, r in zip(got, ref):
        assert g.shape == r.shape and torch.equal(g, r), float((g.double() - r.double()).abs().max())


@pytest.mark.parametrize("kind", list(EXPECT))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}T{}H{}D{}m{}G{}C{}".format(*s))
def test_device_choice_equals_the_kernel_the_decays_call_for(interpret, make_inputs, shape, kind):
    x, C = _inputs(make_inputs, shape, kind, seed=SHAPES.index(shape) + 3 * list(EXPECT).index(kind))
    if kind != "none":
        assert ch._decays_safe(x["alpha"], C) == (kind == "safe")            # the torch form of the guard
    got = _forward(x, C, "device")
    _equal(got, _forward(x, C, EXPECT[kind]))
    assert all(torch.isfinite(t).all() for t in got)


@pytest.mark.parametrize("kind", ["safe", "deep"])
def test_device_choice_gradients_equal_the_kernel_the_decays_call_for(interpret, make_inputs, input_grads, kind):
    """The backward reads what the forward kept (``u, β, e, W``): the same bits, the same gradients (the
    chunked backward for the safe decays, the token-by-token one past its bound)."""
    x, C = _inputs(make_inputs, (1, 37, 2, 16, 8, 1, 16), kind, 3)
    w = torch.randn(x["v"].shape, generator=torch.Generator().manual_seed(5))
    got, ref = (input_grads(chunk_bl, x, w, chunk_size=C, config=ChunkConfig(cov_kernel=k))
                for k in ("device", EXPECT[kind]))
    for g, r in zip(got, ref):
        assert torch.equal(g, r)


def _passes(x, C, kernel):
    """The forward's passes as :func:`chunk_bl` builds them (interpreter, POISON on), after one run."""
    xi, mode = ch._chunk_entry("chunk_bl", C, "auto", *(x[n] for n in ("q", "k", "v", "l2", "r2", "alpha")), 1.0,
                               x["initial_state"], None, False, None, needs_kernels=True)
    p = ch._entered_passes(xi, mode, C, ChunkConfig(cov_kernel=kernel))
    p.run()
    return p


@pytest.mark.parametrize("value,safe", [(0.0, True), (ch.LOG_GAMMA_BOUND, True), (60.001, False),
                                        (float("inf"), False), (float("nan"), False)])
def test_each_launch_writes_everything_or_nothing_as_the_guard_says(interpret, make_inputs, value, safe):
    """Each of the two launches alone, its outputs NaN-filled first, with the guard's value set by hand: the
    quotient launch writes every output where the value is at most the bound and none elsewhere (NaN and
    inf count as unsafe, as ``_decays_safe``'s comparison), the row launch the other way round; what
    either writes is its kernel's result, bit for bit."""
    x, C = _inputs(make_inputs, (1, 37, 2, 16, 8, 2, 16), "safe", 2)
    refs = {k: _passes(x, C, k) for k in ("matmul", "rows")}
    p = _passes(x, C, "device")
    outs = lambda q: (*q.cov_out, q.PT)  # noqa: E731
    assert not torch.equal(refs["matmul"].u, refs["rows"].u)     # the two kernels are told apart by their bits
    assert [kw["SELECT"] for _, kw in p.covs] == [1, 2] and len(p.segs) == 1
    p.guard[0].fill_(value)
    for (kern, kw), mine in zip(p.covs, (True, False)):
        for t in outs(p):
            t.fill_(float("nan"))
        kern[p.grid_cov](*p.args_cov, p.Ps[0], *p.cov_out, p.Ps[1], p.T, p.NT, 0, p.NT, *p.guard, **kw)
        if mine == safe:
            for t, r in zip(outs(p), outs(refs["matmul" if mine else "rows"])):
                assert torch.equal(t, r)
        else:
            assert all(torch.isnan(t).all() for t in outs(p))


def test_device_forward_reads_nothing_on_the_host(interpret, make_inputs, monkeypatch):
    """Forward only (the backward keeps its own host check): ``_decays_safe`` is never called, also with
    the capture flag up (where ``auto`` would fall back to the row kernel), and the choice still follows
    the decays."""
    def refuse(*a, **k):
        raise AssertionError("_decays_safe reads the guard on the host")

    shape = (1, 37, 2, 16, 8, 1, 16)
    refs = {kind: _forward(_inputs(make_inputs, shape, kind, 0)[0], 16, EXPECT[kind]) for kind in ("safe", "tiny")}
    monkeypatch.setattr(ch, "_decays_safe", refuse)
    monkeypatch.setattr(ch, "capturing", lambda t: True)
    for kind in ("safe", "tiny"):
        x, C = _inputs(make_inputs, shape, kind, 0)
        _equal(_forward(x, C, "device"), refs[kind])
        o, _ = chunk_bl(**x, chunk_size=C, validate=False, config=ChunkConfig(cov_kernel="device"))
        assert torch.equal(o, refs[kind][0])


def _fake():
    import types

    return types.SimpleNamespace(chunk_cov_fwd_mm_kernel="matmul", chunk_cov_fwd_kernel="rows")


@pytest.mark.parametrize("D,C,warps,expect", [
    (64, 16, None, [("matmul", 4, 1), ("rows", 8, 2)]),
    (64, 32, None, [("matmul", 8, 1), ("rows", 8, 2)]),
    (32, 32, None, [("matmul", 8, 1), ("rows", 4, 2)]),
    (16, 16, 2, [("matmul", 2, 1), ("rows", 2, 2)]),
    (128, 16, None, [("matmul", 8, 1), ("rows", 8, 2)]),  # D = 128 at C = 16: the quotient one at 8 warps
    (128, 32, None, [("rows", 8, 0)]),                    # outside chunk._quotient_shape: auto's row kernel
    (64, 64, None, [("rows", 8, 0)]),
])
def test_launches_and_warps(monkeypatch, D, C, warps, expect):
    """Both kernels (the quotient one first) with the warps each has alone, where auto would read the
    decays; elsewhere, and without decays, auto's one launch."""
    monkeypatch.setattr(ch, "_decays_safe", lambda *a, **k: pytest.fail("host read"))
    a = torch.full((1, 2 * C, 2, D), 0.9)
    cfg = ChunkConfig(cov_kernel="device", cov_warps=warps)
    assert ch._cov_launches(_fake(), cfg, a, C, D) == expect
    auto = ChunkConfig(cov_warps=warps)
    for aa in (None,) + ((a,) if len(expect) == 1 else ()):              # where auto reads nothing: as auto
        assert ch._cov_launches(_fake(), cfg, aa, C, D) == [(*ch._cov_kernel(_fake(), auto, aa, C, D), 0)]
    monkeypatch.setattr(ch, "_decays_safe", lambda *a, **k: True)
    for kind in ("auto", "matmul", "rows"):                # the other choices: one launch, no check on the device
        assert [s for *_, s in ch._cov_launches(_fake(), ChunkConfig(cov_kernel=kind), a, C, D)] == [0]


def test_state_left_and_select_go_to_their_kernels(interpret, make_inputs):
    x, C = _inputs(make_inputs, (1, 20, 1, 16, 8, 1, 16), "safe", 0)
    K = ch.chunk_kernels(True)
    p = _passes(x, C, "device")
    (k1, kw1), (k2, kw2) = p.covs
    assert k1 is K.chunk_cov_fwd_mm_kernel and kw1["STATE_LEFT"] and kw1["SELECT"] == 1
    assert k2 is K.chunk_cov_fwd_kernel and "STATE_LEFT" not in kw2 and kw2["SELECT"] == 2
    assert p.guard[1] == ch.LOG_GAMMA_BOUND and p.guard[0].shape == (1,)
    for kernel in ("auto", "matmul", "rows"):             # one launch, no guard arguments: as before
        q = _passes(x, C, kernel)
        assert len(q.covs) == 1 and "SELECT" not in q.covs[0][1] and q.guard == (None, None)
    assert _passes(dict(x, alpha=None), C, "device").guard == (None, None)


@pytest.mark.parametrize("D, kernel, maxnreg", [(40, "rows", 255), (16, "rows", None), (40, "device", 255),
                                                (16, "matmul", None), (40, "matmul", None)])
def test_the_row_kernel_at_8_warps_is_launched_with_its_register_cap(interpret, make_inputs, D, kernel, maxnreg):
    """The row covariance kernel at 8 warps (``D > 32``) names ``maxnreg = 255``: without it the device's ptxas
    (Triton 3.6) gives it 128 registers and twice the spills, and S2's forward ran 40 % slower (docs/gpu.md).
    At 4 warps and for the quotient kernel nothing is named (not measured there)."""
    x, C = _inputs(make_inputs, (1, 20, 1, D, 8, 1, 16), "safe", 0)
    K = ch.chunk_kernels(True)
    p = _passes(x, C, kernel)
    caps = {k is K.chunk_cov_fwd_kernel: kw.get("maxnreg") for k, kw in p.covs}
    assert caps.get(True) == maxnreg and caps.get(False) is None


@pytest.mark.parametrize("kernel, warps, want", [("rows", 8, {"maxnreg": 255}), ("rows", 16, {}), ("rows", 4, {}),
                                                 ("matmul", 8, {}), ("matmul", 4, {})])
def test_the_cap_is_named_for_the_row_kernel_at_8_warps_only(kernel, warps, want):
    """At 16 warps a thread holds at most 128 registers (65,536 a block), so 255 would be a cap ptxas cannot
    keep; at 4 warps and for the quotient kernel the cap was not measured, so nothing is named."""
    K = _fake()
    assert ch._cov_maxnreg(K, getattr(K, "chunk_cov_fwd_kernel" if kernel == "rows" else "chunk_cov_fwd_mm_kernel"),
                           warps) == want


def test_config_and_cli_accept_device_and_refuse_bogus():
    import argparse

    from assocmem.gpu.bench import _config_items
    from assocmem.gpu.config import COV_KERNELS

    assert "device" in COV_KERNELS and ChunkConfig().cov_kernel == "auto"        # the default stays
    assert _config_items(ChunkConfig)("cov_kernel=device") == ChunkConfig(cov_kernel="device")
    with pytest.raises(ValueError, match="config.cov_kernel must be one of .*'device'.*'bogus'"):
        ChunkConfig(cov_kernel="bogus")
    with pytest.raises(argparse.ArgumentTypeError, match="cov_kernel"):
        _config_items(ChunkConfig)("cov_kernel=bogus")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("D,C", [(64, 16), (32, 32)])
def test_device_choice_captures_and_follows_the_decays_at_replay(make_inputs, D, C):
    """Captured once with safe decays, replayed with safe and then with unsafe decays written into the
    same input: each replay equals the eager call of the kernel those decays call for."""
    x = {k: (v.cuda() if torch.is_tensor(v) else v)
         for k, v in make_inputs(2, 256, 4, D, 64, alpha=True, dtype=torch.float32, seed=D + C).items()}
    safe = x["alpha"].clone()
    unsafe = safe.clone()
    unsafe[:, 40, :, 3] = 1e-30
    cfg = ChunkConfig(cov_kernel="device")
    eager = {}
    for name, a, ref in (("safe", safe, "matmul"), ("unsafe", unsafe, "rows")):
        x["alpha"].copy_(a)
        eager[name] = chunk_bl(**x, output_final_state=True, chunk_size=C, validate=False,
                               config=ChunkConfig(cov_kernel=ref))
        dev = chunk_bl(**x, output_final_state=True, chunk_size=C, validate=False, config=cfg)  # and compiles
        for g, r in zip((dev[0], *dev[1]), (eager[name][0], *eager[name][1])):
            assert torch.equal(g, r)
    x["alpha"].copy_(safe)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o, (M, P) = chunk_bl(**x, output_final_state=True, chunk_size=C, validate=False, config=cfg)
    for name, a in (("safe", safe), ("unsafe", unsafe), ("safe", safe)):
        x["alpha"].copy_(a)
        g.replay()
        torch.cuda.synchronize()
        ref = eager[name]
        for got, r in zip((o, M, P), (ref[0], *ref[1])):
            assert torch.equal(got, r), name
