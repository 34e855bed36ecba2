r"""The chunked BL forward parallel over time: two levels of super-chunks (issue 6, opt-in).

The chunked kernels of :mod:`.chunk` walk all ``T`` factorisation rows of a
(batch, head) in one program, so with fewer programs than SMs (S3: 64 for 132)
part of the GPU idles and nothing hides the row latency.  Here the sequence is cut
into ``S`` super-chunks of ``L`` tokens (``L`` a multiple of the chunk size), and

1. **level 1**, all super-chunks at once (the same two kernels on ``[B·S, L, ...]``
   views): each is filtered from a *known* start state — covariance ``P_0 = 0`` and,
   per noise group, mean ``[I | 0]`` on values ``[0 | v]`` — which gives its exact
   summary (Särkkä & García-Fernández 2021)

       ``x_end | x_start, y ~ N(A x_start + b, C)``,  likelihood of ``y`` in ``x_start``:
       precision ``J = Σ_t β_t h_t h_tᵀ``, information ``η = Σ_t β_t h_t ε_tᵀ``,

   with ``A, b`` the final means of the ``I`` and ``v`` columns, ``C`` the final
   covariance, ``h_t = −`` (innovations of the ``I`` columns) and ``ε_t`` the
   innovations of the ``v`` columns;
2. **level 2**, in sequence over super-chunks (float64 torch, batched over batch,
   head and group): ``Σ = P (I + J P)⁻¹``, ``m = M + Σ (η − J M)``,
   ``M ← A m + b``, ``P ← A Σ Aᵀ + C`` — the true start state of the next one;
3. **level 3**, all super-chunks at once again: the chunked passes from the true
   start states, which give ``o`` and the ``u_t, β_t, e_t`` of the whole sequence:
   the same tensors as the one-level forward, so the same backward.

Exact in exact arithmetic (``benchmarks/two_level_identity.py`` checks the
identity in float64); in fp32 the interpreter tests compare it with the
one-level kernels and float64 ``naive_bl``.  Twice the covariance work and a
``(G·D + m)``-column value pass at level 1, for ``S`` times the programs and ``1/S``
of the rows per program.

Measured on the H200 (``benchmarks/h200_chunk_two_level.json``): exact (3.0e-7
against float64, NaN-poisoned) but **slower** as written — S3 forward 9.35 ms at
``S = 1``, 16.1 at ``S = 4``, 20.8 at ``S = 8``; S1 2.55 / 10.2 / 13.0 ms.  Not yet
broken down; suspects: level 2 as ~15 batched float64 torch operations (``D×D``
solves among them) per super-chunk, launched in sequence; the level-1 value pass
with ``G·D + m`` columns; the padded copies and einsums.  So it stays off by default
(``chunk_bl(..., config={"super_chunks": S})``); a fused level-2 kernel and a
level-1 pass that computes ``J, η`` without materialising the innovations are what
it would need.
"""
from __future__ import annotations

import torch


def super_chunk_length(T: int, S: int, C: int) -> tuple[int, int]:
    """``(S, L)``: the number of super-chunks actually used and their length, a multiple of
    ``C`` covering ``T`` (``S`` shrinks so that no super-chunk is padding only)."""
    L = -(-T // S)
    L = -(-L // C) * C
    return -(-T // L), L


def _pad_split(x, S, L, fill):
    """``[B, T, H, ...]`` -> ``[B·S, L, H, ...]``, padding the end of time with ``fill``."""
    B, T = x.shape[:2]
    if S * L != T:
        pad = x.new_full((B, S * L - T, *x.shape[2:]), fill)
        x = torch.cat([x, pad], 1)
    return x.reshape(B * S, L, *x.shape[2:])


def two_level_forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e, S, chunk_forward):
    """The two-level forward; the arguments and the return value of :func:`.chunk._chunk_forward`
    (``chunk_forward``, passed in to keep one launcher), plus ``S`` super-chunks."""
    B, T, H, D = q.shape
    m = v.shape[-1]
    G = r2.shape[-1]
    mg = m // G
    S, L = super_chunk_length(T, S, C)
    if S == 1:
        return chunk_forward(K, q, k, v, l2, r2, a, M0, P0, C, cfg, need_e)
    dev = q.device
    f32 = torch.float32
    qs, ks, vs = (_pad_split(t, S, L, 0.0) for t in (q, k, v))
    l2s, r2s = _pad_split(l2, S, L, 0.0), _pad_split(r2, S, L, 1.0)
    as_ = None if a is None else _pad_split(a, S, L, 1.0)
    BS = B * S
    # ---- level 1: summaries from a known start, values [0 | v_g] and mean [I | 0] per group
    w = D + mg
    v1 = torch.zeros(BS, L, H, G, w, dtype=f32, device=dev)
    v1[..., D:] = vs.float().reshape(BS, L, H, G, mg)
    M1 = torch.zeros(BS, H, D, G, w, dtype=f32, device=dev)
    M1[..., :D] = torch.eye(D, dtype=f32, device=dev)[:, None, :]
    P1 = torch.zeros(BS, H, G, D, D, dtype=f32, device=dev)
    _, MT1, Cc, _, beta1, e1 = chunk_forward(K, qs, ks, v1.reshape(BS, L, H, G * w), l2s, r2s, as_,
                                             M1.reshape(BS, H, D, G * w), P1, C, cfg, True)
    MT1 = MT1.reshape(B, S, H, D, G, w)
    A, b = MT1[..., :D], MT1[..., D:]                                    # [B, S, H, D, G, ·]
    e1 = e1.reshape(BS, L, H, G, w)
    hb = -e1[..., :D] * beta1[..., None]                                 # β_t h_t
    J = torch.einsum("nlhgd,nlhge->nhgde", hb, -e1[..., :D]).reshape(B, S, H, G, D, D)
    eta = torch.einsum("nlhgd,nlhgc->nhgdc", hb, e1[..., D:]).reshape(B, S, H, G, D, mg)
    Cc = Cc.reshape(B, S, H, G, D, D)
    # ---- level 2: the start state of every super-chunk, in sequence (float64)
    d64 = torch.float64
    P = P0.to(d64)                                                       # [B, H, G, D, D]
    M = M0.to(d64).reshape(B, H, D, G, mg).permute(0, 1, 3, 2, 4)       # [B, H, G, D, mg]
    eye = torch.eye(D, dtype=d64, device=dev)
    Ps, Ms = [], []
    for s in range(S):
        Ps.append(P)
        Ms.append(M)
        if s == S - 1:
            break
        As = A[:, s].to(d64).permute(0, 1, 3, 2, 4)                     # [B, H, G, D, D]
        bs = b[:, s].to(d64).permute(0, 1, 3, 2, 4)                     # [B, H, G, D, mg]
        Js, etas = J[:, s].to(d64), eta[:, s].to(d64)
        Sig = torch.linalg.solve(eye + Js @ P, P, left=False)           # P (I + J P)⁻¹
        Sig = 0.5 * (Sig + Sig.transpose(-1, -2))
        ms = M + Sig @ (etas - Js @ M)
        M = As @ ms + bs
        P = As @ Sig @ As.transpose(-1, -2) + Cc[:, s].to(d64)
        P = 0.5 * (P + P.transpose(-1, -2))
    P3 = torch.stack(Ps, 1).to(f32).reshape(BS, H, G, D, D).contiguous()
    M3 = torch.stack(Ms, 1).permute(0, 1, 2, 4, 3, 5).reshape(BS, H, D, m).to(f32).contiguous()
    # ---- level 3: every super-chunk from its true start
    o, MT, PT, u, beta, e = chunk_forward(K, qs, ks, vs, l2s, r2s, as_, M3, P3, C, cfg, need_e)

    def join(x):
        return None if x is None else x.reshape(B, S * L, *x.shape[2:])[:, :T]
    MT = MT.reshape(B, S, H, D, m)[:, -1].contiguous()
    PT = PT.reshape(B, S, H, G, D, D)[:, -1].contiguous()
    e = join(e) if need_e else e
    return join(o).contiguous(), MT, PT, join(u).contiguous(), join(beta).contiguous(), \
        (e.contiguous() if need_e else e)
