"""Checks of the learned tasks (the ``task.*`` claim IDs).

The learned experiments' published results are trends read from figures, so
each check has three parts:

* ``numpy`` -- the data generator has the stated structure, measured on
  generated batches (e.g. the target/distractor overlaps recovered from the
  tokens lie in the training range; the loss sees only query tokens);
* ``triton`` -- the GPU layer's recurrent cores (the BL op and the torch
  baseline cores of :mod:`assocmem.gpu.tasks.recurrences`) agree with the
  float64 numpy filter family (:func:`assocmem.numerics.bl_filter.bl_filter`)
  at the matching variant, on random inputs;
* results (``triton`` layer: GPU runs) -- when trained results are present
  under ``results/<task>/`` (the JSONs committed from a GPU run), the measured
  numbers are recorded and every published trend is evaluated on them.  Each
  trend's outcome (reproduced or not) is *documented* in :data:`DOCUMENTED`
  (and in docs/tasks.md); the check asserts that the committed results still
  give the documented outcome, so new results that change a finding fail
  until the documentation is updated.  The summary line says how many
  published trends the runs reproduced and names the others.  Without results
  the claim reports only the first two parts and says so.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from assocmem.gpu.tasks.names import CURRICULUM_MODELS, MIXERS
from assocmem.provenance import source_root
from assocmem.registry import Evidence

# the committed results live in the checkout, not in the package (None for an installed package:
# every task check then reports that no GPU results are present)
RESULTS = (source_root() / "results") if source_root() is not None else None
F64_REL = 1e-12


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


SKIPPED: dict = {}      # {task: {file: why}} of the last _results call: shown by the checks (not silent)


def _results(task: str, *, diverged: bool = False) -> list[dict]:
    """Every committed result of ``task`` with a full evaluation (``diverged=True``: also the
    runs recorded as diverged, which have no evaluation).  Each record gets ``_tag`` (its
    protocol's difference from the task's defaults, '' for the default protocol) and
    ``_file``; a result without a ``protocol`` block is left out (its protocol is unknown).
    """
    from assocmem.gpu.tasks.train import result_tag

    if RESULTS is None:
        return []
    d = Path(RESULTS) / task
    if not d.is_dir():
        return []
    out, skipped = [], {}
    for p in sorted(d.glob("*.json")):
        key = f"{task}/{p.name}"
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            skipped[key] = "not JSON"
            continue
        if r.get("task") != task:
            skipped[key] = f"task {r.get('task')!r}"
            continue
        if "protocol" not in r:
            skipped[key] = "no protocol block"
            continue
        full = bool(r.get("eval")) and r.get("eval_mode") == "full"
        if full or (diverged and r.get("status") == "diverged"):
            out.append({**r, "_tag": result_tag(task, r), "_file": key})
        else:
            skipped[key] = "no full evaluation" if r.get("status") != "diverged" else "diverged"
    SKIPPED[task] = skipped
    return out


def _protocol_spec(task):
    from assocmem.gpu.tasks.train import PROTOCOL
    return PROTOCOL[task]


def _by_tag(results) -> dict:
    out = {}
    for r in results:
        out.setdefault(r["_tag"], []).append(r)
    return out


def _with_ablation(default, ablation):
    """The default-protocol runs with every model the ablation ran replaced by its ablation runs."""
    models = {r["model"] for r in ablation}
    return [r for r in default if r["model"] not in models] + list(ablation)


def _companions(tag, by_tag) -> list:
    """The runs ablation ``tag`` takes for the models an option of it does not apply to (the DeltaFormer's write
    query for a Transformer): their runs under the tag's other options (:func:`~assocmem.gpu.tasks.train.tag_for_model`),
    compared from there instead of from the default protocol.  A model that ran under ``tag`` keeps those runs."""
    from assocmem.gpu.tasks.train import tag_for_model

    ran = {r["model"] for r in by_tag.get(tag, [])}
    return [r for t, rs in sorted(by_tag.items()) if t not in ("", tag) for r in rs
            if r["model"] not in ran and tag_for_model(r["task"], tag, r["model"]) == t]


def _rel(out, ref):
    ref = np.asarray(ref)
    return float(np.abs(np.asarray(out) - ref).max() / max(1.0, np.abs(ref).max()))


def _cores_vs_numpy(ev: Evidence, torch, seed: int = 0) -> None:
    """Every baseline core (float64 torch) vs the numpy filter variant it instantiates."""
    from assocmem.gpu.tasks import recurrences as R
    from assocmem.numerics.bl_filter import bl_filter

    g = torch.Generator().manual_seed(seed)
    B, T, H, D, m = 2, 45, 2, 6, 4
    f = torch.float64
    k = torch.nn.functional.normalize(torch.randn(B, T, H, D, generator=g, dtype=f), dim=-1)
    q = torch.randn(B, T, H, D, generator=g, dtype=f)
    v = torch.randn(B, T, H, m, generator=g, dtype=f)
    l2 = 0.01 + 0.3 * torch.rand(B, T, H, generator=g, dtype=f)
    r2 = 0.02 + 0.5 * torch.rand(B, T, H, generator=g, dtype=f)
    beta = 0.05 + 0.9 * torch.rand(B, T, H, generator=g, dtype=f)
    la = torch.log(0.05 + 0.94 * torch.rand(B, T, H, D, generator=g, dtype=f))
    n = lambda x: x.transpose(1, 2).numpy()            # noqa: E731  heads become batch axes
    y = lambda o: o.transpose(1, 2).numpy()            # noqa: E731
    cases = {
        "reset = numpy reset (λ = ℓ²)": (R.chunk_delta(q, k, v, R.reset_gain(l2, r2, k), chunk_size=16)[0],
                                          dict(l2=n(l2), r2=n(r2), variant="reset", lam=n(l2))),
        "delta = numpy reset (λ = β/(1−β), r² = 1)": (R.chunk_delta(q, k, v, beta, chunk_size=16)[0],
                                                      dict(r2=1.0, variant="reset", lam=n(beta / (1 - beta)))),
        "linear attention = numpy linear (ω = λ/(λ+r²))": (R.additive(q, k, v, omega=l2 / (l2 + r2))[0],
                                                           dict(variant="linear", omega=n(l2 / (l2 + r2)))),
        "GLA-style = numpy linear with diagonal decay": (R.additive(q, k, v, log_alpha=la)[0],
                                                        dict(variant="linear", omega=1.0, alpha=n(la.exp()))),
        "diagonal-covariance BL = numpy diag": (R.diag_bl(q, k, v, l2, r2, p0=1.3, chunk_size=16),
                                                dict(l2=n(l2), r2=n(r2), p0=1.3, variant="diag")),
    }
    for name, (out, kw) in cases.items():
        tr = bl_filter(n(k), n(v), n(q), **kw)
        ev.close("triton", f"{name}: max rel. error (float64, T={T})", _rel(y(out), tr.y), 0.0, abs_tol=F64_REL,
                 note="torch cores of the GPU tasks vs numerics.bl_filter")
    # the dense BL through the BL op (naive_bl on CPU, Triton on a GPU / under TRITON_INTERPRET=1)
    from assocmem.gpu.tasks.models import resolve_bl_op
    op, name = resolve_bl_op()
    o, _ = op(q.float(), k.float(), v.float(), l2.float(), r2.float(), None, 1.3)
    tr = bl_filter(n(k), n(v), n(q), l2=n(l2), r2=n(r2), p0=1.3, variant="dense")
    err = float(np.linalg.norm(y(o.double()) - tr.y) / np.linalg.norm(tr.y))
    ev.close("triton", f"BL mixer op ({name}, fp32) vs numpy dense: relative RMS", err, 0.0, abs_tol=1e-5)
    # the write mask (queries do not write): the op zeroes the write key, numpy skips the update
    wm = torch.rand(B, T, H, generator=g) < 0.6
    o, _ = op(q.float(), k.float(), v.float(), l2.float(), r2.float(), None, 1.3, write_mask=wm)
    tr = bl_filter(n(k), n(v), n(q), l2=n(l2), r2=n(r2), p0=1.3, variant="dense",
                   write_mask=wm.transpose(1, 2).numpy())
    err = float(np.linalg.norm(y(o.double()) - tr.y) / np.linalg.norm(tr.y))
    ev.close("triton", f"BL mixer op ({name}, fp32) with a write mask vs numpy's missing observations: "
                       "relative RMS", err, 0.0, abs_tol=1e-5)


def _collision_generator(ev: Evidence, torch) -> None:
    from assocmem.gpu.tasks import data as Dt

    g = torch.Generator().manual_seed(11)
    lo, hi = 0.60, 0.80
    b = Dt.collision_batch(64, n_f=4, rho_range=(lo, hi), generator=g)
    # overlaps recovered from the tokens: a target query's partner label names the distractor
    ov = []
    for i in range(b.x.shape[0]):
        qm = b.is_query[i]
        keys, labs, par, tgt = b.keys[i][qm].double(), b.labels[i][qm], b.partner[i][qm], b.is_target[i][qm]
        by_label = {int(l): kk for l, kk in zip(labs, keys)}
        ov += [float(keys[j] @ by_label[int(par[j])]) for j in range(len(labs)) if tgt[j]]
    ov = np.array(ov)
    ev.holds("numpy", f"target/distractor overlaps from the tokens lie in [{lo}, {hi}] ({ov.size} pairs)",
             ov.min() >= lo - 1e-6 and ov.max() <= hi + 1e-6, computed=[float(ov.min()), float(ov.max())],
             expected=[lo, hi])
    ev.holds("numpy", "loss mask = query tokens exactly (16 per sequence, none on writes)",
             bool(((b.labels != Dt.IGNORE) == b.is_query).all()) and bool((b.is_query.sum(1) == 16).all()))
    ev.holds("numpy", "token features: 33 = flag + address(16) + value(16)", b.x.shape[-1] == 33,
             computed=int(b.x.shape[-1]), expected=33)



# Outcome of each published trend on the committed GPU results under the DEFAULT protocol
# (queries do not write; docs/tasks.md).  The check asserts these, so results that change a
# finding fail until the documentation is updated.
DOCUMENTED = {
    "collision.la_gla_collapse": True,
    "collision.bl_near_perfect_256": True,
    "collision.delta_reset_about_075_256": False,
    "collision.bl_above_delta_reset_256": True,
    "collision.bl_positive_margin_095": True,
    "collision.delta_reset_negative_margin_095": True,
    "collision.bl_margin_best_high_overlap": True,
    "random_keys.degrade_beyond_training": True,
    "random_keys.bl_lowest_ce_high_density": False,
    "random_keys.bl_accuracy_near_best_high_density": True,
    "swap.round_linear_fast": True,
    "swap.other_kappas_not_fast": True,
    "swap.transformers_stay_low": False,
    "swap.one_layer_transformer_low": True,
    "swap.stress_round_high_512": False,
    "swap.stress_linear_low_512": True,
    "swap.curriculum_nope_reaches_256": True,
    "swap.direct_nope_near_chance": False,
    "swap.direct_rope_rises": True,
    # AM Fig. 7 (docs/tasks_mqar_dag.md): the 4- and 8-layer Transformers end above 0.9, the
    # DeltaFormers at the Transformers' level (0.77-0.85), none near 1
    "dag.transformers_about_08": False,
    "dag.deltaformer_fast": False,
    "dag.exp_softmax_lower": True,
    "dag.deltaformer_above_transformers": False,
    # BL Fig. 4 (docs/tasks_mqar_dag.md), seed 0 under the default protocol (zoology backbone)
    # BL 0.962 at 16 updates at its picked rate 1e-2 (seeds 1 / 2 there: 0.809 / 0.947; at 3e-3 0.96 on all three)
    "mqar.update16_bl_88": True,
    # GDN-conv 1.00 at 16 updates, Mamba2 0.81 at lr 1e-2 (3 December, fourth session), neither near 0.60.
    # At 3e-4 to 3e-3 Mamba2 did not learn in 25,000 steps (training accuracy 0.02-0.05: a plateau at
    # chance, which it leaves near step 6,000 at 1e-2); the weight decay on A_log / dt_bias was ruled out
    # first (wd_exempt=marked: the same curve at 1e-3 to step 17,500)
    "mqar.update16_gdn_conv_mamba2_60": False,
    "mqar.update16_gdn_98": True,       # 0.995 at 16 updates at 1e-2 (seeds 1 / 2: 0.934 / 0.997)
    # GDN 0.997 at 16 pairs (seed 1: 0.995), BL 0.940 at its picked rate 1e-2 (seeds 1 / 2: 0.844 / 0.889):
    # BL is not 25 points below GDN on seed 0
    "mqar.block16_gdn_100_bl_75": False,
}

# the ablations of our choices run for the DeltaFormer readings of AM Fig. 7 (both readings share them)
DAG_DELTAFORMER_ABLATIONS = [
    ("root_position-last", False,
     "the root after the edges (the edges stored, then composed): 0.84 / 0.86 / 0.86 for ReLU / round2 / linear"),
    ("deltaformer_keys-raw", False,
     "raw κ1 keys with β in (0, 1): round2, ReLU and linear diverge to NaN within 75-1,250 steps"),
    ("edge_tokens-single__deltaformer_keys-raw", False, "one token per edge (n² ids) with raw keys: 0.67-0.69"),
    ("edge_tokens-single__edge_embedding-factored", False,
     "one token per edge holding both endpoints (E_from[u] + E_to[v]), the delta rule's one key per edge: "
     "0.83 / 0.86 / 0.86 for ReLU / round2 / linear"),
    ("edge_tokens-single__edge_embedding-factored__lr-0.001", False,
     "the same at lr 1e-3 (round2): 0.88, still level with the 2- and 4-layer Transformers"),
    ("edge_tokens-single__edge_embedding-factored__deltaformer_write-query", False,
     "the same edges and a write query of its own in κ1 (AM's general form, w_t ≠ k_t; round2 and linear, "
     "run on a CPU): 0.89 (0.85 at step 2,000), below the 4-layer Transformer"),
    ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query", False,
     "those edges, the write query and a per-node read-out together: round2 and linear learn the task (0.997 / "
     "0.996 per node, 0.93 / 0.92 exact sets; >= 0.95 from step 2,600 / 2,650, 0.885 at step 2,000), ReLU does "
     "not (0.89), exp / softmax end at 0.78 / 0.73; so on seed 0 the reading's 2,000 steps and its ReLU arm are "
     "not reproduced even then. Seed 1 (run on a CPU) meets the 2,000 steps for round2 and linear (>= 0.95 from "
     "step 1,950 / 1,975; 0.999 per node, 0.97 / 0.98 exact sets) and not for ReLU (0.81 at step 2,000, as on "
     "seed 0, 0.86 per node and 0.15 exact sets at the end): the steps are within the seed spread, the ReLU arm "
     "is not. The Transformers are compared under the same edges and read-out (the write query does not apply "
     "to them): 1 layer 0.76, 2 layers 0.94 per node (0.56 exact sets; run on a CPU), 4 layers 0.995 and 8 "
     "layers 1.000 (0.93 / 0.99 exact sets, >= 0.95 from step 1,125 / 800; plan device47): one round2 / linear "
     "layer stays above one and two Transformer layers but not above four or eight, which learn these inputs "
     "sooner than it does"),
    ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__lr-0.001", False,
     "all three changes at lr 1e-3 (ReLU, the arm they left behind; run on a CPU): 0.92 per node, 0.38 exact "
     "sets, 0.88 at step 2,000: faster early than at 3e-4 but still not ≈ 1", "ran"),
    ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-1", False,
     "all three changes with one head of 128 dimensions instead of four of 32 (AM's SNR argument: linear and "
     "ReLU kernels need the head dimension; run on a CPU): ReLU 0.80 per node (0.74 at step 2,000; four heads "
     "0.89, 0.81), so the head dimension is not what holds ReLU back; linear is faster with it (0.97 at step "
     "1,250, 0.998 at 2,000, where four heads read 0.88; stopped there, so not a finished run)", "ran"),
    ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__deltaformer_beta-signed",
     False,
     "all three changes with a signed write strength, β in (−2, 2) instead of (0, 2) (the notes give no range; "
     "with κ1 >= 0 and β > 0 an earlier u can only be subtracted, so a path composed along the edges alternates "
     "in sign; run on a CPU): ReLU learns the task, 0.997 per node and 0.95 of the sets exact, >= 0.95 from step "
     "1,975 (0.89 and 0.81 at step 2,000 with β > 0): the measured cause of the ReLU arm. Linear and round2 under "
     "it end at 0.997 / 0.997 (0.94 exact) but read 0.91 at step 2,000 (0.88 with β > 0; >= 0.95 from step 2,500), "
     "so seed 0 still misses the 2,000 steps there (seed 1 met them with β > 0); and the 4- and 8-layer "
     "Transformers given the same inputs end at 0.995 / 1.000, so none of the three ends above every "
     "Transformer. Plan device48 (H100): seed 1 under it repeats both halves, ReLU >= 0.95 from step 1,825 "
     "(0.999 per node, 0.98 exact) while round2 and linear read 0.90 at step 2,000 and pass 0.95 at 2,675 "
     "(0.996 each at the end), so under the signed β ReLU meets the 2,000 steps on both seeds and round2 / linear "
     "on neither; exp and softmax under it end at 0.873 / 0.869 per node (0.17 / 0.24 exact; 0.78 / 0.73 with "
     "β > 0), still below the three fast arms, so the signed β keeps the reproduced reading that they end "
     "lower. Seed 2 (run on a CPU, sixteenth session) repeats it: ReLU >= 0.95 from step 1,925 (0.957 at step "
     "2,000; 0.999 per node, 0.98 exact), round2 and linear 0.93 at step 2,000 and >= 0.95 from 2,250 (0.998 / "
     "0.999 per node, 0.98 exact each), so with four heads ReLU meets the 2,000 steps on all three seeds and "
     "round2 / linear on none", "ran"),
    ("edge_tokens-single__output-per_node__edge_embedding-factored", False,
     "factored edges and the per-node read-out, no write query (linear): 0.89; the 1- and 2-layer Transformers "
     "under it (run on a CPU): 0.76 / 0.94"),
    ("output-per_node__deltaformer_write-query", False,
     "the write query and the per-node read-out on two-token edges (linear): 0.89"),
    ("output-per_node", False, "the per-node read-out alone (linear): 0.82; with the factored edges and the "
                               "write query but the multilabel read-out, 0.89 (above): each pair of the three "
                               "changes stays at the Transformers' level, all three together are needed"),
]

# the head count under the signed write strength (7 December, thirteenth session, run on a CPU), for the 2,000 steps
# only: the Transformers were not run with these head counts, so "above every Transformer" is not reached
DAG_HEADS_SIGNED = [
    ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-1"
     "__deltaformer_beta-signed", False,
     "all three changes and the signed β with one head of 128 dimensions instead of four of 32: linear >= 0.95 "
     "from step 1,125 (0.99 at step 2,000, 0.996 per node at the end, 0.93 exact), ReLU 0.74 at step 2,000 (as with "
     "β > 0 and one head) and never >= 0.95: it ends at 0.83 per node, 0.13 exact (run to its end on an H100, "
     "plan device49). One head of 128 serves linear and fails ReLU", "ran"),
    ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-2"
     "__deltaformer_beta-signed", True,
     "all three changes and the signed β with two heads of 64 instead of four of 32 (seed 0, run on a CPU): ReLU "
     ">= 0.95 at step 2,000 (0.953), round2 and linear from step 1,650 (0.979 / 0.980 at step 2,000), where four "
     "heads give ReLU 0.955 and round2 / linear 0.91 and one head ReLU 0.74 and linear 0.99; all three end at "
     "0.998-1.000 per node, 0.96 / 0.99 / 0.995 exact (ReLU / round2 / linear). So on seed 0 the reading's 2,000 "
     "steps hold for all three fast arms under one protocol: the signed β is ReLU's measured cause and the head "
     "count round2 and linear's. Not on seed 1 (run on a CPU): linear and round2 >= 0.95 from step 1,800 "
     "(0.975 / 0.974 at step 2,000; 0.999 per node and 0.99 exact each) but ReLU only from 2,525 (0.91 at step "
     "2,000; 0.98 per node, 0.76 exact), where four heads gave ReLU 1,825. Seed 2 (run on a CPU) repeats seed 1: "
     "linear and round2 >= 0.95 from step 1,575 / 1,550 (0.984 each at step 2,000; 0.999 per node, 0.98 / 0.985 "
     "exact at the end), ReLU only from 2,375 (0.936 at step 2,000; 0.98 per node, 0.76 exact). So two heads "
     "meet the 2,000 steps for all three arms on seed 0 only, ReLU missing them on seeds 1 and 2, and no protocol "
     "we ran meets them on two seeds for all three arms: four heads give ReLU the 2,000 steps on all three seeds "
     "(1,975 / 1,825 / 1,925) and round2 / linear on none, two heads round2 / linear on all three and ReLU on seed "
     "0 alone", "ran"),
]

# For each trend not reproduced under the default protocol: the ablations that test a choice of
# ours which could cause it, each as (protocol tag, the trend's outcome measured under it, what
# it means[, scope]).  The trend is evaluated on the default runs with the ablated models' runs
# swapped in (scope "merged", the default) or on the ablated models' runs alone ("ran": for an
# ablation run on some arms of a trend only); "variant:V" in the scope counts only the tag's runs of
# MQAR's experiment V (several: the runs of each, swapped in together, so that an ablation which flips
# one reading and breaks another one the default reproduces is named as such; the first names the
# trend's own experiment, and the ablation reaches the trend only with a run of it).  Where :data:`TREND_MODELS`
# names the models a trend reads, the ablation reaches it only if one of them ran under it.  A model an option of the
# tag does not apply to (the DeltaFormer's write query for a Transformer) is taken from its runs under the
# tag's other options where they exist (:func:`_companions`), not from the default protocol.  An ablation
# whose outcome differs from the default's isolates a cause; the check
# asserts the documented outcome under every ablation listed (docs/tasks.md, "Causes").  An outcome of
# None is a candidate listed before it decided the trend (not run, or its finished runs do not reach the trend's
# readings yet): the summary names it "not yet decided", and once its runs reach the
# trend the check fails until the measured outcome is written in.
CAUSES = {
    "collision.delta_reset_about_075_256": [
        ("n_layers-1", True, "our second layer: with one mixer layer Delta and reset fall to about 0.75-0.9 at "
                             "n_f = 256 while BL stays at 1.00"),
        ("gates-head", False, "per-head constant gates (the paper's main text): Delta/reset stay at 1.00"),
        ("gates-head__reset_l2-0.05", False, "reset with per-head gates and ℓ² fixed at 0.05 (App. E.5.5): 1.00"),
        ("opening_rounds-1", False, "an opening round writing every identity once: Delta/reset stay at 1.00"),
        ("queries_write-true", False, "query tokens writing (our earlier protocol): Delta/reset stay ≈ 1.0"),
    ],
    "random_keys.bl_lowest_ce_high_density": [
        ("calibrated", False, "after a fitted temperature (held-out half) BL's cross-entropy is still not the "
                              "lowest: not a calibration effect"),
        ("p0-0.1", False, "p0 = 0.1: not lowest"),
        ("p0-10.0", False, "p0 = 10: not lowest"),
        ("bl_decay-true", False, "a learned decay: not lowest"),
        ("train_n-16.32.64.128.256", False, "training up to n = 256 (n/D = 16): the gap to the best shrinks to "
                                            "a few hundredths of a nat but BL is still not the lowest"),
        ("queries_write-true", False, "query tokens writing: not lowest"),
        ("n_layers-1", True, "our second layer (as for collision recall): with one mixer layer BL has the lowest "
                             "cross-entropy at every n/D >= 6 on each of 3 seeds (means 1.22 / 1.86 / 2.73 / 3.30 "
                             "nats at n/D = 6 / 8 / 12 / 16, Delta 1.46 / 2.07 / 2.86 / 3.43, reset 1.45 / 2.04 / "
                             "2.84 / 3.40)"),
        ("gates-head", False, "per-head constant gates: BL's cross-entropy rises far above the others' "
                              "(4.86 nats at n/D = 16)"),
    ],
    "swap.transformers_stay_low": [
        ("d_model-32", False, "width 32: 0.40 / 0.47 / 0.54 / 0.58 for 1/2/4/8 layers; depth still helps"),
        ("d_model-64", False, "width 64: 0.41 / 0.53 / 0.62 / 0.78"),
        ("supervision-last", True, "the loss at the last token only: every plain model, the DeltaFormers "
                                   "included, stays at chance (0.19-0.21)"),
        ("pos-nope", False, "no position encoding: 0.39 / 0.49 / 0.64 / 0.75 for 1/2/4/8 layers; depth still "
                            "helps"),
        ("d_model-16", False, "width 16: 0.38 / 0.43 / 0.46 / 0.501 — the 8-layer model misses the bound by 0.001: "
                              "the narrower the model, the flatter the depth curve (the paper's width is not "
                              "in the notes)"),
    ],
    "swap.stress_round_high_512": [
        ("stress_keys-rounding_exact__stress_read-linear", True,
         "keys on which two-decimal rounding is exact (no such unit keys exist at n = 512, d = 128: Welch bound) "
         "and a linear read: round κ1 reaches ≥ 0.9"),
        ("stress_keys-rounding_exact", False, "the same keys with the softmax read: no learning (a softmax cannot "
                                              "give the signed read weights an exact read needs)"),
        ("stress_read-linear", False, "random keys with a linear read: no learning"),
    ],
    "dag.transformers_about_08": [
        ("root_position-last", True, "the root after the edges: the 4- and 8-layer Transformers end at 0.88 and "
                                     "0.90, inside the reading's 0.7-0.9 (the 8-layer one by 0.002)"),
        ("edge_tokens-single__edge_embedding-factored", False, "one token per edge holding both endpoints "
                                                               "(1 layer: 0.84; the deep Transformers not run)"),
        ("edge_tokens-single__output-per_node__edge_embedding-factored", False,
         "the inputs and read-out under which round2 and linear DeltaFormers learn the task (with their write "
         "query): 0.76 / 0.94 / 0.995 / 1.000 per node for 1 / 2 / 4 / 8 layers (1 and 2 run on a CPU, 4 and 8 in "
         "plan device47), so the deep Transformers solve the task too and the one-layer one falls below 0.8"),
    ],
    "dag.deltaformer_fast": DAG_DELTAFORMER_ABLATIONS + DAG_HEADS_SIGNED,
    "dag.deltaformer_above_transformers": DAG_DELTAFORMER_ABLATIONS,
    "mqar.update16_gdn_conv_mamba2_60": [
        ("update_order-interleaved", False, "GDN-conv with the updates interleaved among the initial pairs (ours "
                                            "puts them after the pairs): 1.000 at 16 updates again, not 0.60"),
        ("init-zoology", False, "Zoology's initialisation (N(0, 0.02) weights, Mamba2's out_proj at 0.01; ours: "
                                "torch's defaults), at lr 1e-3, where Mamba2 does not learn under ours either: "
                                "still no learning (training accuracy 0.04 after 25,000 steps, 0.00 at 16 updates)"),
        ("backbone-mixers", False, "both models in Zoology's own block (each mixer's own short convolution, no "
                                   "gated convolution before it, no MLP): Mamba2 (lr 1e-2) 0.96 at 16 updates, further "
                                   "from 0.60 than our block's 0.81; GDN-conv (lr 1e-3) 1.000 again"),
        ("update_keys-distinct", False, "GDN-conv with every update re-assigning a different key (U <= P; ours "
                                        "may update a key several times): 1.000 at 16 updates again"),
        ("update_train_frac-0.5", False, "training on at most half as many updates as pairs (0..8 at 16 pairs), "
                                         "so the test's 10-16 updates lie beyond training (ours trains on 0..16): "
                                         "GDN-conv 1.000 at 16 updates, Mamba2 0.803 (0.807 when trained on 0..16): "
                                         "both extrapolate as they interpolate", "variant:update"),
        # one hypothesis for both panels, so its runs of either count: a width that flips one reading but breaks
        # another of b/c is reported as such, not as the cause (plan device41)
        ("d_model-64", False, "panels b/c at width 64 (the paper gives no width for them; ours 128), each model at "
                              "the rate picked at width 128: GDN-conv 1.000 and Mamba2 0.996 at 16 updates, not "
                              "0.60, while BL and GDN fall to 0.643 and 0.729 (width 128 reproduces their 0.88 "
                              "and 0.98)", "variant:update", "variant:block"),
        # plan device43 (6 December, eighth session): one hypothesis for panels b/c, as width 64 was
        ("filler-random", False, "Zoology's filler between queries (ids uniform over the vocabulary, its "
                                 "random_non_queries; ours one PAD token): neither baseline learns under it in "
                                 "25,000 steps at its picked rate (GDN-conv at 1e-3 ends at training accuracy "
                                 "0.03, Mamba2 at 1e-2 at 0.05; under PAD both pass 0.5 by step 3,825 / 5,950), "
                                 "so both read 0.000 at 16 updates (chance 1/8,192), not 0.60 (other rates not "
                                 "run under it: a model that does not learn cannot give the reading's partial "
                                 "0.60 at that rate); BL, whose write mask keeps filler out of its memory, learns "
                                 "under it (0.902 at 16 pairs)",
         "variant:update", "variant:block"),
        # plan device50 (7 December, sixteenth session, one H200): the order named as the Block reading's cause
        # must serve panel b as well; it had not run on these two baselines
        ("query_order-shuffled", False, "each query slot asking a key drawn at random instead of Zoology's i-th "
                                        "slot asking the i-th key (the Block reading's cause on two seeds of "
                                        "three), each model at its picked rate, seed 0: GDN-conv (1e-3) 1.000 at "
                                        "16 updates, as in Zoology's order; Mamba2 (1e-2) 0.815 (0.807 in "
                                        "Zoology's order), falling from 0.996 with no update as before; both fit "
                                        "their pool (training accuracy 1.00), so the order leaves this reading "
                                        "where the default has it",
         "variant:update", "variant:block"),
    ],
    "mqar.block16_gdn_100_bl_75": [
        ("backbone-mlp", False, "mixer and MLP without Zoology's short convolution (our first backbone): BL "
                                "memorises its pool (training accuracy 1.00, 0.03 at 16 pairs), far below 0.75"),
        ("backbone-mixers", False, "the two mixers alone (no convolution, no MLP), where the notes' 'without a "
                                   "local convolution' points: BL memorises again (0.07 at 16 pairs)"),
        ("bl_heads-1", False, "BL's 8,192 state as one head of 64 (one 64x64 covariance) instead of four of 32: "
                              "0.988 at 16 pairs, further from 0.75"),
        ("bl_noise_init-0.5", False, "BL's noise gates starting at l2 = r2 = 0.5 (0.05 by default): 0.889"),
        ("bl_noise_init-0.005", False, "the gates starting at 0.005: 0.863, 0.11 above 0.75 and inside the default's "
                                       "seed spread (0.875-0.996)"),
        ("bl_decay-true", False, "BL with a learned decay (ours has none by default) under the default backbone: "
                                 "0.931 at 16 pairs, further from 0.75 than the default's 0.910 on the same seed"),
        ("d_model-64", True, "panels b/c at width 64 (the paper gives no width for them; ours 128; BL's Base "
                             "accuracy falls from 0.83 at 128 to 0.15 at 64), each model at the rate picked at "
                             "width 128: BL 0.705 / 0.628 / 0.539 at 16 pairs on seeds 0 / 1 / 2 (inside "
                             "0.65-0.85 on seed 0 only), GDN 0.996 on seed 0; on Update the same width takes BL to "
                             "0.643 and GDN to 0.729 at 16 updates",
         "variant:block", "variant:update"),
        # plan device42 (6 December, seventh session): both BL readings of ours lay above the notes' while GDN's
        # match, so a smaller BL head (less capacity per covariance) might move both; one hypothesis for panels
        # b/c, its Update run testing that it keeps BL's Update reading
        ("bl_heads-8", False, "BL's 8,192 state as eight heads of 22 (7,744) instead of four of 32 (the paper's "
                              "split is not given), at BL's picked rate (1e-2): 0.890 at 16 pairs on seed 0, "
                              "inside four heads' seed spread (0.940 / 0.844 / 0.889 on seeds 0 / 1 / 2), not "
                              "0.75; on Update it keeps BL's reading (0.916 at 16 updates, four heads 0.962)",
         "variant:block", "variant:update"),
        # plan device43 (6 December, eighth session; BL's run first, GDN's after)
        ("filler-random", False, "Zoology's filler between queries (ids uniform over the vocabulary, its "
                                 "random_non_queries; ours one PAD token): BL 0.902 at 16 pairs on seed 0 (0.940 "
                                 "under PAD), not 0.75; GDN does not learn under it (training accuracy 0.18 after "
                                 "18,750 steps, where under PAD it passed 0.5 by step 3,400; 0.000 at 16 pairs); "
                                 "on Update neither GDN-conv nor Mamba2 learns under it (0.000 at 16 updates)",
         "variant:block", "variant:update"),
        # plan device44 (6 December, ninth session).  queries_write: BL's write mask (only key and value tokens
        # write; queries and filler are Kalman missing observations) is knowledge the baselines do not get (fla's
        # layers write every token), and the notes (§3.3, "learning roles") say the shared vocabulary is there to
        # make roles learned; without the mask BL might fall toward the notes' 0.75.  It does not: BL learns the
        # roles itself on Block and reads higher; on Update the mask matters.  query_order: Zoology's generator
        # gives the i-th drawn query slot to the i-th written key, and its slots are drawn with a power law
        # that favours early slots, so the keys written first tend to be asked first; shuffled breaks that link.
        # Plan device46 (6 December, tenth session) ran GDN's Block run and both Update runs under it.
        ("queries_write-true", False, "BL without its write mask (query and filler tokens write too, as every "
                                      "token does in the baselines): 0.979 at 16 pairs on seed 0 (0.940 with the "
                                      "mask), further from 0.75; on Update it reads 0.767 at 16 updates (0.962 with "
                                      "the mask, the notes 0.88), so the mask is not the Block reading's cause and "
                                      "BL's default keeps it", "variant:block", "variant:update"),
        ("query_order-shuffled", True, "each query slot asking a key drawn at random instead of Zoology's i-th "
                                       "slot asking the i-th key (so the keys written first are no longer asked "
                                       "first): BL 0.765 at 16 pairs on seed 0 (0.940 in Zoology's order; its "
                                       "seeds 1 / 2 there 0.844 / 0.889), GDN 0.996 (0.997), training accuracy "
                                       "1.00 on all; it keeps both Update readings (BL 0.913 at 16 updates, 0.962 "
                                       "in Zoology's order, the notes 0.88; GDN 0.999, 0.995 in Zoology's order). "
                                       "BL's seeds 1 and 2 under it (plan device47): 0.904 and 0.818, so 0.765 / "
                                       "0.904 / 0.818 (mean 0.83) against Zoology's order's 0.940 / 0.844 / 0.889 "
                                       "(mean 0.89): the order lowers BL by 0.06 on average, less than either "
                                       "order's spread over seeds (0.14, 0.10), and seed 1 reads higher shuffled. "
                                       "GDN's seeds 1 and 2 under it (plan device48): 0.997 and 0.998, so the "
                                       "reading holds on seeds 0 and 2 (BL inside 0.65-0.85) and not on seed 1 "
                                       "(0.904): the order moves BL into the reading's band on two seeds of three, "
                                       "not on every seed. GDN-conv and Mamba2 on Update under it (plan device50): "
                                       "1.000 and 0.815 at 16 updates, where Zoology's order has them (1.000 / "
                                       "0.807)", "variant:block", "variant:update"),
    ],
    "swap.direct_nope_near_chance": [
        ("curriculum_keys-raw", True, "raw keys with β in (0, 1) (the paper-like parameterisation; run for the round2 "
                                      "arms): direct training at 256 diverges (NaN loss by step 25) while the "
                                      "curriculum still reaches 256", "ran"),
    ],
}

SEEDS_TO_CONFIRM = 3


def _seed_stats(results, section, xkey, x, ykey):
    """{model: (mean, sd over seeds, n)} of ``ykey`` at ``xkey == x``."""
    per = {}
    for r in results:
        for row in r["eval"].get(section, []):
            if row[xkey] == x and ykey in row:
                per.setdefault(r["model"], []).append(row[ykey])
    return {m: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)) for m, v in per.items()}


def _min_seeds(results) -> int:
    per = {}
    for r in results:
        per.setdefault(r["model"], set()).add(r["seed"])
    return min((len(v) for v in per.values()), default=0)


def _seeds_by_trend(trend_fn, default) -> dict:
    """{trend key: (seeds on which it holds, seeds on which it could be decided)}: ``trend_fn`` on each
    seed's runs alone (relabelled seed 0, since the readings are decided on seed 0).  A trend over
    several models counts a seed only where all of them have run it."""
    out = {}
    for s in sorted({r["seed"] for r in default}):
        for key, _, outcome in trend_fn([{**r, "seed": 0} for r in default if r["seed"] == s]):
            held, decided = out.get(key, (0, 0))
            out[key] = (held + bool(outcome), decided + (outcome is not None))
    return out


def _judge(ev: Evidence, trend_fn, results, per_seed_readings: bool = False) -> None:
    """Evaluate ``trend_fn`` under the default protocol (asserting each documented outcome), under
    every ablation listed in :data:`CAUSES` for the trends not reproduced (asserting the documented
    outcome there too), and under every other protocol present (recorded); summarise.

    A reproduced trend is confirmed on :data:`SEEDS_TO_CONFIRM` seeds.  Where ``trend_fn`` reads
    means over the seeds (``per_seed_readings=False``: collision recall, random keys) that is the
    number of seeds every model has run; where it reads seed 0 (``True``: MQAR's and Fig. 7's readings) it is the
    number of seeds on which the trend holds alone (:func:`_seeds_by_trend`)."""
    by_tag = _by_tag(results)
    default = by_tag.get("", [])
    trends = trend_fn(default)
    seeds = _min_seeds(default)
    per_seed = _seeds_by_trend(trend_fn, default) if per_seed_readings else {}
    done, missing = [], []
    for key, text, outcome in trends:
        if outcome is None:
            missing.append(text)
            ev.pend(f"{text}: no results under the default protocol")
            continue
        doc = DOCUMENTED[key]
        doc_text = "no outcome yet: document it" if doc is None else ("reproduced" if doc else "not reproduced")
        held, decided = per_seed.get(key, (int(bool(outcome)), 1)) if per_seed_readings else (seeds, seeds)
        how = (f"seed 0; holds on {held} of the {decided} seed(s) run" if per_seed_readings
               else f"{seeds} seed(s)")
        ev.holds("triton", f"{text}: {'reproduced' if outcome else 'NOT reproduced'} "
                           f"(default protocol, {how}; documented: {doc_text})", outcome == doc,
                 computed=outcome, expected=doc, note="published trend on the committed GPU results")
        if not outcome:
            causes = _causes(ev, trend_fn, key, text, default, by_tag, {k: o for k, _, o in trends},
                             per_seed_readings=per_seed_readings)
            ev.dispute("triton", text, published="holds (paper)",
                       measured="not reproduced by our runs" + (
                           f"; {causes}" if causes.startswith("cause not isolated")
                           else f"; measured cause: {causes}" if causes else "; no ablation of ours run yet"),
                       note="docs/tasks.md: the numbers, the protocol and the ablations")
            done.append((key, text, outcome, causes))
        else:
            if held < SEEDS_TO_CONFIRM:
                on = f"{held} of {decided}" if per_seed_readings else f"{held}"
                ev.dispute("triton", f"{text} (reproduced on {on} seed(s); {SEEDS_TO_CONFIRM} needed to confirm)",
                           published="holds (paper)", measured=f"reproduced on {on} seed(s)")
            done.append((key, text, outcome, ""))
    # every other protocol present: the trends as they come out under it (recorded, not asserted)
    per_protocol = {}
    for tag, rs in sorted(by_tag.items()):
        if tag == "":
            continue
        merged = _with_ablation(default, rs + _companions(tag, by_tag))
        per_protocol[tag] = {k: o for k, _, o in trend_fn(merged) if o is not None}
    ok = [t for _, t, o, _ in done if o]

    def other_seeds(key):
        """Where seed 0 decides a reading false, the summary says on how many seeds it was decided: another seed's
        runs alone may meet it, or every seed decided may miss it (a reading read on seed 0 alone says nothing)."""
        held, decided = per_seed.get(key, (0, 0))
        if held:
            return f" (seed 0 decides; holds on {held} of the {decided} seeds decided)"
        return f" (seed 0 decides; fails on each of the {decided} seeds decided)" if decided > 1 else ""

    not_ok = [(t + other_seeds(k), c) for k, t, o, c in done if not o]
    qw = per_protocol.get("queries_write-true")
    ev.record(protocol_default=_protocol_spec_defaults(results), trends_reproduced=ok,
              trends_not_reproduced=[t for t, _ in not_ok], trends_without_results=missing,
              trends_by_protocol=per_protocol, seeds_default=seeds,
              **({"seeds_by_trend": {k: {"holds": h, "run": n} for k, (h, n) in sorted(per_seed.items())}}
                 if per_seed_readings else {}),
              result_files=sorted(r["_file"] for r in results),
              result_files_skipped=SKIPPED.get(results[0]["task"], {}) if results else {})
    task = results[0]["task"] if results else ""
    label = "queries read only, " if task in ("collision_recall", "random_keys") else ""
    ns = sorted({n for _, n in per_seed.values() if n}) if per_seed_readings else []
    if ns:
        seeds_text = label + "seed 0 decides, " + (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}-{ns[-1]}") + \
            " seed(s) per trend"
    else:
        seeds_text = f"{label}{seeds} seed(s)"
    ev.summary = (f"{len(ok)}/{len(done)} published trends reproduced (default protocol: {seeds_text})"
                  + (f"; not reproduced: " + "; ".join(f"{t} [{c or 'cause not isolated'}]" for t, c in not_ok)
                     if not_ok else "")
                  + (f"; queries writing: {sum(qw.values())}/{len(qw)}" if qw else "")
                  + (f"; {len(missing)} without results" if missing else "")
                  + f" ({len(results)} result files; docs/tasks.md)")


def _protocol_spec_defaults(results):
    if not results:
        return {}
    task = results[0]["task"]
    return {k: d for k, (d, _, _) in _protocol_spec(task).items()}


def _causes(ev, trend_fn, key, text, default, by_tag, reproduced=None, per_seed_readings=False) -> str:
    """Evaluate the trend under each ablation of :data:`CAUSES`; the ones that flip it, as text.

    ``reproduced``: the default protocol's outcome per trend; an ablation that flips ``key``
    while turning one of the reproduced trends false is named as such, not as the cause.
    ``per_seed_readings``: the trend is read on seed 0 (MQAR, Fig. 7), so an ablation run on several seeds says
    on how many of them the flip holds (:func:`_seeds_by_trend` on the ablated runs), not only how many
    seeds every model ran."""
    reproduced = reproduced or {}
    flips, side, tried, pending = [], [], [], []
    for tag, doc, meaning, *scope in CAUSES.get(key, []):
        runs = by_tag.get(tag, [])
        # "variant:V" in the scope: only the tag's runs of those experiments count (MQAR's Base runs at another
        # width share the tag d_model-64 with a width ablation of Update or Block); the first one named is the
        # trend's own experiment, and without a run of it the ablation has not reached the trend (the others'
        # runs only test what it breaks)
        variants = [x.split(":", 1)[1] for x in scope if x.startswith("variant:")]
        if variants:
            runs = [r for r in runs if r.get("protocol", {}).get("variant", "base") in variants]
            if not any(r.get("protocol", {}).get("variant", "base") == variants[0] for r in runs):
                runs = []
        if tag == "calibrated":                 # no runs of its own: every default run, re-read calibrated
            rs = runs = [_calibrated(r) for r in default]
        elif runs:
            runs = runs + _companions(tag, by_tag)
            rs = runs if "ran" in scope else _with_ablation(default, runs)
        else:
            ev.note(f"{key}: ablation {tag} has no results")
            if doc is None:                     # a candidate listed before it ran: named as not yet decided
                pending.append(tag)
            continue
        under = {k: o for k, _, o in trend_fn(rs)}
        outcome = under.get(key)
        reads = TREND_MODELS.get(key)
        if outcome is not None and reads is not None and not reads & {r["model"] for r in runs}:
            # the tag reaches the trend only through a model the trend reads: otherwise every model it reads comes
            # from the default protocol, and the outcome is the default's, not the ablation's (the Block reading's
            # query order ran on BL and GDN, not on the Update reading's GDN-conv and Mamba2)
            ev.note(f"{key}: ablation {tag} ran none of the models this trend reads ({', '.join(sorted(reads))})")
            outcome = None
        if outcome is None:                     # its runs do not reach this trend's readings (yet)
            if doc is None:
                pending.append(tag)
            continue
        n = f"{_min_seeds(by_tag.get(tag, default))} seed(s)"
        if per_seed_readings:
            ran = {r["seed"] for r in runs}
            held, decided = _seeds_by_trend(trend_fn, [r for r in rs if r["seed"] in ran]).get(key, (0, 0))
            n = f"seed 0; holds on {held} of the {decided} seeds decided" if decided > 1 else n
        tried.append(tag)
        documented = "none yet: document it" if doc is None else "reproduced" if doc else "not reproduced"
        ev.holds("triton", f"cause test for '{text}' under {tag} ({n}): "
                           f"{'reproduced' if outcome else 'not reproduced'} (documented: "
                           f"{documented}) — {meaning}", outcome == doc,
                 computed=outcome, expected=doc, note="ablation of a protocol choice of ours")
        if outcome:
            merged = ("" if (tag == "calibrated" or "ran" in scope)
                      else _read_from_default(trend_fn, key, outcome, rs, runs, _companions(tag, by_tag)))
            # a choice that flips this trend but breaks a trend the default reproduces is not the paper's
            # protocol either: it is reported, not counted as the cause
            broken = sorted(k for k, o in under.items() if o is False and reproduced.get(k) is True)
            if broken:
                ev.note(f"{key}: {tag} flips it but breaks {', '.join(broken)}: not a consistent cause")
                side.append(f"{tag} flips it but also breaks {', '.join(broken)} ({n}): {meaning}{merged}")
                continue
            flips.append(f"{tag} flips it ({n}): {meaning}{merged}")
    if flips:
        return "; ".join(flips + side)
    if not side and not tried:
        return f"cause not isolated (candidates not yet decided: {', '.join(pending)})" if pending else ""
    later = f"; candidates not yet decided: {', '.join(pending)}" if pending else ""
    return "; ".join([f"cause not isolated (ablated: {', '.join(tried)}{later})"] + side)


def _read_from_default(trend_fn, key, outcome, rs, runs, companions=()) -> str:
    """Which of the models a flip relies on were read from the default protocol: :func:`_with_ablation`
    replaces only the models that ran under the ablation, so a model that did not run enters the flip with its
    default runs.  A model counts when leaving its runs out of ``rs`` changes the trend's outcome (the trend
    reads it); the bracket for the cause's text names those and the models that ran, empty when none."""
    beside = sorted({r["model"] for r in companions})
    ran = sorted({r["model"] for r in runs} - set(beside))
    others = sorted({r["model"] for r in rs} - set(ran) - set(beside))
    used = [m for m in others
            if dict((k, o) for k, _, o in trend_fn([r for r in rs if r["model"] != m])).get(key) != outcome]
    if not used:
        return ""
    also = f"; under its other options: {', '.join(beside)}" if beside else ""
    return f" [run under it: {', '.join(ran)}{also}; read from the default protocol: {', '.join(used)}]"


def _calibrated(r):
    """A random-keys result with the temperature-calibrated cross-entropy in place of the raw one."""
    rows = [{**row, "ce": row["ce_cal"]} for row in r["eval"]["crowding"] if "ce_cal" in row]
    return {**r, "eval": {**r["eval"], "crowding": rows}}


def _cores_and_results_note(ev, what):
    ev.note(f"no trained results under results/{what}: learned numbers not checked")
    ev.summary = "generator and cores checked; no GPU results present"


def collision_recall(ev: Evidence) -> None:
    torch = _torch()
    if torch is None:
        ev.skip("triton", "torch is not installed")
        return
    _collision_generator(ev, torch)
    _cores_vs_numpy(ev, torch)
    res = _results("collision_recall")
    if not res:
        return _cores_and_results_note(ev, "collision_recall")
    default = [r for r in res if r["_tag"] == ""]
    ev.record(acc_target_nf256=_seed_stats(default, "writes", "n_f", 256, "acc_target"),
              margin_by_rho={rho: _seed_stats(default, "overlap", "rho", rho, "margin_target")
                             for rho in (0.85, 0.90, 0.95)})
    _judge(ev, collision_trends, res)


_COLL_DR = frozenset({"delta", "reset"})         # the two rules of the ≈ 0.75 / negative-margin readings
_COLL_LA = frozenset({"linear", "gla"})           # the two that collapse


def collision_trends(res) -> list:
    """The published trends of BL Fig. 3(c, d) on a set of results: ``(key, text, outcome or None)``."""
    acc = _seed_stats(res, "writes", "n_f", 256, "acc_target")
    mar = _seed_stats(res, "overlap", "rho", 0.95, "margin_target")
    a = {m: v[0] for m, v in acc.items()}
    dr = sorted(m for m in _COLL_DR if m in a)
    have = lambda *ms: all(m in a for m in ms)      # noqa: E731
    high = {rho: {m: v[0] for m, v in _seed_stats(res, "overlap", "rho", rho, "margin_target").items()}
            for rho in (0.85, 0.90, 0.95)}
    return [
        ("collision.la_gla_collapse", "linear attention and GLA collapse at n_f = 256 (target accuracy < 0.2)",
         all(a[m] < 0.2 for m in _COLL_LA) if have(*_COLL_LA) else None),
        ("collision.bl_near_perfect_256", "BL near-perfect at n_f = 256 (target accuracy ≥ 0.9)",
         a["bl"] >= 0.9 if have("bl") else None),
        ("collision.delta_reset_about_075_256", "Delta/reset ≈ 0.75 at n_f = 256 (within 0.6-0.9)",
         all(0.6 <= a[m] <= 0.9 for m in dr) if len(dr) == 2 else None),
        ("collision.bl_above_delta_reset_256", "BL above Delta and reset at n_f = 256",
         all(a["bl"] > a[m] for m in dr) if (len(dr) == 2 and have("bl")) else None),
        ("collision.bl_positive_margin_095", "BL margin positive at ρ = 0.95, n_f = 64 (mean − sd over seeds > 0)",
         (mar["bl"][0] - mar["bl"][1] > 0) if "bl" in mar else None),
        ("collision.delta_reset_negative_margin_095", "Delta/reset margins negative at ρ = 0.95",
         all(mar[m][0] < 0 for m in dr) if len(dr) == 2 else None),
        ("collision.bl_margin_best_high_overlap", "BL margin above Delta/reset at ρ = 0.85, 0.90, 0.95",
         all(high[r]["bl"] > high[r][m] for r in high for m in dr) if (len(dr) == 2 and have("bl")) else None),
    ]


def random_keys(ev: Evidence) -> None:
    torch = _torch()
    if torch is None:
        ev.skip("triton", "torch is not installed")
        return
    from assocmem.gpu.tasks import data as Dt

    W = Dt.row_orthogonal_projection().numpy()
    ev.close("numpy", "frozen projection is row-orthogonal: max |W Wᵀ − I|", float(np.abs(W @ W.T - np.eye(16)).max()),
             0.0, abs_tol=1e-12)
    b = Dt.random_keys_batch(16, n=48, generator=torch.Generator().manual_seed(3))
    kn = b.keys.double().norm(dim=-1)
    ev.close("numpy", "addresses renormalised: max |‖k‖ − 1|", float((kn - 1).abs().max()), 0.0, abs_tol=1e-6)
    distinct = all(len({tuple(np.round(k.numpy(), 6)) for k in b.keys[i, 48:]}) == 8 for i in range(16))
    ev.holds("numpy", "8 distinct written items queried per sequence; loss on queries only",
             distinct and bool(((b.labels != Dt.IGNORE) == b.is_query).all()))
    _cores_vs_numpy(ev, torch, seed=1)
    res = _results("random_keys")
    if not res:
        return _cores_and_results_note(ev, "random_keys")
    default = [r for r in res if r["_tag"] == ""]
    ev.record(ce_by_density={x: _seed_stats(default, "crowding", "n_over_D", x, "ce") for x in DENSITIES},
              ce_calibrated_by_density={x: _seed_stats(default, "crowding", "n_over_D", x, "ce_cal")
                                        for x in DENSITIES},
              acc_by_density={x: _seed_stats(default, "crowding", "n_over_D", x, "acc") for x in DENSITIES})
    _judge(ev, random_keys_trends, res)


DENSITIES = (4.0, 6.0, 8.0, 12.0, 16.0)


def random_keys_trends(res) -> list:
    """The published trends of BL Fig. 7 (random keys) on a set of results."""
    ce = {x: _seed_stats(res, "crowding", "n_over_D", x, "ce") for x in DENSITIES}
    acc = {x: _seed_stats(res, "crowding", "n_over_D", x, "acc") for x in DENSITIES}
    high = DENSITIES[1:]
    models = sorted(acc[4.0])
    have_bl = "bl" in acc[4.0] and all("bl" in ce[x] for x in high)
    return [
        ("random_keys.degrade_beyond_training", "accuracy falls monotonically with n/D past training for every model",
         all(acc[x][m][0] > acc[y][m][0] for m in models for x, y in zip(DENSITIES, high)) if models else None),
        ("random_keys.bl_lowest_ce_high_density", "BL has the lowest cross-entropy at every n/D in {6, 8, 12, 16}",
         all(ce[x]["bl"][0] <= min(v[0] for v in ce[x].values()) for x in high) if have_bl else None),
        ("random_keys.bl_accuracy_near_best_high_density", "BL accuracy within 0.05 of the best at every n/D ≥ 6",
         all(acc[x]["bl"][0] >= max(v[0] for v in acc[x].values()) - 0.05 for x in high) if have_bl else None),
    ]


def swap_tracking(ev: Evidence) -> None:
    torch = _torch()
    if torch is None:
        ev.skip("triton", "torch is not installed")
        return
    import itertools

    from assocmem.gpu.tasks import data as Dt, models as Mo

    b = Dt.swap_batch(64, generator=torch.Generator().manual_seed(9))
    pairs = list(itertools.combinations(range(5), 2))
    ok = True
    for seq, lab in zip(b.tokens.tolist(), b.labels.tolist()):
        st = list(range(5))
        for t, y in zip(seq, lab):
            i, j = pairs[t]
            st[i], st[j] = st[j], st[i]
            ok &= st[0] == y
    ev.holds("numpy", "swap labels = element at position 1 by direct simulation (64 × 16 tokens)", ok)
    g = torch.Generator().manual_seed(4)
    k = 0.5 * torch.randn(1, 2, 11, 4, generator=g, dtype=torch.float64)
    v = torch.randn(1, 2, 11, 3, generator=g, dtype=torch.float64)
    beta = torch.rand(1, 2, 11, generator=g, dtype=torch.float64)
    for kind in Mo.KAPPAS:
        u = Mo.deltaformer_u(v, k, beta, kind)
        A = Mo.kappa1_matrix(k, kind)
        ref = []
        for t in range(11):
            acc = v[:, :, t].clone()
            for i in range(t):
                acc -= beta[:, :, t, None] * A[:, :, t, i, None] * ref[i]
            ref.append(acc)
        err = float((u - torch.stack(ref, 2)).abs().max())
        ev.close("triton", f"DeltaFormer triangular solve = sequential u-recursion (κ1 = {kind})", err, 0.0,
                 abs_tol=1e-12)
    net = Mo.FixedKeySwapModel(6, 8, kappa1="round2", kappa2="linear").double()
    net.K = torch.eye(8, dtype=torch.float64)[:6]
    net.E = torch.eye(8, dtype=torch.float64)[[3, 0, 7, 1, 5, 2]]
    with torch.no_grad():
        net.q.copy_(net.K[0])
        sb = Dt.swap_stress_batch(8, n=6, length=200, generator=torch.Generator().manual_seed(2))
        o = net.read(sb.pos_a, sb.pos_b, sb.elem)[:, 6:]
    err = float((o - net.E[sb.labels[:, 6:]]).abs().max())
    ev.close("triton", "Theorem 1 construction in the stress model (orthonormal keys, round κ1): 200 swaps tracked",
             err, 0.0, abs_tol=1e-12)
    all_res = _results("swap_tracking", diverged=True)
    if not all_res:
        return _cores_and_results_note(ev, "swap_tracking")
    default = [r for r in all_res if r["_tag"] == "" and r["seed"] == 0]
    last = {r["model"]: r["curve"][-1]["acc"] for r in default if r.get("curve")}
    ev.record(final_train_acc=last)
    ns = sorted({int(m.rsplit("-", 1)[1]) for m in last if m.startswith("stress-")})
    if ns:
        ev.record(stress_no_tracking_accuracy=_no_tracking_check(ev, torch, ns))
    _judge(ev, swap_trends, all_res)


_SWAP_FAST = frozenset({"deltaformer-round2", "deltaformer-linear"})
_SWAP_SLOW = frozenset({"deltaformer-relu", "deltaformer-exp", "deltaformer-softmax"})


def _swap_arms(arm, pos):
    """The length-curriculum models of one arm (``curriculum`` or ``direct``) and position encoding."""
    return frozenset(m for m in CURRICULUM_MODELS if m.startswith(arm + "-") and m.endswith("-" + pos))


def swap_trends(res) -> list:
    """The published trends of AM Figs. 3-6 on a set of (seed-0) results.

    Figs. 4-6 plot *training* accuracy (Fig. 6: at the current training length), so
    the trends read the last logged point of each training curve; a run recorded as
    diverged counts with its last logged accuracy (it did not learn).
    """
    curves = {r["model"]: r["curve"] for r in res if r["seed"] == 0 and r.get("curve")}
    plain = {m: c for m, c in curves.items() if not m.startswith("stress-") and m not in CURRICULUM_MODELS}
    final = {m: c[-1]["acc"] for m, c in plain.items()}
    first95 = {m: next((x["step"] for x in c if x["acc"] >= 0.95), None) for m, c in plain.items()}
    fast, slow_k = sorted(_SWAP_FAST), sorted(_SWAP_SLOW)
    trs = [m for m in final if m.startswith("transformer-")]
    trends = [
        ("swap.round_linear_fast", "DeltaFormer with round or linear κ1 reaches 0.95 within 500 steps",
         all(first95.get(m) is not None and first95[m] <= 500 for m in fast) if all(m in final for m in fast) else None),
        ("swap.other_kappas_not_fast", "ReLU / exp / softmax κ1 do not reach 0.95 by the end",
         all(final[m] < 0.95 for m in slow_k) if all(m in final for m in slow_k) else None),
        ("swap.transformers_stay_low", "1/2/4/8-layer Transformers stay ≤ 0.5 at 2000 steps",
         all(final[m] <= 0.5 for m in trs) if len(trs) == 4 else None),
        ("swap.one_layer_transformer_low", "the 1-layer Transformer stays ≤ 0.5 at 2000 steps",
         final["transformer-1"] <= 0.5 if "transformer-1" in final else None),
    ]
    stress = {m: c[-1]["acc"] for m, c in curves.items() if m.startswith("stress-")}
    cur = {m: (c[-1]["acc"], c[-1].get("length")) for m, c in curves.items()
           if m.startswith("curriculum-") or m.startswith("direct-")}

    def arms(arm, pos):
        return {m: cur[m] for m in _swap_arms(arm, pos) if m in cur}

    cn, dn, dr = arms("curriculum", "nope"), arms("direct", "nope"), arms("direct", "rope")
    return trends + [
        ("swap.stress_round_high_512", "stress test n = 512: round κ1 reaches ≥ 0.9 (final training accuracy)",
         stress["stress-round2-512"] >= 0.9 if "stress-round2-512" in stress else None),
        ("swap.stress_linear_low_512", "stress test n = 512: linear κ1 stays ≤ 0.4 (paper: about 0.25)",
         stress["stress-linear-512"] <= 0.4 if "stress-linear-512" in stress else None),
        ("swap.curriculum_nope_reaches_256", "NoPE curriculum reaches length 256 and ≥ 0.95 accuracy there",
         all(L == 256 and a >= 0.95 for a, L in cn.values()) if cn else None),
        ("swap.direct_nope_near_chance", "NoPE direct training at 256 stays near chance (≤ 0.3; chance 0.2)",
         all(a <= 0.3 for a, _ in dn.values()) if dn else None),
        ("swap.direct_rope_rises", "RoPE direct training at 256 rises well above chance (≥ 0.5 by the end)",
         all(a >= 0.5 for a, _ in dr.values()) if dr else None),
    ]


def _no_tracking_check(ev: Evidence, torch, ns) -> dict:
    """The closed form against the stress generator (Monte Carlo), then the baseline for each ``n`` run."""
    from assocmem.gpu.tasks import data as Dt

    no_tracking_accuracy = Dt.no_tracking_accuracy
    for n, L, B in ((7, 30, 4000), (40, 80, 4000)):
        sb = Dt.swap_stress_batch(B, n=n, length=L, generator=torch.Generator().manual_seed(n))
        init0 = sb.elem[:, :1]                                   # the element first written at position 0
        hits = (sb.labels[:, n:] == init0).double()
        mc = float(hits.mean())
        se = float(hits.mean(1).std()) / math.sqrt(B)
        ev.close("numpy", f"no-tracking accuracy, closed form vs the stress generator (n = {n}, {L} swaps)",
                 mc, no_tracking_accuracy(n, L), abs_tol=5 * se)
    return {n: no_tracking_accuracy(n, 2 * n) for n in ns}


# ---------------------------------------------------------------------------
# AM §3.3, Fig. 7: reachability in trees
# ---------------------------------------------------------------------------
def dag_reachability(ev: Evidence) -> None:
    torch = _torch()
    if torch is None:
        ev.skip("triton", "torch is not installed")
        return
    from assocmem.gpu.tasks import dag as Dg
    from assocmem.gpu.tasks.train import dag_config, resolve_protocol

    # the generator against a graph search over the edges and the root read back from the tokens the
    # model sees (decoded with the vocabulary's offsets, not taken from the generator's own fields)
    for edge_tokens, root_position in (("pair", "first"), ("single", "last")):
        cfg = dag_config({**resolve_protocol("dag_reachability"), "edge_tokens": edge_tokens,
                          "root_position": root_position})
        voc, n = Dg.dag_vocab(cfg), cfg.n_nodes
        b = Dg.dag_batch(cfg, 64, generator=torch.Generator().manual_seed(11))
        ok = True
        for i in range(64):
            toks = b.tokens[i].tolist()
            roots = [t - voc.root for t in toks if voc.root <= t < voc.root + n]
            if edge_tokens == "single":
                pairs = [divmod(t - voc.edge, n) for t in toks if voc.edge <= t < voc.edge + n * n]
            else:
                nodes = [t - voc.node for t in toks if voc.node <= t < voc.node + n]
                pairs = list(zip(nodes[0::2], nodes[1::2]))
            if len(roots) != 1 or len(pairs) != n - 1:
                ok = False
                continue
            edges = {}
            for s_, d_ in pairs:
                edges.setdefault(s_, []).append(d_)
            seen, todo = {roots[0]}, [roots[0]]
            while todo:
                for c in edges.get(todo.pop(), []):
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
            ok &= seen == set(torch.nonzero(b.targets[i]).flatten().tolist()) and len(edges) > 0
        ev.holds("numpy", f"reachable sets = a graph search over the written edges ({edge_tokens} edge tokens, "
                          f"root {root_position}; 64 trees of {cfg.n_nodes} nodes)", ok)
    res = _results("dag_reachability", diverged=True)
    if not res:
        return _cores_and_results_note(ev, "dag_reachability")
    # seed 0's (the seed the readings are decided on) by protocol and model, and every seed's beside it: keyed by
    # protocol and model alone, the later seeds wrote over seed 0's (until 8 December)
    final = {}
    for r in res:
        final.setdefault(r["_tag"] or "default", {}).setdefault(r["model"], {})[int(r["seed"])] = (
            round(r["curve"][-1]["acc"], 4) if r.get("curve") else None)
    ev.record(final_train_acc={tag: {m: by[0] for m, by in sorted(ms.items()) if 0 in by}
                               for tag, ms in final.items()},
              final_train_acc_by_seed={tag: {m: dict(sorted(by.items())) for m, by in sorted(ms.items())}
                                       for tag, ms in final.items()})
    _judge(ev, dag_trends, res, per_seed_readings=True)     # the readings are on seed 0, as MQAR's


# The models each trend reads, so that an ablation which ran none of them does not decide it (:func:`_causes`):
# a model is read when its results can change the trend's outcome, and no other model's can (tested against the
# trend functions).  The random-key readings compare every model present, so they read all of them.  MQAR's entries
# come from :data:`MQAR_PARTS` (below), which its trend function reads.
_TRANSFORMERS = frozenset(f"transformer-{L}" for L in (1, 2, 4, 8))
_DAG_FAST = frozenset(f"deltaformer-{k}" for k in ("round2", "relu", "linear"))


TREND_MODELS = {
    "collision.la_gla_collapse": _COLL_LA,
    "collision.bl_near_perfect_256": frozenset({"bl"}),
    "collision.delta_reset_about_075_256": _COLL_DR,
    "collision.bl_above_delta_reset_256": _COLL_DR | {"bl"},
    "collision.bl_positive_margin_095": frozenset({"bl"}),
    "collision.delta_reset_negative_margin_095": _COLL_DR,
    "collision.bl_margin_best_high_overlap": _COLL_DR | {"bl"},
    "random_keys.degrade_beyond_training": frozenset(MIXERS),
    "random_keys.bl_lowest_ce_high_density": frozenset(MIXERS),
    "random_keys.bl_accuracy_near_best_high_density": frozenset(MIXERS),
    "swap.round_linear_fast": _SWAP_FAST,
    "swap.other_kappas_not_fast": _SWAP_SLOW,
    "swap.transformers_stay_low": _TRANSFORMERS,
    "swap.one_layer_transformer_low": frozenset({"transformer-1"}),
    "swap.stress_round_high_512": frozenset({"stress-round2-512"}),
    "swap.stress_linear_low_512": frozenset({"stress-linear-512"}),
    "swap.curriculum_nope_reaches_256": _swap_arms("curriculum", "nope"),
    "swap.direct_nope_near_chance": _swap_arms("direct", "nope"),
    "swap.direct_rope_rises": _swap_arms("direct", "rope"),
    "dag.transformers_about_08": _TRANSFORMERS,
    "dag.deltaformer_fast": _DAG_FAST,
    "dag.exp_softmax_lower": _DAG_FAST | {"deltaformer-exp", "deltaformer-softmax"},
    "dag.deltaformer_above_transformers": _DAG_FAST | _TRANSFORMERS,
}


def dag_trends(res) -> list:
    """The notes' readings of AM Fig. 7 on a set of (seed-0) results.

    Fig. 7 plots accuracy against training steps; ours is the per-node accuracy of the
    training batches (the curve's ``acc``; the exact-set accuracy is in each result's
    evaluation).  A diverged run counts with its last logged accuracy.
    """
    curves = {r["model"]: r["curve"] for r in res if r["seed"] == 0 and r.get("curve")}
    final = {m: c[-1]["acc"] for m, c in curves.items()}
    by2000 = {m: max((x["acc"] for x in c if x["step"] <= 2000), default=0.0) for m, c in curves.items()}
    trs, fast = sorted(_TRANSFORMERS), sorted(_DAG_FAST)
    slow = ["deltaformer-exp", "deltaformer-softmax"]
    have = lambda ms: all(m in final for m in ms)      # noqa: E731

    def every(ms, ok):
        """A reading over every arm: False once a finished arm breaks it, True when all have run."""
        if any(not ok(m) for m in ms if m in final):
            return False
        return True if have(ms) else None

    def above():
        if not have(fast) or not any(m in final for m in trs):
            return None
        if min(final[m] for m in fast) <= max(final[m] for m in trs if m in final):
            return False
        return True if have(trs) else None

    return [
        ("dag.transformers_about_08", "1/2/4/8-layer Transformers ≈ 0.8 at 5,000 steps (final per-node training "
                                      "accuracy within 0.7-0.9)",
         every(trs, lambda m: 0.7 <= final[m] <= 0.9)),
        ("dag.deltaformer_fast", "1-layer DeltaFormer with round / ReLU / linear κ1 reaches ≥ 0.95 by 2,000 steps",
         every(fast, lambda m: by2000[m] >= 0.95)),
        ("dag.exp_softmax_lower", "exp and softmax κ1 end a little below round / ReLU / linear",
         max(final[m] for m in slow) < min(final[m] for m in fast) if have(fast + slow) else None),
        ("dag.deltaformer_above_transformers", "the round / ReLU / linear DeltaFormers (1 layer) end above every "
                                               "Transformer (up to 8 layers)", above()),
    ]


# ---------------------------------------------------------------------------
# BL §4.2, App. F, Fig. 4: MQAR with one shared vocabulary
# ---------------------------------------------------------------------------
MQAR_READINGS = (
    # the notes' readings of Fig. 4 (inputs the check compares against, not results)
    ("mqar.update16_bl_88", "at 16 updates BL ≈ 88 % (Fig. 4b)"),
    ("mqar.update16_gdn_conv_mamba2_60", "at 16 updates GDN-conv and Mamba2 ≈ 60 %"),
    ("mqar.update16_gdn_98", "at 16 updates GDN without convolution ≈ 98 %"),
    ("mqar.block16_gdn_100_bl_75", "at 16 pairs (Block) GDN ≈ 100 %, BL ≈ 75 % (Fig. 4c)"),
)
# how each reading is read: its experiment (at 16 updates, or 16 pairs) and each model's part, "near" (within 0.1
# of the notes' value) or "at_least" (≥ it − 0.1); :data:`TREND_MODELS` takes the models from here
MQAR_PARTS = {
    "mqar.update16_bl_88": ("update", (("bl", "near"),)),
    "mqar.update16_gdn_conv_mamba2_60": ("update", (("gdn-conv", "near"), ("mamba2", "near"))),
    "mqar.update16_gdn_98": ("update", (("gdn", "at_least"),)),
    "mqar.block16_gdn_100_bl_75": ("block", (("gdn", "at_least"), ("bl", "near"))),
}
TREND_MODELS.update({k: frozenset(m for m, _ in parts) for k, (_, parts) in MQAR_PARTS.items()})


def _mqar_replay(tokens, role, labels) -> bool:
    """One row: keys queue up until their values arrive (pairs or blocks alike); a query's label is
    the queried key's last value."""
    from assocmem.gpu.tasks import mqar as Mq

    pending, mem, ok = [], {}, True
    for t, r, y in zip(tokens, role, labels):
        if r == Mq.KEY:
            pending.append(t)
        elif r == Mq.VALUE:
            mem[pending.pop(0)] = t
        elif r == Mq.QUERY:
            ok &= t in mem and mem[t] == y
    return ok and not pending


def mqar(ev: Evidence) -> None:
    torch = _torch()
    if torch is None:
        ev.skip("triton", "torch is not installed")
        return
    from assocmem.gpu.tasks import mqar as Mq

    layouts = {"Base (length 512, 64 pairs)": Mq.MQARConfig(512, 64),
               "Update (length 128, 16 pairs, 16 updates)": Mq.MQARConfig(128, 16, n_updates=16),
               "Block (length 128, 8 pairs, block 2)": Mq.MQARConfig(128, 8, block_size=2)}
    for name, cfg in layouts.items():
        b = Mq.mqar_batch(cfg, 32, generator=torch.Generator().manual_seed(5))
        ok = all(_mqar_replay(b.tokens[i].tolist(), b.role[i].tolist(), b.labels[i].tolist()) for i in range(32))
        ev.holds("numpy", f"{name}: every query label = a dictionary replay of the writes (32 rows)", ok)
    b = Mq.mqar_batch(Mq.MQARConfig(512, 64), 64, generator=torch.Generator().manual_seed(6))
    keys, vals = b.tokens[b.role == Mq.KEY].double(), b.tokens[b.role == Mq.VALUE].double()
    half = Mq.VOCAB / 2
    # Zoology's generator takes keys below half the vocabulary and values above it (a role shortcut)
    ev.holds("numpy", "keys and values share one vocabulary of 8,192: both fill its lower and upper halves "
                      "(no role shortcut)",
             all(float((x < half).double().mean()) > 0.4 and float((x >= half).double().mean()) > 0.4
                 for x in (keys, vals)) and int(max(keys.max(), vals.max())) < Mq.VOCAB,
             computed={"keys_below_half": float((keys < half).double().mean()),
                       "values_below_half": float((vals < half).double().mean())})
    res = _results("mqar")
    ev.record(published_readings=dict(MQAR_READINGS))
    if not res:
        # the pilot's partial curves are not results: every reading is pending
        for key, text in MQAR_READINGS:
            ev.pend(f"{text}: no finished MQAR run")
        ev.summary = ("generator checked (dictionary replay, shared vocabulary); the Fig. 4 readings are pending: "
                      "no finished 40-epoch run (docs/tasks_mqar_dag.md, what ran and what is left)")
        return
    # Base, Update and Block are three experiments, not protocols, and the learning rate is chosen per
    # model from a grid by validation accuracy (as the paper does): a run's tag leaves both out, and of
    # the runs that then share (tag, model, variant, seed) the one with the best validation accuracy is kept
    from assocmem.gpu.tasks.names import MQAR_LR_GRID
    from assocmem.gpu.tasks.train import PROTOCOL, protocol_tag, resolve_protocol

    from assocmem.gpu.tasks import mqar as Mq

    def lr_of(r):
        return float(r["protocol"].get("lr", PROTOCOL["mqar"]["lr"][0]))

    runs_at = {}                          # {((tag, model, variant), seed): {lr: (score, run)}}
    all_runs = res
    for r in res:
        # checked with the run's own variant (Update's generator options apply to Update only), tagged
        # without it and without the rate
        pr = resolve_protocol("mqar", {k: v for k, v in r["protocol"].items() if k in PROTOCOL["mqar"]})
        r["_tag"] = protocol_tag("mqar", {**pr, "variant": PROTOCOL["mqar"]["variant"][0],
                                          "lr": PROTOCOL["mqar"]["lr"][0]})
        sel = r["eval"].get("val") or r["eval"].get("test") or [{"acc": 0.0}]
        score = sum(x["acc"] for x in sel) / len(sel)
        at = runs_at.setdefault(((r["_tag"], r["model"], r["protocol"].get("variant", "base")), r["seed"]), {})
        if lr_of(r) not in at or score > at[lr_of(r)][0]:
            at[lr_of(r)] = (score, r)
    # the grid's pick is seed 0's (Mq.pick_rates, as Fig. 4 draws it); a later seed with no run at that rate
    # falls back to its own best, and its line names the rate
    chosen = {(*group, sd): sr for (group, sd), sr in Mq.pick_rates(runs_at).items()}
    res = [r for _, r in chosen.values()]
    ev.record(learning_rate_chosen={f"{m} {v}" + (f" [{t}]" if t else ""): r["protocol"].get("lr")
                                    for (t, m, v, sd), (_, r) in sorted(chosen.items()) if sd == 0})
    # the readings are the default protocol's; the other protocols' runs (ablations) are recorded beside them
    default = [r for r in res if r["_tag"] == ""]
    up, bk = _mqar_acc(default, "update", "n_updates", 16), _mqar_acc(default, "block", "n_pairs", 16)
    ev.record(acc_at_16_updates=up, acc_at_16_pairs=bk)
    # the readings are decided on seed 0; the other seeds that have finished, beside them
    # (a seed at another rate than seed 0's chosen one says so: the grid's pick is seed 0's)
    later = {}
    for r in default:
        v = r["protocol"].get("variant", "base")
        if r["seed"] != 0 and v in ("update", "block"):
            xk = "n_updates" if v == "update" else "n_pairs"
            a = _mqar_acc([{**r, "seed": 0}], v, xk, 16).get(r["model"])
            first = chosen.get(("", r["model"], v, 0))
            rate = (f" (lr {lr_of(r):g}; seed 0's {lr_of(first[1]):g})"
                    if first is not None and lr_of(first[1]) != lr_of(r) else "")
            if a is not None:
                later[f"{r['model']} {v} seed {r['seed']}{rate}"] = a
    if later:
        ev.record(acc_at_16_other_seeds=later)
    other, other_text = {}, []
    for r in sorted(res, key=lambda r: (r["model"], r["protocol"].get("variant", "base"), r["_tag"])):
        v = r["protocol"].get("variant", "base")
        if r["_tag"] and r["seed"] == 0 and v in ("update", "block"):
            xk, unit = ("n_updates", "updates") if v == "update" else ("n_pairs", "pairs")
            a = _mqar_acc([r], v, xk, 16).get(r["model"])
            if a is not None:
                key = f"{r['model']} {v} [{r['_tag']}]"
                other[key] = a
                other_text.append(f"{key} at 16 {unit} {a:.2f}")
    if other:
        ev.record(acc_at_16_other_protocols=other)
    # the learning rates each (model, variant) has finished runs at, under the default protocol: the
    # paper picks from a grid, so a reading decided on fewer rates than MQAR_LR_GRID says so
    grid = {}
    for r in all_runs:
        if r["_tag"] == "" and r["seed"] == 0:
            grid.setdefault(f"{r['model']} {r['protocol'].get('variant', 'base')}", set()).add(
                float(r["protocol"].get("lr", PROTOCOL["mqar"]["lr"][0])))
    grid = {k: sorted(v) for k, v in sorted(grid.items())}
    ev.record(lr_grid=list(MQAR_LR_GRID), lrs_run=grid)
    memo = _mqar_memorisation(res)
    ev.record(memorisation=memo)
    _judge(ev, mqar_trends, res, per_seed_readings=True)
    so_far = [f"{m} at 16 updates {a:.2f}" for m, a in sorted(up.items())] + \
             [f"{m} at 16 pairs {a:.2f}" for m, a in sorted(bk.items())]
    if so_far:
        short = [k for k, v in grid.items() if len(v) < len(MQAR_LR_GRID)]
        ev.summary += ("; measured so far (test, seed 0): " + ", ".join(so_far)
                       + (f" [learning rates run of the grid {', '.join(f'{x:g}' for x in MQAR_LR_GRID)}: "
                          + "; ".join(f"{k} {', '.join(f'{x:g}' for x in grid[k])}" for k in short) + "]"
                          if short else ""))
    if later:
        ev.summary += "; other seeds: " + ", ".join(f"{k} {a:.2f}" for k, a in sorted(later.items()))
    base = _mqar_base_runs(res, all_runs)
    if base:
        # Fig. 4a's x-axis; the notes give no number to read off it, so this is a measurement, not a reading
        ev.record(base_test_acc_by_width={m: {str(w): row["acc"] for w, row in ws.items()} for m, ws in base.items()},
                  base_did_not_learn=sorted(f"{m} width {w}" for m, ws in base.items() for w, row in ws.items()
                                            if row["train_acc"] is not None and row["train_acc"] < 1 / 64))
        ev.summary += ("; Base (length 512, 64 pairs; Fig. 4a, no published number): "
                       + "; ".join(_mqar_base_text(m, ws) for m, ws in base.items()))
    if other_text:
        ev.summary += "; other protocols (ablations, not readings): " + ", ".join(other_text)
    gaps = [f"{k} trained to {m['final_train_acc']:.2f} on its pool but tests at "
            f"{m['test_acc_on_training_configs']:.2f} on the same configurations (1/P: "
            f"{m['one_of_the_values']:.2f})" for k, m in memo.items() if m["gap"] >= 0.3]
    if gaps:
        ev.summary += "; memorised its training pool: " + "; ".join(gaps)
    # a run that ends below naming one of the sequence's values at random learned neither the pool nor
    # the binding: its reading says nothing of the model until the run is repaired (e.g. another rate)
    probes = _mqar_probes()
    stuck_keys = sorted(k for k, m in memo.items() if m["final_train_acc"] < m["one_of_the_values"])
    # every rate of the grid such a run finished at (the chosen one is only the best of them)
    every_rate = {}
    for r in all_runs:
        for k, m in _mqar_memorisation([r]).items():
            every_rate.setdefault(k, []).append(m)
    stuck, listed, diagnostics = [], set(), []
    for k in stuck_keys:
        ms = sorted(every_rate.get(k, [memo[k]]), key=lambda m: -1.0 if m["lr"] is None else float(m["lr"]))
        lr = ", ".join("unrecorded" if m["lr"] is None else format(m["lr"], "g") for m in ms)
        text = (f"{k} (lr {lr}): training accuracy {', '.join(format(m['final_train_acc'], '.2f') for m in ms)}, "
                f"test {', '.join(format(m['test_acc_on_training_configs'], '.2f') for m in ms)}, "
                f"1/P {memo[k]['one_of_the_values']:.2f}")
        # whether the same mixer binds at all in our harness: its fresh-data probes, where there are any
        mixer = k.split()[0]
        # with the other mixers run in the same probe (the same settings) beside it: a probe where every
        # mixer fails says nothing of this one
        same = lambda r: (r.get("variant"), _probe_settings(r, backbone=True))  # noqa: E731
        acc_text = lambda r: ", ".join(f"{c} {a:.2f}" for c, a in r["test"].items())  # noqa: E731
        seen = []
        for r in probes.get("runs", []):
            if r["spec"] != mixer or not r["config"]:
                continue
            others = [o for o in probes["runs"] if o["spec"] != mixer and same(o) == same(r)]
            seen.append(f"{_probe_settings(r, backbone=True)}: {acc_text(r)}"
                        + (f" (same probe: {', '.join(o['spec'] + ' ' + acc_text(o) for o in others)})"
                           if others else ""))
        if seen and mixer not in listed:            # one mixer's probes are listed once
            diagnostics.append(f"{mixer}'s fresh-data probes (does it bind at all in our harness?): "
                               + "; ".join(seen))
            listed.add(mixer)
        stuck.append(text)
    if stuck:
        ev.record(did_not_learn=stuck_keys)
        ev.summary += "; did not learn (below 1/P on its own pool): " + "; ".join(stuck)
        partial = _mqar_partial_runs(stuck_keys)
        if partial:
            ev.record(did_not_learn_partial_runs=partial)
            diagnostics.append("partial runs of the models that did not learn (stopped by a call's limit, not "
                               "results): " + "; ".join(
                f"{p['run']} at step {p['step']:,}: training accuracy {p['train_acc']:.2f}, "
                + (f"{p['exit_acc']:g} first at step {p['exit_step']:,}" if p["exit_step"] is not None
                   else f"not yet {p['exit_acc']:g}")
                for p in partial))
    drift = _mqar_decay_drift()
    if drift:
        ev.record(decay_drift=drift)
        diagnostics.append("; ".join(
            f"{r['model']} {r['variant']} (lr {r['lr']:g}) at step {r['step']:,}: its A_log and dt_bias moved "
            f"the weight decay's way, {r['share_range'][0]:.2f}-{r['share_range'][1]:.2f} times as far as the "
            f"decay alone moves them (retention per token at the bias "
            f"{min(min(x) for x in r['retention_init']):.2f}-{max(max(x) for x in r['retention_init']):.2f} at "
            f"the start, {min(min(x) for x in r['retention_then']):.2f}-"
            f"{max(max(x) for x in r['retention_then']):.2f} then; its ablation: wd_exempt=marked)"
            for r in drift if r["share_range"]))
    exempt = _mqar_wd_exempt_pairs()
    if exempt:
        ev.record(wd_exempt_ablation=exempt)
        diagnostics.append("; ".join(
            f"{r['run']} against {r['baseline']} (A_log / dt_bias not decayed against decayed), training curves "
            f"to step {r['to_step']:,} of {r['steps']:,}: loss within {r['max_abs_dloss']:.3f} at every logged "
            f"step, accuracy {r['acc_exempt']:.4f} against {r['acc_decayed']:.4f} at step {r['to_step']:,}"
            + (": the same course, so the weight decay on those parameters does not shape its training over "
               "those steps" if r["same_course"] else ": the exemption changes its course")
            for r in exempt))
    if probes:
        ev.record(fresh_data_probes=probes)
        order = ("mlp", "zoology", "mixers")          # ours before 2 December, the default, Zoology's Mamba2 block
        groups = {}
        for b in probes["by_backbone"]:
            names = tuple(x for x in order if x in b)
            if len(names) >= 2:
                groups.setdefault((b["probe"], names), []).append(b)
        for (cfg, names), bs in sorted(groups.items()):
            pairs = [f"{b['spec']} " + " -> ".join(f"{b[x]:.2f}" for x in names)
                     + (f" ({'both' if len(names) == 2 else 'all'} below 1/P = {b['one_of_the_values']:.2f}: too "
                        f"short to say)" if max(b[x] for x in names) < b["one_of_the_values"] else "")
                     for b in bs]
            diagnostics.append(f"fresh-data probe ({cfg}; not the paper's protocol), test accuracy under "
                               + " -> ".join(f"backbone={x}" for x in names) + ": " + ", ".join(pairs))
    # the diagnostics of runs that did not learn (why, and whether the mixer binds at all here) are the
    # report's notes: the summary line, which the README's table shows, names how many there are
    for text in diagnostics:
        ev.note(text)
    if diagnostics:
        ev.summary += (f"; {len(diagnostics)} diagnostic note(s) in the report (fresh-data probes, partial runs, "
                       "weight-decay checks)")


def _mqar_decay_drift() -> list:
    """``results/mqar/diagnostics/*decay-drift.json`` (``scripts/mqar_decay_drift.py``): per checkpoint,
    the run, its step and how much of its fla mixers' A_log / dt_bias drift the weight decay alone
    accounts for, with the retention per token at the bias at the start and at that step."""
    d = RESULTS / "mqar" / "diagnostics" if RESULTS is not None else None
    if d is None or not d.is_dir():
        return []
    rows = []
    for path in sorted(d.glob("*decay-drift.json")):
        rec = json.loads(path.read_text())
        shares = [v for v in rec["drift_share_of_decay_only"].values() if v is not None]
        rows.append({"file": path.name, "model": rec["model"], "lr": rec["protocol"]["lr"],
                     "variant": rec["protocol"]["variant"], "step": rec["step"], "steps": rec["steps"],
                     "decay_only_factor": rec["decay_only_factor"],
                     "share_range": [min(shares), max(shares)] if shares else None,
                     "retention_init": [r["retention"] for r in rec["init"]],
                     "retention_then": [r["retention"] for r in rec["final"]]})
    return rows


def _mqar_wd_exempt_pairs(loss_tol: float = 0.05) -> list:
    """The ``wd_exempt=marked`` ablation read from ``results/mqar/``: each run (finished or partial) whose
    name holds ``__wd_exempt-marked`` beside the same run without it (decay on every parameter), their
    training curves compared at the logged steps both reached.  ``same_course``: the training loss
    within ``loss_tol`` nats at every common step (the runs share seed, data and initialisation, so a
    difference comes from the exemption)."""
    d = RESULTS / "mqar" if RESULTS is not None else None
    if d is None or not d.is_dir():
        return []

    def load(name):
        for suffix in (".json", ".partial.json"):
            path = d / f"{name}{suffix}"
            if path.is_file():
                return json.loads(path.read_text(encoding="utf-8")), suffix == ".partial.json"
        return None, None

    rows = []
    names = sorted({p.name.removesuffix(".json").removesuffix(".partial")
                    for p in d.glob("*__wd_exempt-marked*.json")})
    for name in names:
        base = name.replace("__wd_exempt-marked", "")
        run, run_partial = load(name)
        ref, _ = load(base)
        if run is None or ref is None:
            continue
        a = {r["step"]: r for r in run.get("curve", [])}
        b = {r["step"]: r for r in ref.get("curve", [])}
        common = sorted(set(a) & set(b))
        if not common:
            continue
        last = common[-1]
        dloss = max(abs(a[s]["loss"] - b[s]["loss"]) for s in common)
        rows.append({"run": name, "baseline": base, "partial": bool(run_partial), "to_step": last,
                     "steps": int(ref.get("steps") or run.get("steps") or last),
                     "max_abs_dloss": dloss, "acc_exempt": a[last]["acc"], "acc_decayed": b[last]["acc"],
                     "same_course": dloss <= loss_tol})
    return rows


def _partial_name(path):
    """``(name, model, options, seed)`` of a ``NAME.partial.json``: the run's name ``MODEL[__KEY-VALUE...]_sSEED``
    read back (options as strings, seed an int, None where the name has none)."""
    name = Path(path).name.removesuffix(".partial.json")
    spec, _, seed = name.rpartition("_s")
    model, *opts = spec.split("__")
    return (name, model, dict(o.split("-", 1) for o in opts if "-" in o), int(seed) if seed.isdigit() else None)


def _mqar_partial_runs(stuck_keys, exit_acc: float = 0.5) -> list:
    """The partial runs (``results/mqar/*.partial.json``, stopped by a device call's limit: not results)
    of every (model, variant) in ``stuck_keys`` (``"model variant"``, the runs that did not learn): each
    run's protocol as its name gives it, the last logged step and training accuracy (one batch of the
    pool), and the first logged step at which the training accuracy reached ``exit_acc`` (None: not
    yet).  What they show: whether the same model leaves its plateau under another rate or block."""
    d = RESULTS / "mqar" if RESULTS is not None else None
    if d is None or not d.is_dir() or not stuck_keys:
        return []
    want = {tuple(k.split()[:2]) for k in stuck_keys}
    rows = []
    for path in sorted(d.glob("*.partial.json")):
        name, model, opts, seed = _partial_name(path)
        if (model, opts.get("variant", "base")) not in want or seed is None:
            continue
        rec = json.loads(path.read_text(encoding="utf-8"))
        curve = rec.get("curve", [])
        if not curve:
            continue
        exit_step = next((c["step"] for c in curve if c["acc"] >= exit_acc), None)
        rows.append({"run": name, "model": model, "variant": opts.get("variant", "base"), "seed": seed,
                     "options": {k: v for k, v in opts.items() if k != "variant"}, "step": curve[-1]["step"],
                     "train_acc": round(curve[-1]["acc"], 4), "exit_acc": exit_acc, "exit_step": exit_step})
    return rows


def _probe_settings(row, backbone: bool = False) -> str:
    """A probe's settings as a reader names them (and, without the backbone, the key under which probes
    differing only in their backbone are compared).  Its length is the steps it ran, with its schedule's
    length where the budget stopped it before the end (the cosine then had not decayed: not the same
    probe as one scheduled that short)."""
    done, sched = row.get("steps"), row.get("scheduled")
    return (f"T,P,b = {row['config']}, vocab {row['vocab']}"
            + (f", width {row['d_model']}" if row.get("d_model") else "")
            + (f", lr {row['lr']:g}" if row.get("lr") is not None else "")
            + (f", init {row['init']}" if row.get("init", "torch") != "torch" else "")
            + (f", backbone {row['backbone']}" if backbone else "")
            + f", {done} steps" + (f" of a {sched}-step schedule" if sched and done and sched != done else ""))


def _mqar_probes() -> dict:
    """The fresh-data probes in ``results/mqar/probes/`` (``scripts/mqar_mixer_probe.py``): every run's
    settings and test accuracy, and, per one-configuration probe (``--config``) and mixer spec, the test
    accuracy under each backbone (the ``backbone`` option measured side by side)."""
    d = RESULTS / "mqar" / "probes" if RESULTS is not None else None
    if d is None or not d.is_dir():
        return {}
    runs, by = [], {}
    for path in sorted(d.glob("*.json")):
        rec = json.loads(path.read_text())
        st = rec.get("settings", {})
        for r in rec.get("runs", []):
            row = {"file": path.name, "spec": r["spec"], "variant": st.get("variant"), "config": st.get("config") or None,
                   # every probe records its backbone (those from before the option were amended to mlp)
                   "vocab": st.get("vocab"), "lr": st.get("lr"), "backbone": st.get("backbone"),
                   "d_model": st.get("d_model"), "init": st.get("init", "torch"),
                   "device": rec.get("device_name"), "steps": r.get("steps_done"), "scheduled": st.get("steps"),
                   "test": {f"P{t['n_pairs']}U{t['n_updates']}": round(t["acc"], 4) for t in r.get("test", [])}}
            runs.append(row)
            if row["config"] and row["backbone"] and len(r.get("test", [])) == 1:
                # the same probe but for its backbone: every other setting that a user would vary
                key = (_probe_settings(row), row["spec"])
                by.setdefault(key, {"one_of_the_values": round(1 / r["test"][0]["n_pairs"], 4)})[row["backbone"]] = \
                    r["test"][0]["acc"]
    return {"runs": runs, "by_backbone": [{"probe": k[0], "spec": k[1], **v} for k, v in sorted(by.items())]}


def _mqar_memorisation(res) -> dict:
    """Per chosen seed-0 run (keyed ``model variant [tag]``, the tag left out for the default protocol):
    the final training accuracy (the mean of the last
    8 logged batches, on the fixed pool) against the test accuracy on the configurations it trained on
    (fresh sequences of the same lengths and pair counts: Block's 2-8 pairs, Update's 128/16 at every
    update count its mixture reached), and the accuracy of naming one of the sequence's P values at
    random (1/P; Update: the 16 current values).  A large gap is a model that learned its pool, not the
    in-context binding."""
    from assocmem.gpu.tasks import mqar as Mq

    out = {}
    for r in res:
        v = r["protocol"].get("variant", "base")
        if r["seed"] != 0 or v == "base" or not r.get("curve"):
            continue
        # the (pairs, updates) the run's training mixture held (Update's up to update_train_frac of P)
        trained = {(c.n_pairs, c.n_updates) for c in Mq.train_configs(
            v, update_frac=float(r["protocol"].get("update_train_frac", 1.0)))[0]}
        rows = [x for x in r["eval"].get("test", []) if (x["n_pairs"], x.get("n_updates", 0)) in trained]
        if not rows:
            continue
        train = Mq.final_train_acc(r["curve"])
        test = sum(x["acc"] for x in rows) / len(rows)
        out[f"{r['model']} {v}" + (f" [{r['_tag']}]" if r["_tag"] else "")] = {
                                    "lr": r["protocol"].get("lr"), "final_train_acc": round(train, 4),
                                    "test_acc_on_training_configs": round(test, 4),
                                    "one_of_the_values": round(sum(1 / x["n_pairs"] for x in rows) / len(rows), 4),
                                    "gap": round(train - test, 4)}
    return out


def _mqar_acc(res, variant, xkey, x) -> dict:
    """{model: test query accuracy} of the seed-0 runs of ``variant`` at ``xkey == x``."""
    out = {}
    for r in res:
        if r["seed"] != 0 or r.get("protocol", {}).get("variant", "base") != variant:
            continue
        for row in r["eval"].get("test", []):
            if row.get(xkey) == x and (variant != "block" or row.get("block_size") == 2):
                out[r["model"]] = row["acc"]
    return out


def _mqar_base_runs(res, all_runs) -> dict:
    """{model: {width: {"acc", "lr", "train_acc", "lrs_run", "stopped"}}} of the seed-0 Base runs in ``res``
    (the claim's chosen runs: per tag, so per width, the rate of best validation accuracy) whose protocol is
    the default one but for the width (Fig. 4a's x-axis) and the rate, widths ascending: the test accuracy at
    length 512, 64 pairs, the rate, the final training accuracy (:func:`mqar.final_train_acc`), every rate of
    ``all_runs`` at that width, and the runs of that width stopped by a device call's limit
    (:func:`_mqar_base_stopped`: not results, but they say which other rates were tried and how far)."""
    from assocmem.gpu.tasks import mqar as Mq
    from assocmem.gpu.tasks.train import PROTOCOL, protocol_tag, resolve_protocol

    def width_of(r):
        """The run's width if it is a seed-0 Base run of the default protocol but for width and rate."""
        pr = r.get("protocol", {})
        if r["seed"] != 0 or pr.get("variant", "base") != "base":
            return None
        full = resolve_protocol("mqar", {k: v for k, v in pr.items() if k in PROTOCOL["mqar"]})
        if protocol_tag("mqar", {**full, "d_model": PROTOCOL["mqar"]["d_model"][0],
                                 "lr": PROTOCOL["mqar"]["lr"][0]}):
            return None
        return int(full["d_model"])

    stopped = _mqar_base_stopped(width_of)
    rates = {}
    for r in all_runs:
        if width_of(r) is not None:
            rates.setdefault((r["model"], width_of(r)), set()).add(
                float(r["protocol"].get("lr", PROTOCOL["mqar"]["lr"][0])))
    out = {}
    for r in sorted(res, key=lambda r: (r["model"], width_of(r) or 0)):
        w = width_of(r)
        test = [x for x in r["eval"].get("test", []) if x.get("seq_len") == 512 and x.get("n_pairs") == 64]
        if w is None or not test:
            continue
        out.setdefault(r["model"], {})[w] = {"acc": test[0]["acc"],
                                             "lr": float(r["protocol"].get("lr", PROTOCOL["mqar"]["lr"][0])),
                                             "train_acc": Mq.final_train_acc(r.get("curve")),
                                             "lrs_run": sorted(rates[(r["model"], w)]),
                                             "stopped": stopped.get((r["model"], w), [])}
    return out


def _mqar_base_stopped(width_of) -> dict:
    """{(model, width): [{"lr", "step", "steps", "train_acc"}, ...]} of the partial Base runs
    (``results/mqar/*.partial.json``) that ``width_of`` accepts (seed 0, the default protocol but for width
    and rate), rates ascending: the last logged step of the run's ``steps`` (its schedule,
    :func:`train.default_steps`) and the training accuracy there (:func:`mqar.final_train_acc`).  A partial
    written before 6 December carries no protocol block; its options are read from its name."""
    from assocmem.gpu.tasks import mqar as Mq
    from assocmem.gpu.tasks.train import PROTOCOL, default_steps, resolve_protocol

    d = RESULTS / "mqar" if RESULTS is not None else None
    if d is None or not d.is_dir():
        return {}
    out = {}
    for path in sorted(d.glob("*.partial.json")):
        _, model, opts, seed = _partial_name(path)
        rec = json.loads(path.read_text(encoding="utf-8"))
        if seed is None or not rec.get("curve"):
            continue
        pr = rec.get("protocol") or resolve_protocol("mqar", opts, model)
        w = width_of({"seed": seed, "protocol": pr})
        if w is None:
            continue
        out.setdefault((model, w), []).append({
            "lr": float(pr.get("lr", PROTOCOL["mqar"]["lr"][0])), "step": rec["curve"][-1]["step"],
            "steps": default_steps("mqar", model, pr), "train_acc": Mq.final_train_acc(rec["curve"])})
    return {k: sorted(v, key=lambda x: x["lr"]) for k, v in out.items()}


def _mqar_base_text(m: str, ws: dict) -> str:
    """One model's Base width row as the claim prints it; a run whose training accuracy ended below 1/P
    (1/64: naming one of the sequence's values at random) learned neither its pool nor the binding, so
    its reading is of the run (its rate), not of the model, and the line says so."""
    parts = []
    for w, row in ws.items():
        text = f"width {w} {row['acc']:.2f}"
        if row["train_acc"] is not None and row["train_acc"] < 1 / 64:
            stopped = "".join(f"; lr {x['lr']:g} stopped by a call's limit at step {x['step']:,} of {x['steps']:,}, "
                              f"training accuracy {x['train_acc']:.3f}" for x in row.get("stopped", []))
            text += (f" (did not learn at lr {row['lr']:g}: training accuracy {row['train_acc']:.3f} < 1/P "
                     f"{1 / 64:.3f}; rates run at this width: {', '.join(f'{x:g}' for x in row['lrs_run'])}"
                     f"{stopped})")
        parts.append(text)
    return f"{m} " + ", ".join(parts)


def mqar_trends(res) -> list:
    """The notes' readings of BL Fig. 4 on a set of results (test query accuracy, seed 0); "≈" is
    read as within 0.1, "≈ 100 %" as ≥ 0.9."""
    from assocmem.gpu.tasks.names import MQAR_FIG4_READINGS as R

    acc16 = {"update": _mqar_acc(res, "update", "n_updates", 16), "block": _mqar_acc(res, "block", "n_pairs", 16)}
    tests = {"near": lambda a, b: abs(a - b) <= 0.1, "at_least": lambda a, b: a >= b - 0.1}

    def reading(acc, parts):
        """A reading over several models: False as soon as one model that ran misses its part (the others
        cannot rescue it), True when every model ran and meets its part, else None (not decided yet)."""
        met = [test(acc[m], want[m]) for m, test, want in parts if m in acc]
        return False if not all(met) else (True if len(met) == len(parts) else None)

    return [(key, text, reading(acc16[variant], [(m, tests[t], R[variant]) for m, t in parts]))
            for key, text in MQAR_READINGS for variant, parts in [MQAR_PARTS[key]]]
