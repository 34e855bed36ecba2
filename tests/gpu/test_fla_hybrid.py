"""gdn_backend=hybrid: the torch stand-in for fla 0.6.0's gated chunk_bwd_dqkwg kernel (the one fla
refuses on Hopper with Triton 3.6) against autograd of the chunk's forward, written out here."""
import math

import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu.tasks.fla_hybrid import chunk_bwd_dqkwg_torch  # noqa: E402
from assocmem.gpu.tasks import fla_hybrid as H  # noqa: E402

pytestmark = pytest.mark.gpu


def _reference(q, k, v, do, h, dh, w, dv, gnat, scale, BT):
    """dF/d(q, k, w, g) for F = Σ_c <do_c, o_c> + <dh_c, h_{c+1}> + <dv_c, −w_c h_c>, each chunk's
    state h_c and corrected values v fixed, g the within-chunk cumulative gate (natural log)."""
    q, k, w, gnat = (x.detach().double().requires_grad_() for x in (q, k, w, gnat))
    B, T, H, K = k.shape
    HV = v.shape[2]
    rep = HV // H
    F = 0.0
    for c in range(-(-T // BT)):
        s = slice(c * BT, min(T, c * BT + BT))
        n = s.stop - s.start
        for b in range(B):
            for j in range(HV):
                qq, kk = q[b, s, j // rep], k[b, s, j // rep]
                gg = gnat[b, s, j]
                hc, vv = h[b, c, j].double(), v[b, s, j].double()
                mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
                A = torch.where(mask, (qq @ kk.T) * torch.exp(gg[:, None] - gg[None, :]), 0.0)
                o = scale * ((qq * torch.exp(gg)[:, None]) @ hc + A @ vv)
                h_next = torch.exp(gg[-1]) * hc + (kk * torch.exp(gg[-1] - gg)[:, None]).T @ vv
                F = F + (do[b, s, j].double() * o).sum() + (dh[b, c, j].double() * h_next).sum() \
                    + (dv[b, s, j].double() * (-(w[b, s, j] @ hc))).sum()
    F.backward()
    return q.grad, k.grad, w.grad, gnat.grad


@pytest.mark.parametrize("T,BT,H,HV", [(32, 16, 2, 2), (40, 16, 1, 2)])   # a partial last chunk; GQA
def test_dqkwg_equals_autograd_of_the_chunk_forward(T, BT, H, HV):
    g = torch.Generator().manual_seed(T + H)
    B, K, V = 2, 8, 6
    NT = -(-T // BT)
    rn = lambda *s: torch.randn(*s, generator=g)                # noqa: E731
    q, k = rn(B, T, H, K) / math.sqrt(K), rn(B, T, H, K) / math.sqrt(K)
    v, do, dv, w = rn(B, T, HV, V), rn(B, T, HV, V), rn(B, T, HV, V), rn(B, T, HV, K)
    h, dh = rn(B, NT, HV, K, V), rn(B, NT, HV, K, V)
    gate = -torch.rand(B, T, HV, generator=g) * 0.3              # log decays per token
    gnat = torch.cat([gate[:, c * BT:(c + 1) * BT].cumsum(1) for c in range(NT)], 1)   # within-chunk cumsum
    scale = K ** -0.5
    got = chunk_bwd_dqkwg_torch(q, k, v, do, h, dh, w=w, g=gnat / math.log(2.0), dv=dv, scale=scale,
                                chunk_size=BT)
    want = _reference(q, k, v, do, h, dh, w, dv, gnat, scale, BT)
    for name, a, b in zip(("dq", "dk", "dw", "dg"), got, want):
        assert a.shape == b.shape, name
        err = float((a.double() - b).norm() / b.norm())
        assert err < 1e-5, (name, err)
    assert got[3].dtype == torch.float32 and got[0].dtype == q.dtype
    # fla's Triton kernels that read dw and dg next assume [B, T, ...] memory: a sliced view (a
    # partial last chunk) was read wrongly on the H200
    assert all(x.is_contiguous() for x in got), [x.is_contiguous() for x in got]
    # simple GLA's call (the Mamba2 core, fla_mamba2): no w, no dv; dq, dk, dg are the same quantities
    sg = chunk_bwd_dqkwg_torch(q, k, v, do, h, dh, g=gnat / math.log(2.0), scale=scale, chunk_size=BT)
    assert sg[2] is None
    for name, a, b in zip(("dq", "dk", "dg"), (sg[0], sg[1], sg[3]), (want[0], want[1], want[3])):
        assert float((a.double() - b).norm() / b.norm()) < 1e-5, name


@pytest.mark.parametrize("T", (40, 48))
def test_state_v_first_takes_the_transposed_states(T):
    """fla's GatedDeltaNet layer keeps its states [V, K] (state_v_first): the same answer as [K, V]."""
    g = torch.Generator().manual_seed(T)
    B, H, K, V, BT = 2, 2, 8, 6, 16
    NT = -(-T // BT)
    rn = lambda *s: torch.randn(*s, generator=g)                # noqa: E731
    q, k, v, do, dv, w = rn(B, T, H, K), rn(B, T, H, K), rn(B, T, H, V), rn(B, T, H, V), rn(B, T, H, V), rn(B, T, H, K)
    h, dh = rn(B, NT, H, K, V), rn(B, NT, H, K, V)
    gl = torch.cat([(-torch.rand(B, T, H, generator=g) * 0.3)[:, c * BT:(c + 1) * BT].cumsum(1) for c in range(NT)], 1)
    a = chunk_bwd_dqkwg_torch(q, k, v, do, h, dh, w=w, g=gl, dv=dv, chunk_size=BT)
    b = chunk_bwd_dqkwg_torch(q, k, v, do, h.transpose(-1, -2).contiguous(), dh.transpose(-1, -2).contiguous(),
                              w=w, g=gl, dv=dv, chunk_size=BT, state_v_first=True)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)


def test_refuses_what_it_does_not_cover():
    x = torch.zeros(1, 16, 1, 4)
    with pytest.raises(NotImplementedError):
        chunk_bwd_dqkwg_torch(x, x, x, x, torch.zeros(1, 1, 1, 4, 4), torch.zeros(1, 1, 1, 4, 4), g=None)


# ---------------------------------------------------------------------------
# the self-check gdn_backend="auto" runs before it trusts the hybrid on a GPU
# ---------------------------------------------------------------------------
def _naive_chunk(scale_dq=1.0):
    from fla.ops.gated_delta_rule.naive import naive_chunk_gated_delta_rule

    def op(q, k, v, g, beta, state_v_first=False):   # fla's chunked torch reference, optionally broken in q
        assert state_v_first                         # the check exercises the layer's [V, K] state layout
        return naive_chunk_gated_delta_rule(q * scale_dq, k, v, g, beta)
    return op


@pytest.mark.parametrize("scale, passed", ((1.0, True), (1.01, False)))
def test_self_check_passes_a_correct_core_and_fails_a_slightly_wrong_one(monkeypatch, scale, passed):
    """On a CPU the check's comparison is exercised with fla's chunked torch reference standing in
    for the Triton op: it passes as it is and fails with q off by 1 %."""
    import fla.ops.gated_delta_rule as gdr

    monkeypatch.setattr(gdr, "chunk_gated_delta_rule", _naive_chunk(scale))
    monkeypatch.setattr(H, "_CHECKED", {})
    res = H.self_check("cpu")
    assert res["passed"] is passed, res
    assert (res["max_rel_err"] <= res["tol"]) is passed
    assert H.self_check("cpu") is res              # once per process and device


def test_auto_takes_the_hybrid_only_where_refused_and_only_after_its_check(monkeypatch):
    from assocmem.gpu.tasks import fla_cpu

    monkeypatch.setattr(fla_cpu, "fla_refuses_gated_backward", lambda: True)
    for ok, want in ((True, "hybrid"), (False, "torch")):
        monkeypatch.setattr(H, "self_check", lambda device, ok=ok: {"passed": ok})
        assert fla_cpu.gdn_backend("auto", "cuda") == want
    assert fla_cpu.gdn_backend("auto") == "torch"          # nothing to check on: the reference
    assert fla_cpu.gdn_backend("auto", "cpu") == "torch"
    monkeypatch.setattr(fla_cpu, "fla_refuses_gated_backward", lambda: False)
    assert fla_cpu.gdn_backend("auto", "cuda") == "triton"


def test_the_float64_recursion_agrees_with_fla_own_naive_op():
    """The self-check's reference and fla's token-by-token op (fp32 inside) are written apart: they
    agree to fp32 precision, and a changed gate moves them apart."""
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

    g = torch.Generator().manual_seed(3)
    B, T, Hh, K, V = 2, 37, 2, 8, 5
    q, k = (torch.nn.functional.normalize(torch.randn(B, T, Hh, K, generator=g), dim=-1) for _ in range(2))
    v, gate, beta = torch.randn(B, T, Hh, V, generator=g), -torch.rand(B, T, Hh, generator=g), torch.rand(B, T, Hh, generator=g)
    ref = H.gated_delta_rule_f64(q, k, v, gate, beta, K ** -0.5)
    fla = naive_recurrent_gated_delta_rule(q, k, v, beta, gate)[0]
    assert ref.dtype == torch.float64
    torch.testing.assert_close(fla.double(), ref, rtol=1e-5, atol=1e-5)
    assert (H.gated_delta_rule_f64(q, k, v, 0.9 * gate, beta, K ** -0.5) - ref).abs().max() > 1e-3
