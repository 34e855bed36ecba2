"""MQAR in the training loop (BL §4.2, App. F; issue 16): schedule, steps, protocol, evaluation."""
import json

import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from assocmem.gpu.tasks import mqar as Mq, train as Tr  # noqa: E402
from assocmem.gpu.tasks.mqar_models import MQARModel  # noqa: E402

pytestmark = pytest.mark.gpu


@settings(max_examples=50, deadline=None)
@given(steps=st.integers(2, 5000), warmup=st.integers(0, 2000))
def test_warmup_then_cosine(steps, warmup):
    f = [Tr.lr_factor(s, steps, warmup) for s in range(steps)]
    w = min(warmup, steps)
    assert all(0.0 <= x <= 1.0 for x in f)
    if w:
        assert f[:w] == sorted(f[:w]) and abs(f[0] - 1 / warmup) < 1e-12
    after = f[w:]
    assert all(a >= b - 1e-12 for a, b in zip(after, after[1:]))           # non-increasing after warm-up
    if warmup < steps:
        assert abs(f[warmup] - 1.0) < 1e-12


def test_default_steps_are_epochs_over_the_pool():
    pr = Tr.resolve_protocol("mqar")
    assert Tr.mqar_pool_size(pr) == 100_000 and pr["epochs"] == 40 and pr["queries_write"] is False
    assert Tr.mqar_pool_size(Tr.resolve_protocol("mqar", {"variant": "update"})) == 160_000
    opt = Tr.optimizer_settings("mqar", pr)
    assert opt["betas"] == [0.9, 0.95] and opt["weight_decay"] == 0.1


def test_a_run_resumes_without_steps(tmp_path):
    """MQAR's length comes from its epochs (the task's nominal steps are 0): resuming without --steps
    must compare the checkpoint with epochs x pool / batch, not refuse it (it did, on the H200)."""
    pr = {"variant": "block", "pool_size": 16, "epochs": 1, "d_model": 16}
    Tr.train("mqar", "bl", steps=2, batch_size=4, device="cpu", out=tmp_path, progress=False, eval_mode="none",
             protocol=pr)
    assert Tr.default_steps("mqar", "bl", pr, 4) == 4
    Tr.preflight("mqar", "bl", batch_size=4, out=tmp_path, resume=True, force=True, protocol=pr)
    r = Tr.train("mqar", "bl", batch_size=4, device="cpu", out=tmp_path, progress=False, eval_mode="none",
                 protocol=pr, resume=True)
    rec = json.loads((tmp_path / "mqar" / "bl__variant-block__d_model-16__epochs-1__pool_size-16_s0.json").read_text())
    assert rec["curve"][-1]["step"] == 4 and r["steps"] == 4
    # the result says which device trained which steps (a GPU run may be finished elsewhere)
    seg = rec["provenance"]["segments"]
    assert [x["steps"] for x in seg] == [[0, 2], [2, 4]] and all(x["device"].startswith("cpu") for x in seg), seg


def test_cpu_budgets_take_the_variant_and_its_epochs(monkeypatch):
    """Update and Block train at 128 tokens, Base at 512: the memory estimate takes the run's variant
    (it took Base's for every variant, refusing a CPU resume of Update), and the time estimate takes
    epochs x pool / batch (it took the nominal 0 steps, so it never refused an MQAR run)."""
    assert Tr.train_length("mqar", "bl", protocol={"variant": "update"}) == 128
    assert Tr.train_length("mqar", "bl", protocol={"variant": "base"}) == 512
    assert Tr.train_memory("mqar", "bl", 256, protocol={"variant": "update"}) < \
        Tr.train_memory("mqar", "bl", 256, protocol={"variant": "base"}) / 4
    monkeypatch.setenv("ASSOCMEM_MAX_SECONDS", "600")
    with pytest.raises(ValueError, match=r"--steps 25000 \(default\).*over the limit"):
        Tr.check_time("mqar", "bl", None, None, None, "cpu", {"variant": "update"})
    Tr.check_time("mqar", "bl", 2, 4, None, "cpu", {"variant": "update"})      # a smoke run passes
    # a resume is estimated on what is left: 1,500 of 25,000 steps fit where the whole run does not
    monkeypatch.setenv("ASSOCMEM_MAX_SECONDS", "3600")
    Tr.check_time("mqar", "bl", None, None, None, "cpu", {"variant": "update"}, done=23_500)
    with pytest.raises(ValueError, match=r"\(20000 left after the checkpoint's 5000\)"):
        Tr.check_time("mqar", "bl", None, None, None, "cpu", {"variant": "update"}, done=5_000)


def test_cpu_run_records_protocol_and_optimizer(tmp_path):
    r = Tr.train("mqar", "bl", steps=1, batch_size=2, device="cpu", out=tmp_path, progress=False, eval_mode="none",
                 protocol={"variant": "block", "pool_size": 8, "d_model": 16})
    path = tmp_path / "mqar" / "bl__variant-block__d_model-16__pool_size-8_s0.json"
    rec = json.loads(path.read_text())
    assert rec["protocol"]["variant"] == "block" and rec["optimizer"]["betas"] == [0.9, 0.95]
    assert rec["curve"][-1]["step"] == 1 and rec["steps"] == 1
    assert r["n_params"] > 0


def test_evaluation_counts_query_hits():
    """``_eval_mqar`` on a tiny model: its accuracy per configuration equals a direct count."""
    torch.manual_seed(0)
    pr = Tr.resolve_protocol("mqar", {"variant": "block"})
    cfg = Mq.train_configs("block")[0][0]
    net = MQARModel(cfg.n_tokens, Mq.VOCAB, d_model=8, n_layers=1, n_heads=1, key_dim=4, value_dim=4).eval()
    with torch.no_grad():
        net.head.bias.zero_()
        net.head.bias[7] = 50.0                                 # always answers value id 7
    res = Tr._eval_mqar(net, {"n_seqs": 3}, torch.device("cpu"), 2, pr)["test"]
    sets = Mq.build_test_sets("block", n=3)
    assert [r["config"] for r in res] == list(sets)
    for row in res:
        b = sets[row["config"]].batch(slice(None))
        lab = b.labels[b.labels != Mq.IGNORE]
        assert row["n_queries"] == lab.numel() and row["acc"] == float((lab == 7).double().mean())


def test_bl_op_is_an_implementation_choice_with_the_same_answer():
    """bl_op=chunk runs chunk_bl instead of fused_recurrent_bl: the same filter, so the same
    model output (here on the CPU: both torch forms, write mask included), recorded in the
    protocol block and model_config but not in the run's name; refused for the other models."""
    pr_f, pr_c = Tr.resolve_protocol("mqar", {}, "bl"), Tr.resolve_protocol("mqar", {"bl_op": "chunk"}, "bl")
    assert Tr.protocol_tag("mqar", pr_c) == Tr.protocol_tag("mqar", pr_f) == ""
    torch.manual_seed(0)
    a = Tr.build_model("mqar", "bl", {**pr_f, "d_model": 32})
    b = Tr.build_model("mqar", "bl", {**pr_c, "d_model": 32})
    b.load_state_dict(a.state_dict())
    assert a.config()["op"] == "fused_recurrent_bl" and b.config()["op"] == "chunk_bl"
    tok = torch.randint(0, Mq.VOCAB, (2, 40), generator=torch.Generator().manual_seed(1))
    wm = torch.rand(2, 40, generator=torch.Generator().manual_seed(2)) < 0.6
    torch.testing.assert_close(b(tok, wm), a(tok, wm), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="protocol bl_op: applies to bl"):
        Tr.resolve_protocol("mqar", {"bl_op": "chunk"}, "gdn")
    with pytest.raises(ValueError, match="bl_op"):
        Tr.resolve_protocol("mqar", {"bl_op": "scan"}, "bl")


def test_cli_refuses_a_cpu_mqar_run_past_the_time_limit(tmp_path, capsys, monkeypatch):
    """What a user sees: one line naming --steps with the estimate, exit 2, nothing written."""
    from assocmem.cli import main as assocmem_main

    monkeypatch.setenv("ASSOCMEM_MAX_SECONDS", "600")
    rc = assocmem_main(["gpu", "train", "mqar", "--model", "bl", "--device", "cpu", "--out", str(tmp_path),
                        "--protocol", "variant=update", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "--steps 25000 (default)" in err[0] and "128 tokens a sequence" in err[0], err
    assert not any(tmp_path.iterdir())


def test_bl_decay_is_the_filter_with_diagonal_dynamics_alpha_t_I():
    """bl_decay=true: BL's mixer runs the filter with A_t = α_t I per head, α_t = sigmoid(w·h + b) from
    its decay gate, write mask included.  Checked against numerics' float64 filter (bl_filter with
    alpha = α_t on every key channel) fed the mixer's own q, k, v, ℓ², r² and α; a recorded, tagged
    protocol choice (A = I is the default) that only BL takes."""
    import numpy as np
    import torch.nn.functional as F
    from assocmem.numerics.bl_filter import bl_filter

    pr = Tr.resolve_protocol("mqar", {"bl_decay": True}, "bl")
    assert "bl_decay" in Tr.protocol_tag("mqar", pr)
    torch.manual_seed(3)
    net = Tr.build_model("mqar", "bl", {**pr, "d_model": 32})
    mix = net.mixers[0]
    assert mix.config()["dynamics"].startswith("alpha_t I") and mix.decay
    with torch.no_grad():                                          # a decay far from 1, so that it matters
        mix.decay_gate.bias.fill_(0.5)
        mix.decay_gate.weight.normal_(0, 0.5)
    B, T = 2, 24
    h = torch.randn(B, T, 32, generator=torch.Generator().manual_seed(4))
    wm = torch.rand(B, T, generator=torch.Generator().manual_seed(5)) < 0.7
    out = mix(h, wm)
    H, D, m = mix.H, mix.D, mix.m
    with torch.no_grad():
        q = F.normalize(mix.q_proj(h).reshape(B, T, H, D), dim=-1).double().numpy()
        k = F.normalize(mix.k_proj(h).reshape(B, T, H, D), dim=-1).double().numpy()
        v = mix.v_proj(h).reshape(B, T, H, m).double().numpy()
        g = mix.gate(h).double()
        l2 = F.softplus(g[..., :H]).numpy()
        r2 = (F.softplus(g[..., H:]) + 1e-4).numpy()
        a = torch.sigmoid(mix.decay_gate(h).double()).numpy()
        assert a.min() < 0.9                                       # the decay is not a no-op here
        ys = np.zeros((B, T, H, m))
        for bi in range(B):
            for hi in range(H):
                tr = bl_filter(k[bi, :, hi], v[bi, :, hi], q[bi, :, hi], l2=l2[bi, :, hi], r2=r2[bi, :, hi],
                               p0=mix.p0, alpha=np.repeat(a[bi, :, hi, None], D, -1), write_mask=wm[bi].numpy())
                ys[bi, :, hi] = tr.y
        ref = mix.o_proj(torch.from_numpy(ys.reshape(B, T, H * m)).float())
    torch.testing.assert_close(out, ref, rtol=2e-4, atol=2e-5)
    off = Tr.build_model("mqar", "bl", {**Tr.resolve_protocol("mqar", {}, "bl"), "d_model": 32}).mixers[0]
    assert not hasattr(off, "decay_gate") and off.config()["dynamics"] == "identity"
    with pytest.raises(ValueError, match="protocol bl_decay: applies to bl"):
        Tr.resolve_protocol("mqar", {"bl_decay": "true"}, "gdn")


def test_zoology_backbone_puts_a_causal_width_3_gated_conv_before_each_mixer():
    """backbone=zoology: a gated short convolution (Zoology's BaseConv, width 3) before each of the two
    mixer layers and no MLP: the default since 2 December (untagged).  The convolution is causal and sees
    exactly its token and the two before it (Block's A B 4 5 needs two back); the mixers' state is the
    same as under backbone=mlp (ours before, an MLP after each mixer), which is tagged."""
    from assocmem.gpu.tasks.mqar_models import GatedShortConv

    pr = Tr.resolve_protocol("mqar", {}, "bl")
    assert pr["backbone"] == "zoology" and Tr.protocol_tag("mqar", pr) == ""
    mlp = Tr.resolve_protocol("mqar", {"backbone": "mlp"}, "bl")
    assert Tr.protocol_tag("mqar", mlp) == "backbone-mlp"
    torch.manual_seed(0)
    net = Tr.build_model("mqar", "bl", {**pr, "d_model": 32})
    ref = Tr.build_model("mqar", "bl", {**mlp, "d_model": 32})
    assert len(net.convs) == 2 and not hasattr(net, "mlps") and len(ref.mlps) == 2 and not hasattr(ref, "convs")
    assert net.state_sizes() == ref.state_sizes() == [8192, 8192]
    assert "gated short conv of width 3" in net.config()["backbone"]
    conv = GatedShortConv(8)
    h = torch.randn(1, 12, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = conv(h)
    for back, changes in ((0, True), (1, True), (2, True), (3, False)):
        h2 = h.clone()
        h2[0, 9 - back] += 1.0
        with torch.no_grad():
            d = (conv(h2) - y).abs().sum(-1)[0]
        assert bool(d[9] > 1e-6) is changes, (back, d)
        assert float(d[: 9 - back].sum()) == 0.0                                    # nothing earlier moves
    tok = torch.randint(0, Mq.VOCAB, (2, 20), generator=torch.Generator().manual_seed(2))
    wm = torch.rand(2, 20, generator=torch.Generator().manual_seed(3)) < 0.6
    assert net(tok, wm).shape == (2, 20, Mq.VOCAB)
    with pytest.raises(ValueError, match="backbone"):
        Tr.resolve_protocol("mqar", {"backbone": "hyena"}, "bl")


def test_the_mixers_backbone_has_the_mixer_layers_alone_and_is_causal():
    """backbone=mixers (an ablation, tagged): the two mixer layers with only the residual stream and their
    norms between them, no convolution and no MLP; the same state per layer; causal (an output does not
    depend on later tokens); it trains on a CPU."""
    pr = Tr.resolve_protocol("mqar", {"backbone": "mixers"}, "bl")
    assert Tr.protocol_tag("mqar", pr) == "backbone-mixers"
    torch.manual_seed(0)
    net = Tr.build_model("mqar", "bl", {**pr, "d_model": 32})
    assert not hasattr(net, "convs") and not hasattr(net, "mlps") and not hasattr(net, "norm2")
    assert net.state_sizes() == [8192, 8192] and "no convolution, no MLP" in net.config()["backbone"]
    names = {n.split(".")[0] for n, _ in net.named_parameters()}
    assert names == {"embed", "mixers", "norm1", "out_norm", "head"}, names
    tok = torch.randint(0, 50, (1, 10), generator=torch.Generator().manual_seed(2))
    alt = tok.clone()
    alt[0, 6:] = (alt[0, 6:] + 1) % 50
    with torch.no_grad():
        a, b = net(tok), net(alt)
    assert torch.allclose(a[0, :6], b[0, :6]) and not torch.allclose(a[0, 6:], b[0, 6:])
    with pytest.raises(ValueError, match="backbone"):
        Tr.resolve_protocol("mqar", {"backbone": "none"}, "bl")


@pytest.mark.parametrize("backbone", ("zoology", "mlp", "mixers"))
def test_logits_only_at_the_labelled_positions_are_the_full_logits_there(backbone):
    """train.forward asks the model for the read-out at the query positions only: the same logits there
    as the full read-out, the same loss, accuracy and gradients."""
    pr = Tr.resolve_protocol("mqar", {"backbone": backbone, "variant": "block", "pool_size": 8, "d_model": 16}, "bl")
    torch.manual_seed(0)
    net = Tr.build_model("mqar", "bl", pr)
    batch = Tr.sample_train("mqar", "bl", 3, torch.Generator().manual_seed(1), protocol=pr)
    logits, labels = Tr.forward(net, "mqar", batch, pr)
    at = batch.labels != -100
    full = net(batch.tokens, batch.is_write)
    assert logits.shape == (int(at.sum()), full.shape[-1]) and labels.shape == (int(at.sum()),)
    torch.testing.assert_close(logits, full[at])
    loss, acc = Tr.loss_and_acc(logits, labels)
    ref_loss, ref_acc = Tr.loss_and_acc(full, batch.labels)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(acc, ref_acc)
    g = torch.autograd.grad(loss, list(net.parameters()), allow_unused=True)
    g_ref = torch.autograd.grad(ref_loss, list(net.parameters()), allow_unused=True)
    for a, b in zip(g, g_ref):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("heads,D,state", [(1, 64, 8192), (2, 45, 8100), (4, 32, 8192), (8, 22, 7744)])
def test_bl_heads_splits_the_same_state_budget(heads, D, state):
    """bl_heads=H: BL's mixer has H heads of the largest D = m inside the 8,192 state per layer, named in
    the run's tag (the default, 4, is not), and refused for another model or another count."""
    pr = Tr.resolve_protocol("mqar", {"bl_heads": str(heads), "variant": "block"}, "bl")
    assert pr["bl_heads"] == heads
    assert ("bl_heads" in Tr.protocol_tag("mqar", pr)) is (heads != 4)
    net = Tr.build_model("mqar", "bl", pr)
    c = net.config()
    assert (c["n_heads"], c["key_dim"], c["value_dim"]) == (heads, D, D) and c["state_sizes"] == [state, state]
    assert state <= 8192 < heads * ((D + 1) ** 2 * 2)          # one more in D and m would not fit
    tok = torch.randint(0, Mq.VOCAB, (2, 16), generator=torch.Generator().manual_seed(4))
    assert net(tok).shape == (2, 16, Mq.VOCAB)


@pytest.mark.parametrize("bad", ["3", "0", "x", "1.0", True])
def test_bad_bl_heads(bad):
    with pytest.raises(ValueError, match="protocol bl_heads must be one of 1, 2, 4, 8"):
        Tr.resolve_protocol("mqar", {"bl_heads": bad}, "bl")
    with pytest.raises(ValueError, match="protocol bl_heads: applies to bl"):
        Tr.resolve_protocol("mqar", {"bl_heads": 1}, "gdn")


@pytest.mark.parametrize("x", [0.05, 0.5, 0.005, 2])
def test_bl_noise_init_sets_where_the_noise_gates_start(x):
    """bl_noise_init=x: with the gate's weights zeroed, every token's ℓ² starts at x and r² at x + 1e-4
    (its floor), read through the mixer's own gate; named in the tag unless it is the default 0.05, and
    recorded in the model's config."""
    import torch.nn.functional as F

    pr = Tr.resolve_protocol("mqar", {"bl_noise_init": str(x), "variant": "block"}, "bl")
    assert pr["bl_noise_init"] == x
    assert ("bl_noise_init" in Tr.protocol_tag("mqar", pr)) is (x != 0.05)
    net = Tr.build_model("mqar", "bl", pr)
    assert net.config()["noise_init"] == x
    mixer = net.mixers[0]
    with torch.no_grad():
        mixer.gate.weight.zero_()
        g = mixer.gate(torch.randn(3, 5, net.d_model, generator=torch.Generator().manual_seed(1)))
    H = mixer.H
    torch.testing.assert_close(F.softplus(g[..., :H]), torch.full_like(g[..., :H], x), rtol=1e-5, atol=0)
    torch.testing.assert_close(F.softplus(g[..., H:]) + 1e-4, torch.full_like(g[..., H:], x + 1e-4), rtol=1e-5,
                               atol=0)


@pytest.mark.parametrize("bad", ["0", "-0.1", "nan", "inf", "x", "101"])
def test_bad_bl_noise_init(bad):
    with pytest.raises(ValueError, match="protocol bl_noise_init must"):
        Tr.resolve_protocol("mqar", {"bl_noise_init": bad}, "bl")
    with pytest.raises(ValueError, match="protocol bl_noise_init: applies to bl"):
        Tr.resolve_protocol("mqar", {"bl_noise_init": 0.5}, "mamba2")


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), 1e3, True, "0.5"])
def test_bl_mixer_refuses_bad_noise_init(bad):
    from assocmem.gpu.tasks.mqar_models import BLMixer

    with pytest.raises(ValueError, match="noise_init must be a number in"):
        BLMixer(32, noise_init=bad)


@pytest.mark.parametrize("opts", [{"update_order": "interleaved"}, {"update_keys": "distinct"},
                                  {"query_order": "shuffled", "filler": "random", "distinct_values": "false"}])
def test_generator_options_reach_the_pool_and_the_test_sets(opts):
    """The generator's open choices are protocol options: named in the run's tag, and every training,
    test and validation sequence is drawn with them (Update: interleaved writes put an update before the
    last initial pair in some rows, which the default never does)."""
    pr = Tr.resolve_protocol("mqar", {"variant": "update", "pool_size": 64, **opts}, "gdn-conv")
    tag = Tr.protocol_tag("mqar", pr)
    assert all(k in tag for k in opts), tag
    want = {k: pr[k] for k in opts}
    pool = Tr._mqar_pool(pr)
    assert len(pool) == 64 and all({k: getattr(c, k) for k in opts} == want for c in pool.configs)
    seen = {}
    real = Mq.build_test_sets

    def spy(variant, **kw):
        seen.update(kw)
        return real(variant, **{**kw, "n": 2})
    mp = pytest.MonkeyPatch()
    mp.setattr(Mq, "build_test_sets", spy)
    try:
        cfg = Mq.train_configs("update")[0][0]
        net = MQARModel(cfg.n_tokens, Mq.VOCAB, d_model=8, n_layers=1, n_heads=1, key_dim=4, value_dim=4).eval()
        Tr._eval_mqar(net, {"n_seqs": 2}, torch.device("cpu"), 2, pr)
    finally:
        mp.undo()
    assert {k: seen[k] for k in opts} == want
    if opts.get("update_order") == "interleaved":
        # some row writes an update (a key's second write) before the last key's first write
        b = pool.batch(slice(None))
        early = 0
        for toks, role in zip(b.tokens.tolist(), b.role.tolist()):
            keys = [t for t, r in zip(toks, role) if r == Mq.KEY]
            firsts = {k: keys.index(k) for k in keys}
            second = [i for i, k in enumerate(keys) if firsts[k] != i]
            early += bool(second) and min(second) < max(firsts.values())
        assert early > 0


def test_default_generator_options_leave_the_pool_and_the_tag_unchanged():
    """A run that names the defaults gets the pool of a run that names nothing (and the same empty tag):
    the results from before these options existed took exactly these choices."""
    pr0 = Tr.resolve_protocol("mqar", {"variant": "block", "pool_size": 32})
    pr1 = Tr.resolve_protocol("mqar", {"variant": "block", "pool_size": 32, "query_order": "zoology",
                                       "filler": "pad", "distinct_values": "true"})
    assert Tr.protocol_tag("mqar", pr0) == Tr.protocol_tag("mqar", pr1) == "variant-block__pool_size-32"
    a, b = Tr._mqar_pool(pr0).batch(slice(None)), Tr._mqar_pool(pr1).batch(slice(None))
    assert torch.equal(a.tokens, b.tokens)
    direct = Mq.train_pool("block", seed=0, n=32).batch(slice(None))
    assert torch.equal(a.tokens, direct.tokens)


@pytest.mark.parametrize("opt,val", [("update_order", "interleaved"), ("update_keys", "distinct"),
                                     ("update_train_frac", "0.5")])
def test_update_options_are_refused_without_the_update_variant(opt, val):
    with pytest.raises(ValueError, match=f"protocol {opt}: applies to variant=update, not 'block'"):
        Tr.resolve_protocol("mqar", {"variant": "block", opt: val})
    with pytest.raises(ValueError, match=f"protocol {opt}"):
        Tr.resolve_protocol("mqar", {"variant": "update", opt: "sideways"})


@pytest.mark.parametrize("frac", [0.25, 0.5])
def test_update_train_fraction_reaches_the_pool_and_the_tag_not_the_test_sets(frac):
    """``update_train_frac``: named in the run's tag; the training pool's Update mixture stops at
    ``⌊frac·P⌋`` updates; the test and validation sets still sweep 0..16 (the reading at 16 updates is then
    beyond training)."""
    pr = Tr.resolve_protocol("mqar", {"variant": "update", "pool_size": 48, "update_train_frac": str(frac)},
                             "gdn-conv")
    assert f"update_train_frac-{frac:g}" in Tr.protocol_tag("mqar", pr)
    pool = Tr._mqar_pool(pr)
    assert len(pool) == 48 and max(c.n_updates for c in pool.configs) == int(frac * 16)
    assert Tr._mqar_pool(Tr.resolve_protocol("mqar", {"variant": "update", "pool_size": 48})).configs == \
        tuple(Mq.train_configs("update")[0])
    assert "update_train_frac" not in Tr.mqar_generator(pr)          # not a test-set choice
    with pytest.raises(ValueError, match="protocol update_train_frac must lie in"):
        Tr.resolve_protocol("mqar", {"variant": "update", "update_train_frac": "2"})
