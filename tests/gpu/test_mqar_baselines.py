"""MQAR baselines (BL §4.2; issue 16): fla's GatedDeltaNet (without / with short convolution) and Mamba2.

* State: every MQAR mixer holds 8,192 numbers per layer, read off the built
  layers' parameter shapes (not off the code's own size functions).
* CPU equivalence: the fla layer's forward on a CPU (fla's Triton pieces swapped
  for torch ops, :mod:`assocmem.gpu.tasks.fla_cpu`) against a float64 reference
  written here from the layers' equations, token by token, on the layer's own
  parameters; outputs and parameter gradients.
* The training loop and the command line run every baseline on the CPU and
  record its configuration.
* On a CUDA machine, the real fla kernels against the same reference.

fla's layers need ``flash-linear-attention`` (and the ``transformers`` it
imports); CI installs it through the ``gpu`` extra, so the import-skip below is
only a fallback for a bare torch install.
"""
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fla.layers", reason="flash-linear-attention (gpu extra) is not installed")
import torch.nn.functional as F  # noqa: E402

from assocmem.gpu.tasks import mqar_models as MM, train as Tr  # noqa: E402
from assocmem.gpu.tasks import fla_cpu  # noqa: E402

pytestmark = pytest.mark.gpu
BASELINES = ("gdn", "gdn-conv", "mamba2")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ---------------------------------------------------------------------------
# the float64 reference, written from the layers' equations
# ---------------------------------------------------------------------------
def _d(t):
    return t.double()


def _causal_depthwise(y, w, b):
    """``out_t = Σ_j w[:, j] y_{t-K+1+j} (+ b)``: y ``[B, T, D]``, w ``[D, K]``; zeros before the start."""
    B, T, D = y.shape
    K = w.shape[-1]
    out = torch.zeros_like(y)
    for j in range(K):
        s = K - 1 - j                                     # tap j looks s steps back
        if s < T:
            out[:, s:] = out[:, s:] + w[:, j] * y[:, :T - s]
    return out if b is None else out + b


def gdn_reference(L, x):
    """GatedDeltaNet (fla 0.6.0 semantics) in float64, one token at a time."""
    x = _d(x)
    B, T, _ = x.shape
    H, dk, dv = L.num_heads, L.head_k_dim, L.head_v_dim

    def branch(proj, conv):
        y = x @ _d(proj.weight).T
        if L.use_short_conv:
            y = _causal_depthwise(y, _d(conv.weight)[:, 0, :], None if conv.bias is None else _d(conv.bias))
        return y * torch.sigmoid(y)                        # SiLU (after the convolution when there is one)

    q = branch(L.q_proj, getattr(L, "q_conv1d", None)).reshape(B, T, H, dk)
    k = branch(L.k_proj, getattr(L, "k_conv1d", None)).reshape(B, T, H, dk)
    v = branch(L.v_proj, getattr(L, "v_conv1d", None)).reshape(B, T, H, dv)
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    beta = torch.sigmoid(x @ _d(L.b_proj.weight).T)                           # [B, T, H]
    a = x @ _d(L.a_proj.weight).T + _d(L.dt_bias)
    decay = torch.exp(-torch.exp(_d(L.A_log)) * torch.log1p(torch.exp(a)))   # α_t = exp(-e^{A_log} softplus)
    S = x.new_zeros(B, H, dk, dv)
    outs = []
    for t in range(T):
        S = decay[:, t, :, None, None] * S
        kt = k[:, t]
        err = v[:, t] - torch.einsum("bhkv,bhk->bhv", S, kt)                 # v - S^T k
        S = S + beta[:, t, :, None, None] * kt[..., :, None] * err[..., None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t] / math.sqrt(dk)))
    o = torch.stack(outs, 1)                                                  # [B, T, H, dv]
    gate = (x @ _d(L.g_proj.weight).T).reshape(B, T, H, dv)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + L.o_norm.eps) * _d(L.o_norm.weight)
    o = o * gate * torch.sigmoid(gate)
    return o.reshape(B, T, H * dv) @ _d(L.o_proj.weight).T


def mamba2_reference(L, x):
    """Mamba2 (one group, fla 0.6.0 semantics) in float64, the SSM one token at a time."""
    x = _d(x)
    B, T, _ = x.shape
    H, P, N, I = L.num_heads, L.head_dim, L.ssm_state_size, L.intermediate_size
    assert L.n_groups == 1 and not L.D_has_hdim
    zxbcdt = x @ _d(L.in_proj.weight).T
    if L.in_proj.bias is not None:
        zxbcdt = zxbcdt + _d(L.in_proj.bias)
    z, xbc, dt = zxbcdt[..., :I], zxbcdt[..., I:2 * I + 2 * N], zxbcdt[..., 2 * I + 2 * N:]
    assert dt.shape[-1] == H
    cb = None if L.conv1d.bias is None else _d(L.conv1d.bias)
    xbc = _causal_depthwise(xbc, _d(L.conv1d.weight)[:, 0, :], cb)
    xbc = xbc * torch.sigmoid(xbc)
    xs, Bm, Cm = xbc[..., :I].reshape(B, T, H, P), xbc[..., I:I + N], xbc[..., I + N:]
    dt = torch.log1p(torch.exp(dt + _d(L.dt_bias)))                           # softplus, [B, T, H]
    A = -torch.exp(_d(L.A_log))
    S = x.new_zeros(B, H, P, N)
    ys = []
    for t in range(T):
        S = torch.exp(dt[:, t] * A)[..., None, None] * S \
            + dt[:, t, :, None, None] * xs[:, t, :, :, None] * Bm[:, t, None, None, :]
        ys.append((S * Cm[:, t, None, None, :]).sum(-1) + _d(L.D)[:, None] * xs[:, t])
    y = torch.stack(ys, 1).reshape(B, T, I)
    y = y * z * torch.sigmoid(z)                                              # gate, then the norm
    y = y / torch.sqrt((y * y).mean(-1, keepdim=True) + L.norm.eps) * _d(L.norm.weight)
    out = y @ _d(L.out_proj.weight).T
    return out if L.out_proj.bias is None else out + _d(L.out_proj.bias)


def reference(mixer, x):
    return (mamba2_reference if isinstance(mixer, MM.Mamba2Mixer) else gdn_reference)(mixer.layer, x)


def small_mixer(name, d_model, seed):
    """A small layer with every parameter moved off its initial value (so each one matters)."""
    torch.manual_seed(seed)
    if name == "mamba2":
        mx = MM.Mamba2Mixer(d_model, n_heads=2, d_state=6, budget=None, chunk_size=8)
    else:
        mx = MM.GDNMixer(d_model, conv=name == "gdn-conv", n_heads=2, key_dim=8, value_dim=12, budget=None)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in mx.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return mx


def _close(a, b, tol):
    a, b = a.detach().double(), b.detach().double()
    err, scale = float((a - b).abs().max()), float(b.abs().max())
    assert err <= tol * max(scale, 1.0), f"max |diff| {err:.3g} (scale {scale:.3g}, tol {tol:g})"


# ---------------------------------------------------------------------------
# state budget
# ---------------------------------------------------------------------------
def _state_from_shapes(mx):
    """State per layer from the parameter shapes alone."""
    if isinstance(mx, MM.BLMixer):
        H = mx.gate.out_features // 2                        # one ℓ² and one r² per head (G = 1)
        D, m = mx.q_proj.out_features // H, mx.v_proj.out_features // H
        return H * (D * m + D * D)
    L = mx.layer
    H = L.A_log.numel()
    if isinstance(mx, MM.Mamba2Mixer):
        inner = L.out_proj.in_features
        N = (L.in_proj.out_features - 2 * inner - H) // 2    # in_proj: z (inner), x B C (inner + 2N), dt (H)
        return H * (inner // H) * N
    return H * (L.q_proj.out_features // H) * (L.v_proj.out_features // H)


@pytest.mark.parametrize("name", ("bl",) + BASELINES)
def test_every_mixer_holds_8192_numbers_per_layer(name):
    assert MM.MQAR_MODELS[0] == "bl" and set(BASELINES) <= set(MM.MQAR_MODELS)
    net = MM.MQARModel(40, 32, d_model=128, mixer=name)
    assert len(net.mixers) == 2
    assert [_state_from_shapes(mx) for mx in net.mixers] == [8192, 8192]
    assert net.state_sizes() == [8192, 8192] and MM.mixer_sizes(name, 128)["state_size"] == 8192
    cfg = net.config()
    assert cfg["mixer"] == name and cfg["state_size"] == 8192 and cfg["n_heads"] == 4


def test_the_documented_sizes():
    gdn = MM.MQARModel(40, 32, d_model=128, mixer="gdn").mixers[0].layer
    assert (gdn.num_heads, gdn.head_k_dim, gdn.head_v_dim, gdn.use_short_conv) == (4, 32, 64, False)
    conv = MM.MQARModel(40, 32, d_model=128, mixer="gdn-conv").mixers[0]
    assert conv.layer.use_short_conv and conv.layer.conv_size == 4
    assert conv.conv_state_size == (2 * 4 * 32 + 4 * 64) * 4          # not counted in the 8,192
    m2 = MM.MQARModel(40, 32, d_model=128, mixer="mamba2").mixers[0].layer
    assert (m2.num_heads, m2.head_dim, m2.ssm_state_size, m2.n_groups, m2.expand) == (4, 64, 32, 1, 2)


@pytest.mark.parametrize("d_model", (16, 32, 64, 256, 512, 96, 200))
def test_the_budget_holds_across_widths(d_model):
    """BL and GDN sizes do not depend on the width; Mamba2's d_state does (H P = 2 d_model): exact at powers
    of two, the largest that fits otherwise."""
    for name in ("bl", "gdn"):
        assert MM.mixer_sizes(name, d_model)["state_size"] == 8192
    mx = MM.Mamba2Mixer(d_model)
    s = _state_from_shapes(mx)
    assert s == mx.state_size <= 8192
    if d_model & (d_model - 1) == 0:
        assert s == 8192
    else:
        assert s + 2 * d_model > 8192                          # one more d_state would not fit


def test_mamba2_widths_that_do_not_split_into_heads_are_refused():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        MM.Mamba2Mixer(33)                                     # 2 · 33 is not a multiple of 4 heads


# ---------------------------------------------------------------------------
# CPU: the fla layer (torch stand-ins) against the reference
# ---------------------------------------------------------------------------
# T = 21: several of Mamba2's 8-token chunks; T = 70: GDN's eval past 64 tokens takes the chunk entry point
CASES = [(name, d, B, T, seed) for name in BASELINES
         for (d, B, T, seed) in ((16, 2, 9, 0), (24, 1, 21, 3), (16, 1, 70, 2))]


@pytest.mark.parametrize("name,d_model,B,T,seed", CASES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_cpu_forward_matches_the_reference(name, d_model, B, T, seed, dtype):
    """Output of the fla layer on CPU = the float64 reference (fla's naive ops compute in float32 even for
    float64 inputs, so both dtypes are held to float32 accuracy)."""
    mx = small_mixer(name, d_model, seed).to(dtype)
    x = torch.randn(B, T, d_model, generator=torch.Generator().manual_seed(seed + 7), dtype=dtype)
    mx.train()
    out = mx(x)
    assert out.shape == (B, T, d_model) and out.dtype == dtype
    ref = reference(mx, x)
    _close(out, ref, 2e-5)
    mx.eval()                                              # GDN: fused-recurrent entry point for T <= 64
    with torch.no_grad():
        _close(mx(x), ref, 2e-5)


def test_the_reference_is_sensitive():
    """The comparison can fail: a layer with one flag changed (no output gate) or one weight changed
    differs from the reference by far more than the tolerance."""
    mx = small_mixer("gdn-conv", 16, 0)
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(1))
    ref = reference(mx, x)
    with torch.no_grad():
        mx.layer.k_conv1d.weight[3, 0, 0] += 0.5            # the oldest tap of one channel
    with pytest.raises(AssertionError):
        _close(mx(x), ref, 2e-5)
    m2 = small_mixer("mamba2", 16, 0)
    ref = reference(m2, x)
    with torch.no_grad():
        m2.layer.D[1] += 0.5
    with pytest.raises(AssertionError):
        _close(m2(x), ref, 2e-5)


@pytest.mark.parametrize("name", BASELINES)
def test_cpu_gradients_match_the_reference(name):
    """Every parameter gets a finite, non-zero gradient, equal to the reference's (autograd through each)."""
    mx = small_mixer(name, 16, 5)
    x = torch.randn(2, 11, 16, generator=torch.Generator().manual_seed(2))
    w = torch.randn(2, 11, 16, generator=torch.Generator().manual_seed(3))
    params = dict(mx.named_parameters())
    g_fla = torch.autograd.grad((mx(x) * w).sum(), list(params.values()))
    g_ref = torch.autograd.grad((reference(mx, x) * w.double()).sum(), list(params.values()))
    for (pname, _), a, b in zip(params.items(), g_fla, g_ref):
        assert torch.isfinite(a).all() and float(a.abs().max()) > 0, pname
        _close(a, b, 1e-4)


def test_the_model_trains_through_every_baseline():
    """Backbone + baseline mixer: the loss gradient reaches the embedding and both mixers."""
    for name in BASELINES:
        torch.manual_seed(0)
        net = MM.MQARModel(20, 16, d_model=16, mixer=name, n_heads=2)
        tok = torch.randint(0, 20, (2, 10))
        labels = torch.full((2, 10), -100)
        labels[:, -3:] = torch.randint(0, 16, (2, 3))
        loss, _ = MM.mqar_loss(net(tok), labels)
        loss.backward()
        assert net.embed.weight.grad.abs().sum() > 0
        for mx in net.mixers:
            assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in mx.parameters())


def test_cpu_patches_are_scoped_and_the_write_mask_is_ignored():
    import fla.layers.gated_deltanet as gdn_mod
    import fla.modules.causal_conv1d.ops as conv_mod

    before = (gdn_mod.chunk_gated_delta_rule, gdn_mod.fused_recurrent_gated_delta_rule, gdn_mod.causal_conv1d,
              conv_mod.causal_conv1d)
    for name in BASELINES:
        mx = small_mixer(name, 16, 0)
        x = torch.randn(1, 6, 16)
        mask = torch.tensor([[True, False, True, False, False, True]])
        assert torch.equal(mx(x), mx(x, mask))
        assert not any("forward" in m.__dict__ for m in mx.modules())
        if name == "mamba2":
            assert mx.layer.act is not F.silu
    assert (gdn_mod.chunk_gated_delta_rule, gdn_mod.fused_recurrent_gated_delta_rule, gdn_mod.causal_conv1d,
            conv_mod.causal_conv1d) == before


# ---------------------------------------------------------------------------
# training loop and command line
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", BASELINES)
def test_train_loop_runs_and_records_the_model(name, tmp_path):
    r = Tr.train("mqar", name, steps=2, batch_size=4, device="cpu", out=tmp_path, progress=False,
                 eval_mode="none", protocol={"variant": "block", "pool_size": 8, "d_model": 16})
    rec = json.loads((tmp_path / "mqar" / f"{name}__variant-block__d_model-16__pool_size-8_s0.json").read_text())
    cfg = rec["model_config"]
    assert cfg["mixer"] == name and cfg["state_sizes"] == [8192, 8192] and cfg["d_model"] == 16
    assert cfg["fla_version"] == fla_cpu.FLA_VERSION and cfg["write_mask"].startswith("ignored")
    assert "CPU" in cfg["core"]
    assert len(rec["curve"]) == 1 and math.isfinite(rec["curve"][-1]["loss"]) and r["n_params"] > 0


def test_a_resumed_run_records_each_segments_core(tmp_path):
    """A resumed GDN run names the core that trained each segment (``gdn_backend=auto`` decides per
    process, so two calls of one run may differ); BL's segments carry no core."""
    pr = {"variant": "block", "pool_size": 8, "d_model": 16}
    for steps, resume in ((1, False), (2, True)):
        Tr.train("mqar", "gdn", steps=steps, batch_size=2, device="cpu", out=tmp_path, progress=False,
                 eval_mode="none", protocol=pr, resume=resume)
    rec = json.loads((tmp_path / "mqar" / "gdn__variant-block__d_model-16__pool_size-8_s0.json").read_text())
    segs = rec["provenance"]["segments"]
    assert [s["steps"] for s in segs] == [[0, 1], [1, 2]]
    assert all(s["core"] == [rec["model_config"]["core"]] and "CPU" in s["core"][0] for s in segs), segs
    for steps, resume in ((1, False), (2, True)):
        Tr.train("mqar", "bl", steps=steps, batch_size=2, device="cpu", out=tmp_path, progress=False,
                 eval_mode="none", protocol=pr, resume=resume)
    rec = json.loads((tmp_path / "mqar" / "bl__variant-block__d_model-16__pool_size-8_s0.json").read_text())
    assert len(rec["provenance"]["segments"]) == 2 and not any("core" in s for s in rec["provenance"]["segments"])
    # a checkpoint written before segments recorded their core: its segments say the core is not known
    ck_path = tmp_path / "mqar" / "gdn__variant-block__d_model-16__pool_size-8_s0.ckpt.pt"
    ck = torch.load(ck_path, weights_only=False)
    ck["segments"] = [{k: v for k, v in s.items() if k != "core"} for s in ck["segments"]]
    torch.save(ck, ck_path)
    Tr.train("mqar", "gdn", steps=3, batch_size=2, device="cpu", out=tmp_path, progress=False,
             eval_mode="none", protocol=pr, resume=True)
    rec = json.loads((tmp_path / "mqar" / "gdn__variant-block__d_model-16__pool_size-8_s0.json").read_text())
    segs = rec["provenance"]["segments"]
    assert [s["steps"] for s in segs] == [[0, 1], [1, 2], [2, 3]]
    assert all(s["core"][0].startswith("not recorded") for s in segs[:2]) and "CPU" in segs[2]["core"][0]


def test_bl_records_its_model_too(tmp_path):
    Tr.train("mqar", "bl", steps=1, batch_size=2, device="cpu", out=tmp_path, progress=False, eval_mode="none",
             protocol={"variant": "block", "pool_size": 8, "d_model": 16})
    rec = json.loads((tmp_path / "mqar" / "bl__variant-block__d_model-16__pool_size-8_s0.json").read_text())
    cfg = rec["model_config"]
    assert (cfg["mixer"], cfg["n_heads"], cfg["key_dim"], cfg["value_dim"], cfg["state_size"]) == \
        ("bl", 4, 32, 32, 8192) and cfg["write_mask"] == "used"


def test_quick_evaluation_of_a_baseline(tmp_path):
    r = Tr.train("mqar", "gdn-conv", steps=1, batch_size=2, device="cpu", out=tmp_path, progress=False,
                 eval_mode="quick", protocol={"variant": "block", "pool_size": 8, "d_model": 16})
    rows = r["eval"]["test"]
    assert rows and all(0.0 <= row["acc"] <= 1.0 and row["n_queries"] > 0 for row in rows)


def test_cli_smoke(tmp_path, capsys):
    from assocmem.cli import main

    out = tmp_path / "runs"
    rc = main(["gpu", "train", "mqar", "--model", "mamba2", "--steps", "2", "--batch-size", "4", "--device", "cpu",
               "--eval", "none", "--protocol", "pool_size=8", "--protocol", "variant=block", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["model"] == "mamba2" and line["device"]
    assert list((out / "mqar").glob("mamba2*.json"))


def test_cli_without_fla_names_the_model(tmp_path, capsys, monkeypatch):
    from assocmem.cli import main

    monkeypatch.setattr(fla_cpu, "fla_version", lambda: None)
    out = tmp_path / "runs"
    rc = main(["gpu", "train", "mqar", "--model", "gdn", "--steps", "2", "--device", "cpu", "--eval", "none",
               "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--model gdn" in err[0] and "flash-linear-attention" in err[0]
    assert not out.exists() or not any(out.rglob("*.json"))


# ---------------------------------------------------------------------------
# GPU: fla's real kernels (skipped without CUDA; run on the GPU machine)
# ---------------------------------------------------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: fla's Triton kernels")
@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("T", (9, 100))
def test_cuda_kernels_match_the_reference_and_the_cpu_path(name, T):
    mx = small_mixer(name, 32, 1)
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(4))
    ref = reference(mx, x)
    cpu = mx(x).detach()
    gpu = mx.cuda()(x.cuda()).detach().cpu()
    _close(gpu, ref, 2e-3)               # TF32 / chunked kernels: looser than the CPU path
    _close(gpu, cpu, 2e-3)
    mx.eval()
    with torch.no_grad():                # GDN: the fused-recurrent kernel for T <= 64
        _close(mx(x.cuda()).cpu(), ref, 2e-3)


# ---------------------------------------------------------------------------
# the GPU fallback for GDN: fla's chunked torch reference (fla refuses its Triton backward on Hopper
# with Triton >= 3.4 and < 3.7.1, the H200 here)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ("gdn", "gdn-conv"))
@pytest.mark.parametrize("T", (9, 64, 150))
def test_chunked_torch_core_matches_the_reference_forward_and_backward(name, T):
    """The chunk-by-chunk core (what a Hopper GPU with Triton 3.6 runs) against the float64 token-by-token
    reference of this file, output and every parameter's gradient; T = 150 crosses chunk boundaries."""
    mx = small_mixer(name, 16, 3)
    x = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(4))
    w = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(5))
    with fla_cpu.torch_ops(mx.layer, recurrence="chunk"):
        out = mx.layer(x)[0]
    ref = reference(mx, x)
    _close(out, ref, 5e-5)
    params = dict(mx.named_parameters())
    with fla_cpu.torch_ops(mx.layer, recurrence="chunk"):
        g_chunk = torch.autograd.grad((mx.layer(x)[0] * w).sum(), list(params.values()))
    g_ref = torch.autograd.grad((reference(mx, x) * w.double()).sum(), list(params.values()))
    for (pname, _), a, b in zip(params.items(), g_chunk, g_ref):
        assert torch.isfinite(a).all(), pname
        _close(a, b, 2e-4)


def test_gdn_backend_follows_fla_own_refusal(monkeypatch):
    import fla.utils as fu

    for hopper, above34, above371, auto in ((True, True, False, "torch"), (True, True, True, "triton"),
                                            (False, True, False, "triton"), (True, False, False, "triton")):
        monkeypatch.setattr(fu, "IS_NVIDIA_HOPPER", hopper)
        monkeypatch.setattr(fu, "TRITON_ABOVE_3_4_0", above34)
        monkeypatch.setattr(fu, "TRITON_ABOVE_3_7_1", above371)
        assert fla_cpu.gdn_backend("auto") == auto
        assert fla_cpu.gdn_backend("torch") == "torch"
        if auto == "torch":
            with pytest.raises(ValueError, match="protocol gdn_backend: fla refuses its gated backward"):
                fla_cpu.gdn_backend("triton")
        else:
            assert fla_cpu.gdn_backend("triton") == "triton"
        assert fla_cpu.gdn_backend("hybrid") == ("hybrid" if auto == "torch" else "triton")
    with pytest.raises(ValueError, match="gdn_backend must be auto, triton, torch or hybrid"):
        fla_cpu.gdn_backend("cuda")


def test_gdn_backend_is_a_protocol_option_for_the_gdn_models_only():
    pr = Tr.resolve_protocol("mqar", {"gdn_backend": "torch"}, "gdn")
    assert pr["gdn_backend"] == "torch"
    net = Tr.build_model("mqar", "gdn", pr)
    assert all(mx.backend == "torch" for mx in net.mixers)
    for model in ("bl", "mamba2"):
        with pytest.raises(ValueError, match="protocol gdn_backend: applies to gdn and gdn-conv"):
            Tr.resolve_protocol("mqar", {"gdn_backend": "torch"}, model)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: fla's Triton kernels")
@pytest.mark.parametrize("name", ("gdn", "gdn-conv"))
@pytest.mark.parametrize("T", (100, 150))
def test_cuda_hybrid_core_matches_the_reference_forward_and_backward(name, T):
    """gdn_backend=hybrid on the GPU: fla's Triton kernels, the one fla refuses here in torch
    (assocmem.gpu.tasks.fla_hybrid), against the float64 reference, output and every gradient."""
    mx = small_mixer(name, 32, 3)
    mx.backend = "hybrid"
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(4))
    w = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(5))
    ref = reference(mx, x)
    g_ref = torch.autograd.grad((ref * w.double()).sum(), list(mx.parameters()))
    mx = mx.cuda()
    out = mx(x.cuda())
    _close(out.detach().cpu(), ref, 2e-3)
    g = torch.autograd.grad((out * w.cuda()).sum(), list(mx.parameters()))
    for (pname, _), a, b in zip(mx.named_parameters(), g, g_ref):
        assert torch.isfinite(a).all(), pname
        _close(a.cpu(), b, 5e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: fla's Triton kernels")
def test_cuda_hybrid_self_check_passes_and_auto_takes_it_where_fla_refuses():
    from assocmem.gpu.tasks import fla_hybrid

    res = fla_hybrid.self_check("cuda")
    assert res["passed"], res
    if fla_cpu.fla_refuses_gated_backward():
        assert fla_cpu.gdn_backend("auto", "cuda") == "hybrid"
