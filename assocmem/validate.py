"""Boundary validation shared by every layer.

Each function raises :class:`ParamError` (a ``ValueError``) naming the
parameter and the offending value.  The CLI turns it into a one-line message
and exit status 2, with the parameter's name replaced by the flag the user
typed (``n_a`` -> ``--n-a``; see :func:`assocmem.args.dispatch`).
"""
from __future__ import annotations

import math
from numbers import Real

import numpy as np


class ParamError(ValueError):
    """Bad value of one named parameter; ``str(exc)`` starts with ``param``."""

    def __init__(self, param: str, message: str):
        if not message.startswith(param) and not message.startswith("-"):   # "-": it names a flag already
            message = f"{param}: {message}"
        super().__init__(message)
        self.param = param


def _fmt(x) -> str:
    a = np.asarray(x)
    if a.size == 1:
        return repr(a.item())
    return f"array of shape {a.shape}"


def _short(x) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def finite(name: str, x) -> np.ndarray:
    if x is None or isinstance(x, (str, bytes)):
        raise ParamError(name, f"{name} must be numeric (got {_short(x)})")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ParamError(name, f"{name} must be numeric (got {type(x).__name__} {_short(x)})") from None
    if not np.all(np.isfinite(a)):
        raise ParamError(name, f"{name} must be finite (got NaN or Inf in {_fmt(x)})")
    return a


def positive(name: str, x) -> np.ndarray:
    a = finite(name, x)
    if np.any(a <= 0):
        raise ParamError(name, f"{name} must be > 0 (got {_fmt(a[a <= 0].ravel()[0])})")
    return a


def nonnegative(name: str, x) -> np.ndarray:
    a = finite(name, x)
    if np.any(a < 0):
        raise ParamError(name, f"{name} must be >= 0 (got {_fmt(a[a < 0].ravel()[0])})")
    return a


def in_closed(name: str, x, lo: float, hi: float) -> np.ndarray:
    a = finite(name, x)
    if np.any((a < lo) | (a > hi)):
        bad = float(a[(a < lo) | (a > hi)].ravel()[0])
        raise ParamError(name, f"{name} must lie in [{lo:g}, {hi:g}] (got {bad!r})")
    return a


def count(name: str, x, minimum: int = 0) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        if isinstance(x, Real) and float(x).is_integer():
            x = int(x)
        else:
            raise ParamError(name, f"{name} must be an integer (got {_short(x)})")
    if x < minimum:
        raise ParamError(name, f"{name} must be >= {minimum} (got {x})")
    return int(x)


def psd(name: str, P, *, rtol: float = 1e-10) -> np.ndarray:
    """A symmetric positive semi-definite matrix (or stack of them)."""
    a = finite(name, P)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ParamError(name, f"{name} must be a square matrix (got shape {a.shape})")
    scale = max(1.0, float(np.max(np.abs(a)))) if a.size else 1.0
    if not np.allclose(a, np.swapaxes(a, -1, -2), atol=rtol * scale):
        raise ParamError(name, f"{name} must be symmetric")
    lam = np.linalg.eigvalsh(a)
    if np.any(lam < -rtol * scale * a.shape[-1]):
        raise ParamError(name, f"{name} must be positive semi-definite (min eigenvalue {lam.min():.3g})")
    return a


def choice(name: str, x, options) -> str:
    if x not in options:
        raise ParamError(name, f"{name} must be one of {', '.join(map(str, options))} (got {_short(x)})")
    return x


def scalar(name: str, x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ParamError(name, f"{name} must be a number (got {_short(x)})") from None
    if not math.isfinite(v):
        raise ParamError(name, f"{name} must be finite (got {v!r})")
    return v
