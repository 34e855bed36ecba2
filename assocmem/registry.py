"""The claim registry: one entry per claim ID of the two papers.

A claim entry names its source (paper, equation, page), the published
statement or value, and its one check function, found from the ID in one hop:
:data:`CHECKS` maps the ID to the module of its family under
:mod:`assocmem.claims` and the function there.  The check never prints; it
fills an :class:`Evidence` object, which records, per layer (``sympy``,
``mpmath``, ``numpy``, ``triton``), every comparison that was made, its
tolerance and whether it passed.  The registry turns that into a
:class:`ClaimResult`.

Status vocabulary: ``confirmed``, ``corrected``, ``refined``, ``failed``,
``skipped``, plus ``pending`` for claims without a check yet, and ``disputed``
for the learned tasks: every check passed, but the toolkit's own measurements
disagree with part of the published statement (the items marked ``disputed``
say which).  A disputed claim is a finding, not a broken check, so it does not
make ``verify`` exit non-zero.
"""
from __future__ import annotations

import contextlib
import fnmatch
import importlib
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from assocmem.provenance import source_root
from assocmem.validate import ParamError

STATUSES = ("confirmed", "corrected", "refined", "disputed", "failed", "skipped", "pending")
LAYERS = ("sympy", "mpmath", "numpy", "triton")

# Where each claim's check lives: ID -> ("module:function" under assocmem.claims, the
# status it reports when every comparison passes).  One check per ID, in the module
# of its family (bl.* in bl_<family>, am.* in am, task.* in tasks); a check may call
# helpers, and runs its slow parts through ``Evidence.slow``.  A catalogue ID without
# a row is ``pending``.  The modules are imported when a claim runs, not before.
CHECKS: dict[str, tuple[str, str]] = {
    "bl.posterior": ("bl_filter:posterior", "confirmed"),
    "bl.kronecker": ("bl_filter:kronecker", "confirmed"),
    "bl.gated_form": ("bl_filter:gated_form", "confirmed"),
    "bl.gain_bound": ("bl_filter:gain_bound", "confirmed"),
    "bl.readout_cov": ("bl_filter:readout_cov", "confirmed"),
    "bl.steady_state": ("bl_steady_state:steady_state", "confirmed"),
    "bl.steady_state_expansion": ("bl_steady_state:steady_state_expansion", "corrected"),
    "bl.cross_shrinkage": ("bl_geometry:cross_shrinkage", "confirmed"),
    "bl.rotation": ("bl_geometry:rotation", "confirmed"),
    "bl.delta_reset": ("bl_families:delta_reset", "confirmed"),
    "bl.additive": ("bl_families:additive", "corrected"),
    "bl.delta_plateau": ("bl_families:delta_plateau", "confirmed"),
    "bl.collision_table": ("bl_collision:collision_table", "confirmed"),
    "bl.iso_ablation": ("bl_collision:iso_ablation", "confirmed"),
    "bl.diag_ablation": ("bl_collision:diag_ablation", "confirmed"),
    "bl.fig3a_plateau": ("bl_collision:fig3a_plateau", "corrected"),
    "bl.capacity": ("bl_capacity:capacity", "corrected"),
    "bl.chunked": ("bl_chunked:chunked", "confirmed"),
    "bl.complex_dynamics": ("bl_dynamics:complex_dynamics", "confirmed"),
    "bl.cost": ("bl_dynamics:cost", "confirmed"),
    "bl.table_recalc": ("bl_tables:table_recalc", "corrected"),
    "am.snr_linear": ("am:snr_linear", "refined"),
    "am.snr_relu": ("am:snr_relu", "refined"),
    "am.snr_exp": ("am:snr_exp", "refined"),
    "am.snr_scaling": ("am:snr_scaling", "confirmed"),
    "am.snr_softmax": ("am:snr_softmax", "confirmed"),
    "am.ffn_memory": ("am:ffn_memory", "confirmed"),
    "am.gd_objective": ("am:gd_objective", "corrected"),
    "am.softmax_memory": ("am:softmax_memory", "refined"),
    "am.deltaformer_equiv": ("am:deltaformer_equiv", "confirmed"),
    "am.deltaformer_reductions": ("am:deltaformer_reductions", "confirmed"),
    "am.deltaformer_chunked": ("am:deltaformer_chunked", "confirmed"),
    "am.swap_theorem": ("am:swap_theorem", "confirmed"),
    "am.deltanet_fixed_point": ("am:deltanet_fixed_point", "confirmed"),
    "task.collision_recall": ("tasks:collision_recall", "confirmed"),
    "task.random_keys": ("tasks:random_keys", "confirmed"),
    "task.swap_tracking": ("tasks:swap_tracking", "confirmed"),
    "task.dag_reachability": ("tasks:dag_reachability", "confirmed"),
    "task.mqar": ("tasks:mqar", "confirmed"),
}


# Files under these folders are evidence: a check that opens one for reading has
# it listed in its result (``ClaimResult.files``), so a report says which saved
# results it rests on.  Recorded by an audit hook around each check, so no check
# has to remember to declare what it reads.
# They belong to the source checkout: an installed package has none, and its checks
# say so where they would have read one.
ROOT = source_root()
EVIDENCE_ROOTS = () if ROOT is None else (ROOT / "results", ROOT / "benchmarks")
_reading: list[set] = []          # one set per check running now (nested runs record in all)
_hooked = False


def _audit(event: str, args) -> None:
    if not _reading or event != "open":
        return
    path, mode = args[0], args[1]
    if isinstance(path, int) or path is None:
        return
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return
    for root in EVIDENCE_ROOTS:
        r = str(root)
        if real.startswith(r + os.sep):
            rel = os.path.relpath(real, ROOT)
            for s in _reading:
                s.add(rel)
            return


@contextlib.contextmanager
def files_read():
    """Collect the evidence files (under :data:`EVIDENCE_ROOTS`) opened for reading inside the block."""
    global _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    got: set = set()
    _reading.append(got)
    try:
        yield got
    finally:
        _reading.remove(got)


@dataclass
class Item:
    """One comparison inside a claim check."""

    layer: str
    name: str
    passed: bool
    computed: Any = None
    expected: Any = None
    tolerance: Any = None
    note: str = ""
    # ``printed`` items show that a published form is wrong: they *pass*
    # when the printed statement is refuted.
    printed: bool = False
    # ``disputed`` items record a published statement that the toolkit's own
    # measurement does not reproduce (learned tasks).
    disputed: bool = False

    def as_dict(self) -> dict:
        return {
            "layer": self.layer,
            "name": self.name,
            "passed": self.passed,
            "computed": _jsonable(self.computed),
            "expected": _jsonable(self.expected),
            "tolerance": _jsonable(self.tolerance),
            "note": self.note,
            "printed_form_refuted": self.printed or None,
            "disputed": self.disputed or None,
        }


class Evidence:
    """Collects the per-layer comparisons a check makes.

    ``close`` / ``exact`` / ``holds`` record a comparison that must pass;
    ``refutes`` records that a *printed* (published) form fails against the
    computed one, which is what a ``corrected`` claim has to show.
    """

    def __init__(self, include_slow: bool = False) -> None:
        self.include_slow = include_slow
        self.items: list[Item] = []
        self.skipped: dict[str, str] = {}
        self.computed: dict[str, Any] = {}
        self.notes: list[str] = []
        self.pending: list[str] = []
        self.summary: str = ""

    # -- comparisons -------------------------------------------------
    def close(self, layer: str, name: str, computed, expected, *, abs_tol: float = 0.0,
              rel_tol: float = 0.0, note: str = "") -> bool:
        c, e = _to_float(computed), _to_float(expected)
        ok = bool(math.isfinite(c) and math.isfinite(e)
                  and abs(c - e) <= max(abs_tol, rel_tol * abs(e)))
        tol = {"abs": abs_tol} if rel_tol == 0 else ({"rel": rel_tol} if abs_tol == 0
                                                        else {"abs": abs_tol, "rel": rel_tol})
        self.items.append(Item(layer, name, ok, computed, expected, tol, note))
        return ok

    def exact(self, layer: str, name: str, difference, note: str = "") -> bool:
        """Symbolic identity: ``difference`` must simplify to exactly zero."""
        ok = _is_exact_zero(difference)
        self.items.append(Item(layer, name, ok, str(difference) if not ok else 0, 0,
                               "exact", note))
        return ok

    def holds(self, layer: str, name: str, condition: bool, *, computed=None,
              expected=None, note: str = "") -> bool:
        ok = bool(condition)
        self.items.append(Item(layer, name, ok, computed, expected, None, note))
        return ok

    def refutes(self, layer: str, name: str, printed, computed, *, abs_tol: float,
                note: str = "") -> bool:
        """The printed form disagrees with the computed value beyond ``abs_tol``."""
        p, c = _to_float(printed), _to_float(computed)
        ok = bool(not (abs(p - c) <= abs_tol))
        self.items.append(Item(layer, name, ok, computed, printed, {"must_differ_by_more_than": abs_tol},
                               note, printed=True))
        return ok

    def dispute(self, layer: str, name: str, published, measured, note: str = "") -> None:
        """A published statement that our own measurement does not reproduce."""
        self.items.append(Item(layer, name, True, measured, published, None, note, disputed=True))

    def skip(self, layer: str, reason: str) -> None:
        self.skipped[layer] = reason

    def pend(self, reason: str) -> None:
        """Part of the claim is not measured yet (e.g. its GPU runs are missing): the claim is
        ``pending`` unless something failed or was disputed."""
        self.pending.append(reason)

    def slow(self, part: Callable[["Evidence"], Any]) -> None:
        """Run ``part(self)``, a slow part of a check (larger sizes), only under
        ``verify --slow``; otherwise record it as skipped (``slow:<its name>``)."""
        if self.include_slow:
            part(self)
        else:
            self.skip(f"slow:{part.__name__}", "slow check: run with --slow")

    def record(self, **values) -> None:
        self.computed.update(values)

    def note(self, text: str) -> None:
        self.notes.append(text)

    # -- summary -------------------------------------------------------
    @property
    def layers_run(self) -> list[str]:
        seen = []
        for it in self.items:
            if it.layer not in seen:
                seen.append(it.layer)
        return sorted(seen, key=lambda l: LAYERS.index(l) if l in LAYERS else 99)

    @property
    def failures(self) -> list[Item]:
        return [it for it in self.items if not it.passed]


@dataclass
class ClaimResult:
    id: str
    status: str
    layers: list[str]
    source: str
    published: str
    computed: dict
    detail: str
    items: list[dict] = field(default_factory=list)
    skipped_layers: dict = field(default_factory=dict)
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    # evidence files (repository-relative) the check opened: saved results it rests on
    files: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "status": self.status,
            "layers": self.layers,
            "source": self.source,
            "published": self.published,
            "computed": _jsonable(self.computed),
            "detail": self.detail,
            "items": self.items,
            "skipped_layers": self.skipped_layers,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
            "files": self.files,
        }

    def _repr_html_(self) -> str:   # Jupyter: status, layers, published against computed
        from assocmem.report import html    # report imports this module: import on use

        return html(self)


@dataclass
class Claim:
    id: str
    title: str
    source: str
    published: str
    layers: tuple[str, ...] = ()
    # its one check: "module:function" under assocmem.claims (from CHECKS), or the function
    check: str | Callable[[Evidence], None] | None = None
    # what it reports when every comparison passes: confirmed, corrected or refined
    expected_status: str = "confirmed"

    def check_function(self) -> Callable[[Evidence], None]:
        """The check itself (importing the module of its family)."""
        if callable(self.check):
            return self.check
        module, name = self.check.split(":")
        return getattr(importlib.import_module(f"assocmem.claims.{module}"), name)

    def run(self, include_slow: bool = False) -> ClaimResult:
        if self.check is None:
            return ClaimResult(self.id, "pending", [], self.source, self.published, {},
                               "pending: no check implemented yet")
        ev = Evidence(include_slow=include_slow)
        t0 = time.perf_counter()
        crashed = None
        with files_read() as files:
            try:
                fn = self.check_function()
                fn(ev)
            except Exception as exc:  # a crashing check is a failed check, reported
                name = getattr(self.check, "__name__", self.check)
                crashed = f"{name} raised {type(exc).__name__}: {exc}"
                ev.note(traceback.format_exc(limit=6))
        dt = time.perf_counter() - t0
        fails = ev.failures
        if crashed:
            status, detail = "failed", crashed
        elif not ev.items:
            status = "skipped" if ev.skipped else "failed"
            detail = "; ".join(f"{k}: {v}" for k, v in ev.skipped.items()) or "check made no comparison"
        elif fails:
            status = "failed"
            detail = "; ".join(_describe_failure(f) for f in fails[:3])
        elif any(it.disputed for it in ev.items):
            status = "disputed"
            detail = ev.summary or "; ".join(it.name for it in ev.items if it.disputed)
        elif ev.pending:
            status = "pending"
            detail = ev.summary or "pending: " + "; ".join(ev.pending)
        else:
            status = self.expected_status
            detail = ev.summary or f"{len(ev.items)} comparisons passed"
        return ClaimResult(
            id=self.id, status=status, layers=ev.layers_run, source=self.source,
            published=self.published, computed=ev.computed, detail=detail,
            items=[it.as_dict() for it in ev.items], skipped_layers=dict(ev.skipped),
            seconds=dt, notes=list(ev.notes), files=sorted(files),
        )


_REGISTRY: dict[str, Claim] = {}
_LOADED = False


def declare(id: str, title: str, source: str, published: str, layers: tuple[str, ...] = ()) -> Claim:
    """Add a claim to the catalogue (its check comes from :data:`CHECKS`; without one it is ``pending``)."""
    if id in _REGISTRY:
        raise ValueError(f"claim {id!r} declared twice")
    c = Claim(id=id, title=title, source=source, published=published, layers=tuple(layers))
    _REGISTRY[id] = c
    return c


def load() -> dict[str, Claim]:
    """Every claim of the catalogue, each with its check from :data:`CHECKS`."""
    global _LOADED
    if not _LOADED:
        importlib.import_module("assocmem.claims.catalogue")     # declares every ID
        for cid, (where, status) in CHECKS.items():
            if cid not in _REGISTRY:
                raise KeyError(f"CHECKS names claim {cid!r}, which is not in the catalogue")
            if status not in ("confirmed", "corrected", "refined"):
                raise ValueError(f"{cid}: status must be confirmed/corrected/refined, got {status!r}")
            _REGISTRY[cid].check, _REGISTRY[cid].expected_status = where, status
        _LOADED = True
    return _REGISTRY


def claims(pattern: str | Iterable[str] | None = None) -> list[Claim]:
    """The claims whose IDs match any of the glob patterns (a comma-separated
    string or a sequence); ``None`` selects all.  Every pattern must match at
    least one ID: a typo is an error, not a smaller selection."""
    reg = load()
    if pattern is None:
        return list(reg.values())
    pats = [p.strip() for p in (pattern.split(",") if isinstance(pattern, str) else pattern)]
    if not pats or not all(pats):
        raise ParamError("only", f"only: empty pattern in {pattern!r} (give claim IDs or globs such as 'bl.*')")
    for p in pats:
        if not any(fnmatch.fnmatchcase(cid, p) for cid in reg):
            raise ParamError("only", f"only: no claim ID matches {p!r} (`assocmem verify --list` "
                                     f"shows the IDs)")
    return [c for c in reg.values() if any(fnmatch.fnmatchcase(c.id, p) for p in pats)]


# -- helpers --------------------------------------------------------------
def _to_float(x) -> float:
    try:
        return float(x)
    except TypeError:
        return float(complex(x).real)


def _is_exact_zero(expr) -> bool:
    import sympy as sp     # on use: sympy takes ~0.5 s to import, and `verify --list` needs none of it

    if isinstance(expr, sp.MatrixBase):
        return all(sp.simplify(e) == 0 for e in expr)
    return sp.simplify(expr) == 0


def _describe_failure(it: Item) -> str:
    if it.printed:
        return f"{it.layer}/{it.name}: printed form {it.expected} was not refuted (computed {it.computed})"
    return f"{it.layer}/{it.name}: computed {_short(it.computed)} vs expected {_short(it.expected)} (tol {it.tolerance})"


def _short(x) -> str:
    if isinstance(x, float):
        return f"{x:.10g}"
    s = str(x)
    return s if len(s) < 60 else s[:57] + "..."


def _jsonable(x):
    """Make numpy / mpmath / sympy values JSON-friendly."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    mod = type(x).__module__
    if mod.startswith("numpy"):
        if isinstance(x, np.ndarray):
            return _jsonable(x.tolist())
        return _jsonable(x.item())
    if mod.startswith("mpmath"):
        return str(x)
    try:
        return float(x)
    except Exception:
        return str(x)
