"""The registry's bookkeeping: statuses follow the evidence."""
from assocmem.registry import Claim, Evidence, load


def _claim(*checks):
    c = Claim(id="x.test", title="t", source="s", published="p")
    c.checks = list(checks)
    return c


def test_every_catalogue_id_is_declared_once():
    reg = load()
    # 21 bl.* + 13 am.* + 5 task.* rows of CLAIMS.md
    assert len(reg) == 39 and all(k.split(".")[0] in ("bl", "am", "task") for k in reg)


def test_pending_without_checks():
    assert _claim().run().status == "pending"


def test_confirmed_corrected_failed():
    ok = (lambda ev: ev.close("numpy", "a", 1.0, 1.0 + 1e-13, rel_tol=1e-12), "confirmed", False)
    assert _claim(ok).run().status == "confirmed"
    printed = (lambda ev: ev.refutes("sympy", "printed", 0.5, 1.0, abs_tol=0.1), "corrected", False)
    assert _claim(ok, printed).run().status == "corrected"
    not_refuted = (lambda ev: ev.refutes("sympy", "printed", 1.0, 1.0, abs_tol=0.1), "corrected", False)
    assert _claim(not_refuted).run().status == "failed"
    bad = (lambda ev: ev.close("numpy", "b", 1.0, 1.1, abs_tol=0.01), "confirmed", False)
    assert _claim(ok, bad).run().status == "failed"


def test_crash_and_empty_and_skip():
    def boom(ev):
        raise RuntimeError("nope")
    r = _claim((boom, "confirmed", False)).run()
    assert r.status == "failed" and "RuntimeError" in r.detail
    assert _claim((lambda ev: None, "confirmed", False)).run().status == "failed"
    assert _claim((lambda ev: ev.skip("triton", "no torch"), "confirmed", False)).run().status == "skipped"


def test_slow_checks_skipped_unless_asked():
    slow = (lambda ev: ev.holds("numpy", "s", True), "confirmed", True)
    fast = (lambda ev: ev.holds("numpy", "f", True), "confirmed", False)
    r = _claim(fast, slow).run()
    assert r.status == "confirmed" and len(r.items) == 1
    assert len(_claim(fast, slow).run(include_slow=True).items) == 2


def test_exact_uses_symbolic_zero():
    import sympy as sp
    x = sp.symbols("x")
    ev = Evidence()
    assert ev.exact("sympy", "identity", sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1)
    assert not ev.exact("sympy", "not identity", x - 1)


def test_disputed_when_a_measurement_disagrees_but_checks_pass():
    ok = (lambda ev: ev.holds("numpy", "generator", True), "confirmed", False)
    disp = (lambda ev: ev.dispute("triton", "trend", "holds", "not reproduced"), "confirmed", False)
    assert _claim(ok, disp).run().status == "disputed"
    bad = (lambda ev: ev.holds("numpy", "broken", False), "confirmed", False)
    assert _claim(bad, disp).run().status == "failed"
