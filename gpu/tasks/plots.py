"""Figures of the learned tasks, rebuilt from the saved result JSONs.

Each figure has a ``*_data(results_dir)`` function (what is plotted: mean and
standard deviation over seeds, per model and setting; the tests check these)
and a ``plot_*`` function writing PDF and PNG.  ``render_all(results_dir,
out_dir)`` draws every figure whose results exist.

* ``collision_writes``  — BL Fig. 3(c): target accuracy vs distractor writes ``n_f`` at ρ = 0.80;
* ``collision_overlap`` — BL Fig. 3(d): target margin vs overlap ρ at ``n_f = 64``;
* ``random_keys``       — BL Fig. 7: cross-entropy and accuracy vs ``n/D``;
* ``swap_curves``       — AM Fig. 4: training accuracy vs step, Transformers vs DeltaFormers.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

LABELS = {"bl": "BL", "reset": "Reset (cov. reset)", "delta": "Delta", "linear": "Linear attn.",
          "gla": "GLA-style", "diag": "BL diag. cov."}
COLORS = {"bl": "#1f4e9c", "diag": "#4aa3df", "reset": "#d1495b", "delta": "#8d1e2d",
          "linear": "#edae49", "gla": "#66a182"}


def load_results(results_dir, task: str) -> list[dict]:
    """Every finished result JSON of ``task`` under ``results_dir/task``."""
    d = Path(results_dir) / task
    out = []
    for p in sorted(d.glob("*.json")):
        r = json.loads(p.read_text(encoding="utf-8"))
        if r.get("task") == task and r.get("eval"):
            out.append(r)
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


def _style():
    try:
        from assocmem.figures.core import STYLE
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
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = swap_curves_data(results_dir)
    d = {m: v for m, v in d.items() if not m.startswith("stress-")}
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


def render_all(results_dir="results", out_dir=None) -> list[Path]:
    out_dir = Path(results_dir) / "figures" if out_dir is None else Path(out_dir)
    paths = []
    for fn in (plot_collision, plot_random_keys, plot_swap):
        paths += fn(results_dir, out_dir)
    return paths


if __name__ == "__main__":
    import sys
    for p in render_all(*sys.argv[1:]):
        print(p)
