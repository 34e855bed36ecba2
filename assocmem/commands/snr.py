"""``assocmem snr``: inverse SNR of a kernel associative memory (AM Sec. 2.1).

Prints the paper's leading order, the exact finite-``N``, finite-``d`` value
(:mod:`assocmem.theory.am_snr`) under the chosen value model, and a Monte
Carlo estimate that samples keys and values and forms ``r`` and ``c``
literally (:mod:`assocmem.numerics.am_snr`).
"""
from __future__ import annotations

import json
import math
import sys


def register(sub) -> None:
    from assocmem.args import SEED, Int, Real

    p = sub.add_parser(
        "snr", help="inverse SNR of a kernel memory: leading order, exact, Monte Carlo (AM Sec. 2.1)",
        description="E[||r||^2/(c^2 ||v_i||^2)] for N pairs with i.i.d. N(0, I_d) keys, read at a stored key.")
    p.add_argument("--kernel", required=True, choices=("linear", "relu", "exp"), help="retrieval kernel")
    p.add_argument("--n", type=Int(1), required=True, metavar="N", help="stored pairs N (>= 1)")
    p.add_argument("--d", type=Int(1), required=True, metavar="D", help="key dimension d (>= 1)")
    p.add_argument("--tau", type=Real(0, lo_open=True, scale=True), default=None, metavar="T",
                   help="temperature of the exp kernel (default sqrt(d)); exp only")
    p.add_argument("--values", choices=("sphere", "gaussian"), default="sphere",
                   help="value model: equal-norm with uniform directions (the paper's, default) or N(0, I_dv)")
    p.add_argument("--dv", type=Int(1), default=None, metavar="DV", help="value dimension (default d)")
    p.add_argument("--samples", type=Int(2), default=10000, metavar="S",
                   help="Monte Carlo memories, >= 2 (default 10000)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    p.add_argument("--json", action="store_true",
                   help='print {"leading_order", "exact", "monte_carlo": {"mean", "stderr", "samples"}}')
    p.set_defaults(func=run)


SIZE_FLAGS = {"samples": ("--samples", 10000), "n": ("--n", 8), "d": ("--d", 8), "dv": ("--dv", None)}


def estimate(args):
    """Monte Carlo cost: ``samples`` memories of ``n`` keys and values, in batches of ~4e6 floats."""
    from assocmem.budget import Estimate

    dv = args.dv if args.dv is not None else args.d
    per_sample = args.n * (args.d + dv)
    per = max(1, 4_000_000 // (args.n * max(args.d, dv)))
    mem = 8.0 * (3 * min(per, args.samples) * per_sample + 2 * args.samples)
    return Estimate(mem, args.samples * (5e-6 + 1.5e-7 * per_sample))


def run(args) -> int:
    from assocmem.numerics.am_snr import mc_inverse_snr, variance_finite
    from assocmem.theory.am_snr import check_finite, inverse_snr_exact, inverse_snr_leading

    from assocmem import budget

    if args.kernel != "exp" and args.tau is not None:
        raise ValueError(f"--tau applies only to --kernel exp (got --kernel {args.kernel})")
    est = budget.check(estimate, args, SIZE_FLAGS, what="the Monte Carlo run")
    tau = args.tau if args.tau is not None else (math.sqrt(args.d) if args.kernel == "exp" else None)
    if tau is not None and not math.isfinite(tau):
        raise ValueError(f"--tau must be finite (got {tau})")
    dv = args.dv if args.dv is not None else args.d
    # exact first: it names the parameter when the expectation diverges
    tau_s = repr(tau) if tau is not None else None
    check_finite(args.kernel, args.n, args.d, tau_s, args.values, dv)
    exact = float(inverse_snr_exact(args.kernel, args.n, args.d, tau_s, args.values, dv))
    lead = float(inverse_snr_leading(args.kernel, args.n, args.d, tau_s))
    budget.note_if_long(est, "assocmem snr")
    mc = mc_inverse_snr(args.kernel, args.n, args.d, tau=tau, values=args.values, dv=dv,
                        samples=args.samples, seed=args.seed)
    budget.finite_or_raise(f"--kernel {args.kernel} --n {args.n} --d {args.d}" + (f" --tau {tau:g}" if tau else ""),
                           leading_order=lead, exact=exact, monte_carlo=mc.mean)
    if not variance_finite(args.kernel, args.d, tau, args.values, dv):
        print("assocmem snr: note: the per-memory ratio has infinite variance here "
              "(linear/relu: d <= 4; exp: tau <= 1.657; gaussian: dv <= 4); the standard error is not "
              "a valid error bar", file=sys.stderr)
    if args.json:
        print(json.dumps({"leading_order": lead, "exact": exact, "monte_carlo": mc.as_dict()}))
        return 0
    desc = f"kernel={args.kernel}, N={args.n}, d={args.d}" + (f", tau={tau:g}" if tau is not None else "") \
        + f", values={args.values}" + (f" (dv={dv})" if args.values == "gaussian" else "")
    print(f"inverse SNR  E[|r|^2/(c^2 |v_i|^2)]   {desc}")
    print(f"  leading order (paper)    {lead:.6g}")
    print(f"  exact                    {exact:.6g}    exact/leading = {exact / lead:.4g}" if lead > 0
          else f"  exact                    {exact:.6g}")
    print(f"  Monte Carlo              {mc.mean:.6g} ± {mc.stderr:.2g}  ({mc.samples} memories, seed {args.seed}; "
          f"z vs exact = {(mc.mean - exact) / mc.stderr:+.2f})" if mc.stderr > 0 else
          f"  Monte Carlo              {mc.mean:.6g}  ({mc.samples} memories)")
    return 0
