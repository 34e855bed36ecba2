r"""The BL filter parallel in time, in float64 numpy (Särkkä & García-Fernández 2021).

The Bayesian Layer is a Kalman filter whose state is one key-space column per value column:
``F_t = diag α_t``, ``Q_t = ℓ_t² I``, ``H_t = k_tᵀ``, ``R_t = r_t²`` (BL Prop. 1, Eqs. 9-13).  All
value columns of a noise group share ``F, Q, H, R``, so they share the covariance.

**Elements.**  A run of tokens ``i..j`` is summarised, given the state ``x`` just before it (the
posterior after token ``i−1``), by an element ``(A, b, C, η, J)``:

* ``p(s_j | y_{i..j}, x) = N(A x + b, C)`` (``A, C`` ``D×D``; ``b`` ``D×m``, one column per value column);
* ``p(y_{i..j} | x) ∝ exp(−½ xᵀ J x + ηᵀ x)`` (``J`` ``D×D``, ``η`` ``D×m``).

``A, C, J`` depend on the keys and noises only and are shared by every value column; ``b, η``
are linear in the values.  One token ``(k, y, ℓ², r², α)``, with ``S = ℓ²‖k‖² + r²``:
``A = diag α − (ℓ²/S) k (α⊙k)ᵀ``, ``b = (ℓ²/S) k yᵀ``, ``C = ℓ² I − (ℓ⁴/S) k kᵀ``,
``η = (α⊙k) yᵀ/S``, ``J = (α⊙k)(α⊙k)ᵀ/S``.  A missing observation is ``k = 0``:
``(diag α, 0, ℓ² I, 0, 0)``.

**Combine** of an earlier element 1 with a later element 2 (associative, not commutative):

``A = A₂(I + C₁J₂)⁻¹A₁``,  ``b = A₂(I + C₁J₂)⁻¹(b₁ + C₁η₂) + b₂``,
``C = A₂(I + C₁J₂)⁻¹C₁A₂ᵀ + C₂``,
``η = A₁ᵀ(I + J₂C₁)⁻¹(η₂ − J₂b₁) + η₁``,  ``J = A₁ᵀ(I + J₂C₁)⁻¹J₂A₁ + J₁``.

``I + J₂C₁ = (I + C₁J₂)ᵀ``: one factorisation serves both solves.  With ``C, J ⪰ 0`` the
eigenvalues of ``C₁J₂`` are those of ``C₁^{½} J₂ C₁^{½} ⪰ 0``, so ``I + C₁J₂`` has eigenvalues
``≥ 1`` and ``(I + C₁J₂)⁻¹C₁ = (C₁⁻¹ + J₂)⁻¹ ⪯ C₁``: the solves never amplify.  The identity is
``(I, 0, 0, 0, 0)``; the initial state ``(M₀, P₀)`` is the element ``(0, M₀, P₀, 0, 0)``, and
the inclusive prefix ``(0, M₀, P₀, 0, 0) ⊕ e₁ ⊕ … ⊕ e_n`` is ``(0, M_n, P_n, 0, 0)``: the
filter's posterior after the last token of ``e_n``.

**Chunk elements in closed form.**  For a chunk of ``C`` tokens ``τ = 0..C−1`` (given ``x``, the
state is ``s_τ = γ_τ ⊙ x + noise``), with the decay ratios ``R[τ, i] = α_{i+1} ⊙ … ⊙ α_τ``
(products, exact for zero and negative decays), ``γ_τ = α_0 ⊙ R[τ, 0]`` and
``c_τ = Σ_{j≤τ} ℓ_j² R[τ, j]²``, the observations have, given ``x``, mean ``G x`` (rows
``g_τ = γ_τ ⊙ k_τ``) and covariance ``Σ[τ, i] = k_τᵀ (R[τ, i] ⊙ c_i ⊙ k_i) + r_τ² δ_{τi}``
(``τ ≥ i``; the chunk filtered from ``P₀ = 0``), and ``Cov(s_{C−1}, y_i | x) = w_i =
R[C−1, i] ⊙ c_i ⊙ k_i``.  Gaussian conditioning gives, with ``Σ = L Lᵀ`` and
``X_G = L⁻¹G``, ``X_W = L⁻¹W``, ``X_Y = L⁻¹Y``:

``A = diag(γ_{C−1}) − X_Wᵀ X_G``,  ``b = X_Wᵀ X_Y``,  ``C = diag(c_{C−1}) − X_Wᵀ X_W``,
``J = X_Gᵀ X_G``,  ``η = X_Gᵀ X_Y``.

``Σ ⪰ diag(r²)`` does not contain the running covariance, so the leaves are well conditioned
whatever the state; ``J`` has rank ``≤ C``.  With ``ℓ² = 0``: ``A = diag γ_{C−1}``, ``b = C = 0``.

**The filter** (:func:`bl_parallel`): the chunk elements of every chunk at once, one scan over
``[prior, e_1, …, e_N]`` (``scan="fold"``: sequential; ``"tree"``: the work-efficient odd-even
scan, depth ``2 log₂ N``; ``"doubling"``: Hillis-Steele, depth ``log₂ N``), then, from each
chunk's known start state, its tokens by the covariance-form Kalman step (``P̄ = αPα + ℓ²I``,
``u = P̄k``, ``β = (r² + kᵀu)⁻¹``, ``P = P̄ − βuuᵀ``), every chunk at once.  It imports nothing
from ``theory`` or ``gpu``; ``bl_filter`` is the reference.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from assocmem import validate as V

from .bl_chunked import dense_inputs

SCANS = ("tree", "fold", "doubling")


class ScanElement(NamedTuple):
    """``A, C, J [..., N, D, D]`` and ``b, eta [..., N, D, m]``; the element axis is ``-3``."""

    A: np.ndarray
    b: np.ndarray
    C: np.ndarray
    eta: np.ndarray
    J: np.ndarray


class ParallelTrace(NamedTuple):
    """What :func:`bl_parallel` returns (the group axis dropped when ``groups == 1``).

    ``M [D, m]``, ``P [D, D]`` final; ``y [T, m]`` read-outs ``M_tᵀ q_t`` (or None); ``beta [T]``,
    ``u [T, D]`` (``β_t = (r² + kᵀu)⁻¹``, ``u_t = P̄_t k_t``; 0 for a missing observation);
    ``Ms [T, D, m]``, ``Ps [T, D, D]`` the state after every token (``keep_states``) or None;
    ``chunk_M [N, D, m]``, ``chunk_P [N, D, D]`` the state before every chunk.
    """

    M: np.ndarray
    P: np.ndarray
    y: Optional[np.ndarray]
    beta: np.ndarray
    u: np.ndarray
    Ms: Optional[np.ndarray]
    Ps: Optional[np.ndarray]
    chunk_M: np.ndarray
    chunk_P: np.ndarray


def _T(x):
    return np.swapaxes(x, -1, -2)


def _sym(x):
    return 0.5 * (x + _T(x))


def combine(e1: ScanElement, e2: ScanElement) -> ScanElement:
    """``e1 ⊕ e2`` (``e1`` earlier), batched over any leading axes (they broadcast)."""
    D = e1.A.shape[-1]
    I = np.eye(D)
    CJ = e1.C @ e2.J
    F = I + CJ                                   # I + C₁J₂
    T2 = _T(np.linalg.solve(_T(F), _T(e2.A)))    # A₂ (I + C₁J₂)⁻¹
    T1 = _T(np.linalg.solve(F, e1.A))            # A₁ᵀ (I + J₂C₁)⁻¹ = ((I + C₁J₂)⁻¹ A₁)ᵀ
    return ScanElement(A=T2 @ e1.A,
                       b=T2 @ (e1.b + e1.C @ e2.eta) + e2.b,
                       C=_sym(T2 @ e1.C @ _T(e2.A)) + e2.C,
                       eta=T1 @ (e2.eta - e2.J @ e1.b) + e1.eta,
                       J=_sym(T1 @ e2.J @ e1.A) + e1.J)


def identity_element(D: int, m: int, lead=()) -> ScanElement:
    I = np.broadcast_to(np.eye(D), tuple(lead) + (D, D)).copy()
    z = np.zeros(tuple(lead) + (D, D))
    zb = np.zeros(tuple(lead) + (D, m))
    return ScanElement(I, zb, z, zb.copy(), z.copy())


def prior_element(M0: np.ndarray, P0: np.ndarray) -> ScanElement:
    """The initial state ``(M₀ [..., D, m], P₀ [..., D, D])`` as the element ``(0, M₀, P₀, 0, 0)``."""
    z = np.zeros_like(P0)
    return ScanElement(z, M0, P0, np.zeros_like(M0), z.copy())


def _take(e: ScanElement, sl) -> ScanElement:
    return ScanElement(*(x[..., sl, :, :] for x in e))


def _cat(es) -> ScanElement:
    return ScanElement(*(np.concatenate(xs, axis=-3) for xs in zip(*es)))


def fold(e: ScanElement) -> ScanElement:
    """Inclusive prefixes along the element axis, one combine after the other."""
    out = [_take(e, slice(0, 1))]
    for n in range(1, e.A.shape[-3]):
        out.append(combine(out[-1], _take(e, slice(n, n + 1))))
    return _cat(out)


def tree_scan(e: ScanElement) -> ScanElement:
    """Inclusive prefixes by the work-efficient odd-even scan (as ``jax.lax.associative_scan``):
    combine neighbours, scan the pairs (half as many), then fill in the even positions.
    ``≤ 2N`` combines in ``2⌈log₂ N⌉`` levels."""
    N = e.A.shape[-3]
    if N < 2:
        return e
    odd = tree_scan(combine(_take(e, slice(0, N - 1, 2)), _take(e, slice(1, N, 2))))   # prefixes 1, 3, 5, …
    n_even = (N + 1) // 2 - 1                                     # even positions 2, 4, … left to fill
    even = combine(_take(odd, slice(0, n_even)), _take(e, slice(2, N, 2)))
    out = []
    for x0, xe, xo in zip(e, even, odd):
        z = np.empty(np.broadcast_shapes(x0.shape[:-3], xe.shape[:-3], xo.shape[:-3]) + (N,) + x0.shape[-2:])
        z[..., 0:1, :, :] = x0[..., 0:1, :, :]
        z[..., 2::2, :, :] = xe
        z[..., 1::2, :, :] = xo
        out.append(z)
    return ScanElement(*out)


def doubling_scan(e: ScanElement) -> ScanElement:
    """Inclusive prefixes by recursive doubling (Hillis-Steele): ``⌈log₂ N⌉`` levels, ``N log N`` work."""
    N = e.A.shape[-3]
    d = 1
    while d < N:
        head = _take(e, slice(0, d))
        e = _cat([head, combine(_take(e, slice(0, N - d)), _take(e, slice(d, N)))])
        d *= 2
    return e


_SCAN = {"tree": tree_scan, "fold": fold, "doubling": doubling_scan}


def token_elements(k, y, l2, r2, alpha=None) -> ScanElement:
    """One element per token.  ``k [..., T, D]``, ``y [..., T, m]``, ``l2, r2 [..., T]``,
    ``alpha [..., T, D]`` or None (no decay); leading axes equal.  Elements ``[..., T, ·, ·]``."""
    D = k.shape[-1]
    a = np.ones_like(k) if alpha is None else alpha
    ak = a * k
    S = l2 * np.sum(k * k, -1) + r2
    w = (l2 / S)[..., None, None]
    I = np.eye(D)
    return ScanElement(A=a[..., None, :] * I - w * k[..., :, None] * ak[..., None, :],
                       b=w * k[..., :, None] * y[..., None, :],
                       C=l2[..., None, None] * I - (l2 * l2 / S)[..., None, None] * k[..., :, None] * k[..., None, :],
                       eta=ak[..., :, None] * y[..., None, :] / S[..., None, None],
                       J=ak[..., :, None] * ak[..., None, :] / S[..., None, None])


def pad_tokens(k, y, l2, r2, alpha, C: int):
    """The inputs padded to a multiple of ``C`` tokens with identity tokens (``k = 0``, ``y = 0``,
    ``ℓ² = 0``, ``r² = 1``, ``α = 1``: their element is the identity).  Returns the padded five."""
    T = k.shape[-2]
    p = -T % C
    if not p:
        return k, y, l2, r2, alpha

    def tok(x, val, vec):
        widths = [(0, 0)] * x.ndim
        widths[-2 if vec else -1] = (0, p)
        return np.pad(x, widths, constant_values=val)
    return (tok(k, 0.0, True), tok(y, 0.0, True), tok(l2, 0.0, False), tok(r2, 1.0, False),
            None if alpha is None else tok(alpha, 1.0, True))


def ratios(a):
    """``R[..., τ, i, :] = Π_{j=i+1}^{τ} a[..., j, :]`` for ``τ ≥ i`` (1 on the diagonal, 0 above);
    ``a [..., C, D]``, products only."""
    C = a.shape[-2]
    R = np.zeros(a.shape[:-2] + (C, C, a.shape[-1]))
    for i in range(C):
        R[..., i, i, :] = 1.0
        for t in range(i + 1, C):
            R[..., t, i, :] = R[..., t - 1, i, :] * a[..., t, :]
    return R


def chunk_factors(k, y, l2, r2, alpha, C: int):
    """Every chunk's element in factored form, from the chunk's own inputs (all chunks at once; shapes
    as :func:`token_elements`; ``T`` padded to a multiple of ``C`` with identity tokens):
    ``(γ_{C−1}, c_{C−1} [..., N, D], X_G, X_W [..., N, C, D], X_Y [..., N, C, m])`` with
    ``A = diag γ − X_Wᵀ X_G``, ``b = X_Wᵀ X_Y``, ``C = diag c − X_Wᵀ X_W``, ``J = X_Gᵀ X_G``,
    ``η = X_Gᵀ X_Y`` (:func:`chunk_elements`; :mod:`.bl_segments` absorbs them without forming them)."""
    k, y, l2, r2, alpha = pad_tokens(k, y, l2, r2, alpha, C)
    *lead, T, D = k.shape
    m = y.shape[-1]
    N = T // C
    kc = k.reshape(*lead, N, C, D)
    yc = y.reshape(*lead, N, C, m)
    lc = l2.reshape(*lead, N, C)
    rc = r2.reshape(*lead, N, C)
    a = np.ones_like(kc) if alpha is None else alpha.reshape(*lead, N, C, D)
    R = ratios(a)                                                # [..., N, τ, i, D]
    gam = a[..., :1, :] * R[..., :, 0, :]                        # γ_τ
    c = np.einsum("...j,...tjd->...td", lc, R * R)               # c_τ
    ck = c * kc
    Sy = np.einsum("...td,...tid,...id->...ti", kc, R, ck)       # τ ≥ i (R = 0 above)
    Sy = np.tril(Sy) + _T(np.tril(Sy, -1)) + rc[..., :, None] * np.eye(C)
    L = np.linalg.cholesky(Sy)
    Gm = gam * kc                                                # rows γ_τ ⊙ k_τ
    W = R[..., -1, :, :] * ck                                    # rows R[C−1, i] ⊙ c_i ⊙ k_i
    XG, XW, XY = (np.linalg.solve(L, Z) for Z in (Gm, W, yc))
    return gam[..., -1, :], c[..., -1, :], XG, XW, XY


def chunk_elements(k, y, l2, r2, alpha, C: int) -> ScanElement:
    """One element per chunk of ``C`` tokens, in closed form from the chunk's own inputs (all chunks
    at once; shapes as :func:`token_elements`; ``T`` padded to a multiple of ``C`` with identity
    tokens).  Elements ``[..., N, ·, ·]``, ``N = ⌈T/C⌉``."""
    gam, c, XG, XW, XY = chunk_factors(k, y, l2, r2, alpha, C)
    I = np.eye(XG.shape[-1])
    return ScanElement(A=gam[..., None, :] * I - _T(XW) @ XG,
                       b=_T(XW) @ XY,
                       C=c[..., None, :] * I - _sym(_T(XW) @ XW),
                       eta=_T(XG) @ XY,
                       J=_sym(_T(XG) @ XG))


def scan(e: ScanElement, how: str = "tree") -> ScanElement:
    """Inclusive prefixes of the elements ``e`` along the element axis, by :data:`SCANS` ``how``."""
    return _SCAN[V.choice("scan", how, SCANS)](e)


def bl_parallel(keys, values, queries=None, *, l2=0.0, r2=1.0, p0=1.0, alpha=None, groups: int = 1,
                M0=None, write_mask=None, chunk_size: int = 16, scan: str = "tree",
                keep_states: bool = False) -> ParallelTrace:
    """The dense BL filter parallel in time: chunk elements, one scan, the chunks' tokens.

    ``keys [T, D]``, ``values [T, m]``, ``queries [T, D]`` or None; ``l2`` (``≥ 0``) scalar or
    ``[T]``; ``r2`` (``> 0``) scalar, ``[T]`` or ``[T, G]`` with ``groups=G`` (value columns in
    ``G`` contiguous blocks, one covariance each); ``alpha [T, D]`` decays or None; ``p0``
    scalar ``≥ 0``, ``[D, D]`` or ``[G, D, D]`` PSD; ``M0 [D, m]`` or None (zero);
    ``write_mask [T]`` bool (False: a missing observation; the read-out still happens);
    ``chunk_size ≥ 1`` (the last chunk may be shorter); ``scan`` one of :data:`SCANS`.
    Same results as ``bl_filter(..., variant="dense")`` up to round-off.
    """
    how = V.choice("scan", scan, SCANS)

    def starts(kg, yg, lg, rg, ag, Cs, M0g, P0):
        elems = chunk_elements(kg, yg, lg, rg, ag, Cs)             # [G, N, ...]
        N = elems.A.shape[-3]
        prior = _take(prior_element(M0g[:, None], P0[:, None]), slice(0, 1))
        pref = _SCAN[how](_cat([prior, elems]))                    # [G, N + 1, ...]
        return pref.b[:, :N], pref.C[:, :N], pref.b[:, N], pref.C[:, N]

    return filter_from_starts(keys, values, queries, starts, l2=l2, r2=r2, p0=p0, alpha=alpha, groups=groups,
                              M0=M0, write_mask=write_mask, chunk_size=chunk_size, keep_states=keep_states)


def filter_from_starts(keys, values, queries, starts, *, l2, r2, p0, alpha, groups, M0, write_mask, chunk_size,
                       keep_states) -> ParallelTrace:
    """What :func:`bl_parallel` and :func:`.bl_segments.bl_segments` share: the inputs checked and
    split by noise group, the chunk-start states from ``starts(k, y, l2, r2, alpha, C, M0, P0)`` (per
    group, leading axis ``G``; returns ``(M_start [G, N, D, m], P_start [G, N, D, D], M_final,
    P_final)``), then every chunk's tokens at once from its start."""
    x = dense_inputs(keys, values, queries, l2=l2, r2=r2, p0=p0, alpha=alpha, groups=groups, M0=M0)
    Cs = V.count("chunk_size", chunk_size, 1)
    keys, values, queries, l2a, r2a, alpha, P0, M0a = x.keys, x.values, x.queries, x.l2, x.r2, x.alpha, x.P0, x.M0
    T, D, m, G, mg = x.T, x.D, x.m, x.G, x.mg
    live = np.ones(T, dtype=bool)
    if write_mask is not None:
        live = np.asarray(write_mask)
        if live.dtype != bool or live.shape != (T,):
            raise ValueError(f"write_mask must be a bool array of shape {(T,)} (got {live.dtype} {live.shape})")
        keys = np.where(live[:, None], keys, 0.0)        # a missing observation: k = 0

    # per group: k, l2, α shared; y and r² the group's own.  Leading axis G.
    kg = np.broadcast_to(keys, (G, T, D))
    lg = np.broadcast_to(l2a, (G, T))
    ag = None if alpha is None else np.broadcast_to(alpha, (G, T, D))
    yg = np.moveaxis(values.reshape(T, G, mg), 1, 0)               # [G, T, mg]
    rg = np.ascontiguousarray(r2a.T)                               # [G, T]
    M0g = np.moveaxis(M0a.reshape(D, G, mg), 1, 0)                 # [G, D, mg]

    Mstart, Pstart, Mlast, Plast = starts(kg, yg, lg, rg, ag, Cs, M0g, P0)   # state before chunk n; final
    N = Mstart.shape[1]

    # every chunk at once, token by token from its known start (the covariance-form Kalman step)
    kp, yp, lp, rp, ap = pad_tokens(kg, yg, lg, rg, ag, Cs)
    kc = kp.reshape(G, N, Cs, D)
    yc = yp.reshape(G, N, Cs, mg)
    lc = lp.reshape(G, N, Cs)
    rc = rp.reshape(G, N, Cs)
    acc = None if ap is None else ap.reshape(G, N, Cs, D)
    livec = np.pad(live, (0, N * Cs - T)).reshape(N, Cs)
    Ms = np.empty((G, N, Cs, D, mg))
    Ps = np.empty((G, N, Cs, D, D))
    us = np.empty((G, N, Cs, D))
    bs = np.empty((G, N, Cs))
    M, P = Mstart, Pstart
    I = np.eye(D)
    for t in range(Cs):
        a_t = np.ones((G, N, D)) if acc is None else acc[:, :, t]
        k_t = kc[:, :, t]
        Mbar = a_t[..., :, None] * M
        Pbar = a_t[..., :, None] * P * a_t[..., None, :] + lc[:, :, t, None, None] * I
        u = np.einsum("gnde,gne->gnd", Pbar, k_t)
        beta = 1.0 / (rc[:, :, t] + np.einsum("gnd,gnd->gn", u, k_t))
        e = yc[:, :, t] - np.einsum("gndc,gnd->gnc", Mbar, k_t)
        M = Mbar + (beta[..., None] * u)[..., :, None] * e[..., None, :]
        P = Pbar - beta[..., None, None] * u[..., :, None] * u[..., None, :]
        us[:, :, t], bs[:, :, t] = u, np.where(livec[:, t], beta, 0.0)
        Ms[:, :, t], Ps[:, :, t] = M, P
    flat = lambda x: x.reshape(G, N * Cs, *x.shape[3:])[:, :T]    # noqa: E731
    Ms, Ps, us, bs = flat(Ms), flat(Ps), flat(us), flat(bs)
    Mtok = np.moveaxis(Ms, 0, 2).reshape(T, D, m)                  # [T, D, G·mg]
    y = None if queries is None else np.einsum("tdc,td->tc", Mtok, queries)
    Mfin = np.moveaxis(Mlast, 0, 1).reshape(D, m)
    Pfin = Plast
    cM = np.moveaxis(Mstart, 0, 2).reshape(N, D, m)
    sq = (lambda x, ax: x[0]) if G == 1 else (lambda x, ax: np.moveaxis(x, 0, ax))       # noqa: E731
    return ParallelTrace(M=Mfin, P=sq(Pfin, 0), y=y, beta=sq(bs, 1), u=sq(us, 1),
                         Ms=Mtok if keep_states else None, Ps=sq(Ps, 1) if keep_states else None,
                         chunk_M=cM, chunk_P=sq(Pstart, 1))
