"""Provenance recorded with every saved result."""
from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import re
import subprocess
import sys
from pathlib import Path


@functools.lru_cache(maxsize=None)
def source_root() -> Path | None:
    """The source checkout this package runs from (the repository, or an editable
    install of it), or ``None`` for an installed package.

    Saved results (``results/``, ``benchmarks/``) live in the checkout, not in the
    package: code that reads them asks here instead of walking up from its own file,
    which in an installed package would land in ``site-packages``.
    """
    root = Path(__file__).resolve().parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if re.search(r'^name\s*=\s*"assocmem"\s*$', text, re.M) else None


def git_commit() -> str:
    """HEAD (``+dirty`` with uncommitted changes); where there is no git checkout (a device's copy),
    the ``ASSOCMEM_COMMIT`` the copy was made from, else "unknown"."""
    import os

    env = os.environ.get("ASSOCMEM_COMMIT", "")
    fallback = f"{env} (ASSOCMEM_COMMIT)" if env and env != "unknown" else "unknown"
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        commit = out.stdout.strip()
        if not commit:
            return fallback
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except Exception:
        return fallback


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("numpy", "scipy", "sympy", "mpmath", "torch", "triton"):
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = __import__(name)
            except Exception:
                continue
        out[name] = getattr(mod, "__version__", "?")
    return out


def invocation(argv: list[str] | None = None) -> str:
    """The command line that started this process, as a user would type it again: ``assocmem ARGS`` for the
    console script, ``python -m MODULE ARGS`` for a module run with ``-m`` (a sweep's child runs
    ``python -m assocmem.gpu.tasks.run_child train ...``, which is not ``assocmem train ...``), else
    ``python SCRIPT ARGS``."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    head, args = argv[0], argv[1:]
    if os.path.basename(head) == "assocmem":
        prog = "assocmem"
    else:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        name = getattr(spec, "name", None)
        if name:
            prog = "python -m " + (name[: -len(".__main__")] if name.endswith(".__main__") else name)
        else:
            prog = "python " + head
    return " ".join([prog] + args)


def provenance(extra: dict | None = None) -> dict:
    from assocmem import __version__

    p = {
        "command": invocation(),
        "assocmem": __version__,
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "versions": versions(),
    }
    if extra:
        p.update(extra)
    return p
