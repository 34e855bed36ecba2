"""``assocmem collision``: the deterministic collision experiment (BL App. E.4)."""
from __future__ import annotations

import json


def register(sub) -> None:
    from assocmem.args import Int, Items, Real
    from assocmem.numerics.bl_filter import VARIANTS

    p = sub.add_parser(
        "collision", help="run the deterministic collision experiment (BL App. E.4)",
        description="Write six identities twice, reinforce B n_b times, write A n_a times, and read "
                    "pairwise retrieval p_AB at k_B after every step.  Defaults are the paper's setting.")
    p.add_argument("--rho", type=Real(-1, 1), default=0.92, help="key overlap k_Aᵀk_B in [-1, 1] (default 0.92)")
    p.add_argument("--p0", type=Real(0, scale=True), default=3.0,
                   help="prior covariance scale P0 = p0 I, >= 0 (default 3)")
    p.add_argument("--r2", type=Real(0, lo_open=True, scale=True), default=0.05,
                   help="observation-noise variance r² > 0 (default 0.05)")
    p.add_argument("--l2", type=Real(0, scale=True), default=0.05, help="process-noise variance ℓ² >= 0 (default 0.05)")
    p.add_argument("--n-b", type=Int(0), default=40, help="B reinforcements (default 40)")
    p.add_argument("--n-a", type=Int(0), default=60, help="A writes (default 60)")
    p.add_argument("--rounds", type=Int(0), default=2, help="initial rounds over all identities (default 2)")
    p.add_argument("--D", type=Int(2), default=16, help="key dimension, >= m (default 16)")
    p.add_argument("--m", type=Int(2), default=6, help="number of identities = value dimension, >= 2 (default 6)")
    p.add_argument("--variants", type=Items(VARIANTS, what="variant"), default=("dense", "diag", "reset", "linear"),
                   help="comma-separated from dense,diag,reset,iso,linear (default dense,diag,reset,linear)")
    p.add_argument("--iso-c", type=Real(0, lo_open=True, scale=True), default=None,
                   help="c > 0 of the fixed isotropic prior (required by, and only for, variant iso)")
    p.add_argument("--reset-lambda", type=Real(0, lo_open=True, scale=True), default=None,
                   help="reset level λ > 0 of variant reset (default r², gain 0.5)")
    p.add_argument("--la-gain", type=Real(0, scale=True), default=None,
                   help="additive gain ω >= 0 of variant linear (linear attention; default 0.5)")
    p.add_argument("--json", action="store_true", help="print one JSON object with the per-step traces")
    # names the numerics use for these flags (their messages say lam, omega)
    p.alias(lam="--reset-lambda", omega="--la-gain", variant="--variants")
    p.set_defaults(func=run)


# dest -> (flag, reference value) of every argument the cost grows with
SIZE_FLAGS = {"n_a": ("--n-a", 60), "n_b": ("--n-b", 40), "rounds": ("--rounds", 2), "D": ("--D", 16),
              "m": ("--m", 6)}


def _cell(x: float, signed: bool = False) -> str:
    # fixed decimals for the paper's range, significant digits for the large gains --la-gain allows
    return f"{x:+.5f}" if signed and abs(x) < 1e4 else (f"{x:.5f}" if abs(x) < 1e4 else f"{x:.5g}")


def estimate(args):
    """Peak memory and time of :func:`run_collision` + the output (numbers measured on one core)."""
    from assocmem.budget import Estimate

    T = args.rounds * args.m + args.n_b + args.n_a
    D, m, nv = args.D, args.m, len(args.variants)
    per_step = 8.0 * (3 * D + 3 * m + 8 + 4 * nv)          # keys, u, y, values, gains, ... + traces kept
    if args.json:
        per_step += 2 * nv * 60.0                            # Python floats and their JSON text
    state = 8.0 * 8 * D * D                                  # P, Pbar, u uᵀ and temporaries
    cov = sum(v != "linear" for v in args.variants)
    secs = T * (nv * 3e-4 + cov * 1.2e-7 * D * D + (nv - cov) * 1e-9 * D * m)
    return Estimate(T * per_step + state, secs)


def run(args) -> int:
    from assocmem.numerics.collision import run_collision
    from assocmem.protocol import PAPER, PUBLISHED, VARIANT_NAMES, CollisionProtocol

    from assocmem import budget

    variants = list(args.variants)
    # options that only one variant reads: refuse them without it rather than ignore them
    for flag, value, v in (("--iso-c", args.iso_c, "iso"), ("--reset-lambda", args.reset_lambda, "reset"),
                           ("--la-gain", args.la_gain, "linear")):
        if value is not None and v not in variants:
            raise ValueError(f"{flag} applies only to variant {v}, which --variants does not include "
                             f"(got --variants {','.join(variants)})")
    if "iso" in variants and args.iso_c is None:
        raise ValueError("--iso-c is required with --variants iso")
    if args.D < args.m:
        raise ValueError(f"--D must be >= --m so that the m identities fit (got --D {args.D}, --m {args.m})")
    if args.rounds * args.m + args.n_b + args.n_a == 0:
        raise ValueError("--rounds, --n-b and --n-a are all 0: the protocol has no step")
    la_gain = 0.5 if args.la_gain is None else args.la_gain
    est = budget.check(estimate, args, SIZE_FLAGS)
    budget.note_if_long(est, "assocmem collision")
    pr = CollisionProtocol(rho=args.rho, p0=args.p0, r2=args.r2, l2=args.l2, n_b=args.n_b, n_a=args.n_a,
                           rounds=args.rounds, D=args.D, m=args.m)
    runs = run_collision(pr, variants=tuple(variants), iso_c=args.iso_c, reset_lambda=args.reset_lambda,
                         la_gain=la_gain)
    defaults = {"p0": ("--p0", 3.0), "r2": ("--r2", 0.05), "l2": ("--l2", 0.05), "iso_c": ("--iso-c", None),
                "reset_lambda": ("--reset-lambda", None), "la_gain": ("--la-gain", None)}
    given = " ".join(f"{f} {getattr(args, d)}" for d, (f, ref) in defaults.items() if getattr(args, d) != ref) \
        or "--p0/--r2/--l2"
    for v, r in runs.items():
        budget.finite_or_raise(given, **{f"{v} p_AB": r.p_ab, f"{v} gain": r.gain, f"{v} read-out": r.y_b - r.y_a})
    params = dict(pr.as_dict(), iso_c=args.iso_c, reset_lambda=args.reset_lambda, la_gain=la_gain)
    if args.json:
        print(json.dumps({
            "params": params,
            "phases": pr.phases(),
            "variants": {v: {"p_ab": r.p_ab.tolist(), "gain": r.gain.tolist()} for v, r in runs.items()},
        }))
        return 0
    paper = pr == PAPER and args.reset_lambda is None and la_gain == 0.5
    ph = pr.phases()
    print(f"collision experiment: ρ={pr.rho}, P0={pr.p0} I, r²={pr.r2}, ℓ²={pr.l2}, D={pr.D}, m={pr.m}; "
          f"steps {ph['rounds'][0]}-{ph['rounds'][1]} rounds, {ph['B'][0]}-{ph['B'][1]} B, "
          f"{ph['A'][0]}-{ph['A'][1]} A")
    if paper:
        print("(the paper's setting: published values of App. E.4 shown in brackets, as inputs)")
    eb, fa, T = pr.end_of_b, pr.first_a, pr.T
    fa = min(fa, T)
    cols = [(f"p_AB({eb})", "p_ab_end_of_b", lambda r: r.p_ab[eb - 1] if eb >= 1 else None),
            (f"p_AB({T})", "p_ab_final", lambda r: r.p_ab[-1]),
            (f"Δ({T})", "margin_final", lambda r: r.margin[-1]),
            (f"gain({fa})", "gain_first_a", lambda r: r.gain[fa - 1]),
            (f"gain({T})", "gain_long_run", lambda r: r.gain[-1])]
    w = 20 if paper else 10
    print(f"{'variant':<34}" + "".join(f"{c[0]:>{w}}" for c in cols))
    for v, r in runs.items():
        label = VARIANT_NAMES[v] + (f" c={args.iso_c}" if v == "iso" else "")
        cells = []
        for _, key, fn in cols:
            x = fn(r)
            val = "—" if x is None else _cell(float(x), signed=key == "margin_final")
            pub = PUBLISHED.get(key, {}).get(v) if paper else None
            cells.append(val + (f" [{pub:.5f}]" if pub is not None else ""))
        print(f"{label:<34}" + "".join(f"{c:>{w}}" for c in cells))
    return 0
