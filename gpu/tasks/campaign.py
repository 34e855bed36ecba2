"""A time-boxed campaign over all three tasks, in priority order (for a GPU lease).

``python -m assocmem.gpu.tasks.campaign --budget-s 300 --out results`` starts
runs from :data:`PRIORITY` on every worker slot until ``budget_s`` minus
``reserve_s`` has passed, lets the running ones finish, and stops (killing
only its own children) at ``budget_s``.  Results land in
``OUT/TASK/MODEL_sSEED.json`` as usual; what was not run is printed.
"""
from __future__ import annotations

import argparse
import time

from .sweep import grid, run_jobs
from .train import CURRICULUM_MODELS, STRESS_MODELS


def priority():
    """The grid in the order it should be spent on when device time is short."""
    core = ["bl", "reset", "delta", "linear"]
    jobs = grid("collision_recall", core, [0])
    jobs += grid("collision_recall", ["gla", "diag"], [0])
    jobs += grid("swap_tracking", ["deltaformer-linear", "deltaformer-round2", "transformer-1", "transformer-2",
                                   "transformer-4", "transformer-8", "deltaformer-relu", "deltaformer-exp",
                                   "deltaformer-softmax"], [0])
    jobs += grid("random_keys", None, [0])
    jobs += grid("collision_recall", None, [1, 2])
    jobs += grid("swap_tracking", list(STRESS_MODELS), [0])
    jobs += grid("random_keys", None, [1, 2])
    # AM Fig. 6 (length curriculum 32 -> 256 vs direct 256; round2 then linear κ1, NoPE then RoPE)
    jobs += grid("swap_tracking", list(CURRICULUM_MODELS), [0])
    return jobs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m assocmem.gpu.tasks.campaign")
    ap.add_argument("--out", default="results")
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--reserve-s", type=float, default=90.0, help="no new run starts in the last RESERVE_S")
    ap.add_argument("--workers-per-device", type=int, default=6)
    ap.add_argument("--limit", type=int, default=None, help="only the first N runs of the priority list")
    ap.add_argument("--steps", type=int, default=None, help="override every run's steps (tests)")
    ap.add_argument("--batch-size", type=int, default=None, help="override every run's batch size (tests)")
    args = ap.parse_args(argv)
    t0 = time.time()
    jobs = priority()[: args.limit]
    recs = run_jobs(jobs, out=args.out, workers_per_device=args.workers_per_device, steps=args.steps,
                    batch_size=args.batch_size,
                    deadline=t0 + args.budget_s - args.reserve_s, kill_at=t0 + args.budget_s,
                    log=lambda m: print(f"[{time.time() - t0:6.1f}s] {m}", flush=True))
    ok = sum(r["rc"] == 0 for r in recs)
    print(f"campaign: {ok}/{len(jobs)} runs finished in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
