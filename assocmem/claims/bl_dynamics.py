"""Dynamics and cost: ``bl.complex_dynamics``, ``bl.cost`` (BL p.4; App. D).

sympy (:mod:`assocmem.theory.bl_dynamics`): rotation blocks as complex diagonal
dynamics, the structured-noise filter, the operation count per token; numpy: the
filter with rotation dynamics against the exact posterior, the float64 state size;
triton: the kernel's state and what it keeps per token for backward, read from
autograd's saved tensors.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from assocmem.claims._common import SEED, kernel_mode, rel, sympy_derivation, torch_and_device
from assocmem.numerics import bl_filter, vec_kalman_filter
from assocmem.numerics.bl_analysis import real_row_noise, rotation_dynamics, state_bytes, structured_noise_posterior
from assocmem.registry import Evidence
from assocmem.theory import bl_dynamics as dyn


def complex_dynamics(ev: Evidence) -> None:
    sympy_derivation(ev, dyn.complex_dynamics())
    rng = np.random.default_rng(SEED)
    dd, m, T = 3, 2, 8
    D = 2 * dd
    a = rng.uniform(0.7, 1.0, size=(T, dd)) * np.exp(1j * rng.uniform(-np.pi, np.pi, size=(T, dd)))
    A = rotation_dynamics(a)
    z = rng.normal(size=dd) + 1j * rng.normal(size=dd)
    xr = np.stack([z.real, z.imag], -1).reshape(-1)
    az = a[0] * z
    ev.close("numpy", "real block form acts as complex multiplication", rel(A[0] @ xr,
             np.stack([az.real, az.imag], -1).reshape(-1)), 0.0, abs_tol=1e-15)
    keys, values = rng.normal(size=(T, D)) / np.sqrt(D), rng.normal(size=(T, m))
    tr = bl_filter(keys, values, l2=0.2, r2=0.3, p0=1.0, A=A, keep_states=True)
    means, covs = vec_kalman_filter(keys, values, l2=0.2, r2=0.3, P0=1.0, A=A)
    ev.close("numpy", "isotropic noise, rotation blocks: BL filter = vec-S Kalman", max(rel(tr.Ms, means),
             rel(np.stack([np.kron(np.eye(m), P) for P in tr.Ps]), covs)), 0.0, abs_tol=1e-12)
    # real-row noise: exact posterior (vec-S Kalman with I_m ⊗ Q) vs the recurrence with P̄ = APAᵀ + Q
    l2 = 0.2
    means_s, covs_s = structured_noise_posterior(keys, values, a=a, l2=l2, r2=0.3, p0=1.0)
    Ms, Ps = dyn.bl_recurrence_structured_mp(keys.tolist(), values.tolist(), A=A.tolist(),
                                             Q=real_row_noise(dd, l2).tolist(), p0=1.0, r2=0.3)
    Ms = np.array([M.tolist() for M in Ms], dtype=float)
    Ps = np.array([P.tolist() for P in Ps], dtype=float)
    ev.close("numpy", "real-row noise: recurrence with P̄ = APAᵀ + ℓ²E = exact posterior (mean, I_m ⊗ P)",
             max(rel(Ms, means_s), rel(np.stack([np.kron(np.eye(m), P) for P in Ps]), covs_s)), 0.0,
             abs_tol=1e-12, note="recurrence evaluated at 60 digits in assocmem.theory, posterior in float64")
    gap = rel(tr.Ms, means_s)
    ev.holds("numpy", "copying the isotropic ℓ²I instead gives a different posterior", gap > 1e-3, computed=gap)
    P2 = Ps[-1][:2, :2]
    circ = max(abs(P2[0, 0] - P2[1, 1]), abs(P2[0, 1] + P2[1, 0]))
    ev.holds("numpy", "its 2×2 covariance blocks are not circular ([[a, −b], [b, a]]): a complex-diagonal "
                      "covariance cannot carry them", circ > 1e-3, computed=float(circ))
    ev.record(isotropic_vs_structured_mean_gap=gap, circularity_gap=float(circ))
    ev.summary = ("sympy: rotation blocks ≡ complex diagonal (composition, eigenvalues), structured-noise filter "
                  "exact for general D, m; numpy: real-row-noise recurrence = exact posterior to 1e-12, differs "
                  "from the isotropic filter, non-circular covariance blocks")


# -- bl.cost -------------------------------------------------------------------
def cost(ev: Evidence) -> None:
    d = dyn.cost()
    sympy_derivation(ev, d)
    fitted = d.objects["fitted"]
    Dm_, m_, G_ = sp.symbols("D m G", positive=True, integer=True)
    poly = sp.Poly(sp.expand(fitted), Dm_, m_, G_)
    ev.holds("sympy", "leading terms of the count are G·D² and D·m (no D²m, D³)", poly.total_degree() <= 3
             and all((i + j) <= 2 for (i, j, _) in poly.monoms()), computed=str(fitted))
    worst = 0
    for D, m, G in [(4, 2, 1), (16, 6, 1), (16, 6, 2), (8, 8, 4), (32, 16, 2)]:
        sb = state_bytes(D, m, G)
        expected = sb["itemsize"] * int(d.objects["state_numbers"].subs({Dm_: D, m_: m, G_: G}))
        ev.close("numpy", f"state bytes (D={D}, m={m}, G={G}) = 8(Dm + G D²)", sb["M_bytes"] + sb["P_bytes"],
                 expected, abs_tol=0)
        worst = max(worst, abs(sb["M_bytes"] + sb["P_bytes"] - expected))
    ev.record(op_count_polynomial=str(fitted), op_counts=[list(r) for r in d.objects["counts"]])
    ev.summary = (f"sympy: ops/token = {fitted} exactly on {len(d.objects['counts'])} sizes → O(GD² + Dm); "
                  f"numpy: float64 state = 8(Dm + GD²) bytes; ")
    cost_triton(ev)


def _per_token_saved_bytes(torch, dev, D, m, G, T1=3, T2=8):
    """Bytes the op keeps for backward per token and head, from autograd's saved tensors."""
    from assocmem.gpu import fused_recurrent_bl     # torch: imported only when the kernel layer runs

    def saved(T):
        g = torch.Generator(device="cpu").manual_seed(T)
        q = torch.randn(1, T, 1, D, generator=g).to(dev)
        k = torch.nn.functional.normalize(torch.randn(1, T, 1, D, generator=g), dim=-1).to(dev)
        v = torch.randn(1, T, 1, m, generator=g).to(dev).requires_grad_(True)
        l2 = torch.full((1, T, 1), 0.1, device=dev)
        r2 = torch.full((1, T, 1, G), 0.5, device=dev)
        o, st = fused_recurrent_bl(q, k, v, l2, r2, output_final_state=True)
        tensors = o.grad_fn.saved_tensors
        nbytes = sum(t.numel() * t.element_size() for t in tensors if t is not None)
        state = sum(t.numel() * t.element_size() for t in st)
        return nbytes, state

    (n1, s1), (n2, s2) = saved(T1), saved(T2)
    return (n2 - n1) / (T2 - T1), s1


def cost_triton(ev: Evidence) -> None:
    """The kernel's state is 4(Dm + G D²) bytes per head; per token it keeps O(GD + m) bytes for backward (no D×D)."""
    torch, dev = torch_and_device(ev)
    if torch is None:
        return
    rows = []
    with kernel_mode(dev):
        for D, m, G in ((16, 16, 1), (8, 12, 3), (32, 8, 2), (5, 6, 2)):
            per_tok, state = _per_token_saved_bytes(torch, dev, D, m, G)
            state_formula = 4 * (D * m + G * D * D)            # fp32 M (D×m) and G covariances (D×D)
            # kept per token: the fp32 inputs q, k, ℓ² (the op's own inputs) plus
            # u (G·D), β (G) and the innovation e (m): O(G D + m), no D×D
            tok_formula = 4 * (2 * D + 1) + 4 * (G * D + G + m)
            ev.close("triton", f"final-state bytes D={D} m={m} G={G} = 4(Dm + G D^2)", state, state_formula,
                     abs_tol=0)
            ev.close("triton", f"backward bytes per token D={D} m={m} G={G} = 4(2D+1) + 4(GD+G+m)",
                     per_tok, tok_formula, abs_tol=0)
            rows.append({"D": D, "m": m, "G": G, "state_bytes": state, "per_token_bytes": per_tok})
    ev.record(triton_state_bytes=rows)
