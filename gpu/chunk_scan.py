r"""``chunk_scan_bl``: the BL filter parallel in time — chunk elements, a log-depth scan, the chunks'
passes from their known start states.

The covariance recursion of :mod:`.chunk` is a chain of ``T/C`` dependent chunk steps per
(batch, head, group); here nothing is sequential across chunks except a scan of logarithmic depth
(Särkkä & García-Fernández 2021; the float64 reference is :mod:`assocmem.numerics.bl_parallel`,
whose docstring derives every formula):

1. **chunk elements**, all ``B·H·G·N`` chunks at once (``N = ⌈T/C⌉``): ``(A, b, C, η, J)`` of each
   chunk from its own inputs — decay ratios ``R`` (products), ``γ``, ``c``, one ``C×C``
   Cholesky of ``Σ = (process-noise part) + diag(r²)`` and three triangular solves;
   ``A = diag γ_{C−1} − X_WᵀX_G``, ``b = X_WᵀX_Y``, ``C = diag c_{C−1} − X_WᵀX_W``,
   ``J = X_GᵀX_G``, ``η = X_GᵀX_Y``; ``A, C, J`` are ``D×D`` per (b, h, g, chunk) and shared by the
   group's value columns, ``b, η`` ``D×(m/G)``;
2. **the scan** over ``[prior, e_1, …, e_N]`` (the initial state as ``(0, M₀, P₀, 0, 0)``), the
   work-efficient odd-even form of ``jax.lax.associative_scan`` (``≤ 2N`` combines in
   ``2⌈log₂(N+1)⌉`` batched levels); the combine (earlier 1, later 2):
   ``A = A₂F⁻¹A₁``, ``b = A₂F⁻¹(b₁ + C₁η₂) + b₂``, ``C = A₂F⁻¹C₁A₂ᵀ + C₂``,
   ``η = A₁ᵀF⁻ᵀ(η₂ − J₂b₁) + η₁``, ``J = A₁ᵀF⁻ᵀJ₂A₁ + J₁``, ``F = I + C₁J₂`` (one LU serves
   ``F`` and ``Fᵀ = I + J₂C₁``); prefix ``n`` is ``(0, M, P, 0, 0)`` at the end of chunk ``n``;
3. **the chunks' passes**, every chunk at once from its start state: the sequence reshaped to
   ``B·N`` sequences of ``C`` tokens, each started from its chunk's ``(M, P)`` through
   ``initial_state`` of an existing op — ``within="recurrent"``: :func:`.fused_recurrent_bl`
   (token by token, its Triton kernels: ``B·N·H·G`` programs of ``C`` steps); ``"chunk"``:
   :func:`.chunk_bl` (one chunk per sequence, ``chunk_size ∈ {16, 32, 64}``).

Steps 1 and 2 are torch operations (any dtype; fp32 on the kernel paths), step 3 the inner op's
kernels (CUDA, or the interpreter under ``TRITON_INTERPRET=1``) or its torch reference on a CPU.
Differentiable through autograd (the scan's ``cholesky``, ``solve_triangular``, ``lu_factor`` /
``lu_solve`` and the inner op's backward).  A combine costs ``≈ 17 D³ + 8 D² m/G`` flops (``C₁J₂``,
one LU, two ``lu_solve`` with ``D`` right-hand sides, five ``D×D`` products; four ``D×D`` by
``D×m/G`` products for ``b, η``), and the odd-even scan does ``≈ 2N`` of them per (b, h, g).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ._launch import enter
from .naive import CHUNK_SIZES, _ratios

WITHIN = ("recurrent", "chunk")
SCAN_DTYPES = (torch.float32, torch.float64)
MAX_CHUNK = 128


class Element(NamedTuple):
    """``A, C, J [..., N, D, D]``, ``b, eta [..., N, D, mg]``; the element axis is ``-3``."""

    A: torch.Tensor
    b: torch.Tensor
    C: torch.Tensor
    eta: torch.Tensor
    J: torch.Tensor


def _sym(x):
    return 0.5 * (x + x.mT)


def combine(e1: Element, e2: Element) -> Element:
    """``e1 ⊕ e2`` (``e1`` earlier), batched over the leading axes."""
    D = e1.A.shape[-1]
    eye = torch.eye(D, dtype=e1.A.dtype, device=e1.A.device)
    LU, piv = torch.linalg.lu_factor(eye + e1.C @ e2.J)                   # F = I + C₁J₂
    T2 = torch.linalg.lu_solve(LU, piv, e2.A.mT, adjoint=True).mT          # A₂ F⁻¹
    T1 = torch.linalg.lu_solve(LU, piv, e1.A).mT                           # A₁ᵀ F⁻ᵀ = A₁ᵀ (I + J₂C₁)⁻¹
    return Element(A=T2 @ e1.A,
                   b=T2 @ (e1.b + e1.C @ e2.eta) + e2.b,
                   C=_sym(T2 @ e1.C @ e2.A.mT) + e2.C,
                   eta=T1 @ (e2.eta - e2.J @ e1.b) + e1.eta,
                   J=_sym(T1 @ e2.J @ e1.A) + e1.J)


def _sl(e: Element, sl) -> Element:
    return Element(*(x[..., sl, :, :] for x in e))


def associative_scan(e: Element) -> Element:
    """Inclusive prefixes along the element axis (``-3``): combine neighbours, scan the pairs, fill
    in the even positions (the odd-even scan of ``jax.lax.associative_scan``)."""
    N = e.A.shape[-3]
    if N < 2:
        return e
    odd = associative_scan(combine(_sl(e, slice(0, N - 1, 2)), _sl(e, slice(1, N, 2))))   # prefixes 1, 3, …
    n_even = (N + 1) // 2 - 1
    even = combine(_sl(odd, slice(0, n_even)), _sl(e, slice(2, N, 2)))                # prefixes 2, 4, …
    out = []
    for x0, xe, xo in zip(e, even, odd):
        ev = torch.cat([x0[..., :1, :, :], xe], dim=-3)            # ⌈N/2⌉ even positions
        n2 = xo.shape[-3]
        inter = torch.stack([ev[..., :n2, :, :], xo], dim=-3).flatten(-4, -3)
        out.append(torch.cat([inter, ev[..., n2:, :, :]], dim=-3))
    return Element(*out)


def chunk_elements(k, y, l2, r2, a) -> Element:
    """The elements of every chunk at once.  ``k [..., 1, N, C, D]`` (the key side is shared by the
    groups), ``y [..., G, N, C, mg]``, ``l2 [..., 1, N, C]``, ``r2 [..., G, N, C]``,
    ``a [..., 1, N, C, D]`` or None; one arithmetic dtype.  Returns ``[..., G, N, ·, ·]``."""
    C, D = k.shape[-2:]
    eye_c = torch.eye(C, dtype=k.dtype, device=k.device)
    eye_d = torch.eye(D, dtype=k.dtype, device=k.device)
    if a is None:
        gam = torch.ones_like(k)
        c = torch.cumsum(l2, -1)[..., None].expand_as(k)                     # c_τ = Σ_{j≤τ} ℓ_j²
        ck = c * k
        Sy = torch.tril(k @ ck.mT)                                          # k_τᵀ (c_i ⊙ k_i), τ ≥ i
        W = ck                                                              # R[C−1, i] = 1: w_i = c_i k_i
    else:
        R = _ratios(a)                                                      # [..., τ, i, D]
        gam = a[..., :1, :] * R[..., :, 0, :]
        c = torch.einsum("...j,...tjd->...td", l2, R * R)
        ck = c * k
        Sy = torch.einsum("...td,...tid,...id->...ti", k, R, ck)            # τ ≥ i (R = 0 above)
        W = R[..., -1, :, :] * ck
    Sy = Sy + torch.tril(Sy, -1).mT + r2[..., :, None] * eye_c             # broadcasts over the groups
    L = torch.linalg.cholesky(Sy)
    bshape = L.shape[:-2]
    XG = torch.linalg.solve_triangular(L, (gam * k).expand(*bshape, C, D), upper=False)
    XW = torch.linalg.solve_triangular(L, W.expand(*bshape, C, D), upper=False)
    XY = torch.linalg.solve_triangular(L, y, upper=False)
    return Element(A=gam[..., -1, None, :] * eye_d - XW.mT @ XG,
                   b=XW.mT @ XY,
                   C=c[..., -1, None, :] * eye_d - _sym(XW.mT @ XW),
                   eta=XG.mT @ XY,
                   J=_sym(XG.mT @ XG))


def _pad(x, p: int, value: float):
    """``x [B, T, H, ...]`` padded with ``p`` tokens of ``value``."""
    if not p:
        return x
    return torch.cat([x, x.new_full((x.shape[0], p) + tuple(x.shape[2:]), value)], dim=1)


def chunk_scan_bl(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, output_final_state=False,
                  chunk_size: int = 16, *, g=None, validate: bool = True, write_mask=None,
                  within: str = "recurrent", scan_dtype=torch.float64, return_starts: bool = False):
    r"""The BL filter parallel in time; the contract of :func:`.fused_recurrent.fused_recurrent_bl`
    (``write_mask``, groups, decays ``alpha`` or log-decays ``g``, ``p0``, ``initial_state``).

    ``chunk_size``: tokens per scan element, ``1 ≤ C ≤ 128`` (``within="chunk"``: 16, 32 or 64);
    ``within``: the pass inside each chunk from its start state, ``"recurrent"`` (default;
    :func:`.fused_recurrent_bl`) or ``"chunk"`` (:func:`.chunk_bl`).  Returns
    ``(o, final_state or None)``, with ``return_starts`` a third item ``(M [B, H, N, D, m],
    P [B, H, G, N, D, D])``: the state before every chunk (what the scan computed).

    ``scan_dtype``: the arithmetic of the elements and the scan, ``promote(input dtype, scan_dtype)``.
    The default float64 keeps fp32 inputs' error below the token-by-token kernel's in the collapsing
    regime; a float32 scan loses the conditioning ``‖C₁‖‖J₂‖`` of the prior against the first chunks'
    rank-``C`` information (at ``D = 64``, ``C = 16``, ``ℓ² = 0``, ``r² = 1e-4``: 7–22× the
    token-by-token kernel's error; ``benchmarks/cpu_scan_precision.json``, docs/gpu.md).  The inner
    op runs in its own arithmetic (fp32 on its kernels, the input dtype in its torch reference on a
    CPU); the chunk-start states are handed to it in ``promote(dtype of v, float32)``.
    """
    from .chunk import chunk_bl
    from .fused_recurrent import fused_recurrent_bl

    if within not in WITHIN:
        raise ValueError(f"within must be one of {', '.join(map(repr, WITHIN))} (got {within!r})")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not 1 <= chunk_size <= MAX_CHUNK:
        raise ValueError(f"chunk_size must be an integer in [1, {MAX_CHUNK}] (got {chunk_size!r})")
    if within == "chunk" and chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES} with within='chunk' (got {chunk_size!r})")
    x, _ = enter("chunk_scan_bl", q, k, v, l2, r2, alpha, p0, initial_state, g=g, validate=validate,
                 write_mask=write_mask)
    B, T, H, D, m = x.dims
    G = x.G
    mg = m // G
    C = chunk_size
    N = -(-T // C)
    p = N * C - T
    if scan_dtype not in SCAN_DTYPES:
        raise ValueError(f"scan_dtype must be torch.float32 or torch.float64 (got {scan_dtype!r})")
    dt = torch.promote_types(x.q.dtype, scan_dtype)
    dev = x.q.device
    # padded with identity tokens (k = 0, v = 0, ℓ² = 0, r² = 1, α = 1: their element is the identity)
    kp = _pad(x.k, p, 0.0)
    vp = _pad(x.v, p, 0.0)
    lp = _pad(x.l2, p, 0.0)
    rp = _pad(x.r2, p, 1.0)
    dp = None if x.alpha is None else _pad(x.alpha, p, 0.0 if x.log_alpha else 1.0)

    # 1. chunk elements, [B, H, G, N, ...]
    kc = kp.to(dt).view(B, N, C, H, D).permute(0, 3, 1, 2, 4)[:, :, None]              # [B, H, 1, N, C, D]
    yc = vp.to(dt).view(B, N, C, H, G, mg).permute(0, 3, 4, 1, 2, 5)                   # [B, H, G, N, C, mg]
    lc = lp.to(dt).view(B, N, C, H).permute(0, 3, 1, 2)[:, :, None]                    # [B, H, 1, N, C]
    rc = rp.to(dt).view(B, N, C, H, G).permute(0, 3, 4, 1, 2)                          # [B, H, G, N, C]
    ac = None
    if dp is not None:
        a = torch.exp(dp.to(dt)) if x.log_alpha else dp.to(dt)
        ac = a.view(B, N, C, H, D).permute(0, 3, 1, 2, 4)[:, :, None]
    elems = chunk_elements(kc, yc, lc, rc, ac)

    # 2. the scan over [prior, e_1, …, e_N]
    if x.M0 is None:
        M0 = torch.zeros(B, H, G, 1, D, mg, dtype=dt, device=dev)
        P0 = (x.p0 * torch.eye(D, dtype=dt, device=dev)).expand(B, H, G, 1, D, D)
    else:
        M0 = x.M0.to(dt).view(B, H, D, G, mg).permute(0, 1, 3, 2, 4)[:, :, :, None]
        P0 = x.P0.to(dt)[:, :, :, None]
    zD = torch.zeros_like(P0)
    prior = Element(zD, M0, P0, torch.zeros_like(M0), zD)
    full = Element(*(torch.cat([pr.expand(*el.shape[:3], 1, *el.shape[-2:]), el], dim=-3)
                     for pr, el in zip(prior, elems)))
    pref = associative_scan(full)
    Ms, Ps = pref.b[..., :N, :, :], pref.C[..., :N, :, :]                              # before chunk n

    # 3. every chunk from its start state: B·N sequences of C tokens
    seq = lambda t: t.reshape(B * N, C, *t.shape[2:])                                   # noqa: E731
    st = torch.promote_types(x.v.dtype, torch.float32)                                 # the inner op's state dtype
    M_in = Ms.permute(0, 3, 1, 4, 2, 5).reshape(B * N, H, D, m).to(st)                  # [B·N, H, D, m]
    P_in = Ps.permute(0, 3, 1, 2, 4, 5).reshape(B * N, H, G, D, D).to(st)
    if not x.grouped:
        P_in = P_in[:, :, 0]
    r2_in = seq(rp if x.grouped else rp[..., 0])
    dec = {} if dp is None else {("g" if x.log_alpha else "alpha"): seq(dp)}
    args = (seq(_pad(x.q, p, 0.0)), seq(kp), seq(vp), seq(lp), r2_in)
    if within == "recurrent":
        o, fin = fused_recurrent_bl(*args, initial_state=(M_in, P_in), output_final_state=True, validate=False, **dec)
    else:
        o, fin = chunk_bl(*args, initial_state=(M_in, P_in), output_final_state=True, validate=False,
                          chunk_size=C, **dec)
    o = o.reshape(B, N * C, H, m)[:, :T]
    final = None
    if output_final_state:
        final = (fin[0].view(B, N, H, D, m)[:, -1], fin[1].view(B, N, *fin[1].shape[1:])[:, -1])
    if not return_starts:
        return o, final
    return o, final, (Ms.permute(0, 1, 3, 4, 2, 5).reshape(B, H, N, D, m), Ps)
