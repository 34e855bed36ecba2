"""Sliders for the notebooks: a figure function, redrawn in place.

``sliders(fn, rho=(0.0, 1.0, 0.01, 0.92), ...)`` returns an :class:`Explorer`.
Shown in a notebook it first draws ``fn`` at the defaults as an ordinary image
output (so executed notebooks, nbconvert and the documentation site show the
figure: that is the static fallback), then, where ipywidgets and a kernel are
present, one slider per parameter; moving one calls ``fn`` again with the new
values and replaces the image through its display id.  A front-end without the
widget manager shows the static figure and a one-line text placeholder for the
sliders.

``fn`` is one of :mod:`assocmem.figures.explore` (or any function returning
``(fig, data)``); nothing here computes a result.
"""
from __future__ import annotations

from typing import Callable


def _kernel():
    """The running IPython kernel, or ``None`` (a plain interpreter, a terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    ip = get_ipython()
    return getattr(ip, "kernel", None) and ip


def _has_widgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


class Explorer:
    """``fn(**values)`` with one control per parameter.

    ``controls`` maps a parameter to ``(lo, hi, step, default)`` (a slider; an
    int slider when all four are ints) or to a list of choices (a dropdown, the
    first is the default).  ``values`` holds the current parameters, ``figure`` and
    ``data`` the latest result.
    """

    def __init__(self, fn: Callable, controls: dict):
        self.fn = fn
        self.specs = {}
        for name, spec in controls.items():
            if isinstance(spec, list):
                if not spec:
                    raise ValueError(f"{name}: a dropdown needs at least one choice")
                self.specs[name] = ("choice", spec, spec[0])
            else:
                try:
                    lo, hi, step, default = spec
                except (TypeError, ValueError):
                    raise ValueError(f"{name}: a slider is (lo, hi, step, default), got {spec!r}") from None
                if not lo <= default <= hi or step <= 0:
                    raise ValueError(f"{name}: need lo <= default <= hi and step > 0, got {spec!r}")
                kind = "int" if all(isinstance(x, int) for x in spec) else "float"
                self.specs[name] = (kind, (lo, hi, step), default)
        self.values = {name: spec[2] for name, spec in self.specs.items()}
        self.controls: dict = {}
        self._handle = None
        self.figure, self.data = fn(**self.values)

    # -- the widget path --------------------------------------------------------
    def widgets(self):
        """Build (once) and return the ipywidgets box; each control redraws on release."""
        import ipywidgets as W

        if not self.controls:
            for name, (kind, rng, default) in self.specs.items():
                if kind == "choice":
                    w = W.Dropdown(options=rng, value=default, description=name)
                else:
                    cls = W.IntSlider if kind == "int" else W.FloatSlider
                    lo, hi, step = rng
                    w = cls(min=lo, max=hi, step=step, value=default, description=name,
                            continuous_update=False, readout_format=".4g" if kind == "float" else "d")
                w.observe(lambda change, n=name: self.update(**{n: change["new"]}), names="value")
                self.controls[name] = w
        return W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap"))

    def update(self, **values):
        """Redraw with ``values`` changed; replaces the shown image where there is one."""
        import matplotlib.pyplot as plt

        unknown = set(values) - set(self.specs)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)}; known: {sorted(self.specs)}")
        self.values.update(values)
        old = self.figure
        self.figure, self.data = self.fn(**self.values)
        plt.close(old)
        if self._handle is not None:
            self._handle.update(self.figure)
        return self

    # -- display ----------------------------------------------------------------
    def _ipython_display_(self):
        from IPython.display import display

        if _kernel() is not None and _has_widgets():
            display(self.widgets())
        self._handle = display(self.figure, display_id=True)


def sliders(fn: Callable, **controls) -> Explorer:
    """Sliders over ``fn``'s parameters; see :class:`Explorer`."""
    return Explorer(fn, controls)
