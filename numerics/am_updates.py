r"""Simulated memories for the update-rule claims (numpy float64).

Source: Zhong, Xu, Ao, Shi, *Understanding Transformer from the Perspective of
Associative Memory* (arXiv 2505.19488v1): Eq. 14 and Table 1, p.7 (FFN as a
memory); Table 2, Sec. 2.2.2, App. F (Softmax as a normalised memory);
Sec. 2.2.2, App. B.2 (DeltaNet on stationary inputs).

Nothing here evaluates the closed forms of :mod:`assocmem.theory.am_updates`;
the claim checks compare.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assocmem import validate as V


# -- am.ffn_memory -------------------------------------------------------------
def ffn(x, W_K, W_V) -> np.ndarray:
    """Bias-free two-layer ReLU FFN ``x ↦ W_Vᵀ ReLU(W_K x)`` for rows ``x``.

    ``W_K`` is ``[m, D]`` (row ``a`` = key ``k_a``), ``W_V`` is ``[m, D_out]``
    (row ``a`` = value ``v_a``); in ``nn.Linear`` terms ``W_K = W1`` and
    ``W_V = W2ᵀ``."""
    x = np.atleast_2d(np.asarray(x, float))
    return np.maximum(x @ W_K.T, 0.0) @ W_V


# -- am.softmax_memory ---------------------------------------------------------
def running_memory(X, step="1/t", S0=None) -> np.ndarray:
    """``S_t = (1 − η_t) S_{t−1} + η_t X_t`` over the rows of ``X`` (``t = 1, 2, …``)
    with ``η_t = 1/t`` or ``1/t²`` (``η_1 = 1`` either way); returns all states."""
    X = np.asarray(X, float)
    V.choice("step", step, ("1/t", "1/t2"))
    S = np.zeros(X.shape[1:]) if S0 is None else np.asarray(S0, float)
    out = np.empty_like(X)
    for t in range(1, len(X) + 1):
        eta = 1.0 / t if step == "1/t" else 1.0 / t ** 2
        S = (1 - eta) * S + eta * X[t - 1]
        out[t - 1] = S
    return out


def softmax_attention_memory(K, V_, q, tau: float):
    """Causal Softmax attention of the query ``q`` over the first ``t`` pairs,
    for every ``t``, and the two parts of the normalised-memory form: the
    running mean ``S_t φ(q) = (1/t) Σ_{i≤t} v_i κ(k_i, q)`` (through
    :func:`running_memory`) and the empirical denominator
    ``z_t = (1/t) Σ_{i≤t} κ(k_i, q)``.  Returns ``(o_softmax, mean_num, z)``."""
    s = K @ q / tau
    kap = np.exp(s)
    num = running_memory(kap[:, None] * V_)
    z = running_memory(kap[:, None])[:, 0]
    # attention computed directly (prefix softmax with max shift), not from num/z
    T = len(K)
    o = np.empty((T, V_.shape[1]))
    for t in range(T):
        e = np.exp(s[:t + 1] - s[:t + 1].max())
        o[t] = (e / e.sum()) @ V_[:t + 1]
    return o, num, z


@dataclass
class DenominatorStats:
    t: np.ndarray
    mean: np.ndarray            # E[z_t] over streams
    rel_mse_times_t: np.ndarray # t · E[(z_t/E z − 1)²] estimated
    rel_mse_se: np.ndarray      # its standard error (× t)


def denominator_fluctuation(d: int, tau: float, q_norm2: float, ts, streams: int = 4000,
                            seed: int = 0) -> DenominatorStats:
    """Monte Carlo over independent key streams ``k_i ~ N(0, I_d)``: the
    empirical Softmax denominator ``z_t(q) = (1/t) Σ_{i≤t} exp(k_iᵀq/τ)`` for a
    fixed query with ``‖q‖² = q_norm2``.  Its mean is estimated from the same
    streams (no closed form used); returns ``t · E[(z_t/μ̂ − 1)²]``."""
    d = V.count("d", d, 1)
    tau = float(V.positive("tau", tau))
    q_norm2 = float(V.positive("q_norm2", q_norm2))
    ts = np.asarray(ts, int)
    rng = np.random.default_rng(seed)
    q = np.zeros(d)
    q[0] = np.sqrt(q_norm2)
    T = int(ts.max())
    # κ depends on k only through kᵀq, which for k ~ N(0, I_d) is N(0, ‖q‖²):
    # sampling that score directly avoids T·streams·d normals
    scores = rng.standard_normal((streams, T)) * np.sqrt(q_norm2)
    csum = np.cumsum(np.exp(scores / tau), axis=1)
    z = csum[:, ts - 1] / ts
    mu_hat = z.mean(axis=0)
    dev2 = (z / mu_hat - 1.0) ** 2
    return DenominatorStats(ts, mu_hat, ts * dev2.mean(axis=0),
                            ts * dev2.std(axis=0, ddof=1) / np.sqrt(streams))


# -- am.deltanet_fixed_point -----------------------------------------------------
def deltanet_stationary(W_k, W_v, Sigma, steps: int, beta: float, seed: int = 0,
                        average_from: int | None = None, S0=None):
    """DeltaNet with step ``β`` on a stationary stream ``x_t ~ N(0, Σ)``,
    ``k_t = W_k x_t``, ``v_t = W_v x_t``: ``S ← S + β (v − S k) kᵀ``.  Returns
    ``(S_final, S_average)`` with the iterate average over
    ``t ≥ average_from`` (default: the second half)."""
    W_k, W_v = np.atleast_2d(W_k), np.atleast_2d(W_v)
    Sigma = V.psd("Sigma", Sigma)
    steps = V.count("steps", steps, 1)
    beta = float(V.positive("beta", beta))
    rng = np.random.default_rng(seed)
    L = np.linalg.cholesky(Sigma)
    X = rng.standard_normal((steps, Sigma.shape[0])) @ L.T
    Kx, Vx = X @ W_k.T, X @ W_v.T
    S = np.zeros((W_v.shape[0], W_k.shape[0])) if S0 is None else np.array(S0, float)
    start = steps // 2 if average_from is None else average_from
    acc = np.zeros_like(S)
    for t in range(steps):
        k, v = Kx[t], Vx[t]
        S = S + beta * np.outer(v - S @ k, k)
        if t >= start:
            acc += S
    return S, acc / (steps - start)
