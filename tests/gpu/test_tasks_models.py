"""The baseline cores against the float64 numpy filter family, and the swap models."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from assocmem.gpu.tasks import models as Mo, recurrences as R
from assocmem.numerics.bl_filter import bl_filter

pytestmark = pytest.mark.gpu
f64 = torch.float64


def _inputs(B, T, H, D, m, seed=0, unit=True):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, T, H, D, generator=g, dtype=f64)
    if unit:
        k = k / k.norm(dim=-1, keepdim=True)
    q = torch.randn(B, T, H, D, generator=g, dtype=f64)
    v = torch.randn(B, T, H, m, generator=g, dtype=f64)
    l2 = 0.01 + 0.3 * torch.rand(B, T, H, generator=g, dtype=f64)
    r2 = 0.01 + 0.5 * torch.rand(B, T, H, generator=g, dtype=f64)
    return q, k, v, l2, r2, g


def _np(x):            # torch [B, T, H, ...] -> numpy [B, H, T, ...] (heads are batch axes there)
    return x.detach().transpose(1, 2).numpy()


def _close(out, ref, rtol=1e-12):
    out = out.detach().transpose(1, 2).numpy()
    assert np.abs(out - ref).max() <= rtol * max(1.0, np.abs(ref).max())


@given(T=st.integers(1, 40), D=st.integers(1, 6), m=st.integers(1, 4), C=st.integers(1, 17), seed=st.integers(0, 999))
@settings(max_examples=25)
def test_reset_core_is_numpy_reset_variant(T, D, m, C, seed):
    """Covariance reset = delta rule with η = ℓ²/(r² + ℓ²‖k‖²) (BL Prop. 2): chunked torch vs numpy."""
    q, k, v, l2, r2, _ = _inputs(2, T, 2, D, m, seed, unit=False)
    o, M = R.chunk_delta(q, k, v, R.reset_gain(l2, r2, k), chunk_size=C)
    tr = bl_filter(_np(k), _np(v), _np(q), l2=_np(l2), r2=_np(r2), variant="reset", lam=_np(l2))
    _close(o, tr.y)
    assert np.abs(M.numpy() - tr.M).max() <= 1e-12 * max(1, np.abs(tr.M).max())


def test_chunked_equals_sequential_for_every_chunk_size():
    q, k, v, l2, r2, g = _inputs(2, 37, 3, 5, 4, 1)
    beta = torch.rand(2, 37, 3, generator=g, dtype=f64)
    w = torch.randn(2, 37, 3, 5, generator=g, dtype=f64)
    ref, Mref = R.sequential_delta(q, k, v, beta, w=w)
    for C in (1, 2, 7, 16, 37, 64):
        o, M = R.chunk_delta(q, k, v, beta, w=w, chunk_size=C)
        assert torch.allclose(o, ref, rtol=1e-12, atol=1e-12) and torch.allclose(M, Mref, rtol=1e-12, atol=1e-12)


def test_delta_core_is_numpy_reset_with_matching_lambda():
    """DeltaNet's free gate β equals the reset family's η at r² = 1, λ = β/(1 − β) for unit keys."""
    q, k, v, _, _, g = _inputs(2, 29, 2, 4, 3, 2)
    beta = 0.05 + 0.9 * torch.rand(2, 29, 2, generator=g, dtype=f64)
    o, _ = R.chunk_delta(q, k, v, beta, chunk_size=8)
    lam = beta / (1 - beta)
    tr = bl_filter(_np(k), _np(v), _np(q), l2=0.0, r2=1.0, variant="reset", lam=_np(lam))
    _close(o, tr.y)


def test_linear_attention_core_is_numpy_linear_variant():
    q, k, v, l2, r2, _ = _inputs(2, 70, 2, 5, 3, 3, unit=False)
    omega = l2 / (l2 + r2)
    o, M = R.additive(q, k, v, omega=omega)
    tr = bl_filter(_np(k), _np(v), _np(q), variant="linear", omega=_np(omega))
    _close(o, tr.y)
    assert np.abs(M.numpy() - tr.M).max() <= 1e-12 * np.abs(tr.M).max()


@pytest.mark.parametrize("C", [1, 5, 16])
def test_gla_core_is_numpy_linear_variant_with_decay(C):
    q, k, v, _, _, g = _inputs(2, 41, 2, 6, 3, 4)
    # strong and weak decays; ratios exp(G_t − G_i) stay exact where e^{G_t}/e^{G_i} would underflow
    log_alpha = torch.log(0.02 + 0.97 * torch.rand(2, 41, 2, 6, generator=g, dtype=f64))
    o, M = R.additive(q, k, v, log_alpha=log_alpha, chunk_size=C)
    tr = bl_filter(_np(k), _np(v), _np(q), variant="linear", omega=1.0, alpha=_np(log_alpha.exp()))
    _close(o, tr.y)
    assert np.abs(M.numpy() - tr.M).max() <= 1e-12 * max(1, np.abs(tr.M).max())


@given(T=st.integers(1, 30), D=st.integers(1, 5), p0=st.floats(0.1, 3.0), seed=st.integers(0, 999))
@settings(max_examples=20)
def test_diag_bl_is_numpy_diag_variant(T, D, p0, seed):
    q, k, v, l2, r2, _ = _inputs(1, T, 2, D, 3, seed, unit=False)
    o = R.diag_bl(q, k, v, l2, r2, p0=p0, chunk_size=7)
    tr = bl_filter(_np(k), _np(v), _np(q), l2=_np(l2), r2=_np(r2), p0=p0, variant="diag")
    _close(o, tr.y)


def _diag_pass_and_grads(fn, k, l2, r2, P0, seed=5):
    """``(u, β, p_T)`` and the gradients of a random linear functional of them w.r.t. k, ℓ², r², P0."""
    g = torch.Generator().manual_seed(seed)
    leaves = [x.clone().requires_grad_(True) for x in (k, l2, r2, P0)]
    u, b, p = fn(*leaves[:3], P0=leaves[3])
    w = [torch.randn(x.shape, generator=g, dtype=x.dtype) for x in (u, b, p)]
    sum((x * y).sum() for x, y in zip((u, b, p), w)).backward()
    return [u.detach(), b.detach(), p.detach()] + [x.grad for x in leaves]


@given(T=st.integers(1, 40), D=st.integers(1, 20), H=st.integers(1, 3), seed=st.integers(0, 999))
@settings(max_examples=12)
def test_fused_diag_covariance_pass_equals_torch_form(T, D, H, seed):
    """The Triton covariance pass (interpreted here) = the token-by-token torch form: values and gradients."""
    pytest.importorskip("triton")
    from assocmem.gpu.tasks import diag_fused as DF

    _, k, _, l2, r2, g = _inputs(2, T, H, D, 1, seed, unit=seed % 2 == 0)
    P0 = 0.2 + torch.rand(2, H, D, generator=g, dtype=f64)
    ref = _diag_pass_and_grads(R.diag_covariance_pass, k, l2, r2, P0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        assert DF.use_fused(torch.device("cpu"))
        out = _diag_pass_and_grads(DF.diag_covariance_pass_fused, k, l2, r2, P0)
    for name, a, b in zip(("u", "beta", "p_T", "dk", "dl2", "dr2", "dP0"), out, ref):
        assert a.shape == b.shape, name
        assert float((a - b).abs().max()) <= 1e-12 * max(1.0, float(b.abs().max())), name


def test_fused_diag_in_the_mixer_fp32_and_expanded_keys(monkeypatch):
    """The diag mixer with its expanded (stride-0 head) keys: fused fp32 pass vs torch form, output and grads."""
    pytest.importorskip("triton")
    torch.manual_seed(3)
    mix = Mo.AddressMixer("diag", d_model=16, n_heads=4, head_dim=16)
    h = torch.randn(3, 23, 16)
    keys = torch.nn.functional.normalize(torch.randn(3, 23, 16), dim=-1)

    def run(interp):
        if interp:
            monkeypatch.setenv("TRITON_INTERPRET", "1")
        else:
            monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        mix.zero_grad()
        o = mix(h, keys)
        (o * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum().backward()
        return o.detach(), [p.grad.clone() for p in mix.parameters()]

    o_ref, g_ref = run(False)
    o_fus, g_fus = run(True)
    assert float((o_fus - o_ref).abs().max()) <= 1e-5 * float(o_ref.abs().max())
    for a, b in zip(g_fus, g_ref):
        assert float((a - b).abs().max()) <= 1e-4 * max(1e-6, float(b.abs().max()))


def test_diag_bl_dispatch(monkeypatch):
    """diag_bl runs the torch form on plain CPU and the kernels under TRITON_INTERPRET=1 (same numbers)."""
    pytest.importorskip("triton")
    from assocmem.gpu.tasks import diag_fused as DF

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not DF.use_fused(torch.device("cpu"))
    q, k, v, l2, r2, _ = _inputs(1, 13, 2, 5, 3, 7)
    a = R.diag_bl(q, k, v, l2, r2, p0=0.7)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    b = R.diag_bl(q, k, v, l2, r2, p0=0.7)
    c = R.diag_bl(q, k, v, l2, r2, p0=0.7, fused=False)
    assert float((a - b).abs().max()) <= 1e-12 and torch.equal(a, c)
    with pytest.raises(ValueError, match="l2, r2"):
        DF.diag_covariance_pass_fused(k, l2[:, :-1], r2)


@pytest.mark.parametrize("kind, variant", [("bl", "dense"), ("diag", "diag"), ("reset", "reset"),
                                           ("delta", "reset"), ("linear", "linear"), ("gla", "linear")])
def test_address_mixer_wiring_matches_numpy(kind, variant):
    """The mixer's gates → core → numpy filter with the same per-token parameters (float64)."""
    torch.manual_seed(0)
    mix = Mo.AddressMixer(kind, d_model=12, n_heads=2, head_dim=4, p0=1.5).double()
    with torch.no_grad():
        for p in mix.parameters():
            p.add_(0.3 * torch.randn_like(p))
    B, T = 2, 19
    h = torch.randn(B, T, 12, dtype=f64)
    keys = torch.nn.functional.normalize(torch.randn(B, T, 4, dtype=f64), dim=-1)
    k = keys[:, :, None].expand(B, T, 2, 4)
    v = mix.v_proj(h).reshape(B, T, 2, 4)
    with torch.no_grad():
        o = mix.core(k, k, v, h)
        if kind in ("bl", "diag", "reset", "linear"):
            a, r2 = mix.noise(h)
        kw = {}
        if kind in ("bl", "diag"):
            kw = dict(l2=_np(a), r2=_np(r2), p0=1.5)
        elif kind == "reset":
            kw = dict(l2=0.0, r2=_np(r2), lam=_np(a))
        elif kind == "delta":
            beta = torch.sigmoid(mix.gate(h))
            kw = dict(l2=0.0, r2=1.0, lam=_np(beta / (1 - beta)))
        elif kind == "linear":
            kw = dict(omega=_np(a / (a + r2)))
        else:
            alpha = torch.sigmoid(mix.gate(h)).pow(1 / 16).reshape(B, T, 2, 4)
            kw = dict(omega=1.0, alpha=_np(alpha))
        tr = bl_filter(_np(k), _np(v), _np(k), variant=variant, **kw)
    # BL on CPU runs naive_bl (float64 here); under TRITON_INTERPRET=1 the fp32 kernel
    import os
    interp = kind == "bl" and os.environ.get("TRITON_INTERPRET") == "1"
    _close(o, tr.y, rtol=2e-5 if interp else 1e-10)


def test_address_backbone_shapes_and_gradients():
    net = Mo.AddressBackbone(33, 16, "reset")
    x, keys = torch.randn(3, 11, 33), torch.nn.functional.normalize(torch.randn(3, 11, 16), dim=-1)
    out = net(x, keys)
    assert out.shape == (3, 11, 16)
    out.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())
    with pytest.raises(ValueError, match="mixer"):
        Mo.AddressMixer("mamba")


# ---------------------------------------------------------------------------
# DeltaFormer / Transformer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", Mo.KAPPAS)
def test_deltaformer_u_solves_the_recursion(kind):
    """U = (I + diag(β) A)^{-1} V equals u_t = v_t − β_t Σ_{i<t} κ1(k_i, k_t) u_i, token by token."""
    g = torch.Generator().manual_seed(5)
    B, H, T, d = 2, 2, 13, 4
    k = 0.5 * torch.randn(B, H, T, d, generator=g, dtype=f64)
    v = torch.randn(B, H, T, 3, generator=g, dtype=f64)
    beta = torch.rand(B, H, T, generator=g, dtype=f64)
    u = Mo.deltaformer_u(v, k, beta, kind)
    A = Mo.kappa1_matrix(k, kind)
    ref = []
    for t in range(T):
        acc = v[:, :, t].clone()
        for i in range(t):
            acc -= beta[:, :, t, None] * A[:, :, t, i, None] * ref[i]
        ref.append(acc)
    assert torch.allclose(u, torch.stack(ref, 2), rtol=1e-10, atol=1e-12)
    # κ1 itself, entry by entry (strictly lower triangular)
    s = float(k[0, 0, 1] @ k[0, 0, 7])
    expect = {"linear": s, "round2": round(s * 100) / 100, "relu": max(s, 0.0), "exp": math.exp(s / 2)}
    if kind in expect:
        assert abs(float(A[0, 0, 7, 1]) - expect[kind]) < 1e-12
    else:
        sc = (k[0, 0, :7] @ k[0, 0, 7]) / 2
        assert abs(float(A[0, 0, 7, 1]) - float(torch.softmax(sc, 0)[1])) < 1e-12
    assert float(A[..., 0, :].abs().sum()) == 0 and float(torch.triu(A).abs().sum()) == 0


def test_deltaformer_linear_is_deltanet():
    """κ1 = κ2 = linear, write value β v: the DeltaFormer is DeltaNet (AM p.13)."""
    q, k, v, _, _, g = _inputs(2, 23, 1, 4, 3, 6, unit=False)
    beta = torch.rand(2, 23, 1, generator=g, dtype=f64)
    ref, _ = R.sequential_delta(q, k, v, beta)
    kh, qh, vh, bh = k.transpose(1, 2), q.transpose(1, 2), v.transpose(1, 2), beta.transpose(1, 2)
    u = Mo.deltaformer_u(bh[..., None] * vh, kh, bh, "linear")
    o = torch.tril(qh @ kh.transpose(-1, -2)) @ u
    assert torch.allclose(o.transpose(1, 2), ref, rtol=1e-11, atol=1e-12)


def test_round_kernel_straight_through_gradient():
    k = torch.tensor([[[[0.3, 0.4], [0.123, 0.456], [0.2, -0.7]]]], dtype=f64, requires_grad=True)
    A = Mo.kappa1_matrix(k, "round2")
    assert float(A.detach()[0, 0, 1, 0]) == round(0.3 * 0.123 + 0.4 * 0.456, 2)
    A.sum().backward()
    assert float(k.grad.abs().sum()) > 0          # the rounding passes its gradient straight through


def test_causal_softmax_and_rope():
    s = torch.randn(3, 6, 6)
    w = Mo.causal_softmax_weights(s, strict=False)
    assert torch.allclose(w.sum(-1), torch.ones(3, 6)) and float(torch.triu(w, 1).abs().sum()) == 0
    ws = Mo.causal_softmax_weights(s, strict=True)
    assert float(ws[:, 0].abs().sum()) == 0 and torch.allclose(ws[:, 1:].sum(-1), torch.ones(3, 5))
    x = torch.randn(2, 3, 9, 8)
    assert torch.allclose(Mo.rope(x).norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    # relative: <rope(q)_t, rope(k)_s> depends on t − s only
    q1, k1 = torch.randn(8), torch.randn(8)
    Q = Mo.rope(q1.expand(1, 1, 9, 8).contiguous())[0, 0]
    K = Mo.rope(k1.expand(1, 1, 9, 8).contiguous())[0, 0]
    assert abs(float(Q[5] @ K[3]) - float(Q[4] @ K[2])) < 1e-4


@pytest.mark.parametrize("name", ["transformer-2", "deltaformer-round2", "deltaformer-softmax"])
def test_swap_models_are_causal(name):
    torch.manual_seed(0)
    net = Mo.swap_model(name).eval()
    tok = torch.randint(0, 10, (2, 16))
    tok2 = tok.clone()
    tok2[:, 9:] = (tok2[:, 9:] + 3) % 10
    with torch.no_grad():
        a, b = net(tok), net(tok2)
    assert a.shape == (2, 16, 5)
    assert torch.allclose(a[:, :9], b[:, :9], atol=1e-5) and not torch.allclose(a[:, 9:], b[:, 9:])
    with pytest.raises(ValueError, match="model"):
        Mo.swap_model("deltaformer-cubic")


def test_fixed_key_swap_model_tracks_exactly_on_orthonormal_keys():
    """AM Theorem 1's idealised case: orthonormal keys, linear κ1 and read → exact tracking."""
    from assocmem.gpu.tasks import data as Dt

    n, d = 6, 8
    net = Mo.FixedKeySwapModel(n, d, kappa1="linear", kappa2="linear").double()
    net.K = torch.eye(d, dtype=f64)[:n]
    net.E = torch.eye(d, dtype=f64)[torch.randperm(d)[:n]]
    with torch.no_grad():
        net.q.copy_(net.K[0])
    b = Dt.swap_stress_batch(4, n=n, length=40, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        o = net.read(b.pos_a, b.pos_b, b.elem)
    lab = b.labels[:, n:]
    assert torch.allclose(o[:, n:], net.E[lab], atol=1e-10)
    # the round kernel maps the exact integers to themselves: the same
    net.kappa1 = "round2"
    with torch.no_grad():
        assert torch.allclose(net.read(b.pos_a, b.pos_b, b.elem)[:, n:], net.E[lab], atol=1e-10)
