"""The paper's grid for a task, spread over every visible GPU.

Independent runs ``(task, model, seed)`` go to worker slots:
``workers_per_device`` slots per GPU (the learned-task models are tiny and
launch-bound, so several processes share one GPU well), each slot running
``python -m assocmem.gpu.tasks train ...`` with ``CUDA_VISIBLE_DEVICES`` set
to its GPU.  Runs whose result JSON already exists are skipped, so a sweep
that was cut short continues where it stopped (each run also resumes from its
checkpoint).  Without a GPU the runs go one after another on the CPU.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from assocmem import validate as V
from .train import task_def, run_name

SEEDS = (0, 1, 2)


def grid(task: str, models: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None):
    """The ``(task, model, seed)`` runs of the paper's grid, in priority order (seeds outer)."""
    td = task_def(task)
    models = list(td.models if models is None else models)
    for m in models:
        if m not in td.models:
            raise ValueError(f"models: {m!r} is not a model of {task} ({', '.join(td.models)})")
    if seeds is None:
        # swap tracking: the paper shows single training curves
        seeds = (0,) if task == "swap_tracking" else SEEDS
    return [(task, m, int(s)) for s in seeds for m in models]


def _gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except Exception:
        return 0


def run_jobs(jobs, *, out: str | Path = "runs", steps=None, batch_size=None, workers_per_device: int = 4,
             devices: Optional[Sequence[int]] = None, extra_args: Sequence[str] = (), deadline: Optional[float] = None,
             kill_at: Optional[float] = None, log=print) -> list[dict]:
    """Run ``(task, model, seed)`` jobs over the worker slots; one record per finished run.

    ``deadline`` (a ``time.time()`` value): start no job after it (running ones
    finish); ``kill_at``: terminate the runs still going (their checkpoints
    stay, ``--resume`` continues them); ``steps``/``batch_size`` override the
    task defaults for every job.
    """
    workers_per_device = V.count("workers_per_device", workers_per_device, 1)
    out = Path(out)
    todo = [j for j in jobs if not (out / j[0] / f"{run_name(j[1], j[2])}.json").exists()]
    if len(todo) < len(jobs):
        log(f"{len(jobs) - len(todo)} run(s) already have results, {len(todo)} to go")
    gpu_ids = list(range(_gpu_count())) if devices is None else list(devices)
    slots = [(g, w) for w in range(workers_per_device) for g in gpu_ids] or [(None, 0)]
    # one CPU share per worker: torch/OpenMP default to every core in every process, and
    # dozens of processes each spinning that many threads starve the launch-bound runs
    threads = str(max(1, (os.cpu_count() or 1) // len(slots)))
    running: dict = {}
    records = []
    queue = list(todo)
    while queue or running:
        free = [sl for sl in slots if sl not in running]
        while queue and free and (deadline is None or time.time() < deadline):
            sl = free.pop(0)
            task, model, seed = queue.pop(0)
            cmd = [sys.executable, "-m", "assocmem.gpu.tasks", "train", task, "--model", model,
                   "--seed", str(seed), "--out", str(out), "--no-progress",
                   "--device", "cpu" if sl[0] is None else "cuda"]
            if (out / task / f"{run_name(model, seed)}.ckpt.pt").exists():
                cmd.append("--resume")        # a run cut short continues (--resume needs a checkpoint)
            if steps is not None:
                cmd += ["--steps", str(steps)]
            if batch_size is not None:
                cmd += ["--batch-size", str(batch_size)]
            cmd += list(extra_args)
            env = dict(os.environ)
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                env.setdefault(var, threads)
            if sl[0] is not None:
                env["CUDA_VISIBLE_DEVICES"] = str(sl[0])
            (out / task).mkdir(parents=True, exist_ok=True)
            fh = open(out / task / f"{run_name(model, seed)}.log", "w")
            proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
            running[sl] = (proc, task, model, seed, time.perf_counter(), fh)
            log(f"start {task}:{model}:s{seed} on {'cpu' if sl[0] is None else f'cuda:{sl[0]}'}")
        if deadline is not None and time.time() >= deadline and queue:
            log(f"deadline: {len(queue)} run(s) not started: " + ", ".join(f"{t}:{m}:s{s}" for t, m, s in queue))
            queue = []
        if kill_at is not None and time.time() >= kill_at:
            for sl, (proc, task, model, seed, t0, fh) in running.items():
                if proc.poll() is None:
                    proc.terminate()
                    log(f"killed at the time limit: {task}:{model}:s{seed}")
            for proc, *_ in running.values():
                proc.wait()
            kill_at = None
        time.sleep(0.2)
        for sl, (proc, task, model, seed, t0, fh) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            fh.close()
            dt = time.perf_counter() - t0
            records.append({"task": task, "model": model, "seed": seed, "device": sl[0], "rc": rc,
                            "seconds": round(dt, 1)})
            log(f"{'done' if rc == 0 else f'FAILED (rc {rc})'} {task}:{model}:s{seed} in {dt:.1f}s")
            if rc != 0:
                log("  " + _last_line(out / task / f"{run_name(model, seed)}.log"))
            del running[sl]
    return records


def _last_line(path) -> str:
    """The last non-empty line of a run's log (progress-bar carriage returns split lines too)."""
    try:
        lines = [ln.strip() for ln in Path(path).read_text(errors="replace").replace("\r", "\n").splitlines()]
    except OSError:
        return f"(no log at {path})"
    lines = [ln for ln in lines if ln]
    return lines[-1][-300:] if lines else "(empty log)"


def sweep(task: str, *, models=None, seeds=None, **kw) -> list[dict]:
    """Run one task's grid (see :func:`grid` and :func:`run_jobs`)."""
    return run_jobs(grid(task, models, seeds), **kw)
