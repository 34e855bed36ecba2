r"""The state-swap construction (AM App. E, Theorem 1, pp.35-40) simulated.

Keys.  ``n`` unit keys ``k_i = x_i/√d`` with sign vectors ``x_i ∈ {±1}^d``.
:func:`greedy_sign_keys` builds them deterministically by the method of
conditional expectations: with ``λ = artanh ε`` the pessimistic estimator

    Φ = Σ_{i<j} e^{−λ ε d} (e^{λ S_ij} + e^{−λ S_ij}) cosh(λ)^{#free coordinates}

(``S_ij`` the partial inner product of fixed signs) bounds the expected
number of pairs with ``|x_iᵀx_j| ≥ ε d`` under random completion.  Initially
``Φ_0 = n(n−1) exp(−d·KL(ε))`` with ``KL(ε) = ((1+ε)/2) ln(1+ε) +
((1−ε)/2) ln(1−ε)``; fixing each sign to the value that does not increase
``Φ`` (it reduces to ``s_i = −sign Σ_{j<i} s_j sinh(λ S_ij)``) keeps ``Φ < 1``,
so every pair ends with ``|k_iᵀk_j| < ε``.  Hence
``d = ⌊ln(n(n−1))/KL(ε)⌋ + 1`` always suffices; as ``KL(ε) ≥ ε²/2`` this is
at most ``(4/ε²) ln n + 1`` — ``d = O(log n)`` with constant ``2/KL(ε)``
(``≈ 277`` at ``ε = 0.12``, ``≈ 256`` as ``ε → 1/8``).  The bound is then
*certified* exactly: ``x_iᵀx_j`` are integers, computed exactly in float64.
:func:`random_sign_keys` is the seeded random alternative (resampled until
certified).  With ``d ≥ n`` the coordinate basis is exactly orthonormal.

Memory.  The DeltaFormer with ``κ1 = κ2 = f(xᵀy)`` and write query = key
(:class:`assocmem.numerics.am_deltaformer.KernelMemory`).  Position ``c``
holds element ``c`` initially (value ``e_c``, written at ``k_c``); a swap of
positions ``a < b`` writes key ``k_a − k_b`` with value 0.  After every swap the
memory is read at every ``k_c`` and compared with the true permutation.
``f`` is ``exact`` (round to the nearest integer), ``round2`` (two decimals,
the experiments' kernel) or ``linear``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from assocmem import validate as V

from .am_deltaformer import Kernel, KernelMemory

SWAP_KERNELS = ("exact", "round2", "linear")


def kl_half(eps: float) -> float:
    """``KL(ε) = ((1+ε)/2) ln(1+ε) + ((1−ε)/2) ln(1−ε)`` (Chernoff exponent of
    a ±1 sum exceeding ``ε d``).  Below ``ε = 1e-4`` the series ``ε²/2 + ε⁴/12``
    (the closed form cancels to 0 there)."""
    if abs(eps) < 1e-4:
        return eps * eps / 2 * (1 + eps * eps / 6)
    return 0.5 * ((1 + eps) * math.log1p(eps) + (1 - eps) * math.log1p(-eps))


def greedy_dimension(n: int, eps: float) -> int:
    """Smallest ``d`` with ``n(n−1) exp(−d KL(ε)) < 1``: the estimator starts
    below 1, so :func:`greedy_sign_keys` succeeds."""
    if n < 2:
        return 1
    kl = kl_half(eps)
    if not kl > 0:
        raise V.ParamError("eps", f"eps = {eps:g} is too small: the construction needs d ~ 2 ln(n²)/eps², "
                                  f"beyond float64")
    return int(math.floor(math.log(n * (n - 1)) / kl)) + 1


@dataclass
class KeySet:
    keys: np.ndarray         # [n, d] unit keys
    signs: np.ndarray | None # [n, d] ±1 (None for the coordinate basis)
    d: int
    eps: float               # the target
    max_abs_inner: float     # certified max_{i≠j} |k_iᵀk_j|
    method: str

    @property
    def certified(self) -> bool:
        return self.max_abs_inner <= self.eps


def _max_abs_offdiag(X: np.ndarray) -> float:
    """``max_{i≠j} |x_iᵀx_j| / d`` for ±1 rows; the integer Gram is exact in
    float64 (entries ≤ d < 2⁵³)."""
    n, d = X.shape
    if n < 2:
        return 0.0
    G = X @ X.T
    np.fill_diagonal(G, 0.0)
    return float(np.max(np.abs(G))) / d


def greedy_sign_keys(n: int, eps: float, d: int | None = None) -> KeySet:
    """Deterministic sign keys by conditional expectations (see module doc)."""
    n = V.count("n", n, 1)
    eps = float(V.scalar("eps", eps))
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1) (got {eps})")
    d = greedy_dimension(n, eps) if d is None else V.count("d", d, 1)
    lam = math.atanh(eps)
    X = np.empty((n, d))
    S = np.zeros((n, n))            # partial inner products of fixed coordinates
    for c in range(d):
        # sinh(λ S) scaled by e^{−λc} (|S| ≤ c): only signs of sums matter
        H = 0.5 * (np.exp(lam * (S - c)) - np.exp(-lam * (S + c)))
        col = np.empty(n)
        col[0] = 1.0
        for i in range(1, n):
            col[i] = -1.0 if H[i, :i] @ col[:i] > 0 else 1.0
        X[:, c] = col
        S += np.outer(col, col)
    return KeySet(X / math.sqrt(d), X, d, eps, _max_abs_offdiag(X), "greedy")


def random_sign_keys(n: int, eps: float, d: int | None = None, seed: int = 0, tries: int = 50) -> KeySet:
    """Seeded random sign keys, resampled until ``max |k_iᵀk_j| ≤ ε`` is
    certified (``ValueError`` after ``tries`` failures)."""
    n = V.count("n", n, 1)
    d = greedy_dimension(n, eps) if d is None else V.count("d", d, 1)
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(tries):
        X = rng.choice(np.array([-1.0, 1.0]), size=(n, d))
        m = _max_abs_offdiag(X)
        if best is None or m < best[1]:
            best = (X, m)
        if m <= eps:
            break
    X, m = best
    return KeySet(X / math.sqrt(d), X, d, eps, m, "random")


def compact_greedy_keys(n: int, eps: float) -> KeySet:
    """The smallest ``d`` (binary search over ``1 … greedy_dimension(n, ε)``) at
    which :func:`greedy_sign_keys` certifies ``max |k_iᵀk_j| ≤ ε``.  The greedy
    does far better than its estimator guarantees (e.g. ``n = 256``, ``ε = 0.12``:
    ``d ≈ 250`` instead of 1537), so this is the construction to simulate with;
    the certificate is exact whatever the search finds."""
    hi_d = greedy_dimension(n, eps)
    best = greedy_sign_keys(n, eps, hi_d)          # guaranteed to certify
    lo, hi = 1, hi_d
    while lo < hi:
        mid = (lo + hi) // 2
        ks = greedy_sign_keys(n, eps, mid)
        if ks.certified:
            best, hi = ks, mid
        else:
            lo = mid + 1
    return best


def near_orthogonal_keys(n: int, eps: float = 0.12, d: int | None = None, method: str = "auto",
                         seed: int = 0) -> KeySet:
    """``n`` unit keys with certified ``max |k_iᵀk_j| ≤ ε`` (check ``.certified``).

    ``method``: ``"basis"`` (``d ≥ n``: coordinate vectors, ``ε = 0``),
    ``"greedy"`` (deterministic; with ``d=None`` the compact search of
    :func:`compact_greedy_keys`), ``"random"`` (at ``d`` or
    :func:`greedy_dimension`).  ``"auto"``: the basis when ``d ≥ n`` is
    requested; else greedy when ``n ≤ 512`` (its Python loop is ``O(n d)``);
    else random.
    """
    n = V.count("n", n, 2)
    eps = float(V.scalar("eps", eps))
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1) (got {eps})")
    V.choice("method", method, ("auto", "basis", "greedy", "random"))
    if d is not None:
        d = V.count("d", d, 1)
    if method == "auto":
        if d is not None and d >= n:
            method = "basis"
        else:
            method = "greedy" if n <= 512 else "random"
    if method == "basis":
        d = n if d is None else d
        if d < n:
            raise ValueError(f"d must be >= n for the coordinate basis (got d={d}, n={n})")
        return KeySet(np.eye(n, d), None, d, eps, 0.0, "basis")
    if method == "greedy":
        return compact_greedy_keys(n, eps) if d is None else greedy_sign_keys(n, eps, d)
    return random_sign_keys(n, eps, d, seed)


def swap_pairs(n: int, swaps: int, seed: int = 0) -> np.ndarray:
    """``swaps`` uniformly random position pairs ``(a, b)``, ``a < b``."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, size=swaps)
    b = (a + rng.integers(1, n, size=swaps)) % n
    return np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)


@dataclass
class SwapRun:
    kernel: str
    n: int
    d: int
    swaps: int
    mismatches: int                 # (swap, position) pairs decoded wrongly
    max_readout_error: float        # max ‖o − v_true‖_∞ over swaps and positions
    mismatches_per_swap: np.ndarray # [swaps]
    error_per_swap: np.ndarray      # [swaps]  max over positions
    final_permutation: np.ndarray   # position → element (truth)
    final_readout: np.ndarray       # [n, n]
    memory: KernelMemory


def swap_kernel(name: str) -> Kernel:
    V.choice("kernel", name, SWAP_KERNELS)
    return Kernel(name)


def simulate_swaps(keys: np.ndarray, pairs: np.ndarray, kernel: str = "exact") -> SwapRun:
    """Write the initial one-hot values at the keys, then one ``k_a − k_b``
    write with value 0 per swap, reading every position after every swap."""
    keys = V.finite("keys", keys)
    n, d = keys.shape
    pairs = np.asarray(pairs, int)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or np.any(pairs[:, 0] >= pairs[:, 1]) \
            or np.any(pairs < 0) or np.any(pairs >= n):
        raise ValueError("pairs must be rows (a, b) with 0 <= a < b < n")
    f = swap_kernel(kernel)
    mem = KernelMemory(d, n, f, f, capacity=n + len(pairs))
    R = np.zeros((n, n))                       # read-out at every position
    eye = np.eye(n)
    for c in range(n):
        u = mem.write(keys[c], eye[c])
        R += np.outer(f.apply(keys @ keys[c]), u)
    perm = np.arange(n)                        # position -> element
    mism = np.zeros(len(pairs), int)
    err = np.zeros(len(pairs))
    zero = np.zeros(n)
    for t, (a, b) in enumerate(pairs):
        k = keys[a] - keys[b]
        u = mem.write(k, zero)
        R += np.outer(f.apply(keys @ k), u)
        perm[a], perm[b] = perm[b], perm[a]
        mism[t] = int(np.sum(np.argmax(R, axis=1) != perm))
        err[t] = float(np.max(np.abs(R - eye[perm])))
    return SwapRun(kernel, n, d, len(pairs), int(mism.sum()), float(err.max()) if len(err) else 0.0,
                   mism, err, perm, R, mem)


def run_swap_experiment(n: int, swaps: int, kernel: str = "exact", eps: float | None = None,
                        d: int | None = None, seed: int = 0, method: str = "auto"):
    """Keys + swap sequence + simulation; returns ``(KeySet, SwapRun)``.

    ``eps`` defaults to 0.12; ``d=None`` lets the construction choose
    (:func:`near_orthogonal_keys`).  The exact kernel needs the certificate
    ``max |k_iᵀk_j| ≤ ε < 1/8`` (Theorem 1) and raises ``ValueError`` without
    it; ``linear`` and ``round2`` run on whatever keys ``d`` allows and report
    the achieved ``max |k_iᵀk_j|``.
    """
    n = V.count("n", n, 2)
    swaps = V.count("swaps", swaps, 0)
    V.choice("kernel", kernel, SWAP_KERNELS)
    eps = 0.12 if eps is None else float(V.scalar("eps", eps))
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1) (got {eps})")
    if kernel == "exact" and eps >= 0.125:
        raise ValueError(f"eps must be < 1/8 for the exact kernel (Theorem 1), got {eps:g}")
    ks = near_orthogonal_keys(n, eps, d, method, seed)
    if kernel == "exact" and not ks.certified:
        raise ValueError(f"could not certify max |k_i.k_j| <= eps={eps:g} in d={ks.d} "
                         f"(achieved {ks.max_abs_inner:.4g}); omit --d to let the construction choose d")
    run = simulate_swaps(ks.keys, swap_pairs(n, swaps, seed), kernel)
    return ks, run


def tracking_curve(n: int, swaps: int, kernels=SWAP_KERNELS, eps: float = 0.12, d: int | None = None,
                   seed: int = 0) -> dict:
    """Data for the figure "swap read-out tracking": per kernel, the mismatches
    and the max read-out error after each swap (same keys, same swaps)."""
    ks = near_orthogonal_keys(n, eps, d, "auto", seed)
    pairs = swap_pairs(n, swaps, seed)
    out = {"n": n, "d": ks.d, "max_abs_inner": ks.max_abs_inner}
    for k in kernels:
        r = simulate_swaps(ks.keys, pairs, k)
        out[k] = {"mismatches": r.mismatches_per_swap, "max_error": r.error_per_swap}
    return out
