"""Sphinx extension used by ``assocmem docs`` (see :mod:`assocmem.site`).

The docstrings were written for readers of the source and for Jupyter's ``?``,
not all as reStructuredText.  Before autodoc renders one, it is parsed on its
own with docutils; a docstring that does not parse cleanly is shown verbatim as
a preformatted block (content intact, nothing silently dropped), so the site can
be built with warnings as errors without rewriting every docstring.  The
docstrings shown verbatim are listed in ``_verbatim_docstrings.txt`` in the
output folder.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

# Sphinx-only roles are unknown to plain docutils; for the check they become plain interpreted text
_SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|mod|class|meth|attr|data|obj|exc|const|ref|doc|term|any):(?=`)")


def rst_problems(text: str, env=None) -> str:
    """docutils' warnings and errors for ``text`` parsed on its own ('' when clean).

    Inside a build, ``env`` is Sphinx's environment, which Sphinx's own directives
    and roles (registered in docutils for the build) need."""
    from docutils.core import publish_doctree

    stream = io.StringIO()
    settings = {"report_level": 2, "halt_level": 5, "warning_stream": stream,
                "file_insertion_enabled": False, "raw_enabled": False, "_disable_config": True}
    if env is not None:
        settings["env"] = env
    else:
        text = _SPHINX_ROLE.sub("", text)
    publish_doctree(text, settings_overrides=settings)
    return stream.getvalue().strip()


def _process(app, what, name, obj, options, lines):
    if not lines:
        return
    problems = rst_problems("\n".join(lines), app.env)
    if problems:
        # listed under the object's own name (autodoc also reads imported members it then skips)
        if getattr(obj, "__module__", None) and getattr(obj, "__qualname__", None) \
                and name != f"{obj.__module__}.{obj.__qualname__}" and what != "module":
            name = f"{obj.__module__}.{obj.__qualname__}"
        if name.startswith("assocmem"):
            app.env.assocmem_verbatim = getattr(app.env, "assocmem_verbatim", set()) | {name}
        body = ["    " + ln if ln.strip() else "" for ln in lines]
        lines[:] = ["::", ""] + body + [""]


def _finished(app, exc):
    names = sorted(getattr(app.env, "assocmem_verbatim", set()))
    if exc is None and app.builder.format == "html":
        Path(app.outdir, "_verbatim_docstrings.txt").write_text("\n".join(names) + "\n", encoding="utf-8")


def setup(app):
    app.connect("autodoc-process-docstring", _process)
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
