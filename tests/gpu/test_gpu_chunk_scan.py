"""chunk_scan_bl (the parallel-in-time form in torch) against the token-by-token references.

float64: equal to ``naive_bl`` (and, on one case, to the numpy filter ``bl_filter``) across chunk sizes,
partial last chunks, T = 1, decays (none, weak, strong, signed, zeros, log-decays with −inf), ℓ² = 0 with
small r², groups, initial states and write masks; the chunk-start states equal the recurrence's states;
gradients equal autograd through ``naive_bl``.  fp32 through Triton's interpreter: the same kernels as on
a GPU for the chunks' passes, the error against float64 within 10× of the token-by-token kernel's in the
collapsing regime (issue 19's precision target).
"""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

torch = pytest.importorskip("torch")

from assocmem.gpu import fused_recurrent_bl, naive_bl  # noqa: E402
from assocmem.gpu.chunk_scan import (Element, associative_scan, chunk_scan_bl, combine)  # noqa: E402

pytestmark = pytest.mark.gpu


def _close(a, b, tol):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


def _decay(x, kind, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "none":
        x["alpha"] = None
    elif kind == "strong":
        x["alpha"] = x["alpha"] * 0.4
    elif kind == "signed":
        x["alpha"] = x["alpha"] * torch.sign(torch.randn(x["alpha"].shape, generator=g, dtype=torch.float64))
    elif kind == "with_zeros":
        x["alpha"][:, x["alpha"].shape[1] // 2] = 0.0
    return x


@pytest.mark.parametrize("T,C", [(1, 1), (1, 16), (17, 16), (37, 4), (64, 16), (100, 32), (33, 1)])
@pytest.mark.parametrize("decay", ["none", "weak", "strong", "signed", "with_zeros"])
def test_scan_equals_recurrence_float64(make_inputs, T, C, decay):
    x = _decay(make_inputs(2, T, 2, 5, 4, 2, alpha=True, init=True, seed=T + C), decay)
    o, (M, P), (Ms, Ps) = chunk_scan_bl(**x, chunk_size=C, output_final_state=True, return_starts=True)
    o_r, (M_r, P_r) = naive_bl(**x, output_final_state=True)
    assert _close(o, o_r, 1e-12) and _close(M, M_r, 1e-12) and _close(P, P_r, 1e-12)
    assert o.shape == o_r.shape and P.shape == P_r.shape and M.dtype == torch.float64
    # the start of chunk n is the recurrence's state after token n·C − 1
    for n in range(1, -(-T // C)):
        _, (Mn, Pn) = naive_bl(**{**x, **{f: (t[:, :n * C] if torch.is_tensor(t) and t.ndim >= 3 else t)
                                          for f, t in x.items() if f != "initial_state"}},
                               output_final_state=True)
        assert _close(Ps[:, :, :, n], Pn, 1e-12) and _close(Ms[:, :, n], Mn, 1e-12)


@pytest.mark.parametrize("C", [16, 32])
def test_within_chunk_pass_by_the_chunked_op(make_inputs, C):
    x = make_inputs(1, 45, 2, 4, 4, 1, alpha=True, init=True, seed=C)
    o, (M, P) = chunk_scan_bl(**x, chunk_size=C, within="chunk", output_final_state=True)
    o_r, (M_r, P_r) = naive_bl(**x, output_final_state=True)
    assert _close(o, o_r, 1e-12) and _close(M, M_r, 1e-12) and _close(P, P_r, 1e-12)


@pytest.mark.parametrize("decay", ["none", "weak"])
@pytest.mark.parametrize("scan_dtype", [torch.float64, torch.float32])
def test_collapsing_regime_float64(make_inputs, decay, scan_dtype):
    """ℓ² = 0, r² = 1e-4: P collapses by four orders of magnitude (float64 inputs: the scan dtype
    promotes to float64 either way)."""
    x = _decay(make_inputs(1, 200, 2, 6, 3, alpha=True, seed=7), decay)
    x["l2"] = torch.zeros_like(x["l2"])
    x["r2"] = torch.full_like(x["r2"], 1e-4)
    o, (M, P) = chunk_scan_bl(**x, chunk_size=16, output_final_state=True, scan_dtype=scan_dtype)
    o_r, (M_r, P_r) = naive_bl(**x, output_final_state=True)
    if decay == "none":
        assert float(torch.diagonal(P_r, dim1=-2, dim2=-1).sum(-1).max()) < 1e-2
    # the combine loses ‖P₀‖‖J‖ ≈ 1/r² of float64's 16 digits (numerics/bl_parallel.py)
    assert _close(o, o_r, 1e-10) and _close(P, P_r, 1e-10)


def test_equals_the_numpy_filter(make_inputs, numpy_reference):
    x = make_inputs(2, 29, 2, 4, 6, 3, alpha=True, init=True, seed=3)
    wm = torch.rand(2, 29, 2, generator=torch.Generator().manual_seed(4)) < 0.7
    o_np, M_np, P_np, _ = numpy_reference(x, write_mask=wm)
    o, (M, P) = chunk_scan_bl(**x, chunk_size=8, output_final_state=True, write_mask=wm)
    assert _close(o, torch.as_tensor(o_np), 1e-12) and _close(M, torch.as_tensor(M_np), 1e-12)
    assert _close(P, torch.as_tensor(P_np), 1e-12)


def test_write_mask_and_log_decays_with_minus_inf(make_inputs):
    x = make_inputs(1, 40, 2, 4, 4, alpha=True, seed=11)
    wm = torch.rand(1, 40, 2, generator=torch.Generator().manual_seed(2)) < 0.5
    g = torch.log(x.pop("alpha"))
    g[:, 20, 0] = float("-inf")                         # forget everything at one token of head 0
    o, (M, P) = chunk_scan_bl(**x, g=g, chunk_size=8, output_final_state=True, write_mask=wm)
    o_r, (M_r, P_r) = naive_bl(**x, g=g, output_final_state=True, write_mask=wm)
    assert _close(o, o_r, 1e-12) and _close(M, M_r, 1e-12) and _close(P, P_r, 1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 40), C=st.integers(1, 20), D=st.integers(1, 5),
       G=st.sampled_from([1, 2]), alpha=st.booleans(), init=st.booleans())
def test_scan_equals_recurrence_property(make_inputs, seed, T, C, D, G, alpha, init):
    x = make_inputs(1, T, 2, D, 2 * G, G, alpha=alpha, init=init, seed=seed)
    o, st_ = chunk_scan_bl(**x, chunk_size=C, output_final_state=True)
    o_r, st_r = naive_bl(**x, output_final_state=True)
    assert _close(o, o_r, 1e-11) and _close(st_[0], st_r[0], 1e-11) and _close(st_[1], st_r[1], 1e-11)


def test_gradients_equal_recurrence_gradients(make_inputs, input_grads):
    x = make_inputs(1, 23, 2, 4, 4, 2, alpha=True, init=True, seed=40)
    w = torch.randn(1, 23, 2, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    grads = [input_grads(naive_bl, x, w), input_grads(chunk_scan_bl, x, w, chunk_size=4)]
    for a, b in zip(*grads):
        assert _close(b, a, 1e-9)


def _elements(n, D=3, m=2, seed=0):
    """Elements of real token runs (C, J ⪰ 0) in float64, [n, ...]: leaves of random 3-token chunks."""
    from assocmem.gpu.chunk_scan import chunk_elements

    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)  # noqa: E731
    k = torch.randn(1, n, 3, D, generator=g, dtype=torch.float64)
    return chunk_elements(k, torch.randn(1, n, 3, m, generator=g, dtype=torch.float64), r(1, n, 3) * 0.3,
                          r(1, n, 3) + 0.05, r(1, n, 3, D) * 2 - 1)


@pytest.mark.parametrize("n", range(1, 10))
def test_associative_scan_equals_the_sequential_fold(n):
    e = Element(*(t[0] for t in _elements(n, seed=n)))
    want = [Element(*(t[:1] for t in e))]
    for i in range(1, n):
        want.append(combine(want[-1], Element(*(t[i:i + 1] for t in e))))
    got = associative_scan(e)
    for j in range(n):
        for a, b in zip(got, want[j]):
            assert _close(a[j:j + 1], b, 1e-12)


def test_bad_arguments_name_themselves(make_inputs):
    x = make_inputs(1, 5, 1, 4, 4, seed=42)
    for kw, name in ((dict(chunk_size=0), "chunk_size"), (dict(chunk_size=129), "chunk_size"),
                     (dict(chunk_size=8.0), "chunk_size"), (dict(chunk_size=8, within="chunk"), "chunk_size"),
                     (dict(within="tokens"), "within"), (dict(scan_dtype=torch.float16), "scan_dtype")):
        with pytest.raises(ValueError, match=name):
            chunk_scan_bl(**x, **kw)
    x["r2"] = -x["r2"]
    with pytest.raises(ValueError, match="r2"):
        chunk_scan_bl(**x)


# -- fp32 through the interpreter: the kernels of the chunks' passes, the precision target ---------------
def _hard(B, T, H, D, m, decay, seed=0):
    """ℓ² = 0, r² = 1e-3: unit keys and queries, fp32 inputs; returns (fp32 inputs, float64 copy)."""
    g = torch.Generator().manual_seed(seed)
    nz = torch.nn.functional.normalize
    x = dict(q=nz(torch.randn(B, T, H, D, generator=g), dim=-1), k=nz(torch.randn(B, T, H, D, generator=g), dim=-1),
             v=torch.randn(B, T, H, m, generator=g), l2=torch.zeros(B, T, H), r2=torch.full((B, T, H), 1e-3),
             alpha=torch.sigmoid(torch.rand(B, T, H, D, generator=g) * 4 + 2) if decay else None)
    return x, {n: (t.double() if torch.is_tensor(t) else t) for n, t in x.items()}


@pytest.mark.parametrize("decay", [False, True])
def test_interpreted_fp32_within_ten_times_the_token_kernel(interpret, relerr, decay):
    x32, x64 = _hard(1, 192, 2, 16, 8, decay)
    ref, (_, P_ref) = naive_bl(**x64, output_final_state=True)
    o_f, (_, P_f) = fused_recurrent_bl(**x32, output_final_state=True)
    o_s, (_, P_s) = chunk_scan_bl(**x32, chunk_size=16, output_final_state=True)
    assert not torch.isnan(o_s).any() and o_s.dtype == torch.float32
    e_f, e_s = relerr(ref, o_f), relerr(ref, o_s)
    assert e_s < 1e-4 and e_s <= 10 * e_f, (e_s, e_f)
    assert relerr(P_ref, P_s) <= 10 * relerr(P_ref, P_f)


def test_interpreted_gradients_against_float64(interpret, relerr, make_inputs):
    """fp32 forward and backward on the kernel path (the inner op's Triton backward, NaN-poisoned
    buffers) against autograd through float64 naive_bl."""
    x = make_inputs(1, 24, 2, 4, 4, alpha=True, init=True, seed=5)
    w = torch.randn(1, 24, 2, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grads = []
    for fn, dt, kw in ((naive_bl, torch.float64, {}), (chunk_scan_bl, torch.float32, {"chunk_size": 8})):
        leaves = {n: x[n].to(dt).clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2", "alpha")}
        st0 = tuple(t.to(dt) for t in x["initial_state"])
        o, _ = fn(**leaves, initial_state=st0, **kw)
        (o.double() * w).sum().backward()
        grads.append({n: t.grad for n, t in leaves.items()})
    for n in grads[0]:
        assert relerr(grads[0][n], grads[1][n]) < 1e-4, n
        assert not torch.isnan(grads[1][n]).any()

