"""``assocmem figures``: regenerate the analytic figures."""
from __future__ import annotations

import sys
import time


def register(sub) -> None:
    p = sub.add_parser("figures", help="regenerate the analytic figures (PDF/PNG + caption files)")
    p.add_argument("--out", default="figures_out", help="output folder (default figures_out/)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these figures")
    p.add_argument("--format", default="png,pdf", help="comma-separated formats (default png,pdf)")
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
    names = args.only or list(FIGURES)
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"--only: unknown figure {n!r} (see `assocmem figures --list`)")
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    for f in formats:
        if f not in ("png", "pdf", "svg"):
            raise ValueError(f"--format: unsupported format {f!r} (png, pdf, svg)")
    t0 = time.perf_counter()
    for n in names:
        t = time.perf_counter()
        paths = render(n, args.out, formats)
        print(f"{n:<24} {time.perf_counter() - t:5.1f} s  " + " ".join(str(p) for p in paths[:-1]),
              file=sys.stdout)
    print(f"{len(names)} figures in {time.perf_counter() - t0:.1f} s -> {args.out}/")
    return 0
