"""Checks of the learned tasks (``task.*`` of CLAIMS.md; issue 8).

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

from assocmem.registry import Evidence, check

# The task.* IDs, sources and published statements are declared in the catalogue.
import assocmem.claims.catalogue  # noqa: E402,F401

RESULTS = Path(__file__).resolve().parent.parent.parent / "results"
F64_REL = 1e-12


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _results(task: str) -> list[dict]:
    d = RESULTS / task
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.glob("*.json")):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if r.get("task") == task and r.get("eval") and r.get("eval_mode") == "full":
            out.append(r)
    return out


def _mean_by_model(results, section, xkey, x, ykey):
    per = {}
    for r in results:
        for row in r["eval"].get(section, []):
            if row[xkey] == x:
                per.setdefault(r["model"], []).append(row[ykey])
    return {m: float(np.mean(v)) for m, v in per.items()}, {m: len(v) for m, v in per.items()}


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



# Outcome of each published trend on the committed GPU results (docs/tasks.md).
DOCUMENTED = {
    "collision.la_gla_collapse": True,
    "collision.bl_near_perfect_256": False,
    "collision.delta_reset_about_075_256": False,
    "collision.bl_above_delta_reset_256": False,
    "collision.bl_positive_margin_095": False,
    "collision.delta_reset_negative_margin_095": True,
    "collision.bl_margin_best_high_overlap": True,
    "random_keys.degrade_beyond_training": True,
    "random_keys.bl_lowest_ce_high_density": False,
    "random_keys.bl_accuracy_near_best_high_density": True,
    "swap.round_linear_fast": True,
    "swap.other_kappas_not_fast": True,
    "swap.transformers_stay_low": False,
    "swap.one_layer_transformer_low": True,
    # AM Figs. 5-6 (stress test, length curriculum), runs of 30 November 2026 (docs/tasks.md): both κ1
    # stay at the no-tracking level (≈ 0.24, what reading only the initial write scores), and the
    # direct NoPE arm learns length 256 as well as the curriculum does.
    "swap.stress_round_high_512": False,
    "swap.stress_linear_low_512": True,
    "swap.curriculum_nope_reaches_256": True,
    "swap.direct_nope_near_chance": False,
    "swap.direct_rope_rises": True,
}


def _seed_stats(results, section, xkey, x, ykey):
    """{model: (mean, sd over seeds, n)} of ``ykey`` at ``xkey == x``."""
    per = {}
    for r in results:
        for row in r["eval"].get(section, []):
            if row[xkey] == x:
                per.setdefault(r["model"], []).append(row[ykey])
    return {m: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)) for m, v in per.items()}


def _judge(ev: Evidence, trends) -> None:
    """Assert each evaluated trend gives its documented outcome; summarise."""
    done, missing = [], []
    for key, text, outcome in trends:
        if outcome is None:
            missing.append(text)
            continue
        doc = DOCUMENTED[key]
        doc_text = "no outcome yet: document it" if doc is None else ("reproduced" if doc else "not reproduced")
        ev.holds("triton", f"{text}: {'reproduced' if outcome else 'NOT reproduced'} "
                           f"(documented: {doc_text})", outcome == doc,
                 computed=outcome, expected=doc, note="published trend on the committed GPU results")
        if not outcome:
            ev.dispute("triton", text, published="holds (paper)", measured="not reproduced by our runs",
                       note="see docs/tasks.md for the measured numbers and our protocol choices")
        done.append((key, text, outcome))
    ok = [t for _, t, o in done if o]
    not_ok = [t for _, t, o in done if not o]
    ev.record(trends_reproduced=ok, trends_not_reproduced=not_ok, trends_without_results=missing)
    ev.summary = (f"GPU runs reproduce {len(ok)}/{len(done)} published trends"
                  + (f"; not reproduced: {'; '.join(not_ok)}" if not_ok else "")
                  + (f"; {len(missing)} without results" if missing else "") + " (docs/tasks.md)")


def _cores_and_results_note(ev, what):
    ev.note(f"no trained results under results/{what}: learned numbers not checked")
    ev.summary = "generator and cores checked; no GPU results present"


@check("task.collision_recall", status="confirmed")
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
    acc = _seed_stats(res, "writes", "n_f", 256, "acc_target")
    mar = _seed_stats(res, "overlap", "rho", 0.95, "margin_target")
    ev.record(acc_target_nf256=acc, margin_target_rho095=mar,
              margin_by_rho={rho: _seed_stats(res, "overlap", "rho", rho, "margin_target")
                             for rho in (0.85, 0.90, 0.95)})
    a = {m: v[0] for m, v in acc.items()}
    dr = [m for m in ("delta", "reset") if m in a]
    have = lambda *ms: all(m in a for m in ms)      # noqa: E731
    high = {rho: {m: v[0] for m, v in _seed_stats(res, "overlap", "rho", rho, "margin_target").items()}
            for rho in (0.85, 0.90, 0.95)}
    trends = [
        ("collision.la_gla_collapse", "linear attention and GLA collapse at n_f = 256 (target accuracy < 0.2)",
         all(a[m] < 0.2 for m in ("linear", "gla")) if have("linear", "gla") else None),
        ("collision.bl_near_perfect_256", "BL near-perfect at n_f = 256 (target accuracy ≥ 0.9)",
         a["bl"] >= 0.9 if have("bl") else None),
        ("collision.delta_reset_about_075_256", "Delta/reset ≈ 0.75 at n_f = 256 (within 0.6-0.9)",
         all(0.6 <= a[m] <= 0.9 for m in dr) if dr else None),
        ("collision.bl_above_delta_reset_256", "BL above Delta and reset at n_f = 256",
         all(a["bl"] > a[m] for m in dr) if (dr and have("bl")) else None),
        ("collision.bl_positive_margin_095", "BL margin positive at ρ = 0.95, n_f = 64 (mean − sd over seeds > 0)",
         (mar["bl"][0] - mar["bl"][1] > 0) if "bl" in mar else None),
        ("collision.delta_reset_negative_margin_095", "Delta/reset margins negative at ρ = 0.95",
         all(mar[m][0] < 0 for m in dr) if dr else None),
        ("collision.bl_margin_best_high_overlap", "BL margin above Delta/reset at ρ = 0.85, 0.90, 0.95",
         all(high[r]["bl"] > high[r][m] for r in high for m in dr) if (dr and have("bl")) else None),
    ]
    _judge(ev, trends)


@check("task.random_keys", status="confirmed")
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
    ce = {x: _seed_stats(res, "crowding", "n_over_D", x, "ce") for x in (4.0, 6.0, 8.0, 12.0, 16.0)}
    acc = {x: _seed_stats(res, "crowding", "n_over_D", x, "acc") for x in (4.0, 6.0, 8.0, 12.0, 16.0)}
    ev.record(ce_by_density=ce, acc_by_density=acc)
    high = (6.0, 8.0, 12.0, 16.0)
    models = sorted(acc[4.0])
    trends = [
        ("random_keys.degrade_beyond_training", "accuracy falls monotonically with n/D past training for every model",
         all(acc[x][m][0] > acc[y][m][0] for m in models for x, y in zip((4.0,) + high, high)) if models else None),
        ("random_keys.bl_lowest_ce_high_density", "BL has the lowest cross-entropy at every n/D in {6, 8, 12, 16}",
         all(ce[x]["bl"][0] <= min(v[0] for v in ce[x].values()) for x in high) if "bl" in acc[4.0] else None),
        ("random_keys.bl_accuracy_near_best_high_density", "BL accuracy within 0.05 of the best at every n/D ≥ 6",
         all(acc[x]["bl"][0] >= max(v[0] for v in acc[x].values()) - 0.05 for x in high) if "bl" in acc[4.0] else None),
    ]
    _judge(ev, trends)


@check("task.swap_tracking", status="confirmed")
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
    from assocmem.gpu.tasks.names import CURRICULUM_MODELS

    all_res = _results("swap_tracking")
    res = [r for r in all_res if not r["model"].startswith("stress-") and r["model"] not in CURRICULUM_MODELS]
    if not all_res:
        return _cores_and_results_note(ev, "swap_tracking")
    curves = {r["model"]: r["curve"] for r in res if r["seed"] == 0}
    final = {m: c[-1]["acc"] for m, c in curves.items()}
    first95 = {m: next((x["step"] for x in c if x["acc"] >= 0.95), None) for m, c in curves.items()}
    ev.record(final_train_acc=final, first_step_acc_095=first95)
    fast, slow_k = ("deltaformer-round2", "deltaformer-linear"), ("deltaformer-relu", "deltaformer-exp",
                                                                  "deltaformer-softmax")
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
    trends += _stress_and_curriculum_trends(ev, all_res)
    _judge(ev, trends)


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


def _stress_and_curriculum_trends(ev: Evidence, res) -> list:
    """AM Fig. 5 (stress test at n = 512) and Fig. 6 (length curriculum) trends on the seed-0 runs.

    Both figures plot *training* accuracy (Fig. 6: at the current training
    length), so the trends read the last logged point of the curve.  Each
    holds when every κ1 arm present satisfies it; ``None`` without the runs.
    """
    last = {r["model"]: r["curve"][-1] for r in res if r["seed"] == 0 and r.get("curve")}
    stress = {m: c["acc"] for m, c in last.items() if m.startswith("stress-")}
    cur = {m: (c["acc"], c.get("length")) for m, c in last.items()
           if m.startswith("curriculum-") or m.startswith("direct-")}
    if stress or cur:
        ev.record(stress_final_train_acc=stress, curriculum_final_train_acc_and_length=cur)
    if stress:
        torch = _torch()
        ns = sorted({int(m.rsplit("-", 1)[1]) for m in stress})
        ev.record(stress_no_tracking_accuracy=_no_tracking_check(ev, torch, ns))

    def arms(prefix, pos):
        return {m: v for m, v in cur.items() if m.startswith(prefix + "-") and m.endswith("-" + pos)}

    cn, dn, dr = arms("curriculum", "nope"), arms("direct", "nope"), arms("direct", "rope")
    return [
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
