r"""Float64 check of the super-chunk (two-level) form of the BL filter — the next step for issue 6.

The chunked kernels walk ``T`` dependent factorisation rows per (batch, head), and a
row costs ~1 µs on the H200 however small its tile (``docs/gpu.md``), so at S1-S3
(128 or fewer programs for 132 SMs) nothing hides that latency.  Splitting the
sequence into ``S`` super-chunks that are filtered *independently and in parallel*
from ``x_start`` (covariance 0, mean = the unknown start state) gives, per
super-chunk, an exact summary (Särkkä & García-Fernández 2021, parallel Kalman
filtering)::

    x_end | x_start, y  ~  N(A x_start + b, C),      likelihood of y in x_start:  J (precision), η (information)

``A, b`` are the mean pass run with ``M_0 = [I | 0]`` on values ``[0 | v]``, ``C``
the covariance pass run from ``P_0 = 0``, and ``J = Σ_t β_t h_t h_tᵀ``,
``η = Σ_t β_t h_t ε_tᵀ`` with ``h_t = Āᵀ_t k_t`` (minus the innovations of the
``I`` columns) and ``ε_t`` the innovations of the ``v`` columns.  The only
sequential step is then one ``D×D`` solve per super-chunk::

    Σ = P (I + J P)⁻¹,  m = M + Σ (η − J M),  M ← A m + b,  P ← A Σ Aᵀ + C,

after which every super-chunk reruns the chunked passes from its true start
state, again in parallel.  ``python benchmarks/two_level_identity.py`` checks this
against the token-by-token filter in float64 over random settings (no GPU).
"""
import sys

import numpy as np


def filter_seq(M, P, k, v, a, l2, r2):
    D = P.shape[0]
    for t in range(k.shape[0]):
        Pb = a[t][:, None] * P * a[t][None, :] + l2[t] * np.eye(D)
        Mb = a[t][:, None] * M
        u = Pb @ k[t]
        beta = 1.0 / (k[t] @ u + r2[t])
        e = v[t] - Mb.T @ k[t]
        M = Mb + beta * np.outer(u, e)
        P = Pb - beta * np.outer(u, u)
    return M, P


def summary(k, v, a, l2, r2):
    """``(A, b, C, J, η)`` of one super-chunk, filtered from a known start state."""
    T, D = k.shape
    m = v.shape[1]
    P, A = np.zeros((D, D)), np.eye(D)
    b, J, eta = np.zeros((D, m)), np.zeros((D, D)), np.zeros((D, m))
    for t in range(T):
        Pb = a[t][:, None] * P * a[t][None, :] + l2[t] * np.eye(D)
        Ab, bb = a[t][:, None] * A, a[t][:, None] * b
        u = Pb @ k[t]
        beta = 1.0 / (k[t] @ u + r2[t])
        h = Ab.T @ k[t]                       # y_t's dependence on x_start
        eps = v[t] - bb.T @ k[t]              # innovation with x_start = 0
        J += beta * np.outer(h, h)
        eta += beta * np.outer(h, eps)
        A, b, P = Ab - beta * np.outer(u, h), bb + beta * np.outer(u, eps), Pb - beta * np.outer(u, u)
    return A, b, P, J, eta


def check(seed, D, m, T, S):
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((T, D))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    v = rng.standard_normal((T, m))
    a = rng.uniform(0.3, 1.0, (T, D)) * rng.choice([-1.0, 1.0], (T, D))
    l2 = rng.uniform(0, 0.1, T) * (rng.random() < 0.8)
    r2 = 10.0 ** rng.uniform(-4, 0, T)
    M0, P0 = rng.standard_normal((D, m)), np.diag(rng.uniform(0.1, 2.0, D))
    bounds = np.linspace(0, T, S + 1).astype(int)
    M, P = M0, P0
    Mt, Pt = M0, P0
    worst = 0.0
    for s0, s1 in zip(bounds[:-1], bounds[1:]):
        sl = slice(s0, s1)
        Mt, Pt = filter_seq(Mt, Pt, k[sl], v[sl], a[sl], l2[sl], r2[sl])
        A, b, C, J, eta = summary(k[sl], v[sl], a[sl], l2[sl], r2[sl])
        Sig = P @ np.linalg.inv(np.eye(D) + J @ P)
        Sig = 0.5 * (Sig + Sig.T)
        ms = M + Sig @ (eta - J @ M)
        M, P = A @ ms + b, A @ Sig @ A.T + C
        worst = max(worst, np.abs(M - Mt).max() / np.abs(Mt).max(), np.abs(P - Pt).max() / np.abs(Pt).max())
    return worst


def main() -> int:
    rng = np.random.default_rng(0)
    worst = 0.0
    for i in range(40):
        D, m, S = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 7))
        T = int(rng.integers(S, 120))
        worst = max(worst, check(i, D, m, T, S))
    print(f"two-level form vs token-by-token filter, float64, 40 random settings: worst relative error {worst:.2e}")
    return 0 if worst < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
