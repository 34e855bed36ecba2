r"""Float64 check that the BL backward is *linear* and chunkable — the plan for issue 6's chunked backward.

The forward covariance recursion is a Riccati recursion (nonlinear in ``P``): its
chunks wait for each other.  Its adjoint is not.  With ``F_t = (I − β_t u_t k_tᵀ) A_t``
(``A_t = diag(α_t)``) the reverse step of the token-by-token backward
(``docs/gpu.md``, "2.1 Token by token", backward),

    ``c = H_t u_t``, ``dβ = u·dw − uᵀc``, ``ds = −β² dβ``, ``du = −2βc + ds k + β dw``,
    ``H_{t−1} = A_t sym(H_t + du kᵀ) A_t``,

is the two-sided linear recursion

    ``H_{t−1} = F_tᵀ H_t F_t + A_t S_t A_t``,  ``S_t = β (dw kᵀ + k dwᵀ)/2 − β² (u·dw) k kᵀ``

(check 1; ``dw = G_t e_t`` comes from the mean's adjoint), whose transition ``F_t`` is the *mean* recursion's
(``M_t = F_t M_{t−1} + β_t u_t v_tᵀ``); the mean's adjoint is the one-sided
``G_{t−1} = A_t (G_t − k_t de_tᵀ) = F_tᵀ G_t`` (``de_t = G_tᵀ β_t u_t``) plus ``q_t do_tᵀ``.  Over a chunk, ``F_C ⋯ F_1`` is therefore what the
chunked forward already forms for the mean: ``Φ = diag(γ_C) − Ũᵀ W (γ ⊙ K)`` with the
stored ``W = diag(β) L⁻¹`` and ``Ũ`` (check 2).  So the backward can run like fla's
chunked delta-rule backward — per-chunk triangular (WY) work independent of the
adjoint state, and an inter-chunk pass of ``D×D`` matmuls — with no factorisation row
chain.  ``python benchmarks/backward_structure_identity.py`` (CPU, float64).
"""
import sys

import numpy as np


def random_problem(rng, T, D):
    k = rng.standard_normal((T, D))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    a = rng.uniform(0.3, 1.0, (T, D)) * rng.choice([-1.0, 1.0], (T, D))
    l2 = rng.uniform(0, 0.1, T)
    r2 = 10.0 ** rng.uniform(-3, 0, T)
    return k, a, l2, r2


def forward(k, a, l2, r2, P0):
    """Token-by-token covariance pass: ``u_t, β_t`` and ``P_t``."""
    T, D = k.shape
    P, us, bs = P0, [], []
    for t in range(T):
        Pb = a[t][:, None] * P * a[t][None, :] + l2[t] * np.eye(D)
        u = Pb @ k[t]
        b = 1.0 / (k[t] @ u + r2[t])
        P = Pb - b * np.outer(u, u)
        us.append(u)
        bs.append(b)
    return np.array(us), np.array(bs), P


def check_step(rng, D):
    """Check 1: one reverse step, the fused backward's form against ``Fᵀ H F + A S A``."""
    k, a, l2, r2 = random_problem(rng, 1, D)
    X = rng.standard_normal((D, D))
    u, b, _ = forward(k, a, l2, r2, X @ X.T / D + 0.1 * np.eye(D))
    u, b, k, A = u[0], b[0], k[0], np.diag(a[0])
    H = rng.standard_normal((D, D))
    H = 0.5 * (H + H.T)
    dw = rng.standard_normal(D)
    c = H @ u
    dbeta = u @ dw - u @ c
    ds = -b * b * dbeta
    du = -2 * b * c + ds * k + b * dw
    M = H + np.outer(du, k)
    ref = A @ (0.5 * (M + M.T)) @ A
    F = (np.eye(D) - b * np.outer(u, k)) @ A
    S = b * 0.5 * (np.outer(dw, k) + np.outer(k, dw)) - b * b * (u @ dw) * np.outer(k, k)
    got = F.T @ H @ F + A @ S @ A
    return np.abs(got - ref).max() / np.abs(ref).max()


def check_chunk(rng, D, C):
    """Check 2: ``F_C ⋯ F_1 = diag(γ_C) − Ũᵀ W (γ ⊙ K)`` from the chunk's LDLᵀ quantities."""
    k, a, l2, r2 = random_problem(rng, C, D)
    X = rng.standard_normal((D, D))
    P0 = X @ X.T / D + 0.1 * np.eye(D)
    u, b, _ = forward(k, a, l2, r2, P0)
    Phi = np.eye(D)
    for t in range(C):
        Phi = (np.eye(D) - b[t] * np.outer(u[t], k[t])) @ np.diag(a[t]) @ Phi
    # the chunked forward's quantities: γ, R[τ, i] = γ_τ/γ_i (products), Σ_y, L⁻¹, Ũ
    gam = np.cumprod(a, axis=0)
    R = np.ones((C, C, D))
    for tau in range(C):
        for i in range(tau):
            R[tau, i] = np.prod(a[i + 1:tau + 1], axis=0)
    c = np.zeros((C, D))
    for tau in range(C):
        c[tau] = sum(l2[j] * R[tau, j] ** 2 for j in range(tau + 1))
    om = gam * ((gam * k) @ P0) + c * k                        # ω_i = Π_i k_i
    Sy = np.zeros((C, C))
    for tau in range(C):
        for i in range(tau + 1):
            Sy[tau, i] = k[tau] @ (R[tau, i] * om[i])
    Sy = np.tril(Sy) + np.tril(Sy, -1).T + np.diag(r2)
    Lc = np.linalg.cholesky(Sy)
    d = np.diag(Lc) ** 2
    Lu = Lc / np.diag(Lc)[None, :]
    W = np.diag(1.0 / d) @ np.linalg.inv(Lu)                   # diag(β) L⁻¹
    U = np.array([sum(np.linalg.inv(Lu)[tau, i] * R[tau, i] * om[i] for i in range(tau + 1)) for tau in range(C)])
    Ut = R[C - 1] * U                                          # ũ_i = R[C−1, i] ⊙ u_i
    corr = Ut.T @ W @ (gam * k)
    Phi_chunk = np.diag(gam[-1]) - corr
    assert np.allclose(U, u, rtol=1e-9, atol=1e-12) and np.allclose(1.0 / d, b)
    # relative to the size of the two terms: Φ itself can be far smaller than either (D = 1,
    # r² ≪ kᵀP̄k: every factor 1 − βuk ≈ r²/(kᵀP̄k) is tiny), and the difference cancels
    scale = max(np.abs(gam[-1]).max(), np.abs(corr).max())
    return np.abs(Phi_chunk - Phi).max() / scale


def main() -> int:
    rng = np.random.default_rng(0)
    e1 = max(check_step(rng, int(rng.integers(1, 9))) for _ in range(50))
    e2 = max(check_chunk(rng, int(rng.integers(1, 9)), int(rng.integers(1, 17))) for _ in range(30))
    print(f"reverse step = F^T H F + A S A: worst relative error {e1:.2e} (50 random settings)")
    print(f"F_C ... F_1 = diag(gamma_C) - Ut^T W (gamma*K): worst error {e2:.2e} relative to the terms "
          "(30 random chunks)")
    return 0 if max(e1, e2) < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
