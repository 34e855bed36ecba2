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


def _symbolic_gram():
    """``(g, eps)``: the Gram entries ``g(i, j) = δ_ij + ε_ij`` of near-orthonormal unit keys, with
    the symbols ``ε_ij`` (``i < j``) created on first use and collected in the dict ``eps``."""
    eps_sym = {}

    def g(i, j):
        if i == j:
            return sp.Integer(1)
        key = (min(i, j), max(i, j))
        if key not in eps_sym:
            eps_sym[key] = sp.Symbol(f"e{key[0]}{key[1]}", real=True)
        return eps_sym[key]

    return g, eps_sym


def inner_product_patterns(m: int = 4):
    """Enumerate every pair (written key, query) over ``m`` base indices:
    written keys are ``k_i`` or ``k_a − k_b`` (``a < b``); queries are written
    keys (write queries) or ``k_c`` (read queries).  With a symbolic Gram
    ``g_ij = δ_ij + ε_ij`` returns ``(ideal values, max number of ε terms,
    max |coefficient sum|)``: ideal ⊂ {−1, 0, 1, 2}, at most 4 terms of
    coefficient ±1, so the error is at most ``4ε``."""
    g, eps_sym = _symbolic_gram()

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


# =============================================================================
# The stress test (AM §3.2, Fig. 5: n = 512, d = 128, κ1 = two-decimal rounding)
# =============================================================================
# 4. *Welch bound*: ``n`` unit vectors in ``R^d`` have
#    ``max_{i≠j} (k_iᵀk_j)² ≥ (n − d)/(d(n − 1))``.  With the Gram ``G = KKᵀ``
#    (``n × n``) and the frame operator ``F = KᵀK`` (``d × d``):
#    ``‖G‖_F² = tr(G²) = tr(F²)`` and ``tr(F²) − (tr F)²/d = ‖F − (tr F/d) I‖_F² ≥ 0``,
#    so ``n + Σ_{i≠j} g_ij² = ‖G‖_F² ≥ n²/d``; bounding the ``n(n−1)`` cross terms
#    by ``μ²`` gives the bound.  Equality iff ``F = (n/d) I`` (tight frame) and
#    every ``|g_ij| = μ`` (equiangular).  Corollary: round2 (``round(s, 2)``)
#    returns 0 on a cross overlap only if ``|s| < 0.005``; for ``d = 128`` every
#    ``n > d`` has Welch bound ``≥ 1/d > 0.005``, so on *unit* keys round2 is
#    never the exact kernel (it is ≈ linear: cross overlaps pass through).
# 5. *Scaled keys*: with keys ``c k̂``, ``round(c² x, 2) = rint(100 c² x)/100``;
#    ``c² = 1/100`` turns it into ``rint(x)/100`` and ``β = 100`` into ``rint(x)``:
#    Theorem 1's kernel on the unit keys ``k̂`` (which need ``ε < 1/8``).
# 6. *Structured keys*: ``B`` mutually unbiased bases of ``C^D``, ``D = 4^k``
#    (inner products in ``{±1, ±i}/√D``, a ``Z_4`` Gauss sum), basis ``b`` rotated by
#    ``e^{iπb/(2B)}`` and realified to ``R^{2D}``: coherence ``cos(π/(2B))/√D``;
#    ``D = 64, B = 4``: 512 keys in ``R^128`` at ``cos(π/8)/8 ≈ 0.1155 < 1/8``.
# 7. *Reads*: with the exact ``u``'s the read at ``k_c`` must weight a swap
#    written as ``k_i − k_c`` by ``−1``; a read whose token weights are ``≥ 0``
#    (softmax, any normalisation) fails at the first such swap.
def frame_identities(d_values=(2, 3), shapes=((3, 2), (2, 3))) -> list:
    """Sympy residuals (all zero): for symbolic symmetric ``F`` (``d × d``),
    ``tr(F²) − (tr F)²/d − ‖F − (tr F/d) I‖_F²``; for symbolic ``K``
    (``n × d``), ``tr((KKᵀ)²) − tr((KᵀK)²)``."""
    out = []
    for d in d_values:
        F = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"f{min(i, j)}{max(i, j)}", real=True))
        t = F.trace()
        R = F - t / d * sp.eye(d)
        out.append(sp.expand((F * F).trace() - t ** 2 / d - sum(x ** 2 for x in R)))
    for n, d in shapes:
        K = sp.Matrix(n, d, lambda i, j: sp.Symbol(f"k{i}{j}", real=True))
        out.append(sp.expand(((K * K.T) ** 2).trace() - ((K.T * K) ** 2).trace()))
    return out


def welch_derivation():
    """Sympy: from ``n + n(n−1) μ² ≥ ‖G‖_F² ≥ n²/d`` solve for ``μ²``.

    Returns ``(bound, coefficient, conditions)``: the threshold
    ``(n − d)/(d(n − 1))`` (the root of the linear inequality), the coefficient
    ``n(n − 1)`` of ``μ²`` (positive for ``n ≥ 2``, so ``μ² ≥`` threshold), and the
    assumptions / equality conditions as text."""
    n, d, x = sp.symbols("n d x", positive=True)
    lhs = n + n * (n - 1) * x          # upper bound on ‖G‖_F² with every |g_ij| ≤ μ, x = μ²
    rhs = n ** 2 / d                   # lower bound (tr G)²/d with tr G = n
    root = sp.solve(sp.Eq(lhs, rhs), x)
    assert len(root) == 1
    coeff = sp.diff(lhs, x)
    cond = ("assumptions: unit rows (tr G = n), rank G <= d, n >= 2; "
            "equality iff K^T K = (n/d) I (tight frame) and all |k_i.k_j| equal (equiangular); "
            "the bound is positive iff n > d")
    return sp.factor(root[0]), sp.factor(coeff), cond


def welch_bound_expr():
    n, d = sp.symbols("n d", positive=True)
    return sp.sqrt((n - d) / (d * (n - 1)))


def welch_bound(n: int, d: int, dps: int = 50) -> mp.mpf:
    """``√((n − d)/(d(n − 1)))`` in mpmath (0 for ``n ≤ d``)."""
    if n < 2 or d < 1:
        raise ValueError(f"need n >= 2, d >= 1 (got n={n}, d={d})")
    with mp.workdps(dps):
        if n <= d:
            return mp.mpf(0)
        return +mp.sqrt(mp.mpf(n - d) / (mp.mpf(d) * (n - 1)))


def welch_min_n(d: int, delta="0.005"):
    """Smallest ``n`` whose Welch bound is ``≥ δ`` (then no ``n`` unit keys in
    ``R^d`` have every ``|k_iᵀk_j| < δ``): ``⌈d(1 − δ²)/(1 − dδ²)⌉`` (exact
    rational arithmetic); ``None`` when ``dδ² ≥ 1`` (the bound never reaches δ)."""
    dl = sp.Rational(str(delta))
    dd = sp.Integer(d)
    if dd * dl ** 2 >= 1:
        return None
    n = sp.Symbol("n", positive=True)
    # (n − d)/(d(n − 1)) ≥ δ²  ⟺  n (1 − dδ²) ≥ d (1 − δ²)  (n > 1)
    thr = sp.solve(sp.Eq((n - dd) - dl ** 2 * dd * (n - 1), 0), n)[0]
    return max(int(sp.ceiling(thr)), d + 1)       # the bound is 0 for n <= d (d = 1: thr = 1)


def scaled_rounding(decimals: int = 2):
    """Key scale and β that make ``round(·, decimals)`` the integer rounding:
    ``c = 10^{−decimals/2}``, ``β = 10^{decimals}``.  Returns ``(c, β, residual)``
    with ``residual = β 10^{−p} · (10^p c² x) − x`` (zero: the argument of the
    rounding is the unit-key overlap ``x``, so ``β round(c² x, p) = rint(x)``)."""
    p = sp.Integer(decimals)
    x = sp.Symbol("x", real=True)
    c = sp.Integer(10) ** (-p / 2)
    beta = sp.Integer(10) ** p
    inner = sp.Integer(10) ** p * c ** 2 * x           # what rint sees
    return c, beta, sp.simplify(beta * sp.Integer(10) ** (-p) * inner - x)


def rounding_table(m: int = 4) -> list:
    """Every similarity the stress test evaluates, over ``m`` base indices,
    with the swap keys in either orientation (``±(k_a − k_b)``).

    Pairs: (earlier written key, current written key) for κ1 in the
    u-recursion — ``init.init`` (distinct positions), ``init.swap``,
    ``swap.swap`` (a repeated pair gives ``±2``) — and (written key, read query
    ``k_c``) for the read.  With
    ``g_ij = δ_ij + ε_ij`` each value is ideal + a signed sum of ``ε``'s; rows
    ``(kind, ideal, L1)`` with ``L1`` the largest sum of ``|coefficients|`` (so
    ``|error| ≤ L1 · ε``; rounding returns the ideal iff ``|error| < 1/2``,
    guaranteed by ``ε < 1/(2 L1)``)."""
    g, eps_sym = _symbolic_gram()

    init = [("init", {i: 1}) for i in range(m)]
    swaps = [("swap", {a: 1, b: -1}) for a in range(m) for b in range(m) if a != b]
    written = init + swaps
    reads = [("read", {c: 1}) for c in range(m)]
    rows: dict = {}

    def add(kind, kk, qq):
        val = sp.expand(sum(ci * cj * g(i, j) for i, ci in kk.items() for j, cj in qq.items()))
        ideal = val.subs({s: 0 for s in eps_sym.values()})
        err = sp.expand(val - ideal)
        l1 = sum(abs(err.coeff(s)) for s in eps_sym.values())
        key = (kind, int(ideal))
        rows[key] = max(rows.get(key, 0), int(l1))

    # κ1: (earlier key, current write-query key) in stream order: all init
    # tokens (each position once) precede the swaps, which may repeat a pair
    for (ka, kk), (kb, qq) in product(written, written):
        if (ka, kb) == ("swap", "init") or (ka == kb == "init" and kk == qq):
            continue
        add(f"{ka}.{kb}", kk, qq)
    for (ka, kk), (_, qq) in product(written, reads):
        add(f"{ka}.read", kk, qq)
    return sorted((k, i, l1) for (k, i), l1 in rows.items())


def rounding_margin(eps, d: int, unit_roundoff):
    """Worst-case distance left to the rounding threshold 1/2 when ``s`` is
    computed in floating point: ``1/2 − 4ε − γ_d ‖x‖‖y‖`` with
    ``γ_d = d u/(1 − d u)`` (Higham's dot-product bound) and
    ``‖x‖‖y‖ ≤ 2 + 2ε`` (swap keys ``‖k_a − k_b‖² ≤ 2 + 2ε``), in units of the
    unit-key overlap.  Negative: the worst case is not covered (typical errors
    are ~``√d u``)."""
    with mp.workdps(30):
        e, u = mp.mpf(str(eps)), mp.mpf(str(unit_roundoff))
        gamma = d * u / (1 - d * u)
        return mp.mpf(1) / 2 - 4 * e - gamma * (2 + 2 * e)


def gauss_sum_lemma(m: int = 3):
    """Exact check (sympy Gaussian integers) of the unbiasedness lemma behind
    the structured keys: for every symmetric 0/1 ``S`` (``m × m``) and every
    ``b ∈ GF(2)^m``, ``|Σ_x i^{xᵀSx} (−1)^{bᵀx}|² = 2^m`` when ``S`` is
    nonsingular mod 2 (so two such bases, or one and the standard basis, are
    unbiased), and the sum is ``±2^{m/2}`` or ``±i 2^{m/2}`` for even ``m``
    (``2^{(m−1)/2}(±1 ± i)`` for odd ``m``).  Returns
    ``(number of (S, b) checked, failures)``."""
    xs = list(product((0, 1), repeat=m))
    checked, bad = 0, []
    tri = [(i, j) for i in range(m) for j in range(i, m)]
    for bits in product((0, 1), repeat=len(tri)):
        S = sp.zeros(m, m)
        for (i, j), v in zip(tri, bits):
            S[i, j] = S[j, i] = v
        if S.det() % 2 == 0:                  # det mod 2 = det over GF(2)
            continue
        for b in xs:
            tot = sp.Integer(0)
            for x in xs:
                xv = sp.Matrix(x)
                q = int((xv.T * S * xv)[0]) % 4
                sgn = (-1) ** (sum(bi * xi for bi, xi in zip(b, x)) % 2)
                tot += sgn * sp.I ** q
            checked += 1
            tot = sp.expand(tot)
            re_, im_ = sp.re(tot), sp.im(tot)
            if m % 2 == 0:
                phase_ok = {abs(re_), abs(im_)} == {0, 2 ** (m // 2)}
            else:
                phase_ok = abs(re_) == abs(im_) == 2 ** ((m - 1) // 2)
            if sp.expand(tot * sp.conjugate(tot)) != 2 ** m or not phase_ok:
                bad.append((tuple(S), b))
    return checked, bad


def structured_coherence(D: int, B: int):
    """Exact coherence of ``B`` realified unbiased bases of ``C^D`` with phases
    ``πb/(2B)``: the max of ``|Re(e^{iθ} i^k)|/√D`` over the phase differences
    ``θ = πΔ/(2B)``, ``Δ = 1 … B−1`` and ``k = 0 … 3`` — which is
    ``cos(π/(2B))/√D`` (0 for ``B = 1``).  Returns ``(value, max over the
    enumeration)`` (equal)."""
    if B == 1:
        return sp.Integer(0), sp.Integer(0)
    vals = [sp.Abs(sp.cos(sp.pi * Dl / (2 * B) + k * sp.pi / 2)) for Dl in range(1, B) for k in range(4)]
    best = sp.Max(*[sp.nsimplify(v) for v in vals]) / sp.sqrt(D)
    return sp.cos(sp.pi / (2 * B)) / sp.sqrt(D), sp.simplify(best)


def nonnegative_read_obstruction():
    """Sympy: a read with token weights ``φ ≥ 0`` cannot follow a swap written
    as ``k_i − k_c`` at position ``c``.

    One-hot values, the exact ``u``'s: init tokens ``u = e_{σ(p)}``, the swap
    token ``u_s = −S(k_i − k_c) = e_{σ(c)} − e_{σ(i)}``.  Weights: ``φ_c`` (init
    token of ``c``), ``φ_i`` (init token of ``i``), ``φ_s`` (the swap); a
    common positive normalisation (softmax) does not change the argmax.
    Before the swap position ``c`` must read ``σ(c)``: ``φ_c − φ_i > 0``; after,
    ``σ(i)``: ``(φ_i − φ_s) − (φ_c + φ_s) > 0``.  Their sum is ``−2 φ_s > 0``:
    returns ``(sum, exact-read weights, both margins at them)`` — the sum is
    ``−2φ_s`` (so ``φ_s < 0`` is necessary) and the exact kernel's weights
    ``(1, 0, −1)`` satisfy both with margin 1."""
    pc, pi_, ps = sp.symbols("phi_c phi_i phi_s", real=True)
    before = pc - pi_
    after = (pi_ - ps) - (pc + ps)
    total = sp.expand(before + after)
    w = {pc: 1, pi_: 0, ps: -1}
    return total, w, (before.subs(w), after.subs(w))
