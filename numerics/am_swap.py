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

Stress test (AM §3.2, Fig. 5; ``n = 512`` positions in ``d = 128``).  Unit keys
cannot make ``round2`` exact for ``n > d`` (Welch bound, :func:`welch_bound`,
checked on key sets by :func:`coherence` / :func:`frame_potential`).  Keys
``0.1·k̂`` with ``β = 100`` can (:func:`rounding_exact_keys`): ``k̂`` from
:func:`unbiased_bases_keys` (structured, coherence ``cos(π/8)/8 ≈ 0.1155`` at
``n = 512``) or :func:`incoherent_keys` (optimised, ≤ 0.11).
:func:`simulate_stress` runs the stress stream (random initial permutation,
swaps in either orientation as in the GPU task) and compares the kernel,
linear and softmax reads.
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


# =============================================================================
# The stress test (AM §3.2, Fig. 5): n = 512 positions, d = 128 dimensions
# =============================================================================
# Two-decimal rounding of ``s = kᵀq`` is ``rint(100 s)/100``.  On unit keys it is
# exact only if every cross overlap rounds to 0 (``|k_iᵀk_j| < 0.005``), which no
# set of n > d unit keys achieves (Welch bound, below).  Scaling the keys by
# ``c = 1/10`` makes ``100 s = k̂ᵀq̂`` (the unit-key overlap), so ``round2`` becomes
# ``rint(k̂ᵀq̂)/100`` — Theorem 1's integer rounding, divided by 100 — and
# ``β = 100`` restores ``β κ1 = rint``: the exact kernel, for keys with
# ``max |k̂_iᵀk̂_j| ≤ ε < 1/8``.
ROUND2_SCALE = 0.1      # key scaling c (c² = 10⁻²)
ROUND2_BETA = 100.0     # β = 1/c²


def welch_bound(n: int, d: int) -> float:
    """``√((n − d)/(d(n − 1)))`` for ``n > d`` (else 0): no ``n`` unit vectors in
    ``R^d`` have ``max_{i≠j} |k_iᵀk_j|`` below it.  numpy float, from
    ``‖KKᵀ‖_F² ≥ n²/d``."""
    n = V.count("n", n, 2)
    d = V.count("d", d, 1)
    return math.sqrt((n - d) / (d * (n - 1))) if n > d else 0.0


def coherence(keys: np.ndarray) -> float:
    """``max_{i≠j} |k̂_iᵀk̂_j|`` of the row directions (rows normalised first)."""
    K = V.finite("keys", keys)
    if K.ndim != 2 or K.shape[0] < 2:
        raise ValueError("keys must be a 2-d array with at least two rows")
    nrm = np.linalg.norm(K, axis=1)
    if np.any(nrm == 0):
        raise ValueError("keys must be nonzero")
    K = K / nrm[:, None]
    G = K @ K.T
    np.fill_diagonal(G, 0.0)
    return float(np.max(np.abs(G)))


def frame_potential(keys: np.ndarray) -> tuple[float, float]:
    """``(‖K̂K̂ᵀ‖_F², n²/d)`` for the normalised rows; the first is never below
    the second (the Cauchy–Schwarz step of the Welch bound)."""
    K = V.finite("keys", keys)
    K = K / np.linalg.norm(K, axis=1, keepdims=True)
    n, d = K.shape
    F = K.T @ K                                  # frame operator; ‖G‖_F² = ‖F‖_F²
    return float(np.sum(F * F)), n * n / min(n, d)


def _odd_power(x: np.ndarray, e: int) -> np.ndarray:
    """``x**e`` by repeated squaring (elementwise; ``e ≥ 1``)."""
    out, base = None, x
    while e:
        if e & 1:
            out = base if out is None else out * base
        e >>= 1
        if e:
            base = base * base
    return out


def incoherent_keys(n: int, d: int, eps: float = 0.11, seed: int = 0, p: int = 16,
                    max_iter: int = 3000) -> KeySet:
    """``n`` unit keys in ``R^d`` with certified ``max_{i≠j} |k_iᵀk_j| ≤ ε`` (check
    ``.certified``), for ``n > d`` where sign codes and bases do not reach ε.

    Seeded Gaussian start, then projected gradient descent on the sphere for
    the frame potential ``Σ_{i≠j} (k_iᵀk_j/μ)^{2p}`` (``μ`` the current max
    overlap, so the largest overlaps dominate): each row moves against
    ``Σ_j (g_ij/μ)^{2p−1} k_j`` (tangent part), step ``μ / max_i Σ_j |g_ij/μ|^{2p−1}``,
    then is renormalised; it stops once the float64 max overlap is ``≤ ε``.
    The iteration runs in float32 (speed) and every check in float64.
    ``n ≤ d``: an orthonormal set (QR), overlap ~1e-16.
    At ``n = 512, d = 128`` it reaches ``ε = 0.11`` in ~105 iterations (about a
    second on one core; ``≈ 0.101`` after 300; the Welch bound is 0.0766).
    ``ε`` below :func:`welch_bound` raises ``ValueError`` (no such keys exist).
    """
    n = V.count("n", n, 2)
    d = V.count("d", d, 1)
    eps = float(V.scalar("eps", eps))
    p = V.count("p", p, 1)
    max_iter = V.count("max_iter", max_iter, 0)
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1) (got {eps})")
    wb = welch_bound(n, d)
    if eps < wb:
        raise ValueError(f"eps={eps:g} is below the Welch bound {wb:.4g} for n={n}, d={d}: no such keys exist")
    rng = np.random.default_rng(seed)
    if n <= d:
        q, _ = np.linalg.qr(rng.standard_normal((d, n)))
        K = q.T.copy()
        return KeySet(K, None, d, eps, coherence(K), "orthonormal")
    K64 = rng.standard_normal((n, d))
    K64 /= np.linalg.norm(K64, axis=1, keepdims=True)
    K = K64.astype(np.float32)
    m = coherence(K64)
    for _ in range(max_iter):
        if m <= eps:
            break
        G = K @ K.T
        np.fill_diagonal(G, 0.0)
        mu = float(np.max(np.abs(G)))
        if mu <= eps + 1e-5:                     # float32 Gram error << 1e-5: certify in float64
            K64 = K.astype(np.float64)
            K64 /= np.linalg.norm(K64, axis=1, keepdims=True)
            m = coherence(K64)
            if m <= eps:
                break
        W = _odd_power(G / mu, 2 * p - 1)
        step = W @ K
        step -= np.sum(step * K, axis=1, keepdims=True) * K
        K = K - (mu / max(1.0, float(np.max(np.sum(np.abs(W), axis=1))))) * step
        K /= np.linalg.norm(K, axis=1, keepdims=True)
    else:
        K64 = K.astype(np.float64)
        K64 /= np.linalg.norm(K64, axis=1, keepdims=True)
        m = coherence(K64)
    return KeySet(K64, None, d, eps, m, "incoherent")


def gf2_rank(M: np.ndarray) -> int:
    """Rank over GF(2) of an integer matrix (Gaussian elimination mod 2)."""
    A = (np.asarray(M, np.int64) % 2).astype(np.uint8)
    rows, cols = A.shape
    r = 0
    for c in range(cols):
        piv = np.nonzero(A[r:, c])[0]
        if len(piv) == 0:
            continue
        p = r + piv[0]
        A[[r, p]] = A[[p, r]]
        hit = np.nonzero(A[:, c])[0]
        hit = hit[hit != r]
        A[hit] ^= A[r]
        r += 1
        if r == rows:
            break
    return r


def unbiased_symmetric_matrices(m: int, count: int, seed: int = 0) -> list:
    """``count`` symmetric 0/1 matrices ``S`` (``m × m``) with every pairwise
    difference nonsingular over GF(2): ``0``, ``I``, then seeded random ones
    (rejection).  ``count ≤ 2^m`` (the differences' first rows must differ)."""
    m = V.count("m", m, 1)
    count = V.count("count", count, 0)
    if count > 2 ** m:
        raise ValueError(f"at most 2^m = {2 ** m} such matrices exist (asked {count})")
    cands = [np.zeros((m, m), np.int64), np.eye(m, dtype=np.int64)]
    out = []
    rng = np.random.default_rng(seed)
    while len(out) < count:
        if cands:
            S = cands.pop(0)
        else:
            U = np.triu(rng.integers(0, 2, (m, m)))
            S = U + np.triu(U, 1).T
        if all(gf2_rank(S - T) == m for T in out):
            out.append(S)
    return out


def unbiased_bases_keys(n: int, d: int, seed: int = 0) -> KeySet:
    """Structured keys: realified, phase-rotated mutually unbiased bases.

    ``d = 2D`` with ``D = 4^k`` (``d = 2, 8, 32, 128, 512, …``); ``B = ⌈n/d⌉``
    complex orthonormal bases of ``C^D``: the standard basis and
    ``Z_S[x, a] = i^{xᵀSx} (−1)^{aᵀx}/√D`` (``x, a ∈ GF(2)^m``, ``m = log₂ D``
    even, ``xᵀSx`` over the integers mod 4) for symmetric 0/1 matrices ``S``
    whose differences are nonsingular mod 2.  Any two are unbiased with inner
    products in ``{±1, ±i}/√D`` (a ``Z_4`` Gauss sum with ``|Σ|² = D`` when
    ``S − S'`` is nonsingular, a Gaussian integer of norm ``2^m``: ``±2^{m/2}`` or
    ``±i 2^{m/2}`` for even ``m``; for odd ``m`` it is ``2^{(m−1)/2}(±1 ± i)``, whose
    ``π/4`` phase the rotation below does not handle, so odd ``m`` is refused).  Basis ``b`` is multiplied by
    ``e^{iπb/(2B)}``; each complex vector ``z`` gives the real vectors
    ``(Re z, Im z)`` and ``(Re iz, Im iz)``.  Real overlaps are
    ``Re(e^{iπΔ/(2B)} i^k)/√D``: 0 inside a basis, at most
    ``cos(π/(2B))/√D`` across (``n = 512, d = 128``: ``cos(π/8)/8 ≈ 0.1155``;
    ``n ≤ 256``: ``≤ 0.0884``; ``n ≤ 128``: orthonormal).  ``seed``: a signed
    coordinate permutation and the order of the keys (the Gram is unchanged
    up to that order).  Exact up to float64 rounding; no iteration.
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
    if B - 1 > 2 ** m:
        raise ValueError(f"n={n} needs {B} bases; at most {2 ** m + 1} of this form exist in C^{D}")
    X = ((np.arange(D)[:, None] >> np.arange(m)[::-1][None, :]) & 1).astype(np.int64)   # [D, m]
    H = 1.0 - 2.0 * ((X @ X.T) % 2)                                                     # (−1)^{aᵀx}
    bases = [np.eye(D, dtype=complex)]
    for S in (unbiased_symmetric_matrices(m, B - 1, seed=0) if B > 1 else []):
        Q = np.einsum("xi,ij,xj->x", X, S, X) % 4
        bases.append((1j ** Q)[:, None] * H / math.sqrt(D))
    rows = []
    for b, Z in enumerate(bases):
        Z = np.exp(1j * math.pi * b / (2 * B)) * Z
        for W in (Z, 1j * Z):
            rows.append(np.concatenate([W.real, W.imag], 0).T)    # columns are vectors
    K = np.concatenate(rows, 0)
    rng = np.random.default_rng(seed)
    K = K[rng.permutation(len(K))[:n]]
    K = K[:, rng.permutation(d)] * rng.choice(np.array([-1.0, 1.0]), size=d)
    bound = math.cos(math.pi / (2 * B)) / math.sqrt(D) if B > 1 else 0.0
    return KeySet(K, None, d, bound, coherence(K), "unbiased")


def rounding_exact_keys(n: int = 512, d: int = 128, seed: int = 0, method: str = "auto", eps: float = 0.11):
    """Keys on which ``round2`` is Theorem 1's exact kernel: ``(keys, β, KeySet)``
    with ``keys = c · k̂`` (``c = 0.1``), ``β = 100``, and unit keys ``k̂`` with
    certified ``max |k̂_iᵀk̂_j| < 1/8``.

    ``method``: ``"unbiased"`` (:func:`unbiased_bases_keys`, instant and
    exact; ``d = 2·4^k``, coherence ``cos(π/(2⌈n/d⌉))/√(d/2)``),
    ``"optimised"`` (:func:`incoherent_keys` to ``eps``), ``"auto"``: unbiased
    when it exists with coherence < 1/8, else optimised.
    ``ValueError`` if the certificate ``< 1/8`` fails."""
    V.choice("method", method, ("auto", "unbiased", "optimised"))
    if method == "auto":
        method = "optimised"
        D = d // 2
        if d % 2 == 0 and D >= 1 and not D & (D - 1) and (D.bit_length() - 1) % 2 == 0:
            B = -(-n // d)
            if B == 1 or (D > 1 and B - 1 <= D and math.cos(math.pi / (2 * B)) / math.sqrt(D) < 0.125 - 1e-9):
                method = "unbiased"
    if method == "unbiased":
        ks = unbiased_bases_keys(n, d, seed)
    else:
        eps = float(V.scalar("eps", eps))
        if not 0 < eps < 0.125:
            raise ValueError(f"eps must lie in (0, 1/8) for exact rounding (got {eps})")
        ks = incoherent_keys(n, d, eps, seed)
        if not ks.certified:
            raise ValueError(f"could not certify max overlap <= {eps:g} (got {ks.max_abs_inner:.4g})")
    if not ks.max_abs_inner < 0.125:
        raise ValueError(f"max overlap {ks.max_abs_inner:.4g} is not below 1/8 (n={n}, d={d}, {ks.method})")
    return ROUND2_SCALE * ks.keys, ROUND2_BETA, ks


def stress_sequence(n: int, swaps: int, seed: int = 0, orientation: str = "random"):
    """The stress test's token stream: ``(sigma, pairs)``.  Position ``p`` first
    holds element ``sigma[p]``; swap ``t`` exchanges positions ``pairs[t] = (i, j)``,
    ``i ≠ j``, written with key ``k_i − k_j``.  ``orientation="random"``: ``i``
    uniform and ``j = i + r mod n`` (the GPU task's convention, so either
    order); ``"sorted"``: ``i < j``."""
    n = V.count("n", n, 2)
    swaps = V.count("swaps", swaps, 0)
    V.choice("orientation", orientation, ("random", "sorted"))
    rng = np.random.default_rng(seed)
    sigma = rng.permutation(n)
    i = rng.integers(0, n, size=swaps)
    j = (i + rng.integers(1, n, size=swaps)) % n
    pairs = np.stack([i, j], axis=1)
    if orientation == "sorted":
        pairs = np.sort(pairs, axis=1)
    return sigma, pairs


STRESS_KERNELS = ("round2", "linear", "exact")
STRESS_TAUS = (1.0, 3.0, 10.0, 30.0, 100.0, 1000.0)


@dataclass
class StressRun:
    kernel: str
    n: int
    d: int
    swaps: int
    beta: float
    accuracy: dict            # read -> fraction of (swap, position) pairs decoded right (all positions)
    accuracy_pos0: dict       # read -> fraction of swaps with the element at position 0 right (the task's label)
    max_readout_error: float  # kernel read: max |o − e_true| over swaps and positions
    negative_weights: int     # kernel-read weights < 0 at position 0 (swap tokens written as k_i − k_0)
    softmax_by_tau: dict      # τ -> all-position accuracy of the softmax read
    max_gram_error: float     # max |s/c² − ideal| over every similarity κ1 and the kernel read evaluate
    wrong_kernel_values: int  # of those, how many β κ1(s) differ from the ideal integer
    U: np.ndarray             # [n + swaps, n] the u's


def _track(U: np.ndarray, Wr: np.ndarray, sigma: np.ndarray, pairs: np.ndarray, want_error: bool = False):
    """Read-outs ``o_c = Σ_{t' ≤ t} Wr[t', c] u_{t'}`` at every position ``c`` after
    each swap ``t``; returns ``(accuracy over (swap, c), accuracy at c = 0,
    max |o − e_true|)``."""
    n = len(sigma)
    R = Wr[:n].T @ U[:n]
    perm = sigma.copy()
    hit, hit0, err = 0, 0, 0.0
    for t, (i, j) in enumerate(pairs):
        R += np.outer(Wr[n + t], U[n + t])
        perm[i], perm[j] = perm[j], perm[i]
        dec = np.argmax(R, axis=1)
        hit += int(np.sum(dec == perm))
        hit0 += int(dec[0] == perm[0])
        if want_error:
            E = R.copy()
            E[np.arange(n), perm] -= 1.0
            err = max(err, float(np.max(np.abs(E))))
    S = len(pairs)
    return (hit / (n * S), hit0 / S, err) if S else (1.0, 1.0, 0.0)


def simulate_stress(keys: np.ndarray, sigma: np.ndarray, pairs: np.ndarray, kernel: str = "round2",
                    beta: float = 1.0, taus=STRESS_TAUS, reads=("kernel", "linear", "softmax")) -> StressRun:
    """DeltaFormer u-recursion ``u_t = v_t − β Σ_{i<t} κ1(k_i, k_t) u_i`` on the
    stress stream (one-hot values ``e_{σ(p)}`` at ``k_p``; swap ``(i, j)``: key
    ``k_i − k_j``, value 0), then, after every swap, a read at every position
    ``c`` with query ``k_c``:

    * ``kernel``: weights ``β κ1(k_t, k_c)`` (Theorem 1's read, ``κ2 = f``);
    * ``linear``: weights ``k_tᵀk̂_c / c`` (``c`` the key norm; the unrounded similarity);
    * ``softmax``: weights ``softmax_t(τ k_tᵀk̂_c / c)`` over the tokens so far, for
      each ``τ`` in ``taus`` (``≥ 0``, sum 1); the reported one is the best ``τ``.

    A position is decoded right when the argmax of its read-out is the element
    it now holds; ``accuracy_pos0`` is the GPU task's label (position 0).
    ``keys`` are used as given (scale included).
    """
    keys = V.finite("keys", keys)
    n, d = keys.shape
    sigma = np.asarray(sigma, int)
    pairs = np.asarray(pairs, int).reshape(-1, 2)
    if sorted(sigma.tolist()) != list(range(n)):
        raise ValueError("sigma must be a permutation of range(n)")
    if np.any(pairs < 0) or np.any(pairs >= n) or np.any(pairs[:, 0] == pairs[:, 1]):
        raise ValueError("pairs must be rows (i, j) with i != j in range(n)")
    V.choice("kernel", kernel, STRESS_KERNELS)
    for r in reads:
        V.choice("read", r, ("kernel", "linear", "softmax"))
    beta = float(V.scalar("beta", beta))
    f = Kernel(kernel)
    S = len(pairs)
    T = n + S
    Kt = np.concatenate([keys, keys[pairs[:, 0]] - keys[pairs[:, 1]]]) if S else keys.copy()
    Vt = np.zeros((T, n))
    Vt[np.arange(n), sigma] = 1.0
    mem = KernelMemory(d, n, f, f, capacity=T)
    for t in range(T):
        mem.write(Kt[t], Vt[t], beta=beta)
    U = mem.U.copy()
    nrm = np.linalg.norm(keys, axis=1)
    # every similarity the recursion (i < t) and the kernel read evaluate, against
    # its ideal value on orthonormal keys: C = token coefficients over positions
    C = np.zeros((T, n))
    C[np.arange(n), np.arange(n)] = 1.0
    C[n + np.arange(S), pairs[:, 0]] += 1.0
    C[n + np.arange(S), pairs[:, 1]] -= 1.0
    low = np.tril(np.ones((T, T), bool), -1)
    c2 = float(nrm[0] ** 2)
    g_w, g_r = (Kt @ Kt.T)[low], Kt @ keys.T
    i_w, i_r = (C @ C.T)[low], C
    gram_err = max(float(np.max(np.abs(g_w / c2 - i_w))) if len(g_w) else 0.0,
                   float(np.max(np.abs(g_r / c2 - i_r))))
    wrong = int(np.sum(beta * f.apply(g_w) != i_w) + np.sum(beta * f.apply(g_r) != i_r))
    del g_w, i_w, low
    # [T, n] (k̂_i − k̂_j)ᵀk̂_c: token keys not normalised, as in the model's read
    sim = (Kt / nrm[0]) @ (keys / nrm[:, None]).T
    acc, acc0, err, soft = {}, {}, float("nan"), {}
    if "kernel" in reads:
        Wk = beta * f.apply(Kt @ keys.T)
        acc["kernel"], acc0["kernel"], err = _track(U, Wk, sigma, pairs, want_error=True)
        neg = int(np.sum(Wk[n:, 0] < 0))
    else:
        neg = int(np.sum(pairs[:, 1] == 0))
    if "linear" in reads:
        acc["linear"], acc0["linear"], _ = _track(U, sim, sigma, pairs)
    if "softmax" in reads:
        best = None
        for tau in taus:
            z = float(tau) * sim
            # per-query shift (a positive factor per column): the argmax is unchanged
            a = _track(U, np.exp(z - z.max(axis=0, keepdims=True)), sigma, pairs)
            soft[float(tau)] = a[0]
            if best is None or a[0] > best[0]:
                best = a
        acc["softmax"], acc0["softmax"] = best[0], best[1]
    return StressRun(kernel, n, d, S, beta, acc, acc0, err, neg, soft, gram_err, wrong, U)
