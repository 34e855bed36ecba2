r"""Structured dynamics and cost (BL App. D; p.4).

Complex dynamics (:func:`complex_dynamics`).  A damped rotation block
``R(ϱ, θ) = ϱ [[cos θ, −sin θ], [sin θ, cos θ]]`` acting on a real pair ``(x, y)``
is multiplication of ``z = x + i y`` by ``ϱ e^{iθ}``; block-diagonal ``A_t`` of
such blocks is complex diagonal dynamics, closed under composition.  When the
read-out sees only real parts, process noise enters only the "real rows": in
the real representation the noise covariance is ``Q = ℓ² E`` with ``E`` the
0/1 mask of real rows -- not ``ℓ² I``.  The filter with
``P̄ = A P Aᵀ + Q`` is still the exact posterior (the Kronecker argument of
:mod:`.bl_posterior` holds with ``I_m ⊗ Q`` in place of ``ℓ² I``), but its
covariance blocks are *real* 2×2 matrices: ``R E Rᵀ`` is not of the circular
form ``[[a, −b], [b, a]]`` (a complex scalar), so a complex-diagonal
covariance cannot carry it.

Cost (:func:`op_count`, :func:`cost`).  One token of the recurrence with
diagonal ``A`` is run on counting scalars: the operation count is exactly a
polynomial ``c₁D² + c₂Dm + c₃D + c₄m + c₅`` per covariance group, i.e.
``O(G D² + D m)`` (``O(D² + Dm)`` for ``G = 1``); the state is ``M`` (``Dm``)
plus ``G`` covariances (``G D²``, or ``G D(D+1)/2`` stored symmetrically).
"""
from __future__ import annotations

import mpmath as mp
import sympy as sp

from .bl_common import Derivation, Field, sym_matrix, sym_symmetric, sym_vector
from .bl_posterior import KronI, _mexpand, _update_field


def rotation_block(varrho, theta):
    return varrho * sp.Matrix([[sp.cos(theta), -sp.sin(theta)], [sp.sin(theta), sp.cos(theta)]])


def complex_dynamics() -> Derivation:
    vr, th = sp.symbols("varrho theta", positive=True)
    vr2, th2 = sp.symbols("varrho_2 theta_2", positive=True)
    xx, yy = sp.symbols("x y", real=True)
    R = rotation_block(vr, th)
    img = R * sp.Matrix([xx, yy])
    zc = sp.expand(vr * sp.exp(sp.I * th) * (xx + sp.I * yy), complex=True)
    comp = rotation_block(vr, th) * rotation_block(vr2, th2) - rotation_block(vr * vr2, th + th2)
    lam_ = sp.Symbol("lambda")
    charpoly = sp.expand((R - lam_ * sp.eye(2)).det())
    target_poly = sp.expand((lam_ - vr * sp.exp(sp.I * th)) * (lam_ - vr * sp.exp(-sp.I * th)))
    # structured noise: exactness with I_m ⊗ Q (general sizes) ...
    Dg, mg = sp.symbols("D m", integer=True, positive=True)
    A, P, Q = (sp.MatrixSymbol(n, Dg, Dg) for n in ("A", "P", "Q"))
    pred = (KronI(A) * KronI(P) * KronI(A).T + KronI(Q)).X
    # ... and entry by entry at D = 2 (one block), m = 2: predict with Q = ℓ² E, then the update
    l2 = sp.Symbol("ell2", positive=True)
    c, s = sp.symbols("c s", real=True)     # cos θ, sin θ of the block
    A2 = vr * sp.Matrix([[c, -s], [s, c]])
    E = sp.diag(1, 0)
    P2 = sym_symmetric("P", 2)
    M2 = sym_matrix("M", 2, 2)
    Im = sp.eye(2)
    F = sp.kronecker_product(Im, A2)
    vec_pred = F * sp.kronecker_product(Im, P2) * F.T + sp.kronecker_product(Im, l2 * E)
    rec_pred = A2 * P2 * A2.T + l2 * E
    k2, v2 = sym_vector("k", 2), sym_vector("v", 2)
    r2 = sp.Symbol("r2", positive=True)
    Pb, Mb = sym_symmetric("Pb", 2), sym_matrix("Mb", 2, 2)
    fld = Field(Pb, Mb, k2, v2, r2)
    Mk, Sk, Mr, covs = _update_field(fld, Pb, Mb, k2, v2, [r2, r2])
    # circularity: R E Rᵀ as a complex scalar would need [[a, −b], [b, a]]
    REt = sp.expand(A2 * E * A2.T)
    circ_gap = sp.Matrix([REt[0, 0] - REt[1, 1], REt[0, 1] + REt[1, 0]])
    return Derivation(
        claim="bl.complex_dynamics",
        statement="damped 2×2 rotation blocks = complex diagonal dynamics; with real-row process noise "
                  "Q = ℓ²E the filter P̄ = APAᵀ + Q is exact (I_m ⊗ Q noise), and its covariance is "
                  "not a complex-diagonal (circular) one",
        assumptions="real representation z = x + iy; read-out on real rows; Q = ℓ² diag(1, 0) per block",
        objects={"R": R, "noise_mask": E, "R_E_Rt": REt, "circularity_gap": circ_gap},
        identities={
            "R(ϱ,θ)(x, y) = (Re, Im) of ϱe^{iθ}(x + iy)":
                img - sp.Matrix([sp.re(zc), sp.im(zc)]).applyfunc(sp.expand),
            "R(ϱ₁,θ₁) R(ϱ₂,θ₂) = R(ϱ₁ϱ₂, θ₁+θ₂)": comp.applyfunc(lambda e: sp.simplify(sp.expand_trig(e))),
            "eigenvalues ϱ e^{±iθ} (characteristic polynomial)":
                sp.simplify(sp.expand(charpoly - target_poly, complex=True).rewrite(sp.cos)),
            "structured noise, general sizes: Σ̄ = I_m ⊗ (APAᵀ + Q)": _mexpand(pred - (A * P * A.T + Q)),
            "structured noise predict, D=2, m=2": (vec_pred - sp.kronecker_product(Im, rec_pred)).expand(),
            "update with Σ̄ = I⊗P̄ (any P̄): mean, D=2, m=2": Mk - Mr,
            "update: covariance stays I_m ⊗ P, D=2, m=2": Sk - sp.kronecker_product(Im, covs[0]),
        },
        facts={"R E Rᵀ is not circular unless sin θ cos θ = 0":
               sp.factor(circ_gap[1]) != 0 and sp.factor(circ_gap[0]) != 0},
        sizes="2×2 blocks symbolic; exactness for general D, m (rules) and explicit D = 2, m = 2",
    )


# ----------------------------------------------------------------------------
# Cost: count the operations of one token
# ----------------------------------------------------------------------------


class _Count:
    """A scalar that counts the arithmetic done on it (one shared tally)."""

    tally = {"mul": 0, "add": 0, "div": 0}

    def __init__(self, v=0.0):
        self.v = v

    def _bin(self, other, kind, f):
        _Count.tally[kind] += 1
        o = other.v if isinstance(other, _Count) else other
        return _Count(f(self.v, o))

    def __add__(self, o):
        return self._bin(o, "add", lambda a, b: a + b)

    def __sub__(self, o):
        return self._bin(o, "add", lambda a, b: a - b)

    def __mul__(self, o):
        return self._bin(o, "mul", lambda a, b: a * b)

    def __truediv__(self, o):
        return self._bin(o, "div", lambda a, b: a / b)

    __radd__ = __add__
    __rmul__ = __mul__

    def __rtruediv__(self, o):
        _Count.tally["div"] += 1
        return _Count(o / self.v)


def op_count(D: int, m: int, G: int = 1, symmetric: bool = True) -> dict:
    """Arithmetic operations of one token of the recurrence (diagonal ``A``,
    ``G`` covariance groups of ``m/G`` value columns), counted by running it.

    The count is of a direct implementation: predict ``P̄_ij = a_i P_ij a_j + ℓ²δ_ij``
    (upper triangle when ``symmetric``), ``u = P̄k``, ``s = kᵀu``, ``β``,
    ``M̄ = a ⊙ M``, innovation, mean update and ``P = P̄ − β uuᵀ`` per group.
    """
    if m % G:
        raise ValueError(f"G={G} must divide m={m}")
    _Count.tally = {"mul": 0, "add": 0, "div": 0}
    C = _Count
    a = [C(0.9) for _ in range(D)]
    k = [C(0.1 * (i + 1)) for i in range(D)]
    v = [C(1.0) for _ in range(m)]
    l2, r2 = C(0.05), C(0.05)
    M = [[C(0.0) for _ in range(m)] for _ in range(D)]
    mg = m // G
    Mbar = [[a[i] * M[i][j] for j in range(m)] for i in range(D)]
    for g in range(G):
        P = [[C(0.0) for _ in range(D)] for _ in range(D)]
        Pb = [[None] * D for _ in range(D)]
        for i in range(D):
            for j in range(i if symmetric else 0, D):
                val = a[i] * P[i][j] * a[j]
                if i == j:
                    val = val + l2
                Pb[i][j] = val
                if symmetric:
                    Pb[j][i] = val
        u = [None] * D
        for i in range(D):
            acc = Pb[i][0] * k[0]
            for j in range(1, D):
                acc = acc + Pb[i][j] * k[j]
            u[i] = acc
        s = k[0] * u[0]
        for i in range(1, D):
            s = s + k[i] * u[i]
        beta = 1 / (r2 + s)
        bu = [beta * u[i] for i in range(D)]
        cols = range(g * mg, (g + 1) * mg)
        for j in cols:
            pred = Mbar[0][j] * k[0]
            for i in range(1, D):
                pred = pred + Mbar[i][j] * k[i]
            d = v[j] - pred
            for i in range(D):
                Mbar[i][j] = Mbar[i][j] + bu[i] * d
        for i in range(D):
            for j in range(i if symmetric else 0, D):
                Pb[i][j] = Pb[i][j] - bu[i] * u[j]
    t = dict(_Count.tally)
    t["total"] = t["mul"] + t["add"] + t["div"]
    return t


def cost(sizes=((1, 1), (2, 1), (2, 3), (3, 2), (4, 4), (5, 3), (6, 2), (7, 5), (8, 8)),
         G_values=(1, 2)) -> Derivation:
    """Fit ``total(D, m, G) = G(c₁D² + c₃D + c₅) + c₂Dm + c₄m`` exactly on the counts."""
    c1, c2, c3, c4, c5 = sp.symbols("c1:6")
    D_, m_, G_ = sp.symbols("D m G", positive=True, integer=True)
    form = G_ * (c1 * D_ ** 2 + c3 * D_ + c5) + c2 * D_ * m_ + c4 * m_
    rows = []
    for G in G_values:
        for D, m in sizes:
            if m % G == 0:
                rows.append((D, m, G, op_count(D, m, G)["total"]))
    eqs = [form.subs({D_: D, m_: m, G_: G}) - tot for D, m, G, tot in rows]
    sol = sp.solve(eqs[:8], [c1, c2, c3, c4, c5], dict=True)
    fitted = form.subs(sol[0]) if sol else None
    residuals = sp.Matrix([fitted.subs({D_: D, m_: m, G_: G}) - tot for D, m, G, tot in rows]) \
        if fitted is not None else sp.Matrix([1])
    return Derivation(
        claim="bl.cost",
        statement="operations per token = G(c₁D² + c₃D + c₅) + c₂Dm + c₄m exactly: O(GD² + Dm)",
        assumptions="diagonal A; symmetric covariance stored/updated in the upper triangle; "
                    "counts of a direct implementation (mul + add + div)",
        objects={"fitted": fitted, "counts": rows, "state_numbers": D_ * m_ + G_ * D_ ** 2,
                 "state_numbers_symmetric": D_ * m_ + G_ * D_ * (D_ + 1) / 2},
        identities={"fitted polynomial reproduces every count": residuals},
        facts={"a fit exists": bool(sol), "D² coefficient > 0": bool(sol) and sol[0][c1] > 0,
               "Dm coefficient > 0": bool(sol) and sol[0][c2] > 0},
        sizes=f"{len(rows)} (D, m, G) sizes",
    )


def bl_recurrence_structured_mp(keys, values, *, A, Q, p0, r2, dps: int = 60):
    """The five-step recurrence with full dynamics ``A`` (``T`` matrices or one)
    and structured process noise ``Q`` (``P̄ = A P Aᵀ + Q``), in mpmath.

    Inputs are nested lists (floats allowed here: this is a float64
    cross-check at 60 digits of the *same* inputs).  Returns per-step means
    (``T`` lists ``D×m``) and covariances (``D×D``) as ``mp.matrix``.
    """
    with mp.workdps(dps):
        T, D, m = len(keys), len(keys[0]), len(values[0])
        As = A if len(A) == T and hasattr(A[0][0], "__len__") else [A] * T
        Qm = mp.matrix(Q)
        P = mp.eye(D) * mp.mpf(p0)
        M = mp.zeros(D, m)
        r2s = r2 if isinstance(r2, (list, tuple)) else [r2] * T
        Ms, Ps = [], []
        for t in range(T):
            At = mp.matrix(As[t])
            k = mp.matrix(keys[t])
            v = mp.matrix(values[t])
            Pbar = At * P * At.T + Qm
            u = Pbar * k
            beta = 1 / (mp.mpf(r2s[t]) + (k.T * u)[0])
            AM = At * M
            innov = v - AM.T * k
            M = AM + beta * u * innov.T
            P = Pbar - beta * u * u.T
            Ms.append(M.copy())
            Ps.append(P.copy())
        return Ms, Ps
