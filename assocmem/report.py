"""Rendering of claim results: terminal table, JSON, Markdown report."""
from __future__ import annotations

import html as _html
import json
import shutil
from typing import Iterable

from assocmem.registry import ClaimResult, _jsonable

LEGEND = ("confirmed: the published statement holds; corrected: it is wrong as printed (printed form shown "
          "failing, corrected form passing); refined: it holds to leading order and an exact/sharper result is "
          "given; disputed: our own measurement disagrees with part of it (listed); failed: a check did not "
          "pass; skipped: a layer is unavailable; pending: not implemented or not measured yet")


def counts(results: Iterable[ClaimResult]) -> dict:
    out: dict[str, int] = {}
    for r in results:
        out[r.status] = out.get(r.status, 0) + 1
    return out


def table(results: list[ClaimResult], width: int | None = None, wide: bool = False) -> str:
    """The terminal table; the result column wraps at ``width`` (the terminal's),
    continuation lines aligned under it; ``wide``: one line per claim, unwrapped."""
    import textwrap

    width = width or shutil.get_terminal_size((120, 20)).columns
    idw = max([len(r.id) for r in results] + [5])
    lw = max([len(",".join(r.layers)) for r in results] + [6])
    head = f"{'claim':<{idw}}  {'status':<9}  {'layers':<{lw}}  result"
    lines = [head, "-" * min(width, len(head) + 40)]
    indent = idw + lw + 15
    room = max(30, width - indent)
    for r in results:
        detail = " ".join(r.detail.split())
        parts = [detail] if wide else (textwrap.wrap(detail, room, break_on_hyphens=False) or [""])
        lines.append(f"{r.id:<{idw}}  {r.status:<9}  {','.join(r.layers):<{lw}}  {parts[0]}")
        lines += [" " * indent + part for part in parts[1:]]
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
        lines.append(f"pending (not implemented or not measured yet): {', '.join(pend)}")
    read = files_by_folder(results)
    if read:
        lines.append(f"saved results read ({sum(len(v) for v in read.values())} files):")
        for folder, names in read.items():
            text = f"{folder}/ ({len(names)}): {' '.join(names)}"
            lines += [text] if wide else textwrap.wrap(text, max(40, width - 2), initial_indent="  ",
                                                       subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines)


def files_by_folder(results: Iterable[ClaimResult]) -> dict[str, list[str]]:
    """Evidence files the checks read, grouped by folder (names without ``.json``)."""
    out: dict[str, set] = {}
    for r in results:
        for f in getattr(r, "files", []) or []:
            folder, _, name = f.rpartition("/")
            out.setdefault(folder, set()).add(name.removesuffix(".json"))
    return {k: sorted(v) for k, v in sorted(out.items())}


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
    read = files_by_folder(results)
    if read:
        lines += ["", "## Saved results read", "",
                  "The checks above opened these result files (each claim's section lists its own):", ""]
        lines += [f"- `{folder}/` ({len(names)}): {', '.join(names)}" for folder, names in read.items()]
    for r in results:
        lines += ["", f"## `{r.id}` — {r.status}", "", f"*Source:* {r.source}", "",
                  f"*Published (input, as printed):* {r.published}", "", r.detail, ""]
        for n in r.notes:
            lines += (["```", n.rstrip(), "```", ""] if "Traceback" in n else [f"> {n.strip()}", ""])
        if r.skipped_layers:
            lines += [f"- layer `{k}` skipped: {v}" for k, v in r.skipped_layers.items()] + [""]
        if getattr(r, "files", None):
            lines += [f"*Saved results read ({len(r.files)}):* " + ", ".join(f"`{f}`" for f in r.files), ""]
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


STATUS_COLORS = {"confirmed": "#1a7f37", "corrected": "#9a6700", "refined": "#0969da", "disputed": "#8250df",
                 "failed": "#cf222e", "skipped": "#6e7781", "pending": "#6e7781"}


def html(r: ClaimResult, max_items: int = 40) -> str:
    """One claim result as HTML (Jupyter's ``_repr_html_``): status, layers, the
    published statement against what each layer computed."""
    e = _html.escape
    c = lambda x: "" if x is None else _cell(x)   # noqa: E731
    color = STATUS_COLORS.get(r.status, "#6e7781")
    out = [f'<div class="assocmem-claim" id="claim-{e(r.id)}">',
           f'<p><code>{e(r.id)}</code> <span style="background:{color};color:#fff;border-radius:3px;'
           f'padding:0 .4em">{e(r.status)}</span> &nbsp; layers: <b>{e(", ".join(r.layers) or "none")}</b>'
           f' &nbsp; <small>({r.seconds:.2f} s)</small></p>',
           f"<p><i>Source:</i> {e(r.source)}</p>",
           f"<p><i>Published (input, as printed):</i> {e(r.published)}</p>",
           f"<p><i>Result:</i> {e(r.detail)}</p>"]
    if r.skipped_layers:
        out.append("<p>" + "; ".join(f"layer <code>{e(k)}</code> skipped: {e(v)}"
                                     for k, v in r.skipped_layers.items()) + "</p>")
    if r.items:
        out.append("<table><thead><tr><th>layer</th><th>check</th><th>computed</th><th>published / expected</th>"
                   "<th>tolerance</th><th>pass</th></tr></thead><tbody>")
        for it in r.items[:max_items]:
            tag = (" (printed form)" if it.get("printed_form_refuted") else
                   " (disputed)" if it.get("disputed") else "")
            out.append(f"<tr><td>{e(it['layer'])}</td><td>{e(str(it['name']))}{tag}</td>"
                       f"<td>{e(c(it['computed']))}</td><td>{e(c(it['expected']))}</td>"
                       f"<td>{e(c(it['tolerance']))}</td><td>{'yes' if it['passed'] else '<b>no</b>'}</td></tr>")
        out.append("</tbody></table>")
        if len(r.items) > max_items:
            out.append(f"<p>… and {len(r.items) - max_items} more comparisons (<code>.items</code>)</p>")
    if r.computed:
        out.append("<details><summary>computed values (<code>.computed</code>)</summary><table><tbody>"
                   + "".join(f"<tr><td><code>{e(str(k))}</code></td><td>{e(c(_jsonable(v)))}</td></tr>"
                             for k, v in r.computed.items()) + "</tbody></table></details>")
    out.append("</div>")
    return "\n".join(out)
