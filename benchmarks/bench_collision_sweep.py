"""Benchmark: a ρ sweep of the collision protocol through the batched numpy filter.

Target (issue 2): 1,000 values of ρ × 4 variants in under 2 s on 2 cores.
Run: ``python benchmarks/bench_collision_sweep.py [--n 1000] [--repeat 5]``.
"""
import argparse
import json
import time

import numpy as np

from assocmem.numerics.collision import run_collision
from assocmem.protocol import PAPER
from assocmem.provenance import provenance


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the JSON result here")
    args = ap.parse_args()
    rho = np.linspace(0.0, 1.0, args.n)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run_collision(PAPER, variants=("dense", "diag", "reset", "linear"), rho=rho)
        times.append(time.perf_counter() - t0)
    res = {"benchmark": "collision rho sweep", "n_rho": args.n, "variants": 4, "steps": PAPER.T,
           "seconds_median": float(np.median(times)), "seconds_all": times, "target_seconds": 2.0,
           "provenance": provenance()}
    print(f"{args.n} ρ values × 4 variants × {PAPER.T} steps: median {res['seconds_median']:.3f} s "
          f"(target < 2 s) over {args.repeat} runs")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
