"""The ``init`` protocol option (MQAR): Zoology's initialisation against torch's defaults.  The rule is
restated here from Zoology's ``model.py`` (Linear and Embedding weights N(0, 0.02²), Linear biases 0,
parameters named ``out_proj`` / ``fc2`` N(0, (0.02 / sqrt(2 n_layers))²)) and checked on the built
models' parameters: their spread and mean, which ones are rescaled, which ones keep their own values
(fla's A_log / dt_bias / D, convolutions, norms, BL's designed gate biases), the protocol's tag and
error, and what a CPU run records."""
import json
import math

import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu.tasks import mqar_models as Mm, train as T  # noqa: E402

pytestmark = pytest.mark.gpu


def _fla():
    pytest.importorskip("fla.layers", reason="flash-linear-attention (gpu extra) is not installed")


def _build(model, init, seed=0, **extra):
    pr = T.resolve_protocol("mqar", {"variant": "update", "init": init, **extra}, model)
    torch.manual_seed(seed)
    return T.build_model("mqar", model, pr)


def _std_ok(p, std):
    """A sample of n >= 1,000 normal draws: its spread within 10 % of std, its mean within 5 std/sqrt(n)."""
    x = p.detach().double().ravel()
    assert x.numel() >= 1000
    assert abs(x.std().item() / std - 1) < 0.1, (x.std().item(), std)
    assert abs(x.mean().item()) < 5 * std / math.sqrt(x.numel())


def test_the_option_is_checked_recorded_and_named_in_the_tag():
    pr = T.resolve_protocol("mqar", {"variant": "update", "init": "zoology"}, "bl")
    assert T.protocol_tag("mqar", pr) == "variant-update__init-zoology"
    assert T.resolve_protocol("mqar", None)["init"] == "torch"
    with pytest.raises(ValueError, match="protocol init must be one of torch, zoology .got 'xavier'"):
        T.resolve_protocol("mqar", {"init": "xavier"})
    with pytest.raises(ValueError, match="^init must be one of"):
        Mm.MQARModel(16, 8, d_model=8, mixer=lambda d: torch.nn.Identity(), init="normal")


@pytest.mark.parametrize("d_model", [32, 128])
def test_bl_under_zoology_draws_every_linear_and_embedding_at_0_02_and_keeps_the_gate_start(d_model):
    torch_init, zoo = _build("bl", "torch", d_model=d_model), _build("bl", "zoology", d_model=d_model)
    assert zoo.rescaled == []                  # BL's output projection is o_proj: Zoology's names miss it
    _std_ok(zoo.embed.weight, 0.02)
    _std_ok(zoo.head.weight, 0.02)
    assert torch_init.embed.weight.std().item() > 0.9            # torch's Embedding: N(0, 1)
    for mix, ref in zip(zoo.mixers, torch_init.mixers):
        for lin in (mix.q_proj, mix.k_proj, mix.v_proj, mix.o_proj):
            _std_ok(lin.weight, 0.02)
        # the noise gates start where bl_noise_init puts them, under either initialisation
        assert torch.equal(mix.gate.bias, ref.gate.bias)
        assert torch.allclose(torch.nn.functional.softplus(mix.gate.bias), torch.tensor(0.05))
    for conv in zoo.convs:                      # the backbone's gated convolution: Linear bias to 0
        assert torch.count_nonzero(conv.proj.bias) == 0
        _std_ok(conv.proj.weight, 0.02)
    for ln in zoo.norm1:
        assert torch.equal(ln.weight, torch.ones_like(ln.weight))
    assert "N(0, 0.02^2)" in zoo.config()["init"] and "torch's defaults" in torch_init.config()["init"]


def test_a_decay_gate_keeps_its_start_under_zoology():
    zoo = _build("bl", "zoology", bl_decay=True)
    for mix in zoo.mixers:
        assert torch.allclose(mix.decay_gate.bias, torch.full_like(mix.decay_gate.bias, 4.0))


@pytest.mark.parametrize("n_layers", [1, 2, 3])
def test_the_rescaled_projections_are_drawn_at_0_02_over_sqrt_2l(n_layers):
    class Mixer(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.in_proj, self.out_proj = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, h, write_mask=None):
            return self.out_proj(self.in_proj(h))

    torch.manual_seed(1)
    net = Mm.MQARModel(64, 32, d_model=64, n_layers=n_layers, mixer=Mixer, init="zoology")
    assert net.rescaled == [f"mixers.{i}.out_proj.weight" for i in range(n_layers)]
    for mix in net.mixers:
        _std_ok(mix.out_proj.weight, 0.02 / math.sqrt(2 * n_layers))
        _std_ok(mix.in_proj.weight, 0.02)
        assert torch.count_nonzero(mix.out_proj.bias) == 0
    out = net(torch.randint(0, 64, (2, 5)))
    assert out.shape == (2, 5, 32) and torch.isfinite(out).all()


def test_mamba2_under_zoology_rescales_out_proj_and_keeps_its_dynamics():
    _fla()
    torch_init, zoo = _build("mamba2", "torch"), _build("mamba2", "zoology")
    assert zoo.rescaled == ["mixers.0.layer.out_proj.weight", "mixers.1.layer.out_proj.weight"]
    for mix, ref in zip(zoo.mixers, torch_init.mixers):
        lay, lref = mix.layer, ref.layer
        _std_ok(lay.in_proj.weight, 0.02)
        _std_ok(lay.out_proj.weight, 0.02 / 2)
        # the same seed draws the same A_log, dt_bias, D and convolution under both (Zoology leaves them)
        for name in ("A_log", "dt_bias", "D", "conv1d.weight", "conv1d.bias", "norm.weight"):
            assert torch.equal(lay.get_parameter(name), lref.get_parameter(name)), name
        assert getattr(lay.A_log, "_no_weight_decay", False)        # the mark wd_exempt reads survives
    assert abs(torch_init.mixers[0].layer.in_proj.weight.std().item() - 1 / math.sqrt(3 * 128)) < 0.005


def test_a_cpu_run_records_the_initialisation(tmp_path):
    _fla()
    pr = {"variant": "update", "pool_size": 8, "d_model": 16, "init": "zoology"}
    rec = T.train("mqar", "mamba2", steps=1, batch_size=2, device="cpu", out=tmp_path, progress=False,
                  eval_mode="none", protocol=pr)
    assert rec["protocol"]["init"] == "zoology"
    assert "out_proj.weight" in rec["model_config"]["init"]
    saved = json.loads((tmp_path / "mqar" / "mamba2__variant-update__d_model-16__pool_size-8__init-zoology_s0.json")
                       .read_text())
    assert saved["protocol"]["init"] == "zoology" and math.isfinite(saved["curve"][-1]["loss"])
