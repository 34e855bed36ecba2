"""Figures of the learned tasks, rebuilt from the saved result JSONs.

Each figure has a ``*_data(results_dir)`` function (what is plotted: mean and
standard deviation over seeds, per model and setting; the tests check these)
and a ``plot_*`` function writing PDF and PNG.  ``render_all(results_dir,
out_dir)`` draws every figure whose results exist.

* ``collision_writes``  — BL Fig. 3(c): target accuracy vs distractor writes ``n_f`` at ρ = 0.80;
* ``collision_overlap`` — BL Fig. 3(d): target margin vs overlap ρ at ``n_f = 64``;
* ``random_keys``       — BL Fig. 7: cross-entropy and accuracy vs ``n/D``;
* ``swap_curves``       — AM Fig. 4: training accuracy vs step, Transformers vs DeltaFormers;
* ``stress_curves``     — AM Fig. 5: the fixed-key stress test, round vs linear κ1 at n = 128, 256, 512;
* ``*_ablations``       — issue 14: each protocol choice of ours that could cause a disagreement,
  as bars per (protocol, model) (collision recall, random keys) and the swap-tracking
  width and stress-test variants; the other figures show the default protocol only;
* ``curriculum_curves`` — AM Fig. 6: training accuracy at the current training length vs step,
  curriculum 32 → 256 vs direct training at 256, NoPE and RoPE.  Runs stopped at a
  time limit (``*.partial.json``, no evaluation) are drawn too, marked as stopped;
* ``mqar``              — BL Fig. 4a-c, the default protocol (later seeds thin) and the notes' readings;
  ``mqar_ablations`` the protocol ablations, one small panel each beside the default (issue 16).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np

LABELS = {"bl": "BL", "reset": "Reset (cov. reset)", "delta": "Delta", "linear": "Linear attn.",
          "gla": "GLA-style", "diag": "BL diag. cov."}
COLORS = {"bl": "#1f4e9c", "diag": "#4aa3df", "reset": "#d1495b", "delta": "#8d1e2d",
          "linear": "#edae49", "gla": "#66a182"}


def load_results(results_dir, task: str, tag: Optional[str] = "") -> list[dict]:
    """The finished result JSONs of ``task`` under ``results_dir/task`` run under the protocol
    ``tag`` ('' = the default protocol; None = every protocol, each record with ``_tag``).
    Results that record no protocol are left out."""
    from .train import result_tag

    d = Path(results_dir) / task
    out = []
    for p in sorted(d.glob("*.json")):
        r = json.loads(p.read_text(encoding="utf-8"))
        if r.get("task") != task or not r.get("eval"):
            continue
        t = result_tag(task, r)
        if t is None or (tag is not None and t != tag):
            continue
        out.append({**r, "_tag": t})
    return out


def _stats(values):
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size)}


def _by_model(results, section, xkey, ykey):
    """{model: {"x": [...], "mean": [...], "sd": [...], "n": [...]}} pooled over seeds."""
    acc = defaultdict(lambda: defaultdict(list))
    for r in results:
        for row in r["eval"].get(section, []):
            acc[r["model"]][row[xkey]].append(row[ykey])
    out = {}
    for model, per_x in acc.items():
        xs = sorted(per_x)
        st = [_stats(per_x[x]) for x in xs]
        out[model] = {"x": xs, "mean": [s["mean"] for s in st], "sd": [s["sd"] for s in st],
                      "n": [s["n"] for s in st]}
    return out


def collision_writes_data(results_dir) -> dict:
    return _by_model(load_results(results_dir, "collision_recall"), "writes", "n_f", "acc_target")


def collision_overlap_data(results_dir) -> dict:
    return _by_model(load_results(results_dir, "collision_recall"), "overlap", "rho", "margin_target")


def random_keys_data(results_dir) -> dict:
    res = load_results(results_dir, "random_keys")
    return {"ce": _by_model(res, "crowding", "n_over_D", "ce"), "acc": _by_model(res, "crowding", "n_over_D", "acc")}


def swap_curves_data(results_dir) -> dict:
    """{model: {"step": [...], "acc": [...], "test_acc": float}} (seed 0 when several)."""
    out = {}
    for r in sorted(load_results(results_dir, "swap_tracking"), key=lambda r: r["seed"]):
        if r["model"] in out:
            continue
        out[r["model"]] = {"step": [c["step"] for c in r["curve"]], "acc": [c["acc"] for c in r["curve"]],
                           "test_acc": r["eval"].get("acc")}
    return out


def load_partials(results_dir, task: str) -> list[dict]:
    """Records of runs stopped at a time limit (``*.partial.json``: the curve so far, no evaluation)."""
    d = Path(results_dir) / task
    out = []
    for p in sorted(d.glob("*.partial.json")):
        r = json.loads(p.read_text(encoding="utf-8"))
        if r.get("task") == task:
            out.append(r)
    return out


def stress_curves_data(results_dir) -> dict:
    """{n: {κ1: {"step", "acc", "test_acc"}}} of the ``stress-<κ1>-<n>`` runs (seed 0 when several)."""
    out: dict = {}
    for r in sorted(load_results(results_dir, "swap_tracking"), key=lambda r: r["seed"]):
        if not r["model"].startswith("stress-"):
            continue
        _, kappa, n = r["model"].split("-")
        out.setdefault(int(n), {}).setdefault(kappa, {"step": [c["step"] for c in r["curve"]],
                                                      "acc": [c["acc"] for c in r["curve"]],
                                                      "test_acc": r["eval"].get("acc")})
    return out


def curriculum_data(results_dir) -> dict:
    """{pos: {model: {...}}} of the ``{curriculum,direct}-<κ1>-<pos>`` runs (seed 0 when several).

    Each entry: ``step``, ``acc`` (training accuracy at the current length),
    ``length`` (the training length of each logged step), ``switches``, and
    either ``by_length`` (test accuracy per length) for a finished run or
    ``stopped_at`` (the last checkpointed step) for a run stopped at a time limit.
    """
    from .names import CURRICULUM_MODELS

    out: dict = {}
    recs = [(r, False) for r in sorted(load_results(results_dir, "swap_tracking"), key=lambda r: r["seed"])]
    recs += [(r, True) for r in sorted(load_partials(results_dir, "swap_tracking"), key=lambda r: r["seed"])]
    for r, partial in recs:
        m = r["model"]
        if m not in CURRICULUM_MODELS:
            continue
        pos = m.rsplit("-", 1)[1]
        if m in out.get(pos, {}):
            continue
        cur = r["curve"]
        e = {"step": [c["step"] for c in cur], "acc": [c["acc"] for c in cur],
             "length": [c.get("length") for c in cur]}
        if partial:
            e["stopped_at"] = r["step"]
            e["switches"] = (r.get("curriculum") or {}).get("switches", [])
        else:
            e["by_length"] = {row["length"]: row["acc"] for row in r["eval"].get("by_length", [])}
            e["switches"] = r["train_settings"].get("switches", [])
        out.setdefault(pos, {})[m] = e
    return out


def _pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported on use: matplotlib is optional)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _style():
    try:
        from assocmem.style import STYLE
        return STYLE
    except Exception:       # the figures layer is optional here
        return {}


def _order(models):
    known = [m for m in LABELS if m in models]
    return known + sorted(m for m in models if m not in LABELS)


def _lines(ax, data, logx=False):
    for m in _order(data):
        d = data[m]
        x, y, sd = np.array(d["x"], float), np.array(d["mean"]), np.array(d["sd"])
        ax.plot(x, y, marker="o", ms=2.5, color=COLORS.get(m), label=f"{LABELS.get(m, m)} (n={max(d['n'])})")
        if np.any(sd > 0):
            ax.fill_between(x, y - sd, y + sd, color=COLORS.get(m), alpha=0.15, lw=0)
    if logx:
        ax.set_xscale("log", base=2)


def _save(fig, out_dir, name):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in ("pdf", "png"):
        p = out / f"{name}.{fmt}"
        fig.savefig(p)
        paths.append(p)
    return paths


def plot_collision(results_dir, out_dir) -> list[Path]:
    plt = _pyplot()

    w, o = collision_writes_data(results_dir), collision_overlap_data(results_dir)
    if not w:
        return []
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, 2, figsize=(6.8, 2.5))
        _lines(axs[0], w, logx=True)
        axs[0].set_xlabel("distractor writes $n_f$ (ρ = 0.80; trained ≤ 8)")
        axs[0].set_ylabel("target accuracy")
        axs[0].set_ylim(-0.02, 1.02)
        axs[0].axvline(8, color="0.6", lw=0.6, ls=":")
        _lines(axs[1], o)
        axs[1].axhline(0, color="0.3", lw=0.6)
        axs[1].axvline(0.80, color="0.6", lw=0.6, ls=":")
        axs[1].set_xlabel("overlap ρ ($n_f$ = 64; trained ρ ≤ 0.80)")
        axs[1].set_ylabel("target margin Δ")
        axs[0].legend(fontsize=6)
        fig.suptitle("Learned collision recall (BL Fig. 3c, 3d): mean ± sd over seeds", fontsize=8, y=1.02)
        paths = _save(fig, out_dir, "collision_recall")
        plt.close(fig)
    return paths


def plot_random_keys(results_dir, out_dir) -> list[Path]:
    plt = _pyplot()

    d = random_keys_data(results_dir)
    if not d["ce"]:
        return []
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, 2, figsize=(6.8, 2.5))
        _lines(axs[0], d["ce"])
        _lines(axs[1], d["acc"])
        for ax in axs:
            ax.axvline(4, color="0.6", lw=0.6, ls=":")
            ax.set_xlabel("keys per head dimension n/D (trained ≤ 4)")
        axs[0].set_ylabel("query cross-entropy")
        axs[1].set_ylabel("query accuracy")
        axs[1].legend(fontsize=6)
        fig.suptitle("Random-key crowding (BL Fig. 7)", fontsize=8, y=1.02)
        paths = _save(fig, out_dir, "random_keys")
        plt.close(fig)
    return paths


def plot_swap(results_dir, out_dir) -> list[Path]:
    plt = _pyplot()

    from .names import CURRICULUM_MODELS

    d = swap_curves_data(results_dir)
    d = {m: v for m, v in d.items() if not m.startswith("stress-") and m not in CURRICULUM_MODELS}
    if not d:
        return []
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, 2, figsize=(6.8, 2.5), sharey=True)
        cm = plt.get_cmap("viridis")
        tr = sorted((m for m in d if m.startswith("transformer-")), key=lambda m: int(m.split("-")[1]))
        df = [m for m in d if m.startswith("deltaformer-")]
        for i, m in enumerate(tr):
            axs[0].plot(d[m]["step"], d[m]["acc"], color=cm(i / max(len(tr), 1)), label=m.replace("transformer-", "") + " layers")
        for i, m in enumerate(sorted(df)):
            # linear and round2 curves nearly coincide: draw one dashed so both stay visible
            ls = "--" if m.endswith("linear") else "-"
            axs[1].plot(d[m]["step"], d[m]["acc"], ls=ls, color=plt.get_cmap("tab10")(i),
                        label="κ1 = " + m.split("-", 1)[1])
        axs[0].set_title("Transformer (softmax attention, RoPE)")
        axs[1].set_title("DeltaFormer (κ2 = softmax)")
        for ax in axs:
            ax.set_xlabel("training step")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6)
        axs[0].set_ylabel("training accuracy")
        fig.suptitle("Swap tracking, 5 elements, length 16 (AM Fig. 4)", fontsize=8, y=1.04)
        paths = _save(fig, out_dir, "swap_tracking")
        plt.close(fig)
    return paths


def plot_stress(results_dir, out_dir) -> list[Path]:
    from .data import no_tracking_accuracy

    plt = _pyplot()

    d = stress_curves_data(results_dir)
    if not d:
        return []
    ns = sorted(d)
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, len(ns), figsize=(2.4 * len(ns), 2.3), sharey=True, squeeze=False)
        for ax, n in zip(axs[0], ns):
            for kappa, color in (("round2", "#1f4e9c"), ("linear", "#d1495b")):
                if kappa in d[n]:
                    e = d[n][kappa]
                    lab = f"κ1 = {kappa} (test {e['test_acc']:.2f})" if e["test_acc"] is not None else kappa
                    ax.plot(e["step"], e["acc"], color=color, label=lab)
            ax.axhline(1.0 / n, color="0.6", lw=0.6, ls=":")
            ax.axhline(no_tracking_accuracy(n, 2 * n), color="0.3", lw=0.7, ls="--",
                       label="no tracking (initial element)")
            ax.set_title(f"d = 128, n = {n} ({3 * n} tokens)")
            ax.set_xlabel("training step")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=6)
        axs[0][0].set_ylabel("training accuracy")
        fig.suptitle("Swap-tracking stress test, fixed near-orthogonal keys (AM Fig. 5)", fontsize=8, y=1.04)
        paths = _save(fig, out_dir, "swap_stress")
        plt.close(fig)
    return paths


def plot_curriculum(results_dir, out_dir) -> list[Path]:
    plt = _pyplot()

    d = curriculum_data(results_dir)
    if not d:
        return []
    pos_order = [p for p in ("nope", "rope") if p in d]
    len_colors = {32: "#66a182", 64: "#edae49", 128: "#d1495b", 256: "#1f4e9c"}
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, len(pos_order), figsize=(3.4 * len(pos_order), 2.6), sharey=True,
                                squeeze=False)
        for ax, pos in zip(axs[0], pos_order):
            for m in sorted(d[pos]):
                e = d[pos][m]
                arm, kappa, _ = m.split("-")
                ls = "-" if kappa == "round2" else "--"
                step, acc, L = np.array(e["step"]), np.array(e["acc"]), e["length"]
                if arm == "direct":
                    ax.plot(step, acc, color="0.45", ls=ls, lw=0.9)
                else:
                    # one segment per training length (Fig. 6's coloured stages)
                    for Lv in sorted(set(L)):
                        idx = np.array([x == Lv for x in L])
                        ax.plot(np.where(idx, step, np.nan), np.where(idx, acc, np.nan),
                                color=len_colors.get(Lv, "k"), ls=ls, lw=0.9)
                if "stopped_at" in e:
                    ax.annotate(f"stopped at {e['stopped_at']}", (step[-1], acc[-1]), fontsize=5,
                                xytext=(2, 2), textcoords="offset points")
            ax.set_title("NoPE" if pos == "nope" else "RoPE")
            ax.set_xlabel("training step")
            ax.axhline(0.2, color="0.7", lw=0.5, ls=":")
            ax.set_ylim(-0.02, 1.02)
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], color=c, label=f"curriculum, length {L}") for L, c in len_colors.items()]
        handles += [Line2D([], [], color="0.45", label="direct, length 256"),
                    Line2D([], [], color="k", ls="-", label="κ1 = round2"),
                    Line2D([], [], color="k", ls="--", label="κ1 = linear")]
        axs[0][-1].legend(handles=handles, fontsize=5, loc="lower right")
        axs[0][0].set_ylabel("training accuracy at the current length")
        fig.suptitle("Swap tracking, length curriculum 32 → 256 vs direct 256 (AM Fig. 6)", fontsize=8, y=1.04)
        paths = _save(fig, out_dir, "swap_curriculum")
        plt.close(fig)
    return paths


# ---------------------------------------------------------------------------
# protocol ablations (issue 14): one bar per (protocol, model), mean ± sd over seeds
# ---------------------------------------------------------------------------
ABLATION_LABELS = {
    "": "default\n(queries read only)", "queries_write-true": "queries\nwrite", "gates-head": "per-head\ngates",
    "n_layers-1": "one\nlayer", "opening_rounds-1": "opening\nround", "gates-head__n_layers-1": "per-head gates,\none layer",
    "gates-head__reset_l2-0.05": "per-head gates,\nreset ℓ² = 0.05", "p0-0.1": "p0 = 0.1", "p0-10.0": "p0 = 10",
    "bl_decay-true": "learned\ndecay", "train_n-16.32.64.128.256": "trained to\nn = 256", "calibrated": "default,\ncalibrated",
}
ABLATION_MODELS = ("bl", "delta", "reset")


def _row(r, section, xkey, x, ykey):
    return next((row[ykey] for row in r["eval"].get(section, []) if row[xkey] == x and ykey in row), None)


def ablation_data(results_dir, task: str, metrics: dict, models=ABLATION_MODELS, calibrated: bool = False) -> dict:
    """``{metric: {tag: {model: stats}}}`` over every protocol present for ``models``.

    ``metrics``: ``{name: (section, xkey, x, ykey)}``; ``calibrated`` adds the pseudo-protocol
    ``"calibrated"`` (the default runs' temperature-calibrated cross-entropy, ``ce_cal``).
    """
    res = [r for r in load_results(results_dir, task, tag=None) if r["model"] in models]
    out: dict = {name: {} for name in metrics}
    for name, (section, xkey, x, ykey) in metrics.items():
        per = defaultdict(lambda: defaultdict(list))
        for r in res:
            v = _row(r, section, xkey, x, ykey)
            if v is not None:
                per[r["_tag"]][r["model"]].append(v)
            if calibrated and r["_tag"] == "" and ykey == "ce":
                c = _row(r, section, xkey, x, "ce_cal")
                if c is not None:
                    per["calibrated"][r["model"]].append(c)
        out[name] = {t: {m: _stats(v) for m, v in ms.items()} for t, ms in per.items()}
    return out


def _tag_order(tags):
    known = [t for t in ABLATION_LABELS if t in tags]
    return known + sorted(t for t in tags if t not in ABLATION_LABELS)


def _bars(ax, data, models=ABLATION_MODELS):
    tags = _tag_order(data)
    w = 0.8 / len(models)
    for j, m in enumerate(models):
        xs, ys, es, ns = [], [], [], []
        for i, t in enumerate(tags):
            if m in data[t]:
                st = data[t][m]
                xs.append(i + (j - (len(models) - 1) / 2) * w)
                ys.append(st["mean"])
                es.append(st["sd"])
                ns.append(st["n"])
        ax.bar(xs, ys, w, yerr=es, color=COLORS.get(m), label=LABELS.get(m, m), error_kw={"lw": 0.6})
        for x, y, n in zip(xs, ys, ns):
            ax.annotate(str(n), (x, y), fontsize=4, ha="center", va="bottom", xytext=(0, 1),
                        textcoords="offset points")
    ax.set_xticks(range(len(tags)))
    ax.set_xticklabels([ABLATION_LABELS.get(t, t) for t in tags], fontsize=5)


def plot_ablations(results_dir, out_dir) -> list[Path]:
    """Issue 14's protocol ablations: collision recall, random keys, swap tracking."""
    plt = _pyplot()
    paths = []
    col = ablation_data(results_dir, "collision_recall",
                        {"acc": ("writes", "n_f", 256, "acc_target"), "margin": ("overlap", "rho", 0.95, "margin_target")})
    if len(col["acc"]) > 1:                      # an ablation figure needs more than the default protocol
        with plt.rc_context(_style()):
            fig, axs = plt.subplots(2, 1, figsize=(6.8, 4.4))
            _bars(axs[0], col["acc"])
            axs[0].set_ylabel("target accuracy, $n_f$ = 256")
            axs[0].axhspan(0.6, 0.9, color="0.9", lw=0, zorder=0)
            axs[0].text(0.995, 0.75, "paper's Delta/reset ≈ 0.75", transform=axs[0].get_yaxis_transform(),
                        ha="right", fontsize=5, color="0.4")
            _bars(axs[1], col["margin"])
            axs[1].axhline(0, color="0.3", lw=0.6)
            axs[1].set_ylabel("target margin, ρ = 0.95")
            axs[0].legend(fontsize=6, ncol=3, loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False)
            fig.suptitle("Collision recall under each protocol choice (numbers: seeds)", fontsize=8)
            fig.tight_layout()
            paths += _save(fig, out_dir, "collision_recall_ablations")
            plt.close(fig)
    rk = ablation_data(results_dir, "random_keys", {"ce12": ("crowding", "n_over_D", 12.0, "ce"),
                                                    "ce16": ("crowding", "n_over_D", 16.0, "ce")}, calibrated=True)
    if len([t for t in rk["ce16"] if t != "calibrated"]) > 1:
        with plt.rc_context(_style()):
            fig, axs = plt.subplots(2, 1, figsize=(6.8, 4.4))
            for ax, key, nd in ((axs[0], "ce12", 12), (axs[1], "ce16", 16)):
                _bars(ax, rk[key])
                ax.set_ylabel(f"cross-entropy, n/D = {nd}")
                lo = min(st["mean"] for ms in rk[key].values() for st in ms.values())
                ax.set_ylim(lo - 0.4, None)
            axs[0].legend(fontsize=6, ncol=3, loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False)
            fig.suptitle("Random keys under each protocol choice (lower is better; numbers: seeds)", fontsize=8)
            fig.tight_layout()
            paths += _save(fig, out_dir, "random_keys_ablations")
            plt.close(fig)
    sw = load_results(results_dir, "swap_tracking", tag=None)
    if sw:
        paths += _plot_swap_ablations(plt, sw, out_dir)
    return paths


def _plot_swap_ablations(plt, sw, out_dir) -> list[Path]:
    last = lambda r: r["curve"][-1]["acc"]            # noqa: E731  (Figs. 4-6 plot training accuracy)
    width = defaultdict(dict)
    for r in sw:
        if r["model"].startswith("transformer-") and r["seed"] == 0:
            pr = r["protocol"]
            d = (pr.get("d_model", 128), pr.get("pos", "rope"), pr.get("supervision", "every"))
            width[d][int(r["model"].split("-")[1])] = last(r)
    stress = {}
    for r in sw:
        if r["model"] in ("stress-round2-512", "stress-linear-512") and r["seed"] == 0:
            keys, read = r["protocol"].get("stress_keys", "random"), r["protocol"].get("stress_read", "softmax")
            stress[(r["model"].split("-")[1], keys, read)] = last(r)
    if len(width) < 2 and not any(k != "random" or r != "softmax" for _, k, r in stress):
        return []
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, 2, figsize=(6.8, 2.5))
        cm = plt.get_cmap("viridis")
        plain = sorted(d for d in width if d[1:] == ("rope", "every"))
        for d in sorted(width):
            Ls = sorted(width[d])
            other = d[1:] != ("rope", "every")
            label = f"width {d[0]}" + (", no position encoding" if d[1] == "nope" else "") + \
                (", loss at the last token" if d[2] == "last" else "")
            color = "0.35" if other else cm(plain.index(d) / max(len(plain), 1))
            axs[0].plot(Ls, [width[d][L] for L in Ls], marker="s" if d[2] == "last" else "o", ms=2.5, color=color,
                        ls="--" if other else "-", label=label)
        axs[0].axhline(0.5, color="0.6", lw=0.6, ls=":")
        axs[0].set_xscale("log", base=2)
        axs[0].set_xlabel("Transformer layers")
        axs[0].set_ylabel("final training accuracy")
        axs[0].set_title("swap tracking (AM Fig. 4): paper ≈ 0.4 at every depth", fontsize=6)
        axs[0].legend(fontsize=5)
        combos = [("random", "softmax"), ("random", "linear"), ("rounding_exact", "softmax"), ("rounding_exact", "linear")]
        for j, (kappa, color) in enumerate((("round2", "#1f4e9c"), ("linear", "#d1495b"))):
            xs = [i + (j - 0.5) * 0.38 for i, c in enumerate(combos) if (kappa,) + c in stress]
            ys = [stress[(kappa,) + c] for c in combos if (kappa,) + c in stress]
            axs[1].bar(xs, ys, 0.38, color=color, label=f"κ1 = {kappa}")
        axs[1].set_xticks(range(len(combos)))
        axs[1].set_xticklabels([f"{'exact' if k != 'random' else 'random'} keys,\n{r} read"
                                for k, r in combos], fontsize=5)
        axs[1].axhline(0.9, color="0.6", lw=0.6, ls=":")
        from .data import no_tracking_accuracy
        axs[1].axhline(no_tracking_accuracy(512, 1024), color="0.3", lw=0.6, ls="--")
        axs[1].text(3.45, no_tracking_accuracy(512, 1024) + 0.02, "no tracking", fontsize=5, ha="right", color="0.3")
        axs[1].set_ylabel("final training accuracy")
        axs[1].set_title("stress test n = 512, d = 128 (AM Fig. 5): paper ≥ 0.9 for round", fontsize=6)
        axs[1].legend(fontsize=5)
        fig.tight_layout()
        paths = _save(fig, out_dir, "swap_ablations")
        plt.close(fig)
    return paths


def dag_curves_by_seed(results_dir) -> dict:
    """{tag: {model: {seed: {"step", "acc", "status"}}}} of the reachability runs under every protocol and seed:
    finished, diverged ("diverged") and stopped at a time limit ("stopped"; a partial record carries no
    protocol block, its tag is read from its file name)."""
    from .train import result_tag

    d = Path(results_dir) / "dag_reachability"
    out: dict = {}
    if not d.is_dir():
        return out
    for p in sorted(d.glob("*.json")):
        r = json.loads(p.read_text(encoding="utf-8"))
        if r.get("task") != "dag_reachability" or not isinstance(r.get("seed"), int) or not r.get("curve"):
            continue
        if p.name.endswith(".partial.json"):
            stem = p.name[: -len(".partial.json")].rsplit("_s", 1)[0]
            tag, status = stem[len(r["model"]) + 2:] if stem != r["model"] else "", "stopped"
        else:
            tag = result_tag("dag_reachability", r)
            if tag is None:
                continue
            status = r.get("status") or "finished"
        c = r["curve"]
        out.setdefault(tag, {}).setdefault(r["model"], {})[r["seed"]] = {
            "step": [x["step"] for x in c], "acc": [x["acc"] for x in c], "status": status}
    return out


def dag_curves_data(results_dir) -> dict:
    """{tag: {model: {"step", "acc", "status"}}} of the seed-0 runs (Fig. 7 and the claim read seed 0)."""
    out: dict = {}
    for tag, models in dag_curves_by_seed(results_dir).items():
        for m, by_seed in models.items():
            if 0 in by_seed:
                out.setdefault(tag, {})[m] = by_seed[0]
    return out


# panel titles, in reading order (the figure draws its panels in this order): the default, the root's
# position, then the ablations as they were added
DAG_TAG_LABELS = {
    "": 'default: two-token edges, unit keys, root first',
    'root_position-last': 'root last',
    'root_position-last__deltaformer_keys-raw': 'raw keys, root last',
    'deltaformer_keys-raw': 'raw DeltaFormer keys',
    'edge_tokens-single': 'one-token edges',
    'edge_tokens-single__deltaformer_keys-raw': 'one-token edges, raw keys',
    'edge_tokens-single__edge_embedding-factored':
        'one-token edges, E_from[u] + E_to[v]',
    'edge_tokens-single__edge_embedding-factored__lr-0.001':
        'E_from[u] + E_to[v] edges, lr 1e-3',
    'edge_tokens-single__edge_embedding-factored__deltaformer_write-query':
        'E_from[u] + E_to[v] edges, write query w_t',
    'edge_tokens-single__output-per_node__edge_embedding-factored':
        'E_from[u] + E_to[v] edges, per-node read-out\n(no write query)',
    'output-per_node__deltaformer_write-query': 'write query, per-node read-out\n(two-token edges)',
    'output-per_node': 'per-node read-out alone',
    'edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query':
        'all three: E_from[u] + E_to[v] edges,\nwrite query, per-node read-out',
    'edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__lr-0.001':
        'all three, lr 1e-3',
    'edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-1':
        'all three, one head of 128 dimensions',
    'edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__deltaformer_beta-signed':
        'all three, signed β in (−2, 2)',
    'edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-1'
    '__deltaformer_beta-signed': 'all three, signed β, one head of 128',
    'edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-2'
    '__deltaformer_beta-signed': 'all three, signed β, two heads of 64',
}


def _dag_style(plt, model):
    """(colour, legend label) of a reachability model, the same in every DAG figure."""
    if model.startswith("transformer-"):
        L = int(model.split("-")[1])
        return (plt.get_cmap("viridis")({1: 0.0, 2: 0.3, 4: 0.6, 8: 0.9}.get(L, 0.5)),
                f"Transformer, {L} layer{'s' if L > 1 else ''}")
    kappa = model.split("-", 1)[1]
    kappas = ["linear", "round2", "relu", "exp", "softmax"]
    return (plt.get_cmap("tab10")(2 + kappas.index(kappa)) if kappa in kappas else "0.4"), f"DeltaFormer κ1 = {kappa}"


def _dag_grid(plt, tags, ncol, panel_size):
    """The panels of a DAG figure: ``tags`` in reading order (:data:`DAG_TAG_LABELS`), ``ncol`` to a row, one
    y-axis label a row, the unused axes hidden.  Returns ``(fig, [(ax, tag), ...])``; call inside ``_style()``."""
    order = {t: i for i, t in enumerate(DAG_TAG_LABELS)}
    tags = sorted(tags, key=lambda t: (order.get(t, len(order)), t))
    ncol = min(ncol, len(tags))
    nrow = -(-len(tags) // ncol)
    fig, axs = plt.subplots(nrow, ncol, figsize=(panel_size[0] * ncol, panel_size[1] * nrow), sharey=True,
                            squeeze=False)
    for ax in axs.flat[len(tags):]:
        ax.set_visible(False)
    for row in axs:
        row[0].set_ylabel("per-node training accuracy")
    return fig, list(zip(axs.flat, tags))


def plot_dag(results_dir, out_dir) -> list[Path]:
    """AM Fig. 7: per-node training accuracy against steps, one panel per protocol present."""
    from .train import tag_for_model

    d = dag_curves_data(results_dir)
    if not d:
        return []
    plt = _pyplot()
    with plt.rc_context(_style()):
        fig, panels = _dag_grid(plt, d, 4, (3.1, 2.9))
        for ax, tag in panels:
            for m, c in sorted(d[tag].items()):
                color, label = _dag_style(plt, m)
                ls = {"finished": "-", "stopped": ":", "diverged": "--"}[c["status"]]
                wide = m == "deltaformer-linear"           # drawn wide underneath: round2 often lies on it
                ax.plot(c["step"], c["acc"], ls=ls, color=color, lw=2.6 if wide else 1.1, zorder=1 if wide else 2,
                        label=label + ("" if c["status"] == "finished" else f" ({c['status']})"))
                if c["status"] == "diverged":
                    ax.plot(c["step"][-1], c["acc"][-1], "x", color=color)
            # an option of the DeltaFormers' alone (the write query, the key parameterisation): the panel also draws
            # the Transformers run under its other options, thin and dash-dotted, as task.dag_reachability compares them
            other = tag_for_model("dag_reachability", tag, "transformer-1")
            beside = d.get(other, {}) if other not in ("", tag) else {}
            for m, c in sorted(beside.items()):
                if m.startswith("transformer-") and m not in d[tag]:
                    color, label = _dag_style(plt, m)
                    ax.plot(c["step"], c["acc"], ls="-.", lw=0.9, color=color,
                            label=f"{label} (same inputs and read-out)")
            ax.set_title(DAG_TAG_LABELS.get(tag, tag), fontsize=7)
            ax.set_xlabel("training step")
            ax.legend(fontsize=5)
        fig.suptitle("Reachability in 32-node trees (AM Fig. 7); dotted: stopped before the end (a partial), "
                     "dashed ×: diverged", fontsize=9, y=1.0)
        fig.tight_layout()
        paths = _save(fig, out_dir, "dag_reachability")
        plt.close(fig)
    return paths


DAG_SEED_STYLES = {0: "-", 1: "--", 2: ":"}


def plot_dag_seeds(results_dir, out_dir) -> list[Path]:
    """Fig. 7's runs on more than one seed: one panel per protocol that has any run on a seed other than 0, every
    seed of each model run on more than one (seed 0 solid, 1 dashed, 2 dotted), with the notes' fast reading
    (≥ 0.95 per node by step 2,000, round / ReLU / linear) drawn as a corner: a curve that passes above it
    meets the reading on that seed.  Fig. 7 and ``task.dag_reachability`` decide on seed 0; this figure
    shows how far the other seeds agree."""
    d = {t: {m: ss for m, ss in ms.items() if len(ss) > 1} for t, ms in dag_curves_by_seed(results_dir).items()}
    d = {t: ms for t, ms in d.items() if ms}
    if not d:
        return []
    plt = _pyplot()
    with plt.rc_context(_style()):
        fig, panels = _dag_grid(plt, d, 2, (4.2, 3.2))
        for ax, tag in panels:
            seeds = sorted({s for ss in d[tag].values() for s in ss})
            for m, ss in sorted(d[tag].items()):
                color, label = _dag_style(plt, m)
                for seed, c in sorted(ss.items()):
                    ls = DAG_SEED_STYLES.get(seed, "-.")
                    wide = m == "deltaformer-linear"       # wide underneath, as in Fig. 7: round2 often lies on it
                    ax.plot(c["step"], c["acc"], ls=ls, color=color, lw=2.2 if wide else 1.1, zorder=1 if wide else 2,
                            label=f"{label}, seed {seed}" + ("" if c["status"] == "finished" else f" ({c['status']})"))
            ax.plot([0, 2000, 2000], [0.95, 0.95, 1.02], color="0.3", lw=0.7, ls=(0, (1, 2)))
            ax.text(60, 0.96, "≥ 0.95 by step 2,000 (the notes)", fontsize=5, ha="left", color="0.3")
            ax.set_title(f"{DAG_TAG_LABELS.get(tag, tag)}: seeds {', '.join(map(str, seeds))}", fontsize=7)
            ax.set_xlabel("training step")
            ax.set_ylim(top=1.02)
            ax.legend(fontsize=4.5, ncol=2 if sum(len(ss) for ss in d[tag].values()) > 6 else 1, loc="lower right")
        fig.suptitle("Reachability (AM Fig. 7) on every seed run: solid seed 0 (the one the claim decides on), "
                     "dashed seed 1, dotted seed 2", fontsize=8, y=1.0)
        fig.tight_layout()
        paths = _save(fig, out_dir, "dag_reachability_seeds")
        plt.close(fig)
    return paths


MQAR_PANELS = (("base", "d_model", "model width", "Base: length 512, 64 pairs (Fig. 4a)"),
               ("update", "n_updates", "updates (test: length 128, 16 pairs)", "Update (Fig. 4b)"),
               ("block", "n_pairs", "pairs (test: length 128, block 2)", "Block (Fig. 4c)"))
MQAR_LABELS = {"bl": "BL", "gdn": "GDN", "gdn-conv": "GDN + conv", "mamba2": "Mamba2"}


def mqar_data(results_dir, protocol=None, seed=0) -> dict:
    """{variant: {model: {"x": [...], "acc": [...]}}} of the finished MQAR runs of ``seed`` (default 0) at 40 epochs.

    Base's x-axis is the model width (one run per width); Update's the test configurations' update
    counts, Block's their pair counts (one run each).  Every other protocol choice must be the
    default, or ``protocol``'s where given (an ablation, e.g. ``{"backbone": "mlp"}``; a ``d_model`` there is
    an ablation of panels b/c and leaves Base out) (the learning
    rate excepted: the paper picks it per model by validation accuracy, so each (model, width) keeps its
    run with the best mean validation accuracy — the test accuracy where a run has no validation rows —
    and draws that run's test accuracy).  A Base model whose chosen run at some width ended below 1/64
    training accuracy on its own pool (it learned neither the pool nor the binding) also lists those
    widths under ``"did_not_learn"``.  A later seed is drawn at the rate seed 0's validation picked where it
    ran there (as ``task.mqar`` reads it), else at its own best."""
    from . import mqar as Mq
    from .train import IMPLEMENTATION_OPTIONS, PROTOCOL, resolve_protocol

    probe = dict(protocol or {})
    if "variant" not in probe and any(k in probe for k in ("update_keys", "update_order", "update_train_frac")):
        probe["variant"] = "update"                 # Update-only options: checked as an Update run's
    defaults = resolve_protocol("mqar", probe)
    unrecorded = resolve_protocol("mqar", None)   # a choice a result does not record took the default then
    out: dict = {}
    cands: dict = {}                                 # {(key, seed): {lr: (score, pts)}}, seeds 0 and ``seed``
    for r in load_results(results_dir, "mqar", tag=None):
        if r.get("seed") not in (0, seed):
            continue
        pr = {**unrecorded, **{k: v for k, v in r.get("protocol", {}).items() if k in PROTOCOL["mqar"]}}
        if any(pr[k] != defaults[k] for k in pr if k not in ("variant", "lr", "d_model")
               and ("mqar", k) not in IMPLEMENTATION_OPTIONS):
            continue
        v = pr["variant"]
        if v != "base" and pr["d_model"] != defaults["d_model"]:
            continue
        if v == "base" and "d_model" in probe:      # a width ablation is of panels b/c: Base's x-axis is the width
            continue
        rows = r["eval"].get("test", [])
        if not rows:
            continue
        sel = r["eval"].get("val") or rows
        score = sum(x["acc"] for x in sel) / len(sel)
        if v == "base":
            key, pts = (v, r["model"], pr["d_model"]), [(pr["d_model"], rows[0]["acc"])]
            train = Mq.final_train_acc(r.get("curve"))
            if train is not None and train < 1 / 64:
                pts = [(x, a, "did not learn") for x, a in pts]
        else:
            xk = "n_updates" if v == "update" else "n_pairs"
            key, pts = (v, r["model"], None), sorted((row[xk], row["acc"]) for row in rows)
        at = cands.setdefault((key, r["seed"]), {})
        if pr["lr"] not in at or score > at[pr["lr"]][0]:
            at[pr["lr"]] = (score, pts)
    best = {key: sp for (key, s), sp in Mq.pick_rates(cands).items() if s == seed}
    for (v, m, _), (_, pts) in best.items():
        d = out.setdefault(v, {}).setdefault(m, {"x": [], "acc": []})
        for x, a, *flag in pts:
            d["x"].append(x)
            d["acc"].append(a)
            if flag:                    # a Base run that ended below 1/P on its own pool: a failed run
                d.setdefault("did_not_learn", []).append(x)
    for v in out.values():
        for d in v.values():
            order = sorted(range(len(d["x"])), key=lambda i: d["x"][i])
            d["x"], d["acc"] = [d["x"][i] for i in order], [d["acc"][i] for i in order]
    return out


# the protocol ablations of Fig. 4, in the order they were added: (protocol, what, line style, marker).
# The other backbones: (mixer, MLP), ours before 2 December, the measured cause of BL's Block memorising;
# the mixers alone (no convolution, no MLP)
MQAR_ABLATIONS = (
    ({"backbone": "mlp"}, "backbone=mlp (ours before; ablation)", ":", "x"),
    ({"backbone": "mixers"}, "backbone=mixers (mixers alone: no block conv, no MLP; ablation)", "-.", "+"),
    # BL's own choices tried as causes of the Block reading (2 December, fourth session; 6 December, fifth)
    ({"bl_heads": 1}, "bl_heads=1 (ablation)", "--", "s"),
    ({"bl_heads": 8}, "bl_heads=8 (ablation: eight heads of 22)", "--", "X"),
    ({"bl_noise_init": 0.5}, "bl_noise_init=0.5 (ablation)", "--", "^"),
    ({"bl_noise_init": 0.005}, "bl_noise_init=0.005 (ablation)", "--", "v"),
    ({"bl_decay": True}, "bl_decay=true (ablation)", "--", "<"),
    # the Update reading's ablations (3 December): the generator's update order, Zoology's init
    ({"update_order": "interleaved"}, "update_order=interleaved (ablation)", "--", "d"),
    ({"init": "zoology"}, "init=zoology (ablation)", "--", "*"),
    ({"update_keys": "distinct"}, "update_keys=distinct (ablation)", "--", "P"),
    # training on at most half as many updates as pairs: 16 updates then lie beyond training
    ({"update_train_frac": 0.5}, "update_train_frac=0.5 (ablation: trained on at most 8 updates)", "--", "h"),
    # panels b/c at width 64: the paper does not give their width (BL drops from 0.83 to 0.15 on Base)
    ({"d_model": 64}, "width 64 (ablation: panels b/c's width is not given)", "--", "D"),
    # the generator's open choices (plans device43-44)
    ({"filler": "random"}, "filler=random (ablation: Zoology's filler)", "--", "p"),
    ({"query_order": "shuffled"}, "query_order=shuffled (ablation)", "--", "8"),
    # BL without its write mask, as the baselines have none (plan device44)
    ({"queries_write": True}, "queries_write=true (ablation: BL without its write mask)", "--", ">"),
)
MQAR_COLORS = {"bl": COLORS.get("bl", "#1f4e9c"), "gdn": "#2a9d8f", "gdn-conv": "#e9c46a", "mamba2": "#e76f51"}


def _mqar_references(ax, v, models=None):
    """Panels b/c's references: the notes' readings at 16 (published inputs, drawn hollow, never as ours; of
    ``models`` only, where given) and the 1/P line."""
    from .names import MQAR_FIG4_READINGS

    same = {}                                     # equal readings (GDN-conv, Mamba2: 0.60) side by side
    for m, a in MQAR_FIG4_READINGS[v].items():
        if models is not None and m not in models:
            continue
        dx = 0.35 * same.setdefault(a, 0)
        same[a] += 1
        ax.plot([16 + dx], [a], marker="o", ms=5, mfc="none", mew=0.9, ls="none", color=MQAR_COLORS[m],
                label=f"{MQAR_LABELS[m]}, paper (notes' reading)")
    xs = list(range(2 if v == "block" else 0, 17, 2))
    # naming one of the sequence's values at random: 1/P (Update: the 16 current values)
    ax.plot(xs, [1 / x if v == "block" else 1 / 16 for x in xs], ls="--", lw=0.8, color="0.55",
            label="one of the P values at random (1/P)")


def plot_mqar(results_dir, out_dir) -> list[Path]:
    """BL Fig. 4a-c from the finished 40-epoch runs of the default protocol (each model at its best learning
    rate; seed 0 decides, later seeds thin), the notes' readings hollow beside them; the ablations are
    :func:`plot_mqar_ablations`'s figure."""
    d = mqar_data(results_dir)
    if not d:
        return []
    # the readings are judged on seed 0; the other seeds that have finished, thin, beside it
    others = [(s, mqar_data(results_dir, seed=s)) for s in (1, 2)]
    # one legend entry per model for its thin lines (they share one style): the seeds it has, any panel
    seed_names = {}
    for m in ("bl", "gdn", "gdn-conv", "mamba2"):
        have = [s for s, other in others if any(m in panel for panel in other.values())]
        seed_names[m] = ("seed " if len(have) == 1 else "seeds ") + ", ".join(map(str, have))
    plt = _pyplot()
    colors = MQAR_COLORS
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, 3, figsize=(8.4, 2.6), sharey=True)
        for ax, (v, xk, xlabel, title) in zip(axs, MQAR_PANELS):
            for m in ("bl", "gdn", "gdn-conv", "mamba2"):
                if m in d.get(v, {}):
                    c = d[v][m]
                    # the line joins the runs that learned; a failed run is only its cross (below)
                    keep = [i for i, x in enumerate(c["x"]) if x not in c.get("did_not_learn", [])]
                    ax.plot([c["x"][i] for i in keep], [c["acc"][i] for i in keep], marker="o", ms=2.5,
                            color=colors[m], label=MQAR_LABELS[m])
                for s, other in others:
                    if m in other.get(v, {}):
                        c = other[v][m]
                        ax.plot(c["x"], c["acc"], lw=0.7, alpha=0.45, color=colors[m],
                                label=f"{MQAR_LABELS[m]}, {seed_names[m]}")
            if v == "base":
                ax.set_xscale("log", base=2)
                # a run that stayed at chance on its own pool says nothing of the model (its rate failed)
                for m, c in d.get(v, {}).items():
                    xs = c.get("did_not_learn", [])
                    if xs:
                        ax.plot(xs, [c["acc"][c["x"].index(x)] for x in xs], marker="x", ms=6, mew=1.2, ls="none",
                                color=colors[m], label=f"{MQAR_LABELS[m]}: did not learn (training accuracy "
                                                        "< 1/P on its pool: the rate failed, not the model)")
                ws = sorted({x for c in d.get(v, {}).values() for x in c["x"]})
                if ws:
                    ax.plot(ws, [1 / 64] * len(ws), ls="--", lw=0.8, color="0.55",
                            label="one of the P values at random (1/P)")
            else:
                _mqar_references(ax, v)
            ax.set_title(title, fontsize=7)
            ax.set_xlabel(xlabel)
            if not d.get(v):
                ax.text(0.5, 0.5, "no finished run", transform=ax.transAxes, ha="center", fontsize=7, color="0.4")
        # one legend under the panels
        seen = {}
        for ax in axs:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        if seen:
            fig.legend(list(seen.values()), list(seen), fontsize=5, ncol=4, loc="upper center",
                       bbox_to_anchor=(0.5, -0.1), frameon=False)
        axs[0].set_ylabel("test query accuracy")
        fig.suptitle("MQAR, one shared vocabulary of 8,192, 8,192 state per layer (BL Fig. 4), default protocol\n"
                     "each model at its learning rate of best validation accuracy, seed 0 (other seeds thin); "
                     "the ablations: mqar_ablations.png", fontsize=8, y=1.1)
        paths = _save(fig, out_dir, "mqar")
        plt.close(fig)
    return paths


def plot_mqar_ablations(results_dir, out_dir) -> list[Path]:
    """Fig. 4's protocol ablations, one small panel per (ablation, variant) that has finished runs (seed 0,
    each model at its best learning rate under that protocol): the ablation's runs dashed with its marker,
    the default protocol's runs of the same models faded beside them, and on panels b/c the notes' readings
    and 1/P.  Empty (no file) when no ablation has a run."""
    base = mqar_data(results_dir)
    panels = []
    for protocol, what, ls, mk in MQAR_ABLATIONS:
        d = mqar_data(results_dir, protocol)
        for v, xk, xlabel, title in MQAR_PANELS:
            if d.get(v):
                panels.append((d[v], v, xlabel, title, what, ls, mk))
    if not panels:
        return []
    plt = _pyplot()
    ncol = min(4, len(panels))
    nrow = -(-len(panels) // ncol)
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(nrow, ncol, figsize=(2.6 * ncol, 2.3 * nrow), sharey=True, squeeze=False)
        for ax in axs.flat[len(panels):]:
            ax.set_visible(False)
        for ax, (runs, v, xlabel, title, what, ls, mk) in zip(axs.flat, panels):
            for m in ("bl", "gdn", "gdn-conv", "mamba2"):
                if m not in runs:
                    continue
                if m in base.get(v, {}):
                    c = base[v][m]
                    ax.plot(c["x"], c["acc"], lw=1.6, alpha=0.3, color=MQAR_COLORS[m],
                            label=f"{MQAR_LABELS[m]} (default protocol)")
                c = runs[m]
                ax.plot(c["x"], c["acc"], marker=mk, ms=3, lw=1.0, ls=ls, color=MQAR_COLORS[m],
                        label=f"{MQAR_LABELS[m]}, {what}")
            if v == "base":
                ax.set_xscale("log", base=2)
            else:
                _mqar_references(ax, v, models=runs)
            ax.set_title(what.replace(" (ablation: ", "\n(").replace(" (ablation)", "").replace("; ablation)", ")")
                         + "\n" + title, fontsize=6)
            ax.set_xlabel(xlabel, fontsize=6)
        for row in axs:
            row[0].set_ylabel("test query accuracy")
        # one legend: the models by colour, then what each style means (the lines keep their own labels)
        from matplotlib.lines import Line2D

        shown = [m for m in ("bl", "gdn", "gdn-conv", "mamba2") if any(m in p[0] for p in panels)]
        handles = [Line2D([], [], color=MQAR_COLORS[m], lw=1.6) for m in shown] + [
            Line2D([], [], color="0.3", lw=1.0, ls="--", marker="o", ms=3),
            Line2D([], [], color="0.3", lw=1.6, alpha=0.3),
            Line2D([], [], color="0.3", marker="o", ms=5, mfc="none", ls="none"),
            Line2D([], [], color="0.55", lw=0.8, ls="--")]
        names = [MQAR_LABELS[m] for m in shown] + ["the ablation (its marker)", "the default protocol",
                                                   "the notes' reading", "one of the P values at random (1/P)"]
        fig.legend(handles, names, fontsize=6, ncol=len(names), loc="lower center", bbox_to_anchor=(0.5, -0.01),
                   frameon=False)
        fig.suptitle("MQAR (BL Fig. 4): each ablation of our protocol beside the default protocol, seed 0, each "
                     "model at its best learning rate", fontsize=8, y=1.0)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        paths = _save(fig, out_dir, "mqar_ablations")
        plt.close(fig)
    return paths


def mqar_probe_curves_data(results_dir, config: str = "24,4,1", d_model: int = 128) -> dict:
    """The training curves of the GPU fresh-data MQAR probes (``results/mqar/probes/``, written by
    ``scripts/mqar_mixer_probe.py`` and ``scripts/mqar_probe_sweep.py``) of one configuration and width:
    ``{vocab: [{"spec", "backbone", "lr", "init", "steps", "step": [...], "acc": [...], "test"}, ...]}``,
    each vocabulary's runs in file order.  CPU probes are left out (shorter and logged differently)."""
    d = Path(results_dir) / "mqar" / "probes"
    out = {}
    if not d.is_dir():
        return out
    for path in sorted(d.glob("*.json")):
        rec = json.loads(path.read_text())
        st = rec.get("settings", {})
        if rec.get("device_name", "cpu") == "cpu" or st.get("config") != config or st.get("d_model") != d_model:
            continue
        for r in rec.get("runs", []):
            c = r.get("curve", [])
            if not c:
                continue
            out.setdefault(int(st["vocab"]), []).append({
                "spec": r["spec"], "backbone": st.get("backbone"), "lr": st.get("lr"), "init": st.get("init", "torch"),
                "steps": r.get("steps_done"), "step": [x["step"] for x in c], "acc": [x["acc"] for x in c],
                "test": r["test"][0]["acc"] if len(r.get("test", [])) == 1 else None})
    return out


def plot_mqar_probes(results_dir, out_dir) -> list[Path]:
    """The fresh-data probes' training curves (not the paper's protocol): (a) every mixer, backbone and rate
    at vocabulary 1,024, (b) Mamba2 at lr 3e-3 in the default backbone across the vocabularies, (c) where
    there are any, every probe at vocabulary 2,048 or more.  What they show: Mamba2's plateau at chance,
    and where it ends.  Each panel runs to 1,500 steps past its last exit (accuracy 0.5)."""
    d = mqar_probe_curves_data(results_dir)
    if not d:
        return []
    plt = _pyplot()
    colors = {("gdn", "zoology"): "#2a9d8f", ("mamba2", "zoology"): "#e76f51", ("mamba2", "mixers"): "#6a4c93"}
    dashes = {3e-4: (1, 1.5), 1e-3: (4, 1.5), 3e-3: (), 1e-2: (6, 1.5, 1, 1.5), 3.2e-2: (2, 1, 2, 3)}

    def label(r, with_vocab=False):
        return (f"{MQAR_LABELS.get(r['spec'], r['spec'])}, {r['backbone']}, lr {r['lr']:g}"
                + (f", init {r['init']}" if r["init"] != "torch" else "") + f", {r['steps']:,} steps"
                + (f", vocabulary {r['vocab']:,}" if with_vocab else "")
                + (f" (test {r['test']:.2f})" if r["test"] is not None else ""))

    def xmax(rs):
        # up to 1,500 steps past the last exit (training accuracy 0.5) drawn, within the longest curve: after
        # it every curve is flat (the JSONs have the rest)
        if not rs:
            return 4000
        longest = max(r["step"][-1] for r in rs)
        exits = [next((s for s, a in zip(r["step"], r["acc"]) if a >= 0.5), None) for r in rs]
        last = max((e for e in exits if e is not None), default=longest)
        return min(longest, -(-(last + 1500) // 500) * 500)

    # the long probes at the larger vocabularies (the mamba2-vocab sweep): a panel of their own
    large = sorted(((v, r) for v, rs in d.items() if v >= 2048 for r in rs), key=lambda x: (x[0], x[1]["spec"],
                                                                                          x[1]["backbone"], x[1]["lr"]))
    with plt.rc_context(_style()):
        fig, axs = plt.subplots(1, 3 if large else 2, figsize=(12.6 if large else 8.4, 2.8), sharey=True)
        longest = max((r["steps"] for r in d.get(1024, [])), default=0)
        for r in d.get(1024, []):
            axs[0].plot(r["step"], r["acc"], lw=1.6 if r["steps"] == longest else 0.9, color=colors.get((r["spec"], r["backbone"]), "0.4"),
                        dashes=dashes.get(r["lr"], ()), alpha=0.5 if r["init"] != "torch" else 1.0, label=label(r))
        axs[0].set_title("vocabulary 1,024: each mixer, backbone and rate", fontsize=7)
        if not d.get(1024):
            axs[0].text(0.5, 0.5, "no probe", transform=axs[0].transAxes, ha="center", fontsize=7, color="0.4")
        cmap = plt.get_cmap("viridis")
        runs = sorted(((v, r) for v, rs in d.items() for r in rs
                       if r["spec"] == "mamba2" and r["backbone"] == "zoology" and r["lr"] == 3e-3
                       and r["init"] == "torch"), key=lambda x: (x[0], x[1]["steps"]))
        vocabs = sorted({v for v, _ in runs})
        for v, r in runs:
            axs[1].plot(r["step"], r["acc"], lw=1.0, color=cmap(vocabs.index(v) / max(1, len(vocabs) - 1) * 0.85),
                        dashes=(4, 1.5) if r["steps"] < max(x["steps"] for w, x in runs if w == v) else (),
                        label=label({**r, "vocab": v}, with_vocab=True))
        axs[1].set_title("Mamba2, zoology, lr 3e-3: the plateau by vocabulary", fontsize=7)
        spans = [xmax(d.get(1024, [])), xmax([r for _, r in runs])]
        if large:
            lv = sorted({v for v, _ in large})
            for v, r in large:
                axs[2].plot(r["step"], r["acc"], dashes=dashes.get(r["lr"], ()),
                            lw=1.6 if r["backbone"] == "mixers" else 0.9,
                            color=(colors[("gdn", "zoology")] if r["spec"] == "gdn"
                                   else cmap(lv.index(v) / max(1, len(lv) - 1) * 0.85)),
                            label=label({**r, "vocab": v}, with_vocab=True))
            axs[2].set_title("vocabulary 2,048 and up: rate and block (schedules cut)", fontsize=7)
            spans.append(xmax([r for _, r in large]))
        for ax, span in zip(axs, spans):
            ax.axhline(0.25, ls=":", lw=0.7, color="0.55")
            ax.set_xlim(0, span)
            ax.set_xlabel(f"training step (fresh batch of 64 each; first {span:,})")
            ax.legend(fontsize=4.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1)
        axs[0].set_ylabel("training query accuracy")
        fig.suptitle("MQAR fresh-data probes on the GPU (T = 24, 4 pairs, width 128; not the paper's protocol); "
                     "dotted line: 1/P", fontsize=8, y=1.03)
        paths = _save(fig, out_dir, "mqar_probes")
        plt.close(fig)
    return paths


def render_all(results_dir="results", out_dir=None) -> list[Path]:
    out_dir = Path(results_dir) / "figures" if out_dir is None else Path(out_dir)
    paths = []
    for fn in (plot_collision, plot_random_keys, plot_swap, plot_stress, plot_curriculum, plot_ablations, plot_dag, plot_dag_seeds, plot_mqar,
               plot_mqar_ablations, plot_mqar_probes):
        paths += fn(results_dir, out_dir)
    return paths


if __name__ == "__main__":
    import sys
    for p in render_all(*sys.argv[1:]):
        print(p)
