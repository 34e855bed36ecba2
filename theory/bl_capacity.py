r"""Exact linear capacity of one bilinear memory (BL App. E.5.4, p.25).

Keys ``K ∈ R^{D×n}`` (columns ``k_i``), targets ``V ∈ R^{n×m}``, memory
``M ∈ R^{D×m}``, read-out ``Kᵀ M``.  The correct statement:

* ``Kᵀ M = V`` is solvable for *every* ``V`` iff ``Kᵀ`` is onto ``R^n`` iff
  ``rank K = n`` (full column rank), which needs ``n ≤ D``; then
  ``M = K (KᵀK)^{-1} V`` is a solution;
* the solution is unique iff additionally ``Kᵀ`` is injective, i.e. ``n = D``
  (``K`` invertible, ``M = K^{-T} V``): ``n = D`` is *determined*, not
  under-determined;
* for ``n > D`` the left null space of ``Kᵀ`` has dimension ``≥ n − D ≥ 1``;
  every solvable ``V`` satisfies ``zᵀ V = 0`` for ``z`` in it, so a generic ``V``
  has no exact solution.

The paper prints ``Kᵀ M = Vᵀ`` (``n×m`` against ``m×n``: a shape error unless
``n = m``) and calls ``n = D`` under-determined.
"""
from __future__ import annotations

import sympy as sp
from sympy import MatrixSymbol

from .bl_common import Derivation, sym_matrix


def capacity() -> Derivation:
    D, n, m = sp.symbols("D n m", integer=True, positive=True)
    K, V = MatrixSymbol("K", D, n), MatrixSymbol("V", n, m)
    G = K.T * K
    M_sol = K * G.I * V
    residual = (K.T * M_sol - V).doit()
    # the printed form: Kᵀ M (n × m) against Vᵀ (m × n)
    # (concrete sizes n = 3, m = 2, D = 2: with symbolic sizes sympy cannot decide n ≠ m)
    Kc, Mc, Vc = MatrixSymbol("K", 2, 3), MatrixSymbol("M", 2, 2), MatrixSymbol("V", 3, 2)
    try:
        _ = Kc.T * Mc - Vc.T
        printed_shape_error = False
    except sp.ShapeError:
        printed_shape_error = True
    # n = D = 2: unique; null space of Kᵀ trivial iff det K ≠ 0
    K2 = sym_matrix("K", 2, 2)
    V2 = sym_matrix("V", 2, 1)
    M_unique = K2.T.inv() * V2
    # n = 3 > D = 2: z = cross product of K's two rows spans the left null space of Kᵀ
    K3 = sym_matrix("K", 2, 3)
    z = K3[0, :].T.cross(K3[1, :].T)
    V3 = sym_matrix("V", 3, 1)
    obstruction = sp.expand((z.T * V3)[0])
    # ... and for any M, zᵀ(KᵀM) = 0 identically, so KᵀM = V forces zᵀV = 0
    M3 = sym_matrix("M", 2, 1)
    return Derivation(
        claim="bl.capacity",
        statement="KᵀM = V solvable for all V iff rank K = n (needs n ≤ D); unique iff n = D; "
                  "for n > D a generic V has no solution (zᵀV = 0 is required for z ∈ null(K))",
        assumptions="K: D×n keys, V: n×m targets, M: D×m; real entries",
        objects={"M_solution": M_sol, "M_unique_n_eq_D": M_unique, "left_null_vector_D2_n3": z,
                 "obstruction": obstruction},
        identities={
            "Kᵀ K (KᵀK)^{-1} V = V (general sizes, KᵀK invertible)": residual,
            "n = D = 2: Kᵀ (K^{-T} V) = V": (K2.T * M_unique - V2).applyfunc(sp.simplify),
            "n = 3 > D = 2: K z = 0 for z = row_1 × row_2": (K3 * z).expand(),
            "n = 3 > D = 2: zᵀ(KᵀM) = 0 for every M": sp.expand((z.T * K3.T * M3)[0]),
        },
        facts={
            "printed KᵀM = Vᵀ is a shape error (n×m vs m×n)": printed_shape_error,
            "n = D = 2: null space of Kᵀ is trivial when det K ≠ 0 (unique solution)":
                K2.T.nullspace() == [],
            "n = 3 > D = 2: zᵀV is not the zero polynomial (generic V unsolvable)": obstruction != 0,
        },
        sizes="general D, n, m for existence; D = 2 with n = 2, 3 for uniqueness / obstruction",
    )


def rank_nullity(D: int, n: int) -> dict:
    """Dimensions for generic (full-rank) keys: ``rank K = min(D, n)``,
    solvable-for-all iff ``n ≤ D``, solution-set dimension per column ``D − rank``."""
    rank = min(D, n)
    return {"rank": rank, "solvable_for_all_V": rank == n, "unique": rank == n and rank == D,
            "solution_set_dimension_per_column": D - rank if rank == n else None,
            "left_null_dimension": n - rank}
