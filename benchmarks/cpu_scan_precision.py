"""fp32 error against float64 of the chunked and the token-by-token ops in the collapsing regime.

(Named for the parallel-in-time op ``chunk_scan_bl`` it was written for, which was measured on the H200
and removed: ``git show 760e291:gpu/chunk_scan.py``; docs/gpu.md, section 5.  The committed JSONs keep
its columns.)

Every op runs its kernels through Triton's interpreter (``TRITON_INTERPRET=1``, set here before anything
imports triton): the same kernel source as on a GPU, numpy's fp32 arithmetic.  Inputs are fp32 (unit keys
and queries); the reference is float64 ``naive_bl`` on the same fp32 numbers, so input rounding does not
count.  Regimes: the collapsing covariance of issue 19 (ℓ² = 0, r² = 1e-3 and 1e-4, no decay or weak
decays) and the benchmark's inputs (``gpu/bench.py``'s ``inputs``).  Errors are relative RMS
(``‖out − ref‖ / ‖ref‖``) of the read-outs ``o`` and the final ``M, P``; gradients of ``(o · w).sum()``
with respect to every input on a shorter sequence.

    python benchmarks/cpu_scan_precision.py --out benchmarks/cpu_scan_precision.json
    python benchmarks/cpu_scan_precision.py --device cuda --out runs/h200_scan_precision.json   # compiled kernels
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

_argv = sys.argv[1:]
DEVICE = "cuda" if "--device=cuda" in _argv or ("--device" in _argv and _argv[_argv.index("--device") + 1:][:1]
                                              == ["cuda"]) else "cpu"
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"          # before anything imports triton

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from assocmem.gpu import chunk_bl, fused_recurrent_bl, naive_bl  # noqa: E402
from assocmem.gpu.bench import inputs as bench_inputs  # noqa: E402
from assocmem.provenance import provenance  # noqa: E402

OPS = {
    "fused (token by token)": lambda x, **kw: fused_recurrent_bl(**x, **kw),
    "chunk_C16": lambda x, **kw: chunk_bl(**x, chunk_size=16, **kw),
}


def rel(ref, out) -> float:
    ref, out = ref.detach().double(), out.detach().double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-300))


def regime(name, B, T, H, D, m, seed=0):
    """fp32 inputs of one regime, on :data:`DEVICE`."""
    if name == "bench inputs":
        x = bench_inputs(torch, (B, T, H, D, m), torch.device("cpu"), seed)
        return {n: t.float().to(DEVICE) for n, t in x.items()}
    r2v, decay = {"l2=0, r2=1e-3, no decay": (1e-3, False), "l2=0, r2=1e-3, weak decay": (1e-3, True),
                  "l2=0, r2=1e-4, no decay": (1e-4, False), "l2=0, r2=1e-4, weak decay": (1e-4, True)}[name]
    g = torch.Generator().manual_seed(seed)
    x = dict(q=F.normalize(torch.randn(B, T, H, D, generator=g), dim=-1),
             k=F.normalize(torch.randn(B, T, H, D, generator=g), dim=-1),
             v=torch.randn(B, T, H, m, generator=g), l2=torch.zeros(B, T, H), r2=torch.full((B, T, H), r2v),
             alpha=torch.sigmoid(torch.rand(B, T, H, D, generator=g) * 4 + 2) if decay else None)
    return {n: (t.to(DEVICE) if torch.is_tensor(t) else t) for n, t in x.items()}


def forward_errors(x):
    x64 = {n: (t.double() if torch.is_tensor(t) else t) for n, t in x.items()}
    ref, (M, P) = naive_bl(**x64, output_final_state=True, validate=False)
    out = {"naive_bl fp32 (torch recurrence)": naive_bl(**x, output_final_state=True, validate=False)}
    for name, f in OPS.items():
        out[name] = f(x, output_final_state=True, validate=False)
    res = {}
    for name, (o, (Mo, Po)) in out.items():
        res[name] = {"o": rel(ref, o), "M_T": rel(M, Mo), "P_T": rel(P, Po)}
    return res


def gradient_errors(x, seed=1):
    names = [n for n, t in x.items() if torch.is_tensor(t)]
    w = torch.randn(*x["v"].shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(DEVICE)

    def grads(f, dt):
        leaves = {n: t.to(dt).clone().requires_grad_(True) for n, t in x.items() if torch.is_tensor(t)}
        o = f({**x, **leaves})
        (o.double() * w).sum().backward()
        return {n: leaves[n].grad for n in names}
    ref = grads(lambda z: naive_bl(**z, validate=False)[0], torch.float64)
    res = {}
    fns = {"naive_bl fp32 (torch recurrence)": lambda z: naive_bl(**z, validate=False)[0]}
    fns.update({n: (lambda z, f=f: f(z, validate=False)[0]) for n, f in OPS.items()})
    for name, f in fns.items():
        g = grads(f, torch.float32)
        per = {n: rel(ref[n], g[n]) for n in names}
        res[name] = {"max": max(per.values()), **per}
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--T", type=int, default=1024)
    p.add_argument("--grad-T", type=int, default=256)
    p.add_argument("--D", default="16,64", help="comma list of key dimensions")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: the kernels through the interpreter (default); cuda: compiled")
    from assocmem.gpu.bench import _config_items
    from assocmem.gpu.config import ChunkConfig
    p.add_argument("--chunk-config", type=_config_items(ChunkConfig), default=None, metavar="KEY=VALUE,...",
                   help="also chunk_bl at C = 16 under this launch configuration (op 'chunk_C16 KEY=VALUE,...'), "
                        "beside the default one: a configuration's error before it becomes a default")
    args = p.parse_args(argv)
    if args.chunk_config is not None:
        label = "chunk_C16 " + ",".join(f"{k}={v}" for k, v in vars(args.chunk_config).items()
                                        if v is not None and v != getattr(ChunkConfig(), k))
        OPS[label] = lambda x, cfg=args.chunk_config, **kw: chunk_bl(**x, chunk_size=16, config=cfg, **kw)
    regimes = ["l2=0, r2=1e-3, no decay", "l2=0, r2=1e-3, weak decay", "l2=0, r2=1e-4, no decay",
               "l2=0, r2=1e-4, weak decay", "bench inputs"]
    dev = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (Triton interpreter)"
    result = {"provenance": provenance({"device": dev,
                                        "script": "benchmarks/cpu_scan_precision.py"}),
              "notes": ["relative RMS error against float64 naive_bl on the same fp32 inputs; every op's "
                        "kernels compiled (cuda) or through TRITON_INTERPRET=1 (cpu: numpy fp32 arithmetic); B=1, H=2, unit keys and "
                        "queries; 'weak decay' = sigmoid(U(2, 6)) per key dimension; gradients of "
                        "(o * w).sum() for every input, relative RMS per input and their max"],
              "forward": {}, "gradients": {}}
    for D in (int(d) for d in args.D.split(",")):
        m = 16 if D >= 64 else 8
        for name in regimes:
            key = f"D={D}, m={m}, T={args.T}: {name}"
            t0 = time.perf_counter()
            result["forward"][key] = forward_errors(regime(name, 1, args.T, 2, D, m))
            print(f"[fwd {time.perf_counter() - t0:.0f}s] {key}: " + ", ".join(
                f"{n.split(' ')[0]} {v['o']:.1e}" for n, v in result["forward"][key].items()), flush=True)
            if name in ("l2=0, r2=1e-3, weak decay", "l2=0, r2=1e-4, no decay", "bench inputs"):
                gkey = f"D={D}, m={m}, T={args.grad_T}: {name}"
                t0 = time.perf_counter()
                result["gradients"][gkey] = gradient_errors(regime(name, 1, args.grad_T, 2, D, m))
                print(f"[grad {time.perf_counter() - t0:.0f}s] {gkey}: " + ", ".join(
                    f"{n.split(' ')[0]} {v['max']:.1e}" for n, v in result["gradients"][gkey].items()), flush=True)
            with open(args.out, "w") as fh:
                json.dump(result, fh, indent=1)
    print(f"JSON written to {args.out}")


if __name__ == "__main__":
    main()
