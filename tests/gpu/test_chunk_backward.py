"""The backward of the BL ops: the value-block reduction of the token-by-token Triton
backward (interpreter), the chunked backward's torch reference (``chunk_backward_reference.py``
beside this file) and its Triton kernels.

References are autograd through float64 ``naive_bl`` / ``chunk_bl_torch`` (independent
of the code under test: the chunked backward never calls autograd).
"""
import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu import ChunkConfig, FusedConfig, chunk_bl, fused_recurrent_bl, naive_bl  # noqa: E402

pytestmark = pytest.mark.gpu

NAMES = ("q", "k", "v", "l2", "r2", "alpha")


def _autograd(fn, x, w, **kw):
    """Gradients of ``Σ o⊙w + Σ M_T² + Σ P_T²`` with respect to every input (the initial
    covariance's gradient symmetrised)."""
    leaves = {n: x[n].clone().requires_grad_(True) for n in NAMES if x.get(n) is not None}
    st0 = None
    if x.get("initial_state") is not None:
        st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
    o, (M, P) = fn(**leaves, initial_state=st0, output_final_state=True, **kw)
    ((o * w).sum() + (M * M).sum() + (P ** 2).sum()).backward()
    out = {n: t.grad for n, t in leaves.items()}
    if st0 is not None:
        gP = st0[1].grad
        out["M0"], out["P0"] = st0[0].grad, 0.5 * (gP + gP.transpose(-1, -2))
    return out


# --------------------------------------------------------------------------
# stage 0: the token-by-token backward's value blocks add into one buffer
# --------------------------------------------------------------------------
@pytest.mark.parametrize("G", [1, 2])
def test_atomic_value_block_reduction_equals_partials(interpret, make_inputs, relerr, G):
    """``bwd_reduce="atomic"`` (default: one ``[B, T, H, D]`` buffer per gradient) and
    ``"partials"`` (``[NV, B, T, H, D]`` summed afterwards) give the same gradients, both equal
    to float64 autograd; ``BV = 2`` forces several value blocks per group."""
    x = make_inputs(1, 19, 2, 4, 8, G, alpha=True, init=True, seed=11 + G)
    w = torch.randn(1, 19, 2, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref = _autograd(naive_bl, x, w)
    got = {r: _autograd(fused_recurrent_bl, x, w, config=FusedConfig(BV=2, bwd_reduce=r))
           for r in ("atomic", "partials")}
    for n in ref:
        assert relerr(got["partials"][n], got["atomic"][n]) < 1e-6, n
        assert relerr(ref[n], got["atomic"][n]) < 1e-5, n
    # the chunked op passes the choice through to the same backward
    gc = _autograd(chunk_bl, x, w, chunk_size=16, backward="recurrent", config=ChunkConfig(bwd_reduce="partials"))
    for n in ref:
        assert relerr(ref[n], gc[n]) < 1e-5, n


# --------------------------------------------------------------------------
# stage 1: the chunked backward in torch ops (float64), against autograd
# --------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from assocmem.gpu.naive import chunk_bl_torch  # noqa: E402
from chunk_backward_reference import chunk_bl_backward_torch, chunk_bl_torch_grad  # noqa: E402  (tests/gpu/)

F64 = 1e-11           # relative RMS error allowed in float64 (measured ≤ 3e-15)


def _decays(x, kind, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if kind == "none":
        x["alpha"] = None
    elif kind == "strong":
        x["alpha"] = x["alpha"] * 0.4                                   # 0.2 … 0.4
    elif kind == "weak":
        x["alpha"] = 1.0 - 0.01 * torch.rand(x["alpha"].shape, generator=gen, dtype=torch.float64)
    elif kind == "signed":
        x["alpha"] = x["alpha"] * torch.sign(torch.randn(x["alpha"].shape, generator=gen, dtype=torch.float64))
    return x


CASES = [  # (B, T, H, D, m, G, C, decay, init)
    (1, 1, 1, 3, 2, 1, 16, "mid", False),        # one token
    (1, 16, 1, 4, 4, 1, 16, "mid", True),        # exactly one chunk
    (1, 17, 2, 5, 3, 1, 16, "strong", True),     # a boundary and a one-token chunk, odd sizes
    (2, 37, 1, 4, 6, 2, 16, "weak", True),       # grouped noise, three chunks
    (1, 45, 1, 6, 4, 1, 32, "none", False),      # identity dynamics, the prior start
    (1, 70, 1, 4, 8, 4, 64, "signed", True),     # negative decays, C = 64 and a partial chunk, G = 4
    (1, 33, 2, 8, 8, 2, 32, "strong", False),
]


@pytest.mark.parametrize("B,T,H,D,m,G,C,decay,init", CASES)
def test_chunked_backward_equals_float64_autograd(make_inputs, relerr, B, T, H, D, m, G, C, decay, init):
    """Every input's gradient (the final-state cotangents included) equals autograd through the
    token-by-token ``naive_bl`` and through the chunked forward ``chunk_bl_torch``."""
    x = _decays(make_inputs(B, T, H, D, m, G, alpha=decay != "none", init=init, seed=T + D), decay, T)
    w = torch.randn(B, T, H, m, generator=torch.Generator().manual_seed(T), dtype=torch.float64)
    ref = _autograd(naive_bl, x, w)
    ref_c = _autograd(chunk_bl_torch, x, w, chunk_size=C)
    got = _autograd(chunk_bl_torch_grad, x, w, chunk_size=C)
    assert set(got) == set(ref)
    for n in ref:
        assert relerr(ref[n], got[n]) < F64, n
        assert relerr(ref_c[n], got[n]) < F64, n


def test_chunked_backward_log_decay_and_output_only(make_inputs, relerr):
    """The log-decay ``g=`` and a loss of the outputs alone (no final-state cotangents)."""
    x = make_inputs(1, 40, 2, 5, 4, alpha=True, init=True, seed=9)
    g = torch.log(x.pop("alpha")).requires_grad_(True)
    w = torch.randn(1, 40, 2, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    grads = []
    for fn, kw in ((naive_bl, {}), (chunk_bl_torch_grad, {"chunk_size": 16})):
        leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2")}
        gg = g.detach().clone().requires_grad_(True)
        st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
        o, fin = fn(**leaves, g=gg, initial_state=st0, **kw)
        assert fin is None
        (o * w).sum().backward()
        grads.append([t.grad for t in leaves.values()] + [gg.grad, st0[0].grad, st0[1].grad + st0[1].grad.mT])
    for ref, got in zip(*grads):
        assert relerr(ref, got) < F64


def test_chunked_backward_function_contract(make_inputs, relerr):
    """The raw function: zero cotangents given as None, shapes, the symmetric ``dP0``, and
    ``chunk_size`` checked."""
    x = make_inputs(1, 20, 1, 4, 4, 2, alpha=True, init=True, seed=4)
    o, (MT, PT), (u, beta, e) = chunk_bl_torch(**x, chunk_size=16, output_final_state=True, return_saved=True)
    assert u.shape == (1, 20, 1, 2, 4) and beta.shape == (1, 20, 1, 2) and e.shape == (1, 20, 1, 4)
    M0, P0 = x["initial_state"]
    do = torch.randn_like(o)
    out = chunk_bl_backward_torch(x["q"], x["k"], x["l2"], x["alpha"], M0, P0, u, beta, e, do, None, None, 16)
    dq, dk, dv, dl2, dr2, dg, dM0, dP0 = out
    assert dq.shape == x["q"].shape and dv.shape == x["v"].shape and dr2.shape == x["r2"].shape
    assert dg.shape == x["alpha"].shape and dM0.shape == M0.shape and dP0.shape == P0.shape
    assert bool((dP0 == dP0.transpose(-1, -2)).all())
    leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "v", "r2")}
    o2, _ = naive_bl(**{**x, **leaves})
    (o2 * do).sum().backward()
    assert relerr(leaves["q"].grad, dq) < F64 and relerr(leaves["v"].grad, dv) < F64
    assert relerr(leaves["r2"].grad, dr2) < F64
    none = chunk_bl_backward_torch(x["q"], x["k"], x["l2"], x["alpha"], M0, P0, u, beta, e, None, None, None, 16,
                                   need_dg=False)
    assert none[5] is None and all(float(t.abs().max()) == 0.0 for t in none if t is not None)
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_bl_backward_torch(x["q"], x["k"], x["l2"], None, M0, P0, u, beta, e, do, None, None, 24)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), T=st.integers(1, 50), C=st.sampled_from([16, 32]),
       D=st.integers(1, 6), G=st.sampled_from([1, 2]), decay=st.sampled_from(["none", "mid", "strong", "signed"]),
       init=st.booleans())
def test_chunked_backward_property(make_inputs, relerr, seed, T, C, D, G, decay, init):
    x = _decays(make_inputs(1, T, 1, D, 2 * G, G, alpha=decay != "none", init=init, seed=seed), decay, seed)
    w = torch.randn(1, T, 1, 2 * G, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    ref = _autograd(naive_bl, x, w)
    got = _autograd(chunk_bl_torch_grad, x, w, chunk_size=C)
    for n in ref:
        assert relerr(ref[n], got[n]) < 1e-9, n


# --------------------------------------------------------------------------
# stage 2: the chunked backward's Triton kernels (interpreter), against float64 autograd
# --------------------------------------------------------------------------
FP32 = 1e-5           # relative RMS error allowed for fp32 kernels (measured 1e-7 … 1e-6)

KCASES = [  # (B, T, H, D, m, G, C, decay, init, bwd_BV)
    (1, 5, 1, 3, 2, 1, 16, "none", False, None),        # one partial chunk, no decay, prior start
    (1, 33, 2, 5, 4, 1, 16, "mid", True, None),         # two boundaries, a one-token chunk, D padded
    (1, 40, 1, 8, 8, 2, 16, "strong", True, None),      # grouped noise, strong decays (Σ|log α| ≈ 24 a chunk)
    (1, 45, 1, 4, 6, 1, 32, "weak", False, None),
    (1, 70, 1, 4, 8, 2, 64, "weak", True, None),        # C = 64, a partial chunk
    (1, 20, 1, 4, 64, 2, 16, "mid", True, 16),          # two value blocks per group: atomics across blocks
    (1, 40, 1, 64, 64, 1, 16, "mid", True, None),       # the device's tiles at S1 (BD = BV = 64)
    (1, 21, 1, 100, 8, 1, 16, "mid", True, None),       # BD = 128 (padded): H read back in row blocks
    (1, 18, 1, 128, 8, 1, 16, "none", False, None),     # S2's key width, no decay
]


def _calls(monkeypatch):
    import assocmem.gpu.chunk as ch

    calls = []
    orig = ch._chunk_backward
    monkeypatch.setattr(ch, "_chunk_backward", lambda *a, **k: (calls.append(1), orig(*a, **k))[1])
    return calls


@pytest.mark.parametrize("B,T,H,D,m,G,C,decay,init,BV", KCASES)
def test_chunked_backward_kernels_equal_float64_autograd(interpret, monkeypatch, make_inputs, relerr,
                                                         B, T, H, D, m, G, C, decay, init, BV):
    """``chunk_bl(backward="chunked")``, every kernel buffer NaN-poisoned: every input's gradient
    (final-state cotangents included) against autograd through float64 ``naive_bl``."""
    calls = _calls(monkeypatch)
    x = _decays(make_inputs(B, T, H, D, m, G, alpha=decay != "none", init=init, seed=T + D), decay, T)
    w = torch.randn(B, T, H, m, generator=torch.Generator().manual_seed(T), dtype=torch.float64)
    ref = _autograd(naive_bl, x, w)
    got = _autograd(chunk_bl, x, w, chunk_size=C, backward="chunked", config=ChunkConfig(bwd_BV=BV))
    assert calls == [1]                                    # the chunked kernels ran, not the fallback
    # fp32 error grows with C (the factor N = L⁻¹ of a longer chunk is less well conditioned):
    # on the weak-decay C = 64 case 1.1e-5 for dα and dP0 (token-by-token backward: 3.4e-6, 3e-7)
    tol = FP32 if C < 64 else 5e-5
    for n in ref:
        assert not torch.isnan(got[n]).any(), n
        assert relerr(ref[n], got[n]) < tol, n


def test_chunked_backward_kernels_log_decay_bf16_and_fallback(interpret, monkeypatch, make_inputs, relerr):
    """The log-decay ``g=``, bf16 inputs, and the fallback to the token-by-token backward where the
    decays leave the quotient form's range (a zero decay): still exact, the kernels not called."""
    calls = _calls(monkeypatch)
    x = make_inputs(1, 24, 1, 6, 4, alpha=True, init=True, seed=21)
    g = torch.log(x.pop("alpha"))
    w = torch.randn(1, 24, 1, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    grads = []
    for fn, kw in ((naive_bl, {}), (chunk_bl, {"chunk_size": 16, "backward": "chunked"})):
        leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2")}
        gg = g.clone().requires_grad_(True)
        o, _ = fn(**leaves, g=gg, initial_state=x["initial_state"], **kw)
        (o * w).sum().backward()
        grads.append([t.grad for t in leaves.values()] + [gg.grad])
    for ref, got in zip(*grads):
        assert relerr(ref, got) < FP32
    assert calls == [1]
    xb = {n: (t.to(torch.bfloat16) if n in ("q", "k", "v") else t) for n, t in x.items()}
    qb = xb["q"].clone().requires_grad_(True)
    o, _ = chunk_bl(**{**xb, "q": qb}, g=g, chunk_size=16, backward="chunked")
    o.float().sum().backward()
    assert qb.grad.dtype == torch.bfloat16 and not torch.isnan(qb.grad.float()).any()
    assert calls == [1, 1]
    # a zero decay: the guard sends the backward to the token-by-token kernels
    x = make_inputs(1, 20, 1, 4, 4, alpha=True, seed=22)
    x["alpha"][:, 7] = 0.0
    ref = _autograd_noinit(naive_bl, x)
    got = _autograd_noinit(chunk_bl, x, chunk_size=16, backward="chunked")
    for n in ref:
        assert relerr(ref[n], got[n]) < FP32, n
    assert calls == [1, 1]                                 # not called for the zero decay


def _autograd_noinit(fn, x, **kw):
    leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2")}
    o, _ = fn(**leaves, alpha=x["alpha"], **kw)
    (o * o).sum().backward()
    return {n: t.grad for n, t in leaves.items()}


def test_chunked_backward_bad_arguments(interpret, make_inputs):
    x = make_inputs(1, 4, 1, 4, 4, alpha=True, seed=1)
    with pytest.raises(ValueError, match="backward"):
        chunk_bl(**x, chunk_size=16, backward="sideways")
    for bad in ({"bwd_BV": 8}, {"bwd_warps": 3}, {"bwd_precision": "tf32"}):
        with pytest.raises(ValueError, match=f"config.{next(iter(bad))}"):
            ChunkConfig(**bad)


def test_default_backward_choice(interpret, monkeypatch, make_inputs, relerr):
    """``backward="auto"`` (default) takes the chunked kernels at D <= 64, C <= 32 and the
    token-by-token ones at C = 64; ``"recurrent"`` forces the latter; all equal float64 autograd."""
    from assocmem.gpu.chunk import _use_chunked_backward

    assert _use_chunked_backward("auto", 64, 16) and _use_chunked_backward("auto", 64, 32)
    assert not _use_chunked_backward("auto", 128, 16) and not _use_chunked_backward("auto", 64, 64)
    assert _use_chunked_backward("chunked", 128, 64)
    assert not _use_chunked_backward("recurrent", 16, 16)
    calls = _calls(monkeypatch)
    x = make_inputs(1, 19, 1, 6, 4, alpha=True, seed=31)
    ref = _autograd_noinit(naive_bl, x)
    for C, backward, n_calls in ((16, "auto", 1), (16, "recurrent", 1), (64, "auto", 1), (32, "auto", 2)):
        got = _autograd_noinit(chunk_bl, x, chunk_size=C, backward=backward)
        for n in ref:
            assert relerr(ref[n], got[n]) < FP32, (C, backward, n)
        assert len(calls) == n_calls, (C, backward)
