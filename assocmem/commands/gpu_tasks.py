"""``assocmem gpu train`` and ``assocmem gpu sweep``: the learned tasks (see ``gpu/tasks/cli.py``)."""
from __future__ import annotations


def register_gpu(gsub) -> None:
    from assocmem.gpu.tasks.cli import register

    register(gsub)
