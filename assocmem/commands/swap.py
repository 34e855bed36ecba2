"""``assocmem swap``: the state-swap theorem simulated (AM App. E, Theorem 1).

Builds ``n`` unit keys with a certified ``max |k_i.k_j|``, writes the
initial one-hot values, then a long random sequence of swaps (key
``k_a − k_b``, value 0) into a DeltaFormer with the chosen kernel, and reads
every position after every swap (:mod:`assocmem.numerics.am_swap`).
"""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser(
        "swap", help="track random swaps in a DeltaFormer memory (AM Theorem 1)",
        description="Write n elements at near-orthogonal keys, apply random swaps as writes with key "
                    "k_a - k_b and value 0, and compare the read-outs with the true permutation after "
                    "every swap.")
    p.add_argument("--n", type=int, required=True, metavar="N", help="number of positions (>= 2)")
    p.add_argument("--d", type=int, default=None, metavar="D",
                   help="key dimension (default: the smallest d where the deterministic construction "
                        "certifies eps; d >= n uses orthonormal keys)")
    p.add_argument("--eps", type=float, default=None, metavar="E",
                   help="bound on |k_i.k_j| to certify (default 0.12; must be < 1/8 for the exact kernel)")
    p.add_argument("--swaps", type=int, default=1000, metavar="S", help="number of random swaps (default 1000)")
    p.add_argument("--kernel", choices=("exact", "round2", "linear"), default="exact",
                   help="f(x.y): round to integer (Theorem 1), round to 2 decimals (experiments), or identity")
    p.add_argument("--seed", type=int, default=0, help="random seed of the swap sequence (default 0)")
    p.add_argument("--json", action="store_true",
                   help='print {"n", "d", "eps", "max_abs_inner", "swaps", "mismatches", "max_readout_error"}')
    p.set_defaults(func=run)


def run(args) -> int:
    from assocmem.numerics.am_swap import run_swap_experiment

    if args.n < 2:
        raise ValueError(f"--n must be >= 2 (got {args.n})")
    if args.d is not None and args.d < 1:
        raise ValueError(f"--d must be >= 1 (got {args.d})")
    if args.swaps < 0:
        raise ValueError(f"--swaps must be >= 0 (got {args.swaps})")
    if args.eps is not None and not 0 < args.eps < 1:
        raise ValueError(f"--eps must lie in (0, 1) (got {args.eps})")
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
