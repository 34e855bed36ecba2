"""``assocmem verify``: run every claim check and report."""
from __future__ import annotations

import sys


def register(sub) -> None:
    from assocmem.args import Items

    p = sub.add_parser("verify", help="run the claim checks (the main job)",
                       description="Run the one check of each claim ID of the two papers; exit 0 iff none failed.")
    p.add_argument("--only", metavar="PATTERN", type=Items(what="pattern"),
                   help="comma-separated glob(s) over claim IDs, e.g. 'bl.*' or 'bl.collision_table,am.snr_*'; "
                        "each must match at least one ID")
    p.add_argument("--list", action="store_true", help="list the claim IDs and titles and exit")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--report", metavar="FILE.md", help="also write a Markdown report (its folder must exist)")
    p.add_argument("--wide", action="store_true", help="do not wrap the result column of the table")
    p.add_argument("--slow", action="store_true", help="include the slow checks (larger sizes)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from assocmem import registry, report
    from assocmem.outputs import output_file
    from assocmem.provenance import provenance

    selected = registry.claims(args.only)
    if args.list:
        for c in selected:
            print(f"{c.id:<28} {c.title}")
        return 0
    if args.report is not None:
        output_file("--report", args.report)      # before the run, not after it
    results = []
    show = not args.no_progress and not args.json and sys.stderr.isatty()
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=len(selected), desc="verify", unit="claim", leave=False, file=sys.stderr)
    for c in selected:
        if bar:
            bar.set_postfix_str(c.id)
        results.append(c.run(include_slow=args.slow))
        if bar:
            bar.update()
    if bar:
        bar.close()
    prov = provenance()
    if args.json:
        print(report.as_json(results, prov))
    else:
        print(report.table(results, wide=args.wide))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            fh.write(report.markdown(results, prov))
        if not args.json:
            print(f"report written to {args.report}")
    return 1 if any(r.status == "failed" for r in results) else 0
