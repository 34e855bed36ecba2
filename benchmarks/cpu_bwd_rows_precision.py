"""fp32 gradient error against float64 of the chunked backward at ``D = 128`` with the covariance passes'
``D×D`` matrices whole in registers (``h_rows = 0``) and read in row blocks (``chunk._h_rows``, the default at
``BD > 64`` since 6 December's fifth session), beside the token-by-token backward.

Through Triton's interpreter (``TRITON_INTERPRET=1``, numpy's fp32 arithmetic: the hand-split ``tf32x3``
products are then plain fp32 ones, so this checks the formulation's conditioning, not the GPU's TF32; the
compiled numbers come from ``cpu_scan_precision.py --device cuda``).  Regimes of ``cpu_scan_precision.py``: the
collapsing covariance (ℓ² = 0, small r²) and the benchmark's inputs; errors are relative RMS of the gradients
of ``(o · w).sum()`` with respect to every input, the largest over the inputs reported first.

    python benchmarks/cpu_bwd_rows_precision.py --T 256 --out benchmarks/cpu_bwd_rows_precision.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"          # before anything imports triton
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import cpu_scan_precision as CP  # noqa: E402
from assocmem.gpu import chunk as ch, chunk_bl, fused_recurrent_bl, naive_bl  # noqa: E402
from assocmem.provenance import provenance  # noqa: E402

REGIMES = ("l2=0, r2=1e-3, no decay", "l2=0, r2=1e-4, weak decay", "bench inputs")


def errors(x, h_rows_list, seed=1) -> dict:
    names = [n for n, t in x.items() if torch.is_tensor(t)]
    w = torch.randn(*x["v"].shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    def grads(f, dt):
        leaves = {n: t.to(dt).clone().requires_grad_(True) for n, t in x.items() if torch.is_tensor(t)}
        (f({**x, **leaves}).double() * w).sum().backward()
        return {n: leaves[n].grad for n in names}

    ref = grads(lambda z: naive_bl(**z, validate=False)[0], torch.float64)
    res, orig = {}, ch._h_rows
    try:
        for rows in h_rows_list:
            ch._h_rows = lambda BD, r=rows: r
            g = grads(lambda z: chunk_bl(**z, chunk_size=16, backward="chunked", validate=False)[0], torch.float32)
            per = {n: CP.rel(ref[n], g[n]) for n in names}
            res[f"chunked, h_rows {rows}"] = {"max": max(per.values()), **per}
    finally:
        ch._h_rows = orig
    g = grads(lambda z: fused_recurrent_bl(**z, validate=False)[0], torch.float32)
    per = {n: CP.rel(ref[n], g[n]) for n in names}
    res["token by token"] = {"max": max(per.values()), **per}
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--T", type=int, default=256, help="sequence length (one batch row, one head, D = 128, m = 16)")
    p.add_argument("--h-rows", default="0,32", help="comma list of row blocks (0: the whole matrix in registers)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.T < 1:
        p.error(f"--T {a.T}: must be at least 1")
    try:
        rows = [int(r) for r in a.h_rows.split(",")]
    except ValueError:
        p.error(f"--h-rows {a.h_rows!r}: a comma list of integers")
    if any(r not in (0, 16, 32, 64, 128) for r in rows):
        p.error(f"--h-rows {a.h_rows}: each 0 or a power of two from 16 to 128")
    out = {"provenance": provenance({"interpreter": True}), "shape": {"B": 1, "T": a.T, "H": 1, "D": 128, "m": 16},
           "chunk_size": 16, "note": __doc__.split("\n\n")[1].replace("\n", " "), "regimes": {}}
    for reg in REGIMES:
        out["regimes"][reg] = errors(CP.regime(reg, 1, a.T, 1, 128, 16, seed=0), rows)
        print(reg, json.dumps({k: v["max"] for k, v in out["regimes"][reg].items()}), flush=True)
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"JSON written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
