r"""DeltaFormer in numpy float64: sequential, triangular-solve and blockwise forms.

Source: Zhong, Xu, Ao, Shi, *Understanding Transformer from the Perspective of
Associative Memory* (arXiv 2505.19488v1), Sec. 2.2.1, Eqs. 37-42, pp.12-14;
App. C (kernel trick), App. D.3, pp.33-35 (chunked form).

The model, token ``t = 1 … T`` (keys ``k_t``, values ``v_t``, write queries
``w_t``, read queries ``q_t``, gates ``α_t, β_t``):

.. math::
    u_t = α_t v_t − β_t \sum_{i<t} κ_1(k_i, w_t)\, u_i, \qquad
    o_t = \sum_{i≤t} κ_2(k_i, q_t)\, u_i .

Kernels (:data:`KERNELS`): ``linear`` ``xᵀy``; ``poly`` ``(xᵀy + c)^p``;
``relu`` ``max(0, xᵀy)``; ``exp`` ``exp(xᵀy/τ)``; ``softmax`` (``exp(xᵀy/τ)``
normalised over the index set of the sum: ``i < t`` for ``κ1``, ``i ≤ t`` for
``κ2``; an empty set contributes 0); ``round2`` ``round(xᵀy, 2)`` (the
"two-decimal round" kernel of the experiments); ``exact`` ``round(xᵀy)`` to the
nearest integer (the kernel ``f`` of Theorem 1 when the keys are
``ε``-orthogonal with ``ε < 1/8``).

Forms of the same recursion:

* :func:`deltaformer_sequential` — the ``u_t`` recursion token by token
  (``T`` sequential steps);
* :func:`deltaformer_triangular` — ``U = (I + A)^{-1} diag(α) V`` with the
  strictly lower-triangular ``A_{ti} = β_t κ_1(k_i, w_t)``, then
  ``O = K_2 U`` with ``(K_2)_{ti} = κ_2(k_i, q_t)`` for ``i ≤ t``;
* :func:`deltaformer_blockwise` — chunks of ``C`` rows: each chunk subtracts
  the contribution of all earlier ``U`` (one matrix product) and solves its own
  ``C × C`` unit lower-triangular system; ``⌈T/C⌉`` sequential steps.  It counts
  the multiply-accumulates it performs from the shapes of the operations it
  actually runs (:class:`WorkCount`).

Also: explicit finite feature maps (linear, polynomial) and the feature-space
delta rule (``am.deltaformer_equiv``), causal Softmax attention and DeltaNet
references (``am.deltaformer_reductions``), the streaming
:class:`KernelMemory` used by the swap simulation, and the kernel read-out used
by ``am.ffn_memory``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular

from assocmem import validate as V

KERNELS = ("linear", "poly", "relu", "exp", "softmax", "round2", "exact")


@dataclass(frozen=True)
class Kernel:
    """A retrieval kernel ``κ(x, y) = g(xᵀy)`` (``softmax`` also normalises)."""

    name: str = "linear"
    tau: float = 1.0       # exp / softmax temperature
    degree: int = 2        # poly
    c: float = 1.0         # poly offset

    def __post_init__(self):
        V.choice("kernel", self.name, KERNELS)
        V.positive("tau", self.tau)
        V.count("degree", self.degree, 1)
        V.nonnegative("c", self.c)

    @property
    def normalised(self) -> bool:
        return self.name == "softmax"

    def apply(self, s: np.ndarray) -> np.ndarray:
        """``g`` applied to inner products ``s`` (softmax: the unnormalised exp)."""
        n = self.name
        if n == "linear":
            return s
        if n == "poly":
            return (s + self.c) ** self.degree
        if n == "relu":
            return np.maximum(s, 0.0)
        if n in ("exp", "softmax"):
            return np.exp(s / self.tau)
        if n == "round2":
            return np.round(s, 2)
        return np.rint(s)   # exact

    def matrix(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """``[κ(x_i, y_j)]`` (rows: ``X``, columns: ``Y``) without normalisation."""
        return self.apply(X @ Y.T)


def kernel(name: str = "linear", **params) -> Kernel:
    return Kernel(name, **params)


def _as_kernel(k) -> Kernel:
    if isinstance(k, Kernel):
        return k
    if isinstance(k, str):
        return Kernel(k)
    raise ValueError(f"kappa must be a kernel name or Kernel (got {k!r})")


def _softmax_rows(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row softmax of ``scores`` over ``mask`` (rows with an empty mask → 0)."""
    s = np.where(mask, scores, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(mask, np.exp(s - m), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    return np.divide(e, z, out=np.zeros_like(e), where=z > 0)


def _scores(kern: Kernel, K: np.ndarray, Y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Masked kernel matrix ``[κ(k_i, y_t)]_{t,i}`` with softmax normalisation
    over the mask when the kernel is ``softmax``."""
    raw = Y @ K.T
    if kern.normalised:
        return _softmax_rows(raw / kern.tau, mask)
    return np.where(mask, kern.apply(raw), 0.0)


@dataclass
class DFInputs:
    K: np.ndarray
    V: np.ndarray
    W: np.ndarray
    Q: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray


def _inputs(K, V_, W=None, Q=None, alpha=None, beta=None) -> DFInputs:
    K = V.finite("K", K)
    V_ = V.finite("V", V_)
    if K.ndim != 2 or V_.ndim != 2 or K.shape[0] != V_.shape[0]:
        raise ValueError(f"K must be [T, d] and V [T, dv] with the same T (got {K.shape}, {V_.shape})")
    T = K.shape[0]
    W = K if W is None else V.finite("W", W)
    Q = K if Q is None else V.finite("Q", Q)
    for name, X in (("W", W), ("Q", Q)):
        if X.shape != K.shape:
            raise ValueError(f"{name} must have the shape of K {K.shape} (got {X.shape})")
    alpha = np.ones(T) if alpha is None else np.broadcast_to(V.finite("alpha", alpha), (T,)).astype(float)
    beta = np.ones(T) if beta is None else np.broadcast_to(V.finite("beta", beta), (T,)).astype(float)
    return DFInputs(K, V_, W, Q, alpha, beta)


# -- the three forms -----------------------------------------------------------
def deltaformer_sequential(K, V_, W=None, Q=None, alpha=None, beta=None, kappa1="linear",
                           kappa2="linear"):
    """Token-by-token ``u_t`` recursion and read-out; returns ``(U, O)``.

    ``W`` (write queries) and ``Q`` (read queries) default to ``K``; ``alpha``,
    ``beta`` default to 1.
    """
    x = _inputs(K, V_, W, Q, alpha, beta)
    k1, k2 = _as_kernel(kappa1), _as_kernel(kappa2)
    T, dv = x.V.shape
    U = np.zeros((T, dv))
    O = np.zeros((T, dv))
    for t in range(T):
        if t > 0:
            s = x.K[:t] @ x.W[t]
            w = _softmax_rows((s / k1.tau)[None], np.ones((1, t), bool))[0] if k1.normalised else k1.apply(s)
            U[t] = x.alpha[t] * x.V[t] - x.beta[t] * (w @ U[:t])
        else:
            U[t] = x.alpha[t] * x.V[t]
        s2 = x.K[:t + 1] @ x.Q[t]
        w2 = _softmax_rows((s2 / k2.tau)[None], np.ones((1, t + 1), bool))[0] if k2.normalised else k2.apply(s2)
        O[t] = w2 @ U[:t + 1]
    return U, O


def write_matrix(K, W, beta, kappa1) -> np.ndarray:
    """The strictly lower-triangular ``A_{ti} = β_t κ_1(k_i, w_t)`` (``i < t``)."""
    k1 = _as_kernel(kappa1)
    T = K.shape[0]
    mask = np.tril(np.ones((T, T), bool), -1)
    return beta[:, None] * _scores(k1, K, W, mask)


def deltaformer_triangular(K, V_, W=None, Q=None, alpha=None, beta=None, kappa1="linear",
                           kappa2="linear"):
    """``U = (I + A)^{-1} diag(α) V`` by one triangular solve; ``O = K_2 U``."""
    x = _inputs(K, V_, W, Q, alpha, beta)
    k2 = _as_kernel(kappa2)
    T = x.K.shape[0]
    A = write_matrix(x.K, x.W, x.beta, kappa1)
    U = solve_triangular(np.eye(T) + A, x.alpha[:, None] * x.V, lower=True, unit_diagonal=True)
    K2 = _scores(k2, x.K, x.Q, np.tril(np.ones((T, T), bool)))
    return U, K2 @ U


@dataclass
class WorkCount:
    """Multiply-accumulates of the blockwise form, by stage, counted from the
    shapes of the operations as they run (a ``(a×b)(b×c)`` product counts
    ``abc``; a unit lower-triangular solve of size ``n`` with ``m`` right-hand
    sides counts ``m n(n−1)/2``, forward substitution)."""

    kernel_write: int = 0      # κ1 entries: one d-long inner product each
    kernel_read: int = 0       # κ2 entries
    inter_chunk: int = 0       # A_{chunk, past} U_past
    inverse: int = 0           # (I + A_cc)^{-1}
    intra_chunk: int = 0       # (I + A_cc)^{-1} × right-hand side
    readout: int = 0           # K2 U
    sequential_steps: int = 0  # steps that must wait for the previous one
    trace: list = field(default_factory=list)

    @property
    def total(self) -> int:
        return (self.kernel_write + self.kernel_read + self.inter_chunk + self.inverse
                + self.intra_chunk + self.readout)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("kernel_write", "kernel_read", "inter_chunk", "inverse",
                                              "intra_chunk", "readout", "sequential_steps", "total")}


def _mm(count: WorkCount, stage: str, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    a, b = X.shape
    b2, c = Y.shape
    assert b == b2
    setattr(count, stage, getattr(count, stage) + a * b * c)
    return X @ Y


def deltaformer_blockwise(K, V_, W=None, Q=None, alpha=None, beta=None, kappa1="linear",
                          kappa2="linear", chunk: int = 16):
    """Blockwise form with chunk size ``C = chunk``; returns ``(U, O, WorkCount)``.

    For the chunk of rows ``R = [s, e)``: ``A_past = β_R κ_1(K_{<s}, W_R)``,
    ``A_cc`` its strictly lower in-chunk part, right-hand side
    ``α_R V_R − A_past U_{<s}``, then ``U_R = (I + A_cc)^{-1}(rhs)`` with the
    inverse formed explicitly (what a tensor-core kernel does).  Only the
    right-hand side depends on the earlier chunks, so there are ``⌈T/C⌉``
    sequential steps.  Softmax ``κ1`` normalises each row over all its
    ``i < t`` (past and in-chunk) entries.
    """
    x = _inputs(K, V_, W, Q, alpha, beta)
    C = V.count("chunk", chunk, 1)
    k1, k2 = _as_kernel(kappa1), _as_kernel(kappa2)
    T, d = x.K.shape
    dv = x.V.shape[1]
    U = np.zeros((T, dv))
    O = np.zeros((T, dv))
    wc = WorkCount()
    for s in range(0, T, C):
        e = min(s + C, T)
        n = e - s
        rows = np.arange(s, e)
        # κ1 scores of this chunk's write queries against every earlier key
        raw = _mm(wc, "kernel_write", x.W[s:e], x.K[:e].T)          # [n, e]
        mask = np.arange(e)[None, :] < rows[:, None]                  # i < t
        if k1.normalised:
            Arow = _softmax_rows(raw / k1.tau, mask)
        else:
            Arow = np.where(mask, k1.apply(raw), 0.0)
        Arow = x.beta[s:e, None] * Arow
        A_past, A_cc = Arow[:, :s], Arow[:, s:e]
        rhs = x.alpha[s:e, None] * x.V[s:e]
        if s > 0:
            rhs = rhs - _mm(wc, "inter_chunk", A_past, U[:s])
        L = np.eye(n) + A_cc
        Linv = solve_triangular(L, np.eye(n), lower=True, unit_diagonal=True)
        wc.inverse += n * n * (n - 1) // 2
        U[s:e] = _mm(wc, "intra_chunk", Linv, rhs)
        wc.sequential_steps += 1
        # read-out of the chunk (parallel over chunks once U is known)
        raw2 = _mm(wc, "kernel_read", x.Q[s:e], x.K[:e].T)
        mask2 = np.arange(e)[None, :] <= rows[:, None]
        if k2.normalised:
            K2 = _softmax_rows(raw2 / k2.tau, mask2)
        else:
            K2 = np.where(mask2, k2.apply(raw2), 0.0)
        O[s:e] = _mm(wc, "readout", K2, U[:e])
        wc.trace.append((s, e))
    return U, O, wc


def blockwise_cost_curve(T: int, d: int, dv: int, chunks, seed: int = 0) -> dict:
    """Data for the figure "blockwise DeltaFormer cost vs chunk size": counted
    work (total and by stage) and sequential steps for each chunk size."""
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((T, d)) / math.sqrt(d)
    Vv = rng.standard_normal((T, dv))
    out = {"chunk": [], "total": [], "sequential_steps": []}
    for C in chunks:
        _, _, wc = deltaformer_blockwise(K, Vv, chunk=C, beta=0.5)
        out["chunk"].append(int(C))
        out["total"].append(wc.total)
        out["sequential_steps"].append(wc.sequential_steps)
    return out


# -- streaming memory (swap simulation) ----------------------------------------
class KernelMemory:
    """The DeltaFormer as a growing memory: ``write`` appends ``(k_t, u_t)`` with
    ``u_t = α v − β Σ_{i<t} κ_1(k_i, w) u_i``; ``read(q) = Σ_i κ_2(k_i, q) u_i``.
    Storage grows by doubling so a long stream costs ``O(T)`` copies."""

    def __init__(self, d: int, dv: int, kappa1="linear", kappa2="linear", capacity: int = 64):
        self.k1, self.k2 = _as_kernel(kappa1), _as_kernel(kappa2)
        self.d, self.dv = d, dv
        self._K = np.zeros((capacity, d))
        self._U = np.zeros((capacity, dv))
        self.t = 0

    @property
    def keys(self) -> np.ndarray:
        return self._K[:self.t]

    @property
    def U(self) -> np.ndarray:
        return self._U[:self.t]

    def _grow(self):
        cap = 2 * self._K.shape[0]
        K, U = np.zeros((cap, self.d)), np.zeros((cap, self.dv))
        K[:self.t], U[:self.t] = self.keys, self.U
        self._K, self._U = K, U

    def write(self, k, v, w=None, alpha: float = 1.0, beta: float = 1.0) -> np.ndarray:
        k = np.asarray(k, float)
        w = k if w is None else np.asarray(w, float)
        u = alpha * np.asarray(v, float)
        if self.t > 0 and beta != 0.0:
            s = self.keys @ w
            wts = _softmax_rows((s / self.k1.tau)[None], np.ones((1, self.t), bool))[0] \
                if self.k1.normalised else self.k1.apply(s)
            u = u - beta * (wts @ self.U)
        if self.t == self._K.shape[0]:
            self._grow()
        self._K[self.t], self._U[self.t] = k, u
        self.t += 1
        return u

    def weights(self, Qm: np.ndarray) -> np.ndarray:
        """``[κ_2(k_i, q)]`` for query rows ``Qm`` (softmax over all stored keys)."""
        s = np.atleast_2d(Qm) @ self.keys.T
        if self.k2.normalised:
            return _softmax_rows(s / self.k2.tau, np.ones_like(s, bool))
        return self.k2.apply(s)

    def read(self, Qm) -> np.ndarray:
        return self.weights(Qm) @ self.U


def kernel_readout(keys, values, queries, kappa="relu") -> np.ndarray:
    """``o(q) = Σ_a v_a κ(k_a, q)`` for each query row: a memory written with
    ``α = 1, β = 0`` (so ``u_a = v_a``) and read with ``κ``."""
    keys, values, queries = (np.atleast_2d(np.asarray(a, float)) for a in (keys, values, queries))
    mem = KernelMemory(keys.shape[1], values.shape[1], "linear", kappa, capacity=max(1, len(keys)))
    for k, v in zip(keys, values):
        mem.write(k, v, beta=0.0)
    return mem.read(queries)


# -- feature maps and the feature-space delta rule ------------------------------
def poly_features(X, degree: int = 2, c: float = 1.0) -> np.ndarray:
    """Explicit ``φ`` with ``φ(x)ᵀφ(y) = (xᵀy + c)^p``: blocks
    ``√(C(p, j) c^{p−j}) x^{⊗j}``, ``j = 0 … p`` (dimension ``Σ_j d^j``)."""
    X = np.atleast_2d(np.asarray(X, float))
    n, d = X.shape
    blocks = []
    tens = np.ones((n, 1))
    for j in range(degree + 1):
        if j > 0:
            tens = np.einsum("na,nb->nab", tens, X).reshape(n, -1)
        blocks.append(math.sqrt(math.comb(degree, j) * c ** (degree - j)) * tens)
    return np.concatenate(blocks, axis=1)


def features(X, kern: Kernel) -> np.ndarray:
    """Explicit finite feature map of a ``linear`` or ``poly`` kernel."""
    if kern.name == "linear":
        return np.atleast_2d(np.asarray(X, float))
    if kern.name == "poly":
        return poly_features(X, kern.degree, kern.c)
    raise ValueError(f"no finite feature map for kernel {kern.name!r} (use linear or poly)")


def delta_rule_features(PhiK, V_, PhiQ, alpha=None, beta=None, PhiW=None):
    """The feature-space delta rule with one state,
    ``S_t = S_{t−1} + (α_t v_t − β_t S_{t−1} φ(w_t)) φ(k_t)ᵀ``, ``o_t = S_t φ(q_t)``;
    ``PhiW`` defaults to ``PhiK``.  Returns ``(S_T, O)``."""
    T = PhiK.shape[0]
    PhiW = PhiK if PhiW is None else PhiW
    alpha = np.ones(T) if alpha is None else np.broadcast_to(alpha, (T,))
    beta = np.ones(T) if beta is None else np.broadcast_to(beta, (T,))
    S = np.zeros((V_.shape[1], PhiK.shape[1]))
    O = np.zeros((T, V_.shape[1]))
    for t in range(T):
        S = S + np.outer(alpha[t] * V_[t] - beta[t] * (S @ PhiW[t]), PhiK[t])
        O[t] = S @ PhiQ[t]
    return S, O


def two_state_features(Phi1K, Phi1W, Phi2K, Phi2Q, V_, alpha=None, beta=None):
    """The general DeltaFormer (``κ1 ≠ κ2`` or ``w ≠ k``) in feature space: a
    write state ``S¹ = Σ u_i φ₁(k_i)ᵀ`` and a read state ``S² = Σ u_i φ₂(k_i)ᵀ``
    share ``u_t = α_t v_t − β_t S¹_{t−1} φ₁(w_t)``; ``o_t = S²_t φ₂(q_t)``."""
    T = V_.shape[0]
    alpha = np.ones(T) if alpha is None else np.broadcast_to(alpha, (T,))
    beta = np.ones(T) if beta is None else np.broadcast_to(beta, (T,))
    S1 = np.zeros((V_.shape[1], Phi1K.shape[1]))
    S2 = np.zeros((V_.shape[1], Phi2K.shape[1]))
    O = np.zeros((T, V_.shape[1]))
    for t in range(T):
        u = alpha[t] * V_[t] - beta[t] * (S1 @ Phi1W[t])
        S1 = S1 + np.outer(u, Phi1K[t])
        S2 = S2 + np.outer(u, Phi2K[t])
        O[t] = S2 @ Phi2Q[t]
    return O


# -- references for the reductions -------------------------------------------
def causal_softmax_attention(Q, K, V_, tau: float) -> np.ndarray:
    """Standard causal attention ``softmax(Q Kᵀ/τ + mask) V`` (row by row with
    a max shift, independent of the DeltaFormer code)."""
    T = Q.shape[0]
    O = np.zeros((T, V_.shape[1]))
    for t in range(T):
        s = K[:t + 1] @ Q[t] / tau
        e = np.exp(s - s.max())
        O[t] = (e / e.sum()) @ V_[:t + 1]
    return O


def deltanet(K, V_, Q, beta=None) -> np.ndarray:
    """DeltaNet state recursion ``S_t = S_{t−1} + β_t (v_t − S_{t−1} k_t) k_tᵀ``,
    ``o_t = S_t q_t``."""
    T = K.shape[0]
    beta = np.ones(T) if beta is None else np.broadcast_to(beta, (T,))
    S = np.zeros((V_.shape[1], K.shape[1]))
    O = np.zeros((T, V_.shape[1]))
    for t in range(T):
        S = S + beta[t] * np.outer(V_[t] - S @ K[t], K[t])
        O[t] = S @ Q[t]
    return O


def grid_keys(T: int, d: int, seed: int = 0, denom: int = 8) -> np.ndarray:
    """Keys on the grid ``{−1, …, 1}/denom`` scaled so inner products are exact
    binary fractions (the rounding kernels then give the same value whichever
    summation order computes them)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-2, 3, size=(T, d)) / denom


__all__ = ["KERNELS", "Kernel", "kernel", "deltaformer_sequential", "deltaformer_triangular",
           "deltaformer_blockwise", "write_matrix", "WorkCount", "blockwise_cost_curve", "KernelMemory",
           "kernel_readout", "poly_features", "features", "delta_rule_features", "two_state_features",
           "causal_softmax_attention", "deltanet", "grid_keys"]
