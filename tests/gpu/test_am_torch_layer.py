"""The torch layer of am.deltaformer_chunked: passes, and fails when the solve is wrong."""
import pytest

torch = pytest.importorskip("torch")

from assocmem.claims import am  # noqa: E402
from assocmem.registry import Evidence  # noqa: E402


@pytest.mark.gpu
def test_torch_solve_matches_numpy_recursion():
    ev = Evidence()
    am.deltaformer_solve_torch(ev)
    assert ev.items and not ev.failures
    assert {it.layer for it in ev.items} == {"torch"}


@pytest.mark.gpu
def test_torch_layer_detects_a_wrong_solve(monkeypatch):
    import assocmem.gpu.tasks.models as M

    real = M.deltaformer_u
    monkeypatch.setattr(M, "deltaformer_u", lambda v, k, b, kind: real(v, k, 0.9 * b, kind))
    ev = Evidence()
    am.deltaformer_solve_torch(ev)
    assert ev.failures
