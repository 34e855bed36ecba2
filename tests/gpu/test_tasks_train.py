"""Training loop, CLI, metrics and figures of the learned tasks (sweeps: test_tasks_sweep.py).

The CI smoke test is a tiny CPU run per task (``--steps 3 --batch-size 4
--device cpu``); the BL mixer goes through the interpreted Triton kernel when
``TRITON_INTERPRET=1`` is set, else through ``naive_bl``.
"""
import json
import math

import pytest
import torch

from assocmem.gpu.tasks import cli, data as Dt, plots, train as Tr

pytestmark = pytest.mark.gpu

SMOKE = [("collision_recall", "bl"), ("random_keys", "delta"), ("swap_tracking", "deltaformer-round2")]
OTHERS = ([("collision_recall", m) for m in ("reset", "delta", "linear", "gla", "diag")]
          + [("random_keys", m) for m in ("bl", "reset", "linear", "gla", "diag")]
          + [("swap_tracking", m) for m in ("transformer-1", "deltaformer-linear", "deltaformer-softmax",
                                            "stress-round2-128")])


def _smoke(tmp_path, task, model, capsys, via_assocmem=False):
    argv = ["train", task, "--model", model, "--steps", "3", "--batch-size", "4", "--device", "cpu",
            "--out", str(tmp_path), "--no-progress"]
    if via_assocmem:            # the same run through `assocmem gpu train ...`
        from assocmem.cli import main as assocmem_main
        rc = assocmem_main(["gpu"] + argv)
    else:
        rc = cli.main(argv)
    assert rc == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["model"] == model
    r = json.loads((tmp_path / task / f"{model}_s0.json").read_text())
    p = r["provenance"]
    for key in ("command", "commit", "date", "versions", "device", "seed", "wall_s"):
        assert key in p
    assert p["device"].startswith("cpu") and p["seed"] == 0 and p["wall_s"] > 0
    assert r["steps"] == 3 and r["batch_size"] == 4 and r["curve"][-1]["step"] == 3
    assert math.isfinite(r["curve"][-1]["loss"])
    assert r["eval"] and r["eval_mode"] == "quick"
    return r


@pytest.mark.parametrize("task, model", SMOKE)
def test_cli_smoke(tmp_path, task, model, capsys):
    r = _smoke(tmp_path, task, model, capsys, via_assocmem=(task == "random_keys"))
    if task == "collision_recall":
        rows = r["eval"]["writes"] + r["eval"]["overlap"]
        assert all(0 <= row["acc_target"] <= 1 and -1 <= row["margin_target"] <= 1 for row in rows)
        assert "bl_op" in r["provenance"]


@pytest.mark.slow
@pytest.mark.parametrize("task, model", OTHERS)
def test_cli_smoke_other_models(tmp_path, task, model, capsys):
    _smoke(tmp_path, task, model, capsys)


def test_resume_continues_the_same_run(tmp_path):
    kw = dict(seed=3, batch_size=4, device="cpu", eval_mode="none", progress=False, log_every=1)
    full = Tr.train("random_keys", "linear", steps=4, out=tmp_path / "a", ckpt_every=0, **kw)
    Tr.train("random_keys", "linear", steps=2, out=tmp_path / "b", **kw)
    resumed = Tr.train("random_keys", "linear", steps=4, out=tmp_path / "b", resume=True, **kw)
    assert [c["loss"] for c in resumed["curve"]] == [c["loss"] for c in full["curve"]]
    a = Tr.load_checkpoint(tmp_path / "a" / "random_keys" / "linear_s3.ckpt.pt")["model"]
    b = Tr.load_checkpoint(tmp_path / "b" / "random_keys" / "linear_s3.ckpt.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("argv, needle", [
    (["train", "collision_recall", "--model", "mamba", "--device", "cpu"], "--model"),
    (["train", "collision_recall", "--model", "bl", "--steps", "-1", "--device", "cpu"], "--steps"),
    (["train", "random_keys", "--model", "bl", "--batch-size", "0", "--device", "cpu"], "--batch-size"),
    (["train", "swap_tracking", "--model", "bl", "--device", "cpu"], "--model"),
    (["sweep", "collision_recall", "--seeds", "a,b"], "--seeds"),
    (["sweep", "collision_recall", "--models", "bl,mamba"], "--models"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys, tmp_path):
    assert cli.main(argv + ["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


TINY = ["train", "random_keys", "--model", "linear", "--steps", "1", "--batch-size", "2", "--eval", "none",
        "--no-progress"]


def _one_line(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(n in err[0] for n in needles), err
    return err[0]


def test_default_output_is_runs_and_device_auto(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(TINY) == 0
    r = json.loads((tmp_path / "runs" / "random_keys" / "linear_s0.json").read_text())
    assert r["provenance"]["device"].startswith("cuda" if torch.cuda.is_available() else "cpu")
    assert not (tmp_path / "results").exists()
    # a finished result is not overwritten without --force, and nothing is touched
    before = (tmp_path / "runs" / "random_keys" / "linear_s0.json").read_bytes()
    capsys.readouterr()
    assert cli.main(TINY) == 2
    _one_line(capsys, "--force", "linear_s0.json")
    assert (tmp_path / "runs" / "random_keys" / "linear_s0.json").read_bytes() == before


def test_resume_needs_a_checkpoint(tmp_path, capsys):
    assert cli.main(TINY + ["--out", str(tmp_path), "--resume"]) == 2
    _one_line(capsys, "--resume", "no checkpoint")
    assert not (tmp_path / "random_keys").exists()


def test_a_checkpoint_that_runs_code_is_refused(tmp_path, capsys):
    import os

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    d = tmp_path / "random_keys"
    d.mkdir()
    torch.save({"model": Payload(), "opt": {}, "gen": None, "step": 0, "curve": []}, d / "linear_s0.ckpt.pt")
    (tmp_path / "other" / "random_keys").mkdir(parents=True)
    (tmp_path / "other" / "random_keys" / "linear_s0.ckpt.pt").write_bytes(b"not a checkpoint")
    for out in (tmp_path, tmp_path / "other"):
        assert cli.main(TINY + ["--out", str(out), "--resume"]) == 2
        _one_line(capsys, "--resume", "not an assocmem checkpoint")
    assert not (tmp_path / "PWNED").exists()
    with pytest.raises(ValueError, match="resume"):
        Tr.load_checkpoint(d / "linear_s0.ckpt.pt")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU time estimate")
def test_cpu_run_past_the_time_limit_is_refused(tmp_path, capsys):
    assert cli.main(["train", "collision_recall", "--model", "bl", "--out", str(tmp_path)]) == 2
    _one_line(capsys, "--steps 2500 (default)", "--batch-size 256 (default)", "ASSOCMEM_MAX_SECONDS")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_requested_without_gpu(tmp_path, capsys):
    assert cli.main(["train", "random_keys", "--model", "bl", "--device", "cuda", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--device" in err and "cuda" in err


def test_loss_only_on_labelled_tokens():
    b = Dt.collision_batch(3, n_f=2, generator=torch.Generator().manual_seed(0))
    logits = torch.randn(*b.labels.shape, 16, requires_grad=True)
    loss, _ = Tr.loss_and_acc(logits, b.labels)
    loss.backward()
    g = logits.grad.abs().sum(-1)
    assert float(g[~b.is_query].sum()) == 0 and bool((g[b.is_query] > 0).all())


def test_collision_metrics_by_hand():
    b = Dt.collision_batch(2, n_f=1, generator=torch.Generator().manual_seed(1))
    logits = torch.zeros(*b.labels.shape, 16)
    # every query: the target's label gets logit 2, the partner's logit 1
    rows, cols = torch.nonzero(b.is_query, as_tuple=True)
    logits[rows, cols, b.labels[rows, cols]] = 2.0
    logits[rows, cols, b.partner[rows, cols]] = 1.0
    m = Tr.collision_metrics(b, logits)
    z = math.exp(2) + math.e + 14
    assert m["acc_target"] == 1.0 and m["acc_distractor"] == 1.0 and m["n_target_queries"] == 16
    assert abs(m["margin_target"] - (math.exp(2) - math.e) / z) < 1e-12
    # now the partner wins on targets only
    tq = b.is_target
    logits[tq] = 0.0
    r2, c2 = torch.nonzero(tq, as_tuple=True)
    logits[r2, c2, b.partner[r2, c2]] = 3.0
    m = Tr.collision_metrics(b, logits)
    assert m["acc_target"] == 0.0 and m["acc_distractor"] == 1.0 and m["acc_all"] == 0.5
    assert abs(m["margin_target"] + (math.exp(3) - 1) / (math.exp(3) + 15)) < 1e-12


def _fake(tmp_path, task, model, seed, ev, curve=None, protocol=None, tag=""):
    d = tmp_path / task
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{model}{'__' + tag if tag else ''}_s{seed}.json").write_text(json.dumps(
        {"task": task, "model": model, "seed": seed, "eval": ev, "curve": curve or [{"step": 1, "acc": 0.5}],
         "protocol": protocol or {}}))


def test_plots_from_saved_results(tmp_path):
    for seed, acc in ((0, 0.9), (1, 0.7)):
        _fake(tmp_path, "collision_recall", "bl", seed,
              {"writes": [{"n_f": 1, "acc_target": acc}, {"n_f": 256, "acc_target": acc - 0.1}],
               "overlap": [{"rho": 0.95, "margin_target": acc - 0.5}]})
    _fake(tmp_path, "random_keys", "reset", 0, {"crowding": [{"n_over_D": 6.0, "ce": 2.0, "acc": 0.3}]})
    _fake(tmp_path, "swap_tracking", "transformer-2", 0, {"acc": 0.4},
          [{"step": 25, "acc": 0.3}, {"step": 50, "acc": 0.4}])
    w = plots.collision_writes_data(tmp_path)
    assert w["bl"]["x"] == [1, 256] and w["bl"]["n"] == [2, 2]
    assert abs(w["bl"]["mean"][0] - 0.8) < 1e-12 and abs(w["bl"]["sd"][0] - math.sqrt(0.02)) < 1e-12
    assert abs(plots.collision_overlap_data(tmp_path)["bl"]["mean"][0] - 0.3) < 1e-12
    assert plots.random_keys_data(tmp_path)["acc"]["reset"]["mean"] == [0.3]
    assert plots.swap_curves_data(tmp_path)["transformer-2"]["acc"] == [0.3, 0.4]
    paths = plots.render_all(tmp_path, tmp_path / "fig")
    assert {p.name for p in paths} == {f"{n}.{e}" for n in ("collision_recall", "random_keys", "swap_tracking")
                                       for e in ("pdf", "png")}
    assert all(p.stat().st_size > 1000 for p in paths)


def test_plots_keep_protocols_apart_and_draw_the_ablations(tmp_path):
    """The main figures show the default protocol only; a non-default run appears in the ablation figure."""
    for seed in (0, 1):
        _fake(tmp_path, "collision_recall", "bl", seed,
              {"writes": [{"n_f": 256, "acc_target": 1.0}], "overlap": [{"rho": 0.95, "margin_target": 0.9}]})
        _fake(tmp_path, "collision_recall", "bl", seed,
              {"writes": [{"n_f": 256, "acc_target": 0.6}], "overlap": [{"rho": 0.95, "margin_target": 0.0}]},
              protocol={"queries_write": True}, tag="queries_write-true")
    assert plots.collision_writes_data(tmp_path)["bl"]["mean"] == [1.0]          # default only
    ab = plots.ablation_data(tmp_path, "collision_recall", {"acc": ("writes", "n_f", 256, "acc_target")})
    assert ab["acc"][""]["bl"]["mean"] == 1.0 and ab["acc"]["queries_write-true"]["bl"]["mean"] == 0.6
    assert ab["acc"]["queries_write-true"]["bl"]["n"] == 2
    paths = plots.plot_ablations(tmp_path, tmp_path / "fig")
    assert {p.name for p in paths} == {"collision_recall_ablations.pdf", "collision_recall_ablations.png"}
    assert all(p.stat().st_size > 1000 for p in paths)


def test_plots_stress_and_curriculum(tmp_path):
    """Fig. 5 (stress) and Fig. 6 (curriculum) data and figures, a stopped (partial) run included."""
    _fake(tmp_path, "swap_tracking", "stress-round2-512", 0, {"acc": 0.9},
          [{"step": 25, "acc": 0.1}, {"step": 50, "acc": 0.9}])
    _fake(tmp_path, "swap_tracking", "stress-linear-512", 0, {"acc": 0.25}, [{"step": 25, "acc": 0.2}])
    d = tmp_path / "swap_tracking"
    (d / "curriculum-round2-nope_s0.json").write_text(json.dumps(
        {"task": "swap_tracking", "model": "curriculum-round2-nope", "seed": 0, "protocol": {},
         "train_settings": {"switches": [{"step": 25, "length": 64}]},
         "eval": {"acc": 0.99, "by_length": [{"length": 32, "acc": 1.0}, {"length": 256, "acc": 0.99}]},
         "curve": [{"step": 25, "acc": 0.995, "length": 32}, {"step": 50, "acc": 0.7, "length": 64}]}))
    (d / "direct-round2-nope_s0.partial.json").write_text(json.dumps(
        {"task": "swap_tracking", "model": "direct-round2-nope", "seed": 0, "step": 50,
         "curve": [{"step": 25, "acc": 0.2, "length": 256}, {"step": 50, "acc": 0.21, "length": 256}]}))
    st = plots.stress_curves_data(tmp_path)
    assert set(st) == {512} and st[512]["round2"]["acc"] == [0.1, 0.9] and st[512]["linear"]["test_acc"] == 0.25
    cu = plots.curriculum_data(tmp_path)
    assert set(cu) == {"nope"} and set(cu["nope"]) == {"curriculum-round2-nope", "direct-round2-nope"}
    assert cu["nope"]["curriculum-round2-nope"]["length"] == [32, 64]
    assert cu["nope"]["curriculum-round2-nope"]["by_length"] == {32: 1.0, 256: 0.99}
    assert cu["nope"]["direct-round2-nope"]["stopped_at"] == 50
    # the Fig. 4 figure leaves the stress and curriculum models out
    assert plots.swap_curves_data(tmp_path).keys() >= {"stress-round2-512", "curriculum-round2-nope"}
    paths = plots.render_all(tmp_path, tmp_path / "fig")
    assert {p.name for p in paths} == {f"{n}.{e}" for n in ("swap_stress", "swap_curriculum") for e in ("pdf", "png")}


def _drawn(plot, results_dir, out_dir):
    """``plot(results_dir, out_dir)`` as a reader gets it: the files it wrote and the figure they show
    (caught on its way to ``_save``, kept open)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    captured = {}
    orig = plots._save
    with pytest.MonkeyPatch.context() as monkey:
        monkey.setattr(plots, "_save", lambda fig, d, name: captured.setdefault("fig", fig) and orig(fig, d, name))
        monkey.setattr(plt, "close", lambda fig=None: None)
        paths = plot(results_dir, out_dir)
    return paths, captured["fig"]


def _bl_mixer_run(mix, h, keys):
    mix.zero_grad()
    out = mix(h, keys)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), [p.grad.clone() for p in mix.parameters()]


def test_bl_mixer_through_interpreted_kernel(interpret, monkeypatch):
    """The BL mixer's op call, forward and backward, through the interpreted Triton kernel vs naive_bl."""
    from assocmem.gpu.tasks import models as Mo

    torch.manual_seed(0)
    mix = Mo.AddressMixer("bl", d_model=8, n_heads=2, head_dim=4)
    h = torch.randn(1, 6, 8)
    keys = torch.nn.functional.normalize(torch.randn(1, 6, 4), dim=-1)
    out_k, g_k = _bl_mixer_run(mix, h, keys)
    monkeypatch.delenv("TRITON_INTERPRET")
    out_n, g_n = _bl_mixer_run(mix, h, keys)
    assert torch.isfinite(out_k).all()
    assert float((out_k - out_n).norm() / out_n.norm()) < 1e-5
    for a, b in zip(g_k, g_n):
        assert float((a - b).norm() / b.norm().clamp_min(1e-30)) < 1e-4


@pytest.mark.slow
def test_cli_smoke_bl_interpreted(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    r = _smoke(tmp_path, "collision_recall", "bl", capsys)
    assert "triton" in r["provenance"]["bl_op"]


@pytest.mark.parametrize("seed0_pick", [1e-2, 3e-3])
def test_mqar_figure_draws_a_later_seed_at_seed_0s_rate(tmp_path, seed0_pick):
    """A later seed run at two rates is drawn at the rate seed 0's validation picked, even where its other rate
    validates higher; without a run at that rate it falls back to its own best."""
    from assocmem.gpu.tasks.plots import mqar_data

    other = 3e-3 if seed0_pick == 1e-2 else 1e-2

    def run(seed, lr, acc):
        _fake(tmp_path, "mqar", "bl", seed, {"test": [{"n_pairs": p, "block_size": 2, "acc": acc} for p in (2, 16)],
                                             "val": [{"n_pairs": p, "block_size": 2, "acc": acc} for p in (2, 16)]},
              protocol={"variant": "block", "lr": lr}, tag=f"variant-block__lr-{lr}")

    run(0, seed0_pick, 0.94)
    run(0, other, 0.90)
    run(1, seed0_pick, 0.84)
    run(1, other, 0.99)
    run(2, other, 0.88)                       # seed 2 has no run at seed 0's rate: its own best
    assert mqar_data(tmp_path)["block"]["bl"]["acc"] == [0.94, 0.94]
    assert mqar_data(tmp_path, seed=1)["block"]["bl"]["acc"] == [0.84, 0.84]
    assert mqar_data(tmp_path, seed=2)["block"]["bl"]["acc"] == [0.88, 0.88]


def test_mqar_figure_takes_each_models_best_learning_rate(tmp_path):
    """Fig. 4: Base against width, Update against updates, Block against pairs; of two learning rates the
    better run is drawn, and a run with another non-default choice (a pilot's 4 epochs) is left out."""
    for lr, acc in ((1e-3, 0.5), (3e-3, 0.7)):
        _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": acc - 0.01 * u} for u in (0, 8, 16)]},
              protocol={"variant": "update", "lr": lr}, tag=f"variant-update__lr-{lr}")
    _fake(tmp_path, "mqar", "gdn", 0, {"test": [{"n_updates": u, "acc": 0.99} for u in (0, 8, 16)]},
          protocol={"variant": "update", "epochs": 4}, tag="variant-update__epochs-4")
    for w, acc in ((64, 0.3), (128, 0.6)):
        _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_pairs": 64, "acc": acc}]},
              protocol={"variant": "base", "d_model": w}, tag=f"d_model-{w}")
    # a third learning rate whose test rows are the best but whose validation is worst is not chosen
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.95} for u in (0, 8, 16)],
                                      "val": [{"n_updates": u, "acc": 0.1} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 1e-2}, tag="variant-update__lr-0.01")
    # a run under backbone=mlp (the earlier backbone) is an ablation: never the default's line, drawn dotted
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.99} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 3e-3, "backbone": "mlp"}, tag="variant-update__lr-0.003__backbone-mlp")
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.4} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 3e-3, "backbone": "mixers"},
          tag="variant-update__lr-0.003__backbone-mixers")
    # BL's own choices (its head split), tried as causes of the Block reading: dashed, never the default's line
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.3} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 3e-3, "bl_heads": 1}, tag="variant-update__lr-0.003__bl_heads-1")
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.55} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 1e-2, "bl_heads": 8}, tag="variant-update__lr-0.01__bl_heads-8")
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.45} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 3e-3, "bl_decay": True}, tag="variant-update__lr-0.003__bl_decay-true")
    # BL without its write mask (queries and filler write, as in the baselines): a candidate for the Block reading
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_updates": u, "acc": 0.35} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 1e-2, "queries_write": True},
          tag="queries_write-true__variant-update__lr-0.01")
    # a second seed: never seed 0's line (the readings are judged on seed 0), drawn thin beside it
    _fake(tmp_path, "mqar", "bl", 1, {"test": [{"n_updates": u, "acc": 0.8} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 3e-3}, tag="variant-update__lr-0.003")
    # a third seed of BL, and GDN's second: one legend entry per model names the seeds it has
    _fake(tmp_path, "mqar", "bl", 2, {"test": [{"n_updates": u, "acc": 0.75} for u in (0, 8, 16)]},
          protocol={"variant": "update", "lr": 3e-3}, tag="variant-update__lr-0.003")
    _fake(tmp_path, "mqar", "gdn", 1, {"test": [{"n_updates": u, "acc": 0.9} for u in (0, 8, 16)]},
          protocol={"variant": "update"}, tag="variant-update")
    # the Update reading's ablations: an Update-only generator option and Zoology's initialisation
    _fake(tmp_path, "mqar", "gdn-conv", 0, {"test": [{"n_updates": u, "acc": 0.97} for u in (0, 8, 16)]},
          protocol={"variant": "update", "update_order": "interleaved"}, tag="variant-update__update_order-interleaved")
    _fake(tmp_path, "mqar", "mamba2", 0, {"test": [{"n_updates": u, "acc": 0.02} for u in (0, 8, 16)]},
          protocol={"variant": "update", "init": "zoology"}, tag="variant-update__init-zoology")
    _fake(tmp_path, "mqar", "gdn-conv", 0, {"test": [{"n_updates": u, "acc": 0.93} for u in (0, 8, 16)]},
          protocol={"variant": "update", "update_keys": "distinct"}, tag="variant-update__update_keys-distinct")
    d = plots.mqar_data(tmp_path)
    assert "gdn-conv" not in d["update"] and "mamba2" not in d["update"]
    assert plots.mqar_data(tmp_path, {"update_order": "interleaved"})["update"] == {
        "gdn-conv": {"x": [0, 8, 16], "acc": [0.97] * 3}}
    assert plots.mqar_data(tmp_path, {"init": "zoology"})["update"] == {"mamba2": {"x": [0, 8, 16], "acc": [0.02] * 3}}
    assert plots.mqar_data(tmp_path, seed=1)["update"]["bl"]["acc"] == [0.8] * 3
    assert d["update"]["bl"]["x"] == [0, 8, 16] and d["update"]["bl"]["acc"] == pytest.approx([0.7, 0.62, 0.54])
    assert "gdn" not in d["update"]
    assert plots.mqar_data(tmp_path, {"backbone": "mlp"})["update"]["bl"]["acc"] == [0.99] * 3
    assert d["base"]["bl"] == {"x": [64, 128], "acc": [0.3, 0.6]}
    paths = plots.plot_mqar(tmp_path, tmp_path / "fig")
    assert {p.name for p in paths} == {"mqar.pdf", "mqar.png"} and all(p.stat().st_size > 1000 for p in paths)
    # what a reader sees: the runs, the notes' readings as labelled reference points, the 1/P line
    _, fig = _drawn(plots.plot_mqar, tmp_path, tmp_path / "fig3")
    ax_update = fig.axes[1]
    labels = ax_update.get_legend_handles_labels()[1]
    assert "BL" in labels and "BL, paper (notes' reading)" in labels and "one of the P values at random (1/P)" in labels
    ref = [ln for ln in ax_update.lines if ln.get_label() == "BL, paper (notes' reading)"][0]
    assert list(ref.get_xdata()) == [16] and list(ref.get_ydata()) == [0.88]
    # the ablations are not in Fig. 4 itself (its legend had grown to 35 entries) but in their own figure
    assert not [ln for a in fig.axes for ln in a.lines if "ablation" in ln.get_label()]
    paths, fa = _drawn(plots.plot_mqar_ablations, tmp_path, tmp_path / "fig4")
    assert {p.name for p in paths} == {"mqar_ablations.pdf", "mqar_ablations.png"}

    def ablation_line(label):
        """The one line of that label, on a panel of the Update variant, and the panel's other lines."""
        (hit,) = [(ln, a) for a in fa.axes for ln in a.lines if ln.get_label() == label]
        assert "Update (Fig. 4b)" in hit[1].get_title()
        return hit

    abl, ax = ablation_line("BL, backbone=mlp (ours before; ablation)")
    assert list(abl.get_ydata()) == [0.99] * 3 and abl.get_linestyle() == ":"
    # beside it, faded, the default protocol's BL: what the ablation moved it from
    (dflt,) = [ln for ln in ax.lines if ln.get_label() == "BL (default protocol)"]
    assert list(dflt.get_ydata()) == pytest.approx([0.7, 0.62, 0.54]) and dflt.get_alpha() < 0.5
    assert ax.get_title().startswith("backbone=mlp (ours before)")
    mix, _ = ablation_line("BL, backbone=mixers (mixers alone: no block conv, no MLP; ablation)")
    assert list(mix.get_ydata()) == [0.4] * 3 and mix.get_linestyle() == "-."
    for label, y in (("BL, bl_heads=1 (ablation)", 0.3), ("BL, bl_heads=8 (ablation: eight heads of 22)", 0.55),
                     ("BL, bl_decay=true (ablation)", 0.45),
                     ("BL, queries_write=true (ablation: BL without its write mask)", 0.35),
                     ("GDN + conv, update_order=interleaved (ablation)", 0.97), ("Mamba2, init=zoology (ablation)", 0.02),
                     ("GDN + conv, update_keys=distinct (ablation)", 0.93)):
        ln, _ = ablation_line(label)
        assert list(ln.get_ydata()) == [y] * 3 and ln.get_linestyle() == "--"
    # one legend for the figure: the models by colour and what each style means
    (legend,) = fa.legends
    assert [t.get_text() for t in legend.get_texts()][-4:] == [
        "the ablation (its marker)", "the default protocol", "the notes' reading", "one of the P values at random (1/P)"]
    s12 = [ln for ln in ax_update.lines if ln.get_label() == "BL, seeds 1, 2"]
    main = [ln for ln in ax_update.lines if ln.get_label() == "BL"][0]
    assert sorted(list(ln.get_ydata()) for ln in s12) == [[0.75] * 3, [0.8] * 3]
    assert all(ln.get_linewidth() < main.get_linewidth() for ln in s12)
    assert [list(ln.get_ydata()) for ln in ax_update.lines if ln.get_label() == "GDN, seed 1"] == [[0.9] * 3]
    # one legend, under the panels, naming every line once
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == len(set(texts)) and {"BL", "BL, seeds 1, 2", "GDN, seed 1", "BL, paper (notes' reading)"} <= set(texts)
    assert plots.plot_mqar(tmp_path / "none", tmp_path / "fig2") == []
    assert plots.plot_mqar_ablations(tmp_path / "none", tmp_path / "fig2") == [] and not (tmp_path / "fig2").exists()


def test_mqar_probe_figure_draws_the_gpu_probes_curves_per_vocabulary(tmp_path):
    """The probes' figure: panel (a) every GPU probe at vocabulary 1,024 with its settings and test accuracy
    in the legend, panel (b) Mamba2 at lr 3e-3 in the default backbone across vocabularies; CPU probes and
    other configurations are left out, and no probe draws no figure."""
    d = tmp_path / "mqar" / "probes"
    d.mkdir(parents=True)

    def probe(name, spec, vocab, lr, backbone="zoology", device="NVIDIA H200", config="24,4,1", acc=1.0):
        curve = [{"step": 100 * i, "loss": 1.0, "acc": min(1.0, 0.1 * i)} for i in range(1, 11)]
        (d / name).write_text(json.dumps({
            "settings": {"config": config, "vocab": vocab, "lr": lr, "backbone": backbone, "d_model": 128,
                         "init": "torch"}, "device_name": device,
            "runs": [{"spec": spec, "steps_done": 1000, "curve": curve,
                      "test": [{"n_pairs": 4, "n_updates": 0, "acc": acc}]}]}))

    assert plots.plot_mqar_probes(tmp_path, tmp_path / "fig") == []
    probe("a.json", "mamba2", 1024, 3e-3)
    probe("b.json", "gdn", 1024, 3e-3, acc=0.99)
    probe("c.json", "mamba2", 1024, 1e-2, backbone="mixers")
    probe("d.json", "mamba2", 256, 3e-3)
    probe("e.json", "mamba2", 1024, 3e-3, device="cpu")              # left out: a CPU probe
    probe("f.json", "mamba2", 1024, 3e-3, config="24,4,2")            # left out: another configuration
    data = plots.mqar_probe_curves_data(tmp_path)
    assert sorted(data) == [256, 1024] and len(data[1024]) == 3
    assert data[1024][0]["step"][:2] == [100, 200] and data[1024][0]["acc"][:2] == [0.1, 0.2]
    paths, fig = _drawn(plots.plot_mqar_probes, tmp_path, tmp_path / "fig")
    assert {p.name for p in paths} == {"mqar_probes.pdf", "mqar_probes.png"}
    assert all(p.stat().st_size > 1000 for p in paths)
    a, b = fig.axes
    labels_a = [ln.get_label() for ln in a.lines if not ln.get_label().startswith("_")]
    assert labels_a == ["Mamba2, zoology, lr 0.003, 1,000 steps (test 1.00)", "GDN, zoology, lr 0.003, 1,000 steps (test 0.99)",
                        "Mamba2, mixers, lr 0.01, 1,000 steps (test 1.00)"]
    labels_b = [ln.get_label() for ln in b.lines if not ln.get_label().startswith("_")]
    assert labels_b == ["Mamba2, zoology, lr 0.003, 1,000 steps, vocabulary 256 (test 1.00)",
                        "Mamba2, zoology, lr 0.003, 1,000 steps, vocabulary 1,024 (test 1.00)"]
    (ln,) = [ln for ln in a.lines if ln.get_label().startswith("GDN")]
    assert list(ln.get_xdata())[-1] == 1000 and list(ln.get_ydata())[-1] == 1.0
    assert [ln.get_ydata()[0] for ln in a.lines if ln.get_label().startswith("_")] == [0.25]   # the 1/P line
    assert a.get_xlim()[1] == 1000          # no curve longer than 1,000 steps: the panel ends with them
    # a probe at a vocabulary of 2,048 or more opens a third panel, and it is not drawn in panel (a)
    probe("g.json", "mamba2", 8192, 1e-2, acc=0.0)
    _, fig = _drawn(plots.plot_mqar_probes, tmp_path, tmp_path / "fig")
    a, b, c = fig.axes
    assert [ln.get_label() for ln in c.lines if not ln.get_label().startswith("_")] == [
        "Mamba2, zoology, lr 0.01, 1,000 steps, vocabulary 8,192 (test 0.00)"]
    assert len([ln for ln in a.lines if not ln.get_label().startswith("_")]) == 3


@pytest.mark.parametrize("stuck_width", [64, 256])
def test_mqar_base_panel_marks_a_run_that_did_not_learn_and_draws_one_in_p(tmp_path, stuck_width):
    """Fig. 4a: a Base run whose training accuracy ended below 1/64 on its own pool is drawn with a cross
    and a label saying it did not learn (a failed rate, not a reading of the model); the others are not;
    the 1/P line (1/64) spans the widths."""
    for w in (64, 128, 256):
        train = 0.013 if w == stuck_width else 0.9
        _fake(tmp_path, "mqar", "gdn", 0, {"test": [{"n_pairs": 64, "acc": 0.0001 if w == stuck_width else 0.8}]},
              curve=[{"step": 25 * i, "acc": train} for i in range(1, 10)],
              protocol={"variant": "base", "d_model": w, "lr": 3e-3}, tag=f"d_model-{w}__lr-0.003")
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_pairs": 64, "acc": 0.83}]},
          curve=[{"step": 25, "acc": 0.99}], protocol={"variant": "base", "lr": 3e-3}, tag="lr-0.003")
    d = plots.mqar_data(tmp_path)
    assert d["base"]["gdn"]["did_not_learn"] == [stuck_width] and "did_not_learn" not in d["base"]["bl"]
    _, fig = _drawn(plots.plot_mqar, tmp_path, tmp_path / "fig")
    ax = fig.axes[0]
    marks = [ln for ln in ax.lines if "did not learn" in ln.get_label()]
    assert len(marks) == 1 and marks[0].get_label().startswith("GDN: did not learn")
    assert list(marks[0].get_xdata()) == [stuck_width] and list(marks[0].get_ydata()) == [0.0001]
    assert marks[0].get_marker() == "x"
    chance = [ln for ln in ax.lines if ln.get_label() == "one of the P values at random (1/P)"][0]
    assert list(chance.get_xdata()) == [64, 128, 256] and list(chance.get_ydata()) == [pytest.approx(1 / 64)] * 3
    line = [ln for ln in ax.lines if ln.get_label() == "GDN"][0]
    assert list(line.get_xdata()) == [w for w in (64, 128, 256) if w != stuck_width]   # not joined to the cross


def test_mqar_update_panel_draws_the_training_range_ablation(tmp_path):
    """An Update run trained on at most half as many updates as pairs (``update_train_frac=0.5``) is an
    ablation: never the default's line, drawn dashed beside it with a label that says what it trained on."""
    _fake(tmp_path, "mqar", "gdn-conv", 0, {"test": [{"n_updates": u, "acc": 1.0} for u in (0, 8, 16)]},
          protocol={"variant": "update"}, tag="variant-update")
    _fake(tmp_path, "mqar", "gdn-conv", 0, {"test": [{"n_updates": u, "acc": a} for u, a in ((0, 1.0), (8, 0.9),
                                                                                              (16, 0.6))]},
          protocol={"variant": "update", "update_train_frac": 0.5}, tag="variant-update__update_train_frac-0.5")
    assert plots.mqar_data(tmp_path)["update"]["gdn-conv"]["acc"] == [1.0, 1.0, 1.0]
    assert plots.mqar_data(tmp_path, {"update_train_frac": 0.5})["update"]["gdn-conv"]["acc"] == [1.0, 0.9, 0.6]
    _, fig = _drawn(plots.plot_mqar_ablations, tmp_path, tmp_path / "fig")
    (ax,) = fig.axes[:1]
    ln = [x for x in ax.lines if x.get_label().startswith("GDN + conv, update_train_frac=0.5")]
    assert len(ln) == 1 and ln[0].get_linestyle() == "--" and list(ln[0].get_ydata()) == [1.0, 0.9, 0.6]
    assert "at most 8 updates" in ln[0].get_label() and "Update (Fig. 4b)" in ax.get_title()
    assert len([a for a in fig.axes if a.get_visible()]) == 1             # one ablation, one panel


def test_mqar_width_ablation_is_drawn_on_update_and_block_not_on_base(tmp_path):
    """Panels b/c at width 64 (the paper gives no width for them) are an ablation of those panels: drawn
    dashed there; Base's own width row (its x-axis) is not repeated as one."""
    for w in (64, 128):
        tag = "" if w == 128 else f"d_model-{w}__"
        pr = {"variant": "base", "lr": 3e-3, **({} if w == 128 else {"d_model": w})}
        _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_pairs": 64, "acc": 0.8 if w == 128 else 0.15}]},
              protocol=pr, tag=f"{tag}lr-0.003")
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_pairs": p, "acc": 1.0} for p in (2, 16)]},
          protocol={"variant": "block"}, tag="variant-block")
    _fake(tmp_path, "mqar", "bl", 0, {"test": [{"n_pairs": p, "acc": a} for p, a in ((2, 1.0), (16, 0.7))]},
          protocol={"variant": "block", "d_model": 64}, tag="variant-block__d_model-64")
    d64 = plots.mqar_data(tmp_path, {"d_model": 64})
    assert "base" not in d64 and d64["block"]["bl"] == {"x": [2, 16], "acc": [1.0, 0.7]}
    assert plots.mqar_data(tmp_path)["block"]["bl"]["acc"] == [1.0, 1.0]
    _, fig = _drawn(plots.plot_mqar_ablations, tmp_path, tmp_path / "fig")
    shown = [a for a in fig.axes if a.get_visible()]
    assert len(shown) == 1 and "Block (Fig. 4c)" in shown[0].get_title()     # no Base panel for it
    (ln,) = [x for x in shown[0].lines if x.get_label().startswith("BL, width 64")]
    assert list(ln.get_ydata()) == [1.0, 0.7] and ln.get_linestyle() == "--"
