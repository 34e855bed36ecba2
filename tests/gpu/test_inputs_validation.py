"""The boundary value checks (``validate=True``) in one host synchronisation, with the messages they had.

Each bad value is caught by every op (the torch reference, the token-by-token and the chunked kernels
through the interpreter) with the message written out here; when several checks fail, the first in
order is reported; a valid call transfers one tensor to the host (it used to transfer one per check,
each a device synchronisation on a GPU).
"""
import re

import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu import _inputs, chunk_bl, fused_recurrent_bl, naive_bl  # noqa: E402

pytestmark = pytest.mark.gpu


def _base(make_inputs):
    return make_inputs(1, 5, 2, 4, 4, 2, alpha=True, init=True, seed=9)


def _set(name, idx, value):
    def f(x):
        t = x[name] if name in x else x["initial_state"][{"M": 0, "P": 1}[name]]
        t[idx] = value
    return f


NAN, INF = float("nan"), float("inf")
# (mutation, the message, exactly, or as a regular expression where it quotes a value)
CASES = [
    (_set("q", (0, 1, 0, 0), NAN), re.escape("q must be finite (got NaN or Inf)")),
    (_set("k", (0, 1, 1, 2), INF), re.escape("k must be finite (got NaN or Inf)")),
    (_set("v", (0, 4, 0, 0), -INF), re.escape("v must be finite (got NaN or Inf)")),
    (_set("l2", (0, 2, 1), NAN), re.escape("l2 must be finite (got NaN or Inf)")),
    (_set("r2", (0, 0, 0, 1), INF), re.escape("r2 must be finite (got NaN or Inf)")),
    (_set("l2", (0, 3, 0), -0.25), re.escape("l2 must be >= 0 (got -0.25)")),
    (_set("r2", (0, 1, 1, 0), 0.0), re.escape("r2 must be > 0 (got 0.0)")),
    (_set("r2", (0, 1, 1, 0), -2.0), re.escape("r2 must be > 0 (got -2.0)")),
    (_set("alpha", (0, 1, 0, 0), NAN), re.escape("alpha must be finite (got NaN or Inf)")),
    (_set("alpha", (0, 1, 0, 3), INF), re.escape("alpha must be finite (got NaN or Inf)")),
    (_set("M", (0, 0, 1, 1), NAN), re.escape("initial_state[0] (M) must be finite (got NaN or Inf)")),
    (_set("P", (0, 1, 0, 2, 2), INF), re.escape("initial_state[1] (P) must be finite (got NaN or Inf)")),
    (_set("P", (0, 0, 1, 0, 1), 5.0), re.escape("initial_state[1] (P) must be symmetric")),
    (lambda x: x["initial_state"][1].mul_(-1.0),
     re.escape("initial_state[1] (P) must be positive semi-definite (min eigenvalue ") + r"-[0-9.e+-]+\)"),
    # several faults: the first in order wins
    (lambda x: (_set("r2", (0, 0, 0, 0), -1.0)(x), _set("v", (0, 0, 0, 0), NAN)(x)),
     re.escape("v must be finite (got NaN or Inf)")),
    (lambda x: (_set("l2", (0, 0, 0), -1.0)(x), _set("r2", (0, 0, 0, 0), -1.0)(x)),
     re.escape("l2 must be >= 0 (got -1.0)")),
]


def _ops(monkeypatch):
    """Each op with the dispatch it takes: the torch reference, then the kernels through the interpreter."""
    def interp(f):
        def g(**x):
            monkeypatch.setenv("TRITON_INTERPRET", "1")
            try:
                return f(**x)
            finally:
                monkeypatch.delenv("TRITON_INTERPRET")
        return g
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return {"naive_bl": naive_bl, "fused_recurrent_bl": interp(fused_recurrent_bl),
            "chunk_bl": interp(chunk_bl)}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_bad_value_is_caught_with_its_message(monkeypatch, make_inputs, case):
    pytest.importorskip("triton")
    mutate, msg = CASES[case]
    for name, op in _ops(monkeypatch).items():
        x = _base(make_inputs)
        mutate(x)
        with pytest.raises(ValueError, match="^" + msg + "$"):
            op(**x)
        op(**x, validate=False) if name == "naive_bl" else None      # validate=False skips them


def test_log_decay_rules(monkeypatch, make_inputs):
    x = _base(make_inputs)
    g = torch.log(x.pop("alpha"))
    g[0, 2, 1, 0] = -INF                                             # α = 0: allowed as a log-decay
    naive_bl(**x, g=g)
    for bad in (NAN, INF):
        gb = g.clone()
        gb[0, 1, 0, 1] = bad
        with pytest.raises(ValueError, match=r"^g must not be NaN or \+Inf$"):
            naive_bl(**x, g=gb)


def test_alpha_zeros_with_a_gradient_are_refused_on_the_kernel_path(monkeypatch, make_inputs):
    pytest.importorskip("triton")
    x = _base(make_inputs)
    x["alpha"][0, 2, 0, 1] = 0.0
    a = x.pop("alpha").requires_grad_(True)
    naive_bl(**x, alpha=a)                                           # the torch reference differentiates it
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for op in (fused_recurrent_bl, chunk_bl):
        with pytest.raises(ValueError, match="^" + re.escape(_inputs.ALPHA_ZEROS) + "$"):
            op(**x, alpha=a)
        op(**x, alpha=a.detach())                                    # no gradient asked: fine
        op(**x, alpha=a, validate=False)


def test_a_valid_call_synchronises_once(monkeypatch, make_inputs):
    """Every host transfer of a tensor (what synchronises a GPU) during the boundary checks is counted."""
    calls = []
    for attr in ("__bool__", "__float__", "__int__", "__index__", "item", "tolist", "cpu", "numpy"):
        orig = getattr(torch.Tensor, attr)

        def spy(self, *a, _orig=orig, _attr=attr, **kw):
            calls.append(_attr)
            return _orig(self, *a, **kw)
        monkeypatch.setattr(torch.Tensor, attr, spy)
    x = _base(make_inputs)
    x["alpha"].requires_grad_(True)
    _inputs.check_inputs(**x, values=True, forbid_alpha_zeros=True)
    assert calls == ["tolist"]
    calls.clear()
    _inputs.check_inputs(**x, values=False)
    assert calls == []
