"""Training steps per second of (task, model, protocol) runs, one process, one at a time.

The campaign plan for a device session is written from these numbers (docs/tasks.md,
"Device sessions"): a run's minutes are its steps over its steps/s, slowed by the
number of runs sharing the GPU.  Each spec is timed on the training loop itself
(the task's sampler, model, loss and AdamW step; no evaluation, no checkpoint),
after ``--warmup`` untimed steps, with a device synchronisation around the timed
ones.

    python scripts/probe_steps.py --device cuda --steps 30 --out probe.json \\
        dag_reachability:transformer-8 mqar:bl:variant=base,pool_size=4096

A spec is ``TASK:MODEL[:KEY=VALUE,...]`` (protocol overrides, as ``--protocol``).
MQAR specs should set a small ``pool_size``: the pool is built before timing and
the full one takes about a minute.

``--profile K`` also runs K more steps under ``torch.profiler`` and adds, per spec, the
wall time of the three phases (sampling and forward, backward, optimizer; CUDA-synchronised)
and the operators with the most GPU time per step (``top_ops``): where a slow model's step
goes, before anyone rewrites a kernel for it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def parse_spec(spec: str):
    parts = spec.split(":", 2)
    if len(parts) < 2:
        raise ValueError(f"spec: TASK:MODEL[:KEY=VALUE,...] expected (got {spec!r})")
    over = {}
    if len(parts) == 3 and parts[2]:
        for kv in parts[2].split(","):
            k, sep, v = kv.partition("=")
            if not sep:
                raise ValueError(f"spec: protocol option KEY=VALUE expected (got {kv!r} in {spec!r})")
            over[k] = v
    return parts[0], parts[1], over


def profile_steps(step_phases, steps: int, device: str, top: int = 25) -> dict:
    """``steps`` calls of ``step_phases()`` (which returns the three phases' wall seconds) under
    torch.profiler: mean phase times and the ``top`` operators by self device time, per step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    phases = []
    with profile(activities=acts) as prof:
        for _ in range(steps):
            phases.append(step_phases())
    names = ("forward_s", "backward_s", "optimizer_s")
    mean = {n: round(sum(p[i] for p in phases) / steps, 5) for i, n in enumerate(names)}

    def dev_us(e):
        for attr in ("self_device_time_total", "self_cuda_time_total"):
            if hasattr(e, attr):
                return getattr(e, attr)
        return 0.0

    ev = [e for e in prof.key_averages() if dev_us(e) > 0 or not device.startswith("cuda")]
    key = dev_us if device.startswith("cuda") else (lambda e: e.self_cpu_time_total)
    ev.sort(key=key, reverse=True)
    total = sum(key(e) for e in ev)
    ops = [{"name": e.key[:120], "calls_per_step": round(e.count / steps, 2),
            "self_ms_per_step": round(key(e) / 1e3 / steps, 4),
            "share": round(key(e) / total, 4) if total else None} for e in ev[:top]]
    return {"steps": steps, "phases": mean, "self_ms_per_step_total": round(total / 1e3 / steps, 3),
            "top_ops": ops}


def probe(task: str, model: str, over: dict, *, device: str, steps: int, warmup: int, batch_size=None,
          profile: int = 0) -> dict:
    import torch

    from assocmem.gpu.tasks import train as Tr

    pr = Tr.resolve_protocol(task, over, model)
    td = Tr.task_def(task)
    bs = batch_size or (64 if model.startswith("stress-") else td.batch_size)
    torch.manual_seed(0)
    net = Tr.build_model(task, model, pr).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def step(phases: bool = False):
        """One training step; with ``phases``, synchronised after each phase, their wall seconds (only
        under --profile: the steps/s timing runs without the syncs)."""
        t = [time.perf_counter()]
        batch = Tr._to(Tr.sample_train(task, model, bs, gen, protocol=pr), device)
        logits, labels = Tr.forward(net, task, batch, pr)
        loss, _ = Tr.loss_and_acc(logits, labels)
        if phases:
            sync()
            t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if phases:
            sync()
            t.append(time.perf_counter())
        opt.step()
        if phases:
            sync()
            t.append(time.perf_counter())
            return [b - a for a, b in zip(t, t[1:])]
        return None

    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    for _ in range(steps):
        step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None
    row = {"task": task, "model": model, "protocol": over, "batch_size": bs, "steps": steps,
           "warmup_s": round(t1 - t0, 2), "steps_per_s": round(steps / (t2 - t1), 2),
           "peak_mb": None if peak is None else round(peak, 1)}
    cores = Tr.model_cores(net)
    if cores:
        row["core"] = cores                         # which GDN/Mamba2 core the timing is of
    if profile:
        row["profile"] = profile_steps(lambda: step(phases=True), profile, device)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+", help="TASK:MODEL[:KEY=VALUE,...]")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--profile", type=int, default=0, metavar="K",
                    help="also profile K steps per spec (phase times and the top operators by GPU time)")
    ap.add_argument("--out", default=None, help="write the JSON here")
    args = ap.parse_args(argv)
    if args.profile < 0:
        ap.error(f"--profile: a number of steps >= 0 expected (got {args.profile})")
    try:
        specs = [parse_spec(s) for s in args.specs]
    except ValueError as e:
        ap.error(str(e))
    rows = []
    for task, model, over in specs:
        try:
            row = probe(task, model, over, device=args.device, steps=args.steps, warmup=args.warmup,
                        batch_size=args.batch_size, profile=args.profile)
        except Exception as e:              # one failed spec is reported, the others still run
            row = {"task": task, "model": model, "protocol": over, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        from assocmem.provenance import provenance

        Path(args.out).write_text(json.dumps({"benchmark": "training steps/s (scripts/probe_steps.py)",
                                              "device": args.device, "rows": rows,
                                              "provenance": provenance()}, indent=2))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
