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
    from assocmem.cli import SEED, Int, Items, Real

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
    c = p.add_argument_group("length curriculum (swap_tracking curriculum-*/direct-* models; AM Fig. 6)")
    c.add_argument("--curriculum-lengths", type=Items(item=Int(1), what="length"), default=None,
                   help="stage lengths, comma-separated (default 32,64,128,256; direct-*: the last one)")
    c.add_argument("--curriculum-threshold", type=Real(0, 1), default=None,
                   help="move to the next stage when the window's training accuracy reaches this (default 0.99)")
    c.add_argument("--curriculum-window", type=Int(1), default=None, help="steps per accuracy window (default 25)")
    c.add_argument("--curriculum-switch-at", type=Items(item=Int(1), what="step"), default=None,
                   help="fixed-step schedule instead: the steps at which each stage ends, comma-separated")
    p.set_defaults(func=run_train)

    s = sub.add_parser("sweep", help="run a task's grid (models x seeds) over all visible GPUs",
                       description="Run the paper's grid for TASK, one process per worker slot "
                                   "(--workers-per-device per GPU); finished runs are skipped.")
    s.add_argument("task", choices=TASKS, help="the learned task")
    s.add_argument("--out", default="runs", help="output folder (default runs/)")
    s.add_argument("--models", type=Items(what="model"), default=None,
                   help="comma-separated subset (default: all, in priority order)")
    s.add_argument("--seeds", type=Items(item=SEED, what="seed"), default=None,
                   help="comma-separated (default 0,1,2; swap tracking 0)")
    s.add_argument("--steps", type=Int(1, MAX_STEPS), default=None, help="training steps of every run")
    s.add_argument("--batch-size", type=Int(1), default=None, help="batch size of every run")
    s.add_argument("--workers-per-device", type=Int(1, 256), default=4,
                   help="processes per GPU (default 4; one process on a CPU)")
    s.set_defaults(func=run_sweep)


def _need_torch(what: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"assocmem gpu {what} needs torch (pip install 'assocmem[gpu]')") from None


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
    preflight(args.task, args.model, seed=args.seed, steps=args.steps, batch_size=args.batch_size, device=device,
              out=args.out, resume=args.resume, force=args.force,
              length=max(args.curriculum_lengths) if args.curriculum_lengths else None)
    res = train(args.task, args.model, seed=args.seed, steps=args.steps, batch_size=args.batch_size,
                device=device, out=args.out, resume=args.resume, eval_mode=args.eval_mode,
                progress=not args.no_progress and sys.stderr.isatty(), curriculum=sched)
    last = res["curve"][-1] if res["curve"] else {}
    print(json.dumps({"task": res["task"], "model": res["model"], "seed": res["seed"],
                      "final_train": last, "wall_s": res["provenance"]["wall_s"],
                      "device": res["provenance"]["device"]}))
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
    device = resolve_device("auto")      # the sweep's runs go to the GPUs, else one after another on the CPU
    for m in models or MODELS_BY_TASK[args.task]:
        check_memory(args.task, m, args.batch_size, None, device)
        check_time(args.task, m, args.steps, args.batch_size, None, device)
    output_dir("--out", args.out)
    recs = sweep(args.task, models=models, seeds=list(args.seeds) if args.seeds else None, out=args.out,
                 steps=args.steps, batch_size=args.batch_size, workers_per_device=args.workers_per_device,
                 log=lambda m: print(m, flush=True))
    return 1 if any(r["rc"] != 0 for r in recs) else 0


def main(argv=None) -> int:
    from assocmem.cli import Parser, dispatch

    parser = Parser(prog="python -m assocmem.gpu.tasks", description="Learned tasks of the BL and AM papers.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    register(sub)
    return dispatch(parser, argv)
