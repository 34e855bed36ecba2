r"""Triton kernels of the chunked BL backward (issue 6), the quotient form of
:func:`.chunk_backward.chunk_bl_backward_quotient_torch` (derivation: docs/gpu.md,
"Chunked backward").

Only ``@triton.jit`` functions; :mod:`.chunk` loads this file compiled or interpreted
through :func:`._dispatch.kernels`.  Kernels must compile with triton 3.6 and interpret
with triton 3.9.  Chunk of ``C`` tokens, ``γ`` the cumulative decay relative to the chunk
start, ``Z = U/γ``, ``Ω̃ = (γ⊙K) P + (c/γ) ⊙ K``, ``N = L⁻¹ = diag(1/β) W`` (``W`` from the
forward).  Four passes:

* :func:`chunk_bwd_pstate_kernel` / :func:`chunk_bwd_mstate_kernel`: the chunk-start
  covariances and means, a linear scan of the stored ``u, β, e`` (no factorisation);
* :func:`chunk_bwd_mean_kernel`, one program per (batch, head, group, block of value
  columns), reverse over chunks with the mean adjoint ``G`` (``[D, BV]``) in registers:
  ``dV``, ``dM_0`` and, added atomically over the value blocks, the per-chunk adjoints
  ``dA_q, dN`` (``C×C``), ``dŨ`` (``C×D``), ``dβ`` and the per-token ``d(Qγ), d(Kγ)``;
* :func:`chunk_bwd_cov_kernel`, one program per (batch, head, group), reverse over chunks
  with the covariance adjoint ``H`` (``[D, D]``) in registers: the factorisation's adjoint
  ``dΣ_y = sym(Nᵀ Ψ N)``, ``dr²``, ``dP_0`` and the per-token parts of ``dK``, ``dγ``, ``dc``.

The elementwise epilogue (``γ``, ``c`` and the reverse cumulative sums of the decay
gradient) runs as torch operations in :mod:`.chunk`.  Padding: tokens past ``T`` load
``k = q = v = e = do = u = 0``, ``α = 1``, ``ℓ² = 0``, ``β = 1``.
"""
import os

import triton
import triton.language as tl

if os.environ.get("TRITON_INTERPRET", "0") == "1":
    _sum = tl.standard._sum_combine
    _mul = tl.standard._prod_combine
else:
    @triton.jit
    def _sum(a, b):
        return a + b

    @triton.jit
    def _mul(a, b):
        return a * b


@triton.jit
def _decay_noise(g1, c1, g2, c2):
    return g1 * g2, c1 * (g2 * g2) + c2


@triton.jit(do_not_specialize=["T", "NT"])
def chunk_bwd_pstate_kernel(k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, p0_ptr, ps_ptr, T, NT,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee"):
    """Chunk-start covariances ``ps [B, H, G, NT, D, D]``:
    ``P ← (γ_Cγ_Cᵀ) ⊙ (P − Zᵀ diag(β) Z) + diag(c_C)``."""
    pid = tl.program_id(0).to(tl.int64)
    i_g = pid % G
    i_bh = pid // G
    i_b = i_bh // H
    i_h = i_bh % H
    rd = tl.arange(0, BD)
    rr = rd[:, None]
    rc = rd[None, :]
    mr = rr < D
    mc = rc < D
    ri = tl.arange(0, C)[:, None]
    P = tl.load(p0_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    tok = i_b * T * H + i_h
    for n in range(NT):
        tl.store(ps_ptr + (pid * NT + n) * D * D + rr * D + rc, P, mask=mr & mc)
        tr = n * C + ri
        vr = tr < T
        tki = tok + tr * H
        L2t = tl.load(l2_ptr + tki, mask=vr, other=0.).to(tl.float32)
        Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
        bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
        if HAS_ALPHA:
            At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
            gam, cc = tl.associative_scan((At, tl.where(mc, L2t, 0.)), 0, _decay_noise)
            Z = Ut / gam
        else:
            gam, cc = tl.associative_scan((tl.full((C, BD), 1.0, tl.float32), tl.where(mc, L2t, 0.)), 0,
                                          _decay_noise)
            Z = Ut
        glast = tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True)      # [1, BD]
        clast = tl.reduce(tl.where(ri == C - 1, cc, 0.), 0, _sum, keep_dims=True)
        P = P - tl.dot(tl.trans(Z * bt), Z, input_precision=PREC)
        P = P * (tl.trans(glast) * glast) + tl.where((rr == rc) & mr, clast, 0.)
        P = 0.5 * (P + tl.trans(P))


@triton.jit(do_not_specialize=["T", "NT"])
def chunk_bwd_mstate_kernel(a_ptr, u_ptr, beta_ptr, e_ptr, m0_ptr, ms_ptr, T, NT,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                            MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NVG: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee"):
    """Chunk-start means ``ms [B, H, NT, D, m]``: ``M ← γ_C ⊙ M + (γ_C ⊙ Z)ᵀ (β ⊙ E)``."""
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NVG
    i_bhg = pid // NVG
    i_g = i_bhg % G
    i_bh = i_bhg // G
    i_b = i_bh // H
    i_h = i_bh % H
    rd = tl.arange(0, BD)
    rr = rd[:, None]
    rc = rd[None, :]
    mr = rr < D
    mc = rc < D
    ri = tl.arange(0, C)[:, None]
    jv = i_v * BV + tl.arange(0, BV)[None, :]
    cv = i_g * MG + jv
    mv = jv < MG
    S = tl.load(m0_ptr + i_bh * D * M + rr * M + cv, mask=mr & mv, other=0.).to(tl.float32)
    tok = i_b * T * H + i_h
    for n in range(NT):
        tl.store(ms_ptr + (i_bh * NT + n) * D * M + rr * M + cv, S, mask=mr & mv)
        tr = n * C + ri
        vr = tr < T
        tki = tok + tr * H
        Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
        bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
        Et = tl.load(e_ptr + tki * M + cv, mask=vr & mv, other=0.)
        if HAS_ALPHA:
            At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
            gam = tl.associative_scan(At, 0, _mul)
            glast = tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True)   # [1, BD]
            Ut = (glast / gam) * Ut                                                      # γ_C ⊙ Z
            S = tl.trans(glast) * S
        S = S + tl.dot(tl.trans(Ut), bt * Et, input_precision=PREC)


@triton.jit(do_not_specialize=["T", "NT"])
def chunk_bwd_mean_kernel(q_ptr, k_ptr, v_ptr, a_ptr, u_ptr, beta_ptr, e_ptr, do_ptr, w_ptr, ms_ptr, dmT_ptr,
                          dv_ptr, dm0_ptr, daq_ptr, dn_ptr, dut_ptr, dbeta_ptr, dgc_ptr, dqg_ptr, dkg_ptr,
                          T, NT,
                          H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                          MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NVG: tl.constexpr,
                          C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee"):
    """Mean adjoint, reverse over chunks (``G`` ``[BD, BV]`` in registers)::

        d(βE) = A_qᵀ dO + Ũ G,   dV = Wᵀ d(βE),   G ← γ_C ⊙ G + Qγᵀ dO − Kγᵀ dV

    and, atomically over value blocks (and groups for the per-token ones):
    ``dA_q = tril(dO (βE)ᵀ)``, ``dN = stril((β ⊙ d(βE)) (V − Kγ M)ᵀ)``, ``dŨ = βE Gᵀ``,
    ``dβ = rowsum(E ⊙ d(βE))``, ``dγ_C = rowsum(G ⊙ M)``, ``d(Qγ) = dO Mᵀ``, ``d(Kγ) = −dV Mᵀ``.
    """
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NVG
    i_bhg = pid // NVG
    i_g = i_bhg % G
    i_bh = i_bhg // G
    i_b = i_bh // H
    i_h = i_bh % H
    rd = tl.arange(0, BD)
    rr = rd[:, None]
    rc = rd[None, :]
    mr = rr < D
    mc = rc < D
    ri = tl.arange(0, C)[:, None]
    ci = tl.arange(0, C)[None, :]
    jv = i_v * BV + tl.arange(0, BV)[None, :]
    cv = i_g * MG + jv
    mv = jv < MG
    Gm = tl.load(dmT_ptr + i_bh * D * M + rr * M + cv, mask=mr & mv, other=0.).to(tl.float32)   # [BD, BV]
    tok = i_b * T * H + i_h
    for j in range(NT):
        n = NT - 1 - j
        tr = n * C + ri
        vr = tr < T
        tki = tok + tr * H
        cb = (i_bhg * NT + n) * C * C
        Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
        Qt = tl.load(q_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
        Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
        if HAS_ALPHA:
            At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
            gam = tl.associative_scan(At, 0, _mul)
            glast = tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True)   # [1, BD]
            Z = Ut / gam
            Kt = gam * Kt
            Qt = gam * Qt
        else:
            glast = tl.full((1, BD), 1.0, tl.float32)
            Z = Ut
        Uc = glast * Z                                                                   # Ũ
        bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
        Wm = tl.load(w_ptr + cb + ri * C + ci)
        Ms = tl.load(ms_ptr + (i_bh * NT + n) * D * M + rr * M + cv, mask=mr & mv, other=0.)
        dO = tl.load(do_ptr + tki * M + cv, mask=vr & mv, other=0.).to(tl.float32)
        Et = tl.load(e_ptr + tki * M + cv, mask=vr & mv, other=0.)
        Vt = tl.load(v_ptr + tki * M + cv, mask=vr & mv, other=0.).to(tl.float32)
        Aq = tl.where(ri >= ci, tl.dot(Qt, tl.trans(Z), input_precision=PREC), 0.)
        bE = bt * Et
        dbE = tl.dot(tl.trans(Aq), dO, input_precision=PREC) + tl.dot(Uc, Gm, input_precision=PREC)
        dV = tl.dot(tl.trans(Wm), dbE, input_precision=PREC)
        tl.store(dv_ptr + tki * M + cv, dV, mask=vr & mv)
        tl.atomic_add(dbeta_ptr + tki * G + i_g, tl.reduce(Et * dbE, 1, _sum, keep_dims=True), mask=vr)
        LE = Vt - tl.dot(Kt, Ms, input_precision=PREC)
        dN = tl.where(ri > ci, tl.dot(bt * dbE, tl.trans(LE), input_precision=PREC), 0.)
        tl.atomic_add(dn_ptr + cb + ri * C + ci, dN)
        dAq = tl.where(ri >= ci, tl.dot(dO, tl.trans(bE), input_precision=PREC), 0.)
        tl.atomic_add(daq_ptr + cb + ri * C + ci, dAq)
        dUt = tl.dot(bE, tl.trans(Gm), input_precision=PREC)
        tl.atomic_add(dut_ptr + ((i_bhg * NT + n) * C + ri) * D + rc, dUt, mask=mc)
        tl.atomic_add(dgc_ptr + (i_bh * NT + n) * D + rr, tl.reduce(Gm * Ms, 1, _sum, keep_dims=True), mask=mr)
        tl.atomic_add(dqg_ptr + tki * D + rc, tl.dot(dO, tl.trans(Ms), input_precision=PREC), mask=vr & mc)
        tl.atomic_add(dkg_ptr + tki * D + rc, -tl.dot(dV, tl.trans(Ms), input_precision=PREC), mask=vr & mc)
        Gm = (tl.trans(glast) * Gm + tl.dot(tl.trans(Qt), dO, input_precision=PREC)
              - tl.dot(tl.trans(Kt), dV, input_precision=PREC))
    tl.store(dm0_ptr + i_bh * D * M + rr * M + cv, Gm, mask=mr & mv)


@triton.jit(do_not_specialize=["T", "NT"])
def chunk_bwd_cov_kernel(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, ps_ptr, dpT_ptr,
                         daq_ptr, dn_ptr, dut_ptr, dbeta_ptr,
                         dr2_ptr, dp0_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr, dgc_ptr, dcc_ptr,
                         T, NT,
                         H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                         C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee"):
    """Covariance adjoint, reverse over chunks (``H`` ``[BD, BD]`` in registers).  Per chunk::

        dZ = −2 diag(β) Z dP_m + γ_C ⊙ dŨ + dA_qᵀ Qγ,   dP_m = (γ_Cγ_Cᵀ) ⊙ H
        dN ⊃ stril(dZ Ω̃ᵀ),  dΩ̃ = Nᵀ dZ,  Ψ = −stril(dN Nᵀ) diag(β) − diag(β² dβ),
        dΣ_y = sym(Nᵀ Ψ N) (diagonal: dr²),  dΩ̃ ⊃ dS_lowᵀ Kγ,  d(Kγ) ⊃ dS_low Ω̃ + dΩ̃ P,
        H ← dP_m + sym(Kγᵀ dΩ̃)
    """
    pid = tl.program_id(0).to(tl.int64)
    i_g = pid % G
    i_bh = pid // G
    i_b = i_bh // H
    i_h = i_bh % H
    rd = tl.arange(0, BD)
    rr = rd[:, None]
    rc = rd[None, :]
    mr = rr < D
    mc = rc < D
    ri = tl.arange(0, C)[:, None]
    ci = tl.arange(0, C)[None, :]
    eye = ri == ci
    Hc = tl.load(dpT_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    tok = i_b * T * H + i_h
    for j in range(NT):
        n = NT - 1 - j
        tr = n * C + ri
        vr = tr < T
        tki = tok + tr * H
        tc = n * C + ci
        tkc = tok + tc * H
        cb = (pid * NT + n) * C * C
        Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
        Qt = tl.load(q_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
        Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
        L2t = tl.load(l2_ptr + tki, mask=vr, other=0.).to(tl.float32)
        if HAS_ALPHA:
            At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
            gam, cc = tl.associative_scan((At, tl.where(mc, L2t, 0.)), 0, _decay_noise)
        else:
            gam, cc = tl.associative_scan((tl.full((C, BD), 1.0, tl.float32), tl.where(mc, L2t, 0.)), 0,
                                          _decay_noise)
        glast = tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True)      # [1, BD]
        Z = Ut / gam
        Kg = gam * Kt
        Qg = gam * Qt
        cg = cc / gam
        bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)                       # [C, 1]
        btr = tl.load(beta_ptr + tkc * G + i_g, mask=tc < T, other=1.)                  # [1, C]
        Nn = tl.load(w_ptr + cb + ri * C + ci) / bt                                     # N = diag(1/β) W
        P = tl.load(ps_ptr + (pid * NT + n) * D * D + rr * D + rc, mask=mr & mc, other=0.)
        # P' = (γ_Cγ_Cᵀ) ⊙ (P − Zᵀ diag(β) Z) + diag(c_C)
        dPm = (tl.trans(glast) * glast) * Hc
        Pm = P - tl.dot(tl.trans(Z * bt), Z, input_precision=PREC)
        ZH = tl.dot(Z, dPm, input_precision=PREC)
        dUt = tl.load(dut_ptr + (cb // C + ri) * D + rc, mask=mc, other=0.)
        dZ = -2.0 * bt * ZH + glast * dUt
        db = tl.load(dbeta_ptr + tki * G + i_g, mask=vr, other=0.) - tl.reduce(ZH * Z, 1, _sum, keep_dims=True)
        dgc = (2.0 * tl.reduce((Hc * Pm) * tl.trans(glast), 0, _sum, keep_dims=True)
               + tl.reduce(dUt * Z, 0, _sum, keep_dims=True))                           # [1, BD]
        tl.atomic_add(dgc_ptr + (i_bh * NT + n) * D + rc, dgc, mask=mc)
        tl.atomic_add(dcc_ptr + (i_bh * NT + n) * D + rc,
                      tl.reduce(tl.where(rr == rc, Hc, 0.), 0, _sum, keep_dims=True), mask=mc)
        # A_q = tril(Qγ Zᵀ)
        dA = tl.load(daq_ptr + cb + ri * C + ci)
        tl.atomic_add(dqg_ptr + tki * D + rc, tl.dot(dA, Z, input_precision=PREC), mask=vr & mc)
        dZ = dZ + tl.dot(tl.trans(dA), Qg, input_precision=PREC)
        # Z = N Ω̃,  Ω̃ = Kγ P + (c/γ) ⊙ K
        Om = tl.dot(Kg, P, input_precision=PREC) + cg * Kt
        dN = tl.load(dn_ptr + cb + ri * C + ci) + tl.where(ri > ci, tl.dot(dZ, tl.trans(Om), input_precision=PREC), 0.)
        dOm = tl.dot(tl.trans(Nn), dZ, input_precision=PREC)
        # the LDLᵀ factorisation Σ_y = L diag(1/β) Lᵀ
        Psi = (-tl.where(ri > ci, tl.dot(dN, tl.trans(Nn), input_precision=PREC), 0.) * btr
               - tl.where(eye, bt * bt * db, 0.))
        dS = tl.dot(tl.dot(tl.trans(Nn), Psi, input_precision=PREC), Nn, input_precision=PREC)
        dS = 0.5 * (dS + tl.trans(dS))
        tl.store(dr2_ptr + tki * G + i_g, tl.reduce(tl.where(eye, dS, 0.), 1, _sum, keep_dims=True), mask=vr)
        dSl = tl.where(ri > ci, 2.0 * dS, tl.where(eye, dS, 0.))
        # Σ_y = tril(Kγ Ω̃ᵀ) + diag(r²)
        dOm = dOm + tl.dot(tl.trans(dSl), Kg, input_precision=PREC)
        tl.atomic_add(dkg_ptr + tki * D + rc,
                      tl.dot(dSl, Om, input_precision=PREC) + tl.dot(dOm, P, input_precision=PREC), mask=vr & mc)
        tdk = dOm * Kt
        tl.atomic_add(dkd_ptr + tki * D + rc, cg * dOm, mask=vr & mc)
        tl.atomic_add(dc_ptr + tki * D + rc, tdk / gam, mask=vr & mc)
        tl.atomic_add(dgam_ptr + tki * D + rc, -(tdk * cg) / gam, mask=vr & mc)
        dHP = tl.dot(tl.trans(Kg), dOm, input_precision=PREC)
        Hc = dPm + 0.5 * (dHP + tl.trans(dHP))
    tl.store(dp0_ptr + pid * D * D + rr * D + rc, Hc, mask=mr & mc)
