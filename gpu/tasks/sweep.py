"""The paper's grid for a task, run on Dask distributed.

A grid is a list of independent runs, *jobs* ``(task, model, seed)`` or
``(task, model, seed, protocol)`` (:func:`grid`).  :func:`run_jobs` submits one
Dask task per job (:func:`run_one`), which runs
``python -m assocmem.gpu.tasks.run_child train ... --resume`` in a subprocess
and returns a record; the cluster is either a local one on this host
(:func:`cluster_spec`) or one that exists already (``scheduler=ADDRESS`` or a
scheduler file, e.g. from dask-jobqueue on SLURM; README, docs/tasks.md).

Why a subprocess per run inside the task: it is the one place where
``CUDA_VISIBLE_DEVICES`` and the OpenMP threads of a run are set before torch
starts, a run that crashes takes nothing else down, and a killed worker leaves
the run's last checkpoint, from which the retry (on any worker) continues bit
for bit (``--resume``; :mod:`.run_child` makes the subprocess die with its
worker so that two processes never write one checkpoint).

Why one worker per GPU with ``GPU = W`` resource units, ``W`` threads, and one
unit per run (rather than ``W`` workers per GPU): the learned-task models are
tiny and launch-bound, so ``W`` runs share a GPU (12 per H200 was the measured
sweet spot); the GPU a worker serves is fixed by its environment
(``CUDA_VISIBLE_DEVICES``), which is per process, so one process per GPU is the
natural unit; the worker's threads only wait on their subprocesses, so ``W``
worker processes per GPU would cost memory and heartbeats for nothing; and on
a cluster the same shape is one ``dask worker --nthreads W --resources GPU=W``
per GPU.  The campaign's heavy runs take ``GPU_HEAVY`` units, which only the
workers of its heavy GPUs have.  Each run gets ``OMP_NUM_THREADS = cores /
concurrent runs`` (a user's setting wins): dozens of processes each starting
one OpenMP thread per core starved the launch-bound runs (docs/tasks.md).  On
a CPU machine the workers are ``W`` single-thread processes on the cores
(default ``W`` = the cores), each run with ``cores / W`` threads.

Runs whose result JSON exists are skipped, a failed run is retried
``retries`` times and reported while the others go on, and every run keeps its
log (``OUT/TASK/NAME.log``, one header line per attempt).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Optional, Sequence

from assocmem import validate as V

# no torch at import: the workers import this module to run run_one (a run's torch is in its
# subprocess), and multiprocessing's spawn re-imports the main module in every worker

SEEDS = (0, 1, 2)
EVENT_TOPIC = "assocmem.sweep"
GPU_DEFAULT_WORKERS = 4          # runs per GPU unless --workers-per-device says otherwise


# ---------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------
def grid(task: str, models: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None,
         protocol: Optional[dict] = None):
    """The ``(task, model, seed, protocol)`` runs of the paper's grid, in priority order (seeds outer).

    ``protocol``: overrides of the task's protocol options for every run (checked here)."""
    from .train import resolve_protocol, task_def

    td = task_def(task)
    models = list(td.models if models is None else models)
    for m in models:
        if m not in td.models:
            raise ValueError(f"models: {m!r} is not a model of {task} ({', '.join(td.models)})")
    if seeds is None:
        # swap tracking: the paper shows single training curves
        seeds = (0,) if task == "swap_tracking" else SEEDS
    pr = dict(protocol or {})
    for m in models:                                 # bad options fail before anything starts
        resolve_protocol(task, pr, m)
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
    from .train import protocol_tag, resolve_protocol, run_name

    task, model, seed = job[:3]
    return run_name(model, seed, protocol_tag(task, resolve_protocol(task, job_protocol(job))))


def job_label(job) -> str:
    name = job_name(job)
    return f"{job[0]}:{name}"


def train_command(job, *, out, device: str, steps=None, batch_size=None, extra_args: Sequence[str] = (),
                  resume: bool = True) -> list:
    """The argv of one run's subprocess (no progress bar; ``resume``: continue from its checkpoint, which
    ``train --resume`` requires to exist, so an attempt passes it only when one does)."""
    task, model, seed = job[:3]
    cmd = [sys.executable, "-m", "assocmem.gpu.tasks.run_child", "train", task, "--model", model,
           "--seed", str(seed), "--out", str(out), *(["--resume"] if resume else []), "--no-progress",
           "--device", device]
    for key, val in job_protocol(job).items():
        cmd += ["--protocol", f"{key}={','.join(map(str, val)) if isinstance(val, list) else val}"]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    if batch_size is not None:
        cmd += ["--batch-size", str(batch_size)]
    return cmd + list(extra_args)


def _gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except Exception:
        return 0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------
# the local cluster
# ---------------------------------------------------------------------------
def cluster_spec(device: str, *, workers_per_device: Optional[int] = None, gpus: Optional[Sequence[int]] = None,
                 heavy_gpus: int = 0, heavy_workers_per_device: Optional[int] = None,
                 cores: Optional[int] = None) -> list[dict]:
    """The workers of a local cluster, one dict each: ``name``, ``nthreads``, ``resources``, ``env``.

    ``cuda``: one worker per GPU (``gpus``, default every visible one) with
    ``workers_per_device`` threads (default 4) and as many ``GPU`` units; with
    ``heavy_gpus = N`` the last N GPUs' workers have ``GPU_HEAVY`` units
    instead (``heavy_workers_per_device`` of them, default the same).  ``cpu``:
    ``workers_per_device`` single-thread workers (default: one per core).
    Every worker's environment gives its runs ``cores / concurrent runs``
    OpenMP/MKL threads unless those variables are set here already.
    """
    V.choice("device", device, ("cuda", "cpu"))
    cores = _cores() if cores is None else cores
    if workers_per_device is not None:
        workers_per_device = V.count("--workers-per-device", workers_per_device, 1)
    heavy_gpus = V.count("--heavy-gpus", heavy_gpus, 0)
    if heavy_workers_per_device is not None:
        heavy_workers_per_device = V.count("--heavy-workers-per-device", heavy_workers_per_device, 1)
    if device == "cpu":
        if heavy_gpus:
            raise ValueError("--heavy-gpus: the heavy/light split needs --device cuda")
        n = workers_per_device or max(1, cores)
        groups = [(None, n, 1, None)] * n          # (gpu, runs, threads, resource)
    else:
        ids = list(range(_gpu_count())) if gpus is None else [int(g) for g in gpus]
        if not ids:
            raise ValueError("--device cuda: torch sees no GPU here (use --device cpu, or --scheduler to join "
                             "a cluster that has GPUs)")
        if heavy_gpus >= len(ids) and heavy_gpus:
            raise ValueError(f"--heavy-gpus: {heavy_gpus} leaves no GPU for the light runs ({len(ids)} visible; "
                             f"needs at least {heavy_gpus + 1})")
        w = workers_per_device or GPU_DEFAULT_WORKERS
        wh = heavy_workers_per_device or w
        n_light = len(ids) - heavy_gpus
        groups = [(g, w, w, "GPU") for g in ids[:n_light]] + [(g, wh, wh, "GPU_HEAVY") for g in ids[n_light:]]
    slots = sum(g[2] for g in groups)
    threads = str(max(1, cores // max(1, slots)))
    spec = []
    for i, (gpu, _runs, nthreads, res) in enumerate(groups):
        env = {"ASSOCMEM_RUN_THREADS": threads,
               # dask's nanny sets these to 1 in its workers; ours pass them on to the runs
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", threads),
               "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS", threads),
               "CUDA_VISIBLE_DEVICES": "" if gpu is None else str(gpu)}
        spec.append({"name": f"cpu{i}" if gpu is None else f"gpu{gpu}", "nthreads": nthreads,
                     "resources": {} if res is None else {res: nthreads}, "env": env})
    return spec


def _need_dask():
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ValueError("sweeps run on Dask: pip install 'assocmem[sweep]' (dask[distributed])") from None


def start_local_cluster(spec: list[dict], *, dashboard: bool = True):
    """A :class:`distributed.SpecCluster` with the workers of :func:`cluster_spec` (each its own process)."""
    _need_dask()
    import logging
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {w["name"]: {"cls": Nanny, "options": {
        "nthreads": w["nthreads"], "resources": w["resources"] or None, "env": w["env"],
        # the runs are subprocesses: the worker itself holds nothing worth a memory limit
        "memory_limit": 0, "silence_logs": logging.ERROR}} for w in spec}
    sched = {"cls": Scheduler, "options": {"dashboard_address": _dashboard_address() if dashboard else ":0",
                                           "dashboard": bool(dashboard)}}
    return SpecCluster(workers=workers, scheduler=sched, silence_logs=logging.ERROR)


def _dashboard_address() -> str:
    """Dask's usual port 8787 when it is free, else any (the link printed names it)."""
    import socket

    with socket.socket() as sk:
        try:
            sk.bind(("", 8787))
        except OSError:
            return ":0"
    return ":8787"


def connect(scheduler: str, timeout: float = 10.0):
    """A client of an existing cluster: ``scheduler`` is an address (``tcp://host:8786``) or a
    scheduler file (``dask scheduler --scheduler-file FILE``); fails within ``timeout`` seconds."""
    _need_dask()
    timeout = float(V.positive("--connect-timeout", timeout))
    from distributed import Client

    try:
        if Path(scheduler).is_file():
            return Client(scheduler_file=scheduler, timeout=timeout)
        return Client(scheduler, timeout=timeout)
    except Exception as exc:       # OSError, TimeoutError, a malformed address: one line, exit 2
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"--scheduler {scheduler}: no Dask scheduler answered within {timeout:g}s ({why})") \
            from None


# ---------------------------------------------------------------------------
# one run (the Dask task)
# ---------------------------------------------------------------------------
class RunFailed(RuntimeError):
    """A run's subprocess exited non-zero; Dask retries the task, the sweep reports the last one."""

    def __init__(self, label: str, rc: int, last_line: str):
        super().__init__(label, rc, last_line)
        self.label, self.rc, self.last_line = label, rc, last_line

    def __str__(self):
        return f"{self.label}: rc {self.rc}: {self.last_line}"


def _last_line(path) -> str:
    """The last non-empty line of a run's log (progress-bar carriage returns split lines too)."""
    try:
        lines = [ln.strip() for ln in Path(path).read_text(errors="replace").replace("\r", "\n").splitlines()]
    except OSError:
        return f"(no log at {path})"
    lines = [ln for ln in lines if ln]
    return lines[-1][-300:] if lines else "(empty log)"


def _checkpoint_step(path: Path) -> Optional[int]:
    if not path.exists():
        return None
    try:
        import torch
        return int(torch.load(path, map_location="cpu", weights_only=True)["step"])   # tensors and containers only
    except Exception:
        return -1                  # present but unreadable (train() then fails or starts over)


def _worker():
    try:
        from distributed import get_worker
        return get_worker()
    except Exception:              # called outside a worker (tests, a plain function call)
        return None


def _released(worker, key) -> bool:
    """Whether the scheduler gave up on this task (its client left or cancelled it)."""
    if worker is None or key is None:
        return False
    ts = worker.state.tasks.get(key)
    return ts is None or ts.state in ("cancelled", "released", "forgotten")


def run_env(worker=None) -> dict:
    """The environment of a run's subprocess: this worker's, with the run's thread share."""
    env = dict(os.environ)
    if "ASSOCMEM_RUN_THREADS" not in env:
        # a worker we did not start: its share of this host's cores (set ASSOCMEM_RUN_THREADS to choose)
        n = worker.state.nthreads if worker is not None else 1
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(max(1, _cores() // max(1, n)))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_one(job, *, out, device: str = "cpu", steps=None, batch_size=None, extra_args: Sequence[str] = (),
            name: Optional[str] = None, token: str = "", deadline: Optional[float] = None,
            kill_at: Optional[float] = None, poll_s: float = 0.5) -> dict:
    """Run one job in a subprocess (the Dask task); returns its record or raises :class:`RunFailed`.

    ``deadline``: do not start after it (record ``not started``); ``kill_at``:
    stop the run then (record ``stopped``, its checkpoint stays); ``token``
    marks this sweep's attempts in the run's log; ``name``: :func:`job_name` (given by the client,
    so that a worker never imports torch itself).
    """
    task, model, seed = job[:3]
    name = job_name(job) if name is None else name
    base = {"task": task, "model": model, "seed": seed, "name": name}
    if deadline is not None and time.time() >= deadline:
        return {**base, "status": "not started", "rc": None, "seconds": 0.0}
    worker = _worker()
    key = worker.get_current_task() if worker is not None else None
    where = worker.address if worker is not None else "local"
    env = run_env(worker)
    gpu = env.get("CUDA_VISIBLE_DEVICES", "")
    dev = "cpu" if device == "cpu" else f"cuda (CUDA_VISIBLE_DEVICES={gpu or 'all'})"
    d = Path(out) / task
    d.mkdir(parents=True, exist_ok=True)
    log_path = d / f"{name}.log"
    mark = f"[sweep {token}] attempt"
    prev = log_path.read_text(errors="replace").count(mark) if token and log_path.exists() else 0
    attempt = prev + 1
    resumed = _checkpoint_step(d / f"{name}.ckpt.pt")
    cmd = train_command(job, out=out, device=device, steps=steps, batch_size=batch_size, extra_args=extra_args,
                        resume=(d / f"{name}.ckpt.pt").exists())
    msg = {"event": "start", "label": f"{task}:{name}", "worker": where, "device": dev, "attempt": attempt,
           "resumed_from": resumed}
    if worker is not None:
        try:
            worker.log_event(EVENT_TOPIC, msg)
        except Exception:
            pass
    t0 = time.perf_counter()
    with open(log_path, "a" if prev else "w") as fh:
        fh.write(f"{mark} {attempt} on {where} ({dev}, {env.get('OMP_NUM_THREADS')} threads)"
                 + (f", resuming from the checkpoint at step {resumed}" if resumed is not None else "") + "\n")
        fh.flush()
        env["ASSOCMEM_PARENT_PID"] = str(os.getpid())
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        status = None
        while True:
            try:
                rc = proc.wait(timeout=poll_s)
                break
            except subprocess.TimeoutExpired:
                pass
            if kill_at is not None and time.time() >= kill_at:
                status = "stopped"
            elif _released(worker, key):
                status = "released"
            if status:
                proc.terminate()
                try:
                    rc = proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = proc.wait()
                fh.write(f"{mark} {attempt}: {'stopped at the time limit' if status == 'stopped' else 'released'}"
                         "; the checkpoint stays\n")
                break
    rec = {**base, "status": status or ("done" if rc == 0 else "failed"), "rc": rc, "worker": where,
           "device": dev, "attempt": attempt, "resumed_from": resumed,
           "seconds": round(time.perf_counter() - t0, 1)}
    if status is None and rc != 0:
        raise RunFailed(f"{task}:{name}", rc, _last_line(log_path))
    return rec


# ---------------------------------------------------------------------------
# a grid on a cluster
# ---------------------------------------------------------------------------
def job_resources(job, device: str, heavy: Optional[Callable] = None) -> Optional[dict]:
    """What a run takes from its worker: one ``GPU`` unit (``GPU_HEAVY`` for a heavy run when the
    heavy runs have GPUs of their own), nothing on the CPU."""
    if device == "cpu":
        return None
    return {"GPU_HEAVY" if heavy is not None and heavy(job) else "GPU": 1}


def _cluster_resources(client) -> set:
    info = client.scheduler_info(n_workers=-1) if _takes_n_workers(client) else client.scheduler_info()
    return {r for w in info.get("workers", {}).values() for r, v in (w.get("resources") or {}).items() if v}


def _takes_n_workers(client) -> bool:
    import inspect
    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


def _dashboard(client) -> Optional[str]:
    try:
        if "dashboard" in client.scheduler_info().get("services", {}):
            return client.dashboard_link
    except Exception:
        pass
    return None


def run_jobs(jobs, *, out: str | Path = "runs", steps=None, batch_size=None, device: Optional[str] = None,
             workers_per_device: Optional[int] = None, gpus: Optional[Sequence[int]] = None,
             heavy_gpus: int = 0, heavy_workers_per_device: Optional[int] = None, heavy: Optional[Callable] = None,
             scheduler: Optional[str] = None, client=None, connect_timeout: float = 10.0, retries: int = 0,
             extra_args: Sequence[str] = (), deadline: Optional[float] = None, kill_at: Optional[float] = None,
             progress: Optional[bool] = None, dashboard: bool = True, log=print) -> list[dict]:
    """Run jobs on a Dask cluster; one record per job that was submitted (``status``: ``done``,
    ``failed``, ``stopped`` at ``kill_at``, ``not started`` after ``deadline``).

    The cluster: ``client`` (a :class:`distributed.Client`), else ``scheduler`` (an
    address or a scheduler file), else a local cluster from :func:`cluster_spec`
    (closed at the end).  ``device`` (``cuda``/``cpu``, default ``cuda`` when a
    GPU is visible here or the cluster's workers have ``GPU`` units) is the
    runs' device; ``retries``: how often a failed run is tried again (on any
    worker; a worker that dies mid-run does not count, its run is resumed
    elsewhere); ``heavy`` (a predicate) with ``heavy_gpus > 0``: those runs take
    ``GPU_HEAVY`` units.  ``progress``: Dask's progress bar (default: when stdout
    is a terminal).
    """
    retries = V.count("--retries", retries, 0)
    connect_timeout = float(V.positive("--connect-timeout", connect_timeout))
    if device is not None:
        V.choice("--device", device, ("cuda", "cpu"))
    if workers_per_device is not None:
        V.count("--workers-per-device", workers_per_device, 1)
    out = Path(out).resolve()          # absolute: the workers may run elsewhere (a shared file system)
    todo = [j for j in jobs if not (out / j[0] / f"{job_name(j)}.json").exists()]
    if len(todo) < len(jobs):
        log(f"{len(jobs) - len(todo)} run(s) already have results, {len(todo)} to go")
    if not todo:
        return []
    _need_dask()
    from distributed import Client, as_completed

    cluster = own = None
    if client is None and scheduler is None:
        if device is None:
            device = "cuda" if _gpu_count() > 0 else "cpu"
        spec = cluster_spec(device, workers_per_device=workers_per_device, gpus=gpus, heavy_gpus=heavy_gpus,
                            heavy_workers_per_device=heavy_workers_per_device)
        cluster = start_local_cluster(spec, dashboard=dashboard)
        client = own = Client(cluster)
        log(f"local Dask cluster: {len(spec)} worker(s) "
            + ", ".join(f"{w['name']} ({w['nthreads']} run(s)"
                        + (f", {w['resources']}" if w["resources"] else "") + ")" for w in spec)
            + f", {spec[0]['env']['OMP_NUM_THREADS']} thread(s) per run")
    elif client is None:
        client = own = connect(scheduler, connect_timeout)
    try:
        if scheduler is not None or cluster is None:
            have = _cluster_resources(client)
            if device is None:
                device = "cuda" if "GPU" in have else "cpu"
            need = {"GPU"} if device == "cuda" else set()
            if device == "cuda" and heavy is not None and heavy_gpus > 0 and any(heavy(j) for j in todo):
                need.add("GPU_HEAVY")
            if need - have:
                raise ValueError(f"--device {device}: no worker of the cluster has {'/'.join(sorted(need - have))} "
                                 f"resources (start the GPU workers with --resources GPU=N, one worker per GPU)")
        link = _dashboard(client)
        import importlib.util
        plots_here = importlib.util.find_spec("bokeh") is not None
        log(f"dashboard: {link}" + ("" if plots_here else " (its plots need bokeh on the scheduler)") if link
            else "dashboard: none (pip install bokeh for Dask's dashboard)")
        token = uuid.uuid4().hex[:8]
        if progress is None:
            progress = sys.stdout.isatty()
        # with Dask's bar on the terminal, a log line first clears the bar's line (it redraws itself)
        say = (lambda m: log("\r\x1b[2K" + m)) if progress else log

        def on_event(ev):
            m = ev[1] if isinstance(ev, tuple) and len(ev) == 2 else ev
            if isinstance(m, dict) and m.get("event") == "start":
                extra = f", attempt {m['attempt']}" if m.get("attempt", 1) > 1 else ""
                res = f", resuming from step {m['resumed_from']}" if m.get("resumed_from") is not None else ""
                say(f"start {m['label']} on {m['worker']} ({m['device']}{extra}{res})")

        try:
            client.subscribe_topic(EVENT_TOPIC, on_event)
        except Exception:
            pass
        futures = {}
        for i, job in enumerate(todo):
            f = client.submit(run_one, job, out=str(out), device=device, steps=steps, batch_size=batch_size,
                              extra_args=tuple(extra_args), name=job_name(job), token=token, deadline=deadline,
                              kill_at=kill_at,
                              key=f"train-{job_label(job)}-{token}", resources=job_resources(job, device, heavy),
                              retries=retries, priority=len(todo) - i, pure=False)
            futures[f] = job
        bar = None
        if progress:
            from distributed.diagnostics.progressbar import progress as dask_progress
            bar = threading.Thread(target=dask_progress, args=(list(futures),),
                                   kwargs={"multi": False, "notebook": False}, daemon=True)
            bar.start()
        records = []
        for f in as_completed(list(futures)):
            job = futures[f]
            label = job_label(job)
            if f.status == "finished":
                rec = f.result()
                if rec["status"] == "done":
                    say(f"done {label} in {rec['seconds']:.1f}s")
                elif rec["status"] == "stopped":
                    say(f"killed at the time limit: {label} (its checkpoint stays)")
                elif rec["status"] != "not started":
                    say(f"{rec['status']} {label}")
            else:
                exc = f.exception()
                rc = getattr(exc, "rc", None)
                last = getattr(exc, "last_line", None) or f"{type(exc).__name__}: {exc}"
                rec = {"task": job[0], "model": job[1], "seed": job[2], "name": job_name(job), "status": "failed",
                       "rc": rc if rc is not None else 1, "error": last, "seconds": None}
                say(f"FAILED (rc {rec['rc']}) {label} after {retries + 1} attempt(s)" if rc is not None
                    else f"FAILED {label}")
                say("  " + last)
            records.append(rec)
        if bar is not None:
            bar.join(timeout=2)
        late = [r for r in records if r["status"] == "not started"]
        if late:
            log(f"deadline: {len(late)} run(s) not started: " + ", ".join(f"{r['task']}:{r['name']}" for r in late))
        try:
            client.unsubscribe_topic(EVENT_TOPIC)
        except Exception:
            pass
        return records
    finally:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()


def sweep(task: str, *, models=None, seeds=None, protocol=None, **kw) -> list[dict]:
    """Run one task's grid (see :func:`grid` and :func:`run_jobs`)."""
    return run_jobs(grid(task, models, seeds, protocol), **kw)
