"""Benchmark and device check of the BL kernels: ``python -m assocmem.gpu.bench`` / ``assocmem gpu bench``.

One process, one device (PERF.md "How to benchmark"):

1. correctness on fresh random inputs, outputs poisoned with NaN first: the
   fp32 kernels against :func:`naive_bl` in float64 (forward on the full
   shape, checked on a slice of batch and heads; gradients on a truncated copy);
2. a small launch-parameter sweep per pass (the two forward passes timed alone);
3. timings with ``triton.testing.do_bench`` (median, ms) of the BL forward and
   forward+backward and, when ``fla`` is importable, of fla 0.6's
   ``fused_recurrent_delta_rule`` / ``chunk_delta_rule`` / ``chunk_gated_delta_rule``
   on the same shapes (bf16 inputs for fla, as in PERF.md), plus ``naive_bl``
   (timed on a prefix and extrapolated);
4. fp32 drift over long sequences (``--drift``): the kernel chained over
   segments against float64 ``naive_bl``; symmetry and PSD of ``P``.

Writes one JSON (device, versions, commit) and prints a table whose last lines
are the ratios BL / fla.  On a CPU with ``TRITON_INTERPRET=1`` the ``tiny``
shape runs the same checks through the interpreter (no timings).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

SHAPES = {  # (B, T, H, D, m), PERF.md
    "S1": (8, 2048, 16, 64, 64),
    "S2": (32, 2048, 4, 128, 128),
    "S3": (4, 8192, 16, 64, 64),
    "S4": (256, 128, 4, 16, 16),
    "tiny": (2, 16, 2, 8, 8),
}
SWEEP_SHAPES = ("S1", "S2", "S4")      # S3 has S1's (D, m)


def _inputs(torch, shape, device, seed, dtype=None):
    import torch.nn.functional as F

    B, T, H, D, m = shape
    dtype = dtype or torch.float32
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rn(*s):
        return torch.randn(*s, generator=g)

    q = F.normalize(rn(B, T, H, D), dim=-1)
    k = F.normalize(rn(B, T, H, D), dim=-1)
    v = rn(B, T, H, m)
    l2 = torch.rand(B, T, H, generator=g) * 0.05
    r2 = torch.rand(B, T, H, generator=g) * 0.5 + 0.05
    alpha = torch.sigmoid(torch.rand(B, T, H, D, generator=g) * 4 + 2)     # 0.88 … 0.998
    out = dict(q=q, k=k, v=v, l2=l2, r2=r2, alpha=alpha)
    return {n: t.to(device=device, dtype=dtype if n in ("q", "k", "v") else torch.float32)
            for n, t in out.items()}


def _relerr(torch, ref, out):
    ref, out = ref.detach().double(), out.detach().double()
    return float((ref - out).norm() / ref.norm().clamp_min(1e-300))


def check_shape(torch, shape, device, seed=0, grad_T=256):
    """Kernel vs float64 naive_bl on fresh inputs; every kernel buffer NaN-poisoned first."""
    from assocmem.gpu import fused_recurrent as fr
    from assocmem.gpu import fused_recurrent_bl, naive_bl

    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, seed)
    fr.POISON = True
    try:
        o, (M, P) = fused_recurrent_bl(**x, output_final_state=True, validate=False)
        if device.type == "cuda":
            torch.cuda.synchronize()
        nan_free = not (torch.isnan(o).any() or torch.isnan(M).any() or torch.isnan(P).any())
        b, h = min(B, 2), min(H, 2)
        sub = {n: t[:b, :, :h].double() for n, t in x.items()}
        o_ref, (M_ref, P_ref) = naive_bl(**sub, output_final_state=True, validate=False)
        res = {"nan_free": bool(nan_free),
               "fwd_o": _relerr(torch, o_ref, o[:b, :, :h]),
               "fwd_M": _relerr(torch, M_ref, M[:b, :h]),
               "fwd_P": _relerr(torch, P_ref, P[:b, :h])}
        # gradients on a truncated copy (autograd through naive_bl keeps per-step states)
        Tg = min(T, grad_T)
        xg = {n: t[:b, :Tg, :h].contiguous() for n, t in x.items()}
        gen = torch.Generator(device="cpu").manual_seed(seed + 1)
        wo = torch.randn(b, Tg, h, m, generator=gen, dtype=torch.float64).to(device)
        grads = []
        for fn, dt in ((naive_bl, torch.float64), (fused_recurrent_bl, torch.float32)):
            leaves = {n: t.to(dt).clone().requires_grad_(True) for n, t in xg.items()}
            out, _ = fn(**leaves, validate=False)
            (out.double() * wo).sum().backward()
            grads.append({n: t.grad for n, t in leaves.items()})
        res["grad_T"] = Tg
        res.update({f"grad_{n}": _relerr(torch, grads[0][n], grads[1][n]) for n in grads[0]})
        res["grad_nan_free"] = bool(all(not torch.isnan(t).any() for t in grads[1].values()))
    finally:
        fr.POISON = False
    return res


def _bench(fn, device):
    if device.type != "cuda":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=60, return_mode="median"))


def _pass_launchers(torch, shape, device, cfg):
    """Closures launching the covariance pass and the mean pass alone (forward)."""
    from assocmem.gpu._dispatch import kernels

    K = kernels(device.type != "cuda")
    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, 1)
    f32 = dict(dtype=torch.float32, device=device)
    P0 = torch.eye(D, **f32).expand(B, H, 1, D, D).contiguous()
    M0t = torch.zeros(B, H, m, D, **f32)
    u = torch.empty(B, T, H, 1, D, **f32)
    beta = torch.empty(B, T, H, 1, **f32)
    PT = torch.empty(B, H, 1, D, D, **f32)
    o = torch.empty(B, T, H, m, **f32)
    MT = torch.empty(B, H, m, D, **f32)
    NV = -(-m // cfg["BV"])
    r2 = x["r2"][..., None].contiguous()

    def cov():
        K.cov_fwd_kernel[(B * H,)](x["k"], x["alpha"], x["l2"], r2, P0, u, beta, PT, T,
                                   H=H, G=1, D=D, BD=cfg["BD"], HAS_ALPHA=True, num_warps=cfg["cov_warps"])

    def mean():
        K.mean_fwd_kernel[(B * H * NV,)](x["q"], x["k"], x["v"], x["alpha"], u, beta, M0t, o, o, MT, T,
                                         H=H, G=1, D=D, M=m, MG=m, BD=cfg["BD"], BV=cfg["BV"], NV=NV,
                                         HAS_ALPHA=True, STORE_E=False, num_warps=cfg["mean_warps"])
    cov()
    return cov, mean


def sweep(torch, shape, device):
    """Time each forward pass alone over a few launch parameters; return the best."""
    from assocmem.gpu.fused_recurrent import default_config

    B, T, H, D, m = shape
    base = default_config(D, m, 1)
    BD = base["BD"]
    cov_opts = [w for w in (1, 2, 4, 8, 16) if 4 <= BD * BD // (32 * w) <= 128]
    mean_opts = [(bv, w) for bv, w in ((4, 1), (8, 1), (16, 1), (32, 1), (16, 2), (32, 2), (32, 4), (64, 4))
                 if bv <= max(m, 4) and 2 <= bv * BD // (32 * w) <= 128]
    rows = {"cov": {}, "mean": {}}
    for w in cov_opts:
        cfg = dict(base, cov_warps=w)
        try:
            cov, _ = _pass_launchers(torch, shape, device, cfg)
            rows["cov"][str(w)] = _bench(cov, device)
        except Exception as exc:  # a config that does not compile is reported, not fatal
            rows["cov"][str(w)] = f"error: {type(exc).__name__}: {str(exc)[:120]}"
    for bv, w in mean_opts:
        cfg = dict(base, BV=bv, mean_warps=w)
        try:
            _, mean = _pass_launchers(torch, shape, device, cfg)
            rows["mean"][f"BV{bv}_w{w}"] = _bench(mean, device)
        except Exception as exc:
            rows["mean"][f"BV{bv}_w{w}"] = f"error: {type(exc).__name__}: {str(exc)[:120]}"
    ok_c = {k: v for k, v in rows["cov"].items() if isinstance(v, float)}
    ok_m = {k: v for k, v in rows["mean"].items() if isinstance(v, float)}
    best = dict(base)
    if ok_c:
        best["cov_warps"] = int(min(ok_c, key=ok_c.get))
    if ok_m:
        k = min(ok_m, key=ok_m.get)
        best["BV"], best["mean_warps"] = int(k.split("_")[0][2:]), int(k.split("_w")[1])
    rows["default"] = {k: base[k] for k in ("BV", "cov_warps", "mean_warps")}
    rows["best"] = {k: best[k] for k in ("BV", "cov_warps", "mean_warps")}
    return rows, best


def time_shape(torch, shape, device, cfg=None, with_fla=True, with_naive=True):
    from assocmem.gpu import fused_recurrent_bl, naive_bl

    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, 2)
    res = {}
    f = lambda: fused_recurrent_bl(**x, validate=False, config=cfg)   # noqa: E731
    res["bl_fwd"] = _bench(f, device)
    xb = dict(x, q=x["q"].bfloat16(), k=x["k"].bfloat16(), v=x["v"].bfloat16())
    res["bl_fwd_bf16_inputs"] = _bench(lambda: fused_recurrent_bl(**xb, validate=False, config=cfg), device)
    leaves = {n: t.clone().requires_grad_(True) for n, t in x.items()}
    do = torch.randn(B, T, H, m, device=device)

    def fb():
        o, _ = fused_recurrent_bl(**leaves, validate=False, config=cfg)
        o.backward(do)
    res["bl_fwdbwd"] = _bench(fb, device)
    if device.type == "cuda":
        res["bl_fwdbwd_peak_mem_MB"] = peak_mem_MB(torch, fb)
    if with_naive:
        Tn = min(T, 32)
        xs = {n: t[:, :Tn].contiguous() for n, t in x.items()}
        res["naive_fwd_extrapolated"] = _bench(lambda: naive_bl(**xs, validate=False), device) * T / Tn
    if with_fla and device.type == "cuda":
        res.update(_time_fla(torch, shape, device))
    return res


def peak_mem_MB(torch, f) -> float:
    """Peak CUDA memory (MiB) that one call of ``f`` allocates above what is allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    f()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def _time_fla(torch, shape, device):
    out = {}
    try:
        import fla
        from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as exc:
        return {"fla_error": f"fla not importable: {type(exc).__name__}: {exc}"}
    out["fla_version"] = getattr(fla, "__version__", "?")
    B, T, H, D, m = shape
    x = _inputs(torch, shape, device, 3, dtype=torch.bfloat16)
    g = torch.Generator(device="cpu").manual_seed(4)
    beta = torch.sigmoid(torch.randn(B, T, H, generator=g)).to(device, torch.bfloat16)
    gg = torch.nn.functional.logsigmoid(torch.rand(B, T, H, generator=g) * 4 + 2).to(device, torch.float32)
    q, k, v = x["q"], x["k"], x["v"]

    def guard(name, fn):
        try:
            out[name] = _bench(fn, device)
        except Exception as exc:
            out[name] = f"error: {type(exc).__name__}: {str(exc)[:160]}"

    guard("fla_fused_recurrent_delta_fwd", lambda: fused_recurrent_delta_rule(q, k, v, beta))
    guard("fla_chunk_delta_fwd", lambda: chunk_delta_rule(q, k, v, beta))
    guard("fla_chunk_gdn_fwd", lambda: chunk_gated_delta_rule(q, k, v, gg, beta))
    lq, lk, lv = (t.clone().requires_grad_(True) for t in (q, k, v))
    lb = beta.clone().requires_grad_(True)
    do = torch.randn(B, T, H, m, device=device, dtype=torch.bfloat16)

    def fb():
        o, _ = chunk_delta_rule(lq, lk, lv, lb)
        o.backward(do)
    guard("fla_chunk_delta_fwdbwd", fb)
    try:
        out["fla_chunk_delta_fwdbwd_peak_mem_MB"] = peak_mem_MB(torch, fb)
    except Exception:
        pass
    return out


def drift(torch, device, T=100_000, D=64, m=16, seg=10_000, seed=5):
    """fp32 kernel vs float64 over a long sequence of random unit keys.

    Heads differ in noise: (ℓ², r²) = (1e-3, 0.1), (1e-2, 0.1), (0, 0.1), (1e-4, 1.0).
    The kernel runs in segments chained through ``initial_state`` so that ``P``
    can be inspected along the way; float64 ``naive_bl`` runs the same segments.
    """
    from assocmem.gpu import fused_recurrent_bl, naive_bl
    import torch.nn.functional as F

    H = 4
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = F.normalize(torch.randn(1, T, H, D, generator=g), dim=-1)
    k = F.normalize(torch.randn(1, T, H, D, generator=g), dim=-1)
    v = torch.randn(1, T, H, m, generator=g)
    l2 = torch.tensor([1e-3, 1e-2, 0.0, 1e-4]).expand(1, T, H).contiguous()
    r2 = torch.tensor([0.1, 0.1, 0.1, 1.0]).expand(1, T, H).contiguous()
    x = {n: t.to(device) for n, t in dict(q=q, k=k, v=v, l2=l2, r2=r2).items()}
    st32 = st64 = None
    rows = []
    err_num = {}
    err_den = {}
    windows = [(0, 100), (100, 1000), (1000, 10_000), (10_000, 100_000)]
    t0 = time.perf_counter()
    for s0 in range(0, T, seg):
        sl = {n: t[:, s0:s0 + seg].contiguous() for n, t in x.items()}
        o32, st32 = fused_recurrent_bl(**sl, p0=1.0, initial_state=st32, output_final_state=True,
                                       validate=False)
        o64, st64 = naive_bl(**{n: t.double() for n, t in sl.items()}, p0=1.0, initial_state=st64,
                             output_final_state=True, validate=False)
        diff = (o32.double() - o64)
        for w0, w1 in windows:
            a, b = max(w0, s0), min(w1, s0 + seg)
            if a < b:
                key = f"{w0}-{w1}"
                err_num[key] = err_num.get(key, 0.0) + float((diff[:, a - s0:b - s0] ** 2).sum((0, 1, 3)).sum())
                err_den[key] = err_den.get(key, 0.0) + float((o64[:, a - s0:b - s0] ** 2).sum())
        P = st32[1][0].double()                       # [H, D, D]
        lam = torch.linalg.eigvalsh(0.5 * (P + P.transpose(-1, -2)))
        tr = torch.diagonal(P, dim1=-2, dim2=-1).sum(-1)
        rows.append({"t": s0 + seg,
                     "min_eig_over_trace": (lam.min(-1).values / tr).tolist(),
                     "max_asymmetry": float((P - P.transpose(-1, -2)).abs().max()),
                     "P_relerr_vs_f64": [_relerr(torch, st64[1][0, h], st32[1][0, h]) for h in range(H)]})
    return {"T": T, "D": D, "m": m, "heads_l2_r2": [[1e-3, 0.1], [1e-2, 0.1], [0.0, 0.1], [1e-4, 1.0]],
            "o_relerr_by_window": {k: math.sqrt(err_num[k] / max(err_den[k], 1e-300)) for k in err_num},
            "checkpoints": rows,
            "worst_min_eig_over_trace": min(min(r["min_eig_over_trace"]) for r in rows),
            "psd_criterion_min_eig_ge_-1e-5_trace": all(min(r["min_eig_over_trace"]) >= -1e-5 for r in rows),
            "seconds": time.perf_counter() - t0}


def cov_form_study(torch, device, T=100_000, D=32, m=4, seg=10_000, seed=6):
    """The three covariance update forms of :func:`naive_bl` in fp32 against float64.

    Same heads as :func:`drift`.  ``plain`` is what the kernel computes; the
    others cost more (a transpose, or two ``D×D`` matrix products per token).
    """
    from assocmem.gpu import naive_bl
    import torch.nn.functional as F

    H = 4
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = F.normalize(torch.randn(1, T, H, D, generator=g), dim=-1)
    k = F.normalize(torch.randn(1, T, H, D, generator=g), dim=-1)
    v = torch.randn(1, T, H, m, generator=g)
    l2 = torch.tensor([1e-3, 1e-2, 0.0, 1e-4]).expand(1, T, H).contiguous()
    r2 = torch.tensor([0.1, 0.1, 0.1, 1.0]).expand(1, T, H).contiguous()
    x = {n: t.to(device) for n, t in dict(q=q, k=k, v=v, l2=l2, r2=r2).items()}
    out = {}
    ref_states, ref_o = [], []
    st = None
    for s0 in range(0, T, seg):
        sl = {n: t[:, s0:s0 + seg].double() for n, t in x.items()}
        o, st = naive_bl(**sl, initial_state=st, output_final_state=True, validate=False)
        ref_o.append(o)
        ref_states.append(st[1])
    for form in ("plain", "symmetrised", "joseph"):
        t0 = time.perf_counter()
        st = None
        num = den = 0.0
        worst, asym, perr = 1.0, 0.0, 0.0
        for i, s0 in enumerate(range(0, T, seg)):
            sl = {n: t[:, s0:s0 + seg].float() for n, t in x.items()}
            o, st = naive_bl(**sl, initial_state=st, output_final_state=True, validate=False, cov_form=form)
            num += float(((o.double() - ref_o[i]) ** 2).sum())
            den += float((ref_o[i] ** 2).sum())
            P = st[1][0].double()
            lam = torch.linalg.eigvalsh(0.5 * (P + P.transpose(-1, -2)))
            tr = torch.diagonal(P, dim1=-2, dim2=-1).sum(-1)
            worst = min(worst, float((lam.min(-1).values / tr).min()))
            asym = max(asym, float((P - P.transpose(-1, -2)).abs().max()))
            perr = max(perr, _relerr(torch, ref_states[i][0], P))
        out[form] = {"o_relerr": math.sqrt(num / den), "worst_min_eig_over_trace": worst,
                     "max_asymmetry": asym, "max_P_relerr_at_checkpoints": perr,
                     "seconds": time.perf_counter() - t0}
    return {"T": T, "D": D, "m": m, "device": str(device), "forms": out}


def chunk_study(torch, device, T=1024, seed=7):
    """Precision of the chunked form's factorisation: fp32 vs tf32 matmuls vs float64.

    ``chunk_bl`` (torch) in fp32 with TF32 matmuls off and on, against float64
    ``naive_bl``; plus the fp32 recurrence for scale, and the torch chunked form's
    forward time at S1-like width (it is launch-bound: a sequential loop of small ops).
    """
    from assocmem.gpu import naive_bl
    # the torch form explicitly: on CUDA ``chunk_bl`` now runs the chunked Triton kernels
    from assocmem.gpu.chunk import chunk_bl_torch as chunk_bl

    out = {}
    for D, m in ((64, 64), (128, 128)):
        for name, (alo, ahi) in {"weak": (0.95, 1.0), "strong": (0.3, 0.7)}.items():
            x = _inputs(torch, (2, T, 2, D, m), device, seed)
            x["alpha"] = (torch.rand(x["alpha"].shape, generator=torch.Generator().manual_seed(seed))
                          * (ahi - alo) + alo).to(device)
            ref, _ = naive_bl(**{n: t.double() for n, t in x.items()}, validate=False)
            row = {"recurrence_fp32": _relerr(torch, ref, naive_bl(**x, validate=False)[0])}
            for tf32 in (False, True):
                old = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = tf32
                try:
                    for C in (16, 64):
                        o, _ = chunk_bl(**x, chunk_size=C, validate=False)
                        row[f"chunk{C}_{'tf32' if tf32 else 'fp32'}"] = _relerr(torch, ref, o)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = old
            out[f"D{D}_{name}"] = row
    x = _inputs(torch, SHAPES["S1"], device, seed)
    out["chunk_torch_fwd_ms_S1"] = _bench(lambda: chunk_bl(**x, chunk_size=64, validate=False), device)
    return out


def run(shapes=("S1", "S2", "S3", "S4"), out=None, do_sweep=True, do_drift=True, with_fla=True):
    import torch

    from assocmem.provenance import provenance

    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if device.type != "cuda":
        _cpu_shapes(shapes)
        os.environ.setdefault("TRITON_INTERPRET", "1")
        do_sweep = do_drift = False
    info = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu (Triton interpreter)"}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:
        pass
    result = {"provenance": provenance(info), "shapes": {}, "notes": [
        "times are medians of triton.testing.do_bench in ms; BL in fp32 arithmetic with fp32 inputs "
        "(bl_fwd_bf16_inputs: bf16 q/k/v), fla with bf16 inputs",
        "naive_fwd_extrapolated: naive_bl timed on the first 32 tokens, times T/32"]}
    for name in shapes:
        shape = SHAPES[name]
        print(f"[{name}] {shape}: checking ...", flush=True)
        entry = {"shape": dict(zip("BTHDm", shape))}
        result["shapes"][name] = entry
        try:
            entry["check"] = check_shape(torch, shape, device)
            print(f"[{name}] check: {entry['check']}", flush=True)
            cfg = None
            if do_sweep and name in SWEEP_SHAPES:
                entry["sweep"], cfg = sweep(torch, shape, device)
                print(f"[{name}] sweep: {entry['sweep']}", flush=True)
            if device.type != "cuda":
                # the interpreter's run times measure Python, not the kernels: no timings
                entry["times"] = CPU_NOTE
                print(f"[{name}] {CPU_NOTE}", flush=True)
                continue
            entry["times_default"] = time_shape(torch, shape, device, None, with_fla=with_fla)
            if cfg is not None and entry["sweep"]["best"] != entry["sweep"]["default"]:
                entry["times_tuned"] = time_shape(torch, shape, device, cfg, with_fla=False, with_naive=False)
            print(f"[{name}] times: {entry['times_default']} tuned: {entry.get('times_tuned')}", flush=True)
        except Exception as exc:   # keep going: the other shapes and the baselines still come back
            import traceback

            entry["error"] = traceback.format_exc(limit=8)
            print(f"[{name}] ERROR {type(exc).__name__}: {exc}\n{entry['error']}", flush=True)
        finally:
            if out:
                _write(result, out)
    if do_drift:
        result["drift"] = []
        for D in (64, 128):
            print(f"[drift] D={D} ...", flush=True)
            try:
                d = drift(torch, device, D=D)
                result["drift"].append(d)
                print(f"[drift] D={D} {d['o_relerr_by_window']} worst min-eig/trace "
                      f"{d['worst_min_eig_over_trace']:.3g} ({d['seconds']:.0f} s)", flush=True)
            except Exception as exc:
                result["drift"].append({"D": D, "error": f"{type(exc).__name__}: {exc}"})
                print(f"[drift] ERROR {exc}", flush=True)
            if out:
                _write(result, out)
    if out:
        _write(result, out)
    print(table(result))
    if device.type != "cuda":
        print(f"({CPU_NOTE})")
    return result


CPU_NOTE = "CPU, Triton interpreter: correctness checks only, no timings"


def _cpu_shapes(shapes) -> None:
    from assocmem.validate import ParamError

    big = [s for s in shapes if s != "tiny"]
    if big:
        raise ParamError("shapes", f"shapes: {', '.join(big)} need{'s' if len(big) == 1 else ''} a GPU; on a CPU "
                                   f"only 'tiny' runs (through the Triton interpreter)")


def _write(result, path):
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1, default=str)


def table(result) -> str:
    def f(x):
        return f"{x:.3f}" if isinstance(x, (int, float)) else "—"

    lines = ["| shape | BL fwd | BL fwd (tuned) | BL fwd+bwd | fla fused_rec fwd | fla chunk fwd | "
             "fla GDN chunk fwd | fla chunk fwd+bwd | naive (extrap.) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios = []
    for name, e in result["shapes"].items():
        t = e.get("times_default", {})
        tt = e.get("times_tuned", {})
        best = min([v for v in (t.get("bl_fwd"), tt.get("bl_fwd")) if isinstance(v, float)], default=None)
        bestfb = min([v for v in (t.get("bl_fwdbwd"), tt.get("bl_fwdbwd")) if isinstance(v, float)],
                     default=None)
        lines.append(f"| {name} | {f(t.get('bl_fwd'))} | {f(tt.get('bl_fwd'))} | {f(bestfb)} | "
                     f"{f(t.get('fla_fused_recurrent_delta_fwd'))} | {f(t.get('fla_chunk_delta_fwd'))} | "
                     f"{f(t.get('fla_chunk_gdn_fwd'))} | {f(t.get('fla_chunk_delta_fwdbwd'))} | "
                     f"{f(t.get('naive_fwd_extrapolated'))} |")
        fr = t.get("fla_fused_recurrent_delta_fwd")
        if isinstance(fr, float) and best:
            ratios.append(f"{name}: BL fwd / fla fused_recurrent fwd = {best / fr:.2f}")
        fc = t.get("fla_chunk_delta_fwdbwd")
        if isinstance(fc, float) and bestfb:
            ratios.append(f"{name}: BL fwd+bwd / fla chunk fwd+bwd = {bestfb / fc:.2f}")
    return "\n".join(lines + [""] + ratios)


def main(argv=None) -> int:
    from assocmem.args import Parser, dispatch

    p = Parser(prog="python -m assocmem.gpu.bench", description=__doc__.split("\n")[0])
    add_arguments(p)
    p.set_defaults(func=run_args)
    return dispatch(p, argv)


DEFAULT_OUT = "runs/gpu_bench.json"


def add_arguments(p):
    from assocmem.args import Items

    p.add_argument("--shapes", type=Items(SHAPES, what="shape"), default=None,
                   help="comma list of S1,S2,S3,S4,tiny (default S1,S2,S3,S4 on a GPU; tiny on a CPU, "
                        "the only shape the Triton interpreter runs)")
    p.add_argument("--out", default=None,
                   help=f"write the JSON here (default {DEFAULT_OUT}; the folder of a path you give must exist)")
    p.add_argument("--no-sweep", action="store_true", help="skip the launch-parameter sweep (GPU only)")
    p.add_argument("--no-drift", action="store_true", help="skip the long-sequence fp32 drift study (GPU only)")
    p.add_argument("--no-fla", action="store_true", help="skip the fla baselines (GPU only)")


def run_args(args) -> int:
    import torch

    from assocmem.outputs import output_file

    shapes = args.shapes or (("S1", "S2", "S3", "S4") if torch.cuda.is_available() else ("tiny",))
    if not torch.cuda.is_available():
        _cpu_shapes(shapes)
    out = output_file("--out", DEFAULT_OUT if args.out is None else args.out, parents=args.out is None)
    res = run(shapes, out=str(out), do_sweep=not args.no_sweep, do_drift=not args.no_drift,
              with_fla=not args.no_fla)
    print(f"JSON written to {out}")
    bad = [n for n, e in res["shapes"].items()
           if "check" not in e or not e["check"]["nan_free"] or not e["check"]["grad_nan_free"]
           or e["check"]["fwd_o"] > 1e-3]
    if bad:
        print(f"correctness check failed on {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
