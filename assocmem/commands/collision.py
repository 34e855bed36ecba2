"""``assocmem collision``: the deterministic collision experiment (BL App. E.4)."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser(
        "collision", help="run the deterministic collision experiment (BL App. E.4)",
        description="Write six identities twice, reinforce B n_b times, write A n_a times, and read "
                    "pairwise retrieval p_AB at k_B after every step.  Defaults are the paper's setting.")
    p.add_argument("--rho", type=float, default=0.92, help="key overlap k_Aᵀk_B (default 0.92)")
    p.add_argument("--p0", type=float, default=3.0, help="prior covariance scale P0 = p0 I (default 3)")
    p.add_argument("--r2", type=float, default=0.05, help="observation-noise variance r² (default 0.05)")
    p.add_argument("--l2", type=float, default=0.05, help="process-noise variance ℓ² (default 0.05)")
    p.add_argument("--n-b", type=int, default=40, help="B reinforcements (default 40)")
    p.add_argument("--n-a", type=int, default=60, help="A writes (default 60)")
    p.add_argument("--rounds", type=int, default=2, help="initial rounds over all identities (default 2)")
    p.add_argument("--D", type=int, default=16, help="key dimension (default 16)")
    p.add_argument("--m", type=int, default=6, help="number of identities = value dimension (default 6)")
    p.add_argument("--variants", default="dense,diag,reset,linear",
                   help="comma-separated from dense,diag,reset,iso,linear (default dense,diag,reset,linear)")
    p.add_argument("--iso-c", type=float, default=None, help="c of the fixed isotropic prior (variant iso)")
    p.add_argument("--reset-lambda", type=float, default=None, help="reset level λ (default r², gain 0.5)")
    p.add_argument("--la-gain", type=float, default=0.5, help="additive gain ω of linear attention (default 0.5)")
    p.add_argument("--json", action="store_true", help="print one JSON object with the per-step traces")
    p.set_defaults(func=run)


def run(args) -> int:
    from assocmem.numerics import VARIANTS
    from assocmem.numerics.collision import run_collision
    from assocmem.protocol import PAPER, PUBLISHED, VARIANT_NAMES, CollisionProtocol

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants:
        raise ValueError("--variants: give at least one variant")
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"--variants: unknown variant {v!r} (choose from {', '.join(VARIANTS)})")
    if "iso" in variants and args.iso_c is None:
        raise ValueError("--iso-c is required with --variants iso")
    pr = CollisionProtocol(rho=args.rho, p0=args.p0, r2=args.r2, l2=args.l2, n_b=args.n_b, n_a=args.n_a,
                           rounds=args.rounds, D=args.D, m=args.m)
    runs = run_collision(pr, variants=tuple(variants), iso_c=args.iso_c, reset_lambda=args.reset_lambda,
                         la_gain=args.la_gain)
    params = dict(pr.as_dict(), iso_c=args.iso_c, reset_lambda=args.reset_lambda, la_gain=args.la_gain)
    if args.json:
        print(json.dumps({
            "params": params,
            "phases": pr.phases(),
            "variants": {v: {"p_ab": r.p_ab.tolist(), "gain": r.gain.tolist()} for v, r in runs.items()},
        }))
        return 0
    paper = pr == PAPER and args.reset_lambda is None and args.la_gain == 0.5
    ph = pr.phases()
    print(f"collision experiment: ρ={pr.rho}, P0={pr.p0} I, r²={pr.r2}, ℓ²={pr.l2}, D={pr.D}, m={pr.m}; "
          f"steps {ph['rounds'][0]}-{ph['rounds'][1]} rounds, {ph['B'][0]}-{ph['B'][1]} B, "
          f"{ph['A'][0]}-{ph['A'][1]} A")
    if paper:
        print("(the paper's setting: published values of App. E.4 shown in brackets, as inputs)")
    eb, fa, T = pr.end_of_b, pr.first_a, pr.T
    cols = [(f"p_AB({eb})", "p_ab_end_of_b", lambda r: r.p_ab[eb - 1]),
            (f"p_AB({T})", "p_ab_final", lambda r: r.p_ab[-1]),
            (f"Δ({T})", "margin_final", lambda r: r.margin[-1]),
            (f"gain({fa})", "gain_first_a", lambda r: r.gain[min(fa, T) - 1]),
            (f"gain({T})", "gain_long_run", lambda r: r.gain[-1])]
    w = 20 if paper else 10
    print(f"{'variant':<34}" + "".join(f"{c[0]:>{w}}" for c in cols))
    for v, r in runs.items():
        label = VARIANT_NAMES[v] + (f" c={args.iso_c}" if v == "iso" else "")
        cells = []
        for _, key, fn in cols:
            val = f"{float(fn(r)):+.5f}" if key == "margin_final" else f"{float(fn(r)):.5f}"
            pub = PUBLISHED.get(key, {}).get(v) if paper else None
            cells.append(val + (f" [{pub:.5f}]" if pub is not None else ""))
        print(f"{label:<34}" + "".join(f"{c:>{w}}" for c in cells))
    return 0
