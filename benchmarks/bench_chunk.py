"""Device benchmark of the chunked BL kernels (issue 6): ``python benchmarks/bench_chunk.py --out f.json``.

One process, one device (PERF.md "How to benchmark"), in this order, every
section guarded so that a failure is recorded and the rest still runs:

1. correctness, every output buffer NaN-poisoned first: ``chunk_bl`` (fp32)
   against float64 ``naive_bl`` (two batch elements x two heads, full length) and
   against ``fused_recurrent_bl`` (fp32, whole shape), at S1-S3, for every chunk
   size; strong decays (α ∈ [0.2, 0.4]) and grouped noise on a smaller shape;
   gradients (the chunked forward + the fused backward) against float64
   ``naive_bl`` on a truncated copy; a long sequence (T = 20 000);
2. a launch sweep (chunk size, covariance warps, value block) of the forward;
3. timings (``triton.testing.do_bench``, median ms) of the chunked forward, its
   two passes alone, forward+backward and peak memory, beside the fused kernel
   and fla 0.6 (``chunk_gated_delta_rule`` forward, ``chunk_delta_rule``
   forward+backward, bf16 inputs) through :mod:`assocmem.gpu.bench`;
4. the TF32 value-side variant (error and time), and a FLOP / byte model giving
   the achieved rates against the H200 ceilings.

On a CPU with ``TRITON_INTERPRET=1`` the ``tiny`` shape runs sections 1-3
through the interpreter (a smoke test of this script).
"""
from __future__ import annotations

import argparse
import os
import time
import traceback

SHAPES = {"S1": (8, 2048, 16, 64, 64), "S2": (32, 2048, 4, 128, 128), "S3": (4, 8192, 16, 64, 64),
          "tiny": (2, 40, 2, 16, 16)}
# H200 SXM ceilings (NVIDIA datasheet): fp32 on CUDA cores (what input_precision="ieee" runs on),
# dense TF32 / BF16 tensor cores, HBM3e bandwidth
H200 = {"fp32_tflops": 67.0, "tf32_tc_tflops": 494.7, "bf16_tc_tflops": 989.4, "hbm_TBps": 4.8}


def _relerr(torch, ref, out):
    ref, out = ref.detach().double(), out.detach().double()
    return float((ref - out).norm() / ref.norm().clamp_min(1e-300))


def _guard(store, name, fn):
    try:
        store[name] = fn()
    except Exception as exc:  # recorded, not fatal: the other sections still come back
        store[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "trace": traceback.format_exc(limit=6)}
    print(f"  {name}: {str(store[name])[:400]}", flush=True)


def check(torch, shape, device, sizes=(16, 32, 64), seed=0, strong=False, G=1, config=None):
    from assocmem.gpu import fused_recurrent as fr
    from assocmem.gpu import chunk_bl, fused_recurrent_bl, naive_bl
    from assocmem.gpu.bench import _inputs

    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, seed)
    if strong:
        x["alpha"] = 0.2 + 0.2 * torch.rand_like(x["alpha"])
    if G > 1:
        x["r2"] = torch.rand(B, T, H, G, device=device) * 0.5 + 0.05
    b, h = min(B, 2), min(H, 2)
    sub = {n: t[:b, :, :h].double() for n, t in x.items()}
    o_ref, (M_ref, P_ref) = naive_bl(**sub, output_final_state=True, validate=False)
    fr.POISON = True
    out = {}
    try:
        of, (Mf, Pf) = fused_recurrent_bl(**x, output_final_state=True, validate=False)
        out["fused_vs_f64_o"] = _relerr(torch, o_ref, of[:b, :, :h])
        for C in sizes:
            o, (M, P) = chunk_bl(**x, chunk_size=C, output_final_state=True, validate=False, config=config)
            if device.type == "cuda":
                torch.cuda.synchronize()
            out[f"C{C}"] = {
                "nan_free": not bool(torch.isnan(o).any() or torch.isnan(M).any() or torch.isnan(P).any()),
                "vs_f64_o": _relerr(torch, o_ref, o[:b, :, :h]),
                "vs_f64_M": _relerr(torch, M_ref, M[:b, :h]),
                "vs_f64_P": _relerr(torch, P_ref, P[:b, :h]),
                "vs_fused_o": _relerr(torch, of, o), "vs_fused_P": _relerr(torch, Pf, P)}
    finally:
        fr.POISON = False
    return out


def check_grads(torch, shape, device, C=64, Tg=256, seed=1, config=None):
    from assocmem.gpu import fused_recurrent as fr
    from assocmem.gpu import chunk_bl, naive_bl
    from assocmem.gpu.bench import _inputs

    B, T, H, D, m = shape
    x = _inputs(torch, (min(B, 2), min(T, Tg), min(H, 2), D, m), device, seed)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    wo = torch.randn(*x["v"].shape, generator=gen, dtype=torch.float64).to(device)
    grads = []
    fr.POISON = True
    try:
        for fn, dt, kw in ((naive_bl, torch.float64, {}),
                           (chunk_bl, torch.float32, {"chunk_size": C, "config": config})):
            leaves = {n: t.to(dt).clone().requires_grad_(True) for n, t in x.items()}
            out, _ = fn(**leaves, validate=False, **kw)
            (out.double() * wo).sum().backward()
            grads.append({n: t.grad for n, t in leaves.items()})
    finally:
        fr.POISON = False
    res = {f"grad_{n}": _relerr(torch, grads[0][n], grads[1][n]) for n in grads[0]}
    res["nan_free"] = bool(all(not torch.isnan(t).any() for t in grads[1].values()))
    return res


def check_long(torch, device, T=20_000, D=64, m=16, C=64):
    from assocmem.gpu import chunk_bl, fused_recurrent_bl, naive_bl
    from assocmem.gpu.bench import _inputs

    x = _inputs(torch, (1, T, 2, D, m), device, 9)
    ref, (_, Pr) = naive_bl(**{n: t.double() for n, t in x.items()}, output_final_state=True, validate=False)
    o, (_, P) = chunk_bl(**x, chunk_size=C, output_final_state=True, validate=False)
    of, _ = fused_recurrent_bl(**x, validate=False)
    lam = torch.linalg.eigvalsh(P.double())
    tr = torch.diagonal(P.double(), dim1=-2, dim2=-1).sum(-1)
    return {"T": T, "chunk_vs_f64_o": _relerr(torch, ref, o), "fused_vs_f64_o": _relerr(torch, ref, of),
            "chunk_vs_f64_P_T": _relerr(torch, Pr, P),
            "min_eig_over_trace": float((lam[..., 0] / tr).min()),
            "asym": float((P - P.transpose(-1, -2)).abs().max())}


def _rates(cm, seconds, **extra):
    """A cost model's FLOPs and bytes over a measured time: achieved rates and their fractions of
    the H200 ceilings (fp32 CUDA-core peak, HBM bandwidth)."""
    tflops, tbps = cm["flops"] / seconds / 1e12, cm["bytes"] / seconds / 1e12
    return dict(cm, **extra, achieved_TFLOPs=tflops, achieved_TBps=tbps,
                fraction_fp32_peak=tflops / H200["fp32_tflops"], fraction_hbm=tbps / H200["hbm_TBps"])


def _bench(torch, fn, device):
    from assocmem.gpu.bench import _bench as b

    return b(fn, device)


def sweep(torch, shape, device):
    """Chunk size at the default warps, then covariance warps, then the value block (greedy: each
    new configuration costs two compilations)."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs
    from assocmem.gpu.chunk import default_chunk_config

    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, 2)
    rows = {}

    def key(c):
        return f"C{c['C']}_cw{c['cov_warps']}_BV{c['BV']}_mw{c['mean_warps']}"

    def run(c):
        k = key(c)
        if k not in rows:
            cfg = {n: v for n, v in c.items() if n != "C"}
            try:
                rows[k] = _bench(torch, lambda: chunk_bl(**x, chunk_size=c["C"], validate=False, config=cfg), device)
            except Exception as exc:
                rows[k] = f"error: {type(exc).__name__}: {str(exc)[:160]}"
        return rows[k] if isinstance(rows[k], float) else float("inf")

    cands = [dict(default_chunk_config(D, m, 1, C, B * H), C=C) for C in (16, 32, 64)]
    best = min(cands, key=run)
    w = best["cov_warps"] or (4 if D <= 64 else 8)
    best = min([best] + [dict(best, cov_warps=v) for v in (w // 2, w * 2) if 4 <= v <= 16], key=run)
    alts = [dict(best, BV=bv, mean_warps=mw) for bv, mw in ((16, 4), (32, 8), (64, 8)) if bv <= max(16, m)]
    best = min([best] + alts, key=run)
    return {"rows": rows, "best": {n: best[n] for n in ("C", "cov_warps", "BV", "mean_warps")}}


def time_passes(torch, shape, device, C, cfg, only=None):
    """Each chunked pass alone (launched on pre-allocated buffers); ``only``: "cov" or "mean" (one
    pass, its median in ms)."""
    from assocmem.gpu.bench import _inputs
    from assocmem.gpu.chunk import _chunk_forward, _cov_kernel, _maxnreg, _mm_variant, chunk_kernels

    K = chunk_kernels(device.type != "cuda")
    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, 1)
    f32 = dict(dtype=torch.float32, device=device)
    P0 = torch.eye(D, **f32).expand(B, H, 1, D, D).contiguous()
    M0 = torch.zeros(B, H, D, m, **f32)
    r2 = x["r2"][..., None].contiguous()
    NT = -(-T // C)
    o, MT, PT, u, beta, e = _chunk_forward(K, x["q"], x["k"], x["v"], x["l2"], r2, x["alpha"], M0, P0, C, cfg,
                                           False)
    W = torch.empty(B, H, 1, NT, C, C, **f32)
    Aq = torch.empty_like(W)
    Ut = torch.empty(B, H, 1, NT, C, D, **f32)


    kern, warps = _cov_kernel(K, cfg, x["alpha"], C)
    extra = _mm_variant(cfg) if kern is K.chunk_cov_fwd_mm_kernel else {}

    def cov():
        kern[(B * H,)](x["q"], x["k"], x["alpha"], x["l2"], r2, P0, u, beta, W, Aq, Ut, PT, T, NT, 0, NT,
                       H=H, G=1, D=D, BD=cfg["BD"], C=C, HAS_ALPHA=True, PREC=cfg.get("cov_precision", "ieee"),
                       num_warps=warps, num_stages=cfg.get("stages", 1), **extra, **_maxnreg(cfg, "cov_maxnreg"))
    cov()
    NVG = -(-m // cfg["BV"])

    def mean():
        K.chunk_mean_fwd_kernel[(B * H * NVG,)](
            x["q"], x["k"], x["v"], x["alpha"], beta, W, Aq, Ut, M0, o, o, MT, T, NT, 0, NT,
            H=H, G=1, D=D, M=m, MG=m, BD=cfg["BD"], BV=cfg["BV"], NVG=NVG, C=C, HAS_ALPHA=True,
            STORE_E=False, PREC=cfg.get("mean_precision", "ieee"), num_warps=cfg["mean_warps"],
            num_stages=cfg.get("stages", 1), **_maxnreg(cfg, "mean_maxnreg"))
    if only == "cov":
        return _bench(torch, cov, device)
    if only == "mean":
        return _bench(torch, mean, device)
    return {"cov_pass": _bench(torch, cov, device), "mean_pass": _bench(torch, mean, device)}


def cost_model(shape, C, G=1):
    """FLOPs and compulsory bytes of the chunked forward as implemented (fp32 inputs).

    Covariance pass per token and group: ``4 D²`` (the two ``C×D×D`` matmuls per
    chunk) + ``≈ 14 C D`` (the row loop: R row, R⊙ω, Σ_y row, u, q·(R⊙U), each a
    ``C×D`` tile op) + ``≈ 6 C²`` (the ``L⁻¹`` row).  Mean pass per token and value
    column: ``6 D + 4 C``.  Bytes: ``q, k, α`` (3D), ``v, o`` (2m), ``ℓ², r²`` and
    the intermediates written and read back (``u, Ũ``: 2D; ``W, Aq``: 2C; β),
    fp32; the mean pass re-reads ``q, k, α``.
    """
    B, T, H, D, m = shape
    n = B * T * H
    flops = n * (G * (4 * D * D + 14 * C * D + 6 * C * C) + m * (6 * D + 4 * C))
    bytes_ = 4 * n * (3 * D + 2 * m + 2 + G * (2 * (2 * D + 2 * C) + 2) + 3 * D)
    return {"flops": flops, "bytes": bytes_}


def cost_model_mm(shape, C, G=1):
    """FLOPs and compulsory bytes of the chunked forward with the quotient covariance kernel.

    Covariance pass per token and group: ``4 D²`` (``Ω̃ = (γ⊙K) P_0`` and the
    ``Zᵀ diag(β) Z`` update, ``C×D×D`` each a chunk) + ``6 C D`` (``Σ_y``, ``Z``, ``Aq``)
    + ``≈ 8 C²`` (the ``L⁻¹`` row recursion); mean pass as :func:`cost_model`.
    Bytes as :func:`cost_model`."""
    B, T, H, D, m = shape
    n = B * T * H
    flops = n * (G * (4 * D * D + 6 * C * D + 8 * C * C) + m * (6 * D + 4 * C))
    return {"flops": flops, "bytes": cost_model(shape, C, G)["bytes"]}


def timings(torch, shape, device, best):
    from assocmem.gpu import chunk_bl, fused_recurrent_bl
    from assocmem.gpu.bench import _inputs, _time_fla
    from assocmem.gpu.chunk import default_chunk_config

    B, T, H, D, m = shape
    C = best["C"]
    cfg = dict(default_chunk_config(D, m, 1, C, B * H), **{k: v for k, v in best.items() if k != "C"})
    x = _inputs(torch, shape, device, 2)
    res = {"config": dict(cfg, C=C)}
    res["chunk_fwd"] = _bench(torch, lambda: chunk_bl(**x, chunk_size=C, validate=False, config=cfg), device)
    xb = dict(x, q=x["q"].bfloat16(), k=x["k"].bfloat16(), v=x["v"].bfloat16())
    res["chunk_fwd_bf16_inputs"] = _bench(
        torch, lambda: chunk_bl(**xb, chunk_size=C, validate=False, config=cfg), device)
    res["fused_fwd"] = _bench(torch, lambda: fused_recurrent_bl(**x, validate=False), device)
    res.update(time_passes(torch, shape, device, C, cfg))
    # TF32 value side: time and error against the ieee forward
    cfg32 = dict(cfg, mean_precision="tf32")
    res["chunk_fwd_tf32_mean"] = _bench(torch, lambda: chunk_bl(**x, chunk_size=C, validate=False, config=cfg32),
                                        device)
    o1, _ = chunk_bl(**x, chunk_size=C, validate=False, config=cfg)
    o2, _ = chunk_bl(**x, chunk_size=C, validate=False, config=cfg32)
    res["tf32_mean_relerr_vs_ieee"] = _relerr(torch, o1, o2)
    cfgc = dict(cfg, cov_precision="tf32")
    res["chunk_fwd_tf32_cov"] = _bench(torch, lambda: chunk_bl(**x, chunk_size=C, validate=False, config=cfgc),
                                       device)
    o3, _ = chunk_bl(**x, chunk_size=C, validate=False, config=cfgc)
    res["tf32_cov_relerr_vs_ieee"] = _relerr(torch, o1, o3)
    leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
    do = torch.randn(B, T, H, m, device=device)

    def fb():
        o, _ = chunk_bl(**leaves, chunk_size=C, validate=False, config=cfg)
        o.backward(do)
    res["chunk_fwdbwd"] = _bench(torch, fb, device)

    def fbf():
        o, _ = fused_recurrent_bl(**leaves, validate=False)
        o.backward(do)
    res["fused_fwdbwd"] = _bench(torch, fbf, device)
    if device.type == "cuda":
        for name, f in (("chunk", fb), ("fused", fbf)):
            res[f"{name}_fwdbwd_peak_mem_MB"] = peak_mem_MB(torch, f)
        res.update(_time_fla(torch, shape, device))
    res["model"] = _rates(cost_model(shape, C), res["chunk_fwd"] * 1e-3)
    return res


def run(shapes, out):
    import torch

    from assocmem.provenance import provenance

    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if device.type != "cuda":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        shapes = ["tiny"]
    info = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu (Triton interpreter)",
            "ceilings": H200}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:
        pass
    result = {"provenance": provenance(info), "shapes": {}, "notes": [
        "times: medians of triton.testing.do_bench, ms; BL fp32 inputs and fp32 arithmetic, fla bf16 inputs",
        "chunk_fwdbwd = chunked Triton forward + the token-by-token Triton backward (exact gradients)",
        "model: FLOPs/bytes of the chunked forward as implemented (benchmarks/bench_chunk.py:cost_model)"]}
    t0 = time.time()
    tiny = device.type != "cuda"
    for name in shapes:
        shape = SHAPES[name]
        print(f"[{name}] {shape} ({time.time() - t0:.0f} s)", flush=True)
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        _guard(e, "check", lambda: check(torch, shape, device, sizes=(16, 32) if tiny else (16, 32, 64)))
        if not tiny:
            _guard(e, "sweep", lambda: sweep(torch, shape, device))
            best = e["sweep"]["best"] if "best" in e.get("sweep", {}) else {"C": 64}
        else:
            best = {"C": 16}
        _guard(e, "times", lambda: timings(torch, shape, device, best) if not tiny else
               {"chunk_fwd": _bench(torch, lambda: None, device)})
        if out:
            _bench_write(result, out)
    extra = result.setdefault("extra", {})
    small = (2, 300, 2, 32, 16) if not tiny else (1, 40, 1, 8, 8)
    _guard(extra, "strong_decay", lambda: check(torch, small, device, sizes=(16, 32, 64), strong=True))
    _guard(extra, "grouped_G2", lambda: check(torch, small, device, sizes=(16, 64), G=2))
    _guard(extra, "grads_D64", lambda: check_grads(torch, (2, 256, 2, 64, 64), device, Tg=256 if not tiny else 20))
    if not tiny:
        _guard(extra, "grads_D128_C32", lambda: check_grads(torch, (2, 256, 2, 128, 128), device, C=32))
        _guard(extra, "long_T20000", lambda: check_long(torch, device))
    result["seconds"] = time.time() - t0
    if out:
        _bench_write(result, out)
    print(table(result))
    return result




from assocmem.gpu.bench import _write as _bench_write, peak_mem_MB  # noqa: E402


def table(result) -> str:
    def f(v):
        return f"{v:.3g}" if isinstance(v, float) else "—"

    lines = ["| shape | C | chunk fwd | cov pass | mean pass | fused fwd | fla GDN chunk fwd | chunk fwd+bwd | "
             "fla delta chunk fwd+bwd | peak MB chunk / fla |", "|" + " --- |" * 10]
    ratios = []
    for name, e in result["shapes"].items():
        t = e.get("times", {})
        if not isinstance(t, dict) or "chunk_fwd" not in t:
            continue
        lines.append(f"| {name} | {t.get('config', {}).get('C', '—')} | {f(t.get('chunk_fwd'))} | "
                     f"{f(t.get('cov_pass'))} | {f(t.get('mean_pass'))} | {f(t.get('fused_fwd'))} | "
                     f"{f(t.get('fla_chunk_gdn_fwd'))} | {f(t.get('chunk_fwdbwd'))} | "
                     f"{f(t.get('fla_chunk_delta_fwdbwd'))} | {f(t.get('chunk_fwdbwd_peak_mem_MB'))} / "
                     f"{f(t.get('fla_chunk_delta_fwdbwd_peak_mem_MB'))} |")
        g, fb = t.get("fla_chunk_gdn_fwd"), t.get("fla_chunk_delta_fwdbwd")
        if isinstance(g, float):
            ratios.append(f"{name}: chunk fwd / fla GDN chunk fwd = {t['chunk_fwd'] / g:.2f} (target <= 2)")
        if isinstance(fb, float) and isinstance(t.get("chunk_fwdbwd"), float):
            ratios.append(f"{name}: chunk fwd+bwd / fla delta chunk fwd+bwd = {t['chunk_fwdbwd'] / fb:.2f} "
                          "(target <= 3)")
    return "\n".join(lines + [""] + ratios)


def quick(shapes, out):
    """A second, short device run after a kernel change: correctness at C = 16 (NaN-poisoned, vs float64),
    the forward at the covariance warps 4 and 8, each pass alone, forward+backward, and the token-by-token
    forward as the anchor between runs (fla timings: the full run's JSON)."""
    import torch

    from assocmem.gpu import chunk_bl, fused_recurrent_bl
    from assocmem.gpu.bench import _inputs
    from assocmem.gpu.chunk import default_chunk_config
    from assocmem.provenance import provenance

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    name0 = torch.cuda.get_device_name(0) if cuda else "cpu (Triton interpreter)"
    result = {"provenance": provenance({"device": name0, "mode": "quick"}), "shapes": {}}
    for name in shapes:
        shape = SHAPES[name]
        B, T, H, D, m = shape
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        if name != "S3":
            _guard(e, "check", lambda: check(torch, shape, device, sizes=(16,)))
        x = _inputs(torch, shape, device, 2)
        t = e.setdefault("times", {})
        best = None
        for cw in ((4, 8) if D <= 64 else (8, 16)):
            cfg = dict(default_chunk_config(D, m, 1, 16, B * H), cov_warps=cw)
            _guard(t, f"chunk_fwd_C16_cw{cw}", lambda: _bench(
                torch, lambda: chunk_bl(**x, chunk_size=16, validate=False, config=cfg), device))
            v = t[f"chunk_fwd_C16_cw{cw}"]
            if isinstance(v, float) and (best is None or v < t[f"chunk_fwd_C16_cw{best['cov_warps']}"]):
                best = cfg
        t["config"] = best
        t["chunk_fwd"] = t[f"chunk_fwd_C16_cw{best['cov_warps']}"]
        _guard(t, "passes", lambda: time_passes(torch, shape, device, 16, best))
        _guard(t, "fused_fwd", lambda: _bench(torch, lambda: fused_recurrent_bl(**x, validate=False), device))
        if name != "S3":
            leaves = {n: v.clone().requires_grad_(True) for n, v in x.items()}
            do = torch.randn(B, T, H, m, device=device)

            def fb():
                o, _ = chunk_bl(**leaves, chunk_size=16, validate=False, config=best)
                o.backward(do)
            _guard(t, "chunk_fwdbwd", lambda: _bench(torch, fb, device))
        if out:
            _bench_write(result, out)
    return result


def _session(shapes, mode, **info):
    """``(torch, device, cuda, shapes, result)`` of a device run: interpreted ``tiny`` shape on a
    CPU, and the result dict with provenance."""
    import torch

    from assocmem.provenance import provenance

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        shapes = ["tiny"]
    name = torch.cuda.get_device_name(0) if cuda else "cpu (interpreter)"
    return torch, device, cuda, shapes, {"provenance": provenance({"device": name, "mode": mode, **info}),
                                         "shapes": {}}


def mm(shapes, out, budget_s=400.0):
    """Device run of the quotient (matmul) covariance kernel (``cov_kernel="matmul"``): checks
    (NaN-poisoned, float64 reference), the covariance pass alone over chunk size x warps x
    unrolling x precision (the product-only row kernel as the anchor), the mean pass over the
    value block x precision, then the forward, forward+backward and peak memory of the best
    configuration beside fla.  Sections stop being swept once ``budget_s`` has passed."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs, _time_fla
    from assocmem.gpu.chunk import default_chunk_config

    torch, device, cuda, shapes, result = _session(shapes, "mm", ceilings=H200)
    t0 = time.time()

    def late():
        return time.time() - t0 > budget_s

    for name in shapes:
        shape = SHAPES[name]
        B, T, H, D, m = shape
        print(f"[{name}] {shape} ({time.time() - t0:.0f} s)", flush=True)
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        mmc = {"cov_kernel": "matmul"}
        _guard(e, "check_matmul", lambda: check(torch, shape, device, sizes=(16, 64) if cuda else (16,),
                                                config=mmc))
        base = default_chunk_config(D, m, 1, 16, B * H)
        cands = [dict(base, C=16, cov_kernel="rows", cov_warps=8)]
        for C in ((16, 32, 64) if cuda else (16,)):
            for cw in ((4, 8) if cuda else (4,)):
                cands.append(dict(base, C=C, cov_kernel="matmul", cov_warps=cw))
        cov = e.setdefault("cov_pass", {})

        def ckey(c):
            return (f"{c['cov_kernel']}_C{c['C']}_cw{c['cov_warps']}" + ("_unroll" if c.get("unroll") else "")
                    + ("" if c.get("cov_precision", "ieee") == "ieee" else "_" + c["cov_precision"]))

        def timer(store, key, only):
            """Time one pass for a candidate once (memoised in ``store``); inf on error or past the budget."""
            def t(c):
                k = key(c)
                if k not in store and not late():
                    _guard(store, k, lambda: time_passes(torch, shape, device, c["C"],
                                                         {n: v for n, v in c.items() if n != "C"}, only=only))
                v = store.get(k)
                return v if isinstance(v, float) else float("inf")
            return t
        tcov = timer(cov, ckey, "cov")
        for c in cands:
            tcov(c)
        best = min(cands[1:], key=tcov)
        # full unrolling of the row loop only for C <= 32 (C = 64 unrolled is a long compile)
        best = min([best, dict(best, cov_precision="tf32x3")] + ([dict(best, unroll=True)] if best["C"] <= 32
                                                                 else []), key=tcov)
        mean = e.setdefault("mean_pass", {})
        mcands = []
        for bv, mw in ((16, 4), (32, 8), (64, 8)):
            for prec in ("ieee", "tf32x3"):
                if bv <= max(16, m):
                    mcands.append(dict(best, BV=bv, mean_warps=mw, mean_precision=prec))

        tmean = timer(mean, lambda c: f"BV{c['BV']}_mw{c['mean_warps']}_{c['mean_precision']}", "mean")
        for c in mcands:
            tmean(c)
        best_ieee = min([c for c in mcands if c["mean_precision"] == "ieee"], key=tmean)
        best_any = min(mcands, key=tmean)
        t = e.setdefault("times", {})
        x = _inputs(torch, shape, device, 2)
        for tag, c in (("ieee", dict(best_ieee, cov_precision="ieee")), ("best", best_any)):
            cfg = {n: v for n, v in c.items() if n != "C"}
            t[f"config_{tag}"] = c
            _guard(t, f"chunk_fwd_{tag}", lambda: _bench(
                torch, lambda: chunk_bl(**x, chunk_size=c["C"], validate=False, config=cfg), device))
            if tag == "best" and best_any != best_ieee:
                _guard(t, "check_best", lambda: check(torch, shape, device, sizes=(c["C"],), config=cfg))
        c = best_ieee
        cfg = {n: v for n, v in c.items() if n != "C"}
        leaves = {n: v.clone().requires_grad_(True) for n, v in x.items()}
        do = torch.randn(B, T, H, m, device=device)

        def fb():
            o, _ = chunk_bl(**leaves, chunk_size=c["C"], validate=False, config=cfg)
            o.backward(do)
        _guard(t, "chunk_fwdbwd_ieee", lambda: _bench(torch, fb, device))
        if cuda:
            t["chunk_fwdbwd_peak_mem_MB"] = peak_mem_MB(torch, fb)
            _guard(t, "fla", lambda: _time_fla(torch, shape, device))
        if out:
            _bench_write(result, out)
    if cuda:
        small = (2, 300, 2, 32, 16)
        extra = result.setdefault("extra", {})
        _guard(extra, "strong_decay_auto", lambda: check(torch, small, device, sizes=(16, 32, 64), strong=True))
        _guard(extra, "grouped_G2_matmul", lambda: check(torch, small, device, sizes=(16, 64), G=2,
                                                         config={"cov_kernel": "matmul"}))
        _guard(extra, "grads_D64_C16", lambda: check_grads(torch, (2, 256, 2, 64, 64), device, C=16))
    result["seconds"] = time.time() - t0
    if out:
        _bench_write(result, out)
    return result


def mm2(shapes, out):
    """A short device run after the transposed-factor change of the quotient kernel's row loop: the
    check (C = 16, NaN-poisoned, float64), the covariance pass alone at 4 and 8 warps (and
    with 3xTF32 products at 4: mma layouts keep the C×C tiles inside a warp), the forward with the defaults, and fla's GDN forward in the same process."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs, _time_fla
    from assocmem.gpu.chunk import default_chunk_config

    torch, device, cuda, shapes, result = _session(shapes, "mm2")
    t0 = time.time()
    for name in shapes:
        shape = SHAPES[name]
        B, T, H, D, m = shape
        print(f"[{name}] {shape} ({time.time() - t0:.0f} s)", flush=True)
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        if name != "S3":
            _guard(e, "check_default_C16", lambda: check(torch, shape, device, sizes=(16,)))
        base = default_chunk_config(D, m, 1, 16, B * H)
        if D <= 64:
            for tag, extra in (("cw4", {"cov_warps": 4}), ("cw8", {"cov_warps": 8}),
                               ("cw4_tf32x3", {"cov_warps": 4, "cov_precision": "tf32x3"})):
                cfg = dict(base, cov_kernel="matmul", **extra)
                _guard(e, f"cov_pass_matmul_C16_{tag}", lambda: time_passes(torch, shape, device, 16, cfg,
                                                                            only="cov"))
        x = _inputs(torch, shape, device, 2)
        _guard(e, "chunk_fwd_default_C16", lambda: _bench(
            torch, lambda: chunk_bl(**x, chunk_size=16, validate=False), device))
        if cuda:
            _guard(e, "fla", lambda: {k: v for k, v in _time_fla(torch, shape, device).items()
                                      if "fwdbwd" not in k})
        if out:
            _bench_write(result, out)
    result["seconds"] = time.time() - t0
    if out:
        _bench_write(result, out)
    return result


def mm3(shapes, out):
    """A last short run: the cost of the host-side decay check of the quotient kernel, the mean
    pass's value block at each shape (few programs at S3), and the default forward."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs
    from assocmem.gpu.chunk import _decays_safe, default_chunk_config

    torch, device, cuda, shapes, result = _session(shapes, "mm3")
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        x = _inputs(torch, shape, device, 2)
        _guard(e, "decay_check", lambda: _bench(torch, lambda: _decays_safe(x["alpha"], 16), device))
        base = default_chunk_config(D, m, 1, 16, B * H)
        for bv, mw in ((16, 4), (32, 8), (64, 8)):
            cfg = dict(base, BV=bv, mean_warps=mw)
            _guard(e, f"mean_pass_BV{bv}", lambda: time_passes(torch, shape, device, 16, cfg, only="mean"))
        _guard(e, "chunk_fwd_default_C16", lambda: _bench(
            torch, lambda: chunk_bl(**x, chunk_size=16, validate=False), device))
        if out:
            _bench_write(result, out)
    return result


def two_level(shapes, out, levels=(1, 4, 8)):
    """The opt-in two-level forward (``config={"super_chunks": S}``): the check against float64
    (NaN-poisoned, two batch elements x two heads) and the forward at each ``S``."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs

    torch, device, cuda, shapes, result = _session(shapes, "two_level")
    if not cuda:
        levels = (1, 2)
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        x = _inputs(torch, shape, device, 2)
        for S in levels:
            cfg = {"super_chunks": S}
            if S > 1:
                _guard(e, f"check_S{S}", lambda: check(torch, shape, device, sizes=(16,), config=cfg))
            _guard(e, f"chunk_fwd_S{S}", lambda: _bench(
                torch, lambda: chunk_bl(**x, chunk_size=16, validate=False, config=cfg), device))
            if out:
                _bench_write(result, out)
    return result


BWD_KINDS = {"recurrent": {"backward": "recurrent"},
             "chunked_seq": {"backward": "chunked", "bwd_form": "sequential"},
             "chunked_par": {"backward": "chunked", "bwd_form": "parallel"}}


def check_bwd(torch, shape, device, C=16, Tg=256, seed=1):
    """Gradients of both backward choices against float64 ``naive_bl`` (NaN-poisoned buffers; two
    batch elements x two heads, the first ``Tg`` tokens, a loss of the outputs and both final
    states, initial state given), and of the chunked against the recurrent one on the whole shape
    (fp32 both)."""
    from assocmem.gpu import fused_recurrent as fr
    from assocmem.gpu import chunk_bl, naive_bl
    from assocmem.gpu.bench import _inputs

    B, T, H, D, m = shape
    x = _inputs(torch, (min(B, 2), min(T, Tg), min(H, 2), D, m), device, seed)
    b, t, h = x["q"].shape[:3]
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    Lf = torch.randn(b, h, D, D, generator=gen, dtype=torch.float64) * 0.3
    st = (torch.randn(b, h, D, m, generator=gen, dtype=torch.float64).to(device),
          (Lf @ Lf.transpose(-1, -2) / D + 0.1 * torch.eye(D, dtype=torch.float64)).to(device))
    wo = torch.randn(*x["v"].shape, generator=gen, dtype=torch.float64).to(device)
    runs = {"f64": (naive_bl, torch.float64, {})}
    for kind, cfg in BWD_KINDS.items():
        runs[kind] = (chunk_bl, torch.float32, {"chunk_size": C, "config": cfg})
    grads = {}
    fr.POISON = True
    try:
        for name, (fn, dt, kw) in runs.items():
            leaves = {n: v.to(dt).clone().requires_grad_(True) for n, v in x.items()}
            s0 = tuple(v.to(dt).clone().requires_grad_(True) for v in st)
            o, (M, P) = fn(**leaves, initial_state=s0, output_final_state=True, validate=False, **kw)
            ((o.double() * wo).sum() + (M.double() ** 2).sum() + (P.double() ** 2).sum()).backward()
            gP = s0[1].grad
            grads[name] = dict({n: v.grad for n, v in leaves.items()}, M0=s0[0].grad, P0=0.5 * (gP + gP.mT))
    finally:
        fr.POISON = False
    res = {}
    for kind in BWD_KINDS:
        res[kind] = {f"grad_{n}": _relerr(torch, grads["f64"][n], grads[kind][n]) for n in grads["f64"]}
        res[kind]["nan_free"] = bool(all(not torch.isnan(v).any() for v in grads[kind].values()))
    # whole shape, chunked against recurrent (both fp32)
    x = _inputs(torch, shape, device, seed + 2)
    do = torch.randn(*x["v"].shape, generator=gen).to(device)
    full = {}
    for kind, cfg in BWD_KINDS.items():
        leaves = {n: v.clone().requires_grad_(True) for n, v in x.items()}
        o, _ = chunk_bl(**leaves, chunk_size=C, validate=False, config=cfg)
        o.backward(do)
        full[kind] = {n: v.grad for n, v in leaves.items()}
    for kind in ("chunked_seq", "chunked_par"):
        res[f"full_shape_{kind}_vs_recurrent"] = {n: _relerr(torch, full["recurrent"][n], full[kind][n])
                                                   for n in full["recurrent"]}
    return res


def cost_model_bwd(shape, C, G=1):
    """FLOPs and bytes of the chunked backward's parallel form (a model: products counted as
    2·m·n·k, elementwise work and atomics' read-modify-write counted once).  Per token and head:
    ``32 D² + 18 D m + 34 C D + 12 C m + 12 C²`` flops (state scans, the G chain and the mean
    outputs, the covariance pass twice — sources and outputs — and the H chain); bytes: the
    per-token inputs read by ~6 passes, the chunk states (P, M, H, G: written once, read about
    twice) and ~8 fp32 D-vector accumulators read and written."""
    B, T, H, D, m = shape
    n = B * T * H
    flops = n * (32 * D * D + 18 * D * m + 34 * C * D + 12 * C * m + 12 * C * C) * (G if G > 1 else 1)
    nbytes = 4 * n * (6 * (4 * D + 3 * m) + 3 * 2 * (D * D + D * m) / C + 16 * D + 2 * C * 2)
    return {"flops": float(flops), "bytes": float(nbytes)}


def _grads_relerr(torch, fn, x, do, C, cfg_a, cfg_b):
    gs = []
    for cfg in (cfg_a, cfg_b):
        leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
        o, _ = fn(**leaves, chunk_size=C, validate=False, config=cfg)
        o.backward(do)
        gs.append({n: t.grad for n, t in leaves.items()})
    return {n: _relerr(torch, gs[0][n], gs[1][n]) for n in gs[0]}


def kernel_times(torch, f, reps=5):
    """GPU time per kernel name (ms per call, mean of ``reps`` calls of ``f`` after a warm-up) from
    ``torch.profiler``: where a forward+backward spends its time, Triton kernels and torch ops."""
    from torch.profiler import ProfilerActivity, profile

    f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            f()
        torch.cuda.synchronize()
    out = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0.0)
        if t:
            out[ev.key[:80]] = round(t / 1e3 / reps, 4)
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:30])


def bwd(shapes, out, sizes=(16, 32, 64)):
    """The chunked backward (``config={"backward": "chunked"}``, both ``bwd_form``s) against the
    token-by-token one: gradient checks first (:func:`check_bwd`), then forward+backward time and
    peak memory of the three choices at each chunk size, GPU time per kernel (``torch.profiler``),
    the 3xTF32 variant and two launch settings of the chunked backward at the first chunk size, and
    fla's ``chunk_delta_rule`` forward+backward (bf16) in the same process, with the ratios to it.
    About 90 kernel compilations a shape at the default sizes (a few seconds each): one device
    call per shape."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs, _time_fla

    torch, device, cuda, shapes, result = _session(shapes, "bwd")
    if not cuda:
        sizes = (16,)
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        _guard(e, "check", lambda: check_bwd(torch, shape, device))
        x = _inputs(torch, shape, device, 2)
        leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
        do = torch.randn(B, T, H, m, device=device)

        def fb(C, cfg):
            def f():
                o, _ = chunk_bl(**leaves, chunk_size=C, validate=False, config=cfg)
                o.backward(do)
            return f

        def peak(f):
            return peak_mem_MB(torch, f) if cuda else None

        def times_at(C):
            _guard(e, f"fwd_C{C}", lambda: _bench(
                torch, lambda: chunk_bl(**x, chunk_size=C, validate=False), device))
            for kind, kcfg in BWD_KINDS.items():
                f = fb(C, kcfg)
                _guard(e, f"fwdbwd_{kind}_C{C}", lambda: _bench(torch, f, device))
                _guard(e, f"peak_MB_{kind}_C{C}", lambda: peak(f))
            if out:
                _bench_write(result, out)

        def ratios():
            fla = e.get("fla") if isinstance(e.get("fla"), dict) else {}
            ref = fla.get("fla_chunk_delta_fwdbwd")
            if isinstance(ref, float):
                times = {k: v for k, v in e.items() if k.startswith("fwdbwd_") and isinstance(v, float)}
                e["ratio_to_fla_chunk_delta_fwdbwd"] = {k: v / ref for k, v in times.items()}

        # most important first (a call that runs out of time still returns these): the first chunk
        # size and fla, then where the time goes, the variants, the other chunk sizes
        times_at(sizes[0])
        if cuda:
            _guard(e, "fla", lambda: _time_fla(torch, shape, device))
            ratios()
            if out:
                _bench_write(result, out)
            for kind in ("chunked_seq", "chunked_par"):
                _guard(e, f"kernel_times_{kind}_C{sizes[0]}", lambda: kernel_times(
                    torch, fb(sizes[0], BWD_KINDS[kind])))
            # 3xTF32 products (tensor cores) in the chunked backward: time, and gradients against the
            # fp32 (ieee) ones on the whole shape
            cfg = dict(BWD_KINDS["chunked_par"], bwd_precision="tf32x3")
            _guard(e, f"fwdbwd_chunked_par_C{sizes[0]}_tf32x3", lambda: _bench(torch, fb(sizes[0], cfg), device))
            _guard(e, f"tf32x3_grads_vs_ieee_C{sizes[0]}", lambda: _grads_relerr(
                torch, chunk_bl, x, do, sizes[0], dict(BWD_KINDS["chunked_par"], bwd_precision="ieee"), cfg))
            for bw, bv in ((4, 32), (16, 64)):
                cfg = dict(BWD_KINDS["chunked_par"], bwd_warps=bw, bwd_BV=min(bv, m))
                _guard(e, f"fwdbwd_chunked_par_C{sizes[0]}_w{bw}_BV{bv}",
                       lambda: _bench(torch, fb(sizes[0], cfg), device))
            if out:
                _bench_write(result, out)
        for C in sizes[1:]:
            times_at(C)
        ratios()
        # achieved rates of the chunked backward (time = fwd+bwd − fwd; model: cost_model_bwd)
        rates = {}
        for C in sizes:
            cm = cost_model_bwd(shape, C)
            for kind in ("chunked_seq", "chunked_par"):
                tf, tb = e.get(f"fwd_C{C}"), e.get(f"fwdbwd_{kind}_C{C}")
                if isinstance(tf, float) and isinstance(tb, float) and tb > tf:
                    rates[f"{kind}_C{C}"] = _rates(cm, (tb - tf) * 1e-3, bwd_ms=tb - tf)
        e["bwd_model"] = rates
        if out:
            _bench_write(result, out)
    return result


ANATOMY = {  # covariance-pass variants of the quotient kernel (C = 16): name -> config.  The run of
    # benchmarks/h200_chunk_anatomy.json (commit d638421) also had "prefetch" / "sqrt_sym" kernel
    # variants (next chunk's loads issued early; P − (Z⊙√β)ᵀ(Z⊙√β) without the transpose), since
    # removed: neither was faster
    "base": {},
    "no_ldl": {"cov_ldl": False},                       # diagnostic: the row loop's share of the pass
    "tf32x3": {"cov_precision": "tf32x3"},
    "tf32x3_no_ldl": {"cov_precision": "tf32x3", "cov_ldl": False},
    "w2": {"cov_warps": 2},
    "w8": {"cov_warps": 8},
}


def anatomy(shapes, out, C=16):
    """Where the quotient covariance pass spends its time, and whether prefetching the next chunk's
    inputs or the √β-symmetric update helped (see :data:`ANATOMY`): the pass alone (median ms) for each :data:`ANATOMY`
    variant, ``no_ldl`` (wrong results, timing only) without the row loop; then the forward of the
    variants that are exact, checked against float64 (NaN-poisoned)."""
    from assocmem.gpu.chunk import default_chunk_config

    torch, device, cuda, shapes, result = _session(shapes, "anatomy", C=C)
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        base = dict(default_chunk_config(D, m, 1, C, B * H), cov_kernel="matmul")
        for vname, v in ANATOMY.items():
            _guard(e, f"cov_{vname}", lambda: time_passes(torch, shape, device, C, dict(base, **v), only="cov"))
            if out:
                _bench_write(result, out)
        for vname in ("tf32x3",):
            cfg = dict(base, **ANATOMY[vname])
            _guard(e, f"check_{vname}", lambda: check(torch, shape, device, sizes=(C,), config=cfg))
        if out:
            _bench_write(result, out)
    return result


REGS = {  # register caps (launch option maxnreg): (what is timed, config), per key dimension
    64: {"cov": {"cov_kernel": "matmul"}, "cov_r168": {"cov_kernel": "matmul", "cov_maxnreg": 168},
         "cov_r255": {"cov_kernel": "matmul", "cov_maxnreg": 255},
         "cov_w8_r255": {"cov_kernel": "matmul", "cov_maxnreg": 255, "cov_warps": 8},
         "mean": {}, "mean_r255": {"mean_maxnreg": 255},
         "fwdbwd": {}, "fwdbwd_r255": {"cov_maxnreg": 255, "bwd_maxnreg": 255},
         "fwdbwd_w8_r255": {"cov_maxnreg": 255, "bwd_maxnreg": 255, "bwd_warps": 8}},
    128: {"cov": {}, "cov_r255": {"cov_maxnreg": 255},
          "cov_mm_w8_r255": {"cov_kernel": "matmul", "cov_maxnreg": 255, "cov_warps": 8},
          "cov_mm_w8_r255_tf32x3": {"cov_kernel": "matmul", "cov_maxnreg": 255, "cov_warps": 8,
                                    "cov_precision": "tf32x3"},
          "mean": {}, "mean_r255": {"mean_maxnreg": 255},
          "fwdbwd": {}, "fwdbwd_chunked_r255": {"cov_maxnreg": 255, "backward": "chunked", "bwd_maxnreg": 255}},
}


def regs(shapes, out, C=16):
    """Register caps: ptxas, left alone, gives the 4-warp quotient kernel 72 registers and 2.1 KB of
    spills (sm_90, triton 3.6); Triton's ``maxnreg`` launch option lifts the cap.  Times the
    covariance pass, the mean pass and forward+backward under the :data:`REGS` variants, and checks
    the forward and gradients of the fastest against float64."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs
    from assocmem.gpu.chunk import default_chunk_config

    torch, device, cuda, shapes, result = _session(shapes, "regs", C=C)
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        base = default_chunk_config(D, m, 1, C, B * H)
        x = _inputs(torch, shape, device, 2)
        leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
        do = torch.randn(B, T, H, m, device=device)
        for vname, v in REGS[64 if D <= 64 else 128].items():
            cfg = dict(base, **v)
            if vname.startswith("fwdbwd"):
                def fb(cfg=cfg):
                    o, _ = chunk_bl(**leaves, chunk_size=C, validate=False, config=cfg)
                    o.backward(do)
                _guard(e, vname, lambda: _bench(torch, fb, device))
            else:
                _guard(e, vname, lambda: time_passes(torch, shape, device, C, cfg, only=vname.split("_")[0]))
            if out:
                _bench_write(result, out)
        best = min((k for k in e if k.startswith("fwdbwd") and isinstance(e[k], float)), key=e.get, default=None)
        if best:
            cfg = dict(REGS[64 if D <= 64 else 128][best])
            e["best_fwdbwd"] = best
            _guard(e, "check_fwd_best", lambda: check(torch, shape, device, sizes=(C,), config=cfg))
            _guard(e, "check_grads_best", lambda: check_grads(torch, shape, device, C=C, config=cfg))
        if out:
            _bench_write(result, out)
    return result


def grid(shapes, out, spec, budget_s=500.0):
    """Time a grid of configurations: ``spec = {"what": [...], "C": [...], "base": {...},
    "vary": {key: [values]}}`` — every combination of ``C`` and the ``vary`` values (``None``:
    key left out) on top of ``base``, timed as ``"cov"`` / ``"mean"`` (the pass alone),
    ``"fwd"`` or ``"fwdbwd"`` (``chunk_bl``).  Entries are keyed ``what|C|k=v,...``; the JSON is
    written after each; stops starting new entries after ``budget_s`` seconds."""
    import itertools

    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs
    from assocmem.gpu.chunk import default_chunk_config

    torch, device, cuda, shapes, result = _session(shapes, "grid", spec=spec)
    t_start = time.time()
    keys = list(spec.get("vary", {}))
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        x = _inputs(torch, shape, device, 2)
        leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
        do = torch.randn(B, T, H, m, device=device)
        for C in spec.get("C", [16]):
            for vals in itertools.product(*(spec["vary"][k] for k in keys)):
                v = {k: val for k, val in zip(keys, vals) if val is not None}
                cfg = dict(default_chunk_config(D, m, 1, C, B * H), **spec.get("base", {}), **v)
                for what in spec.get("what", ["cov"]):
                    if time.time() - t_start > budget_s:
                        return result
                    tag = f"{what}|C{C}|" + ",".join(f"{k}={val}" for k, val in v.items())
                    if what in ("cov", "mean"):
                        _guard(e, tag, lambda: time_passes(torch, shape, device, C, cfg, only=what))
                    elif what == "fwd":
                        _guard(e, tag, lambda: _bench(torch, lambda: chunk_bl(
                            **x, chunk_size=C, validate=False, config=cfg), device))
                    else:
                        def fb():
                            o, _ = chunk_bl(**leaves, chunk_size=C, validate=False, config=cfg)
                            o.backward(do)
                        _guard(e, tag, lambda: _bench(torch, fb, device))
                    if out:
                        _bench_write(result, out)
    return result


def final(shapes, out, C=16, config=None):
    """The issue's side-by-side table in one run: for each shape, ``chunk_bl`` with its defaults (plus
    ``config``) — forward checked against float64 and gradients against float64 autograd (both
    NaN-poisoned), forward and forward+backward times, peak memory of forward+backward, GPU time per
    kernel — next to fla's ``chunk_gated_delta_rule`` forward and ``chunk_delta_rule``
    forward+backward (bf16, same process), the ratios, and the achieved FLOP rate and bandwidth
    (:func:`cost_model_mm`, :func:`cost_model_bwd`) against the H200 ceilings."""
    from assocmem.gpu import chunk_bl
    from assocmem.gpu.bench import _inputs, _time_fla

    torch, device, cuda, shapes, result = _session(shapes, "final", C=C, config=config or {})
    cfg = dict(config or {})
    for name in shapes:
        B, T, H, D, m = shape = SHAPES[name]
        e = result["shapes"].setdefault(name, {"shape": dict(zip("BTHDm", shape))})
        _guard(e, "check_fwd", lambda: check(torch, shape, device, sizes=(C,), config=cfg or None))
        _guard(e, "check_grads", lambda: check_grads(torch, shape, device, C=C))
        x = _inputs(torch, shape, device, 2)
        leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
        do = torch.randn(B, T, H, m, device=device)

        def fb():
            o, _ = chunk_bl(**leaves, chunk_size=C, validate=False, config=cfg or None)
            o.backward(do)

        _guard(e, "fwd_ms", lambda: _bench(torch, lambda: chunk_bl(**x, chunk_size=C, validate=False,
                                                                   config=cfg or None), device))
        _guard(e, "fwdbwd_ms", lambda: _bench(torch, fb, device))
        if cuda:
            _guard(e, "fwdbwd_peak_MB", lambda: peak_mem_MB(torch, fb))
            _guard(e, "fla", lambda: _time_fla(torch, shape, device))
            fla = e["fla"] if isinstance(e.get("fla"), dict) else {}
            for mine, ref in (("fwd_ms", "fla_chunk_gdn_fwd"), ("fwdbwd_ms", "fla_chunk_delta_fwdbwd")):
                if isinstance(e.get(mine), float) and isinstance(fla.get(ref), float):
                    e[f"ratio_{mine}_to_{ref}"] = e[mine] / fla[ref]
            if out:
                _bench_write(result, out)
            _guard(e, "kernel_times_fwdbwd", lambda: kernel_times(torch, fb))
        rates = {}
        for key, cm in (("fwd", cost_model_mm(shape, C)), ("bwd", cost_model_bwd(shape, C))):
            tf, tb = e.get("fwd_ms"), e.get("fwdbwd_ms")
            if not (isinstance(tf, float) and isinstance(tb, float)):
                continue
            ms = tf if key == "fwd" else tb - tf
            rates[key] = _rates(cm, ms * 1e-3, ms=ms)
        e["model"] = rates
        if out:
            _bench_write(result, out)
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="S1,S2,S3")
    p.add_argument("--out", default=None)
    p.add_argument("--quick", action="store_true", help="the short second run (see quick())")
    p.add_argument("--mm", action="store_true", help="the quotient (matmul) covariance kernel's run (see mm())")
    p.add_argument("--mm2", action="store_true", help="the short run after the row-loop change (see mm2())")
    p.add_argument("--mm3", action="store_true", help="decay-check cost and value block (see mm3())")
    p.add_argument("--two-level", action="store_true", help="the two-level forward (see two_level())")
    p.add_argument("--bwd", action="store_true", help="the chunked backward against the recurrent one (see bwd())")
    p.add_argument("--sizes", default="16,32,64", help="chunk sizes of --bwd (the first gets the variants)")
    p.add_argument("--budget-s", type=float, default=400.0)
    p.add_argument("--anatomy", action="store_true", help="covariance-pass variants (see anatomy())")
    p.add_argument("--final", action="store_true", help="the side-by-side table (see final())")
    p.add_argument("--regs", action="store_true", help="register caps (see regs())")
    p.add_argument("--grid", default=None, help="JSON spec of a configuration grid (see grid())")
    p.add_argument("--config", default=None, help="--final: JSON of chunk_bl config overrides")
    a = p.parse_args(argv)
    shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    if a.anatomy:
        anatomy(shapes, a.out)
        return 0
    if a.regs:
        regs(shapes, a.out)
        return 0
    if a.grid:
        import json

        grid(shapes, a.out, json.loads(a.grid), a.budget_s)
        return 0
    if a.final:
        import json

        final(shapes, a.out, config=json.loads(a.config) if a.config else None)
        return 0
    if a.bwd:
        bwd([s.strip() for s in a.shapes.split(",") if s.strip()], a.out,
            tuple(int(c) for c in a.sizes.split(",") if c.strip()))
        return 0
    if a.two_level:
        two_level([s.strip() for s in a.shapes.split(",") if s.strip()], a.out)
        return 0
    if a.mm3:
        mm3([s.strip() for s in a.shapes.split(",") if s.strip()], a.out)
        return 0
    if a.mm2:
        mm2([s.strip() for s in a.shapes.split(",") if s.strip()], a.out)
        return 0
    if a.mm:
        mm([s.strip() for s in a.shapes.split(",") if s.strip()], a.out, a.budget_s)
        return 0
    if a.quick:
        quick([s.strip() for s in a.shapes.split(",") if s.strip()], a.out)
        return 0
    run([s.strip() for s in a.shapes.split(",") if s.strip()], a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
