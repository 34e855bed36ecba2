"""One function per figure; see :mod:`.core` for the registry and style.

Importing this package registers every figure module listed in ``_MODULES``.
"""
import importlib

from .core import FIGURES, make, render

_MODULES = ["bl_collision", "bl_theory", "am"]

for _m in _MODULES:
    try:
        importlib.import_module(f"{__name__}.{_m}")
    except ModuleNotFoundError as exc:      # a figure module whose issue is not done yet
        if exc.name != f"{__name__}.{_m}":
            raise

__all__ = ["FIGURES", "make", "render"]
