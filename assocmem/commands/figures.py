"""``assocmem figures``: regenerate the analytic figures."""
from __future__ import annotations

import sys
import time


FORMATS = ("png", "pdf", "svg")


def register(sub) -> None:
    from assocmem.args import Items

    p = sub.add_parser("figures", help="regenerate the analytic figures (PDF/PNG + caption files)",
                       description="Render the analytic figures (one file per format plus a caption .txt) "
                                   "into OUT/.")
    p.add_argument("--out", default="figures_out",
                   help="output folder, created if missing (its parent must exist; default figures_out/)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these figures (see --list)")
    p.add_argument("--format", type=Items(FORMATS, what="format"), default=("png", "pdf"),
                   help="comma-separated formats from png,pdf,svg (default png,pdf)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")   # files only; the figures package itself leaves the backend alone
    from assocmem.figures import FIGURES, render

    if args.list:
        for name, spec in FIGURES.items():
            print(f"{name:<24} {spec.caption.splitlines()[0][:90]}")
        return 0
    from assocmem.outputs import output_dir

    names = args.only or list(FIGURES)
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"--only: unknown figure {n!r} (see `assocmem figures --list`)")
        if names.count(n) > 1:
            raise ValueError(f"--only: figure {n!r} is listed twice")
    formats = list(args.format)
    output_dir("--out", args.out)
    t0 = time.perf_counter()
    for n in names:
        t = time.perf_counter()
        paths = render(n, args.out, formats)
        print(f"{n:<24} {time.perf_counter() - t:5.1f} s  " + " ".join(str(p) for p in paths[:-1]),
              file=sys.stdout)
    print(f"{len(names)} figures in {time.perf_counter() - t0:.1f} s -> {args.out}/")
    return 0
