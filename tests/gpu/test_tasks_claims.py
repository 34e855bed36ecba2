"""The task.* claim checks: generator/core parts, and the documented outcome of each published trend."""
import json

import pytest

from assocmem import registry

pytestmark = pytest.mark.gpu


def _claim(cid):
    return registry.claims(cid)[0]


def _write(d, task, model, seed, ev):
    (d / task).mkdir(parents=True, exist_ok=True)
    (d / task / f"{model}_s{seed}.json").write_text(json.dumps(
        {"task": task, "model": model, "seed": seed, "eval_mode": "full", "eval": ev, "curve": []}))


def test_without_results_only_generator_and_cores(tmp_path, monkeypatch):
    from assocmem.claims import tasks

    monkeypatch.setattr(tasks, "RESULTS", tmp_path)
    r = _claim("task.random_keys").run()
    assert r.status == "confirmed" and "no GPU results" in r.detail
    assert {"numpy", "triton"} <= set(r.layers)


def test_changed_finding_fails_until_documented(tmp_path, monkeypatch):
    """Results where BL is near-perfect at n_f = 256 contradict the documented outcome: the claim fails."""
    from assocmem.claims import tasks

    monkeypatch.setattr(tasks, "RESULTS", tmp_path)
    for m, a, marg in (("bl", 0.99, 0.4), ("delta", 0.75, -0.3), ("reset", 0.75, -0.3),
                       ("linear", 0.05, -0.4), ("gla", 0.05, -0.4)):
        _write(tmp_path, "collision_recall", m, 0, {
            "writes": [{"n_f": 256, "acc_target": a}],
            "overlap": [{"rho": rho, "margin_target": marg} for rho in (0.85, 0.9, 0.95)]})
    r = _claim("task.collision_recall").run()
    assert r.status == "failed"
    failed = [it["name"] for it in r.items if not it["passed"]]
    # exactly the trends whose documented outcome was "not reproduced" now reproduce
    assert len(failed) == 4 and all("BL" in f or "Delta/reset ≈ 0.75" in f for f in failed)
    # and with the documented outcomes updated the same results pass
    for key in ("collision.bl_near_perfect_256", "collision.delta_reset_about_075_256",
                "collision.bl_above_delta_reset_256", "collision.bl_positive_margin_095"):
        monkeypatch.setitem(tasks.DOCUMENTED, key, True)
    r = _claim("task.collision_recall").run()
    assert r.status == "confirmed" and "reproduce 7/7" in r.detail


def _write_curve(d, task, model, curve, ev):
    (d / task).mkdir(parents=True, exist_ok=True)
    (d / task / f"{model}_s0.json").write_text(json.dumps(
        {"task": task, "model": model, "seed": 0, "eval_mode": "full", "eval": ev, "curve": curve}))


def test_stress_and_curriculum_trends_need_documenting(tmp_path, monkeypatch):
    """Fig. 5/6 trends: without runs they are listed as without results; with runs they fail until documented."""
    from assocmem.claims import tasks

    monkeypatch.setattr(tasks, "RESULTS", tmp_path)
    _write_curve(tmp_path, "swap_tracking", "transformer-1", [{"step": 2000, "acc": 0.42}], {"acc": 0.42})
    r = _claim("task.swap_tracking").run()
    assert r.status == "confirmed" and "8 without results" in r.detail   # 3 of Fig. 4, 5 of Figs. 5-6
    # results as the paper describes them
    _write_curve(tmp_path, "swap_tracking", "stress-round2-512", [{"step": 2000, "acc": 0.93}], {"acc": 0.93})
    _write_curve(tmp_path, "swap_tracking", "stress-linear-512", [{"step": 2000, "acc": 0.26}], {"acc": 0.26})
    _write_curve(tmp_path, "swap_tracking", "curriculum-round2-nope", [{"step": 5000, "acc": 0.99, "length": 256}],
                 {"acc": 0.99, "by_length": []})
    _write_curve(tmp_path, "swap_tracking", "direct-round2-nope", [{"step": 5000, "acc": 0.21, "length": 256}],
                 {"acc": 0.21, "by_length": []})
    _write_curve(tmp_path, "swap_tracking", "direct-round2-rope", [{"step": 5000, "acc": 0.8, "length": 256}],
                 {"acc": 0.8, "by_length": []})
    r = _claim("task.swap_tracking").run()
    assert r.status == "failed"
    # the committed documentation says our runs did not reproduce these two: paper-like results contradict it
    failed = sorted(it["name"] for it in r.items if not it["passed"])
    assert len(failed) == 2 and all("documented: not reproduced" in f for f in failed)
    assert "round κ1 reaches" in failed[1] and "NoPE direct" in failed[0]
    # an undocumented outcome (None) fails too, whatever the results say
    monkeypatch.setitem(tasks.DOCUMENTED, "swap.direct_rope_rises", None)
    r = _claim("task.swap_tracking").run()
    assert any("RoPE direct" in it["name"] and "no outcome yet" in it["name"] and not it["passed"] for it in r.items)
    for key in ("swap.stress_round_high_512", "swap.stress_linear_low_512", "swap.curriculum_nope_reaches_256",
                "swap.direct_nope_near_chance", "swap.direct_rope_rises"):
        monkeypatch.setitem(tasks.DOCUMENTED, key, True)
    r = _claim("task.swap_tracking").run()
    assert r.status == "confirmed" and "reproduce 6/6" in r.detail
    # a curriculum arm that never reached 256 does not count as reaching it
    _write_curve(tmp_path, "swap_tracking", "curriculum-round2-nope", [{"step": 5000, "acc": 0.99, "length": 64}],
                 {"acc": 0.99, "by_length": []})
    r = _claim("task.swap_tracking").run()
    assert r.status == "failed" and any("NoPE curriculum" in it["name"] and not it["passed"] for it in r.items)
