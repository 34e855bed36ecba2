"""The documentation site: Sphinx + myst-nb over pages generated from the package.

:func:`build` lays out a Sphinx source tree in a temporary folder and builds HTML
into ``out``.  Every page comes from the checkout or from running the package:

* ``index``: the README (its links to notebooks and figures rewritten to pages);
* ``claims``: ``assocmem verify --json`` run as a subprocess, one section per claim
  ID (status, layers, published and computed values, every comparison, errata);
* ``figures``: every registered analytic figure rendered now, with its caption;
* ``notebooks/*``: the jupytext notebooks executed now with nbclient (widget
  outputs dropped: a static page cannot drive a kernel; the figures they drew stay);
* ``tasks``: the learned-task result JSONs under ``results/<task>/`` and every PNG
  in ``results/figures/`` at build time; ``docs/tasks.md`` and ``docs/gpu.md``;
* ``api/*``: autodoc pages from the docstrings.

Nothing is fetched: the theme and MathJax come from installed packages.  The
build needs the ``docs`` and ``notebooks`` extras and a checkout (the notebooks,
README and results are not installed with the package).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SKIP_RESULT_DIRS = {"figures", "logs", "stopped"}
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
BUILD_MARKER = ".buildinfo"       # Sphinx writes it into every HTML build folder


class DocsError(RuntimeError):
    """The build itself failed (a notebook raised, Sphinx warned under -W, ...)."""


# ----------------------------------------------------------------------------
# where things are
# ----------------------------------------------------------------------------
def find_root(root: str | Path | None = None) -> Path:
    """The assocmem checkout: ``root`` if given, else the one this package was
    installed from (editable install), else the current folder."""
    candidates = [Path(root)] if root is not None else [Path(__file__).resolve().parent.parent, Path.cwd()]
    for c in candidates:
        if (c / "pyproject.toml").is_file() and (c / "notebooks").is_dir() and (c / "README.md").is_file():
            return c.resolve()
    where = candidates[0] if root is not None else Path.cwd()
    raise ValueError(f"--root: {where} is not an assocmem checkout (needs README.md, pyproject.toml, notebooks/)")


def default_out(root: Path) -> Path:
    return root / "docs" / "_build" / "html"


def check_out(out: Path) -> Path:
    """``out`` must be writable and either new, empty or an earlier HTML build:
    the build replaces it, so it never overwrites a folder of other files."""
    out = Path(out).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / BUILD_MARKER).is_file():
        raise ValueError(f"--out: {out} is not empty and not an earlier docs build; choose a new or empty folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".assocmem-write-test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"--out: cannot write to {out} ({exc.strerror or exc})") from None
    return out.resolve()


# ----------------------------------------------------------------------------
# Markdown helpers
# ----------------------------------------------------------------------------
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|${}#])")


def md(s) -> str:
    """Literal text for a MyST table cell or paragraph (no markup, no maths, one line)."""
    return _MD_SPECIAL.sub(r"\\\1", str(s)).replace("\n", " ")


def value(x, limit: int = 160) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        s = f"{x:.10g}"
    elif isinstance(x, str):
        s = x
    else:
        s = json.dumps(x, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def anchor(claim_id: str) -> str:
    return "claim-" + re.sub(r"[^a-z0-9]+", "-", claim_id.lower()).strip("-")


# ----------------------------------------------------------------------------
# pages
# ----------------------------------------------------------------------------
def run_verify(timeout: int = 1800) -> dict:
    """``assocmem verify --json`` in a subprocess: the claims page's only input."""
    cmd = [sys.executable, "-m", "assocmem", "verify", "--json", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1):       # 1 = some claim failed: still a page to show
        raise DocsError(f"assocmem verify --json exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise DocsError(f"assocmem verify --json printed no JSON ({exc})") from None


# what the claims page reads of every claim in a report
CLAIM_KEYS = ("id", "status", "layers", "source", "published", "detail", "items", "computed")


def load_claims(path) -> dict:
    """An ``assocmem verify --json`` report from a file, for the claims page instead of a fresh verify run
    (``assocmem docs --claims-json FILE``): a JSON object with a list of claims, each with the keys the
    page reads (:data:`CLAIM_KEYS`), else a ``ValueError`` naming the flag."""
    path = Path(path).expanduser()
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--claims-json: {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--claims-json: {path} is not a JSON file ({type(exc).__name__})") from None
    claims = report.get("claims") if isinstance(report, dict) else None
    if not isinstance(claims, list) or not claims or not all(isinstance(c, dict) for c in claims):
        raise ValueError(f"--claims-json: {path} is not an `assocmem verify --json` report (no list of claims)")
    for c in claims:
        missing = [k for k in CLAIM_KEYS if k not in c]
        if missing:
            raise ValueError(f"--claims-json: {path} is not an `assocmem verify --json` report (claim "
                             f"{c.get('id', '?')} lacks {', '.join(missing)})")
    return report


def claims_page(report: dict, source: str | None = None) -> str:
    from assocmem.report import LEGEND

    claims = report["claims"]
    counts: dict[str, int] = {}
    for c in claims:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    prov = report.get("provenance", {})
    out = ["# Claims", "",
           ("Generated from `assocmem verify --json` when this site was built" if source is None else
            f"Generated from an `assocmem verify --json` report given to the build (`{source}`)")
           + ": one section per claim ID, "
           "with the layers that checked it, the published statement (an input) and what each layer computed.",
           "", "Status counts: " + ", ".join(f"**{k}** {v}" for k, v in counts.items()) + ".", "",
           f"Statuses — {md(LEGEND)}.", ""]
    if prov:
        out += ["```{admonition} Provenance", ":class: note", ""]
        out += [f"- {md(k)}: `{value(v, 300)}`" for k, v in prov.items()] + ["```", ""]
    out += ["| claim | status | layers | result |", "| --- | --- | --- | --- |"]
    for c in claims:
        out.append(f"| [{md(c['id'])}](#{anchor(c['id'])}) | {c['status']} | {md(', '.join(c['layers']))} | "
                   f"{md(value(c['detail'], 220))} |")
    errata = [c for c in claims if c["status"] == "corrected"]
    out += ["", "## Errata", "",
            "Claims that are wrong as printed: the printed form is shown failing and the corrected one passing.", ""]
    for c in errata:
        out.append(f"- [{md(c['id'])}](#{anchor(c['id'])}) — {md(c['detail'])}")
        for it in c["items"]:
            if it.get("printed_form_refuted"):
                out.append(f"  - printed form refuted ({md(it['layer'])}): {md(it['name'])}: printed "
                           f"{md(value(it['expected']))}, computed {md(value(it['computed']))}")
    out += ["", "## Every claim", ""]
    for c in claims:
        out += [f"({anchor(c['id'])})=", f"### `{c['id']}` — {c['status']}", "",
                f"**Layers:** {md(', '.join(c['layers']) or 'none')}  ", f"**Source:** {md(c['source'])}  ",
                f"**Published (input, as printed):** {md(c['published'])}", "", md(c["detail"]), ""]
        for layer, why in (c.get("skipped_layers") or {}).items():
            out.append(f"- layer `{layer}` skipped: {md(why)}")
        if c["items"]:
            out += ["", "| layer | check | computed | published / expected | tolerance | pass |",
                    "| --- | --- | --- | --- | --- | --- |"]
            for it in c["items"]:
                tag = (" (printed form)" if it.get("printed_form_refuted") else
                       " (disputed)" if it.get("disputed") else "")
                out.append(f"| {md(it['layer'])} | {md(it['name'])}{tag} | {md(value(it['computed']))} | "
                           f"{md(value(it['expected']))} | {md(value(it['tolerance']))} | "
                           f"{'yes' if it['passed'] else '**no**'} |")
        if c["computed"]:
            out += ["", "| computed value | |", "| --- | --- |"]
            out += [f"| `{md(k)}` | {md(value(v, 300))} |" for k, v in c["computed"].items()]
        out.append("")
    return "\n".join(out) + "\n"


def render_figures(dest: Path) -> list[tuple[str, str]]:
    """Every registered figure as PNG in ``dest``; returns (name, caption)."""
    import matplotlib

    matplotlib.use("Agg")   # files only
    from assocmem.figures import FIGURES, render

    dest.mkdir(parents=True, exist_ok=True)
    done = []
    for name, spec in FIGURES.items():
        render(name, dest, ("png",))
        done.append((name, spec.caption.strip()))
    return done


def figures_page(figs: list[tuple[str, str]]) -> str:
    out = ["# Analytic figures", "",
           "Each figure is drawn now from `assocmem.figures` (`assocmem figures` writes the same files): "
           "closed forms from `assocmem.theory`, simulations from `assocmem.numerics`.", ""]
    for name, caption in figs:
        out += [f"## `{name}`", "", f":::{{figure}} figures/{name}.png", f":name: fig-{name}", ":width: 100%",
                "", md(caption), ":::", ""]
    return "\n".join(out)


def execute_notebook(path: Path, dest: Path, timeout: int = 900):
    """Execute the jupytext notebook ``path`` in a fresh kernel; write ``dest`` (.ipynb)."""
    import jupytext
    import nbclient
    import nbformat

    nb = jupytext.read(path)
    try:
        # the kernel's own log (e.g. its note on local TCP transport) is noise here; cell
        # errors still arrive as CellExecutionError
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                extra_arguments=["--IPKernelApp.log_level=ERROR"],
                                resources={"metadata": {"path": str(dest.parent)}}).execute()
    except nbclient.exceptions.CellExecutionError as exc:
        raise DocsError(f"notebook {path.name} raised: {str(exc).strip().splitlines()[-1]}") from None
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if WIDGET_MIME not in o.get("data", {})]
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, dest)
    return dest


def notebooks_page(names: list[str]) -> str:
    out = ["# Notebooks", "",
           "The jupytext notebooks under `notebooks/`, executed when this site was built. "
           "Open them live with `jupyter lab notebooks/` (jupytext opens the `.py` files as notebooks); "
           "there the sliders redraw the figures, here they show their defaults.", "",
           "```{toctree}", ":maxdepth: 1", ""]
    out += [f"notebooks/{n}" for n in names] + ["```", ""]
    return "\n".join(out)


def _run_summary(path: Path, d: dict) -> list[str]:
    curve = d.get("curve") or []
    last = curve[-1] if curve else {}
    ev = d.get("eval") or {}
    scalars = {k: v for k, v in ev.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    prov = d.get("provenance") or {}
    dev = prov.get("device")
    dev = dev.get("name", dev) if isinstance(dev, dict) else dev
    return [path.stem, str(d.get("model", "")), str(d.get("seed", "")), str(d.get("steps", "")),
            value(last.get("acc")) if "acc" in last else "", value(last.get("loss")) if "loss" in last else "",
            ", ".join(f"{k} = {v:.4g}" for k, v in scalars.items()) or
            ("evaluations: " + ", ".join(sorted(ev)) if ev else ""),
            value(dev, 40), str(prov.get("date", ""))[:10]]


def tasks_page(root: Path, fig_dest: Path) -> str:
    res = root / "results"
    out = ["# Learned-task results", "",
           "The GPU runs saved under `results/<task>/*.json` (each with its provenance) and the figures "
           "rebuilt from them in `results/figures/`, as found when this site was built. "
           "The protocols and the discussion are in [the task report](docs/tasks.md); the claims "
           "`task.*` on the [claims page](claims.md) compare these runs with the papers.", ""]
    pngs = sorted((res / "figures").glob("*.png")) if (res / "figures").is_dir() else []
    fig_dest.mkdir(parents=True, exist_ok=True)
    if pngs:
        out += ["## Figures", ""]
    for p in pngs:
        shutil.copy2(p, fig_dest / p.name)
        cap_file = p.with_suffix(".txt")
        caption = cap_file.read_text(encoding="utf-8").strip() if cap_file.is_file() else \
            f"results/figures/{p.name}, drawn by python -m assocmem.gpu.tasks.plots from the saved JSONs."
        out += [f":::{{figure}} task_figures/{p.name}", ":width: 100%", "", md(caption), ":::", ""]
    tasks = sorted(d for d in res.iterdir() if d.is_dir() and d.name not in SKIP_RESULT_DIRS) \
        if res.is_dir() else []
    for tdir in tasks:
        runs = sorted(tdir.glob("*.json"))
        if not runs:
            continue
        out += [f"## `{tdir.name}`", "", f"{len(runs)} runs.", "",
                "| run | model | seed | steps | final train acc | final loss | evaluation | device | date |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for p in runs:
            try:
                d = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                out.append(f"| {md(p.stem)} | unreadable: {md(exc)} |||||||")
                continue
            out.append("| " + " | ".join(md(x) for x in _run_summary(p, d)) + " |")
        out.append("")
    if not pngs and not tasks:
        out += ["No learned-task results in this checkout.", ""]
    return "\n".join(out)


README_LINK = re.compile(r"\]\((notebooks/[\w.-]+)\.py\)")


def index_page(root: Path, pages: list[str]) -> str:
    text = (root / "README.md").read_text(encoding="utf-8")
    text = README_LINK.sub(r"](\1.ipynb)", text)
    text += "\n\n```{toctree}\n:hidden:\n:maxdepth: 2\n\n" + "\n".join(pages) + "\n```\n"
    return text


# API pages: one per layer; the modules found on disk, so a new one appears by itself
API_PACKAGES = {
    "assocmem": ("The hub: registry, report, protocol, provenance, sliders", ["registry", "report", "protocol",
                                                                           "provenance", "interact", "site"]),
    "assocmem.theory": ("sympy derivations and mpmath closed forms", None),
    "assocmem.numerics": ("numpy float64 simulations written from the models", None),
    "assocmem.gpu": ("torch reference, Triton kernels, the BL layer", None),
    "assocmem.gpu.tasks": ("learned tasks", None),
    "assocmem.figures": ("one function per figure", None),
}


def api_pages(dest: Path) -> list[str]:
    import importlib
    import pkgutil

    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for pkg, (title, mods) in API_PACKAGES.items():
        mod = importlib.import_module(pkg)
        subs = mods if mods is not None else sorted(
            m.name for m in pkgutil.iter_modules(mod.__path__) if not m.ispkg and not m.name.startswith("__"))
        # private modules (``_dispatch``) are documented only when they are the implementation
        # users are pointed to; keep the public surface
        subs = [s for s in subs if not s.startswith("_")]
        slug = pkg.replace(".", "_")
        lines = [pkg, "=" * len(pkg), "", "" if (mod.__doc__ or "").strip() else title + ".", "",
                 f".. automodule:: {pkg}", "   :no-members:", ""]
        for s in subs:
            full = f"{pkg}.{s}"
            lines += [full, "-" * len(full), "", f".. automodule:: {full}", "   :members:", ""]
        (dest / f"{slug}.rst").write_text("\n".join(lines), encoding="utf-8")
        names.append(slug)
    index = ["API reference", "=============", "",
             "Generated from the docstrings (autodoc). A docstring that is not valid reStructuredText is "
             "shown as preformatted text.", "", ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {n}" for n in names]
    (dest / "index.rst").write_text("\n".join(index) + "\n", encoding="utf-8")
    return names


CSS = """/* assocmem docs: long claim details and values wrap inside the column instead of scrolling away */
.bd-article td { overflow-wrap: break-word; }
.bd-article td:last-child { overflow-wrap: anywhere; }
.bd-article table { width: 100%; }
"""

CONF = '''# Generated by assocmem docs; not a file to edit.
project = "assocmem"
author = "assocmem contributors"
release = {release!r}
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx-mathjax-offline", "assocmem._sphinx"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "off"            # executed with nbclient by assocmem docs just before
nb_render_markdown_format = "myst"   # derivations show as Markdown with display maths
autodoc_member_order = "bysource"
autodoc_typehints = "none"
html_theme = "sphinx_book_theme"
html_title = "assocmem"
html_theme_options = {{"show_toc_level": 2, "use_download_button": False, "use_fullscreen_button": False}}
html_static_path = ["_static"]
html_css_files = ["assocmem.css"]
suppress_warnings = ["myst.header"]   # the README starts at level 1 and skips levels in places
'''


def build(out: Path | None = None, root: Path | None = None, *, strict: bool = True, log=print,
          claims_json: str | Path | None = None) -> Path:
    """Build the site into ``out`` (default ``docs/_build/html`` in the checkout).  ``claims_json``: an
    ``assocmem verify --json`` report to show instead of running verify again (:func:`load_claims`)."""
    root = find_root(root)
    given = load_claims(claims_json) if claims_json is not None else None
    out = check_out(out if out is not None else default_out(root))
    try:
        import myst_nb  # noqa: F401
        import sphinx  # noqa: F401
    except ImportError as exc:
        raise DocsError(f"the docs extra is not installed ({exc.name}): pip install -e '.[docs,notebooks]'") from None
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="assocmem-docs-") as tmp:
        src = Path(tmp) / "src"
        (src / "notebooks").mkdir(parents=True)
        timings = {}

        def timed(label, fn, *a):
            t = time.perf_counter()
            r = fn(*a)
            timings[label] = time.perf_counter() - t
            return r

        # Import everything both threads use here, first: a module half-imported by one
        # thread is seen by the other as partially initialised (matplotlib probes IPython).
        import matplotlib

        matplotlib.use("Agg")   # files only
        import IPython  # noqa: F401
        import jupytext  # noqa: F401
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401

        import assocmem.figures  # noqa: F401

        # verify (a subprocess) and the notebook kernels run beside the in-process work
        with ThreadPoolExecutor(max_workers=2) as pool:
            verify = pool.submit(timed, "verify --json", run_verify) if given is None else None
            nbs = sorted((root / "notebooks").glob("*.py"))
            nb_futs = pool.submit(timed, "notebooks", lambda: [
                execute_notebook(p, src / "notebooks" / f"{p.stem}.ipynb") for p in nbs])
            figs = timed("figures", render_figures, src / "figures")
            (src / "figures.md").write_text(figures_page(figs), encoding="utf-8")
            (src / "tasks.md").write_text(tasks_page(root, src / "task_figures"), encoding="utf-8")
            timed("api pages", api_pages, src / "api")
            (src / "docs").mkdir()
            doc_pages = sorted(p.name for p in (root / "docs").glob("*.md")) if (root / "docs").is_dir() else []
            for name in doc_pages:                     # every report in docs/ (they link to each other)
                shutil.copy2(root / "docs" / name, src / "docs" / name)
            if (root / "docs" / "figures").is_dir():
                shutil.copytree(root / "docs" / "figures", src / "docs" / "figures")
            if (root / "results" / "figures").is_dir():  # the README shows some of them
                (src / "results" / "figures").mkdir(parents=True)
                for png in (root / "results" / "figures").glob("*.png"):
                    shutil.copy2(png, src / "results" / "figures" / png.name)
            nb_futs.result()
            (src / "notebooks.md").write_text(notebooks_page([p.stem for p in nbs]), encoding="utf-8")
            report = verify.result() if given is None else given
            (src / "claims.md").write_text(claims_page(report, None if given is None else Path(claims_json).name),
                                           encoding="utf-8")
        pages = ["claims", "figures", "notebooks", "tasks"] + [f"docs/{n[:-3]}" for n in doc_pages] + ["api/index"]
        (src / "index.md").write_text(index_page(root, pages), encoding="utf-8")
        from assocmem import __version__

        (src / "conf.py").write_text(CONF.format(release=__version__), encoding="utf-8")
        (src / "_static").mkdir()
        (src / "_static" / "assocmem.css").write_text(CSS, encoding="utf-8")
        for k, v in timings.items():
            log(f"{k:<16} {v:6.1f} s")
        t = time.perf_counter()
        _sphinx(src, out, Path(tmp) / "doctrees", strict=strict)
        log(f"{'sphinx html':<16} {time.perf_counter() - t:6.1f} s")
    log(f"site built in {time.perf_counter() - t_all:.1f} s -> {out}/index.html")
    return out


def _sphinx(src: Path, out: Path, doctrees: Path, *, strict: bool) -> None:
    import io

    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    warnings = io.StringIO()
    if out.exists():
        shutil.rmtree(out)       # check_out made sure it is an earlier build (or empty)
    with patch_docutils(src), docutils_namespace():
        app = Sphinx(str(src), str(src), str(out), str(doctrees), "html", status=None, warning=warnings,
                     freshenv=True, warningiserror=strict, keep_going=True)
        app.build()
    lines = [ln for ln in warnings.getvalue().splitlines() if ln.strip()]
    if app.statuscode or (strict and lines):
        shown = "\n  ".join(lines[:30]) + (f"\n  … {len(lines) - 30} more" if len(lines) > 30 else "")
        raise DocsError(f"sphinx: {len(lines)} warning(s) with warnings as errors:\n  {shown}" if lines
                        else f"sphinx exited with status {app.statuscode}")
    for ln in lines:
        print(ln, file=sys.stderr)
