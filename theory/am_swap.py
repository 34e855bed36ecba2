r"""Theorem 1 (the state-swap theorem): proof pieces in sympy / mpmath.

Source: Zhong, Xu, Ao, Shi, *Understanding Transformer from the Perspective of
Associative Memory* (arXiv 2505.19488v1), App. E, Theorem 1, pp.35-40.

Statement.  ``n`` unit keys with ``|k_iᵀk_j| ≤ ε < 1/8`` (``i ≠ j``); a kernel
``κ(x, y) = f(xᵀy)`` where ``f`` maps each ``4ε``-neighbourhood of
``−1, 0, 1, 2`` to that integer; the DeltaFormer with ``κ1 = κ2 = κ`` and write
query = key.  Write ``v_i`` at ``k_i`` (``i = 1 … n``); then every swap of
positions ``a < b`` is a write with key ``k_a − k_b`` and value 0.  After any
number of swaps the read-out at ``k_c`` is ``v_{π(c)}`` for the tracked
permutation ``π``.

Proof, in three pieces checked here.

1. *Idealised system* (orthonormal keys ``e_i``, linear kernel = DeltaNet):
   writing ``e_i ↦ v_i`` from ``S_0 = 0`` gives ``S = V`` (``S_{i−1} e_i = 0``);
   a swap write is ``S ↦ S + (0 − S k) kᵀ = S (I − k kᵀ)`` with ``k = e_a − e_b``,
   and ``I − (e_a − e_b)(e_a − e_b)ᵀ = P_{ab}``, the transposition matrix.  So
   if ``S = V Π`` then the next state is ``V Π P_{ab}``: induction.
   (:func:`induction_step`.)
2. *Error bound*: every inner product the recursion evaluates — written key
   against write query or read query — is ``(±k_a ± k_b)ᵀ(±k_c ± k_d)`` or a
   sub-case; its ideal value (``e``'s in place of ``k``'s) lies in
   ``{−1, 0, 1, 2}`` (``−2`` would need the same pair in both orientations,
   excluded by writing ``a < b``), and the actual value differs by a sum of at
   most four off-diagonal inner products: ``|error| ≤ 4ε``.
   (:func:`inner_product_patterns`.)
3. *Exactness*: the four ``4ε``-neighbourhoods are disjoint and rounding to the
   nearest integer maps each onto its centre iff ``4ε < 1/2``, i.e.
   ``ε < 1/8``.  Then ``f`` returns the ideal Gram values exactly, and as the
   recursion depends on the keys only through these kernel values, its every
   ``u_t`` and read-out equal the idealised system's. (:func:`exactness_condition`.)

Construction (``d = O(log n)``): see :mod:`assocmem.numerics.am_swap`; the
guaranteed dimension of the derandomised construction is
``d = ⌊ln(n(n−1))/KL(ε)⌋ + 1 ≤ (4/ε²) ln n + 1`` (:func:`dimension_bound`).
"""
from __future__ import annotations

from itertools import product

import mpmath as mp
import sympy as sp


def transposition(n: int, a: int, b: int) -> sp.Matrix:
    P = sp.eye(n)
    P[a, a] = P[b, b] = 0
    P[a, b] = P[b, a] = 1
    return P


def induction_step(n: int = 4, m: int = 2) -> list:
    """For symbolic ``S`` (m×n) and every ``a < b``: residuals
    ``S + (0 − S k) kᵀ − S P_ab`` with ``k = e_a − e_b`` (zero matrices), plus
    the base case: delta-rule writes of symbolic values at ``e_1 … e_n`` from
    ``S_0 = 0`` give ``S − V`` (zero)."""
    S = sp.Matrix(m, n, lambda i, j: sp.Symbol(f"s{i}{j}", real=True))
    E = sp.eye(n)
    out = []
    for a in range(n):
        for b in range(a + 1, n):
            k = E[:, a] - E[:, b]
            out.append((S + (sp.zeros(m, 1) - S * k) * k.T - S * transposition(n, a, b)).applyfunc(sp.expand))
    Vm = sp.Matrix(m, n, lambda i, j: sp.Symbol(f"v{i}{j}", real=True))
    S0 = sp.zeros(m, n)
    for i in range(n):
        S0 = S0 + (Vm[:, i] - S0 * E[:, i]) * E[:, i].T
    out.append((S0 - Vm).applyfunc(sp.expand))
    return out


def _key(idx, signs):
    """Formal combination ``Σ sign · k_idx`` as a dict index → coefficient."""
    out: dict = {}
    for i, s in zip(idx, signs):
        out[i] = out.get(i, 0) + s
    return out


def inner_product_patterns(m: int = 4):
    """Enumerate every pair (written key, query) over ``m`` base indices:
    written keys are ``k_i`` or ``k_a − k_b`` (``a < b``); queries are written
    keys (write queries) or ``k_c`` (read queries).  With a symbolic Gram
    ``g_ij = δ_ij + ε_ij`` returns ``(ideal values, max number of ε terms,
    max |coefficient sum|)``: ideal ⊂ {−1, 0, 1, 2}, at most 4 terms of
    coefficient ±1, so the error is at most ``4ε``."""
    eps_sym = {}

    def g(i, j):
        if i == j:
            return sp.Integer(1)
        key = (min(i, j), max(i, j))
        if key not in eps_sym:
            eps_sym[key] = sp.Symbol(f"e{key[0]}{key[1]}", real=True)
        return eps_sym[key]

    keys = [_key((i,), (1,)) for i in range(m)]
    keys += [_key((a, b), (1, -1)) for a in range(m) for b in range(a + 1, m)]
    queries = keys + [_key((c,), (1,)) for c in range(m)]
    ideals, max_terms, max_abs = set(), 0, 0
    for kk, qq in product(keys, queries):
        val = sum(ci * cj * g(i, j) for i, ci in kk.items() for j, cj in qq.items())
        val = sp.expand(val)
        ideal = val.subs({s: 0 for s in eps_sym.values()})
        err = sp.expand(val - ideal)
        coeffs = [err.coeff(s) for s in eps_sym.values() if err.coeff(s) != 0]
        ideals.add(int(ideal))
        max_terms = max(max_terms, len(coeffs))
        max_abs = max(max_abs, sum(abs(c) for c in coeffs))
    return ideals, max_terms, max_abs


def exactness_condition():
    """Sympy: ``{ε > 0 : 4ε < 1/2}`` (disjoint neighbourhoods, each mapped to
    its centre by rounding) is ``0 < ε < 1/8``; returns that solution set."""
    e = sp.Symbol("epsilon", positive=True)
    sol = sp.solve_univariate_inequality(4 * e < sp.Rational(1, 2), e, relational=False)
    return sol.intersect(sp.Interval.open(0, sp.oo))


def kl(eps):
    """``KL(ε) = ((1+ε)/2) ln(1+ε) + ((1−ε)/2) ln(1−ε)`` (sympy or mpmath)."""
    if isinstance(eps, sp.Basic):
        return ((1 + eps) * sp.log(1 + eps) + (1 - eps) * sp.log(1 - eps)) / 2
    e = mp.mpf(eps) if not isinstance(eps, mp.mpf) else eps
    return ((1 + e) * mp.log(1 + e) + (1 - e) * mp.log(1 - e)) / 2


def kl_lower_bound_series():
    """``KL(ε) − ε²/2 = ε⁴/12 + ε⁶/30 + …`` (all coefficients ≥ 0, so
    ``KL(ε) ≥ ε²/2`` on ``[0, 1)``)."""
    e = sp.Symbol("epsilon", positive=True)
    return sp.series(kl(e) - e ** 2 / 2, e, 0, 10).removeO()


def dimension_bound(n: int, eps) -> int:
    """Guaranteed dimension ``⌊ln(n(n−1))/KL(ε)⌋ + 1`` of the derandomised
    construction (mpmath; ``eps`` as a string or rational for exactness)."""
    with mp.workdps(50):
        e = mp.mpf(str(eps)) if not isinstance(eps, mp.mpf) else eps
        return int(mp.floor(mp.log(mp.mpf(n) * (n - 1)) / kl(e))) + 1


def dimension_constant(eps) -> mp.mpf:
    """``2/KL(ε)``: ``d ≈ (2/KL(ε)) ln n`` for large ``n``."""
    with mp.workdps(50):
        e = mp.mpf(str(eps)) if not isinstance(eps, mp.mpf) else eps
        return 2 / kl(e)
