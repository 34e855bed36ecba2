"""Helpers the claim checks share (no checks here).

Precision targets and comparisons of the ``bl.*`` checks: sympy derivations
recorded as evidence, matching digits of mpmath values, relative errors of
float64 arrays; and the device the ``triton`` layers run on.

Tolerances: sympy exact; mpmath ≥ 50 matching digits at 60 working digits;
float64 1e-12 relative for the same quantity; Monte Carlo within 5 standard
errors.  Random admissible parameters come from fixed seeds (exact rationals
for mpmath, ``numpy.random.default_rng`` for float64).
"""
from __future__ import annotations

import contextlib
import os
from fractions import Fraction

import numpy as np

from assocmem.registry import Evidence
from assocmem.theory.bl_common import mp_digits

DPS = 60
MIN_DIGITS = 50
SEED = 31415


def sympy_derivation(ev: Evidence, d, prefix: str = "") -> None:
    """Record every identity / fact of a theory ``Derivation`` as a sympy item."""
    for name, ok in d.verify().items():
        ev.holds("sympy", prefix + name, ok, note=f"{d.sizes}; {d.assumptions}")


def digits(a, b) -> float:
    return mp_digits(a, b)


def min_digits(pairs) -> float:
    return min(digits(a, b) for a, b in pairs)


def rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def unit_rational(s, t) -> list:
    """A rational unit vector in R² from the Pythagorean parametrisation."""
    s, t = Fraction(s), Fraction(t)
    return [(s * s - t * t) / (s * s + t * t), 2 * s * t / (s * s + t * t)]


# -- the kernel layers -----------------------------------------------------
def torch_and_device(ev: Evidence, layer: str = "triton"):
    """``(torch, device)``, or ``(None, None)`` with ``layer`` recorded as skipped.

    torch and triton are optional (``assocmem[gpu]``): they are imported here, when a
    kernel layer runs, so that ``assocmem verify`` works without them.
    """
    try:
        import torch
        import triton  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the machine
        ev.skip(layer, f"torch/triton not available: {exc}")
        return None, None
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    return torch, dev


@contextlib.contextmanager
def kernel_mode(dev):
    """On CPU route the kernels through Triton's interpreter for the duration."""
    if dev.type == "cuda":
        yield "compiled (CUDA)"
        return
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield "Triton interpreter (CPU)"
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old
