"""Theory objects show themselves as mathematics (Markdown + LaTeX) in Jupyter."""
import sympy as sp

from assocmem.theory.am_snr import derive
from assocmem.theory.bl_common import Derivation
from assocmem.theory.bl_steady_state import steady_state


def test_derivation_markdown_has_statement_assumptions_equations_and_proof():
    d = steady_state()
    md = d._repr_markdown_()
    assert md.startswith("**`bl.steady_state`**")
    assert "*Assumptions:*" in md and "symbolically at general size" in md
    assert r"\mathtt{g\_inf\_kappa} &= \frac{2}{\sqrt{4 \kappa + 1} + 1}" in md
    assert md.count("- ✓") == len(d.identities) + len(d.facts) and "✗" not in md


def test_derivation_latex_marks_a_failing_step_and_summarises_large_objects():
    x = sp.Symbol("x")
    big = sp.Matrix(8, 8, lambda i, j: sp.Symbol(f"a_{i}{j}") ** 3 / (1 + x))
    d = Derivation(claim="test.claim", statement="x = 1", assumptions="none",
                   objects={"big": big, "x": x}, identities={"x - 1 is zero": x - 1, "0 is zero": sp.Integer(0)},
                   sizes="D=2")
    tex = d._repr_latex_()
    assert tex.startswith("$$\\begin{aligned}") and tex.endswith("\\end{aligned}$$")
    assert r"&\times\ \text{x - 1 is zero}\qquad (x - 1 = 0)" in tex
    assert r"&\checkmark\ \text{0 is zero}" in tex
    assert "8×8 matrix in 65 symbols, too large to show" in tex
    assert "symbolically at given sizes" in d.how() and "1 of 2 identities" in d.how()


def test_snr_derivation_shows_exact_and_leading_order():
    md = derive("linear")._repr_markdown_()
    assert r"\frac{N - 1}{d - 2}" in md and r"\frac{N}{d}" in md
    assert derive("exp")._repr_latex_().startswith("$$\\begin{aligned}")
