"""Shared pieces of the BL theory modules: the ``Derivation`` record, explicit
symbolic matrices, ``vec``, and seeded admissible parameters for mpmath.

A :class:`Derivation` is what every ``theory.bl_*`` builder returns, so that a
notebook can display it: the statement, its assumptions, the sympy objects it
built, and the identities (expressions that must simplify to exactly zero)
that make up the proof.  ``verify()`` simplifies them.

This module never imports :mod:`assocmem.numerics` or :mod:`assocmem.gpu`.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from fractions import Fraction

import mpmath as mp
import sympy as sp

from . import display as D


@dataclass
class Derivation:
    """A symbolic argument, inspectable from a notebook.

    ``identities`` maps a short name to a sympy expression (scalar or matrix)
    that equals zero exactly iff the step holds; ``facts`` maps a name to a
    sympy boolean / truth value established by the derivation (e.g. a sign);
    ``objects`` holds the symbols and closed forms the argument built.
    """

    claim: str
    statement: str
    assumptions: str
    objects: dict = field(default_factory=dict)
    identities: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    sizes: str = "general symbols"
    _checked: dict | None = field(default=None, init=False, repr=False, compare=False)

    def verify(self) -> dict[str, bool]:
        """Simplify every identity; ``True`` where it is exactly zero."""
        out = {name: is_zero(expr) for name, expr in self.identities.items()}
        out.update({name: bool(val) for name, val in self.facts.items()})
        return out

    def __repr__(self) -> str:  # short, for terminals
        return (f"Derivation({self.claim!r}: {self.statement} | assumptions: {self.assumptions} | "
                f"sizes: {self.sizes} | {len(self.identities)} identities, {len(self.facts)} facts)")

    # -- display in Jupyter (see theory/display.py) ---------------------------
    def checked(self) -> dict[str, bool]:
        """``verify()``, run once and kept, for display."""
        if self._checked is None:
            self._checked = self.verify()
        return self._checked

    def how(self) -> str:
        """What was proved and how, in one sentence."""
        ok = self.checked()
        n_id = sum(ok[k] for k in self.identities)
        n_f = sum(ok[k] for k in self.facts)
        kinds = []
        if re.search(r"general (D|symbols|\(|size)|scalar|closed form|induction|any D", self.sizes):
            kinds.append("symbolically at general size")
        if re.search(r"\d", self.sizes):
            kinds.append("symbolically at given sizes")
        facts = f", {n_f} of {len(self.facts)} facts hold" if self.facts else ""
        return (f"exact sympy ({' and '.join(kinds) or 'symbolically'}; sizes: {self.sizes}): "
                f"{n_id} of {len(self.identities)} identities simplify to exactly 0{facts}")

    def _object_rows(self) -> list[str]:
        rows = []
        for name, obj in self.objects.items():
            tex = D.latex_of(obj)
            rows.append(f"{D.name_tex(name)} &= {tex}" if tex is not None
                        else f"{D.name_tex(name)} &: {D.text(D._summary(obj))}")
        return rows

    def _proof_rows(self):
        ok = self.checked()
        for name in list(self.identities) + list(self.facts):
            expr = self.identities.get(name)
            # identities are differences; most are stored already cancelled to 0
            tex = None if expr is None or D.is_trivial_zero(expr) else D.latex_of(expr, D.MAX_IDENTITY_LATEX)
            yield name, ok[name], tex

    def _repr_latex_(self) -> str:
        lines = [r"&\textbf{" + self.claim.replace("_", r"\_") + r"}\quad " + D.text(self.statement),
                 r"&\textit{Assumptions: }" + D.text(self.assumptions),
                 r"&\textit{Proved: }" + D.text(self.how())]
        lines += self._object_rows()
        for name, ok, tex in self._proof_rows():
            lines.append((r"&\checkmark\ " if ok else r"&\times\ ") + D.text(name)
                         + (rf"\qquad ({tex} = 0)" if tex else ""))
        return "$$\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}$$"

    def _repr_markdown_(self) -> str:
        out = [f"**`{self.claim}`** — {D.md_escape(self.statement)}", "",
               f"*Assumptions:* {D.md_escape(self.assumptions)}", "",
               f"*Proved:* {D.md_escape(self.how())}; the claim's numerical layers (mpmath, numpy) "
               f"run in `claims({self.claim!r})[0].run()`.", ""]
        rows = self._object_rows()
        if rows:
            out += ["$$", "\\begin{aligned}", " \\\\\n".join(rows), "\\end{aligned}", "$$", ""]
        for name, ok, tex in self._proof_rows():
            out.append(f"- {D.mark(ok)} {D.md_escape(name)}" + (f" $\\quad {tex} = 0$" if tex else ""))
        return "\n".join(out) + "\n"


def is_zero(expr) -> bool:
    """Exact zero test: entrywise ``cancel`` then ``simplify`` (sympy's own test idiom)."""
    if isinstance(expr, sp.MatrixBase):
        return all(_scalar_zero(e) for e in expr)
    if isinstance(expr, sp.MatrixExpr):
        e = sp.expand(expr.doit())
        return e == sp.ZeroMatrix(*expr.shape) or e == 0 or sp.simplify(e) == 0 \
            or (hasattr(e, "is_ZeroMatrix") and e.is_ZeroMatrix)
    return _scalar_zero(expr)


def _scalar_zero(e) -> bool:
    """A rational function is zero iff the numerator of its ``together`` form
    expands to the zero polynomial; radicals and other functions fall back to
    ``simplify``."""
    e = sp.sympify(e)
    if e == 0:
        return True
    num = sp.numer(sp.together(e))
    if sp.expand(num) == 0:
        return True
    return sp.simplify(e) == 0


# -- explicit symbolic matrices -----------------------------------------------
def sym_matrix(name: str, rows: int, cols: int, **assumptions) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{i}{j}", real=True, **assumptions))


def sym_vector(name: str, n: int, **assumptions) -> sp.Matrix:
    return sp.Matrix(n, 1, lambda i, _: sp.Symbol(f"{name}_{i}", real=True, **assumptions))


def sym_symmetric(name: str, n: int) -> sp.Matrix:
    """A general symmetric ``n×n`` matrix of real symbols."""
    return sp.Matrix(n, n, lambda i, j: sp.Symbol(f"{name}_{min(i, j)}{max(i, j)}", real=True))


def vec(S: sp.Matrix) -> sp.Matrix:
    """Column-stacking ``vec`` (``vec(S)[j*D + i] = S[i, j]``), as in numerics.kalman."""
    return sp.Matrix([S[i, j] for j in range(S.shape[1]) for i in range(S.shape[0])])


def unvec(x: sp.Matrix, D: int, m: int) -> sp.Matrix:
    return sp.Matrix(D, m, lambda i, j: x[j * D + i])


# -- seeded admissible parameters (exact rationals, so mpf carries all digits) --
class RationalSampler:
    """Random admissible parameters as exact rationals (then ``mpf`` at any precision).

    Floats are never used: every number is ``p/q`` with integers, so a 60-digit
    run is a 60-digit run of *these* inputs.
    """

    def __init__(self, seed: int, denom: int = 1000):
        self.rng = random.Random(seed)
        self.denom = denom

    def uniform(self, lo, hi) -> Fraction:
        lo, hi = Fraction(lo), Fraction(hi)
        return lo + (hi - lo) * Fraction(self.rng.randrange(1, self.denom), self.denom)

    def log_uniform(self, lo, hi) -> Fraction:
        """``lo·(hi/lo)^U`` rounded to a rational with 6 significant digits."""
        import math
        x = float(lo) * (float(hi) / float(lo)) ** self.rng.random()
        e = math.floor(math.log10(x)) - 5
        return Fraction(round(x / 10 ** e)) * Fraction(10) ** e

    def normal_vector(self, n: int) -> list[Fraction]:
        return [Fraction(self.rng.randrange(-999, 1000), 1000) or Fraction(1, 1000) for _ in range(n)]


def mpf(x) -> mp.mpf:
    """An ``mpf`` from an int, a ``Fraction`` or a decimal string (never a float)."""
    if isinstance(x, mp.mpf):
        return x
    if isinstance(x, Fraction):
        return mp.mpf(x.numerator) / x.denominator
    if isinstance(x, float):
        raise TypeError("build mpf from strings, ints or Fractions, not floats")
    return mp.mpf(x)


def mpf_exact(x) -> mp.mpf:
    """Like :func:`mpf`, but a binary float is taken at its exact value (for
    60-digit reruns of float64 inputs, where the input *is* that float)."""
    if isinstance(x, float):
        return mp.mpf(x)
    return mpf(x)


def mp_digits(a, b) -> float:
    """Matching significant digits of ``a`` and ``b`` (inf when equal)."""
    a, b = mpf(a) if not isinstance(a, mp.mpf) else a, mpf(b) if not isinstance(b, mp.mpf) else b
    d = abs(a - b)
    if d == 0:
        return float("inf")
    scale = max(abs(a), abs(b))
    if scale == 0:
        return float("inf")
    return float(-mp.log10(d / scale))


# -- exact rational-function arithmetic -----------------------------------------
class Field:
    """Matrices over the field of rational functions ``QQ(symbols)``.

    sympy expression trees blow up under repeated division (a Kalman step has
    ``1/(r² + kᵀP̄k)`` everywhere); ``DomainMatrix`` over ``QQ.frac_field``
    keeps every entry as a reduced fraction of polynomials, so identities are
    decided exactly and fast.  ``sym(X)`` converts back to a sympy Matrix.
    """

    def __init__(self, *objs):
        syms = set()
        for o in objs:
            syms |= sp.sympify(o).free_symbols if not isinstance(o, sp.MatrixBase) else o.free_symbols
        self.symbols = sorted(syms, key=str)
        self.K = sp.QQ.frac_field(*self.symbols)

    def mat(self, X):
        from sympy.polys.matrices import DomainMatrix
        return DomainMatrix.from_Matrix(sp.Matrix(X)).convert_to(self.K)

    def s(self, x):
        return self.K.from_sympy(sp.sympify(x))

    def eye(self, n):
        from sympy.polys.matrices import DomainMatrix
        return DomainMatrix.eye(n, self.K)

    def zeros(self, r, c):
        from sympy.polys.matrices import DomainMatrix
        return DomainMatrix.zeros((r, c), self.K)

    @staticmethod
    def scalar_of(X):
        """The entry of a ``1×1`` DomainMatrix, as a field element."""
        return X[0, 0].element

    @staticmethod
    def sym(X) -> sp.Matrix:
        return X.to_Matrix()


def to_mp(x):
    """Nested lists of ints / Fractions / strings -> the same nesting of ``mpf``
    (at the current working precision)."""
    if isinstance(x, (list, tuple)):
        return [to_mp(y) for y in x]
    return mpf(x)
