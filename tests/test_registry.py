"""The registry's bookkeeping: statuses follow the evidence; each claim has one check, found in one hop."""
import importlib

import pytest

from assocmem.registry import CHECKS, Claim, Evidence, load


def _claim(check=None, status="confirmed"):
    return Claim(id="x.test", title="t", source="s", published="p", check=check, expected_status=status)


def _both(*parts):
    def check(ev):
        for part in parts:
            part(ev)
    return check


def test_every_catalogue_id_is_declared_once():
    reg = load()
    # 21 bl.* + 13 am.* + 5 task.* claims of the two papers
    assert len(reg) == 39 and all(k.split(".")[0] in ("bl", "am", "task") for k in reg)


def test_each_claim_has_one_check_in_the_module_of_its_family():
    """registry.CHECKS maps an ID to ``module:function`` under assocmem.claims: one hop."""
    reg = load()
    assert set(CHECKS) <= set(reg)
    family = {"bl": "bl_", "am": "am", "task": "tasks"}
    seen = {}
    for cid, (where, status) in CHECKS.items():
        module, name = where.split(":")
        assert module.startswith(family[cid.split(".")[0]]), (cid, module)
        fn = getattr(importlib.import_module(f"assocmem.claims.{module}"), name)
        assert callable(fn) and reg[cid].check_function() is fn
        assert status in ("confirmed", "corrected", "refined")
        assert where not in seen, (cid, seen.get(where))     # no function checks two claims
        seen[where] = cid
    # every ID has its check (the learned tasks without finished runs report pending themselves)
    assert {c for c in reg if c not in CHECKS} == set()


def test_pending_without_checks():
    assert _claim().run().status == "pending"


def test_confirmed_corrected_failed():
    ok = lambda ev: ev.close("numpy", "a", 1.0, 1.0 + 1e-13, rel_tol=1e-12)  # noqa: E731
    assert _claim(ok).run().status == "confirmed"
    printed = lambda ev: ev.refutes("sympy", "printed", 0.5, 1.0, abs_tol=0.1)  # noqa: E731
    assert _claim(_both(ok, printed), "corrected").run().status == "corrected"
    not_refuted = lambda ev: ev.refutes("sympy", "printed", 1.0, 1.0, abs_tol=0.1)  # noqa: E731
    assert _claim(not_refuted, "corrected").run().status == "failed"
    bad = lambda ev: ev.close("numpy", "b", 1.0, 1.1, abs_tol=0.01)  # noqa: E731
    assert _claim(_both(ok, bad)).run().status == "failed"


def test_crash_and_empty_and_skip():
    def boom(ev):
        raise RuntimeError("nope")
    r = _claim(boom).run()
    assert r.status == "failed" and "boom raised RuntimeError" in r.detail
    assert _claim(lambda ev: None).run().status == "failed"
    assert _claim(lambda ev: ev.skip("triton", "no torch")).run().status == "skipped"
    # a check that names a function its module does not have fails, reported
    r = _claim("am:no_such_check").run()
    assert r.status == "failed" and "AttributeError" in r.detail


def test_slow_parts_skipped_unless_asked():
    def big(ev):
        ev.holds("numpy", "s", True)

    def check(ev):
        ev.holds("numpy", "f", True)
        ev.slow(big)
    r = _claim(check).run()
    assert r.status == "confirmed" and len(r.items) == 1
    assert r.skipped_layers == {"slow:big": "slow check: run with --slow"}
    r = _claim(check).run(include_slow=True)
    assert len(r.items) == 2 and not r.skipped_layers


def test_checks_table_names_catalogue_ids_only(monkeypatch):
    from assocmem import registry

    monkeypatch.setattr(registry, "_LOADED", False)
    monkeypatch.setitem(registry.CHECKS, "bl.no_such_claim", ("bl_filter:posterior", "confirmed"))
    with pytest.raises(KeyError, match="bl.no_such_claim"):
        registry.load()


def test_exact_uses_symbolic_zero():
    import sympy as sp
    x = sp.symbols("x")
    ev = Evidence()
    assert ev.exact("sympy", "identity", sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1)
    assert not ev.exact("sympy", "not identity", x - 1)


def test_disputed_when_a_measurement_disagrees_but_checks_pass():
    ok = lambda ev: ev.holds("numpy", "generator", True)  # noqa: E731
    disp = lambda ev: ev.dispute("triton", "trend", "holds", "not reproduced")  # noqa: E731
    assert _claim(_both(ok, disp)).run().status == "disputed"
    bad = lambda ev: ev.holds("numpy", "broken", False)  # noqa: E731
    assert _claim(_both(bad, disp)).run().status == "failed"


def test_saved_evidence_outside_a_checkout_is_noted_not_guessed(monkeypatch):
    """bl.chunked's H200 record lives in the source checkout's benchmarks/: found there, and where there
    is no checkout (an installed package) the check says so instead of reading a path near its own file."""
    from assocmem.claims import bl_chunked
    from assocmem.registry import files_read

    ev = Evidence()
    with files_read() as files:
        bl_chunked._h200_record(ev)
    assert "h200_measured_chunk_vs_f64_o" in ev.computed and files == {"benchmarks/h200_chunk.json"}
    monkeypatch.setattr(bl_chunked, "source_root", lambda: None)
    ev = Evidence()
    bl_chunked._h200_record(ev)
    assert not ev.computed and not ev.items and "not available here" in ev.notes[0]
