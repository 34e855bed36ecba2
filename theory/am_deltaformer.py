r"""DeltaFormer: the kernel form of the feature-space delta rule, its triangular
and blockwise solutions, and the work count (sympy).

Source: Zhong, Xu, Ao, Shi, *Understanding Transformer from the Perspective of
Associative Memory* (arXiv 2505.19488v1), Sec. 2.2.1, Eqs. 37-42, pp.12-14;
App. C; App. D.3, pp.33-35.

**Equivalence** (``am.deltaformer_equiv``).  The feature-space delta rule with
gates, ``S_t = S_{t−1} + (α_t v_t − β_t S_{t−1} φ(k_t)) φ(k_t)ᵀ``, ``S_0 = 0``.
Claim: ``S_t = Σ_{i≤t} u_i φ(k_i)ᵀ`` with
``u_t = α_t v_t − β_t Σ_{i<t} κ(k_i, k_t) u_i``, ``κ = φᵀφ``.  Induction: if
``S_{t−1} = Σ_{i<t} u_i φ_iᵀ`` then ``S_{t−1} φ_t = Σ_{i<t} κ(k_i, k_t) u_i``, so
the increment is exactly ``u_t φ_tᵀ``.  Then ``o_t = S_t φ(q_t) =
Σ_{i≤t} κ(k_i, q_t) u_i``.  The step uses that the *write* kernel evaluated at
``w_t = k_t`` is the inner product of the *read* features: with ``κ1 ≠ κ2`` or
``w_t ≠ k_t`` the model is a pair of states sharing ``u_t``
(``S¹`` for writing, ``S²`` for reading), not one delta rule.

**Triangular form** (``am.deltaformer_chunked``).  Collecting the recursion,
``U + A U = diag(α) V`` with strictly lower-triangular ``A_{ti} = β_t κ1(k_i,
w_t)``: ``U = (I + A)^{-1} diag(α) V`` (``I + A`` is unit lower-triangular,
always invertible).  Blockwise with chunks ``R_b``:
``U_{R_b} = (I + A_{R_b R_b})^{-1} (diag(α) V_{R_b} − A_{R_b, <R_b} U_{<R_b})``,
which is block forward substitution of the same system — ``⌈T/C⌉`` sequential
steps.

**Work count.**  Per chunk of ``n`` rows ending at ``e`` and starting at ``s``
(the accounting of :class:`assocmem.numerics.am_deltaformer.WorkCount`):
write and read kernels ``2 n e d``, inter-chunk ``n s d_v``, inverse
``n²(n−1)/2``, intra-chunk ``n² d_v``, read-out ``n e d_v``.  For ``C | T``
the total is ``(d + d_v) T (T + C) + T C (C − 1)/2`` —
``O(T² d + T C d + T C²)`` as printed.
"""
from __future__ import annotations

import sympy as sp


def _vecs(name: str, T: int, dim: int):
    return [sp.Matrix(dim, 1, lambda a, _b, t=t: sp.Symbol(f"{name}{t}_{a}", real=True)) for t in range(T)]


# -- equivalence ---------------------------------------------------------------
def equivalence_residuals(T: int = 3, p: int = 2, dv: int = 2, gated: bool = True):
    """Fully symbolic features ``φ(k_t)``, ``φ(q_t)`` (dimension ``p``), values
    (``dv``) and gates.  Returns the list of residuals
    ``S_t − Σ_{i≤t} u_i φ_iᵀ`` and ``S_t φ(q_t) − Σ_{i≤t} κ(k_i, q_t) u_i`` for
    ``t = 1 … T`` (all must be zero matrices)."""
    phk, phq, v = _vecs("f", T, p), _vecs("g", T, p), _vecs("v", T, dv)
    al = sp.symbols(f"alpha0:{T}", real=True) if gated else [1] * T
    be = sp.symbols(f"beta0:{T}", real=True) if gated else [1] * T
    kap = lambda x, y: (x.T * y)[0, 0]  # noqa: E731
    S = sp.zeros(dv, p)
    us, res = [], []
    for t in range(T):
        S = S + (al[t] * v[t] - be[t] * S * phk[t]) * phk[t].T
        u = al[t] * v[t] - be[t] * sum((kap(phk[i], phk[t]) * us[i] for i in range(t)), sp.zeros(dv, 1))
        us.append(u)
        Sk = sum((us[i] * phk[i].T for i in range(t + 1)), sp.zeros(dv, p))
        res.append((S - Sk).applyfunc(sp.expand))
        o = sum((kap(phk[i], phq[t]) * us[i] for i in range(t + 1)), sp.zeros(dv, 1))
        res.append((S * phq[t] - o).applyfunc(sp.expand))
    return res


def general_model_gap(p: int = 2, dv: int = 1):
    """With a write feature map ``φ₁`` different from the read map ``φ₂`` (``T =
    2``): the read-out of the one-state delta rule on ``φ₂`` minus the
    DeltaFormer read-out.  Not identically zero; it vanishes iff
    ``κ₁(k_1, w_2) = κ₂(k_1, k_2)`` (times the values), i.e. when the two
    kernels agree on the written pairs."""
    f1, f2, q = _vecs("a", 2, p), _vecs("b", 2, p), _vecs("q", 2, p)
    w = _vecs("w", 2, p)
    v = _vecs("v", 2, dv)
    u1 = v[0]
    u2 = v[1] - (f1[0].T * w[1])[0, 0] * u1
    o_df = (f2[0].T * q[1])[0, 0] * u1 + (f2[1].T * q[1])[0, 0] * u2
    S = u1 * f2[0].T
    S = S + (v[1] - S * f2[1]) * f2[1].T
    gap = (S * q[1] - o_df).applyfunc(sp.factor)
    return gap


# -- triangular and blockwise solutions ---------------------------------------
def _lower(T: int):
    return sp.Matrix(T, T, lambda t, i: sp.Symbol(f"a{t}_{i}", real=True) if i < t else 0)


def triangular_residual(T: int = 4, dv: int = 1) -> sp.Matrix:
    """``U_recursion − (I + A)^{-1} V`` for symbolic strictly lower ``A`` (zero)."""
    A = _lower(T)
    Vm = sp.Matrix(T, dv, lambda t, j: sp.Symbol(f"v{t}_{j}", real=True))
    U = sp.zeros(T, dv)
    for t in range(T):
        U[t, :] = Vm[t, :] - sum((A[t, i] * U[i, :] for i in range(t)), sp.zeros(1, dv))
    return (U - (sp.eye(T) + A).inv() * Vm).applyfunc(sp.simplify)


def blockwise_residual(T: int = 5, C: int = 2, dv: int = 1) -> sp.Matrix:
    """Block forward substitution with chunk ``C`` (last chunk ragged when
    ``C ∤ T``) minus ``(I + A)^{-1} V`` (zero)."""
    A = _lower(T)
    Vm = sp.Matrix(T, dv, lambda t, j: sp.Symbol(f"v{t}_{j}", real=True))
    U = sp.zeros(T, dv)
    for s in range(0, T, C):
        e = min(s + C, T)
        rhs = Vm[s:e, :]
        if s > 0:
            rhs = rhs - A[s:e, :s] * U[:s, :]
        U[s:e, :] = (sp.eye(e - s) + A[s:e, s:e]).inv() * rhs
    return (U - (sp.eye(T) + A).inv() * Vm).applyfunc(sp.simplify)


# -- work count ----------------------------------------------------------------
def chunk_work(n, s, e, d, dv) -> dict:
    """Per-chunk multiply-accumulates (see the module docstring)."""
    return {
        "kernel_write": n * e * d,
        "kernel_read": n * e * d,
        "inter_chunk": n * s * dv,
        "inverse": n * n * (n - 1) / 2 if isinstance(n, sp.Basic) else n * n * (n - 1) // 2,
        "intra_chunk": n * n * dv,
        "readout": n * e * dv,
    }


def blockwise_work(T: int, C: int, d: int, dv: int) -> dict:
    """Exact work of the blockwise form for any ``T``, ``C`` (ragged last chunk),
    summed from :func:`chunk_work`; also ``sequential_steps = ⌈T/C⌉``."""
    tot = {k: 0 for k in ("kernel_write", "kernel_read", "inter_chunk", "inverse", "intra_chunk", "readout")}
    steps = 0
    for s in range(0, T, C):
        e = min(s + C, T)
        for k, val in chunk_work(e - s, s, e, d, dv).items():
            tot[k] += val
        steps += 1
    tot["sequential_steps"] = steps
    tot["total"] = sum(tot[k] for k in ("kernel_write", "kernel_read", "inter_chunk", "inverse",
                                        "intra_chunk", "readout"))
    return tot


def blockwise_work_closed_form():
    """Sympy: the total for ``T = m C`` chunks of size ``C``, summed over the
    chunk index, and its difference from ``(d + d_v) T (T + C) + T C (C − 1)/2``
    (zero).  Returns ``(symbols, total, difference)``."""
    m, C, d, dv, b = sp.symbols("m C d d_v b", positive=True, integer=True)
    s, e = b * C, (b + 1) * C
    per = sum(chunk_work(C, s, e, d, dv).values())
    total = sp.simplify(sp.summation(per, (b, 0, m - 1)))
    T = m * C
    target = (d + dv) * T * (T + C) + T * C * (C - 1) / 2
    return (m, C, d, dv), total, sp.simplify(total - target)


def work_big_o_ratio(T: int, C: int, d: int, dv: int | None = None) -> float:
    """``total / (T² d + T C d + T C²)`` (bounded when ``d_v ≍ d``)."""
    dv = d if dv is None else dv
    w = blockwise_work(T, C, d, dv)["total"]
    return w / (T * T * d + T * C * d + T * C * C)
