"""``assocmem docs``: build the documentation site (Sphinx + myst-nb), offline."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("docs", help="build the documentation site (HTML) from the package's own output",
                       description="Run the claim checks, render the figures, execute the notebooks and build "
                                   "the HTML site with Sphinx + myst-nb. Needs a checkout and the docs extra.")
    p.add_argument("--out", metavar="DIR", help="output folder (default docs/_build/html in the checkout, "
                                                "git-ignored); must be new, empty or an earlier build")
    p.add_argument("--root", metavar="DIR", help="the assocmem checkout (default: the one installed from)")
    p.add_argument("--claims-json", metavar="FILE",
                   help="an `assocmem verify --json` report to show on the claims page instead of running "
                        "verify again (the page names the file)")
    p.add_argument("--allow-warnings", action="store_true",
                   help="report Sphinx warnings instead of failing on them (default: warnings are errors)")
    p.set_defaults(func=run)


def run(args) -> int:
    from assocmem import site

    # build checks the flags (--root, --claims-json, then --out) before it writes anything; a bad one
    # is a ValueError naming it (one line, exit 2)
    try:
        site.build(args.out or None, args.root, strict=not args.allow_warnings, claims_json=args.claims_json)
    except site.DocsError as exc:
        print(f"assocmem docs: build failed: {exc}", file=sys.stderr)
        return 1
    return 0
