r"""The BL posterior in Kronecker / vec form (BL Prop. 1, Eqs. 9-13, p.4; App. B, C).

Design model (BL Def. 1, pp.3-4): :math:`S_t = A_t S_{t-1} + W_t`,
:math:`\operatorname{vec} W_t \sim N(0, \ell_t^2 I_{Dm})`,
:math:`v_t = S_t^\top k_t + e_t`, :math:`e_t \sim N(0, r_t^2 I_m)`,
prior :math:`\operatorname{vec} S_0 \sim N(\operatorname{vec} M_0, I_m \otimes P_0)`.
In vec form (column stacking) the transition is :math:`I_m \otimes A_t`, the
observation matrix :math:`H_t = I_m \otimes k_t^\top` and the noises
:math:`\ell_t^2 I_{Dm}`, :math:`r_t^2 I_m`: a linear-Gaussian state-space model,
whose exact posterior is the Kalman filter on ``vec S`` (one Kalman step *is*
Gaussian conditioning of the joint of ``(vec S_t, v_t)``; the Markov structure
carries it over steps).  The claim is that this ``Dm×Dm`` filter collapses to
the five-step recurrence

.. math::

    \bar P = A P A^\top + \ell^2 I,\ u = \bar P k,\ \beta = (r^2 + k^\top u)^{-1},\
    M^+ = A M + \beta u (v - (AM)^\top k)^\top,\ P^+ = \bar P - \beta u u^\top .

What is proved here, and at which sizes:

* :func:`kronecker_lemmas` -- the Kronecker/vec rules used below, checked with
  fully symbolic entries at explicit sizes (mixed product, transpose, sums,
  scalar identities, ``(I_m ⊗ X) vec Y = vec(XY)``, ``(I_m ⊗ u) δ = vec(u δᵀ)``).
* :func:`posterior_general` -- the Kalman step for *general* ``D, m`` in an algebra
  of matrices of the form ``I_m ⊗ X`` (``X`` a sympy ``MatrixSymbol`` expression
  in symbolic dimension ``D``), built from those rules; the remaining
  ``D×D``-level identities are checked by sympy's matrix-expression algebra.
* :func:`posterior_explicit` -- fully symbolic entries at small ``D, m``:
  the Kalman update on ``vec S`` with ``sympy.kronecker_product`` against the
  five-step recurrence, entry by entry.
* :func:`conditioning_two_steps` -- no Kalman filter at all: the posterior of
  ``S_2`` given ``v_1, v_2`` by conditioning the joint Gaussian (symbolic,
  ``D = 2, m = 1``) equals two recurrence steps.
* :func:`joint_posterior_mp` -- the same conditioning in mpmath, any sizes, for
  the high-precision comparison with the recurrence iterated in mpmath.

Also here: Kronecker closure and its failure with per-column noise
(:func:`kronecker_failure`), the gated form (:func:`gated_form`), the gain bound
(:func:`gain_bound`) and the read-out covariance (:func:`readout_covariance`).
"""
from __future__ import annotations

import mpmath as mp
import sympy as sp
from sympy import Identity, MatrixSymbol
from sympy.matrices.expressions.matexpr import MatrixExpr

from .bl_common import Derivation, Field, mpf, sym_matrix, sym_symmetric, sym_vector, unvec, vec

# ----------------------------------------------------------------------------
# Kronecker rules at explicit sizes
# ----------------------------------------------------------------------------


def kronecker_lemmas(sizes=((2, 2), (3, 2), (2, 3))) -> Derivation:
    """The rules of the ``I_m ⊗ X`` algebra, with symbolic entries at each ``(D, m)``.

    L1 ``(I⊗X)(I⊗Y) = I⊗XY``;  L2 ``(I⊗X)ᵀ = I⊗Xᵀ``;  L3 ``I⊗X + I⊗Y = I⊗(X+Y)``;
    L4 ``c I_{Dm} = I_m ⊗ c I_D``;  L5 ``I_m ⊗ s = s I_m`` for ``1×1`` ``s``;
    L6 ``(I_m⊗X) vec Y = vec(XY)``;  L7 ``(I_m⊗u) δ = vec(u δᵀ)`` (``u`` a column, ``δ ∈ R^m``);
    L8 ``(I_m⊗X)^{-1} = I_m⊗X^{-1}``.
    """
    ids = {}
    c = sp.Symbol("c")
    for D, m in sizes:
        Im = sp.eye(m)
        X, Y = sym_matrix("X", D, D), sym_matrix("Y", D, D)
        Ym = sym_matrix("Z", D, m)
        u, d = sym_vector("u", D), sym_vector("d", m)
        s = sp.Symbol("s")
        kp = sp.kronecker_product
        tag = f"D={D},m={m}"
        ids[f"L1 mixed product ({tag})"] = kp(Im, X) * kp(Im, Y) - kp(Im, X * Y)
        ids[f"L2 transpose ({tag})"] = kp(Im, X).T - kp(Im, X.T)
        ids[f"L3 sum ({tag})"] = kp(Im, X) + kp(Im, Y) - kp(Im, X + Y)
        ids[f"L4 scalar identity ({tag})"] = c * sp.eye(D * m) - kp(Im, c * sp.eye(D))
        ids[f"L5 1x1 factor ({tag})"] = kp(Im, sp.Matrix([[s]])) - s * Im
        ids[f"L6 vec rule ({tag})"] = kp(Im, X) * vec(Ym) - vec(X * Ym)
        ids[f"L7 outer-product vec ({tag})"] = kp(Im, u) * d - vec(u * d.T)
    # L8 on the smallest size only (symbolic 2x2 inverse)
    X2 = sym_matrix("X", 2, 2)
    ids["L8 inverse (D=2,m=2)"] = (sp.kronecker_product(sp.eye(2), X2).inv()
                                   - sp.kronecker_product(sp.eye(2), X2.inv()))
    return Derivation(
        claim="bl.posterior",
        statement="Kronecker/vec rules for matrices of the form I_m ⊗ X",
        assumptions="X, Y square D×D, u ∈ R^D, δ ∈ R^m; L8 needs X invertible",
        identities=ids,
        sizes=", ".join(f"(D={D}, m={m})" for D, m in sizes) + "; L8 at (2, 2)",
    )


# ----------------------------------------------------------------------------
# General sizes: the algebra of I_m ⊗ X
# ----------------------------------------------------------------------------


class KronI:
    """``I_m ⊗ X`` with ``X`` a matrix expression in symbolic dimensions.

    Only the rules of :func:`kronecker_lemmas` are used: products, transposes,
    sums and scalar multiples act on ``X`` alone.  (sympy's own
    ``combine_kronecker`` is not used: in sympy 1.14 it rewrites
    ``I⊗A + I⊗P`` to ``2·(I⊗(A+P))``, which is wrong.)
    """

    def __init__(self, X):
        self.X = X

    def __mul__(self, other):
        if isinstance(other, KronI):
            return KronI(self.X * other.X)           # L1
        return KronI(self.X * other)                 # scalar

    __rmul__ = __mul__

    def __add__(self, other):
        return KronI(self.X + other.X)               # L3

    def __sub__(self, other):
        return KronI(self.X - other.X)

    @property
    def T(self):
        return KronI(self.X.T)                       # L2

    def __repr__(self):
        return f"I_m ⊗ ({self.X})"


def _mexpand(e, subs=None):
    """Canonical form of a matrix expression: expand products over sums, then
    apply ``subs`` (e.g. ``Pᵀ → P``) until nothing changes."""
    for _ in range(5):
        new = sp.expand(e.doit()) if isinstance(e, MatrixExpr) else sp.expand(e)
        if subs:
            new = new.subs(subs)
        if new == e:
            break
        e = new
    return e


def posterior_general() -> Derivation:
    """The Kalman step on ``vec S`` equals the five-step recurrence, general ``D, m``.

    Every ``Dm×Dm`` (or ``m×m``, ``Dm×m``) Kalman quantity is written as
    ``I_m ⊗ X`` with the rules L1-L8; the ``D``-level identities left are
    MatrixSymbol identities (``P`` symmetric is imposed by substituting
    ``Pᵀ → P``).  The ``1×1`` quantity ``kᵀ P̄ k`` becomes the scalar ``s``
    (rule L5), so the innovation covariance is ``(r² + s) I_m = β^{-1} I_m``.
    """
    D, m = sp.symbols("D m", integer=True, positive=True)
    A, P, M = MatrixSymbol("A", D, D), MatrixSymbol("P", D, D), MatrixSymbol("M", D, m)
    k, v = MatrixSymbol("k", D, 1), MatrixSymbol("v", m, 1)
    l2, r2, s = sp.symbols("ell2 r2 s", positive=True)
    ID, I1 = Identity(D), Identity(1)
    beta = 1 / (r2 + s)

    sym = {P.T: P}
    # -- Kalman quantities in the I_m ⊗ X algebra -----------------------------
    Sigma = KronI(P)                                  # prior I_m ⊗ P
    F = KronI(A)                                      # transition I_m ⊗ A
    Q = KronI(l2 * ID)                                # ℓ² I_{Dm} = I_m ⊗ ℓ² I_D  (L4)
    H = KronI(k.T)                                    # observation I_m ⊗ kᵀ
    Sigma_bar = F * Sigma * F.T + Q                   # L1, L2, L3
    Pbar = A * P * A.T + l2 * ID                      # recurrence step 1
    # innovation covariance H Σ̄ Hᵀ + r² I_m = I_m ⊗ (kᵀ P̄ k) + r² I_m; kᵀP̄k ≡ s (1×1, L5)
    S_inner_1x1 = (H * Sigma_bar * H.T).X             # the 1x1 matrix kᵀ P̄ k
    S_inv = KronI(beta * I1)                          # ((r²+s) I_m)^{-1} = I_m ⊗ β   (L5, L8)
    K = Sigma_bar * H.T * S_inv                       # Kalman gain, Dm × m
    u = Pbar * k                                      # recurrence step 2
    # mean: vec M⁺ = F vec M + K (v − H F vec M); with L6, F vec M = vec(AM),
    # H vec(AM) = vec(kᵀ A M) = (AM)ᵀ k, and L7: (I_m ⊗ w) δ = vec(w δᵀ).
    delta = v - (A * M).T * k
    K_col = K.X                                       # K = I_m ⊗ K_col (a D×1 column)
    mean_kalman = A * M + K_col * delta.T             # unvec of F vec M + (I_m ⊗ K_col) δ
    mean_recurrence = A * M + beta * u * delta.T      # recurrence step 4
    # covariance: Σ⁺ = Σ̄ − K (H Σ̄ Hᵀ + R) Kᵀ, and H Σ̄ Hᵀ + R = I_m ⊗ β^{-1}
    cov_kalman = (Sigma_bar - K * KronI((1 / beta) * I1) * K.T).X
    cov_recurrence = Pbar - beta * u * u.T            # recurrence step 5

    ids = {
        "predict: Σ̄ = I_m ⊗ P̄": _mexpand(Sigma_bar.X - Pbar, sym),
        "innovation: H Σ̄ Hᵀ = I_m ⊗ kᵀP̄k": _mexpand(S_inner_1x1 - k.T * Pbar * k, sym),
        "gain: K = β (I_m ⊗ P̄k) = β (I_m ⊗ u)": _mexpand(K_col - beta * u, sym),
        "mean update (step 4)": _mexpand(mean_kalman - mean_recurrence, sym),
        "covariance update (step 5)": _mexpand(cov_kalman - cov_recurrence, sym),
    }
    return Derivation(
        claim="bl.posterior",
        statement="one Kalman step on vec S (Dm-dimensional) = the five-step BL recurrence, "
                  "and the posterior covariance stays I_m ⊗ P (Kronecker closure, App. C)",
        assumptions="D, m symbolic; P symmetric; r² > 0; kᵀP̄k identified with the scalar s "
                    "(it is 1×1); uses Kronecker rules L1-L8 (checked at explicit sizes)",
        objects={"Pbar": Pbar, "u": u, "beta": beta, "mean": mean_recurrence,
                 "cov": cov_recurrence, "Sigma_bar": Sigma_bar, "K": K},
        identities=ids,
        sizes="general D, m (MatrixSymbol) given the Kronecker rules",
    )


# ----------------------------------------------------------------------------
# Fully symbolic entries at small sizes
# ----------------------------------------------------------------------------


def _update_field(fld, Pbar, Mbar, k, v, r2s):
    """Kalman *update* on vec S (explicit Kronecker products, ``R = diag(r2s)``)
    and the recurrence's steps 2-5 per column, in field arithmetic.

    Returns (Kalman mean D×m, Kalman covariance Dm×Dm, recurrence mean, list of
    per-column recurrence covariances).
    """
    D, m = Mbar.shape
    Pb, Mb, kk, vv = fld.mat(Pbar), fld.mat(Mbar), fld.mat(k), fld.mat(v)
    Im = sp.eye(m)
    H = fld.mat(sp.kronecker_product(Im, k.T))
    Sb = fld.mat(sp.kronecker_product(Im, Pbar))
    x = fld.mat(vec(Mbar))
    S = H * Sb * H.transpose() + fld.mat(sp.diag(*r2s))
    Kg = Sb * H.transpose() * S.inv()
    x_post = x + Kg * (vv - H * x)
    S_post = Sb - Kg * S * Kg.transpose()
    # recurrence (steps 2-5), one covariance per distinct noise level
    u = Pb * kk
    s = fld.scalar_of(kk.transpose() * u)
    pred = Mb.transpose() * kk                       # (M̄)ᵀ k, m × 1
    cols, covs = [], []
    for j in range(m):
        beta = fld.K.one / (fld.s(r2s[j]) + s)
        cols.append(Mb[:, j] + u * ((vv[j, 0].element - pred[j, 0].element) * beta))
        covs.append(Pb - u * u.transpose() * beta)
    M_rec = cols[0]
    for c in cols[1:]:
        M_rec = M_rec.hstack(c)
    return unvec(fld.sym(x_post), D, m), fld.sym(S_post), fld.sym(M_rec), [fld.sym(c) for c in covs]


def posterior_explicit(D: int = 2, m: int = 1, diagonal_A: bool = False) -> Derivation:
    """Entry by entry: the Kalman filter on ``vec S`` (``sympy.kronecker_product``)
    equals the five-step recurrence, at ``D, m`` with all entries symbols.

    Split as predict then update (their composition is the step):

    * predict, a polynomial identity in general ``A``, symmetric ``P``, ``M``:
      ``(I⊗A)(I⊗P)(I⊗A)ᵀ + ℓ² I = I ⊗ (APAᵀ + ℓ²I)`` and ``(I⊗A) vec M = vec(AM)``;
    * update, rational, for a *general* symmetric ``P̄`` and mean ``M̄`` (so it
      covers whatever the predict step produces): the Kalman gain/covariance
      update with ``R = r² I_m`` against steps 2-5, decided in ``QQ(symbols)``.
    """
    A = sp.diag(*sym_vector("a", D)) if diagonal_A else sym_matrix("A", D, D)
    P = sym_symmetric("P", D)
    M = sym_matrix("M", D, m)
    k, v = sym_vector("k", D), sym_vector("v", m)
    l2 = sp.Symbol("ell2", nonnegative=True)
    r2 = sp.Symbol("r2", positive=True)
    Im = sp.eye(m)
    F = sp.kronecker_product(Im, A)
    pred_cov = F * sp.kronecker_product(Im, P) * F.T + l2 * sp.eye(D * m)
    Pbar_rec = A * P * A.T + l2 * sp.eye(D)
    ids = {
        f"predict covariance (D={D}, m={m})": (pred_cov - sp.kronecker_product(Im, Pbar_rec)).expand(),
        f"predict mean (D={D}, m={m})": (F * vec(M) - vec(A * M)).expand(),
    }
    Pbar = sym_symmetric("Pb", D)
    Mbar = sym_matrix("Mb", D, m)
    fld = Field(Pbar, Mbar, k, v, r2)
    Mk, Sk, Mr, covs = _update_field(fld, Pbar, Mbar, k, v, [r2] * m)
    ids[f"update mean (D={D}, m={m})"] = Mk - Mr
    ids[f"update covariance = I_m ⊗ P (D={D}, m={m})"] = Sk - sp.kronecker_product(Im, covs[0])
    return Derivation(
        claim="bl.posterior",
        statement=f"vec-Kalman step = five-step recurrence at D={D}, m={m}",
        assumptions="all entries independent real symbols; P, P̄ symmetric; r² > 0",
        objects={"A": A, "P": P, "M": M, "k": k, "v": v, "Pbar": Pbar_rec, "P_update": covs[0]},
        identities=ids,
        sizes=f"D={D}, m={m}, {'diagonal' if diagonal_A else 'general'} A",
    )


def conditioning_two_steps(general_prior: bool = False) -> Derivation:
    """Posterior of ``S_2`` given ``v_1, v_2`` by conditioning the joint Gaussian
    (no filter) equals two recurrence steps; ``D = 2``, ``m = 1``, ``A = I``,
    general keys, prior mean 0, prior ``p0 I`` (or a general symmetric ``P_0``
    with ``general_prior=True``, slower).

    Sources ``s_0 ~ N(0, P_0)``, ``w_1, w_2 ~ N(0, ℓ² I)``, ``e_1, e_2 ~ N(0, r²)``:
    ``s_1 = s_0 + w_1``, ``s_2 = s_1 + w_2``, ``v_t = k_tᵀ s_t + e_t``.  The
    posterior is ``Cov(s_2, v) Cov(v)^{-1} v`` and
    ``Cov(s_2) − Cov(s_2, v) Cov(v)^{-1} Cov(v, s_2)``.
    """
    D = 2
    P0 = sym_symmetric("P", D) if general_prior else sp.Symbol("p0", positive=True) * sp.eye(D)
    k1, k2 = sym_vector("k", D), sym_vector("h", D)
    v1, v2 = sp.symbols("v1 v2", real=True)
    l2 = sp.Symbol("ell2", positive=True)
    r2 = sp.Symbol("r2", positive=True)
    fld = Field(P0, k1, k2, v1, v2, l2, r2)
    I = fld.eye(D)
    P0_, k1_, k2_ = fld.mat(P0), fld.mat(k1), fld.mat(k2)
    L2, R2 = fld.s(l2), fld.s(r2)
    C11 = P0_ + I * L2                      # Cov(s_1)
    C21 = C11                               # Cov(s_2, s_1) = Cov(s_1)
    C22 = P0_ + I * (L2 * 2)                # Cov(s_2)
    Csv = (C21 * k1_).hstack(C22 * k2_)     # Cov(s_2, (v_1, v_2))
    a = fld.scalar_of(k1_.transpose() * C11 * k1_) + R2
    b = fld.scalar_of(k2_.transpose() * C21 * k1_)
    c = fld.scalar_of(k2_.transpose() * C22 * k2_) + R2
    from sympy.polys.matrices import DomainMatrix
    Cvv = DomainMatrix([[a, b], [b, c]], (2, 2), fld.K)
    Ci = Cvv.inv()
    mean = Csv * Ci * fld.mat([v1, v2])
    cov = C22 - Csv * Ci * Csv.transpose()

    def step(P, M, k, v):
        Pb = P + I * L2
        u = Pb * k
        beta = fld.K.one / (R2 + fld.scalar_of(k.transpose() * u))
        Mn = M + u * ((v - fld.scalar_of(M.transpose() * k)) * beta)
        return Pb - u * u.transpose() * beta, Mn

    P, M = step(P0_, fld.zeros(D, 1), k1_, fld.s(v1))
    P, M = step(P, M, k2_, fld.s(v2))
    return Derivation(
        claim="bl.posterior",
        statement="joint-Gaussian conditioning on (v_1, v_2) = two recurrence steps",
        assumptions=("D=2, m=1, A=I, M_0=0, ℓ²>0, r²>0, general keys, prior "
                     + ("general symmetric P_0" if general_prior else "p0 I")),
        objects={"mean_joint": fld.sym(mean), "cov_joint": fld.sym(cov)},
        identities={"mean after 2 steps": fld.sym(mean - M), "covariance after 2 steps": fld.sym(cov - P)},
        sizes="D=2, m=1, T=2",
    )


# ----------------------------------------------------------------------------
# mpmath: the posterior by conditioning, any size
# ----------------------------------------------------------------------------


def joint_posterior_mp(keys, values, *, l2, r2, p0, alpha=None, dps: int = 60):
    """Posterior mean ``D×m`` and covariance ``Dm×Dm`` of ``vec S_T`` given
    ``v_1..v_T``, by conditioning the joint Gaussian of the sources in mpmath.

    Written from the design model only: ``vec S_T`` and every ``v_t`` are linear
    maps of ``(vec S_0, vec W_1..T, e_1..T)``.  ``alpha``: per-step diagonal
    dynamics (``T`` lists of ``D``) or None for ``A = I``.  Scalars or per-step
    lists for ``l2``, ``r2``; ``p0`` scalar.  Inputs: ints, Fractions, strings, mpf.
    """
    with mp.workdps(dps):
        T, D, m = len(keys), len(keys[0]), len(values[0])
        n = D * m
        per = (lambda x: [mpf(x[t]) for t in range(T)] if isinstance(x, (list, tuple))  # noqa: E731
               else [mpf(x)] * T)
        l2s, r2s, p0 = per(l2), per(r2), mpf(p0)
        n_src = n + T * n + T * m
        var = [mp.mpf(0)] * n_src                     # sources are independent: diagonal
        for i in range(n):
            var[i] = p0
        for t in range(T):
            for i in range(n):
                var[n + t * n + i] = l2s[t]
            for j in range(m):
                var[n + T * n + t * m + j] = r2s[t]
        LS = mp.matrix(n, n_src)
        for i in range(n):
            LS[i, i] = 1
        Lv = mp.matrix(T * m, n_src)
        for t in range(T):
            a = [mpf(x) for x in alpha[t]] if alpha is not None else [mp.mpf(1)] * D
            for i in range(n):          # vec index i = j*D + d
                d = i % D
                for c in range(n_src):
                    LS[i, c] = a[d] * LS[i, c]
                LS[i, n + t * n + i] += 1
            k = [mpf(x) for x in keys[t]]
            for j in range(m):
                for c in range(n_src):
                    Lv[t * m + j, c] = mp.fsum(k[d] * LS[j * D + d, c] for d in range(D))
                Lv[t * m + j, n + T * n + t * m + j] += 1
        Vs = mp.diag(var)
        C_sv = LS * Vs * Lv.T
        C_vv = Lv * Vs * Lv.T
        C_ss = LS * Vs * LS.T
        vv = mp.matrix([mpf(values[t][j]) for t in range(T) for j in range(m)])
        mean = C_sv * mp.lu_solve(C_vv, vv)
        X = mp.matrix(T * m, n)
        for i in range(n):
            col = mp.lu_solve(C_vv, C_sv.T[:, i])
            for r in range(T * m):
                X[r, i] = col[r]
        cov = C_ss - C_sv * X
        Mmean = [[mean[j * D + d] for j in range(m)] for d in range(D)]
        return Mmean, cov


# ----------------------------------------------------------------------------
# Kronecker closure fails with per-column noise: grouped covariances
# ----------------------------------------------------------------------------


def kronecker_failure(D: int = 2, m: int = 2) -> Derivation:
    """Per-column observation noise ``R = diag(r_1², …, r_m²)`` (App. C-D).

    The exact posterior covariance of ``vec S`` (Kalman update on the ``Dm``
    vector, general symmetric ``P̄``) stays block diagonal (columns independent)
    with column ``j`` block ``P̄ − β_j u uᵀ``, ``β_j = 1/(r_j² + kᵀP̄k)``; two
    blocks differ by ``(β_2 − β_1) u uᵀ``, non-zero as soon as ``r_1² ≠ r_2²`` and
    ``u ≠ 0``: no single ``P`` describes it, one covariance per column group is
    needed (grouped noise, ``G`` blocks).  The predict step keeps each block's
    form by the Kronecker rules applied per group.
    """
    Pbar = sym_symmetric("Pb", D)
    Mbar = sym_matrix("Mb", D, m)
    k, v = sym_vector("k", D), sym_vector("v", m)
    rs = sp.symbols(f"r2_1:{m + 1}", positive=True)
    fld = Field(Pbar, Mbar, k, v, *rs)
    Mk, Sk, Mr, covs = _update_field(fld, Pbar, Mbar, k, v, list(rs))
    u = Pbar * k
    s = (k.T * u)[0, 0]
    gap = 1 / (rs[1] + s) - 1 / (rs[0] + s)          # β_2 − β_1
    block_gap = Sk[:D, :D] - Sk[D:2 * D, D:2 * D]
    uu = fld.mat(u * u.T)
    gap_f = fld.s(gap)
    return Derivation(
        claim="bl.kronecker",
        statement="with per-column noise the posterior is blockdiag_j(P̄ − β_j uuᵀ): "
                  "one covariance per column (group), not I_m ⊗ P",
        assumptions=f"D={D}, m={m}; general symmetric P̄, mean M̄; r_j² > 0",
        objects={"Sigma_post": Sk, "block_gap": block_gap, "gap_factor": sp.factor(sp.together(gap))},
        identities={
            "posterior covariance = blockdiag(P̄ − β_j u uᵀ)": Sk - sp.diag(*covs),
            "posterior mean = per-column recurrence": Mk - Mr,
            "block 1 − block 2 = (β_2 − β_1) u uᵀ": fld.sym(fld.mat(block_gap) - uu * gap_f),
            "β_2 − β_1 = (r_1² − r_2²)/((r_1² + s)(r_2² + s))":
                fld.K.to_sympy(fld.s(gap) - fld.s((rs[0] - rs[1]) / ((rs[0] + s) * (rs[1] + s)))),
        },
        sizes=f"D={D}, m={m}",
    )


# ----------------------------------------------------------------------------
# Gated form, gain bound, read-out covariance
# ----------------------------------------------------------------------------


def gated_form() -> Derivation:
    """``M_t = F_t A_t M_{t-1} + β u vᵀ``, ``F_t = I − β u kᵀ`` (BL p.4), general sizes.

    ``F`` is not an elementwise gate: it is the identity on ``k^⊥`` and scales
    ``u`` by ``1 − g`` (``g = β kᵀu``), an oblique rank-one map; its off-diagonal
    entries ``−β u_i k_j`` vanish only if ``u`` and ``k`` are both supported on one
    coordinate.
    """
    D, m = sp.symbols("D m", integer=True, positive=True)
    A, M = MatrixSymbol("A", D, D), MatrixSymbol("M", D, m)
    u, k, v = MatrixSymbol("u", D, 1), MatrixSymbol("k", D, 1), MatrixSymbol("v", m, 1)
    beta = sp.Symbol("beta", positive=True)
    ID = Identity(D)
    F = ID - beta * u * k.T
    residual = A * M + beta * u * (v - (A * M).T * k).T
    gated = F * A * M + beta * u * v.T
    # explicit D = 2: eigen-structure and an off-diagonal entry
    u2, k2 = sym_vector("u", 2), sym_vector("k", 2)
    b = sp.Symbol("beta", positive=True)
    F2 = sp.eye(2) - b * u2 * k2.T
    g = b * (k2.T * u2)[0, 0]
    k_perp = sp.Matrix([-k2[1], k2[0]])
    # the worked example of the notes: P̄ = diag(1/20, 2), k = (4/5, 3/5), r² = 1/20
    Pb = sp.diag(sp.Rational(1, 20), 2)
    ke = sp.Matrix([sp.Rational(4, 5), sp.Rational(3, 5)])
    ue = Pb * ke
    be = 1 / (sp.Rational(1, 20) + (ke.T * ue)[0, 0])
    Fe = sp.eye(2) - be * ue * ke.T
    return Derivation(
        claim="bl.gated_form",
        statement="residual form = gated form with F = I − β u kᵀ; F u = (1−g) u, F w = w for w ⊥ k; "
                  "F is not diagonal in general",
        assumptions="general D, m (MatrixSymbol); eigen-structure at D=2 with symbols",
        objects={"F": F, "F_example": Fe, "u_example": ue, "beta_example": be},
        identities={
            "residual − gated (general D, m)": _mexpand(residual - gated),
            "F u = (1 − g) u (D=2)": F2 * u2 - (1 - g) * u2,
            "F k⊥ = k⊥ (D=2)": F2 * k_perp - k_perp,
            "F_01 = −β u_0 k_1 (D=2)": F2[0, 1] + b * u2[0] * k2[1],
        },
        facts={"example F has non-zero off-diagonal entries": Fe[0, 1] != 0 and Fe[1, 0] != 0},
        sizes="general D, m; D = 2 explicit",
    )


def gain_bound() -> Derivation:
    """``g = s/(r² + s) ∈ [0, 1)`` for ``s = kᵀP̄k ≥ 0``, ``r² > 0``; ``β`` may exceed 1.

    ``s ≥ 0`` because ``P̄ = L Lᵀ`` gives ``s = ‖Lᵀk‖²`` (explicit at ``D = 2, 3``);
    ``1 − g = r²/(r² + s) > 0``; ``β = 1/(r² + s) ≤ 1/r²``, so ``β > 1`` whenever
    ``r² + s < 1`` (exhibited exactly below).
    """
    s = sp.Symbol("s", nonnegative=True)
    r2 = sp.Symbol("r2", positive=True)
    g = s / (r2 + s)
    beta = 1 / (r2 + s)
    ids = {"1 − g = r²/(r² + s)": (1 - g) - r2 / (r2 + s), "g = β s": g - beta * s}
    for D in (2, 3):
        L, k = sym_matrix("L", D, D), sym_vector("k", D)
        w = L.T * k
        ids[f"kᵀ(LLᵀ)k = ‖Lᵀk‖² (D={D})"] = (k.T * L * L.T * k)[0, 0] - sum(x ** 2 for x in w)
    # a case with β > 1 from the recurrence itself: P_0 = I/10, ℓ² = 0, r² = 1/10, unit k
    P0, r2e = sp.eye(2) / 10, sp.Rational(1, 10)
    ke = sp.Matrix([sp.Rational(3, 5), sp.Rational(4, 5)])
    se = (ke.T * P0 * ke)[0, 0]
    beta_e = 1 / (r2e + se)
    g_e = se * beta_e
    return Derivation(
        claim="bl.gain_bound",
        statement="g ∈ [0, 1) for r² > 0, P̄ ⪰ 0; β = 1/(r² + kᵀP̄k) ≤ 1/r² is not bounded by 1",
        assumptions="s = kᵀP̄k ≥ 0 (P̄ PSD), r² > 0",
        objects={"g": g, "beta": beta, "beta_example": beta_e, "g_example": g_e,
                 "example": "P̄ = I/10, r² = 1/10, k = (3/5, 4/5)"},
        identities=ids,
        facts={
            "g ≥ 0": g.is_nonnegative,
            "1 − g > 0": sp.simplify(1 - g).is_positive,
            "β ≤ 1/r²": sp.simplify(1 / r2 - beta).is_nonnegative,
            "example: β = 5 > 1": beta_e == 5,
            "example: g = 1/2 ∈ [0, 1)": g_e == sp.Rational(1, 2),
        },
        sizes="general (scalar argument); PSD step explicit at D = 2, 3",
    )


def readout_covariance(D: int = 2, m: int = 2) -> Derivation:
    """Read-out model ``Z | S ~ N(Sᵀq, I_m)`` with ``vec S ~ N(vec M, I_m ⊗ P)`` (BL Eqs. 7-8).

    ``Z = (I_m ⊗ qᵀ) vec S + ε``, so ``E Z = Mᵀq`` and
    ``Cov Z = (I_m ⊗ qᵀ)(I_m ⊗ P)(I_m ⊗ q) + I_m = (1 + qᵀPq) I_m`` (rules L1, L5):
    general sizes by the rules, and entry by entry at ``D, m``.
    """
    P = sym_symmetric("P", D)
    M = sym_matrix("M", D, m)
    q = sym_vector("q", D)
    Hq = sp.kronecker_product(sp.eye(m), q.T)
    cov = Hq * sp.kronecker_product(sp.eye(m), P) * Hq.T + sp.eye(m)
    mean = Hq * vec(M)
    qPq = (q.T * P * q)[0, 0]
    # general sizes through the I_m ⊗ X algebra
    Dg, mg = sp.symbols("D m", integer=True, positive=True)
    Pg, qg = MatrixSymbol("P", Dg, Dg), MatrixSymbol("q", Dg, 1)
    cov_g = (KronI(qg.T) * KronI(Pg) * KronI(qg)).X   # I_m ⊗ (qᵀPq); + I_m = (1 + qᵀPq) I_m by L5
    return Derivation(
        claim="bl.readout_cov",
        statement="Cov(Z_t) = (1 + q_tᵀ P_t q_t) I_m and E Z_t = M_tᵀ q_t",
        assumptions="Z | S ~ N(Sᵀq, I_m), vec S ~ N(vec M, I_m ⊗ P); general D, m by rules L1, L5",
        objects={"cov": cov, "mean": mean, "cov_general_inner": cov_g},
        identities={
            f"Cov Z = (1 + qᵀPq) I_m (D={D}, m={m})": cov - (1 + qPq) * sp.eye(m),
            f"E Z = Mᵀq (D={D}, m={m})": mean - M.T * q,
            "general: (I⊗qᵀ)(I⊗P)(I⊗q) = I ⊗ qᵀPq": _mexpand(cov_g - qg.T * Pg * qg),
        },
        sizes=f"general D, m (rules) and explicit D={D}, m={m}",
    )
