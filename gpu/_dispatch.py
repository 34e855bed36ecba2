"""Which implementation runs a BL call: compiled Triton, interpreted Triton, or torch.

* CUDA tensors -> the compiled Triton kernels;
* CPU tensors with ``TRITON_INTERPRET=1`` in the environment (at call time) ->
  the *same* kernel source through Triton's interpreter (how CI tests the kernels);
* otherwise CPU tensors -> :func:`assocmem.gpu.naive_bl`.

Triton decides at decoration time whether ``@triton.jit`` builds a compiled or
an interpreted function (it reads ``TRITON_INTERPRET`` then).  To be
independent of when ``triton`` was first imported, the kernel module is
executed here under a private name with the variable forced to the wanted
value, once per mode.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

_KERNEL_FILE = Path(__file__).with_name("_fused_recurrent_kernels.py")
_LOADED: dict = {}
_LOCK = threading.RLock()          # re-entrant: a kernel file loads its helpers (_kernel_common.py) while being loaded


def triton_available() -> tuple[bool, str]:
    """(available, reason) for the Triton toolchain."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the machine
        return False, f"triton is not importable: {exc}"
    return True, ""


def interpret_requested() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


def kernels(interpret: bool, filename: str | Path = "_fused_recurrent_kernels.py"):
    """A kernel module (a file of this package, ``_fused_recurrent_kernels.py`` by default, or any path),
    compiled (``interpret=False``) or interpreted.  It is loaded under a private name with
    ``TRITON_INTERPRET`` forced for the duration, so the import order of
    ``triton`` does not matter and both modes can coexist in one process."""
    path = _KERNEL_FILE.with_name(filename) if isinstance(filename, str) else Path(filename)
    key = (bool(interpret), str(path))
    with _LOCK:
        mod = _LOADED.get(key)
        if mod is not None:
            return mod
        old = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        try:
            rel = path.with_suffix("").relative_to(_KERNEL_FILE.parent) if path.is_relative_to(_KERNEL_FILE.parent) \
                else Path(path.stem)
            name = f"assocmem.gpu.{'.'.join(rel.parts)}_{'interp' if interpret else 'jit'}"
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        finally:
            if old is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = old
        _LOADED[key] = mod
        return mod


def mode_for(device) -> str:
    """``"triton"``, ``"interpret"`` or ``"naive"`` for tensors on ``device``."""
    ok, _ = triton_available()
    if getattr(device, "type", str(device)) == "cuda":
        return "triton" if ok else "naive"
    if ok and interpret_requested():
        return "interpret"
    return "naive"
