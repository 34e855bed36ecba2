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
from .train import protocol_tag, resolve_protocol, task_def, run_name

SEEDS = (0, 1, 2)


def grid(task: str, models: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None,
         protocol: Optional[dict] = None):
    """The ``(task, model, seed, protocol)`` runs of the paper's grid, in priority order (seeds outer).

    ``protocol``: overrides of the task's protocol options for every run (checked here)."""
    td = task_def(task)
    models = list(td.models if models is None else models)
    for m in models:
        if m not in td.models:
            raise ValueError(f"models: {m!r} is not a model of {task} ({', '.join(td.models)})")
    if seeds is None:
        # swap tracking: the paper shows single training curves
        seeds = (0,) if task == "swap_tracking" else SEEDS
    pr = dict(protocol or {})
    resolve_protocol(task, pr)                       # bad options fail before anything starts
    if not pr:
        return [(task, m, int(s)) for s in seeds for m in models]
    # jobs stay hashable tuples: the options as sorted (key, value) pairs, lists as tuples
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in pr.items()))
    return [(task, m, int(s), frozen) for s in seeds for m in models]


def job_protocol(job) -> dict:
    """The protocol overrides of a job (``{}`` for the default protocol)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (job[3] if len(job) > 3 else ())}


def job_name(job) -> str:
    """The result file stem of a job ``(task, model, seed[, protocol])``."""
    task, model, seed = job[:3]
    return run_name(model, seed, protocol_tag(task, resolve_protocol(task, job_protocol(job))))


def job_label(job) -> str:
    name = job_name(job)
    return f"{job[0]}:{name}"


def _gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except Exception:
        return 0


def run_jobs(jobs, *, out: str | Path = "results", steps=None, batch_size=None, workers_per_device: int = 4,
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
    todo = [j for j in jobs if not (out / j[0] / f"{job_name(j)}.json").exists()]
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
            job = queue.pop(0)
            task, model, seed = job[:3]
            name = job_name(job)
            cmd = [sys.executable, "-m", "assocmem.gpu.tasks", "train", task, "--model", model,
                   "--seed", str(seed), "--out", str(out), "--resume", "--no-progress",
                   "--device", "cpu" if sl[0] is None else "cuda"]
            for key, val in job_protocol(job).items():
                cmd += ["--protocol", f"{key}={','.join(map(str, val)) if isinstance(val, list) else val}"]
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
            fh = open(out / task / f"{name}.log", "w")
            proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
            running[sl] = (proc, task, model, seed, name, time.perf_counter(), fh)
            log(f"start {task}:{name} on {'cpu' if sl[0] is None else f'cuda:{sl[0]}'}")
        if deadline is not None and time.time() >= deadline and queue:
            log(f"deadline: {len(queue)} run(s) not started: " + ", ".join(job_label(j) for j in queue))
            queue = []
        if kill_at is not None and time.time() >= kill_at:
            for sl, (proc, task, model, seed, name, t0, fh) in running.items():
                if proc.poll() is None:
                    proc.terminate()
                    log(f"killed at the time limit: {task}:{name}")
            for proc, *_ in running.values():
                proc.wait()
            kill_at = None
        time.sleep(0.2)
        for sl, (proc, task, model, seed, name, t0, fh) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            fh.close()
            dt = time.perf_counter() - t0
            records.append({"task": task, "model": model, "seed": seed, "name": name, "device": sl[0], "rc": rc,
                            "seconds": round(dt, 1)})
            log(f"{'done' if rc == 0 else f'FAILED (rc {rc})'} {task}:{name} in {dt:.1f}s")
            if rc != 0:
                log("  " + _last_line(out / task / f"{name}.log"))
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


def sweep(task: str, *, models=None, seeds=None, protocol=None, **kw) -> list[dict]:
    """Run one task's grid (see :func:`grid` and :func:`run_jobs`)."""
    return run_jobs(grid(task, models, seeds, protocol), **kw)
