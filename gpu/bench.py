"""The benchmark of the BL kernels against fla: ``assocmem gpu bench`` (``python -m assocmem.gpu.bench``).

One harness for every op, as fla's ``benchmarks/ops`` registry: an op is a name, how its
inputs are made and how it is called (:func:`bl_ops`: ``fused_recurrent_bl``, ``chunk_bl`` per chunk
size; :func:`fla_ops`).  For each shape, in one process:

1. every BL op checked against float64 :func:`.naive.naive_bl` on fresh random inputs, every
   kernel output NaN-poisoned first: the forward on the whole shape (read on two batch
   elements × two heads), the gradients of every input on a truncated copy;
2. forward and forward+backward of every op timed with ``triton.testing.do_bench`` (median,
   ms), and the peak memory of forward+backward; BL in fp32, fla 0.6 with bf16 inputs (its
   ``fused_recurrent_delta_rule``, ``chunk_delta_rule``, ``chunk_gated_delta_rule``, when
   importable);
3. with ``--drift``, the fp32 drift of each BL op over 10⁵ tokens against float64.

Writes one JSON (provenance, launch configurations, checks, times) and prints a table whose
last lines are the ratios BL / fla.  Needs a CUDA device: the interpreter's run times measure
Python, and the CPU checks of the same kernels are the test suite (``pytest -m gpu``).
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict
from typing import Callable, NamedTuple, Optional

SHAPES = {  # (B, T, H, D, m)
    "S1": (8, 2048, 16, 64, 64),
    "S2": (32, 2048, 4, 128, 128),
    "S3": (4, 8192, 16, 64, 64),
    "S4": (256, 128, 4, 16, 16),
    "tiny": (2, 16, 2, 8, 8),
}
DEFAULT_SHAPES = ("S1", "S2", "S3", "S4")
MODES = ("fwd", "fwdbwd")
DEFAULT_OUT = "runs/gpu_bench.json"
# the ratios reported: BL op (mode) against the fla op that does the closest work
RATIOS = (("fused", "fwd", "fla_fused_recurrent_delta"), ("chunk", "fwd", "fla_chunk_gdn"),
          ("chunk", "fwdbwd", "fla_chunk_delta"), ("fused", "fwdbwd", "fla_chunk_delta"),
          ("segments", "fwd", "fla_chunk_gdn"))
# the BL ops of the table: fused_recurrent_bl, chunk_bl, chunk_bl_segments (issue 19's prototype, forward only)
BL_OPS = ("fused", "chunk", "segments")
DEFAULT_SEGMENT_TOKENS = (256,)


class Op(NamedTuple):
    """``call(x)`` runs the op on the inputs ``x`` (a dict from :func:`inputs`) and returns its output."""

    name: str
    family: str           # "bl", or "fla" (bf16 q, k, v and fla's β and log-gate)
    call: Callable
    chunk: Optional[tuple] = None     # chunk_bl's (chunk size, backward segment length L or None)
    fwd_only: bool = False            # no backward (chunk_bl_segments): checked and timed forward only
    segments: Optional[tuple] = None  # chunk_bl_segments' (chunk size, segment tokens, config): its levels timed too
    passes: Optional[tuple] = None    # chunk_bl's (chunk size, config): its forward's two kernels timed apart too


def inputs(torch, shape, device, seed, fla=False):
    """Random inputs: unit keys and queries, decays in 0.88 … 0.998, ℓ² ≤ 0.05, r² in 0.05 … 0.55;
    with ``fla``, bf16 ``q, k, v`` and fla's ``β = sigmoid(·)`` and GDN log-gate instead of the noises."""
    import torch.nn.functional as F

    B, T, H, D, m = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x = dict(q=F.normalize(rn(B, T, H, D), dim=-1), k=F.normalize(rn(B, T, H, D), dim=-1), v=rn(B, T, H, m))
    if fla:
        x.update(beta=torch.sigmoid(rn(B, T, H)), gate=F.logsigmoid(torch.rand(B, T, H, generator=g) * 4 + 2))
        return {n: t.to(device=device, dtype=torch.float32 if n == "gate" else torch.bfloat16) for n, t in x.items()}
    x.update(l2=torch.rand(B, T, H, generator=g) * 0.05, r2=torch.rand(B, T, H, generator=g) * 0.5 + 0.05,
             alpha=torch.sigmoid(torch.rand(B, T, H, D, generator=g) * 4 + 2))
    return {n: t.to(device) for n, t in x.items()}


def bl_ops(chunk_sizes=(16,), backward="auto", fused_config=None, chunk_config=None,
           bwd_segments=(None,), segment_tokens=(), state_dots=(None,), bwd_start_every=(None,)) -> dict[str, Op]:
    """``fused`` and ``chunk_C{C}`` for each of ``chunk_sizes``; with ``bwd_segments`` (values of
    ``ChunkConfig.bwd_segment_chunks``, ``None`` for ``chunk_config``'s own) one op per value,
    ``chunk_C{C}_L{L}`` for an integer ``L`` (the same forward, the backward in segments of ``L``
    chunks: time and peak memory side by side in one process), and with ``bwd_start_every`` (values of
    ``ChunkConfig.bwd_start_every``, ``None`` for its default) one such op per value, ``…_K{K}`` for an
    integer; with ``state_dots`` (values of
    ``ChunkConfig.state_dot``, the forward's, ``None`` for ``chunk_config``'s own; the backward keeps
    ``bwd_state_dot``, ``"right"`` by default) the same per value, ``"left"`` named ``…_SL``;
    ``segments_C{C}_L{L}`` (``…_SL`` likewise) for each of
    ``segment_tokens`` (:func:`.segments.chunk_bl_segments`, segments of ``L`` tokens; forward only, at
    the first of ``chunk_sizes``, 16 without one; a shape whose ``T`` it does not divide records an error)."""
    from dataclasses import replace

    from . import chunk_bl, fused_recurrent_bl
    from .config import ChunkConfig

    ops = {"fused": Op("fused", "bl", lambda x: fused_recurrent_bl(**x, validate=False, config=fused_config)[0])}
    for C in chunk_sizes:
        for sd in state_dots:
            for L, K in [(L, K) for L in bwd_segments for K in (bwd_start_every if L is not None else (None,))]:
                cfg = chunk_config if L is None else replace(chunk_config or ChunkConfig(), bwd_segment_chunks=L)
                if K is not None:
                    cfg = replace(cfg, bwd_start_every=K)
                if sd is not None:
                    cfg = replace(cfg or ChunkConfig(), state_dot=sd)
                name = (f"chunk_C{C}" + ("" if L is None else f"_L{L}") + ("" if K is None else f"_K{K}")
                        + ("_SL" if sd == "left" else ""))
                ops[name] = Op(name, "bl", lambda x, C=C, cfg=cfg: chunk_bl(
                    **x, chunk_size=C, validate=False, backward=backward, config=cfg)[0],
                    (C, cfg.bwd_segment_chunks if cfg is not None else None,
                     cfg.bwd_start_every if cfg is not None else None), passes=(C, cfg))
    if segment_tokens:
        from .segments import chunk_bl_segments

        C = chunk_sizes[0] if chunk_sizes else 16
        for sd in state_dots:
            cfg = chunk_config if sd is None else replace(chunk_config or ChunkConfig(), state_dot=sd)
            for L in segment_tokens:
                name = f"segments_C{C}_L{L}" + ("_SL" if sd == "left" else "")
                ops[name] = Op(name, "bl", lambda x, C=C, L=L, cfg=cfg: chunk_bl_segments(
                    **x, chunk_size=C, segment_tokens=L, validate=False, config=cfg)[0], fwd_only=True,
                    segments=(C, L, cfg))
    return ops


def fla_ops() -> dict[str, Op] | str:
    """fla's delta-rule ops, or why they are missing."""
    try:
        from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as exc:
        return f"fla not importable: {type(exc).__name__}: {exc}"
    calls = {"fla_fused_recurrent_delta": lambda x: fused_recurrent_delta_rule(x["q"], x["k"], x["v"], x["beta"]),
             "fla_chunk_delta": lambda x: chunk_delta_rule(x["q"], x["k"], x["v"], x["beta"]),
             "fla_chunk_gdn": lambda x: chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["gate"], x["beta"])}
    return {n: Op(n, "fla", lambda x, f=f: f(x)[0]) for n, f in calls.items()}


def _relerr(ref, out) -> float:
    ref, out = ref.detach().double(), out.detach().double()
    return float((ref - out).norm() / ref.norm().clamp_min(1e-300))


def check(torch, op: Op, shape, device, seed=0, grad_T=256) -> dict:
    """``op`` against float64 ``naive_bl``: outputs, and the gradients of every input, NaN-poisoned buffers."""
    from . import _launch, naive_bl

    B, T, H, D, m = shape
    x = inputs(torch, shape, device, seed)
    b, h = min(B, 2), min(H, 2)
    _launch.POISON = True
    try:
        o = op.call(x)
        o_ref, _ = naive_bl(**{n: t[:b, :, :h].double() for n, t in x.items()}, validate=False)
        res = {"nan_free": not bool(torch.isnan(o).any()), "fwd_o": _relerr(o_ref, o[:b, :, :h])}
        if op.fwd_only:
            res.update(grad_T=0, grad_nan_free=True, grads="none: forward only")
            return res
        Tg = min(T, grad_T)
        xg = {n: t[:b, :Tg, :h].contiguous() for n, t in x.items()}
        wo = torch.randn(b, Tg, h, m, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        grads = []
        for fn, dt in ((lambda z: naive_bl(**z, validate=False)[0], torch.float64), (op.call, torch.float32)):
            leaves = {n: t.to(dt).clone().requires_grad_(True) for n, t in xg.items()}
            (fn(leaves).double() * wo.to(device)).sum().backward()
            grads.append({n: t.grad for n, t in leaves.items()})
        res["grad_T"] = Tg
        res.update({f"grad_{n}": _relerr(grads[0][n], grads[1][n]) for n in grads[0]})
        res["grad_nan_free"] = all(not bool(torch.isnan(t).any()) for t in grads[1].values())
    finally:
        _launch.POISON = False
    return res


def _bench(torch, fn, device) -> float:
    if device.type != "cuda":           # the tests' CPU path: one call, wall time
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=60, return_mode="median"))


def host_ms(fn, sync, reps: int = 20) -> float:
    """Median wall time (ms) the host takes to issue one call of ``fn``, the device idle before each
    (``sync()`` before the call, not after).  Beside the device time of the same call it says whether a
    timing is bound by launches: an op whose issuing takes about as long as its run keeps the device
    waiting for the host, and its measured time then follows the host's speed, not the kernels'.  An op
    that waits for the device inside the call (a host sync) counts that wait too."""
    fn()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    sync()
    times.sort()
    return 1e3 * (times[(reps - 1) // 2] + times[reps // 2]) / 2


def _graph_bench(fn) -> float:
    """Median time (ms) of ``fn`` replayed from a CUDA graph (``triton.testing.do_bench_cudagraph``): the
    device's time without the host's launches in it."""
    from triton.testing import do_bench_cudagraph

    return float(do_bench_cudagraph(fn, rep=60, return_mode="median"))


def peak_mem_MB(torch, f) -> float:
    """Peak CUDA memory (MiB) that one call of ``f`` allocates above what is allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    f()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def per_kernel(averages, reps: int) -> dict:
    """``{kernel: {"ms", "calls"}}`` per call of the profiled function, largest first, from the profiler's
    ``key_averages()`` over ``reps`` calls (each event's device time in µs; events without any are left
    out: they ran on the host)."""
    out = {}
    for ev in averages:
        us = getattr(ev, "device_time_total", None)
        if us is None:
            us = getattr(ev, "cuda_time_total", 0)
        if us > 0:
            out[ev.key] = {"ms": us / 1e3 / reps, "calls": ev.count / reps}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["ms"]))


def kernel_times(torch, fn, reps: int = 5) -> dict:
    """GPU time of each kernel ``fn`` launches, per call (torch.profiler over ``reps`` calls after one
    warm-up; :func:`per_kernel`).  The profiler serialises nothing, so overlapping kernels (the forward's
    two streams) each keep their own time: their sum can exceed the call's."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return per_kernel(prof.key_averages(), reps)


def time_op(torch, op: Op, shape, device, modes=MODES, kernels: bool = False, graph: bool = False) -> dict:
    """Forward and forward+backward times (ms) of ``op``, and the peak memory of forward+backward; on
    CUDA also the host's time to issue one forward (:func:`host_ms`, ``fwd_host_ms``); with ``kernels``
    (on CUDA) also each kernel's GPU time per call (:func:`kernel_times`), ``kernels_fwd`` and
    ``kernels_fwdbwd``; with ``graph`` (on CUDA) the forward replayed from a CUDA graph,
    ``fwd_graph_ms`` (or ``fwd_graph_error`` where the op cannot be captured)."""
    x = inputs(torch, shape, device, 2, fla=op.family == "fla")
    out = {}
    kernels = kernels and device.type == "cuda"
    if "fwd" in modes:
        out["fwd_ms"] = _bench(torch, lambda: op.call(x), device)
        if device.type == "cuda":
            out["fwd_host_ms"] = host_ms(lambda: op.call(x), torch.cuda.synchronize)
            if graph:
                try:
                    out["fwd_graph_ms"] = _graph_bench(lambda: op.call(x))
                except Exception as exc:     # an op with a host sync or an uncapturable launch
                    out["fwd_graph_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if kernels:
            out["kernels_fwd"] = kernel_times(torch, lambda: op.call(x))
        if op.segments is not None:
            # each level alone: the segments' elements, the scan over them, every segment's read-outs
            from .segments import anatomy
            out["levels"] = anatomy(**x, chunk_size=op.segments[0], segment_tokens=op.segments[1],
                                    config=op.segments[2], bench=lambda f: _bench(torch, f, device))
        if op.passes is not None:
            # the covariance and the mean kernel each alone (beside the read-outs' split of the segments
            # ops: the same kernels over more, shorter chains)
            from .chunk import chunk_bl_pass_times
            out["passes"] = chunk_bl_pass_times(**x, chunk_size=op.passes[0], config=op.passes[1],
                                                bench=lambda f: _bench(torch, f, device))
    if "fwdbwd" in modes and not op.fwd_only:
        leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
        do = torch.randn(*x["v"].shape, device=device, dtype=x["v"].dtype)

        def fb():
            op.call(leaves).backward(do)
        try:
            out["fwdbwd_ms"] = _bench(torch, fb, device)
        except Exception as exc:
            if not out:
                raise
            # the forward's times stay: fla 0.6 refuses the gated backward on Hopper under Triton < 3.7.1
            # (3 December) while its forward runs
            out["fwdbwd_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            return out
        if kernels:
            out["kernels_fwdbwd"] = kernel_times(torch, fb)
        if device.type == "cuda":
            out["fwdbwd_peak_MB"] = peak_mem_MB(torch, fb)
        if op.chunk is not None:
            # beside the measured peak: the chunked backward's buffers that the segment length changes,
            # from the shapes (chunk.backward_buffer_bytes; the token-by-token backward, where "auto"
            # takes it at D = 128, has none of them)
            from .chunk import backward_buffer_bytes
            B, T, H, D, m = shape
            out["bwd_segment_buffers_MB"] = sum(backward_buffer_bytes(B, T, H, D, m, 1, *op.chunk).values()) / 2**20
    return out


def drift(torch, op: Op, device, T=100_000, D=64, m=16, seg=10_000, seed=5) -> dict:
    """``op`` in fp32 against float64 ``naive_bl`` over a long sequence of random unit keys.

    Four heads with (ℓ², r²) = (1e-3, 0.1), (1e-2, 0.1), (0, 0.1), (1e-4, 1), no decay.  The op
    runs in segments chained through ``initial_state`` so that ``P`` can be inspected along the
    way; the float64 reference runs the same segments."""
    import torch.nn.functional as F

    from . import chunk_bl, fused_recurrent_bl, naive_bl

    H = 4
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = F.normalize(torch.randn(1, T, H, D, generator=g), dim=-1)
    k = F.normalize(torch.randn(1, T, H, D, generator=g), dim=-1)
    v = torch.randn(1, T, H, m, generator=g)
    heads = [[1e-3, 0.1], [1e-2, 0.1], [0.0, 0.1], [1e-4, 1.0]]
    l2 = torch.tensor([a for a, _ in heads]).expand(1, T, H).contiguous()
    r2 = torch.tensor([b for _, b in heads]).expand(1, T, H).contiguous()
    x = {n: t.to(device) for n, t in dict(q=q, k=k, v=v, l2=l2, r2=r2).items()}
    fn = fused_recurrent_bl if op.name == "fused" else chunk_bl
    kw = {} if op.name == "fused" else {"chunk_size": int(op.name.split("_C")[1])}
    st32 = st64 = None
    rows, num, den = [], {}, {}
    windows = [(0, 100), (100, 1000), (1000, 10_000), (10_000, T)]
    t0 = time.perf_counter()
    for s0 in range(0, T, seg):
        sl = {n: t[:, s0:s0 + seg].contiguous() for n, t in x.items()}
        o32, st32 = fn(**sl, initial_state=st32, output_final_state=True, validate=False, **kw)
        o64, st64 = naive_bl(**{n: t.double() for n, t in sl.items()}, initial_state=st64,
                             output_final_state=True, validate=False)
        diff = o32.double() - o64
        for w0, w1 in windows:
            a, b = max(w0, s0), min(w1, s0 + seg)
            if a < b:
                key = f"{w0}-{w1}"
                num[key] = num.get(key, 0.0) + float((diff[:, a - s0:b - s0] ** 2).sum())
                den[key] = den.get(key, 0.0) + float((o64[:, a - s0:b - s0] ** 2).sum())
        P = st32[1][0].double()                       # [H, D, D]
        lam = torch.linalg.eigvalsh(0.5 * (P + P.transpose(-1, -2)))
        tr = torch.diagonal(P, dim1=-2, dim2=-1).sum(-1)
        rows.append({"t": s0 + seg, "min_eig_over_trace": (lam.min(-1).values / tr).tolist(),
                     "max_asymmetry": float((P - P.transpose(-1, -2)).abs().max()),
                     "P_relerr_vs_f64": [_relerr(st64[1][0, h], st32[1][0, h]) for h in range(H)]})
    worst = min(min(r["min_eig_over_trace"]) for r in rows)
    return {"op": op.name, "T": T, "D": D, "m": m, "heads_l2_r2": heads,
            "o_relerr_by_window": {k: math.sqrt(num[k] / max(den[k], 1e-300)) for k in num},
            "checkpoints": rows, "worst_min_eig_over_trace": worst,
            "psd_criterion_min_eig_ge_-1e-5_trace": worst >= -1e-5, "seconds": time.perf_counter() - t0}


def _write(result, path):
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1, default=str)


def run(shapes=DEFAULT_SHAPES, ops=("fused", "chunk", "fla"), modes=MODES, chunk_sizes=(16,), backward="auto",
        fused_config=None, chunk_config=None, do_drift=False, out=None, device=None, bwd_segments=(None,),
        segment_tokens=DEFAULT_SEGMENT_TOKENS, state_dots=(None,), kernels=False, graph=False,
        bwd_start_every=(None,)):
    """Check and time ``ops`` on ``shapes``; write the JSON to ``out`` after every step (a run cut
    short still leaves what it measured).  ``device``: CUDA by default (the tests pass a CPU
    device with ``TRITON_INTERPRET=1``: checks through the interpreter, wall times of one call).
    ``kernels``: also each kernel's GPU time per call (CUDA only; :func:`time_op`); ``graph``: also each
    forward replayed from a CUDA graph (CUDA only)."""
    import torch

    from assocmem.provenance import provenance

    device = device or torch.device("cuda")
    info = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:
        pass
    table_ops = bl_ops(chunk_sizes if "chunk" in ops else (), backward, fused_config, chunk_config, bwd_segments,
                       segment_tokens if "segments" in ops else (), state_dots, bwd_start_every)
    if "fused" not in ops:
        del table_ops["fused"]
    fla = "not requested" if "fla" not in ops else fla_ops() if device.type == "cuda" else "needs CUDA"
    if isinstance(fla, dict):
        table_ops.update(fla)
    result = {"provenance": provenance(info), "ops": list(table_ops), "fla": fla if isinstance(fla, str) else "ok",
              "ceilings": ceilings_for(info["device"]), "rates_note": RATES_NOTE,
              "config": {"backward": backward, "chunk_sizes": list(chunk_sizes), "bwd_segments": list(bwd_segments),
                         "bwd_start_every": list(bwd_start_every), "state_dots": list(state_dots),
                         "segment_tokens": list(segment_tokens) if "segments" in ops else [],
                         "kernels": kernels, "graph": graph,
                         "fused": asdict(fused_config) if fused_config else "default",
                         "chunk": asdict(chunk_config) if chunk_config else "default"},
              "shapes": {}, "notes": ["times: medians of triton.testing.do_bench, ms; BL fp32 inputs and "
                                      "arithmetic, fla bf16 inputs; check: relative RMS error against float64 "
                                      "naive_bl",
                                      "fwd_host_ms: the host's median time to issue one forward, the device "
                                      "idle before it (about fwd_ms or more: the timing follows the host); "
                                      "fwd_graph_ms (--graph): the forward replayed from a CUDA graph; in a capture "
                                      "chunk_bl's cov_kernel=auto takes the row kernel where the quotient "
                                      "kernel would need its decay check on the host (D <= 64 with decays): "
                                      "--chunk-config cov_kernel=matmul times the same kernel as fwd_ms, "
                                      "cov_kernel=device makes auto's choice on the device (no host read)"]}
    for name in shapes:
        shape = SHAPES[name]
        entry = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape)), "check": {}, "times": {}})
        for op in table_ops.values():
            steps = [("check", lambda: check(torch, op, shape, device))] if op.family == "bl" else []
            steps.append(("times", lambda: time_op(torch, op, shape, device, modes, kernels, graph)))
            for what, f in steps:
                try:
                    entry[what][op.name] = f()
                except Exception as exc:   # recorded, not fatal: the other ops and shapes still come back
                    entry[what][op.name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(f"[{name}] {op.name} {what}: {entry[what][op.name]}", flush=True)
                if out:
                    _write(result, out)
        entry["ratios"] = ratios(entry["times"])
        entry["rates"] = rates(entry["times"], shape, result["ceilings"])
    if do_drift:
        result["drift"] = []
        for op in (o for o in table_ops.values() if o.family == "bl"):
            for D in (64, 128):
                try:
                    result["drift"].append(drift(torch, op, device, D=D))
                except Exception as exc:
                    result["drift"].append({"op": op.name, "D": D, "error": f"{type(exc).__name__}: {exc}"})
                print(f"[drift] {op.name} D={D}: {result['drift'][-1].get('o_relerr_by_window')}", flush=True)
                if out:
                    _write(result, out)
    if out:
        _write(result, out)
    print(table(result))
    return result


# the H200 SXM's ceilings (NVIDIA's datasheet, dense): what the achieved rates are measured against
CEILINGS = {"fp32_TFLOPs": 67.0, "bf16_tensor_TFLOPs": 989.0, "hbm_TBs": 4.8}
# the cards the device machine lends (datasheets, SXM, dense): the same SM, so the same arithmetic
# peaks; the H100's HBM3 is slower than the H200's HBM3e
CARD_CEILINGS = {"H200": CEILINGS, "H100": {"fp32_TFLOPs": 67.0, "bf16_tensor_TFLOPs": 989.0, "hbm_TBs": 3.35}}


def ceilings_for(device_name: str) -> dict:
    """The ceilings of the card named ``device_name`` (``torch.cuda.get_device_name``), with ``card``
    saying which datasheet they are; a card not in :data:`CARD_CEILINGS` gets the H200's, so named."""
    for card, c in CARD_CEILINGS.items():
        if card in (device_name or ""):
            return {**c, "card": card}
    return {**CEILINGS, "card": f"H200 (assumed: {device_name or 'unknown device'} has no entry)"}


RATES_NOTE = ("nominal work per (token, head): BL 5Dm + 4D^2 + 5D + 1 flops (the token-by-token filter's count, "
              "claim bl.cost) and the fp32 bytes of q, k, alpha, v in and o out plus l2, r2 (4(3D + 2m) + 8); fla's "
              "delta rules 6Dm flops (S k, the rank-1 update, S q; +Dm for GDN's decay) and bf16 q, k, v in, o out "
              "(2(2D + 2m)) plus beta (and the gate); forward+backward counted as 3x the forward's flops and "
              "bytes.  Rates are that work over the measured time, against the card's ceilings (fp32 CUDA cores for BL, "
              "bf16 tensor cores for fla)")


def nominal_work(name: str, shape) -> tuple[float, float] | None:
    """(flops, bytes) of one forward of op ``name`` on ``shape`` by the counts of :data:`RATES_NOTE`."""
    B, T, H, D, m = shape
    n = B * T * H
    if name == "fused" or name.startswith(("chunk_C", "segments_C")):
        return n * (5 * D * m + 4 * D * D + 5 * D + 1), n * (4 * (3 * D + 2 * m) + 8)
    if name.startswith("fla_"):
        gdn = "gdn" in name
        return n * (6 * D * m + (D * m if gdn else 0)), n * (2 * (2 * D + 2 * m) + 2 + (4 if gdn else 0))
    return None


def rates(times: dict, shape, ceilings: dict = CEILINGS) -> dict:
    """Achieved nominal TFLOP/s and TB/s of every timed op and mode, and their share of ``ceilings``
    (the card's: :func:`ceilings_for`)."""
    out = {}
    for name, t in times.items():
        work = nominal_work(name, shape)
        if work is None:
            continue
        peak = ceilings["bf16_tensor_TFLOPs"] if name.startswith("fla_") else ceilings["fp32_TFLOPs"]
        for mode, k in (("fwd", 1.0), ("fwdbwd", 3.0)):
            ms = t.get(f"{mode}_ms")
            if not isinstance(ms, float) or ms <= 0:
                continue
            tf, tb = k * work[0] / (ms * 1e-3) / 1e12, k * work[1] / (ms * 1e-3) / 1e12
            out.setdefault(name, {})[mode] = {"TFLOPs": tf, "pct_flop_peak": 100 * tf / peak,
                                              "TBs": tb, "pct_hbm": 100 * tb / ceilings["hbm_TBs"]}
    return out


def ratios(times: dict) -> dict:
    """BL / fla for the pairs of :data:`RATIOS` (each chunk size its own row)."""
    out = {}
    for bl, mode, ref in RATIOS:
        r = times.get(ref, {}).get(f"{mode}_ms")
        for name, t in times.items():
            if (name == bl or name.startswith(bl + "_C")) and isinstance(r, float) and isinstance(
                    t.get(f"{mode}_ms"), float):
                out[f"{name} {mode} / {ref} {mode}"] = t[f"{mode}_ms"] / r
    return out


def table(result) -> str:
    ops = result["ops"]
    cols = [(o, mo) for o in ops for mo in ("fwd_ms", "fwdbwd_ms")]
    f = lambda x: f"{x:.3f}" if isinstance(x, float) else "—"  # noqa: E731
    lines = ["| shape | " + " | ".join(f"{o} {mo[:-3]}" for o, mo in cols) + " |",
             "| --- |" + " --- |" * len(cols)]
    tail = []
    card = result.get("ceilings", {}).get("card", "H200").split(" ")[0]
    for name, e in result["shapes"].items():
        lines.append(f"| {name} | " + " | ".join(f(e["times"].get(o, {}).get(mo)) for o, mo in cols) + " |")
        tail += [f"{name}: {k} = {v:.2f}" for k, v in e.get("ratios", {}).items()]
        tail += [f"{name}: {o} {mo}: {r['TFLOPs']:.2f} TFLOP/s ({r['pct_flop_peak']:.1f} % of peak), "
                 f"{r['TBs']:.3f} TB/s ({r['pct_hbm']:.1f} % of the {card}'s HBM)"
                 for o, per in e.get("rates", {}).items() for mo, r in per.items()]
        bad = [o for o, c in e["check"].items() if not check_ok(c)]
        if bad:
            tail.append(f"{name}: CHECK FAILED for {', '.join(bad)}")
    return "\n".join(lines + [""] + tail)


def check_ok(c: dict) -> bool:
    return ("error" not in c and c["nan_free"] and c["grad_nan_free"] and c["fwd_o"] < 1e-3
            and all(v < 1e-2 for k, v in c.items() if k.startswith("grad_") and isinstance(v, float)))


# -- the command line (``assocmem gpu bench``; assocmem/commands/gpu.py registers it) -----------------
def _config_items(cls):
    """An argparse type: ``KEY=VALUE,…`` → an instance of the config dataclass ``cls`` (integers read as such)."""
    import argparse

    def parse(text: str):
        fields = {}
        for part in (p.strip() for p in text.split(",")):
            key, eq, val = part.partition("=")
            if not eq or not key.strip() or not val.strip():
                raise argparse.ArgumentTypeError(f"expected KEY=VALUE items (got {part!r})")
            if key.strip() in fields:
                raise argparse.ArgumentTypeError(f"{key.strip()} is given twice")
            val = val.strip()
            fields[key.strip()] = int(val) if val.lstrip("-").isdigit() else None if val == "None" else val
        try:
            return cls(**fields)
        except TypeError:
            unknown = sorted(set(fields) - set(cls.__dataclass_fields__))
            raise argparse.ArgumentTypeError(f"unknown field {unknown[0]!r} (fields: "
                                             f"{', '.join(cls.__dataclass_fields__)})") from None
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = cls.__name__
    return parse


def _tokens_item(text: str, also: str = ""):
    """One value of ``--segment-tokens``: an integer ``>= 1``."""
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("must be an integer >= 1" + also)
    return int(text)


def _segments_item(text: str):
    """One value of ``--bwd-segments``: ``none`` or an integer ``L >= 1``."""
    return None if text.lower() == "none" else _tokens_item(text, " or none")


def _start_every_item(text: str):
    """One value of ``--bwd-start-every``: ``auto`` or an integer ``K >= 1``."""
    return None if text.lower() == "auto" else _tokens_item(text, " or auto")


def add_arguments(p):
    from assocmem.args import Items

    from .config import BACKWARDS, STATE_DOTS, ChunkConfig, FusedConfig

    p.add_argument("--shapes", type=Items(SHAPES, what="shape"), default=DEFAULT_SHAPES,
                   help="comma list of shapes (B, T, H, D, m): " + ", ".join(f"{n} {s}" for n, s in SHAPES.items())
                   + " (default S1,S2,S3,S4)")
    p.add_argument("--ops", type=Items(BL_OPS + ("fla",), what="op"), default=("fused", "chunk", "fla"),
                   help="comma list of fused (fused_recurrent_bl), chunk (chunk_bl), segments (chunk_bl_segments, "
                        "issue 19's two-level prototype, forward only), fla (fla's delta-rule ops); default "
                        "fused,chunk,fla")
    p.add_argument("--state-dots", type=Items(STATE_DOTS, what="state_dot"), default=(None,),
                   help="comma list of ChunkConfig.state_dot values (right, left): one chunk op each, the "
                        "left one named chunk_C{C}_SL, timed side by side (default: the config's own)")
    p.add_argument("--segment-tokens", type=Items(item=_tokens_item, what="segment length"),
                   default=DEFAULT_SEGMENT_TOKENS,
                   help="comma list of chunk_bl_segments' segment lengths in tokens (multiples of the chunk size "
                        "that divide T); one op each, segments_C{C}_L{L} (default 256)")
    p.add_argument("--modes", type=Items(MODES, what="mode"), default=MODES, help="comma list of fwd, fwdbwd")
    p.add_argument("--chunk-sizes", type=Items(("16", "32", "64"), int, what="chunk size"), default=(16,),
                   help="comma list of chunk_bl's chunk sizes, of 16, 32, 64 "
                        "(default 16, chunk_bl's fastest)")
    p.add_argument("--backward", choices=BACKWARDS, default="auto", help="chunk_bl's backward (default auto)")
    p.add_argument("--bwd-segments", type=Items(item=_segments_item, what="segment length"), default=(None,),
                   help="comma list of chunk_bl's backward segment lengths in chunks (ChunkConfig."
                        "bwd_segment_chunks), each an integer >= 1 or none (one segment); one op each, "
                        "chunk_C{C}_L{L}, timed side by side (default none)")
    p.add_argument("--bwd-start-every", type=Items(item=_start_every_item, what="start-state spacing"),
                   default=(None,),
                   help="comma list of ChunkConfig.bwd_start_every values for the segmented ops of --bwd-segments, "
                        "each an integer >= 1 or auto (every K-th segment's start state kept; auto: the integer "
                        "nearest the square root of the segment count); one op each, chunk_C{C}_L{L}_K{K} "
                        "(default auto)")
    p.add_argument("--fused-config", type=_config_items(FusedConfig), default=None, metavar="KEY=VALUE,...",
                   help=f"launch parameters of fused_recurrent_bl ({', '.join(FusedConfig.__dataclass_fields__)})")
    p.add_argument("--chunk-config", type=_config_items(ChunkConfig), default=None, metavar="KEY=VALUE,...",
                   help=f"launch parameters of chunk_bl ({', '.join(ChunkConfig.__dataclass_fields__)})")
    p.add_argument("--drift", action="store_true", help="also the fp32 drift over 1e5 tokens (minutes)")
    p.add_argument("--kernels", action="store_true",
                   help="also each kernel's GPU time per call, forward and forward+backward (torch.profiler)")
    p.add_argument("--graph", action="store_true",
                   help="also each forward replayed from a CUDA graph (the device's time without the host's "
                        "launches; an op that cannot be captured records why)")
    p.add_argument("--out", default=None,
                   help=f"write the JSON here (default {DEFAULT_OUT}; the folder of a path you give must exist)")


def run_args(args) -> int:
    from assocmem.outputs import output_file

    import torch

    cuda = torch.cuda.is_available()
    if args.out is not None or cuda:    # a path the user typed is checked first (the probe leaves nothing)
        out = output_file("--out", DEFAULT_OUT if args.out is None else args.out, parents=args.out is None)
    if not cuda:
        raise ValueError("no CUDA device: the benchmark times compiled kernels (on a CPU the same kernels are "
                         "checked by the test suite: python3 -m pytest -m gpu)")
    res = run(args.shapes, args.ops, args.modes, args.chunk_sizes, args.backward, args.fused_config,
              args.chunk_config, args.drift, out=str(out), bwd_segments=args.bwd_segments,
              segment_tokens=args.segment_tokens, state_dots=args.state_dots, kernels=args.kernels,
              graph=args.graph, bwd_start_every=args.bwd_start_every)
    print(f"JSON written to {out}")
    bad = [f"{n}/{o}" for n, e in res["shapes"].items() for o, c in e["check"].items() if not check_ok(c)]
    if bad:
        print(f"correctness check failed on {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    from assocmem.args import Parser, dispatch

    p = Parser(prog="python -m assocmem.gpu.bench", description=__doc__.split("\n")[0])
    add_arguments(p)
    p.set_defaults(func=run_args)
    return dispatch(p, argv)


if __name__ == "__main__":
    sys.exit(main())
