r"""Inverse signal-to-noise ratio of a kernel associative memory, exactly.

Source: Zhong, Xu, Ao, Shi, *Understanding Transformer from the Perspective of
Associative Memory* (arXiv 2505.19488v1), Sec. 2.1, Eqs. 5-10, pp.4-6, and
App. A, pp.26-28.

Model.  ``N`` pairs ``(k_j, v_j)`` are stored in the kernel memory
``o(q) = Σ_j v_j κ(k_j, q)``; keys are i.i.d. ``N(0, I_d)``.  Querying with a
stored key ``q = k_i`` gives the signal ``c v_i`` with ``c = κ(k_i, k_i)`` and
the interference ``r = Σ_{j≠i} v_j κ(k_j, k_i)``.  The paper's figure of merit is

.. math::  \mathrm{SNR}^{-1} = \mathbb E\big[\|r\|^2 / (c^2 \|v_i\|^2)\big].

Two value models, both independent of the keys:

* ``sphere`` (the paper's "values of about equal length", the default): every
  ``v_j`` has the same norm and a uniformly random direction.  Then
  ``E[v_jᵀ v_l] = 0`` for ``j ≠ l`` and the radius cancels, so
  ``SNR⁻¹ = (N−1) F_κ(d)`` with ``F_κ(d) = E[κ(k, k')² / κ(k', k')²]``.
* ``gaussian``: ``v_j ~ N(0, I_{d_v})``.  ``r`` is independent of ``v_i``,
  ``E[‖r‖² | keys] = d_v Σ_j κ_j²`` and ``E[1/‖v_i‖²] = 1/(d_v − 2)``, so
  ``SNR⁻¹ = (N−1) d_v/(d_v − 2) F_κ(d)``, finite only for ``d_v ≥ 3``.

``F_κ(d)`` is derived in two steps, each an exact sympy integral.  (1) Given
``‖k'‖² = u`` the score ``z = kᵀk'`` is ``N(0, u)``, so
``E[κ² | u] / κ(k',k')²`` is a one-dimensional Gaussian integral.  (2) ``u`` is
``χ²_d``; integrating against its density gives

=========  ===========================  ======================================
kernel     exact ``F_κ(d)``             finite iff
=========  ===========================  ======================================
linear     ``1/(d − 2)``                ``d ≥ 3``
ReLU       ``1/(2(d − 2))``             ``d ≥ 3``
exp        ``(1 + 4(τ−1)/τ²)^{−d/2}``   ``τ > 2(√2 − 1) ≈ 0.828`` (any ``d``)
=========  ===========================  ======================================

The paper replaces ``‖k_i‖²`` by ``d`` and ``N − 1`` by ``N``, which gives its
leading orders ``N/d``, ``N/(2d)`` and ``N exp(−2(τ−1)d/τ²)``.  For the
exponential kernel this is not a small change: at ``τ = √d`` the ratio
exact/leading tends to ``e⁴ ≈ 54.6`` as ``d → ∞`` (the fluctuation of ``‖k_i‖²``
is ``O(√d)``, which the exponential does not average out), and at fixed
``τ > 1`` the exact decay rate in ``d`` is ``½ log(1 + 4(τ−1)/τ²)``, not
``2(τ−1)/τ²``, so the ratio grows exponentially in ``d``.

This module is theory: sympy derivations and mpmath evaluations.  It never
imports :mod:`assocmem.numerics`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import mpmath as mp
import sympy as sp

from . import display

KERNELS = ("linear", "relu", "exp")
VALUE_MODELS = ("sphere", "gaussian")

# The exponential kernel's expectation is finite iff τ² + 4τ − 4 > 0 (τ > 0).
TAU_MIN_EXP = "2*(sqrt(2) - 1)"

# sympy symbols shared by the derivations
u = sp.Symbol("u", positive=True)            # ‖k_i‖², a χ²_d variable
z = sp.Symbol("z", real=True)                # the score k_jᵀ k_i given u
d = sp.Symbol("d", positive=True)            # key dimension
N = sp.Symbol("N", positive=True)            # stored pairs
tau = sp.Symbol("tau", positive=True)        # temperature
dv = sp.Symbol("d_v", positive=True)         # value dimension (gaussian model)
b = sp.Symbol("b", positive=True)            # a positive decay rate (helper)


def chi2_density(x, k):
    """Density of ``χ²_k`` at ``x`` (``x > 0``)."""
    return x ** (k / 2 - 1) * sp.exp(-x / 2) / (2 ** (k / 2) * sp.gamma(k / 2))


def _score_and_self(kernel: str):
    """(κ as a function of the score z, κ(k,k) as a function of u = ‖k‖²)."""
    if kernel == "linear":
        return z, u
    if kernel == "relu":
        return sp.Piecewise((z, z > 0), (0, True)), u
    if kernel == "exp":
        return sp.exp(z / tau), sp.exp(u / tau)
    raise ValueError(f"kernel must be one of {', '.join(KERNELS)} (got {kernel!r})")


@dataclass(frozen=True)
class SnrDerivation:
    """Result of the sympy derivation for one kernel.

    ``conditional``: ``E[κ(k,k')² | ‖k'‖² = u] / κ(k',k')²`` (a function of u);
    ``F``: its ``χ²_d`` expectation (closed form, valid where ``condition``);
    ``condition``: where ``F`` is finite, as a sympy relation;
    ``leading``: the paper's leading order (``u → d``, ``N − 1 → N``);
    ``exact_sphere`` / ``exact_gaussian``: ``SNR⁻¹`` under each value model.
    """

    kernel: str
    conditional: sp.Expr
    F: sp.Expr
    condition: sp.Basic
    leading: sp.Expr
    exact_sphere: sp.Expr
    exact_gaussian: sp.Expr

    # -- display in Jupyter (see theory/display.py) ----------------------------
    def _rows(self) -> list[str]:
        L = display.latex_of
        return [r"\frac{\mathbb E[\kappa(k,k')^2 \mid \|k'\|^2 = u]}{\kappa(k',k')^2} &= " + L(self.conditional),
                r"F_\kappa(d) = \mathbb E_{u \sim \chi^2_d}[\,\cdot\,] &= " + L(self.F)
                + r"\qquad \text{finite iff } " + L(self.condition),
                r"\mathrm{SNR}^{-1}_{\text{leading (paper)}} &= " + L(self.leading),
                r"\mathrm{SNR}^{-1}_{\text{exact, equal-norm values}} &= " + L(self.exact_sphere),
                r"\mathrm{SNR}^{-1}_{\text{exact, Gaussian values}} &= " + L(self.exact_gaussian)]

    def how(self) -> str:
        return (f"{self.kernel} kernel, i.i.d. N(0, I_d) keys, values independent of the keys: two exact "
                "sympy integrals at general N, d (score z ~ N(0, u) given u = ‖k'‖², then u ~ χ²_d); "
                "the leading order replaces ‖k_i‖² by d and N − 1 by N")

    def _repr_latex_(self) -> str:
        head = r"&\textbf{am.snr\_" + self.kernel + r"}\quad " + display.text(self.how())
        return "$$\\begin{aligned}\n" + " \\\\\n".join([head] + self._rows()) + "\n\\end{aligned}$$"

    def _repr_markdown_(self) -> str:
        return (f"**`am.snr_{self.kernel}`** — inverse SNR of the {self.kernel} kernel memory, exactly\n\n"
                f"*Proved:* {display.md_escape(self.how())}.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(self._rows()) + "\n\\end{aligned}\n$$\n")


@lru_cache(maxsize=None)
def inverse_chi2_mean():
    """``E[1/χ²_k] = 1/(k − 2)``, finite iff ``k > 2`` (sympy, as a Piecewise)."""
    k = sp.Symbol("k", positive=True)
    res = sp.simplify(sp.integrate(chi2_density(u, k) / u, (u, 0, sp.oo)))
    return k, res


def _first_branch(pw):
    """The closed form and its condition from sympy's Piecewise answer."""
    if isinstance(pw, sp.Piecewise):
        expr, cond = pw.args[0]
        return sp.simplify(expr), cond
    return sp.simplify(pw), sp.true


@lru_cache(maxsize=None)
def derive(kernel: str) -> SnrDerivation:
    """Derive ``F_κ(d)`` and ``SNR⁻¹`` for ``kernel`` by exact integration.

    Step 1 integrates the score ``z ~ N(0, u)``; step 2 integrates
    ``u ~ χ²_d``.  For the exponential kernel the χ² integral is done for a
    positive rate ``b`` (``∫ χ²_d(u) e^{−(b−½)u} du = (2b)^{−d/2}``) and
    ``b = ½ + 2(τ−1)/τ²`` substituted: it is finite exactly when ``b > 0``,
    i.e. ``τ² + 4τ − 4 > 0``; for ``b ≤ 0`` the integrand is at least
    ``χ²_d(u) e^{u/2} ∝ u^{d/2−1}``, whose integral diverges.
    """
    g, cself = _score_and_self(kernel)
    gauss = sp.exp(-z ** 2 / (2 * u)) / sp.sqrt(2 * sp.pi * u)
    m2 = sp.simplify(sp.integrate(g ** 2 * gauss, (z, -sp.oo, sp.oo)))
    conditional = sp.simplify(m2 / cself ** 2)
    if kernel == "exp":
        # conditional = exp(-(2/τ - 2/τ²) u); write the χ² integral with rate b
        rate = sp.simplify(-sp.log(conditional) / u)
        raw = sp.integrate(u ** (d / 2 - 1) * sp.exp(-b * u), (u, 0, sp.oo), conds="none")
        Fb = sp.simplify(raw / (2 ** (d / 2) * sp.gamma(d / 2)))
        F = sp.simplify(Fb.subs(b, sp.Rational(1, 2) + rate))
        condition = sp.Gt(sp.simplify((sp.Rational(1, 2) + rate) * tau ** 2), 0)
    else:
        F, condition = _first_branch(sp.integrate(conditional * chi2_density(u, d), (u, 0, sp.oo)))
    k, inv = inverse_chi2_mean()
    inv_expr, _ = _first_branch(inv)
    leading = sp.simplify(N * conditional.subs(u, d))
    exact_sphere = sp.simplify((N - 1) * F)
    exact_gaussian = sp.simplify((N - 1) * dv * inv_expr.subs(k, dv) * F)
    return SnrDerivation(kernel, conditional, F, condition, leading, exact_sphere, exact_gaussian)


# -- where the expectation is finite -----------------------------------------
def _intlike(name: str, x, minimum: int) -> int:
    """An integer given as int, integral float, string or mpf."""
    try:
        v = mp.mpf(str(x)) if not isinstance(x, mp.mpf) else x
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be an integer >= {minimum} (got {x!r})") from None
    if not mp.isfinite(v) or v != mp.floor(v) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum} (got {x!r})")
    return int(v)


def check_finite(kernel: str, n, dim, tau_=None, values: str = "sphere", dv_=None) -> None:
    """Raise ``ValueError`` naming the parameter when ``SNR⁻¹`` is not finite
    (or the setting is meaningless).  ``tau_`` is the exponential kernel's
    temperature; ``dv_`` the Gaussian values' dimension."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)} (got {kernel!r})")
    if values not in VALUE_MODELS:
        raise ValueError(f"values must be one of {', '.join(VALUE_MODELS)} (got {values!r})")
    n = _intlike("n", n, 1)
    dim = _intlike("d", dim, 1)
    if kernel in ("linear", "relu") and dim <= 2:
        raise ValueError(f"d must be >= 3 for the {kernel} kernel: E[1/||k||^2] diverges for d <= 2 (got d={dim})")
    if kernel == "exp":
        if tau_ is None:
            raise ValueError("tau is required for the exp kernel")
        t = mp.mpf(str(tau_))
        if not mp.isfinite(t) or t <= 0:
            raise ValueError(f"tau must be > 0 (got {tau_!r})")
        if t * t + 4 * t - 4 <= 0:
            raise ValueError(f"tau must exceed 2(sqrt(2)-1) = 0.8284 for the exp kernel: "
                             f"E[exp(2 k.k'/tau - 2|k|^2/tau)] diverges (got tau={tau_})")
    if values == "gaussian":
        if dv_ is None:
            raise ValueError("dv is required for gaussian values")
        dv_ = _intlike("dv", dv_, 1)
        if dv_ <= 2:
            raise ValueError(f"dv must be >= 3 for gaussian values: E[1/||v_i||^2] diverges for dv <= 2 (got dv={dv_})")


def _mpf(x):
    if isinstance(x, mp.mpf):
        return x
    if isinstance(x, float):
        # a binary float is exact; repr keeps the shortest round-trip digits
        return mp.mpf(repr(x))
    return mp.mpf(str(x))


# -- mpmath evaluation of the derived forms -----------------------------------
def inverse_snr_exact(kernel: str, n, dim, tau_=None, values: str = "sphere", dv_=None,
                      dps: int = 60) -> mp.mpf:
    """Exact finite-``N``, finite-``d`` ``SNR⁻¹`` at ``dps`` digits, from :func:`derive`."""
    check_finite(kernel, n, dim, tau_, values, dv_)
    der = derive(kernel)
    expr = der.exact_sphere if values == "sphere" else der.exact_gaussian
    with mp.workdps(dps):
        subs = {N: _mpf(n), d: _mpf(dim)}
        if kernel == "exp":
            subs[tau] = _mpf(tau_)
        if values == "gaussian":
            subs[dv] = _mpf(dv_)
        f = sp.lambdify(list(subs), expr, modules="mpmath")
        return +f(*subs.values())


def inverse_snr_leading(kernel: str, n, dim, tau_=None, dps: int = 60) -> mp.mpf:
    """The paper's leading order (``N/d``, ``N/(2d)``, ``N exp(−2(τ−1)d/τ²)``)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)} (got {kernel!r})")
    with mp.workdps(dps):
        n, dim = _mpf(n), _mpf(dim)
        if kernel == "linear":
            return n / dim
        if kernel == "relu":
            return n / (2 * dim)
        t = _mpf(tau_)
        return n * mp.exp(-2 * (t - 1) * dim / t ** 2)


# -- independent mpmath quadratures of the two reduction steps ---------------
def conditional_by_quadrature(kernel: str, u_, tau_=None, dps: int = 60) -> mp.mpf:
    """Step 1 by quadrature: ``∫ κ(z)² φ_{N(0,u)}(z) dz / κ(k,k)²`` at ``‖k‖² = u``.

    Written from the model (the kernel applied to a Gaussian score), not from
    the closed form; the substitution ``z = √u t`` makes the integrand a
    standard normal density times ``κ(√u t)²``.
    """
    with mp.workdps(dps):
        U = _mpf(u_)
        s = mp.sqrt(U)
        if kernel == "linear":
            kz = lambda t: s * t  # noqa: E731
            cself = U
            pts = [-mp.inf, 0, mp.inf]
        elif kernel == "relu":
            kz = lambda t: s * t if t > 0 else mp.mpf(0)  # noqa: E731
            cself = U
            pts = [-mp.inf, 0, mp.inf]
        else:
            T = _mpf(tau_)
            kz = lambda t: mp.exp(s * t / T)  # noqa: E731
            cself = mp.exp(U / T)
            pts = [-mp.inf, 0, 2 * s / T, mp.inf]   # split at the peak of e^{2st/τ}φ(t)
        val = mp.quad(lambda t: kz(t) ** 2 * mp.npdf(t), pts)
        return val / cself ** 2


def F_by_quadrature(kernel: str, dim, tau_=None, dps: int = 60) -> mp.mpf:
    """Step 2 by quadrature: ``E_{u~χ²_d}[conditional(u)]`` with the conditional
    taken from the sympy derivation (step 1 is checked separately).

    ``u = w²`` removes the ``u^{d/2−2}`` endpoint singularity of small ``d``.
    """
    der = derive(kernel)
    with mp.workdps(dps + 10):
        D = _mpf(dim)
        subs = {d: D}
        if kernel == "exp":
            subs[tau] = _mpf(tau_)
        cond = sp.lambdify([u] + list(subs), der.conditional, modules="mpmath")
        norm = 2 ** (D / 2) * mp.gamma(D / 2)

        def integrand(w):
            if w == 0:        # tanh-sinh never samples the endpoint itself
                return mp.mpf(0)
            uu = w * w
            return 2 * w * cond(uu, *subs.values()) * uu ** (D / 2 - 1) * mp.exp(-uu / 2) / norm

        peak = mp.sqrt(D)
        val = mp.quad(integrand, [0, peak / 2, peak, 2 * peak, mp.inf])
    with mp.workdps(dps):
        return +val


def inverse_chi2_by_quadrature(k, dps: int = 60) -> mp.mpf:
    """``E[1/χ²_k]`` by quadrature (``u = w²`` substitution)."""
    with mp.workdps(dps + 10):
        K = _mpf(k)
        norm = 2 ** (K / 2) * mp.gamma(K / 2)
        f = lambda w: 2 * w * w ** (K - 4) * mp.exp(-w * w / 2) / norm if w != 0 else mp.mpf(0)  # noqa: E731
        val = mp.quad(f, [0, 1, mp.sqrt(K), mp.inf])
    with mp.workdps(dps):
        return +val


# -- the exponential kernel at τ = √d -----------------------------------------
def exp_ratio_exact_over_leading(dim, tau_=None, n=None, dps: int = 60) -> mp.mpf:
    """``exact/leading`` for the exponential kernel (sphere values).

    With ``s = 2(τ−1)/τ²`` it equals ``((N−1)/N) exp(d s − (d/2) log(1 + 2s))``;
    ``n=None`` drops the ``(N−1)/N`` factor (the ``N → ∞`` ratio).
    ``tau_=None`` means ``τ = √d``.
    """
    with mp.workdps(dps):
        D = _mpf(dim)
        T = mp.sqrt(D) if tau_ is None else _mpf(tau_)
        s = 2 * (T - 1) / T ** 2
        r = mp.exp(D * s - D / 2 * mp.log(1 + 2 * s))
        if n is not None:
            r *= (_mpf(n) - 1) / _mpf(n)
        return r


@lru_cache(maxsize=None)
def exp_sqrt_d_asymptotics():
    """Sympy: at ``τ = √d`` (``x = √d``),
    ``log F = −(x²/2) log(1 + 4/x − 4/x²) = −2x + 6 − 56/(3x) + O(x⁻²)`` while the
    printed form has ``log F_lead = −2x + 2``; the ratio exact/leading → ``e⁴``.

    Returns ``(series_of_log_F, limit_of_log_ratio)``.
    """
    x = sp.Symbol("x", positive=True)
    logF = -(x ** 2 / 2) * sp.log(1 + 4 / x - 4 / x ** 2)
    ser = sp.series(logF, x, sp.oo, 3).removeO()
    lim = sp.limit(logF - (-2 * x + 2), x, sp.oo)
    return ser, lim


def exp_ratio_curve(dims, dps: int = 30):
    """Data for the figure "exact/leading ratio vs d at τ = √d": a list of floats."""
    return [float(exp_ratio_exact_over_leading(dd, dps=dps)) for dd in dims]


def inverse_snr_curve(kernel: str, dim, ns, tau_=None, values: str = "sphere", dv_=None):
    """Data for the figure "inverse SNR vs N/d": ``(leading, exact)`` float lists."""
    lead = [float(inverse_snr_leading(kernel, n, dim, tau_, dps=30)) for n in ns]
    ex = [float(inverse_snr_exact(kernel, n, dim, tau_, values, dv_, dps=30)) for n in ns]
    return lead, ex


# -- scaling: the dimension that holds SNR⁻¹ at a target ----------------------
def dimension_for_target(kernel: str, n, target, form: str = "exact", dps: int = 50) -> mp.mpf:
    """Real ``d`` solving ``SNR⁻¹(N, d) = target`` (sphere values; ``τ = √d`` for exp).

    ``form`` is ``"exact"`` or ``"leading"``.  Linear/ReLU are solved in closed
    form (``d = 2 + (N−1)/target`` resp. ``2 + (N−1)/(2 target)``); the
    exponential kernel by bisection in ``x = √d`` on ``x ≥ 1``, where both forms
    decrease in ``x`` (``F = 1`` at ``x = 1``).
    """
    with mp.workdps(dps):
        n, c = _mpf(n), _mpf(target)
        if kernel == "linear":
            return (2 + (n - 1) / c) if form == "exact" else n / c
        if kernel == "relu":
            return (2 + (n - 1) / (2 * c)) if form == "exact" else n / (2 * c)
        if kernel != "exp":
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)} (got {kernel!r})")
        if form == "leading":
            # N exp(−2(x − 1)) = c
            x = 1 + mp.log(n / c) / 2
            return x * x
        logF = lambda x: -(x * x / 2) * mp.log(1 + 4 / x - 4 / (x * x))  # noqa: E731
        goal = mp.log(c / (n - 1))
        if goal >= 0:
            return mp.mpf(1)
        lo, hi = mp.mpf(1), mp.mpf(2)
        while logF(hi) > goal:
            hi *= 2
        for _ in range(int(dps * 3.5) + 20):
            mid = (lo + hi) / 2
            if logF(mid) > goal:
                lo = mid
            else:
                hi = mid
        return ((lo + hi) / 2) ** 2
