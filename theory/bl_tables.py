r"""Arithmetic on the published tables (BL Tables 2, 6, 7; pp.9, 29), in exact
rationals.

The tables are data (``assocmem/data/bl_tables.json``, transcribed from the
notes with the source recorded there); the published derived numbers
(relative changes, differences, the abstract's range) are inputs to compare
with, never returned as computed.  Every quantity is computed from the printed
decimals as a ``Fraction``:

* Table 2: relative change of BL vs GDN, ``(BL − GDN)/GDN`` (AR-hit PPL, all-token PPL);
* Table 6: BL − GDN-zero and BL − GDN-FT per context length (points);
* Table 7: ``(BL − GDN-zero)/GDN-zero`` per corpus and context, and the per-corpus range,
  against the abstract's blanket "2.5–2.7 %".
"""
from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from importlib import resources


def load_tables() -> dict:
    return json.loads(resources.files("assocmem").joinpath("data/bl_tables.json").read_text(encoding="utf-8"))


def F(s: str) -> Fraction:
    """Exact value of a printed decimal string."""
    return Fraction(Decimal(s))


def round_half_up(x: Fraction, places: int = 2) -> Decimal:
    """Round an exact value the way a table prints it (half up)."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    return d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def table2_changes(tables: dict | None = None) -> dict:
    t = (tables or load_tables())["table2"]["rows"]
    pct = lambda a, b: (F(a) - F(b)) / F(b) * 100  # noqa: E731
    return {
        "ar_hit_ppl_BL_vs_GDN": pct(t["BL"]["ar_hit_ppl"][0], t["GDN"]["ar_hit_ppl"][0]),
        "all_ppl_BL_vs_GDN": pct(t["BL"]["all_ppl"][0], t["GDN"]["all_ppl"][0]),
        "other_ppl_BL_vs_GDN": pct(t["BL"]["other_ppl"][0], t["GDN"]["other_ppl"][0]),
    }


def table2_bucket_overlap(tables: dict | None = None) -> dict:
    """Per AR-hit distance bucket: does ``BL mean + sd`` stay below ``GDN mean − sd``?
    (a crude separation check; the notes say the farthest bucket is not resolved)."""
    t = (tables or load_tables())["table2"]["ar_hit_by_distance"]
    out = {}
    for bucket, row in t.items():
        (bm, bs), (gm, gs) = row["BL"], row["GDN"]
        out[bucket] = {"BL_lower": F(bm) < F(gm), "separated_by_1sd": F(bm) + F(bs) < F(gm) - F(gs),
                       "gap": F(gm) - F(bm), "BL_sd": F(bs)}
    return out


def table6_differences(tables: dict | None = None) -> dict:
    t = (tables or load_tables())["table6"]
    rows = t["rows"]
    out = {"BL_minus_GDN-zero": {}, "BL_minus_GDN-FT": {}, "per_task": []}
    for ctx, r in rows.items():
        out["BL_minus_GDN-zero"][ctx] = F(r["BL"]) - F(r["GDN-zero"])
        out["BL_minus_GDN-FT"][ctx] = F(r["BL"]) - F(r["GDN-FT"])
    for c in t["per_task_cells_quoted"]["cells"]:
        out["per_task"].append({"context": c["context"], "task": c["task"], "difference": F(c["BL"]) - F(c["GDN-zero"])})
    return out


def table7_increases(tables: dict | None = None) -> dict:
    """Per corpus: list of (context, exact % increase) and the (min, max) range."""
    rows = (tables or load_tables())["table7"]["rows"]
    out: dict = {}
    for r in rows:
        inc = (F(r["BL"]) - F(r["GDN-zero"])) / F(r["GDN-zero"]) * 100
        out.setdefault(r["corpus"], {"rows": []})["rows"].append((r["context"], inc))
    for corpus, d in out.items():
        vals = [v for _, v in d["rows"]]
        d["range"] = (min(vals), max(vals))
    return out


def abstract_range_check(tables: dict | None = None) -> dict:
    """Which corpora's recomputed increases are compatible with the abstract's
    "2.5–2.7 %" at its own precision (one decimal: values in [2.45, 2.75))?"""
    tables = tables or load_tables()
    lo, hi = (F(x) for x in tables["table7"]["abstract_claim_percent"])
    half = Fraction(1, 20)
    inc = table7_increases(tables)
    out = {}
    for corpus, d in inc.items():
        mn, mx = d["range"]
        out[corpus] = {"range": (mn, mx), "within_claim_at_one_decimal": lo - half <= mn and mx < hi + half,
                       "entirely_below_claim": mx < lo - half}
    return out
