"""``bl.capacity``: the exact linear capacity KᵀM = V (BL App. E.5.4, p.25).

sympy (:mod:`assocmem.theory.bl_capacity`): solvability and uniqueness by rank;
numpy: least-squares residuals and a BL memory written with tiny r²
(:func:`numerics.bl_analysis.capacity_probe`).
"""
from __future__ import annotations

from assocmem.claims._common import SEED, sympy_derivation
from assocmem.numerics.bl_analysis import capacity_probe
from assocmem.registry import Evidence
from assocmem.theory import bl_capacity as cap


def capacity(ev: Evidence) -> None:
    d = cap.capacity()
    sympy_derivation(ev, d)
    ev.refutes("sympy", "printed: n = D is under-determined (solution set of dimension ≥ 1 per column)", 1,
               cap.rank_nullity(8, 8)["solution_set_dimension_per_column"], abs_tol=0.5,
               note="full-rank square K: KᵀM = V has exactly one solution")
    rows = {}
    for D in (4, 8):
        for n in sorted({D // 2, D - 1, D, D + 1, 2 * D}):
            pr = capacity_probe(D, n, seed=SEED + D * 100 + n)
            rows[f"D={D},n={n}"] = {k: float(v) for k, v in pr.items()}
            if n <= D:
                ev.close("numpy", f"D={D}, n={n}: least-squares residual of KᵀM = V is 0", pr["lstsq_residual"], 0.0,
                         abs_tol=1e-12)
                ev.close("numpy", f"D={D}, n={n}: BL memory (r² = 1e-10) reproduces V", pr["bl_residual"], 0.0,
                         abs_tol=1e-6)
            else:
                ev.holds("numpy", f"D={D}, n={n} > D: no exact solution (relative residual > 0.05)",
                         pr["lstsq_residual"] > 0.05, computed=float(pr["lstsq_residual"]))
    ev.record(numpy=rows)
    ev.summary = ("KᵀM = V (not Vᵀ: a shape error) is solvable for all V iff rank K = n ≤ D, unique at n = D "
                  "(not under-determined), impossible for generic V when n > D; numpy: residual 0 for n ≤ D, "
                  "> 0.05 for n > D, and a BL memory with tiny r² reaches the least-squares fit")
