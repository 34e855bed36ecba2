"""Entry point of one sweep run's subprocess: ``python -m assocmem.gpu.tasks.run_child train ...``.

The same as ``python -m assocmem.gpu.tasks train ...``, except that on Linux the
process asks the kernel to kill it when the thread that started it dies
(``PR_SET_PDEATHSIG``).  A sweep starts each run from a Dask worker's thread;
when the worker is killed (a crash, a node lost, a kill in the fault test) its
run must die with it, or the run would go on writing the checkpoint that the
retry on another worker resumes from.  ``ASSOCMEM_PARENT_PID`` closes the race
of a parent that died before the request was made.
"""
from __future__ import annotations

import os
import signal
import sys


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:          # no prctl: the run then outlives a killed worker (documented)
        return
    expected = os.environ.get("ASSOCMEM_PARENT_PID")
    if expected and os.getppid() != int(expected):
        os._exit(137)          # the worker is already gone


def main() -> int:
    _die_with_parent()
    from .cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
