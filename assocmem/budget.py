"""Size estimates: refuse a run whose arguments ask for more memory or time than allowed.

Every command whose cost grows with its arguments has one estimator,
``estimate(args) -> Estimate`` (peak bytes and seconds, from the shapes the
run allocates and rough per-element rates of this code on one CPU core).
:func:`check` compares it with the limits and, over one, raises a
``ValueError`` that names the flag responsible, the estimate and the limit:

    --n-a 1000000000: the run would need about 15 GB of memory, over the limit
    of 11 GB (ASSOCMEM_MAX_MEMORY raises it)

The flag is found by re-estimating with each size flag at its reference
(default) value: the flag whose reset shrinks the estimate most is named.

Limits: ``ASSOCMEM_MAX_MEMORY`` (bytes, or with a K/M/G/T suffix; default half
the machine's physical memory) and ``ASSOCMEM_MAX_SECONDS`` (default 600).
The estimates are deliberately rough (a factor of a few): they exist to turn
"runs for hours / dies with MemoryError" into one clear line up front.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass

from assocmem.validate import ParamError

DEFAULT_MAX_SECONDS = 600.0
NOTE_SECONDS = 30.0          # above this estimate a run says so on stderr before it starts

_UNITS = {"": 1, "B": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}


@dataclass
class Estimate:
    bytes: float
    seconds: float


def physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):     # pragma: no cover - non-POSIX
        return 8 * 2 ** 30


def _parse_bytes(text: str) -> float:
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    return float(t[: len(t) - len(unit)]) * _UNITS[unit]


def memory_limit() -> float:
    env = os.environ.get("ASSOCMEM_MAX_MEMORY")
    if env:
        try:
            return _parse_bytes(env)
        except ValueError:
            raise ValueError(f"ASSOCMEM_MAX_MEMORY must be a size such as 8G (got {env!r})") from None
    return physical_memory() / 2


def time_limit() -> float:
    env = os.environ.get("ASSOCMEM_MAX_SECONDS")
    if env:
        try:
            v = float(env)
            if not v > 0:
                raise ValueError
            return v
        except ValueError:
            raise ValueError(f"ASSOCMEM_MAX_SECONDS must be a positive number (got {env!r})") from None
    return DEFAULT_MAX_SECONDS


def fmt_bytes(b: float) -> str:
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= div:
            return f"{b / div:.3g} {unit}"
    return f"{b:.0f} B"


def fmt_seconds(s: float) -> str:
    if s >= 86400 * 365:
        return f"{s / (86400 * 365):.3g} years"
    if s >= 86400:
        return f"{s / 86400:.3g} days"
    if s >= 3600:
        return f"{s / 3600:.3g} h"
    if s >= 60:
        return f"{s / 60:.3g} min"
    return f"{s:.2g} s"


def _show(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


def check(estimate, args, flags: dict[str, tuple[str, object]], *, what: str = "the run",
          memory: float | None = None, seconds: float | None = None) -> Estimate:
    """Estimate ``args``; raise naming the responsible flag when over a limit.

    ``flags``: ``dest -> (flag, reference value)`` for every argument the
    estimate grows with.  ``memory`` / ``seconds`` override the limits (a
    device's own memory, for example).
    """
    est = estimate(args)
    mem_lim = memory_limit() if memory is None else memory
    t_lim = time_limit() if seconds is None else seconds
    if est.bytes <= mem_lim and est.seconds <= t_lim:
        return est
    over_mem = est.bytes > mem_lim
    key = "bytes" if over_mem else "seconds"
    val = getattr(est, key)
    blame = []
    for dest, (flag, ref) in flags.items():
        cur = getattr(args, dest, None)
        if cur is None or cur == ref:
            continue
        alt = copy.copy(args)
        setattr(alt, dest, ref)
        try:
            other = getattr(estimate(alt), key)
        except (ValueError, ZeroDivisionError, OverflowError):
            continue
        blame.append((val / max(other, 1e-300), flag, cur, dest))
    blame.sort(key=lambda b: -b[0])
    named = [b for b in blame if b[0] >= 2] or blame[:1]
    who = ", ".join(f"{flag} {_show(cur)}" for _, flag, cur, _ in named) or "the arguments"
    if over_mem:
        msg = (f"{who}: {what} would need about {fmt_bytes(est.bytes)} of memory, over the limit of "
               f"{fmt_bytes(mem_lim)} (ASSOCMEM_MAX_MEMORY raises it)")
    else:
        msg = (f"{who}: {what} would take about {fmt_seconds(est.seconds)}, over the limit of "
               f"{fmt_seconds(t_lim)} (ASSOCMEM_MAX_SECONDS raises it)")
    raise ParamError(named[0][3] if named else "arguments", msg)


def note_if_long(est: Estimate, prog: str) -> None:
    """One stderr line before a run expected to take a while (so it is not mistaken for a hang)."""
    if est.seconds > NOTE_SECONDS:
        import sys

        print(f"{prog}: note: this run is estimated to take about {fmt_seconds(est.seconds)}",
              file=sys.stderr, flush=True)


def finite_or_raise(flags: str, **arrays) -> None:
    """The numeric backstop: results must be finite, else one line naming the flags."""
    import numpy as np

    for name, a in arrays.items():
        if a is None:
            continue
        arr = np.asarray(a, dtype=float)
        if arr.size and not np.all(np.isfinite(arr)):
            raise ValueError(f"{flags}: the float64 computation overflowed (NaN or inf in {name}); "
                             f"bring these values closer to 1")
