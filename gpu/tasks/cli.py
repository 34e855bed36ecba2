"""``assocmem gpu train`` / ``assocmem gpu sweep`` (the learned tasks).

``register(gpu_subparsers)`` adds the two sub-commands to the ``assocmem gpu``
group (through ``assocmem.commands.gpu_tasks``); ``python -m assocmem.gpu.tasks
...`` runs the same parser standalone.  Registering imports no torch.
"""
from __future__ import annotations

import json
import sys

from .names import MODELS_BY_TASK, TASKS

MAX_STEPS = 10_000_000          # train.MAX_STEPS (kept here: registering imports no torch)


def register(sub) -> None:
    from assocmem.args import SEED, Int, Items, Real

    p = sub.add_parser("train", help="train one model on a learned task (GPU; tiny runs work on CPU)",
                       description="Train one model on one task with the paper's settings and write a JSON "
                                   "result with provenance to OUT/TASK/MODEL_sSEED.json (OUT defaults to runs/, "
                                   "outside the committed results/).")
    p.add_argument("task", choices=TASKS, help="the learned task")
    p.add_argument("--model", required=True,
                   help="; ".join(f"{t}: {', '.join(ms)}" for t, ms in MODELS_BY_TASK.items()))
    p.add_argument("--seed", type=SEED, default=0, help="training seed (default 0)")
    p.add_argument("--steps", type=Int(1, MAX_STEPS), default=None,
                   help="training steps (default: the paper's, 2500 BL tasks, 2000 swap)")
    p.add_argument("--batch-size", type=Int(1), default=None, help="sequences per step (default 256)")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"),
                   help="auto (default): cuda when torch sees a GPU, else cpu")
    p.add_argument("--out", default="runs",
                   help="output folder (default runs/; results/ holds the committed GPU results)")
    p.add_argument("--force", action="store_true", help="overwrite an existing result JSON")
    p.add_argument("--resume", action="store_true",
                   help="continue from OUT/TASK/MODEL_sSEED.ckpt.pt (which must exist)")
    p.add_argument("--eval", dest="eval_mode", default="auto", choices=("auto", "full", "quick", "none"),
                   help="test grid: full (the paper's), quick (a few settings), auto = full on cuda, quick on cpu")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--ckpt-every", type=Int(0, MAX_STEPS), default=500, metavar="N",
                   help="advanced: checkpoint every N steps (default 500; a multiple of the curve's 25-step "
                        "interval, so that a resumed run's curve equals an uninterrupted one; 0: only at the end)")
    p.add_argument("--queries-write", action="store_true",
                   help="ablation: query tokens also write to the memory (default: they only read; the "
                        "shorthand of --protocol queries_write=true)")
    p.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE",
                   help="set a protocol option (repeatable); the options and their defaults are listed in "
                        "docs/tasks.md ('Protocol'), e.g. gates=head, reset_l2=0.05, n_layers=1, p0=3")
    c = p.add_argument_group("length curriculum (swap_tracking curriculum-*/direct-* models; AM Fig. 6)")
    c.add_argument("--curriculum-lengths", type=Items(item=Int(1), what="length"), default=None,
                   help="stage lengths, comma-separated (default 32,64,128,256; direct-*: the last one)")
    c.add_argument("--curriculum-threshold", type=Real(0, 1), default=None,
                   help="move to the next stage when the window's training accuracy reaches this (default 0.99)")
    c.add_argument("--curriculum-window", type=Int(1), default=None, help="steps per accuracy window (default 25)")
    c.add_argument("--curriculum-switch-at", type=Items(item=Int(1), what="step"), default=None,
                   help="fixed-step schedule instead: the steps at which each stage ends, comma-separated")
    p.set_defaults(func=run_train)

    s = sub.add_parser("sweep", help="run a task's grid (models x seeds) on a Dask cluster",
                       description="Run the paper's grid for TASK on Dask distributed: by default a local "
                                   "cluster on this host (one worker per visible GPU taking "
                                   "--workers-per-device runs at a time; on a CPU machine one worker per "
                                   "core), or the cluster at --scheduler.  Each run is a subprocess that "
                                   "resumes from its checkpoint; finished runs are skipped; a failed run is "
                                   "retried --retries times and reported while the others go on.")
    s.add_argument("task", choices=TASKS, help="the learned task")
    s.add_argument("--out", default="runs", help="output folder (default runs/)")
    s.add_argument("--models", type=Items(what="model"), default=None,
                   help="comma-separated subset (default: all, in priority order)")
    s.add_argument("--seeds", type=Items(item=SEED, what="seed"), default=None,
                   help="comma-separated (default 0,1,2; swap tracking 0)")
    s.add_argument("--steps", type=Int(1, MAX_STEPS), default=None, help="training steps of every run")
    s.add_argument("--batch-size", type=Int(1), default=None, help="batch size of every run")
    s.add_argument("--device", default=None, choices=("cuda", "cpu"),
                   help="the runs' device (default: cuda if this host, or the --scheduler cluster, has GPUs)")
    s.add_argument("--eval", dest="eval_mode", default=None, choices=("auto", "full", "quick", "none"),
                   help="every run's test grid (default auto: full on cuda, quick on cpu)")
    s.add_argument("--workers-per-device", type=Int(1, 256), default=None,
                   help="runs at a time per GPU (default 4; 12 was the measured sweet spot on an H200); "
                        "on the CPU the number of single-run workers (default: one per core)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="join this Dask cluster (tcp://host:8786, or a scheduler file) instead of starting a "
                        "local one; GPU workers need --resources GPU=N (README: SLURM via dask-jobqueue)")
    s.add_argument("--connect-timeout", type=Real(0.1, 3600), default=10.0, metavar="S",
                   help="give up on --scheduler after S seconds (default 10)")
    s.add_argument("--retries", type=Int(0, 100), default=0,
                   help="try a failed run again K times, resuming from its checkpoint (default 0)")
    s.add_argument("--ckpt-every", type=Int(0, MAX_STEPS), default=None, metavar="N",
                   help="advanced: every run checkpoints every N steps (default 500; a multiple of 25)")
    s.add_argument("--queries-write", action="store_true", help="ablation: query tokens also write")
    s.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE",
                   help="a protocol option for every run of the grid (repeatable)")
    s.set_defaults(func=run_sweep)


def _need_torch(what: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"assocmem gpu {what} needs torch (pip install 'assocmem[gpu]')") from None


def parse_protocol(task: str, items, queries_write: bool = False) -> dict:
    """``["KEY=VALUE", ...]`` (the ``--protocol`` flags) -> ``{KEY: VALUE}``, each checked against
    the task's protocol options; errors name the flag as typed."""
    from .train import PROTOCOL, resolve_protocol

    out, typed = {}, {}
    for it in items:
        key, sep, val = str(it).partition("=")
        key, val = key.strip(), val.strip()
        if not sep or not key:
            raise ValueError(f"--protocol takes KEY=VALUE (got {it!r})")
        if key in out:
            raise ValueError(f"--protocol {key} is given twice")
        spec = PROTOCOL.get(task, {})
        try:
            if key not in spec:
                resolve_protocol(task, {key: val})          # raises: names the task's options
            spec[key][1](key, val)                          # the value alone
        except ValueError as exc:
            raise ValueError(f"--protocol {it}: {exc}") from None
        out[key], typed[key] = val, it
    try:                                                    # then the options together (one may need another)
        resolve_protocol(task, out)
    except ValueError as exc:
        msg = str(exc)
        flag = next((typed[k] for k in typed if msg.startswith(f"protocol {k}:")), ", ".join(typed.values()))
        raise ValueError(f"--protocol {flag}: {exc}") from None
    if queries_write:
        if out.get("queries_write", "true").lower() not in ("1", "true", "yes", "on"):
            raise ValueError("--queries-write contradicts --protocol queries_write=false")
        try:
            resolve_protocol(task, {"queries_write": True})
        except ValueError as exc:
            raise ValueError(f"--queries-write: {exc}") from None
        out["queries_write"] = "true"
    return out


LOG_EVERY = 25          # train()'s log_every: one curve point per 25 steps


def ckpt_every(n) -> int:
    """``--ckpt-every``: >= 0 and a multiple of the curve's log interval (the interval's running means
    are not in the checkpoint, so a run resumed mid-interval would average fewer steps)."""
    n = int(n)
    if n < 0 or n % LOG_EVERY:
        raise ValueError(f"--ckpt-every must be 0 or a positive multiple of {LOG_EVERY} (got {n})")
    return n


def run_train(args) -> int:
    _need_torch("train")
    from .train import preflight, resolve_device, train

    device = resolve_device(args.device)
    sched = None
    opts = (args.curriculum_lengths, args.curriculum_threshold, args.curriculum_window, args.curriculum_switch_at)
    if any(o is not None for o in opts):
        from . import curriculum as Cu
        from .names import is_curriculum_model
        names = ("--curriculum-lengths", "--curriculum-threshold", "--curriculum-window", "--curriculum-switch-at")
        given = [n for n, o in zip(names, opts) if o is not None]
        if not is_curriculum_model(args.model):
            raise ValueError(f"{', '.join(given)}: the curriculum options apply to the curriculum-*/direct-* "
                             f"swap_tracking models only (got --model {args.model})")
        if args.model.startswith("direct-") and given != ["--curriculum-lengths"] and len(given) > 0:
            extra = [g for g in given if g != "--curriculum-lengths"]
            raise ValueError(f"{', '.join(extra)}: the direct-* arm has a single stage (only --curriculum-lengths, "
                             f"whose last length it trains at, applies)")
        sched = Cu.schedule_for(args.model, lengths=args.curriculum_lengths, threshold=args.curriculum_threshold,
                                window=args.curriculum_window, switch_at=args.curriculum_switch_at)
        _schedule_fits(args)
    protocol = parse_protocol(args.task, args.protocol, args.queries_write)
    every = ckpt_every(args.ckpt_every)
    preflight(args.task, args.model, seed=args.seed, steps=args.steps, batch_size=args.batch_size, device=device,
              out=args.out, resume=args.resume, force=args.force,
              length=max(args.curriculum_lengths) if args.curriculum_lengths else None, protocol=protocol)
    res = train(args.task, args.model, seed=args.seed, steps=args.steps, batch_size=args.batch_size,
                device=device, out=args.out, resume=args.resume, eval_mode=args.eval_mode,
                progress=not args.no_progress and sys.stderr.isatty(), curriculum=sched,
                protocol=protocol, ckpt_every=every)
    last = res["curve"][-1] if res["curve"] else {}
    print(json.dumps({"task": res["task"], "model": res["model"], "seed": res["seed"],
                      "final_train": last, "wall_s": res["provenance"]["wall_s"],
                      "device": res["provenance"]["device"]}))
    if res.get("eval_mode") != "full":
        # the claims read full evaluations only: a run meant for results/ would otherwise be skipped silently
        how = "--eval auto on a CPU" if args.eval_mode == "auto" else f"--eval {args.eval_mode}"
        print(f"note: {res.get('eval_mode')} evaluation ({how}); `assocmem verify` reads only full evaluations: "
              f"the same command with --resume --force --eval full evaluates the final checkpoint in full, "
              f"without training further", file=sys.stderr)
    return 0


def _schedule_fits(args) -> None:
    """A window or a switch step beyond the run would silently keep the first stage."""
    from .train import CURRICULUM_STEPS

    total = args.steps if args.steps is not None else CURRICULUM_STEPS
    if args.curriculum_window is not None and args.curriculum_window > total:
        raise ValueError(f"--curriculum-window {args.curriculum_window} is longer than the run ({total} steps, "
                         f"--steps): no window would ever end a stage")
    if args.curriculum_switch_at and max(args.curriculum_switch_at) >= total:
        raise ValueError(f"--curriculum-switch-at: step {max(args.curriculum_switch_at)} is not before the end of the "
                         f"run ({total} steps, --steps), so its stage would never run")


def run_sweep(args) -> int:
    _need_torch("sweep")
    from assocmem.outputs import output_dir
    from .sweep import sweep
    from .train import check_memory, check_time, resolve_device

    models = list(args.models) if args.models else None
    for m in models or ():
        if m not in MODELS_BY_TASK[args.task]:
            raise ValueError(f"--models: {m!r} is not a model of {args.task} "
                             f"({', '.join(MODELS_BY_TASK[args.task])})")
    protocol = parse_protocol(args.task, args.protocol, args.queries_write)
    every = None if args.ckpt_every is None else ckpt_every(args.ckpt_every)
    if args.scheduler is None:           # a local cluster: the runs go to this host's GPUs, else its CPU
        device = args.device or resolve_device("auto")
        for m in models or MODELS_BY_TASK[args.task]:
            check_memory(args.task, m, args.batch_size, None, device, protocol)
            check_time(args.task, m, args.steps, args.batch_size, None, device, protocol)
    output_dir("--out", args.out)
    extra = []
    if args.eval_mode is not None:
        extra += ["--eval", args.eval_mode]
    if every is not None:
        extra += ["--ckpt-every", str(every)]
    recs = sweep(args.task, models=models, seeds=list(args.seeds) if args.seeds else None, protocol=protocol,
                 out=args.out, steps=args.steps, batch_size=args.batch_size, device=args.device,
                 workers_per_device=args.workers_per_device, scheduler=args.scheduler,
                 connect_timeout=args.connect_timeout, retries=args.retries, extra_args=extra,
                 log=lambda m: print(m, flush=True))
    bad = [r for r in recs if r["status"] != "done"]
    if recs:
        print(f"sweep: {len(recs) - len(bad)}/{len(recs)} run(s) done"
              + (f"; failed: {', '.join(r['task'] + ':' + r['name'] for r in bad)}" if bad else ""), flush=True)
    return 1 if bad else 0


def main(argv=None) -> int:
    from assocmem.args import Parser, dispatch

    parser = Parser(prog="python -m assocmem.gpu.tasks", description="Learned tasks of the BL and AM papers.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    register(sub)
    return dispatch(parser, argv)
