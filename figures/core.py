"""Figure registry and the shared style.

A figure is registered with :func:`figure`: a ``data()`` function returning the
arrays it plots (tests check these, not pixels), a ``draw(data, fig)`` function,
and a caption.  :func:`render` writes PDF/PNG plus a caption file.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import logging

# No backend is chosen here: in Jupyter the inline backend draws the figures, in a
# script matplotlib picks its default, and the commands that only write files
# (``assocmem figures``, ``assocmem docs``) select Agg themselves.
# fontTools complains about the bundled fonts' header dates while subsetting
# them into PDFs; the output is fine and the noise buries real messages.
logging.getLogger("fontTools").setLevel(logging.ERROR)
import matplotlib  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from assocmem.style import STYLE  # noqa: E402  (shared with the learned tasks' plots)

COLUMN_WIDTH = 3.4     # inches, one column of a two-column paper
COLORS = {"dense": "#1f4e9c", "diag": "#4aa3df", "reset": "#d1495b", "iso": "#8d6a9f",
          "linear": "#edae49", "exact": "#222222", "leading": "#d1495b", "mc": "#1f4e9c",
          "round2": "#66a182", "printed": "#d1495b", "corrected": "#1f4e9c"}
LABELS = {"dense": "BL", "diag": "BL (diagonal cov.)", "reset": "Reset / Delta", "iso": "Isotropic prior",
          "linear": "Linear attention"}


@dataclass
class FigureSpec:
    name: str
    data: Callable[[], dict]
    draw: Callable[[dict, "plt.Figure"], None]
    caption: str
    size: tuple = (COLUMN_WIDTH, 2.4)


FIGURES: dict[str, FigureSpec] = {}


def figure(name: str, caption: str, size=(COLUMN_WIDTH, 2.4)):
    """Register ``draw``; the decorated function's ``data`` attribute must be set
    with :func:`data_for` (kept separate so tests call only the data part)."""
    def deco(draw):
        FIGURES[name] = FigureSpec(name, None, draw, caption, size)
        return draw
    return deco


def data_for(name: str):
    def deco(fn):
        FIGURES[name].data = fn
        return fn
    return deco


def make(name: str, data: dict | None = None):
    """Build the matplotlib figure (and return it with its data)."""
    spec = FIGURES[name]
    data = spec.data() if data is None else data
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=spec.size)
        spec.draw(data, fig)
    _once_inline(fig)
    return fig, data


def _once_inline(fig) -> None:
    """Under Jupyter's inline backend, hand the figure over to the caller only.

    The inline backend shows every open pyplot figure at the end of a cell, and a
    notebook also shows the ``fig`` it gets back: the same figure twice (in some
    cells). Closing it in pyplot keeps the figure intact (it still renders and
    saves) and leaves one image, the cell's value. Other backends keep it open,
    so ``plt.show()`` in a script still works.
    """
    if "inline" in matplotlib.get_backend():
        plt.close(fig)


def render(name: str, out: Path, formats=("pdf", "png")) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fig, _ = make(name)
    paths = []
    with plt.rc_context(STYLE):
        for fmt in formats:
            p = out / f"{name}.{fmt}"
            fig.savefig(p)
            paths.append(p)
    plt.close(fig)
    cap = out / f"{name}.txt"
    cap.write_text(FIGURES[name].caption.strip() + "\n", encoding="utf-8")
    paths.append(cap)
    return paths


def shade_phases(ax, phases: dict, labels=True):
    """Shade the B and A phases of the collision protocol."""
    for key, color in (("B", "#4aa3df"), ("A", "#d1495b")):
        lo, hi = phases[key]
        if hi >= lo:
            ax.axvspan(lo - 0.5, hi + 0.5, color=color, alpha=0.07, lw=0)
            if labels:
                ax.text((lo + hi) / 2, 1.0, f"{key} writes", transform=ax.get_xaxis_transform(),
                        ha="center", va="bottom", fontsize=6, color=color)
