"""The ``assocmem`` command line.

Each sub-command lives in ``assocmem/commands/<name>.py`` and exposes
``register(subparsers)``; the module list below is the only shared place.

Bad input never gives a traceback: the parser class, the argument types and the
dispatch that turns a ``ValueError`` into one line naming the flag live in
:mod:`assocmem.args`, shared with the learned tasks' and the benchmark's own
entry points.  Output paths are checked before the work starts
(:mod:`assocmem.outputs`); sizes are estimated from the arguments and refused
over the memory and time limits (:mod:`assocmem.budget`).
"""
from __future__ import annotations

import importlib
import sys

from assocmem import __version__
from assocmem.args import Parser, dispatch

COMMAND_MODULES = [
    "assocmem.commands.verify",
    "assocmem.commands.collision",
    "assocmem.commands.snr",
    "assocmem.commands.swap",
    "assocmem.commands.figures",
    "assocmem.commands.gpu",
    "assocmem.commands.docs",
]


def build_parser() -> Parser:
    parser = Parser(
        prog="assocmem",
        description="Verify the mathematics of the Bayesian Layer and DeltaFormer papers.",
    )
    parser.add_argument("--version", action="version", version=f"assocmem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:      # that command's issue is not done yet
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser(), argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
