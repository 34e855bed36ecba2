"""How theory objects show themselves in Jupyter: LaTeX and Markdown.

``Derivation`` and ``SnrDerivation`` carry ``_repr_latex_`` / ``_repr_markdown_``
built from the helpers here, so a notebook cell that ends in a derivation shows
its equations, its assumptions and what was proved (and how), instead of a
dataclass repr.  Front-ends pick one: JupyterLab and the documentation site use
the Markdown form (prose with display maths), a LaTeX-only renderer the
``$$ \\begin{aligned} … $$`` form.

Large objects (explicit matrices of rational functions) would fill the screen;
anything whose LaTeX is longer than ``MAX_LATEX`` characters is summarised by its
shape and symbol count instead.  Only sympy is imported.
"""
from __future__ import annotations

import re

import sympy as sp

MAX_LATEX = 900          # characters of LaTeX per object before it is summarised
MAX_IDENTITY_LATEX = 160  # identities are differences; show the short ones

# LaTeX specials in prose: \text{} is closed around each and the character is
# written in maths mode, which both LaTeX and MathJax accept (MathJax's \text
# shows "\_" literally, LaTeX's text mode rejects a bare "_").
_MATH_FOR = {"\\": r"\backslash", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
             "^": r"\hat{\ }", "_": r"\_", "%": r"\%", "~": r"\sim"}


def text(s: str) -> str:
    """``s`` (Unicode prose) as LaTeX ``\\text{…}`` runs, specials in maths mode."""
    out, run = [], []
    for c in str(s):
        if c in _MATH_FOR:
            if run:
                out.append(r"\text{" + "".join(run) + "}")
                run = []
            out.append(_MATH_FOR[c])
        else:
            run.append(c)
    if run or not out:
        out.append(r"\text{" + "".join(run) + "}")
    return "".join(out)


def name_tex(name: str) -> str:
    """An object's key (``x_inf``) as typewriter maths."""
    return r"\mathtt{" + str(name).replace("_", r"\_") + "}"


def _summary(obj) -> str:
    shape = getattr(obj, "shape", None)
    syms = getattr(obj, "free_symbols", set())
    what = f"{shape[0]}×{shape[1]} matrix" if shape else "expression"
    return f"({what} in {len(syms)} symbols, too large to show)"


# the package names the noise variances l2 / ell2 / r2 (ASCII); the papers write ℓ², r²
_PRETTY = {"l2": r"\ell^{2}", "ell2": r"\ell^{2}", "r2": r"r^{2}"}


def _symbol_names(obj) -> dict:
    syms = set()
    for o in (obj if isinstance(obj, (list, tuple)) else [obj]):
        syms |= getattr(o, "free_symbols", set())
    return {s: _PRETTY[s.name] for s in syms if isinstance(s, sp.Symbol) and s.name in _PRETTY}


def is_trivial_zero(expr) -> bool:
    """Already literally zero (scalar or matrix): nothing worth showing."""
    if isinstance(expr, sp.MatrixBase):
        return all(e == 0 for e in expr)
    try:
        return bool(sp.sympify(expr) == 0) or bool(getattr(expr, "is_ZeroMatrix", False))
    except (sp.SympifyError, TypeError):
        return False


def latex_of(obj, limit: int = MAX_LATEX) -> str:
    """LaTeX for a sympy object, a list of them, a number or a string; ``None``
    when it does not fit in ``limit`` characters (the caller summarises it)."""
    if isinstance(obj, str):
        out = text(obj)
    else:
        try:
            out = sp.latex(obj, symbol_names=_symbol_names(obj))
        except Exception:   # an object sympy cannot print (e.g. a helper wrapper)
            out = text(str(obj))
    return out if len(out) <= limit else None


def md_escape(s: str) -> str:
    """Prose for Markdown: keep it literal (no emphasis from ``*`` or ``_``)."""
    return re.sub(r"([\\`*_\[\]<>|$])", r"\\\1", str(s))


def mark(ok) -> str:
    return "✓" if ok else "✗"
