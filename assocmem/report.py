"""Rendering of claim results: terminal table, JSON, Markdown report."""
from __future__ import annotations

import json
import shutil
from typing import Iterable

from assocmem.registry import ClaimResult

LEGEND = ("confirmed: the published statement holds; corrected: it is wrong as printed (printed form shown "
          "failing, corrected form passing); refined: it holds to leading order and an exact/sharper result is "
          "given; disputed: our own measurement disagrees with part of it (listed); failed: a check did not "
          "pass; skipped: a layer is unavailable; pending: not implemented yet")


def counts(results: Iterable[ClaimResult]) -> dict:
    out: dict[str, int] = {}
    for r in results:
        out[r.status] = out.get(r.status, 0) + 1
    return out


def table(results: list[ClaimResult], width: int | None = None) -> str:
    width = width or shutil.get_terminal_size((120, 20)).columns
    idw = max([len(r.id) for r in results] + [5])
    lw = max([len(",".join(r.layers)) for r in results] + [6])
    head = f"{'claim':<{idw}}  {'status':<9}  {'layers':<{lw}}  result"
    lines = [head, "-" * min(width, len(head) + 40)]
    room = max(20, width - idw - lw - 15)
    for r in results:
        detail = r.detail.replace("\n", " ")
        if len(detail) > room:
            detail = detail[: room - 1] + "…"
        lines.append(f"{r.id:<{idw}}  {r.status:<9}  {','.join(r.layers):<{lw}}  {detail}")
    c = counts(results)
    lines.append("")
    lines.append("  ".join(f"{k}: {c[k]}" for k in
                           ("confirmed", "corrected", "refined", "disputed", "skipped", "pending", "failed")
                           if k in c))
    disp = [r.id for r in results if r.status == "disputed"]
    if disp:
        lines.append(f"disputed (our own runs disagree with part of the published trend): {', '.join(disp)}")
    pend = [r.id for r in results if r.status == "pending"]
    if pend:
        lines.append(f"pending (not implemented yet): {', '.join(pend)}")
    return "\n".join(lines)


def as_json(results: list[ClaimResult], provenance: dict | None = None) -> str:
    obj = {"claims": [r.as_dict() for r in results]}
    if provenance:
        obj["provenance"] = provenance
    return json.dumps(obj, indent=2, ensure_ascii=False)


def markdown(results: list[ClaimResult], provenance: dict | None = None) -> str:
    lines = ["# assocmem verification report", ""]
    if provenance:
        lines += [f"- {k}: `{v}`" for k, v in provenance.items()] + [""]
    lines += ["Published numbers are inputs the checks compare against; every computed",
              "value below is produced by the layer named beside it.", "", f"Statuses — {LEGEND}.", "",
              "| claim | status | layers | result |", "| --- | --- | --- | --- |"]
    for r in results:
        lines.append(f"| `{r.id}` | {r.status} | {', '.join(r.layers)} | {r.detail.replace('|', '/')} |")
    for r in results:
        lines += ["", f"## `{r.id}` — {r.status}", "", f"*Source:* {r.source}", "",
                  f"*Published (input, as printed):* {r.published}", "", r.detail, ""]
        for n in r.notes:
            lines += (["```", n.rstrip(), "```", ""] if "Traceback" in n else [f"> {n.strip()}", ""])
        if r.skipped_layers:
            lines += [f"- layer `{k}` skipped: {v}" for k, v in r.skipped_layers.items()] + [""]
        if r.items:
            lines += ["| layer | check | computed | expected | tolerance | pass |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for it in r.items:
                lines.append("| {layer} | {name}{star} | {c} | {e} | {tol} | {p} |".format(
                    layer=it["layer"], name=str(it["name"]).replace("|", "/"),
                    star=" (printed form)" if it.get("printed_form_refuted") else
                    (" (disputed)" if it.get("disputed") else ""),
                    c=_cell(it["computed"]), e=_cell(it["expected"]), tol=_cell(it["tolerance"]),
                    p="yes" if it["passed"] else "**no**"))
    return "\n".join(lines) + "\n"


def _cell(x) -> str:
    if isinstance(x, float):
        return f"{x:.10g}"
    s = json.dumps(x, ensure_ascii=False) if not isinstance(x, str) else x
    s = s.replace("|", "/")
    return s if len(s) <= 80 else s[:77] + "..."
