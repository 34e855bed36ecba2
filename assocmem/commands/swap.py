"""``assocmem swap``: the state-swap theorem simulated (AM App. E, Theorem 1).

Builds ``n`` unit keys with a certified ``max |k_i.k_j|``, writes the
initial one-hot values, then a long random sequence of swaps (key
``k_a − k_b``, value 0) into a DeltaFormer with the chosen kernel, and reads
every position after every swap (:mod:`assocmem.numerics.am_swap`).
"""
from __future__ import annotations

import json


def register(sub) -> None:
    from assocmem.args import SEED, Int, Real

    p = sub.add_parser(
        "swap", help="track random swaps in a DeltaFormer memory (AM Theorem 1)",
        description="Write n elements at near-orthogonal keys, apply random swaps as writes with key "
                    "k_a - k_b and value 0, and compare the read-outs with the true permutation after "
                    "every swap.")
    p.add_argument("--n", type=Int(2), required=True, metavar="N", help="number of positions (>= 2)")
    p.add_argument("--d", type=Int(1), default=None, metavar="D",
                   help="key dimension (default: the smallest d where the deterministic construction "
                        "certifies eps; d >= n uses orthonormal keys)")
    p.add_argument("--eps", type=Real(0, 1, lo_open=True, hi_open=True), default=None, metavar="E",
                   help="bound on |k_i.k_j| to certify, in (0, 1) (default 0.12; must be < 1/8 for the exact kernel)")
    p.add_argument("--swaps", type=Int(0), default=1000, metavar="S", help="number of random swaps (default 1000)")
    p.add_argument("--kernel", choices=("exact", "round2", "linear"), default="exact",
                   help="f(x.y): round to integer (Theorem 1), round to 2 decimals (experiments), or identity")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the swap sequence (default 0)")
    p.add_argument("--json", action="store_true",
                   help='print {"n", "d", "eps", "max_abs_inner", "swaps", "mismatches", "max_readout_error"}')
    p.set_defaults(func=run)


SIZE_FLAGS = {"n": ("--n", 16), "d": ("--d", None), "eps": ("--eps", None), "swaps": ("--swaps", 1000)}


def _kl(eps: float) -> float:
    from assocmem.numerics.am_swap import kl_half

    return max(kl_half(eps), 1e-250)      # eps < 1e-125: a dimension beyond any machine, but finite here


def estimate(args):
    """Key construction (:func:`near_orthogonal_keys`) + the swap simulation, as the CLI calls them."""
    import math

    from assocmem.budget import Estimate

    n, S = args.n, args.swaps
    eps = 0.12 if args.eps is None else args.eps
    hi = math.log(n * (n - 1)) / _kl(eps) + 1                # greedy_dimension as a float (no overflow)
    if args.d is not None and args.d >= n:                    # coordinate basis
        d, mem_keys, t_keys = args.d, 8.0 * n * args.d, 1e-9 * n * args.d
    elif n <= 512:                                            # greedy: one call at d (or a search up to hi)
        top = args.d if args.d is not None else hi
        calls = 1 if args.d is not None else max(1.0, math.log2(max(hi, 2)))
        d = top if args.d is not None else min(hi, 2 * n)      # the compact search lands near n (measured)
        mem_keys, t_keys = 8.0 * (2 * n * top + 3 * n * n), calls * top * n * (2.5e-6 + 2e-9 * n)
    else:                                                     # random sign keys, up to 50 tries
        d = args.d if args.d is not None else hi
        mem_keys, t_keys = 8.0 * (3 * n * d + 2 * n * n), 50 * 1e-9 * n * n * d
    cap = n + S
    mem_sim = 8.0 * (cap * (d + n) + 4 * n * n + 4 * S)
    t_sim = S * (1.5e-4 + 3e-9 * (n + S / 2) * (d + n) + 1e-8 * n * n) + 1e-8 * n * n * (d + n)
    return Estimate(max(mem_keys, mem_sim + 8.0 * n * d), t_keys + t_sim)


def run(args) -> int:
    from assocmem.numerics.am_swap import run_swap_experiment

    from assocmem import budget

    est = budget.check(estimate, args, SIZE_FLAGS)
    budget.note_if_long(est, "assocmem swap")
    ks, r = run_swap_experiment(args.n, args.swaps, args.kernel, eps=args.eps, d=args.d, seed=args.seed)
    out = {"n": args.n, "d": ks.d, "eps": ks.eps, "max_abs_inner": ks.max_abs_inner, "swaps": r.swaps,
           "mismatches": r.mismatches, "max_readout_error": r.max_readout_error}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"swap tracking: n={args.n} positions, {r.swaps} random swaps (seed {args.seed}), kernel={args.kernel}")
    print(f"  keys: d={ks.d} ({ks.method} construction), certified max |k_i.k_j| = {ks.max_abs_inner:.4g} "
          f"(target eps = {ks.eps:g})")
    print(f"  mismatches (swap, position) decoded wrongly: {r.mismatches} of {r.swaps * args.n}")
    print(f"  max read-out error |o - v_true|_inf: {r.max_readout_error:.4g}")
    if r.swaps and r.mismatches:
        first = int((r.mismatches_per_swap > 0).argmax()) + 1
        print(f"  first wrong read-out after swap {first}")
    return 0
