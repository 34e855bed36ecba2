r"""The BL filter parallel in time over segments, in float64 numpy: the two-level form (issue 19).

:mod:`.bl_parallel` scans one element per chunk: every combine solves with a ``D×D`` matrix, and a
scan over ``T/C`` chunk elements does ``≈ 2T/C`` of them.  Here a sequence is cut into segments of
``L`` chunks, and the work runs at three levels:

1. **every segment's element, all segments at once**: the segment's chunks absorbed one after the
   other into the identity element (a chain of ``L`` steps, :func:`absorb`);
2. **a scan over the ``⌈N/L⌉`` segment elements** behind the prior (``D×D`` combines, as in
   :mod:`.bl_parallel`, but ``L`` times fewer);
3. **every segment's chunk chain from its now known start state, all segments at once** (``L``
   steps of the same :func:`absorb`, from the element ``(0, M, P, 0, 0)``, so only ``M, P`` change:
   the chunk chain that the GPU's chunked op runs today, cut to one segment).

The critical path is ``2L`` chunk steps and the scan's ``2⌈log₂(N/L + 1)⌉`` combines instead of
``N = T/C`` chunk steps; the number of independent chains grows from ``B·H`` to ``B·H·N/L``.

**Absorbing a chunk costs no ``D×D`` solve.**  A chunk's element (:func:`.bl_parallel.chunk_elements`)
has the factored form, from its ``C×C`` Cholesky ``Σ = LLᵀ`` and ``X_G = L⁻¹G``, ``X_W = L⁻¹W``,
``X_Y = L⁻¹Y`` (``C×D``, ``C×D``, ``C×m``), with ``γ = γ_{C−1}`` and ``c = c_{C−1}``:

``A_e = diag γ − X_Wᵀ X_G``,  ``b_e = X_Wᵀ X_Y``,  ``C_e = diag c − X_Wᵀ X_W``,  ``J_e = X_Gᵀ X_G``,
``η_e = X_Gᵀ X_Y``.

``J_e`` has rank ``≤ C``, so in the combine ``S ⊕ e`` (``S`` earlier) Woodbury turns
``(I + C_S J_e)⁻¹`` into a ``C×C`` solve with ``K = I_C + X_G C_S X_Gᵀ`` (symmetric, eigenvalues
``≥ 1``: a Cholesky).  With ``Z = X_G A_S``, ``U = X_G C_S``, ``R = X_Y − X_G b_S`` (the chunk's
innovation):

``(I + C_S J_e)⁻¹ A_S = A_S − Uᵀ K⁻¹ Z``,  ``(I + C_S J_e)⁻¹ C_S = C_S − Uᵀ K⁻¹ U``,
``(I + C_S J_e)⁻¹ (b_S + C_S η_e) = b_S + Uᵀ K⁻¹ R``  (because ``X_G Uᵀ = K − I``),
``A_Sᵀ (I + J_e C_S)⁻¹ J_e A_S = Zᵀ K⁻¹ Z``,  ``A_Sᵀ (I + J_e C_S)⁻¹ (η_e − J_e b_S) = Zᵀ K⁻¹ R``,

so ``A = A_e(A_S − UᵀK⁻¹Z)``, ``b = A_e(b_S + UᵀK⁻¹R) + b_e``, ``C = A_e(C_S − UᵀK⁻¹U)A_eᵀ + C_e``,
``J = ZᵀK⁻¹Z + J_S``, ``η = ZᵀK⁻¹R + η_S``.  Multiplying by ``A_e`` (diagonal plus rank ``C``) is
``O(CD²)`` too.  At ``C = 16``, ``D = m = 64`` one step of level 1 is about 1.25 M multiply-adds
(:func:`absorb_flops`), one step of level 3 (``A_S = J_S = η_S = 0``) 0.77 M, and a ``D×D`` combine
about ``9.5 D³`` = 2.5 M.

:func:`bl_segments` returns :class:`.bl_parallel.ParallelTrace` as :func:`.bl_parallel.bl_parallel`
does; ``bl_filter`` is the reference (``tests/numerics/test_bl_segments.py``).  Nothing here
imports ``theory`` or ``gpu``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from assocmem import validate as V

from .bl_parallel import (SCANS, ScanElement, _cat, _sym, _T, chunk_factors, filter_from_starts, identity_element,
                          prior_element, scan)


class ChunkFactors(NamedTuple):
    """A chunk's element in factored form (:func:`.bl_parallel.chunk_factors`): ``gam, c [..., D]``,
    ``XG, XW [..., C, D]``, ``XY [..., C, m]``."""

    gam: np.ndarray
    c: np.ndarray
    XG: np.ndarray
    XW: np.ndarray
    XY: np.ndarray


def absorb(S: ScanElement, f) -> ScanElement:
    """``S ⊕ e`` for a chunk element ``e`` given by its factors ``f`` (:class:`ChunkFactors`), with a
    ``C×C`` Cholesky and no ``D×D`` solve; batched over leading axes (they broadcast)."""
    gam, c, XG, XW, XY = f
    Z = XG @ S.A                                             # C×D
    U = XG @ S.C                                             # C×D
    R = XY - XG @ S.b                                        # C×m: the chunk's innovation
    K = np.eye(XG.shape[-2]) + U @ _T(XG)                    # I + X_G C_S X_Gᵀ, eigenvalues ≥ 1
    K = _sym(K)
    Lk = np.linalg.cholesky(K)

    def kinv(x):                                             # K⁻¹ x by the two triangular solves
        return np.linalg.solve(_T(Lk), np.linalg.solve(Lk, x))

    KZ, KU, KR = kinv(Z), kinv(U), kinv(R)

    def by_Ae(x):                                            # A_e x = γ ⊙ x − X_Wᵀ (X_G x)
        return gam[..., :, None] * x - _T(XW) @ (XG @ x)

    FA = S.A - _T(U) @ KZ
    FC = _sym(S.C - _T(U) @ KU)
    Cn = _T(by_Ae(_T(by_Ae(FC))))                            # A_e FC A_eᵀ
    return ScanElement(A=by_Ae(FA),
                       b=by_Ae(S.b + _T(U) @ KR) + _T(XW) @ XY,
                       C=_sym(Cn) + c[..., :, None] * np.eye(c.shape[-1]) - _sym(_T(XW) @ XW),
                       eta=_T(Z) @ KR + S.eta,
                       J=_sym(_T(Z) @ KZ) + S.J)


def absorb_flops(C: int, D: int, m: int, start_known: bool = False) -> int:
    """Multiply-adds of one :func:`absorb` step as written (the leading terms, per value group):
    level 1 (``start_known=False``) or level 3 (``A_S = J_S = η_S = 0``: ``Z`` and the ``A``, ``J``,
    ``η`` updates drop out)."""
    cd2 = C * D * D
    if start_known:
        # U, K, K⁻¹U, UᵀK⁻¹U, A_e·FC·A_eᵀ (two products with a diagonal-plus-rank-C matrix, 2CD² each),
        # X_WᵀX_W; the mean: X_G b, K⁻¹R, UᵀK⁻¹R, A_e·(·)
        return (cd2 + C * C * D + C * C * D + cd2 + 4 * cd2 + cd2 + C * C * C // 3
                + 4 * C * D * m + C * C * m)
    # Z, U, K, K⁻¹[Z|U], UᵀK⁻¹Z, UᵀK⁻¹U, A_e·FA, A_e·FC·A_eᵀ, ZᵀK⁻¹Z, X_WᵀX_W; the mean terms
    return (2 * cd2 + C * C * D + 2 * C * C * D + 2 * cd2 + 2 * cd2 + 4 * cd2 + cd2 + cd2 + C * C * C // 3
            + 6 * C * D * m + C * C * m)


def bl_segments(keys, values, queries=None, *, l2=0.0, r2=1.0, p0=1.0, alpha=None, groups: int = 1,
                M0=None, write_mask=None, chunk_size: int = 16, segment_chunks: int = 8, scan_how: str = "tree",
                keep_states: bool = False):
    """The dense BL filter in the two-level form: segments of ``segment_chunks`` chunks of
    ``chunk_size`` tokens (the last of each may be shorter: padded with identity chunks and tokens).
    Arguments and result as :func:`.bl_parallel.bl_parallel` (``scan_how``: its ``scan``, the order of
    level 2).  Same results as ``bl_filter(..., variant="dense")`` up to round-off."""
    Ls = V.count("segment_chunks", segment_chunks, 1)
    how = V.choice("scan_how", scan_how, SCANS)

    def starts(kg, yg, lg, rg, ag, Cs, M0g, P0):
        return segment_starts(chunk_factors(kg, yg, lg, rg, ag, Cs), M0g, P0, Ls, how)

    return filter_from_starts(keys, values, queries, starts, l2=l2, r2=r2, p0=p0, alpha=alpha, groups=groups,
                              M0=M0, write_mask=write_mask, chunk_size=chunk_size, keep_states=keep_states)


def segment_elements(f, segment_chunks: int) -> ScanElement:
    """Level 1: the element of every segment of ``segment_chunks`` chunks, all segments at once.
    ``f`` the chunks' factors ``[..., N, ·]`` (:func:`.bl_parallel.chunk_factors`); returns elements
    ``[..., ⌈N/L⌉, ·, ·]`` (a last, shorter segment padded with identity chunks)."""
    fs = _pad_segments(ChunkFactors(*f), segment_chunks)
    D, m = fs.XG.shape[-1], fs.XY.shape[-1]
    E = identity_element(D, m, fs.gam.shape[:-2])
    for j in range(segment_chunks):
        E = absorb(E, _chunk(fs, j))
    return E


def _chunk(fs: ChunkFactors, j: int) -> ChunkFactors:
    """The ``j``-th chunk of every segment, from factors ``[..., NS, Ls, ·]``."""
    return ChunkFactors(fs.gam[..., j, :], fs.c[..., j, :], fs.XG[..., j, :, :], fs.XW[..., j, :, :],
                        fs.XY[..., j, :, :])


def _pad_segments(f: ChunkFactors, Ls: int) -> ChunkFactors:
    """``[..., N, ·]`` → ``[..., NS, Ls, ·]``, padded with identity chunks (``γ = 1``, the rest 0)."""
    N = f.gam.shape[-2]
    NS = -(-N // Ls)
    pad = NS * Ls - N
    out = []
    for name, x in zip(ChunkFactors._fields, f):
        if pad:
            widths = [(0, 0)] * x.ndim
            ax = x.ndim - (2 if name in ("gam", "c") else 3)
            widths[ax] = (0, pad)
            x = np.pad(x, widths, constant_values=1.0 if name == "gam" else 0.0)
        ax = x.ndim - (2 if name in ("gam", "c") else 3)
        out.append(x.reshape(x.shape[:ax] + (NS, Ls) + x.shape[ax + 1:]))
    return ChunkFactors(*out)


def segment_starts(f, M0g, P0, segment_chunks: int, scan_how: str = "tree"):
    """All three levels: from the chunks' factors ``f`` (``[G, N, ·]``), the initial states ``M0g
    [G, D, m]``, ``P0 [G, D, D]``, the state before every chunk and after the last:
    ``(M_start [G, N, D, m], P_start [G, N, D, D], M_final [G, D, m], P_final [G, D, D])``."""
    Ls = segment_chunks
    N = f[0].shape[-2]
    E = segment_elements(f, Ls)                                            # level 1: [G, NS, ·]
    NS = E.A.shape[-3]
    prior = ScanElement(*(x[:, None] for x in prior_element(M0g, P0)))
    pref = scan(_cat([prior, E]), scan_how)                                # level 2: [G, NS + 1, ·]
    fs = _pad_segments(ChunkFactors(*f), Ls)                               # [G, NS, Ls, ·]
    z = np.zeros_like(pref.C[:, :NS])
    S = ScanElement(z, pref.b[:, :NS], pref.C[:, :NS], np.zeros_like(pref.b[:, :NS]), z.copy())
    Ms, Ps = [], []
    for j in range(Ls):                                                    # level 3, every segment at once
        Ms.append(S.b)
        Ps.append(S.C)
        S = absorb(S, _chunk(fs, j))
    Mst = np.stack(Ms, 2).reshape(pref.b.shape[0], NS * Ls, *pref.b.shape[-2:])[:, :N]
    Pst = np.stack(Ps, 2).reshape(pref.C.shape[0], NS * Ls, *pref.C.shape[-2:])[:, :N]
    return Mst, Pst, pref.b[:, NS], pref.C[:, NS]
