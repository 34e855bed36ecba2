"""The deterministic collision experiment: ``bl.collision_table``, ``bl.iso_ablation``,
``bl.diag_ablation``, ``bl.fig3a_plateau`` (BL App. E.3-E.4, Fig. 3, Fig. 6).

numpy: the float64 filter family through :func:`numerics.collision.run_collision`.
mpmath: the same protocol rerun at 60 digits through :func:`theory.bl_mp.bl_filter_mp`
(keys built from exact ``mpf`` square roots), to show that float64 round-off
does not touch the 5th decimal and to agree with numpy at 1e-12 at any setting.
triton: the dense BL kernel (``assocmem.gpu``, compiled on CUDA, else Triton's
interpreter on CPU) in fp32 against the float64 filter, never against a closed
form; without torch/triton that layer is skipped with the reason.
The published numbers are inputs from :mod:`assocmem.protocol`.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from assocmem.claims._common import kernel_mode, torch_and_device
from assocmem.numerics.collision import collision_inputs, collision_summary, run_collision
from assocmem.protocol import FIG3A_READ_OFF, PAPER, PUBLISHED, PUBLISHED_DECIMALS, CollisionProtocol
from assocmem.registry import Evidence
from assocmem.theory.bl_mp import collision_mp

ROUND_TOL = 0.5 * 10.0 ** -PUBLISHED_DECIMALS   # a 5-decimal figure covers ±5e-6
F64_REL = 1e-12
# fp32 kernel vs float64 filter on the 112-step protocol: the observed gap is
# ~1e-7; 2e-5 keeps the 5-decimal figures meaningful.
FP32_ABS = 2e-5


def collision_table(ev: Evidence) -> None:
    variants = ("dense", "reset", "linear")
    num = collision_summary(run_collision(PAPER, variants=variants), PAPER)
    hp = collision_mp(PAPER, variants)
    for quantity, per_variant in PUBLISHED.items():
        for v, published in per_variant.items():
            ev.close("numpy", f"{quantity}[{v}] vs published", num[v][quantity], published,
                     abs_tol=ROUND_TOL, note="published to 5 decimals (input)")
            ev.close("mpmath", f"{quantity}[{v}] at 60 digits vs published", hp[v][quantity], published,
                     abs_tol=ROUND_TOL)
    for v in variants:
        for quantity, x in num[v].items():
            ev.close("mpmath", f"float64 vs 60-digit rerun: {quantity}[{v}]", x, hp[v][quantity],
                     rel_tol=F64_REL, abs_tol=1e-15)
    # Not welded to the paper's setting: random admissible settings, numpy vs mpmath.
    rng = np.random.default_rng(20260530)
    for i in range(3):
        pr = CollisionProtocol(rho=round(float(rng.uniform(-0.99, 0.99)), 6),
                               p0=round(float(rng.uniform(0.05, 5)), 6), r2=round(float(rng.uniform(0.005, 1)), 6),
                               l2=round(float(rng.uniform(0, 0.5)), 6), n_b=int(rng.integers(0, 12)),
                               n_a=int(rng.integers(1, 12)), rounds=int(rng.integers(1, 3)), D=7, m=5)
        a = collision_summary(run_collision(pr, variants=("dense", "diag", "reset", "linear")), pr)
        b = collision_mp(pr, ("dense", "diag", "reset", "linear"), dps=50)
        worst = max(abs(a[v][q] - float(b[v][q])) / max(abs(float(b[v][q])), 1e-300)
                    for v in a for q in a[v])
        ev.holds("mpmath", f"random setting {i}: float64 = 50-digit rerun to 1e-12",
                 worst <= F64_REL, computed=worst, expected=f"<= {F64_REL}",
                 note=str(pr.as_dict()))
    ev.record(paper_setting=PAPER.as_dict(), numpy=num,
              mpmath={v: {q: str(x)[:22] for q, x in d.items()} for v, d in hp.items()},
              published=PUBLISHED)
    d = num["dense"]
    ev.summary = (f"all {sum(len(x) for x in PUBLISHED.values())} published values reproduced to 5 decimals; "
                  f"BL p_AB(112)={d['p_ab_final']:.5f}, Δ={d['margin_final']:+.5f}, g53={d['gain_first_a']:.5f}; "
                  f"float64 = 60-digit rerun")
    collision_table_triton(ev)


def collision_table_triton(ev: Evidence) -> None:
    """The dense BL kernel's p_AB and gain trajectories against the float64 filter."""
    torch, dev = torch_and_device(ev)
    if torch is None:
        return
    settings = [(PAPER, (PAPER.rho, 0.5, 0.99)),
                (CollisionProtocol(rho=0.7, p0=0.8, r2=0.2, l2=0.01, n_b=9, n_a=13, rounds=1, D=9, m=4),
                 (0.7, -0.3))]
    worst = 0.0
    with kernel_mode(dev) as how:
        for i, (pr, rhos) in enumerate(settings):
            p_ab, gain = _kernel_collision(torch, dev, pr, rhos)
            ref = run_collision(pr, variants=("dense",), rho=np.asarray(rhos))["dense"]
            dp = float(np.abs(p_ab - ref.p_ab).max())
            dg = float(np.abs(gain - ref.gain).max())
            worst = max(worst, dp, dg)
            tag = "paper setting" if pr == PAPER else f"setting {i}"
            ev.holds("triton", f"{tag}: p_AB trajectory, kernel vs float64 filter, rho={list(rhos)}",
                     dp <= FP32_ABS, computed=dp, expected=f"<= {FP32_ABS}")
            ev.holds("triton", f"{tag}: gain trajectory, kernel vs float64 filter",
                     dg <= FP32_ABS, computed=dg, expected=f"<= {FP32_ABS}")
            if pr == PAPER:
                b, a = pr.end_of_b - 1, pr.first_a - 1
                table = {"p_ab_end_of_b": (p_ab[0, b], ref.p_ab[0, b]),
                         "p_ab_final": (p_ab[0, -1], ref.p_ab[0, -1]),
                         "margin_final": (2 * p_ab[0, -1] - 1, ref.margin[0, -1]),
                         "gain_first_a": (gain[0, a], ref.gain[0, a]),
                         "gain_long_run": (gain[0, -1], ref.gain[0, -1])}
                for name, (kern, f64) in table.items():
                    ev.close("triton", f"{name}[dense]: fp32 kernel vs float64 filter", kern, f64,
                             abs_tol=FP32_ABS)
                ev.record(triton_paper_setting={n: float(kv[0]) for n, kv in table.items()})
    ev.record(triton_mode=how, triton_max_abs_gap=worst)
    ev.note(f"triton layer ran the dense BL kernel ({how}); worst gap to float64 {worst:.2e}")


def _kernel_collision(torch, dev, pr, rhos):
    """The collision protocol through ``fused_recurrent_bl_trace``: batch over ρ.

    Returns ``p_ab [B, T]`` and ``gain [B, T]`` from the kernel's outputs.
    """
    from assocmem.gpu import fused_recurrent_bl_trace     # torch: imported only when the kernel layer runs

    keys, values, kA, kB = collision_inputs(np.asarray(rhos, float), pr.D, pr.m, pr.schedule())
    B, T = len(rhos), pr.T
    f32 = dict(dtype=torch.float32, device=dev)
    k = torch.tensor(keys, **f32)[:, :, None, :]                                     # [B, T, 1, D]
    q = torch.tensor(np.broadcast_to(kB[:, None, :], (B, T, pr.D)).copy(), **f32)[:, :, None, :]
    v = torch.tensor(np.broadcast_to(values, (B, T, pr.m)).copy(), **f32)[:, :, None, :]
    l2 = torch.full((B, T, 1), pr.l2, **f32)
    r2 = torch.full((B, T, 1), pr.r2, **f32)
    o, _, u, beta = fused_recurrent_bl_trace(q, k, v, l2, r2, p0=pr.p0)
    y = o[:, :, 0].double().cpu().numpy()                                           # [B, T, m]
    gain = (beta[..., 0] * (u[:, :, :, 0, :] * k).sum(-1))[:, :, 0].double().cpu().numpy()
    p_ab = 1.0 / (1.0 + np.exp(-(y[..., 1] - y[..., 0])))
    return p_ab, gain


ISO_C = (0.01, 0.05, 0.10, 0.50, 1.0, 3.0)
# App. E.4.2 (p.22), read as printed (two significant decimals): inputs.
ISO_PUBLISHED = {"gain_min": 0.17, "gain_max": 0.98, "margin_min": -0.35, "margin_max": -0.19, "bl_margin": 0.45}


def iso_ablation(ev: Evidence) -> None:
    c = np.array(ISO_C)
    iso = run_collision(PAPER, variants=("iso",), iso_c=c)["iso"]
    bl = run_collision(PAPER, variants=("dense",))["dense"]
    gains = iso.gain[:, PAPER.first_a - 1]
    margins = iso.margin[:, -1]
    tol2 = 0.01    # printed as "≈" two-decimal values (e.g. −0.3448 is printed ≈ −0.35)
    ev.close("numpy", "smallest gain (c=0.01)", gains.min(), ISO_PUBLISHED["gain_min"], abs_tol=tol2)
    ev.close("numpy", "largest gain (c=3)", gains.max(), ISO_PUBLISHED["gain_max"], abs_tol=tol2)
    ev.holds("numpy", "every final margin negative", bool(np.all(margins < 0)), computed=margins.tolist())
    ev.close("numpy", "most negative final margin", margins.min(), ISO_PUBLISHED["margin_min"], abs_tol=tol2)
    ev.close("numpy", "least negative final margin", margins.max(), ISO_PUBLISHED["margin_max"], abs_tol=tol2)
    ev.close("numpy", "BL final margin", bl.margin[-1], ISO_PUBLISHED["bl_margin"], abs_tol=tol2)
    # The gain of a fixed prior c I is c/(r²+c) at every step: the ablation is a
    # constant-gain delta rule, so it cannot reproduce BL's history dependence.
    ev.holds("numpy", "iso gain constant over all writes", bool(np.ptp(iso.gain, axis=-1).max() < 1e-15),
             computed=float(np.ptp(iso.gain, axis=-1).max()))
    # Parameterised: a sweep of c far beyond the paper's list never turns the margin positive.
    cs = np.geomspace(1e-3, 1e3, 61)
    sweep = run_collision(PAPER, variants=("iso",), iso_c=cs)["iso"].margin[:, -1]
    ev.holds("numpy", "no c in [1e-3, 1e3] gives a positive final margin", bool(np.all(sweep < 0)),
             computed=float(sweep.max()))
    ev.record(c=list(ISO_C), gains=gains.tolist(), final_margins=margins.tolist(),
              bl_final_margin=float(bl.margin[-1]), best_margin_over_c_sweep=float(sweep.max()))
    ev.summary = (f"gains {gains.min():.3f}…{gains.max():.3f}, final margins {margins.min():+.3f}…{margins.max():+.3f} "
                  f"(all < 0) vs BL {bl.margin[-1]:+.3f}")


RHO_SWEEP = np.round(np.linspace(0.02, 0.98, 49), 4)


def diag_ablation(ev: Evidence) -> None:
    runs = run_collision(PAPER, variants=("dense", "diag", "reset"), rho=RHO_SWEEP)
    d, g, r = (runs[v].p_ab[:, -1] for v in ("dense", "diag", "reset"))
    ev.holds("numpy", "reset ≤ diagonal ≤ dense final p_AB at every ρ of the sweep",
             bool(np.all(r <= g + 1e-12) and np.all(g <= d + 1e-12)),
             computed={"min(dense-diag)": float((d - g).min()), "min(diag-reset)": float((g - r).min())})
    gap = (g - r) / np.where(d - r > 0, d - r, np.nan)
    # Dense BL is not immune: its final retrieval falls as ρ → 1 ...
    near = run_collision(PAPER, variants=("dense",), rho=np.array([0.5, 0.92, 0.99, 0.999, 1.0]))["dense"]
    pf = near.p_ab[:, -1]
    ev.holds("numpy", "dense final p_AB decreases as ρ → 1 (0.5, 0.92, 0.99, 0.999)",
             bool(np.all(np.diff(pf[:4]) < 0)), computed=pf[:4].tolist())
    # ... and at ρ = 1 (identical keys) A's value overwrites B's: p_AB = sigmoid(-1).
    ev.close("numpy", "ρ = 1: dense final p_AB = 1/(1+e)", pf[4], 1.0 / (1.0 + np.e), abs_tol=1e-9,
             note="identical keys, conflicting one-hot values: the last write wins")
    ev.record(rho=RHO_SWEEP.tolist(), final_p_ab={"dense": d.tolist(), "diag": g.tolist(), "reset": r.tolist()},
              diag_position_between_reset_and_dense=np.nan_to_num(gap).tolist(),
              dense_near_one={"rho": [0.5, 0.92, 0.99, 0.999, 1.0], "p_ab_final": pf.tolist()})
    ev.summary = (f"over ρ∈[{RHO_SWEEP[0]}, {RHO_SWEEP[-1]}] reset ≤ diag ≤ dense; at ρ=0.92: "
                  f"{float(r[np.argmin(abs(RHO_SWEEP-0.92))]):.3f} ≤ {float(g[np.argmin(abs(RHO_SWEEP-0.92))]):.3f} "
                  f"≤ {float(d[np.argmin(abs(RHO_SWEEP-0.92))]):.3f}; dense falls to {pf[3]:.3f} at ρ=0.999")


def fig3a_plateau(ev: Evidence) -> None:
    final = float(run_collision(PAPER, variants=("dense",))["dense"].p_ab[-1])
    ev.refutes("numpy", "Fig. 3(a) BL end value ≈ 0.60 (read off the figure)", FIG3A_READ_OFF, final,
               abs_tol=0.05, note="the printed figure's plateau is not what the stated protocol gives")
    ev.close("numpy", "App. E.4 value 0.72309", final, PUBLISHED["p_ab_final"]["dense"], abs_tol=ROUND_TOL)

    # Which single nearby change would bring the BL plateau down to 0.60?
    def f(**kw):
        return float(run_collision(PAPER, variants=("dense",), **kw)["dense"].p_ab[-1]) - FIG3A_READ_OFF

    found = {}
    for name, lo, hi in (("rho", 0.92, 0.99999), ("r2", 0.05, 20.0)):
        try:
            found[name] = brentq(lambda x: f(**{name: x}), lo, hi, xtol=1e-6)
        except ValueError:
            found[name] = None
    try:
        found["r2=l2"] = brentq(lambda x: f(r2=x, l2=x), 0.05, 50.0, xtol=1e-6)
    except ValueError:
        found["r2=l2"] = None
    p0_range = [f(p0=x) + FIG3A_READ_OFF for x in (0.01, 100.0)]
    ev.record(final_p_ab=final, figure_read_off=FIG3A_READ_OFF, settings_giving_0_60=found,
              p0_alone_range=p0_range)
    fmt = ", ".join(f"{k}≈{v:.4g}" for k, v in found.items() if v is not None)
    ev.summary = (f"protocol gives {final:.5f} (= App. E.4), not the ≈0.60 drawn in Fig. 3(a); "
                  f"0.60 needs e.g. {fmt}; no p0 alone does ({p0_range[0]:.3f}…{p0_range[1]:.3f})")
