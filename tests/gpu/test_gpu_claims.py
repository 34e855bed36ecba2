"""The triton layer of the claim checks (bl.collision_table, bl.cost)."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from assocmem.claims import bl_collision, bl_dynamics  # noqa: E402
from assocmem.registry import Evidence  # noqa: E402

pytestmark = pytest.mark.gpu


def test_collision_triton_layer_passes_and_reports_the_gap():
    ev = Evidence()
    bl_collision.collision_table_triton(ev)
    assert ev.layers_run == ["triton"]
    assert not ev.failures, [f.name for f in ev.failures]
    assert 0 < ev.computed["triton_max_abs_gap"] < bl_collision.FP32_ABS
    # the kernel's paper-setting gain at step 53 is the float64 filter's 0.90708 (published 0.90708)
    assert abs(ev.computed["triton_paper_setting"]["gain_first_a"] - 0.90708) < 1e-5


def test_collision_triton_layer_can_fail(monkeypatch):
    """With a zero tolerance the fp32 kernel no longer matches float64: the check reports failures."""
    monkeypatch.setattr(bl_collision, "FP32_ABS", 0.0)
    ev = Evidence()
    bl_collision.collision_table_triton(ev)
    assert ev.failures


def test_cost_triton_layer():
    ev = Evidence()
    bl_dynamics.cost_triton(ev)
    assert not ev.failures
    rows = ev.computed["triton_state_bytes"]
    assert {(r["D"], r["m"], r["G"]) for r in rows} >= {(16, 16, 1), (8, 12, 3)}
    for r in rows:
        # nothing of size D×D is kept per token
        assert r["per_token_bytes"] < 4 * r["D"] * r["D"] or r["D"] <= 8
