"""Mamba2's scan as fla's simple GLA (``gpu/tasks/fla_mamba2.py``): on a CPU, the layer's forward with
only its SSD replaced equals fla's own ``torch_forward`` (output and every gradient), the self-check
passes a correct scan and fails a slightly wrong one, and the mixer takes the core only where that
check passed; on a GPU, fla's Triton scan passes the check and the mixer matches its CPU path."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fla.layers", reason="flash-linear-attention (gpu extra) is not installed")

from assocmem.gpu.tasks import fla_mamba2 as FM, mqar_models as MM  # noqa: E402
from assocmem.gpu.tasks.fla_cpu import torch_ops  # noqa: E402

pytestmark = pytest.mark.gpu


def _mixer(d_model, n_heads, seed=0):
    torch.manual_seed(seed)
    mx = MM.Mamba2Mixer(d_model, n_heads=n_heads).double()
    with torch.no_grad():                       # away from the initial values, so that every term matters
        for p in mx.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return mx


@pytest.mark.parametrize("d_model, n_heads, B, T", [(16, 4, 2, 7), (32, 4, 1, 70), (16, 2, 2, 130)])
def test_forward_with_the_scan_replaced_equals_the_layers_own(d_model, n_heads, B, T):
    mx = _mixer(d_model, n_heads)
    L = mx.layer
    x = torch.randn(B, T, d_model, dtype=torch.float64, requires_grad=True)
    w = torch.randn(B, T, d_model, dtype=torch.float64)
    with torch_ops(L):
        ref = L.torch_forward(x)[0]
        got = FM.forward(L, x, scan=FM.simple_gla_f64)
    # fla's torch_forward computes its scan in fp32 even for a float64 layer (its .float() casts), ours
    # in float64 here: the two agree to fp32 rounding; a wrong term would be off by O(1)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    with torch_ops(L):                            # and the comparison sees a decay 2 % off
        off = FM.forward(L, x, scan=lambda q, k, v, g: FM.simple_gla_f64(q, k, v, 1.02 * g))
    assert not torch.allclose(off, ref, rtol=1e-5, atol=1e-6)
    params = [x] + list(mx.parameters())
    g_ref = torch.autograd.grad((ref * w).sum(), params)
    g_got = torch.autograd.grad((got * w).sum(), params)
    names = ["x"] + [n for n, _ in mx.named_parameters()]
    for n, a, b in zip(names, g_got, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=n)


def test_the_f64_scan_is_the_ssd_recursion():
    """:func:`simple_gla_f64` against the SSD written out: ``h = e^{AΔ} h + B (Δx)ᵀ``, ``y = Cᵀ h``."""
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 5, 2, 3, generator=gen), torch.randn(1, 5, 2, 3, generator=gen)
    v, g = torch.randn(1, 5, 2, 4, generator=gen), -torch.rand(1, 5, 2, generator=gen)
    h = torch.zeros(2, 3, 4, dtype=torch.float64)
    ys = []
    for t in range(5):
        h = h * g[0, t].double().exp()[:, None, None] + k[0, t].double()[:, :, None] * v[0, t].double()[:, None, :]
        ys.append(torch.einsum("hk,hkv->hv", q[0, t].double(), h))
    torch.testing.assert_close(FM.simple_gla_f64(q, k, v, g)[0], torch.stack(ys), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale, passed", ((1.0, True), (1.01, False)))
def test_self_check_passes_a_correct_scan_and_fails_a_slightly_wrong_one(monkeypatch, scale, passed):
    naive = FM._cpu_scan
    monkeypatch.setattr(FM, "_cpu_scan", lambda q, k, v, g: naive(q, k, v * scale, g))
    monkeypatch.setattr(FM, "_CHECKED", {})
    res = FM.self_check("cpu")
    assert res["passed"] is passed, res
    assert set(res["errors"]) == {"o", "dq", "dk", "dv", "dg"} and res["tol"] == FM.SELF_CHECK_TOL
    assert FM.self_check("cpu") is res                       # once per process and device


def test_self_check_fails_a_scan_right_only_on_mild_decays(monkeypatch):
    """A scan that clips the log-decay at -0.5 is exact on the first regime (decays to -0.2) and wrong on
    Mamba2's own (to -2): the check fails it and names the regime."""
    naive = FM._cpu_scan
    monkeypatch.setattr(FM, "_cpu_scan", lambda q, k, v, g: naive(q, k, v, g.clamp_min(-0.5)))
    monkeypatch.setattr(FM, "_CHECKED", {})
    res = FM.self_check("cpu")
    assert res["passed"] is False, res
    assert max(res["regimes"]["mild"].values()) <= res["tol"] < max(res["regimes"]["mamba2"].values()), res
    assert [r[0] for r in FM.SELF_CHECK_REGIMES] == ["mild", "mamba2"]


def test_the_mixer_takes_the_core_only_on_a_gpu_where_the_check_passed(monkeypatch):
    mx = MM.Mamba2Mixer(16, n_heads=4)
    assert FM.core_ok("cpu") is False
    assert mx._gpu_backend(torch.device("cpu")) == "triton"
    for ok, want in ((True, "simple_gla"), (False, "triton")):
        monkeypatch.setattr(FM, "core_ok", lambda device, ok=ok: ok)
        assert mx._gpu_backend(torch.device("cuda")) == want
    assert "torch on CPU" in mx._core()                      # a CPU model still runs the layer's own path
    # protocol mamba2_core=layer: the layer's own path on every GPU, the check passed or not
    monkeypatch.setattr(FM, "core_ok", lambda device: True)
    assert MM.Mamba2Mixer(16, n_heads=4, core="layer")._gpu_backend(torch.device("cuda")) == "triton"
    with pytest.raises(ValueError, match="core must be one of auto, layer"):
        MM.Mamba2Mixer(16, n_heads=4, core="fast")


def test_the_protocol_option_reaches_the_mixer_and_applies_to_mamba2_only():
    from assocmem.gpu.tasks import train as T

    pr = T.resolve_protocol("mqar", {"variant": "update", "mamba2_core": "layer"}, model="mamba2")
    model = T.build_model("mqar", "mamba2", pr)
    assert [m.core for m in model.modules() if isinstance(m, MM.Mamba2Mixer)] == ["layer", "layer"]
    assert T.protocol_tag("mqar", pr) == "variant-update__mamba2_core-layer"
    with pytest.raises(ValueError, match="protocol mamba2_core: applies to mamba2, not 'gdn'"):
        T.resolve_protocol("mqar", {"mamba2_core": "layer"}, model="gdn")
    with pytest.raises(ValueError, match="mamba2_core"):
        T.resolve_protocol("mqar", {"mamba2_core": "fast"}, model="mamba2")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: fla's Triton kernels")
def test_cuda_core_passes_its_check_and_matches_the_cpu_path():
    res = FM.self_check("cuda")
    assert res["passed"], res
    mx = _mixer(32, 4).float()
    x = torch.randn(2, 150, 32)
    with torch_ops(mx.layer):
        ref = mx.layer.torch_forward(x.double().float())[0]
    mxc = mx.cuda()
    assert mxc._gpu_backend(torch.device("cuda")) == "simple_gla" and "simple_gla" in mxc._core()
    out = mxc(x.cuda())
    torch.testing.assert_close(out.detach().cpu(), ref, rtol=2e-2, atol=2e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: fla's Triton kernels")
def test_cuda_core_gradients_match_the_layers_own_path_at_the_mqar_sizes():
    """The mixer as MQAR trains it (d_model 128: 4 heads, N = 32, P = 64; T = 128) on the GPU: the core
    (``core="auto"``) against the layer's own path (``core="layer"``), same weights, same input: the
    output and every parameter's gradient (a Mamba2 run that does not learn could be a wrong gradient)."""
    torch.manual_seed(0)
    auto = MM.Mamba2Mixer(128).cuda()
    layer = MM.Mamba2Mixer(128, core="layer").cuda()
    layer.load_state_dict(auto.state_dict())
    dev = torch.device("cuda")
    assert auto._gpu_backend(dev) == "simple_gla" and layer._gpu_backend(dev) == "triton"
    x = torch.randn(4, 128, 128, device="cuda")
    w = torch.randn(4, 128, 128, device="cuda")
    outs, grads = [], []
    for mx in (auto, layer):
        o = mx(x)
        outs.append(o.detach())
        grads.append(torch.autograd.grad((o * w).sum(), list(mx.parameters())))
    torch.testing.assert_close(outs[0], outs[1], rtol=2e-2, atol=2e-3)
    for (n, _), a, b in zip(auto.named_parameters(), *grads):
        err = float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
        assert err < 2e-2, (n, err)


def test_the_hybrid_routes_simple_glas_backward_kernel_too():
    """fla_hybrid.install puts its replacement where simple GLA's backward calls the refused kernel,
    as for GDN (it only takes over where fla refuses the kernel; elsewhere the original runs)."""
    import fla.ops.gated_delta_rule.chunk as gdn_chunk
    import fla.ops.simple_gla.chunk as sgla_chunk

    from assocmem.gpu.tasks import fla_hybrid

    fla_hybrid.install()
    fla_hybrid.install()                                      # idempotent
    assert sgla_chunk.chunk_bwd_dqkwg is fla_hybrid._hybrid and gdn_chunk.chunk_bwd_dqkwg is fla_hybrid._hybrid
    assert fla_hybrid._ORIGINAL["chunk_bwd_dqkwg"] is not fla_hybrid._hybrid
