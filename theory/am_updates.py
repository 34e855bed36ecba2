r"""Update rules as gradient steps, Softmax attention as a normalised memory, and
the DeltaNet least-squares fixed point (sympy).

Source: Zhong, Xu, Ao, Shi, *Understanding Transformer from the Perspective of
Associative Memory* (arXiv 2505.19488v1): Eq. 35, p.10 and App. B.1, p.29
(gradient-step view); Table 2, p.11, Sec. 2.2.2, pp.16-17 and App. F (Softmax
as a normalised memory); Sec. 2.2.2 and App. B.2, pp.30-31 (DeltaNet fixed
point).  States are ``S ∈ R^{d_v × d_k}`` read as ``S q``.

**Gradient steps** (``am.gd_objective``).  The update ``S ↦ A S B + C`` is one
unit gradient step ``S − ∇L(S)`` of a scalar objective ``L`` (depending on
``A, B, C`` only) iff the field ``G(S) = S − A S B − C`` is a gradient, i.e. iff
its Jacobian on ``vec S``, ``J = I − Bᵀ ⊗ A``, is symmetric.  Splitting
``A = A_s + A_a``, ``B = B_s + B_a`` into symmetric and antisymmetric parts,

.. math::  J − Jᵀ = −2\,(B_s ⊗ A_a − B_a ⊗ A_s).

A Kronecker identity ``X ⊗ Y = Z ⊗ W`` between a symmetric-by-antisymmetric
and an antisymmetric-by-symmetric product forces both to vanish (nonzero
``X ⊗ Y = Z ⊗ W`` makes ``X ∝ Z``, and a nonzero matrix cannot be both
symmetric and antisymmetric), so ``J`` is symmetric iff ``(A_a = 0 or B_s = 0)``
and ``(A_s = 0 or B_a = 0)``: **A and B both symmetric, or both antisymmetric**
(or one of them zero).  Then ``L(S) = ½‖S‖² − ½ tr(Sᵀ A S B) − ⟨C, S⟩``.  The
sufficiency the paper states holds; "no objective unless A and B are
symmetric" is false as stated (two antisymmetric factors also give one).
(Without the restriction that ``L`` not depend on ``S_{t−1}``, the question is
empty: ``L(S) = ⟨S_{t−1} − S_t, S⟩`` always works.)

**Softmax as a normalised memory** (``am.softmax_memory``).  With
``S_t = (1/t) Σ_{i≤t} v_i φ(k_i)ᵀ`` the recursion
``S_t = ((t−1)/t) S_{t−1} + (1/t) v_t φ(k_t)ᵀ`` is exact; the Softmax read-out is
``S_t φ(q) / z_t(q)`` with ``z_t(q) = (1/t) Σ_i κ(k_i, q)``, and the
approximation is to replace ``z_t(q)`` by ``μ(q) = E_k κ(k, q)``.  For Gaussian
keys ``N(0, I)`` and ``κ = exp(kᵀq/τ)``,
``E[(z_t/μ − 1)²] = (exp(‖q‖²/τ²) − 1)/t`` exactly: the error is
``O(t^{−1/2})``, not ``O(1/t)``.  The weight left on ``S_{t0}`` after steps
``t0+1 … T`` is ``Π (1 − 1/t) = t0/T → 0`` (``Σ 1/t = ∞``): a step that tends to
zero does not stop adaptation; a summable step (``1/t²``) would, leaving
``Π (1 − 1/t²) → t0/(t0+1)``.

**DeltaNet fixed point** (``am.deltanet_fixed_point``).  Inputs ``x`` with
covariance ``Σ ≻ 0``, ``k = W_k x``, ``v = W_v x``.  The expected loss
``E‖S k − v‖² = tr((S W_k − W_v) Σ (S W_k − W_v)ᵀ)`` is minimised by
``S* = W_v Σ W_kᵀ (W_k Σ W_kᵀ)^{−1}``; for square invertible ``W_k`` this is
``W_v W_k^{−1}`` whatever ``Σ``; for a low-rank (multi-head) ``W_k`` it depends
on ``Σ``.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp


# -- helpers -------------------------------------------------------------------
def _mat(name: str, r: int, c: int) -> sp.Matrix:
    return sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{name}{i}{j}", real=True))


def _sym(name: str, n: int) -> sp.Matrix:
    return sp.Matrix(n, n, lambda i, j: sp.Symbol(f"{name}{min(i, j)}{max(i, j)}", real=True))


def _antisym(name: str, n: int) -> sp.Matrix:
    def e(i, j):
        if i == j:
            return sp.Integer(0)
        s = sp.Symbol(f"{name}{min(i, j)}{max(i, j)}", real=True)
        return s if i < j else -s
    return sp.Matrix(n, n, e)


def vec(M: sp.Matrix) -> sp.Matrix:
    """Column-stacking ``vec`` (so ``vec(A S B) = (Bᵀ ⊗ A) vec S``)."""
    return sp.Matrix([M[i, j] for j in range(M.cols) for i in range(M.rows)])


def field_jacobian(A: sp.Matrix, B: sp.Matrix, C: sp.Matrix, S: sp.Matrix) -> sp.Matrix:
    """Jacobian of ``vec(S − A S B − C)`` with respect to ``vec S``."""
    G = S - A * S * B - C
    return vec(G).jacobian(vec(S))


def quadratic_objective(A, B, C, S):
    """``L(S) = ½‖S‖²_F − ½ tr(Sᵀ A S B) − tr(Cᵀ S)``."""
    return (sp.Rational(1, 2) * (S.T * S).trace() - sp.Rational(1, 2) * (S.T * A * S * B).trace()
            - (C.T * S).trace())


def gradient(L, S: sp.Matrix) -> sp.Matrix:
    return S.applyfunc(lambda s: sp.diff(L, s))


# -- am.gd_objective -----------------------------------------------------------
def jacobian_asymmetry_identity(m: int, n: int) -> sp.Matrix:
    """``(J − Jᵀ) + 2 (B_s ⊗ A_a − B_a ⊗ A_s)`` for fully symbolic ``A`` (m×m),
    ``B`` (n×n); must be the zero matrix."""
    from sympy.physics.quantum import TensorProduct as kron

    A, B = _mat("a", m, m), _mat("b", n, n)
    S, C = _mat("s", m, n), _mat("c", m, n)
    J = field_jacobian(A, B, C, S)
    As, Aa = (A + A.T) / 2, (A - A.T) / 2
    Bs, Ba = (B + B.T) / 2, (B - B.T) / 2
    return (J - J.T + 2 * (kron(Bs, Aa) - kron(Ba, As))).applyfunc(sp.expand)


def objective_residual(m: int, n: int, kind: str) -> sp.Matrix:
    """``S − ∇L(S) − (A S B + C)`` for ``L`` = :func:`quadratic_objective` with
    ``A, B`` both ``symmetric`` or both ``antisymmetric`` (zero matrix)."""
    make = _sym if kind == "symmetric" else _antisym
    A, B = make("a", m), make("b", n)
    S, C = _mat("s", m, n), _mat("c", m, n)
    L = quadratic_objective(A, B, C, S)
    return (S - gradient(L, S) - (A * S * B + C)).applyfunc(sp.expand)


def nonsymmetric_counterexample():
    """``A = I``, ``B = [[1, 1], [0, 1]]`` on ``S ∈ R^{1×2}``: the circulation of
    ``G(S) = S − A S B`` around the unit square in the ``(s0, s1)`` plane is
    nonzero, so ``G`` is no gradient (returns the circulation and ``J − Jᵀ``)."""
    A = sp.eye(1)
    B = sp.Matrix([[1, 1], [0, 1]])
    s0, s1, t = sp.symbols("s0 s1 t", real=True)
    S = sp.Matrix([[s0, s1]])
    G = S - A * S * B
    J = field_jacobian(A, B, sp.zeros(1, 2), S)
    path = [((t, 0), (1, 0)), ((1, t), (0, 1)), ((1 - t, 1), (-1, 0)), ((0, 1 - t), (0, -1))]
    circ = 0
    for (x, y), (dx, dy) in path:
        g = G.subs({s0: x, s1: y})
        circ += sp.integrate(g[0] * dx + g[1] * dy, (t, 0, 1))
    return sp.simplify(circ), J - J.T


def deltanet_step_residual(dv: int = 2, dk: int = 3) -> sp.Matrix:
    """DeltaNet is one unit step on ``½‖S k − v‖²``:
    ``S − ∇ − (S + (v − S k) kᵀ)`` (zero); also ``B = I − k kᵀ`` is symmetric."""
    S = _mat("s", dv, dk)
    k, v = _mat("k", dk, 1), _mat("v", dv, 1)
    r = S * k - v
    L = sp.Rational(1, 2) * (r.T * r)[0, 0]
    return (S - gradient(L, S) - (S + (v - S * k) * k.T)).applyfunc(sp.expand)


def linear_attention_unbounded():
    """Linear attention ``S + v kᵀ`` is the unit step on ``L(S) = −vᵀ S k``;
    along ``S = λ v kᵀ``, ``L = −λ ‖v‖²‖k‖² → −∞``.  Returns
    ``(step residual, limit of L as λ → ∞ for v = k = e_1)``."""
    S = _mat("s", 2, 2)
    k, v = _mat("k", 2, 1), _mat("v", 2, 1)
    L = -(v.T * S * k)[0, 0]
    resid = (S - gradient(L, S) - (S + v * k.T)).applyfunc(sp.expand)
    lam = sp.Symbol("lam", positive=True)
    e1 = sp.Matrix([1, 0])
    Lline = -(e1.T * (lam * e1 * e1.T) * e1)[0, 0]
    return resid, sp.limit(Lline, lam, sp.oo)


def gated_linear_attention_objective(dk: int = 3):
    """GLA ``S diag(λ) + v kᵀ``: ``B = diag(λ)`` is symmetric, so the quadratic
    objective works; it is ``½ Σ_j (1 − λ_j) ‖S_{:,j}‖² − vᵀ S k``, bounded
    below iff every ``λ_j < 1`` where ``k_j ≠ 0``.  Returns the step residual."""
    lam = sp.symbols(f"l0:{dk}", real=True)
    B = sp.diag(*lam)
    S = _mat("s", 2, dk)
    k, v = _mat("k", dk, 1), _mat("v", 2, 1)
    C = v * k.T
    L = quadratic_objective(sp.eye(2), B, C, S)
    return (S - gradient(L, S) - (S * B + C)).applyfunc(sp.expand)


# -- am.softmax_memory ---------------------------------------------------------
def running_mean_residuals(tmax: int = 8) -> list:
    """``S_t − (((t−1)/t) S_{t−1} + X_t/t)`` with ``S_t`` the mean of ``t``
    symbols, for ``t = 2 … tmax`` (each must be exactly 0)."""
    X = sp.symbols(f"x1:{tmax + 1}")
    out = []
    for t in range(2, tmax + 1):
        St = sum(X[:t]) / t
        Sp = sum(X[:t - 1]) / (t - 1)
        out.append(sp.simplify(St - (sp.Rational(t - 1, t) * Sp + X[t - 1] / t)))
    return out


@lru_cache(maxsize=None)
def exp_denominator_moments():
    """For ``k ~ N(0, I)`` and ``κ = exp(kᵀq/τ)`` (score ``z ~ N(0, ‖q‖²)``):
    ``μ = E κ = e^{‖q‖²/(2τ²)}``, ``E κ² = e^{2‖q‖²/τ²}`` and the relative mean
    square error of the empirical denominator after ``t`` keys,
    ``E[(z_t/μ − 1)²] = (e^{‖q‖²/τ²} − 1)/t``.  Returns ``(q2, tau, t, mu,
    second, rel_mse)``."""
    q2, tau, t = sp.symbols("q2 tau t", positive=True)
    z = sp.Symbol("z", real=True)
    dens = sp.exp(-z ** 2 / (2 * q2)) / sp.sqrt(2 * sp.pi * q2)
    mu = sp.simplify(sp.integrate(sp.exp(z / tau) * dens, (z, -sp.oo, sp.oo)))
    second = sp.simplify(sp.integrate(sp.exp(2 * z / tau) * dens, (z, -sp.oo, sp.oo)))
    # z_t is a mean of t i.i.d. copies: Var(z_t) = (E κ² − μ²)/t
    rel = sp.simplify((second - mu ** 2) / (t * mu ** 2))
    return q2, tau, t, mu, second, rel


def carry_over_weight(t0, T, step: str = "1/t"):
    """Weight ``Π_{t=t0+1}^{T} (1 − η_t)`` left on ``S_{t0}`` (sympy product)."""
    t = sp.Symbol("t", positive=True, integer=True)
    eta = 1 / t if step == "1/t" else 1 / t ** 2
    return sp.simplify(sp.product(1 - eta, (t, t0 + 1, T)))


def harmonic_divergence():
    """``Σ_{t≥1} 1/t = ∞`` and ``Σ 1/t² = π²/6`` (sympy)."""
    t = sp.Symbol("t", positive=True, integer=True)
    return sp.summation(1 / t, (t, 1, sp.oo)), sp.summation(1 / t ** 2, (t, 1, sp.oo))


# -- am.deltanet_fixed_point ---------------------------------------------------
def ls_optimum(Wk: sp.Matrix, Wv: sp.Matrix, Sigma: sp.Matrix) -> sp.Matrix:
    """``S* = W_v Σ W_kᵀ (W_k Σ W_kᵀ)^{−1}``: the minimiser of ``E‖S W_k x − W_v x‖²``
    for ``x`` with covariance ``Σ`` (normal equations of the expected loss)."""
    return Wv * Sigma * Wk.T * (Wk * Sigma * Wk.T).inv()


def expected_loss(S, Wk, Wv, Sigma):
    R = S * Wk - Wv
    return (R * Sigma * R.T).trace()


def fixed_point_square_residuals(D: int = 2, m: int = 2):
    """Square symbolic ``W_k`` (D×D), symbolic ``W_v`` (m×D) and a symbolic
    symmetric ``Σ``.  Returns three expressions that must vanish:

    * the normal equations ``S W_k Σ W_kᵀ − W_v Σ W_kᵀ`` at ``S = W_v W_k^{-1}``;
    * the gradient of the expected loss there;
    * ``det(W_k Σ W_kᵀ) − det(W_k)² det Σ`` (so the normal matrix is invertible,
      and the stationary point unique, whenever ``W_k`` is invertible and
      ``Σ ≻ 0``; the loss is then strictly convex in ``S``).
    """
    Wk, Wv = _mat("w", D, D), _mat("v", m, D)
    Sigma = _sym("c", D)
    S0 = (Wv * Wk.adjugate()) / Wk.det()
    normal = (S0 * Wk * Sigma * Wk.T - Wv * Sigma * Wk.T).applyfunc(sp.cancel)
    S = _mat("s", m, D)
    grad = gradient(expected_loss(S, Wk, Wv, Sigma), S)
    g0 = grad.subs(dict(zip(S, S0))).applyfunc(sp.cancel)
    det = sp.expand((Wk * Sigma * Wk.T).det() - Wk.det() ** 2 * Sigma.det())
    return normal, g0, det


def fixed_point_low_rank_example():
    """One head of dimension 1 reading ``x ∈ R²``: ``W_k = [1, 0]``,
    ``W_v = [0, 1]``; ``S* = Σ_12/Σ_11`` depends on the input covariance.
    Returns ``(S* as a function of Σ symbols, S* at Σ = I, S* at Σ = [[1, .8],
    [.8, 1]])``."""
    Wk, Wv = sp.Matrix([[1, 0]]), sp.Matrix([[0, 1]])
    Sigma = _sym("c", 2)
    s_star = sp.simplify(ls_optimum(Wk, Wv, Sigma)[0, 0])
    at_I = s_star.subs({Sigma[0, 0]: 1, Sigma[0, 1]: 0, Sigma[1, 1]: 1})
    at_corr = s_star.subs({Sigma[0, 0]: 1, Sigma[0, 1]: sp.Rational(4, 5), Sigma[1, 1]: 1})
    return s_star, at_I, at_corr
