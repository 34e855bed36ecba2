"""The ``assocmem`` command line.

Each sub-command lives in ``assocmem/commands/<name>.py`` and exposes
``register(subparsers)``; the module list below is the only shared place.
Bad input raises ``ValueError`` anywhere below; it becomes one line on stderr
and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = [
    "assocmem.commands.verify",
    "assocmem.commands.collision",
    "assocmem.commands.snr",
    "assocmem.commands.swap",
    "assocmem.commands.figures",
    "assocmem.commands.gpu",
    "assocmem.commands.docs",
]


def build_parser() -> argparse.ArgumentParser:
    from assocmem import __version__

    parser = argparse.ArgumentParser(
        prog="assocmem",
        description="Verify the mathematics of the Bayesian Layer and DeltaFormer papers.",
    )
    parser.add_argument("--version", action="version", version=f"assocmem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:      # that command's issue is not done yet
                continue
            raise
        mod.register(sub)
    return parser


def dispatch(parser: argparse.ArgumentParser, argv: list[str] | None = None, label: str = "assocmem") -> int:
    """Parse, run the chosen sub-command, and turn a ``ValueError`` into one
    line on stderr with exit status 2 (shared by every entry point)."""
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"{label} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser(), argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
