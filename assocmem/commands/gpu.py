"""``assocmem gpu ...``: GPU-layer tools (sub-commands: ``bench``; the learned tasks add theirs).

Other modules add sub-commands through :func:`register_subcommand` so that
``assocmem gpu`` stays one parser with one ``--help``.
"""
from __future__ import annotations

import importlib

# modules that contribute ``assocmem gpu <name>`` sub-commands: each exposes
# ``register_gpu(subparsers)`` (a missing module is a sub-command not built yet)
GPU_SUBCOMMAND_MODULES = [
    "assocmem.commands.gpu_tasks",
]


def register(sub) -> None:
    p = sub.add_parser("gpu", help="GPU layer: kernel benchmark and device checks (and learned tasks)",
                       description="Tools of the GPU layer (torch + Triton).")
    gsub = p.add_subparsers(dest="gpu_command", metavar="SUBCOMMAND", parser_class=type(p))
    b = gsub.add_parser(
        "bench", help="check the BL kernels against float64 and time them against fla (needs CUDA)",
        description="Check fused_recurrent_bl and chunk_bl against float64 naive_bl on fresh random inputs "
                    "(kernel outputs poisoned with NaN, every gradient), time forward and forward+backward "
                    "with triton.testing.do_bench beside fla's delta-rule ops (when importable), optionally "
                    "measure the fp32 drift over 1e5 tokens, and write one JSON (runs/gpu_bench.json unless "
                    "--out says otherwise).  Needs a CUDA device.")
    from assocmem.gpu.bench import add_arguments

    add_arguments(b)
    b.set_defaults(func=_bench)
    for name in GPU_SUBCOMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        mod.register_gpu(gsub)
    p.set_defaults(func=lambda args: _no_sub(p))


def _no_sub(p) -> int:
    import sys

    p.print_help()
    print(f"{p.prog}: error: choose a sub-command (listed above)", file=sys.stderr)
    return 2


def _bench(args) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("assocmem gpu bench needs torch (pip install 'assocmem[gpu]')") from None
    from assocmem.gpu.bench import run_args

    return run_args(args)
