"""``assocmem gpu bench``: its arguments, the refusal without CUDA, and the harness on the CPU interpreter."""
import json

import pytest

from assocmem.cli import main

pytestmark = pytest.mark.gpu


def test_gpu_help_lists_bench(capsys):
    assert main(["gpu", "--help"]) == 0
    assert "bench" in capsys.readouterr().out


def test_gpu_without_subcommand_is_usage_error(capsys):
    assert main(["gpu"]) == 2


@pytest.mark.parametrize("argv,flag", [
    (["--shapes", "S9"], "--shapes"), (["--ops", "fused,nope"], "--ops"), (["--modes", "bwd"], "--modes"),
    (["--chunk-sizes", "48"], "--chunk-sizes"), (["--backward", "sideways"], "--backward"),
    (["--chunk-config", "BV=8"], "--chunk-config"), (["--chunk-config", "super_chunks=4"], "--chunk-config"),
    (["--fused-config", "cov_warps"], "--fused-config"), (["--out", "missing/b.json"], "--out"),
    (["--bwd-segments", "0"], "--bwd-segments"), (["--bwd-segments", "16,16"], "--bwd-segments"),
    (["--bwd-segments", "none,x"], "--bwd-segments"), (["--segment-tokens", "0"], "--segment-tokens"),
    (["--segment-tokens", "64,x"], "--segment-tokens"), (["--state-dots", "right,up"], "--state-dots"),
    (["--bwd-start-every", "0"], "--bwd-start-every"), (["--bwd-start-every", "auto,x"], "--bwd-start-every"),
    (["--chunk-config", "bwd_start_every=0"], "--chunk-config")])
def test_bench_bad_argument_is_one_line_naming_the_flag(tmp_path, monkeypatch, capsys, argv, flag):
    monkeypatch.chdir(tmp_path)
    assert main(["gpu", "bench", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and flag in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_bench_without_cuda_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    for argv in ([], ["--shapes", "tiny", "--out", "b.json"]):
        assert main(["gpu", "bench", *argv]) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("assocmem gpu bench: error: no CUDA device"), err
        assert not list(tmp_path.iterdir())              # neither runs/ nor the JSON


def test_config_items_parse_into_the_dataclasses():
    from assocmem.gpu.bench import _config_items
    from assocmem.gpu.config import ChunkConfig, FusedConfig

    assert _config_items(ChunkConfig)("cov_kernel=rows, segments=8,BV=32") == ChunkConfig(
        cov_kernel="rows", segments=8, BV=32)
    assert _config_items(FusedConfig)("bwd_reduce=partials") == FusedConfig(bwd_reduce="partials")


def test_harness_on_the_cpu_interpreter(tmp_path, monkeypatch, capsys):
    """The one harness end to end on the 'tiny' shape through the interpreter (what a GPU run does,
    with wall times of one call): checks of both BL ops pass, every entry lands in the JSON."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.gpu import bench
    from assocmem.gpu.config import ChunkConfig

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "b.json"
    bench.run(["tiny"], ("fused", "chunk", "fla"), chunk_sizes=(16,), chunk_config=ChunkConfig(cov_kernel="rows"),
              out=str(out), device=torch.device("cpu"))
    res = json.loads(out.read_text())
    e = res["shapes"]["tiny"]
    assert res["ops"] == ["fused", "chunk_C16"] and res["fla"] == "needs CUDA"
    assert res["config"]["chunk"]["cov_kernel"] == "rows" and res["provenance"]["device"].startswith("cpu")
    for op in ("fused", "chunk_C16"):
        c = e["check"][op]
        assert bench.check_ok(c), c
        assert c["fwd_o"] < 1e-5 and c["grad_k"] < 1e-4 and c["grad_alpha"] < 1e-4
        assert set(e["times"][op]) == {"fwd_ms", "fwdbwd_ms"} | ({"bwd_segment_buffers_MB", "passes"} if op != "fused" else set())
    assert "| tiny |" in capsys.readouterr().out
    assert bench.ratios({"chunk_C16": {"fwd_ms": 2.0}, "fla_chunk_gdn": {"fwd_ms": 0.5}}) == {
        "chunk_C16 fwd / fla_chunk_gdn fwd": 4.0}


def test_bwd_segments_are_ops_side_by_side(tmp_path, monkeypatch):
    """``--bwd-segments none,2``: one chunk op per value, the segmented one named ``chunk_C16_L2`` and
    run with ``bwd_segment_chunks = 2`` (its check passes like the other's), both in the JSON."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.args import Parser
    from assocmem.gpu import bench

    p = Parser(prog="b")
    bench.add_arguments(p)
    assert p.parse_args(["--bwd-segments", "none,2"]).bwd_segments == (None, 2)
    assert p.parse_args([]).bwd_segments == (None,)
    ops = bench.bl_ops((16,), bwd_segments=(None, 2))
    assert list(ops) == ["fused", "chunk_C16", "chunk_C16_L2"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    seen = []
    import assocmem.gpu.chunk as ch
    orig = ch._bwd_segments
    monkeypatch.setattr(ch, "_bwd_segments", lambda L, NT: seen.append(L) or orig(L, NT))
    monkeypatch.setitem(bench.SHAPES, "t48", (1, 48, 2, 8, 8))      # three chunks: L = 2 makes two segments
    out = tmp_path / "b.json"
    bench.run(["t48"], ("chunk",), modes=("fwdbwd",), out=str(out), device=torch.device("cpu"), bwd_segments=(None, 2))
    res = json.loads(out.read_text())
    assert res["ops"] == ["chunk_C16", "chunk_C16_L2"] and res["config"]["bwd_segments"] == [None, 2]
    assert all(bench.check_ok(res["shapes"]["t48"]["check"][o]) for o in res["ops"])
    assert None in seen and 2 in seen and orig(2, 3) == [(0, 2), (2, 3)]
    # beside each (on a GPU, measured) peak: the buffers that the segment length changes, from the shapes
    from assocmem.gpu.chunk import backward_buffer_bytes
    t = res["shapes"]["t48"]["times"]
    for op, L in (("chunk_C16", None), ("chunk_C16_L2", 2)):
        assert t[op]["bwd_segment_buffers_MB"] == pytest.approx(
            sum(backward_buffer_bytes(1, 48, 2, 8, 8, 1, 16, L).values()) / 2**20)
    assert t["chunk_C16_L2"]["bwd_segment_buffers_MB"] < t["chunk_C16"]["bwd_segment_buffers_MB"]


def test_bwd_start_every_values_are_segmented_ops_side_by_side(tmp_path, monkeypatch):
    """``--bwd-segments none,1 --bwd-start-every 1,auto``: the one-segment op once, the segmented op per
    spacing (``chunk_C16_L1_K1`` keeps every start state, ``chunk_C16_L1`` the default's √S spacing); all
    checked against float64 through the interpreter, and the buffer count beside each says the spaced one
    holds fewer start states (five chunks: five segments, four start states against two kept and a slot)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.args import Parser
    from assocmem.gpu import bench
    from assocmem.gpu.chunk import backward_buffer_bytes

    p = Parser(prog="b")
    bench.add_arguments(p)
    assert p.parse_args(["--bwd-start-every", "1,auto"]).bwd_start_every == (1, None)
    assert p.parse_args([]).bwd_start_every == (None,)
    ops = bench.bl_ops((16,), bwd_segments=(None, 1), bwd_start_every=(1, None))
    assert list(ops) == ["fused", "chunk_C16", "chunk_C16_L1_K1", "chunk_C16_L1"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setitem(bench.SHAPES, "t80", (1, 80, 2, 8, 8))
    out = tmp_path / "b.json"
    bench.run(["t80"], ("chunk",), modes=("fwdbwd",), out=str(out), device=torch.device("cpu"),
              bwd_segments=(None, 1), bwd_start_every=(1, None))
    res = json.loads(out.read_text())
    assert res["ops"] == ["chunk_C16", "chunk_C16_L1_K1", "chunk_C16_L1"]
    assert res["config"]["bwd_start_every"] == [1, None]
    assert all(bench.check_ok(res["shapes"]["t80"]["check"][o]) for o in res["ops"])
    t = res["shapes"]["t80"]["times"]
    one = 4 * (2 * 8 * 8 + 2 * 8 * 8) / 2**20          # one start state: a D×D and a D×m per head, fp32
    assert t["chunk_C16_L1_K1"]["bwd_segment_buffers_MB"] - t["chunk_C16_L1"]["bwd_segment_buffers_MB"] == \
        pytest.approx(one)
    assert t["chunk_C16_L1"]["bwd_segment_buffers_MB"] == pytest.approx(
        sum(backward_buffer_bytes(1, 80, 2, 8, 8, 1, 16, 1, None).values()) / 2**20)


def test_state_dots_are_ops_side_by_side(tmp_path, monkeypatch):
    """``--state-dots right,left``: the chunk op twice, ``chunk_C16`` and ``chunk_C16_SL`` (the state as the
    left operand of the covariance kernels' products), both checked against float64 and timed in one process."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.args import Parser
    from assocmem.gpu import bench

    p = Parser(prog="b")
    bench.add_arguments(p)
    assert p.parse_args(["--state-dots", "right,left"]).state_dots == ("right", "left")
    ops = bench.bl_ops((16,), state_dots=("right", "left"))
    assert list(ops) == ["fused", "chunk_C16", "chunk_C16_SL"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "b.json"
    bench.run(["tiny"], ("chunk",), modes=("fwd",), out=str(out), device=torch.device("cpu"),
              state_dots=("right", "left"))
    res = json.loads(out.read_text())
    assert res["ops"] == ["chunk_C16", "chunk_C16_SL"] and res["config"]["state_dots"] == ["right", "left"]
    assert all(bench.check_ok(res["shapes"]["tiny"]["check"][o]) for o in res["ops"])
    # the two-level prototype is crossed with them too: its chains run many to an SM, where the spills'
    # traffic is shared, so the spill-free form is timed beside it, each level with its own configuration
    ops = bench.bl_ops((16,), state_dots=("right", "left"), segment_tokens=(16,))
    assert [n for n in ops if n.startswith("segments")] == ["segments_C16_L16", "segments_C16_L16_SL"]
    assert ops["segments_C16_L16_SL"].segments[2].state_dot == "left"
    assert ops["segments_C16_L16"].segments[2].state_dot == "right"
    monkeypatch.setitem(bench.SHAPES, "t32", (1, 32, 2, 8, 8))
    bench.run(["t32"], ("segments",), modes=("fwd",), out=str(out), device=torch.device("cpu"),
              state_dots=("right", "left"), segment_tokens=(16,))
    e = json.loads(out.read_text())["shapes"]["t32"]
    for op in ("segments_C16_L16", "segments_C16_L16_SL"):
        assert bench.check_ok(e["check"][op]) and e["check"][op]["fwd_o"] < 1e-5, e["check"][op]
        assert set(e["times"][op]["levels"]) == {"elements_ms", "starts_ms", "readouts_ms", "readouts_cov_ms",
                                                 "readouts_mean_ms"}


@pytest.mark.slow   # 30 s through the interpreter on CI's two cores; the prototype's own tests are in test_chunk_segments
def test_segments_prototype_is_checked_and_timed_forward_only(tmp_path, monkeypatch):
    """``--ops chunk,segments --segment-tokens 16,32``: one forward-only op per segment length beside the
    chunk op, its check against float64 passes without gradients, only its forward is timed, its ratio to
    fla's GDN forward is reported, and a length that does not divide T records an error, not a crash."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.args import Parser
    from assocmem.gpu import bench

    p = Parser(prog="b")
    bench.add_arguments(p)
    assert p.parse_args(["--segment-tokens", "16,32"]).segment_tokens == (16, 32)
    assert p.parse_args([]).segment_tokens == (256,)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setitem(bench.SHAPES, "t64", (1, 64, 2, 8, 8))
    out = tmp_path / "b.json"
    bench.run(["t64"], ("chunk", "segments"), out=str(out), device=torch.device("cpu"), segment_tokens=(16, 32, 48))
    res = json.loads(out.read_text())
    assert res["ops"] == ["chunk_C16", "segments_C16_L16", "segments_C16_L32", "segments_C16_L48"]
    e = res["shapes"]["t64"]
    for op in ("segments_C16_L16", "segments_C16_L32"):
        assert bench.check_ok(e["check"][op]) and e["check"][op]["fwd_o"] < 1e-5, e["check"][op]
        assert set(e["times"][op]) == {"fwd_ms", "levels"}
        assert set(e["times"][op]["levels"]) == {"elements_ms", "starts_ms", "readouts_ms", "readouts_cov_ms",
                                                 "readouts_mean_ms"}
        assert all(t > 0 for t in e["times"][op]["levels"].values())
    # chunk_bl's forward is split into its two kernels the same way, beside its whole time
    assert set(e["times"]["chunk_C16"]["passes"]) == {"cov_ms", "mean_ms"}
    assert all(t > 0 for t in e["times"]["chunk_C16"]["passes"].values())
    assert "segment_tokens must be a multiple" in e["check"]["segments_C16_L48"]["error"]
    assert not bench.check_ok(e["check"]["segments_C16_L48"])
    assert bench.ratios({"segments_C16_L256": {"fwd_ms": 1.0}, "fla_chunk_gdn": {"fwd_ms": 0.5}}) == {
        "segments_C16_L256 fwd / fla_chunk_gdn fwd": 2.0}


def test_rates_are_the_nominal_work_over_the_time():
    """BL's count is the token-by-token filter's (5Dm + 4D^2 + 5D + 1 per token and head), fla's the
    delta rule's 6Dm; forward+backward counts three forwards; errors and missing modes are skipped."""
    from assocmem.gpu import bench

    shape = (2, 100, 3, 8, 4)                    # 600 (token, head) pairs
    r = bench.rates({"chunk_C16": {"fwd_ms": 1.0, "fwdbwd_ms": 2.0}, "fla_chunk_delta": {"fwdbwd_ms": 0.5},
                     "fla_chunk_gdn": {"error": "refused"}, "other": {"fwd_ms": 1.0}}, shape)
    assert set(r) == {"chunk_C16", "fla_chunk_delta"}
    flops = 600 * (5 * 8 * 4 + 4 * 64 + 5 * 8 + 1)
    assert abs(r["chunk_C16"]["fwd"]["TFLOPs"] - flops / 1e-3 / 1e12) < 1e-15
    assert abs(r["chunk_C16"]["fwdbwd"]["TFLOPs"] - 3 * flops / 2e-3 / 1e12) < 1e-15
    assert abs(r["chunk_C16"]["fwd"]["pct_flop_peak"] - 100 * r["chunk_C16"]["fwd"]["TFLOPs"] / 67.0) < 1e-12
    byts = 600 * (4 * (3 * 8 + 2 * 4) + 8)
    assert abs(r["chunk_C16"]["fwd"]["TBs"] - byts / 1e-3 / 1e12) < 1e-15
    assert set(r["fla_chunk_delta"]) == {"fwdbwd"}
    assert abs(r["fla_chunk_delta"]["fwdbwd"]["TFLOPs"] - 3 * 600 * 6 * 8 * 4 / 0.5e-3 / 1e12) < 1e-15


@pytest.mark.parametrize("device, card, hbm", [("NVIDIA H100 80GB HBM3", "H100", 3.35),
                                               ("NVIDIA H200", "H200", 4.8)])
def test_rates_are_against_the_card_that_ran(device, card, hbm):
    """The share of HBM is taken against the card the bench ran on (an H100's 3.35 TB/s is not an H200's
    4.8), and the printed table names that card."""
    from assocmem.gpu import bench

    c = bench.ceilings_for(device)
    assert c["card"] == card and c["hbm_TBs"] == hbm
    shape = (2, 100, 3, 8, 4)
    r = bench.rates({"chunk_C16": {"fwd_ms": 1.0}}, shape, c)["chunk_C16"]["fwd"]
    assert abs(r["pct_hbm"] - 100 * r["TBs"] / hbm) < 1e-12
    result = {"ops": ["chunk_C16"], "ceilings": c,
              "shapes": {"S0": {"times": {"chunk_C16": {"fwd_ms": 1.0}}, "check": {}, "ratios": {},
                                "rates": {"chunk_C16": {"fwd": r}}}}}
    assert f"% of the {card}'s HBM" in bench.table(result)


def test_an_unknown_card_gets_the_h200_ceilings_and_says_so():
    from assocmem.gpu import bench

    c = bench.ceilings_for("NVIDIA A100-SXM4-80GB")
    assert c["hbm_TBs"] == 4.8 and c["card"].startswith("H200 (assumed") and "A100" in c["card"]


@pytest.mark.parametrize("segments, alpha", [(None, False), (1, True), (3, True)])
def test_forward_passes_timed_alone_rewrite_the_forward_they_split(segments, alpha, monkeypatch):
    """The two kernels of chunk_bl's forward run alone (as the benchmark times them) after one forward, in
    one segment or several, with and without decays: each rewrites the same values, so the buffers still
    hold chunk_bl's output and final state; and ``chunk_bl_pass_times`` calls ``bench`` once per kernel, and
    once more for the covariance pass without its row recursion (the quotient kernel's timing ablation), which
    changes what that pass writes and leaves the buffers as the full pass wrote them."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.gpu import chunk as CH
    from assocmem.gpu.config import ChunkConfig

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    B, T, H, D, m = 1, 48, 2, 8, 8
    g = torch.Generator().manual_seed(3)
    x = dict(q=torch.nn.functional.normalize(torch.randn(B, T, H, D, generator=g), dim=-1),
             k=torch.nn.functional.normalize(torch.randn(B, T, H, D, generator=g), dim=-1),
             v=torch.randn(B, T, H, m, generator=g), l2=torch.rand(B, T, H, generator=g) * 0.05,
             r2=torch.rand(B, T, H, generator=g) * 0.5 + 0.05)
    if alpha:
        x["alpha"] = torch.sigmoid(torch.rand(B, T, H, D, generator=g) * 4 + 2)
    cfg = ChunkConfig(segments=segments) if segments else None
    o, (M, P) = CH.chunk_bl(**x, chunk_size=16, config=cfg, output_final_state=True)
    calls = []

    def bench(fn):
        calls.append(fn)
        for _ in range(2):                      # repeated, as do_bench repeats it
            fn()
        return 1.0
    assert CH.chunk_bl_pass_times(**x, chunk_size=16, config=cfg, bench=bench) == {
        "cov_ms": 1.0, "mean_ms": 1.0, "cov_without_rows_ms": 1.0}
    assert len(calls) == 3
    # the same object's buffers after the kernels ran alone: build one, run, then each pass alone twice
    from assocmem.gpu._launch import decays
    K = CH.chunk_kernels(True)
    cfgr = CH._resolve(cfg, D, m, 1, B * H, True)
    P0 = torch.eye(D).expand(B, H, 1, D, D).contiguous()
    passes = CH._ForwardPasses(K, *(x[n].contiguous() for n in ("q", "k", "v", "l2")), x["r2"][..., None].contiguous(),
                               decays(x.get("alpha"), None), torch.zeros(B, H, D, m), P0, 16, cfgr, False)
    passes.run()
    o1 = passes.o.clone()
    for _ in range(2):
        for s in range(len(passes.segs)):
            passes.cov(s)
        for s in range(len(passes.segs)):
            passes.mean(s)
    assert len(passes.segs) == (segments or 1)
    torch.testing.assert_close(passes.o, o1, rtol=0, atol=0)
    torch.testing.assert_close(passes.o, o, rtol=1e-6, atol=1e-6)
    # the timing ablation: without the row recursion the covariance pass writes other values (so the
    # constexpr reaches the kernel), and pass_times leaves the forward's values behind
    beta, PT = passes.beta.clone(), passes.PT.clone()
    CH.pass_times(passes, lambda fn: (fn(), 1.0)[1])
    torch.testing.assert_close(passes.beta, beta, rtol=0, atol=0)
    torch.testing.assert_close(passes.PT, PT, rtol=0, atol=0)
    full = passes.covs
    passes.covs = [(kern, {**kw, "ROWS": False}) for kern, kw in full]
    for s in range(len(passes.segs)):
        passes.cov(s)
    passes.covs = full
    assert not torch.allclose(passes.beta, beta) and not torch.allclose(passes.PT, PT)
    assert bool(torch.isfinite(passes.PT).all())
    torch.testing.assert_close(passes.MT, M, rtol=1e-6, atol=1e-6)
    # and that is the filter's output: float64 naive_bl on the same inputs
    from assocmem.gpu import naive_bl
    ref = naive_bl(**{n: t.double() for n, t in x.items()})[0]
    assert float((passes.o.double() - ref).norm() / ref.norm()) < 1e-5


def test_per_kernel_times_are_per_call_and_largest_first(monkeypatch):
    """``--kernels``: the profiler's averages over ``reps`` calls become each kernel's GPU time and launch
    count per call, largest first; host-only events (no device time) are left out; older torch's
    ``cuda_time_total`` is read where ``device_time_total`` is missing.  The flag is parsed, and on a CPU
    device (no CUDA kernels to profile) the times carry no kernel entries."""
    from types import SimpleNamespace as NS

    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from assocmem.args import Parser
    from assocmem.gpu import bench

    evs = [NS(key="mean", device_time_total=3000.0, count=10), NS(key="cov", device_time_total=9000.0, count=10),
           NS(key="aten::empty", device_time_total=0.0, count=50), NS(key="old", cuda_time_total=500.0, count=5)]
    r = bench.per_kernel(evs, reps=5)
    assert list(r) == ["cov", "mean", "old"]
    assert r["cov"] == {"ms": 9000.0 / 1e3 / 5, "calls": 2.0} and r["old"] == {"ms": 0.1, "calls": 1.0}
    p = Parser(prog="b")
    bench.add_arguments(p)
    assert p.parse_args(["--kernels"]).kernels is True and p.parse_args([]).kernels is False
    op = bench.bl_ops((16,))["chunk_C16"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    t = bench.time_op(torch, op, (1, 16, 1, 8, 8), torch.device("cpu"), ("fwd",), kernels=True)
    assert "fwd_ms" in t and not any(k.startswith("kernels") for k in t)


def test_time_op_keeps_the_forward_when_the_backward_is_refused():
    """fla 0.6 refuses its gated backward on Hopper under Triton < 3.7.1 while its forward runs: the op's
    forward time must stay in the JSON beside the refusal (3 December, the bench lost both); an op whose
    forward fails still raises, so the caller records that error."""
    torch = pytest.importorskip("torch")
    from assocmem.gpu import bench

    class Refused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v * 2

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("Triton >= 3.4.0 and < 3.7.1 on Hopper GPUs produces incorrect results")

    op = bench.Op("refused", "bl", lambda x: Refused.apply(x["v"]))
    t = bench.time_op(torch, op, (1, 16, 1, 8, 8), torch.device("cpu"), ("fwd", "fwdbwd"))
    assert t["fwd_ms"] > 0 and "fwdbwd_ms" not in t and "fwdbwd_peak_MB" not in t
    assert t["fwdbwd_error"].startswith("RuntimeError: Triton >= 3.4.0")
    broken = bench.Op("broken", "bl", lambda x: (_ for _ in ()).throw(ValueError("no forward")))
    with pytest.raises(ValueError, match="no forward"):
        bench.time_op(torch, broken, (1, 16, 1, 8, 8), torch.device("cpu"), ("fwd", "fwdbwd"))
    with pytest.raises(RuntimeError, match="Hopper"):       # asked for the backward alone: nothing to keep
        bench.time_op(torch, op, (1, 16, 1, 8, 8), torch.device("cpu"), ("fwdbwd",))


@pytest.mark.parametrize("work_ms,wait_ms", [(20, 0), (0, 30), (15, 30)])
def test_host_ms_is_the_issuing_time_without_the_wait_before(work_ms, wait_ms):
    """``host_ms`` times the call alone: the device sync before each call (here a sleep) is not in it,
    the host's own work (a sleep inside the call) is."""
    import time

    from assocmem.gpu import bench

    calls = {"fn": 0, "sync": 0}

    def fn():
        calls["fn"] += 1
        time.sleep(work_ms / 1e3)

    def sync():
        calls["sync"] += 1
        time.sleep(wait_ms / 1e3)

    ms = bench.host_ms(fn, sync, reps=5)
    assert work_ms <= ms < work_ms + 8
    assert calls == {"fn": 6, "sync": 6}        # one warm-up call, a sync before each timed one and at the end


class _FakeCuda:
    type = "cuda"


def test_time_op_records_host_and_graph_times_and_a_graph_refusal(monkeypatch):
    """On CUDA the forward's host time always comes beside its time, and with ``graph`` the graph replay's
    time, or why the op could not be captured (the forward's times stay)."""
    torch = pytest.importorskip("torch")
    from assocmem.gpu import bench

    monkeypatch.setattr(bench, "inputs", lambda torch, shape, device, seed, fla=False: {})
    monkeypatch.setattr(bench, "_bench", lambda torch, fn, device: 2.5)
    monkeypatch.setattr(bench, "host_ms", lambda fn, sync, reps=20: 0.75)
    op = bench.Op("op", "fla", lambda x: None)
    monkeypatch.setattr(bench, "_graph_bench", lambda fn: 1.25)
    t = bench.time_op(torch, op, (1, 16, 1, 8, 8), _FakeCuda(), ("fwd",), graph=True)
    assert t == {"fwd_ms": 2.5, "fwd_host_ms": 0.75, "fwd_graph_ms": 1.25}
    assert bench.time_op(torch, op, (1, 16, 1, 8, 8), _FakeCuda(), ("fwd",)) == {"fwd_ms": 2.5, "fwd_host_ms": 0.75}

    def refuse(fn):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(bench, "_graph_bench", refuse)
    t = bench.time_op(torch, op, (1, 16, 1, 8, 8), _FakeCuda(), ("fwd",), graph=True)
    assert t["fwd_ms"] == 2.5 and "fwd_graph_ms" not in t
    assert t["fwd_graph_error"].startswith("RuntimeError: operation not permitted when stream is capturing")


def test_graph_flag_reaches_the_run(tmp_path, monkeypatch):
    """``--graph`` is handed to the run (and off without it)."""
    torch = pytest.importorskip("torch")
    from assocmem.gpu import bench

    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "run", lambda *a, **kw: seen.append(kw["graph"]) or {"shapes": {}})
    for argv, want in ((["--graph"], True), ([], False)):
        assert main(["gpu", "bench", "--shapes", "tiny", "--out", str(tmp_path / f"b{want}.json"), *argv]) == 0
    assert seen == [True, False]
