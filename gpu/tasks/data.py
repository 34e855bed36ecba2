r"""Data generators of the learned tasks (seeded with ``torch.Generator``).

All generators run on the CPU with an explicit generator (the same seed gives
the same batch on every machine) and return plain tensors; the training loop
moves them to the device.  Labels are ``-100`` (PyTorch's ignore index) on every
token that carries no loss.

collision_recall (BL §4.1, App. E.5, pp.23-26)
    ``n_pairs = 8`` target/distractor address pairs per sequence in ``D = 16``
    dimensions.  Pair ``j`` lives in its own plane of a random orthonormal
    basis ``Q`` (one per sequence): target ``b_j = Q e_{2j}``, distractor
    ``a_j = ρ_j Q e_{2j} + √(1−ρ_j²) Q e_{2j+1}``, so ``a_jᵀ b_j = ρ_j`` and the
    pairs are mutually orthogonal.  ``ρ_j`` is drawn uniformly from
    ``rho_range`` (training: [0.60, 0.80]) or fixed (``rho=``).  The 16 value
    labels are a fresh permutation per sequence (no address owns a label).
    Schedule: ``n_b`` rounds writing every target, then ``n_f`` rounds writing
    every distractor (each round in a fresh random order), then one query of
    each of the 16 addresses in random order; ``T = 8 (n_b + n_f) + 16``.
    Token features (33): WRITE/QUERY flag (1 for a write), address (16),
    one-hot value (16, zero on queries).  Loss on query tokens only.  The
    addresses are also returned separately: the mixers use them directly as
    keys and queries in every layer and head (the paper forbids learned key
    projections here, so a model cannot project the collision away).
    *Interpretation* (the notes give the ingredients, not the exact order):
    targets before distractors, all 16 addresses queried, ρ per pair.

random_keys (BL App. E.5.4, pp.25-26)
    Addresses ``a_i ~ N(0, I_64)`` normalised, mapped by a shared, frozen,
    row-orthogonal ``16 × 64`` projection ``W`` and renormalised:
    ``k_i = W a_i / ‖W a_i‖``.  ``n`` writes with value labels drawn uniformly
    from 64, then 8 queries of distinct written items.  Token features
    (1 + 16 + 64 = 81): flag, the head-space address ``k_i``, one-hot value.

swap_tracking (AM §3.2, Figs. 3-4, pp.18-19)
    Five positions hold elements 0..4 (identity at the start); each token is
    one of the C(5,2) = 10 transpositions; the label at every token is the
    element now at position 1 (index 0): 5 classes, loss on every token.

swap_stress (AM §3.2, Fig. 5, p.19)
    ``n`` positions with fixed near-orthogonal keys (the model gets the keys,
    it learns only to read); ``n`` initial tokens write element ``σ(p)`` at
    position ``p`` (``σ`` a random permutation), then ``2n`` random swaps; the
    label at each swap is the element at position 1 (``n`` classes).
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Optional

import torch

from assocmem import validate as V

IGNORE = -100

# ---------------------------------------------------------------------------
# collision recall
# ---------------------------------------------------------------------------
COLLISION_D = 16
COLLISION_PAIRS = 8
COLLISION_FEATURES = 1 + COLLISION_D + 2 * COLLISION_PAIRS      # 33


class CollisionBatch(NamedTuple):
    x: torch.Tensor            # [B, T, 33] token features
    keys: torch.Tensor         # [B, T, 16] addresses (keys and queries of every mixer)
    labels: torch.Tensor       # [B, T] value label at query tokens, IGNORE elsewhere
    partner: torch.Tensor      # [B, T] at query tokens: the label of the other member of the pair
    is_target: torch.Tensor    # [B, T] bool: query of a target (B) address
    is_query: torch.Tensor     # [B, T] bool
    rho: torch.Tensor          # [B, n_pairs] overlap a_jᵀ b_j per pair


def collision_length(n_f: int, n_b: int = 4, n_pairs: int = COLLISION_PAIRS, n_open: int = 0) -> int:
    return n_pairs * (n_b + n_f) + 2 * n_pairs * (n_open + 1)


def _rand_orthogonal(batch: int, D: int, gen: torch.Generator) -> torch.Tensor:
    """Haar-random orthogonal matrices (QR of a Gaussian with the sign fix)."""
    z = torch.randn(batch, D, D, generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(z)
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]


def _round_orders(batch: int, rounds: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """``rounds`` random orders of ``range(n)`` per sequence: [B, rounds * n]."""
    if rounds == 0:
        return torch.zeros(batch, 0, dtype=torch.long)
    return torch.argsort(torch.rand(batch, rounds, n, generator=gen), dim=-1).reshape(batch, rounds * n)


def collision_batch(batch: int, *, n_f: int, n_b: int = 4, rho_range=(0.60, 0.80), rho=None,
                    n_pairs: int = COLLISION_PAIRS, D: int = COLLISION_D, rotate: bool = True,
                    n_open: int = 0, generator: Optional[torch.Generator] = None,
                    dtype=torch.float32) -> CollisionBatch:
    """One batch of the learned collision-recall task (see the module docstring).

    ``n_open`` opening rounds write every identity (targets and distractors) once
    each, in a fresh random order, before the target rounds (an ablation: the
    deterministic App. E.4 run opens with such rounds; the default 0 is ours).
    """
    batch = V.count("batch", batch, 1)
    n_f = V.count("n_f", n_f, 0)
    n_b = V.count("n_b", n_b, 0)
    n_open = V.count("n_open", n_open, 0)
    n_pairs = V.count("n_pairs", n_pairs, 1)
    D = V.count("D", D, 2 * n_pairs)
    if rho is not None:
        rho = float(V.in_closed("rho", rho, -1.0, 1.0))
    else:
        lo, hi = (float(r) for r in rho_range)
        V.in_closed("rho_range[0]", lo, -1.0, 1.0)
        V.in_closed("rho_range[1]", hi, -1.0, 1.0)
        if lo > hi:
            raise ValueError(f"rho_range must be increasing (got {rho_range})")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    n_id = 2 * n_pairs
    if rho is None:
        rhos = lo + (hi - lo) * torch.rand(batch, n_pairs, generator=gen, dtype=torch.float64)
    else:
        rhos = torch.full((batch, n_pairs), rho, dtype=torch.float64)
    basis = _rand_orthogonal(batch, D, gen) if rotate else torch.eye(D, dtype=torch.float64).expand(batch, D, D)
    e0 = basis[:, :, 0:2 * n_pairs:2].transpose(1, 2)            # [B, P, D] target directions
    e1 = basis[:, :, 1:2 * n_pairs:2].transpose(1, 2)
    targets = e0
    distractors = rhos[..., None] * e0 + torch.sqrt(1 - rhos ** 2)[..., None] * e1
    addr = torch.cat([targets, distractors], 1)                   # identities 0..P-1 targets, P..2P-1 distractors
    values = torch.argsort(torch.rand(batch, n_id, generator=gen), dim=-1)   # label of each identity
    o_order = _round_orders(batch, n_open, n_id, gen)                         # every id, n_open times
    t_order = _round_orders(batch, n_b, n_pairs, gen)                         # target ids
    d_order = _round_orders(batch, n_f, n_pairs, gen) + n_pairs               # distractor ids
    q_order = torch.argsort(torch.rand(batch, n_id, generator=gen), dim=-1)   # all ids, queried once
    ids = torch.cat([o_order, t_order, d_order, q_order], 1)                 # [B, T]
    T = ids.shape[1]
    n_w = T - n_id
    is_query = torch.zeros(batch, T, dtype=torch.bool)
    is_query[:, n_w:] = True
    keys = torch.gather(addr, 1, ids[..., None].expand(batch, T, D))
    lab = torch.gather(values, 1, ids)
    partner_id = (ids + n_pairs) % n_id
    partner = torch.gather(values, 1, partner_id)
    x = torch.zeros(batch, T, 1 + D + n_id, dtype=torch.float64)
    x[:, :n_w, 0] = 1.0
    x[:, :, 1:1 + D] = keys
    onehot = torch.nn.functional.one_hot(lab, n_id).to(torch.float64)
    x[:, :n_w, 1 + D:] = onehot[:, :n_w]
    labels = torch.where(is_query, lab, torch.full_like(lab, IGNORE))
    partner = torch.where(is_query, partner, torch.full_like(partner, IGNORE))
    is_target = is_query & (ids < n_pairs)
    return CollisionBatch(x.to(dtype), keys.to(dtype), labels, partner, is_target, is_query, rhos.to(dtype))


# ---------------------------------------------------------------------------
# random keys
# ---------------------------------------------------------------------------
RK_RAW = 64
RK_D = 16
RK_LABELS = 64
RK_QUERIES = 8
RK_FEATURES = 1 + RK_D + RK_LABELS      # 81


def row_orthogonal_projection(D: int = RK_D, n: int = RK_RAW, seed: int = 1234) -> torch.Tensor:
    """The shared frozen ``D × n`` projection with orthonormal rows (``W Wᵀ = I``)."""
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(n, D, generator=g, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))[None, :]
    return q.T.contiguous()


class RandomKeyBatch(NamedTuple):
    x: torch.Tensor          # [B, T, 81]
    keys: torch.Tensor       # [B, T, 16]
    labels: torch.Tensor     # [B, T]
    is_query: torch.Tensor   # [B, T]


def random_keys_batch(batch: int, *, n: int, n_query: int = RK_QUERIES, n_labels: int = RK_LABELS,
                      proj: Optional[torch.Tensor] = None, generator: Optional[torch.Generator] = None,
                      dtype=torch.float32) -> RandomKeyBatch:
    """One batch of random-key crowding (see the module docstring)."""
    batch = V.count("batch", batch, 1)
    n = V.count("n", n, 1)
    n_query = V.count("n_query", n_query, 1)
    n_labels = V.count("n_labels", n_labels, 2)
    if n_query > n:
        raise ValueError(f"n_query={n_query} must be <= n={n} (queries are distinct written items)")
    W = row_orthogonal_projection() if proj is None else proj.to(torch.float64)
    D, raw = W.shape
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    a = torch.randn(batch, n, raw, generator=gen, dtype=torch.float64)
    a = a / a.norm(dim=-1, keepdim=True)
    k = a @ W.T
    k = k / k.norm(dim=-1, keepdim=True)
    lab = torch.randint(0, n_labels, (batch, n), generator=gen)
    qi = torch.argsort(torch.rand(batch, n, generator=gen), dim=-1)[:, :n_query]
    ids = torch.cat([torch.arange(n).expand(batch, n), qi], 1)
    T = n + n_query
    keys = torch.gather(k, 1, ids[..., None].expand(batch, T, D))
    labs = torch.gather(lab, 1, ids)
    is_query = torch.zeros(batch, T, dtype=torch.bool)
    is_query[:, n:] = True
    x = torch.zeros(batch, T, 1 + D + n_labels, dtype=torch.float64)
    x[:, :n, 0] = 1.0
    x[:, :, 1:1 + D] = keys
    x[:, :n, 1 + D:] = torch.nn.functional.one_hot(lab, n_labels).to(torch.float64)
    labels = torch.where(is_query, labs, torch.full_like(labs, IGNORE))
    return RandomKeyBatch(x.to(dtype), keys.to(dtype), labels, is_query)


# ---------------------------------------------------------------------------
# swap tracking
# ---------------------------------------------------------------------------
def swap_pairs(n: int) -> torch.Tensor:
    """The C(n, 2) transpositions ``(i, j)``, ``i < j``, in lexicographic order: [n(n-1)/2, 2]."""
    return torch.tensor(list(itertools.combinations(range(n), 2)), dtype=torch.long)


class SwapBatch(NamedTuple):
    tokens: torch.Tensor     # [B, T] index of the transposition
    labels: torch.Tensor     # [B, T] element at position 0 after the swap
    state: torch.Tensor      # [B, n] final arrangement


def apply_swaps(tokens: torch.Tensor, n: int, init: Optional[torch.Tensor] = None):
    """Apply transposition tokens to the arrangement; return (label per step, final state)."""
    pairs = swap_pairs(n)
    B, T = tokens.shape
    state = torch.arange(n).expand(B, n).clone() if init is None else init.clone()
    rows = torch.arange(B)
    labels = torch.empty(B, T, dtype=torch.long)
    for t in range(T):
        i, j = pairs[tokens[:, t], 0], pairs[tokens[:, t], 1]
        si, sj = state[rows, i].clone(), state[rows, j].clone()
        state[rows, i], state[rows, j] = sj, si
        labels[:, t] = state[:, 0]
    return labels, state


def swap_batch(batch: int, *, n_elems: int = 5, length: int = 16,
               generator: Optional[torch.Generator] = None) -> SwapBatch:
    batch = V.count("batch", batch, 1)
    n_elems = V.count("n_elems", n_elems, 2)
    length = V.count("length", length, 1)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    n_tok = n_elems * (n_elems - 1) // 2
    tokens = torch.randint(0, n_tok, (batch, length), generator=gen)
    labels, state = apply_swaps(tokens, n_elems)
    return SwapBatch(tokens, labels, state)


def near_orthogonal_keys(n: int, d: int, seed: int = 4321) -> torch.Tensor:
    """``n`` fixed random unit vectors in ``R^d`` (pairwise overlaps ≈ ±3/√d)."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(n, d, generator=g, dtype=torch.float64)
    return k / k.norm(dim=-1, keepdim=True)


class SwapStressBatch(NamedTuple):
    pos_a: torch.Tensor      # [B, T] first position of the token (init tokens: the position)
    pos_b: torch.Tensor      # [B, T] second position (-1 for init tokens)
    elem: torch.Tensor       # [B, T] element written by init tokens (-1 for swaps)
    labels: torch.Tensor     # [B, T] element at position 0 after each swap, IGNORE on init tokens


def swap_stress_batch(batch: int, *, n: int, length: Optional[int] = None,
                      generator: Optional[torch.Generator] = None) -> SwapStressBatch:
    batch = V.count("batch", batch, 1)
    n = V.count("n", n, 2)
    length = 2 * n if length is None else V.count("length", length, 1)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    sigma = torch.argsort(torch.rand(batch, n, generator=gen), dim=-1)
    # random transpositions (i != j), drawn directly rather than from the C(n,2) table
    i = torch.randint(0, n, (batch, length), generator=gen)
    j = (i + torch.randint(1, n, (batch, length), generator=gen)) % n
    state = sigma.clone()
    rows = torch.arange(batch)
    lab = torch.empty(batch, length, dtype=torch.long)
    for t in range(length):
        si, sj = state[rows, i[:, t]].clone(), state[rows, j[:, t]].clone()
        state[rows, i[:, t]], state[rows, j[:, t]] = sj, si
        lab[:, t] = state[:, 0]
    ar = torch.arange(n).expand(batch, n)
    neg = torch.full((batch, n), -1, dtype=torch.long)
    pos_a = torch.cat([ar, i], 1)
    pos_b = torch.cat([neg, j], 1)
    elem = torch.cat([sigma, torch.full((batch, length), -1, dtype=torch.long)], 1)
    labels = torch.cat([torch.full((batch, n), IGNORE, dtype=torch.long), lab], 1)
    return SwapStressBatch(pos_a, pos_b, elem, labels)


def no_tracking_accuracy(n: int, length: int) -> float:
    """Accuracy of answering the *initial* element at position 0 after each of ``length`` random swaps.

    A transposition drawn uniformly from the ``n(n-1)/2`` pairs moves the
    initial element off position 0 with probability ``2/n`` and brings it back
    (from elsewhere) with probability ``2/(n(n-1))``, so ``p_{t+1} = p_t (1 - 2/n)
    + (1 - p_t) 2/(n(n-1))``, i.e. ``p_t = 1/n + (1 - 1/n) r^t`` with ``r = 1 - 2/(n-1)``;
    the answer is the mean of ``p_t`` over ``t = 1..length``.  A stress-test model
    that reads only the initial write scores this; for ``length = 2n`` and large
    ``n`` it tends to ``(1 - e^{-4})/4 ≈ 0.245``.
    """
    if n < 3:
        raise ValueError(f"n must be an integer >= 3 (got {n!r})")
    if length < 1:
        raise ValueError(f"length must be >= 1 (got {length!r})")
    r = 1.0 - 2.0 / (n - 1)
    geo = r * (1.0 - r ** length) / (1.0 - r) if r != 0.0 else 0.0
    return 1.0 / n + (1.0 - 1.0 / n) * geo / length


# ---------------------------------------------------------------------------
# swap stress: keys on which two-decimal rounding is Theorem 1's exact kernel
# ---------------------------------------------------------------------------
ROUND2_KEY_SCALE = 0.1      # keys c·k̂ with c² = 1/100: round(s, 2) = rint(k̂ᵀq̂)/100
ROUND2_BETA = 100.0         # β = 1/c²: β·round2 = rint, the exact kernel


class RoundingExactKeys(NamedTuple):
    keys: torch.Tensor        # [n, d] c·k̂ (feed these to the κ1 = round2 recursion)
    beta: float               # β to use with them (100)
    unit_keys: torch.Tensor   # [n, d] k̂
    max_overlap: float        # max_{i≠j} |k̂_iᵀk̂_j| (float64), < 1/8
    bound: float              # its exact value cos(π/(2B))/√(d/2), B = ⌈n/d⌉ (0 for B = 1)


def _gf2_nonsingular(rows: list, m: int) -> bool:
    """Rows as ``m``-bit integers; True iff the matrix is invertible over GF(2)."""
    rows = list(rows)
    for c in range(m):
        bit = 1 << c
        piv = next((r for r in range(c, m) if rows[r] & bit), None)
        if piv is None:
            return False
        rows[c], rows[piv] = rows[piv], rows[c]
        rows = [r ^ rows[c] if (i != c and r & bit) else r for i, r in enumerate(rows)]
    return True


def _sym_bits(S: torch.Tensor) -> list:
    m = S.shape[0]
    return [int(sum(int(S[i, j]) << j for j in range(m))) for i in range(m)]


def rounding_exact_keys(n: int, d: int = 128, seed: int = 0, dtype=torch.float32) -> RoundingExactKeys:
    """``n`` keys in ``R^d`` on which ``round(s, 2)`` with ``β = 100`` is the exact
    integer-rounding kernel of Theorem 1 (AM App. E) for the stress test.

    Unit keys ``k̂``: ``B = ⌈n/d⌉`` mutually unbiased bases of ``C^{d/2}``
    (``d/2 = 4^k``, so the ``Z_4`` Gauss sums are ``±√(d/2)`` or ``±i√(d/2)``) — the
    standard basis and ``z_S[x] = i^{xᵀSx} (−1)^{aᵀx} / √(d/2)`` for symmetric
    0/1 ``S`` with pairwise differences nonsingular mod 2 (``0``, ``I``, then
    seeded random ones) — basis ``b`` rotated by ``e^{iπb/(2B)}``, and each
    complex vector ``z`` realified as ``(Re z, Im z)`` and ``(Re iz, Im iz)``.
    Every overlap is 0 or ``cos(θ)/√(d/2)`` with ``θ`` a nonzero multiple of
    ``π/(2B)`` mod ``π/2``: coherence ``cos(π/(2B))/√(d/2)`` — at ``d = 128``:
    0 (``n ≤ 128``), 0.0884 (``n ≤ 256``), 0.108 (``≤ 384``), 0.1155 (``≤ 512``).
    ``seed`` permutes the keys and applies a signed coordinate permutation
    (overlaps unchanged).  Built in float64, returned as ``dtype``; the
    construction needs ``d = 2·4^k`` and coherence < 1/8 (``ValueError``
    otherwise: e.g. ``d = 32`` gives ``cos(π/4)/4 > 1/8`` at ``n > 32``; the
    numpy layer's ``incoherent_keys`` covers other sizes).

    Why it works: the similarities the recursion and the read evaluate are
    ``(±k_a ± k_b)ᵀ(±k_c ± k_d)``; on ``k̂`` they are within ``4ε < 1/2`` of their
    ideal integers, and ``round(0.01 x, 2) = rint(x)/100``.
    """
    n = V.count("n", n, 2)
    d = V.count("d", d, 2)
    D = d // 2
    m = D.bit_length() - 1
    if d % 2 or D & (D - 1) or m % 2:
        raise ValueError(f"d must be 2·4^k (2, 8, 32, 128, 512, …) (got {d})")
    B = -(-n // d)
    if B > 1 and m == 0:
        raise ValueError("d = 2 holds at most 2 orthonormal keys")
    bound = math.cos(math.pi / (2 * B)) / math.sqrt(D) if B > 1 else 0.0
    if B > 1 and not bound < 0.125 - 1e-9:
        raise ValueError(f"n={n}, d={d}: the structured keys have coherence {bound:.4g}, not below 1/8")
    if B - 1 > 2 ** m:
        raise ValueError(f"n={n} needs {B} unbiased bases; at most {2 ** m + 1} exist here")
    gen = torch.Generator().manual_seed(seed)
    # symmetric matrices with pairwise nonsingular differences (over GF(2))
    mats = []
    cands = [torch.zeros(m, m, dtype=torch.long), torch.eye(m, dtype=torch.long)]
    while len(mats) < B - 1:
        if cands:
            S = cands.pop(0)
        else:
            U = torch.randint(0, 2, (m, m), generator=gen).triu()
            S = U + U.triu(1).T
        if all(_gf2_nonsingular(_sym_bits((S - T) % 2), m) for T in mats):
            mats.append(S)
    X = (torch.arange(D)[:, None] >> torch.arange(m - 1, -1, -1)[None, :]) & 1          # [D, m] bits of x
    H = 1.0 - 2.0 * ((X @ X.T) % 2).double()                                              # (−1)^{aᵀx}
    rows = []
    for b in range(B):
        phase = math.pi * b / (2 * B)
        if b == 0:
            mag, q = torch.eye(D, dtype=torch.float64), torch.zeros(D, dtype=torch.float64)
        else:
            S = mats[b - 1]
            q = ((X * (X @ S)).sum(-1) % 4).double()                                      # xᵀSx mod 4
            mag = H / math.sqrt(D)
        for r in (0, 1):                                    # z and i·z
            ang = phase + (q + r) * (math.pi / 2)           # argument of each coordinate x
            re = mag * torch.cos(ang)[:, None]              # [x, a]
            im = mag * torch.sin(ang)[:, None]
            rows.append(torch.cat([re, im], 0).T)           # [a, 2D]
    K = torch.cat(rows, 0)
    K = K[torch.randperm(len(K), generator=gen)[:n]]
    sign = 1.0 - 2.0 * torch.randint(0, 2, (d,), generator=gen).double()
    K = K[:, torch.randperm(d, generator=gen)] * sign
    G = K @ K.T
    G.fill_diagonal_(0.0)
    mu = float(G.abs().max())
    if not mu < 0.125:
        raise ValueError(f"construction failed: coherence {mu:.4g}")
    return RoundingExactKeys((ROUND2_KEY_SCALE * K).to(dtype), ROUND2_BETA, K.to(dtype), mu, bound)
