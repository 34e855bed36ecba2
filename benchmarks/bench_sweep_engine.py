"""Benchmark: what the sweep engine (Dask distributed, ``gpu/tasks/sweep.py``) adds to a grid's wall time.

A grid of ``--runs`` tiny runs (random keys, linear attention, 2 steps, batch 4,
no evaluation), ``--workers`` at a time, on a fresh local cluster each repeat.
The engine's overhead is the sweep's wall time minus the makespan of its runs
(each run's own seconds, subprocess start included, laid on the worker slots
in submission order): cluster start and stop, scheduling, result collection.

Run: ``python benchmarks/bench_sweep_engine.py [--device cpu|cuda] [--runs 8]
[--workers 2] [--repeat 3] [--out FILE]`` (on the GPU machine: ``--device cuda
--workers 12``).  ``--engine FILE.py`` measures another ``run_jobs``
(the removed pool of commit 85a96cb was measured so, docs/tasks.md).
"""
import argparse
import heapq
import importlib.util
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def makespan(seconds, workers: int) -> float:
    """Finish time of runs of these durations started in order, each on the first free slot."""
    slots = [0.0] * workers
    for s in seconds:
        heapq.heappush(slots, heapq.heappop(slots) + s)
    return max(slots)


def measure(run_jobs, *, runs: int, workers: int, repeat: int, engine_kw: dict) -> dict:
    jobs = [("random_keys", "linear", s) for s in range(runs)]
    rows = []
    for _ in range(repeat):
        out = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
        t0 = time.perf_counter()
        recs = run_jobs(jobs, out=out, steps=2, batch_size=4, extra_args=["--eval", "none"], log=lambda m: None,
                        **engine_kw)
        wall = time.perf_counter() - t0
        shutil.rmtree(out, ignore_errors=True)
        secs = [r["seconds"] for r in recs]
        assert len(recs) == runs and all(r["rc"] == 0 for r in recs), recs
        span = makespan(secs, workers)
        rows.append({"wall_s": round(wall, 2), "makespan_s": round(span, 2), "overhead_s": round(wall - span, 2),
                     "run_s_mean": round(statistics.mean(secs), 2)})
    return {"runs": runs, "workers": workers, "repeats": rows,
            "overhead_s_median": statistics.median(r["overhead_s"] for r in rows),
            "wall_s_median": statistics.median(r["wall_s"] for r in rows)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engine", default=None, help="a .py file with a run_jobs(jobs, ...) of the old signature")
    ap.add_argument("--out", default=None, help="write the JSON result here")
    args = ap.parse_args()
    if args.engine:
        spec = importlib.util.spec_from_file_location("assocmem.gpu.tasks._bench_engine", args.engine)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        kw = {"workers_per_device": args.workers, "devices": [None] if args.device == "cpu" else None}
        name = f"pool ({args.engine})"
    else:
        from assocmem.gpu.tasks import sweep as mod
        kw = {"workers_per_device": args.workers, "device": args.device, "dashboard": False, "progress": False}
        name = "dask"
    res = {"benchmark": "sweep engine overhead", "engine": name, "device": args.device,
           **measure(mod.run_jobs, runs=args.runs, workers=args.workers, repeat=args.repeat, engine_kw=kw)}
    from assocmem.provenance import provenance
    res["provenance"] = provenance()
    print(json.dumps({k: v for k, v in res.items() if k != "provenance"}))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
