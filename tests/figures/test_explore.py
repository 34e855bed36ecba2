"""The notebooks' sliders: explorers call the package, the figures package leaves
matplotlib's backend alone."""
import subprocess
import sys

import numpy as np
import pytest

from assocmem.figures import explore
from assocmem.interact import Explorer, sliders
from assocmem.numerics.collision import run_collision
from assocmem.protocol import PUBLISHED
from assocmem.theory.am_snr import inverse_snr_curve
from assocmem.theory.bl_steady_state import g_inf_value


def test_figures_import_does_not_choose_a_backend():
    code = ("import matplotlib; matplotlib.use('svg'); import assocmem.figures, assocmem.figures.explore; "
            "print(matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "svg"


def test_collision_slider_reruns_the_protocol():
    ex = sliders(explore.collision, rho=(0.0, 1.0, 0.01, 0.92), r2=(0.005, 2.0, 0.005, 0.05))
    assert round(float(ex.data["p_ab"]["dense"][-1]), 5) == PUBLISHED["p_ab_final"]["dense"]
    pytest.importorskip("ipywidgets")
    ex.widgets()
    ex.controls["rho"].value = 0.5          # what dragging the slider does
    assert ex.values["rho"] == 0.5
    ref = run_collision(rho=0.5, variants=("dense",))["dense"].p_ab
    assert np.array_equal(ex.data["p_ab"]["dense"], ref)
    assert "0.5" in ex.figure._suptitle.get_text()


def test_steady_state_explorer_gain_tends_to_closed_form():
    fig, d = explore.steady_state(r2=0.1, l2=0.3, p0=2.0, rho=0.8, steps=200)
    assert d["gain"][-1] == pytest.approx(float(g_inf_value(0.1, 0.3)), rel=1e-10)
    assert d["theta_sim"][-1] < np.arcsin(0.8) and d["theta_sim"][-1] == pytest.approx(np.arcsin(0.8), abs=0.01)


def test_inverse_snr_explorer_draws_the_given_setting():
    fig, d = explore.inverse_snr(d=12, tau=3.0, samples=200)
    lead, exact = inverse_snr_curve("exp", 12, d["N"], 3.0)
    assert d["d"] == 12 and np.allclose(d["exp"]["exact"], exact)


def test_explorer_update_and_bad_controls():
    calls = []

    def fn(a, kind):
        calls.append((a, kind))
        import matplotlib.figure
        return matplotlib.figure.Figure(), {"a": a}

    ex = Explorer(fn, {"a": (0, 10, 1, 3), "kind": ["x", "y"]})
    ex.update(a=5, kind="y")
    assert calls == [(3, "x"), (5, "y")] and ex.data == {"a": 5}
    with pytest.raises(ValueError, match="unknown parameter"):
        ex.update(b=1)
    with pytest.raises(ValueError, match="a: need lo <= default <= hi"):
        Explorer(fn, {"a": (0, 10, 1, 11), "kind": ["x"]})
    with pytest.raises(ValueError, match="kind: a dropdown"):
        Explorer(fn, {"a": (0, 10, 1, 1), "kind": []})
