r"""Triton kernels of the chunked BL backward: the chunk formulas of the forward differentiated
by hand, in the quotient form (``R[τ, i] = γ_τ/γ_i``, so every contraction is a matmul).

Only ``@triton.jit`` functions; :mod:`.chunk` loads this file compiled or interpreted
through :func:`._dispatch.kernels`.  Kernels must compile with triton 3.6 and interpret
with triton 3.9.  Chunk of ``C`` tokens, ``γ`` the cumulative decay relative to the chunk
start, ``Z = U/γ``, ``Ω̃ = (γ⊙K) P + (c/γ) ⊙ K``, ``N = L⁻¹ = diag(1/β) W`` (``W`` from the
forward).  The reverse chains over chunks carry only the adjoints (the mean adjoint ``G``,
``D×m``, and the covariance adjoint ``H``, ``D×D``); everything else runs with one program per
chunk (the pass list is in :func:`.chunk._chunk_backward`):

* :func:`chunk_bwd_pstate_kernel` / :func:`chunk_bwd_mstate_kernel`: the chunk-start
  covariances and means, a linear scan of the stored ``u, β, e`` (no factorisation);
* :func:`chunk_bwd_gstate_kernel` (the ``G`` chain) and :func:`chunk_bwd_mean_par_kernel` (per
  chunk, :func:`_mean_chunk`): ``dV``, ``dM_0`` and, added atomically over the value blocks,
  the per-chunk adjoints ``dA_q, dN`` (``C×C``), ``dŨ`` (``C×D``), ``dβ`` and the per-token
  ``d(Qγ), d(Kγ)``;
* :func:`chunk_bwd_cov_par_kernel` (per chunk, :func:`_cov_chunk`: the sources ``S_n`` at
  ``H = 0``, then the outputs) around :func:`chunk_bwd_hstate_kernel` (the ``H`` chain): the
  factorisation's adjoint ``dΣ_y = sym(Nᵀ Ψ N)``, ``dr²``, ``dP_0`` and the per-token parts of
  ``dK``, ``dγ``, ``dc``;
* :func:`chunk_bwd_epilogue_kernel`: ``γ``, ``c`` and the reverse cumulative sums of the decay
  gradient, per token.

Padding: tokens past ``T`` load ``k = q = v = e = do = u = 0``, ``α = 1``, ``ℓ² = 0``, ``β = 1``.
"""
import os

import triton
import triton.language as tl

# shared helpers, loaded in this file's mode (see _kernel_common.py)
from ._dispatch import kernels as _load_kernels

_common = _load_kernels(os.environ.get("TRITON_INTERPRET", "0") == "1", "_kernel_common.py")
_sum, _mul, _max, _decay_noise = _common._sum, _common._mul, _common._max, _common._decay_noise
_head_group, _value_block, _tiles = _common._head_group, _common._value_block, _common._tiles
_rows, _last_row, _by_state = _common._rows, _common._last_row, _common._by_state


# --------------------------------------------------------------------------
# the per-chunk decay loads (program-id decomposition, tile ranges and token rows: _kernel_common)
# --------------------------------------------------------------------------
@triton.jit
def _gamma(a_ptr, tki, vr, rc, mc, ri, D: tl.constexpr, C: tl.constexpr):
    """``γ`` (cumulative decay in the chunk, ``[C, BD]``) and ``γ_C`` (``[1, BD]``)."""
    At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
    gam = tl.associative_scan(At, 0, _mul)
    return gam, _last_row(gam, ri, C)


@triton.jit
def _gamma_noise(a_ptr, l2_ptr, tki, vr, rc, mc, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                 HAS_ALPHA: tl.constexpr):
    """``γ`` and ``c`` (``c_j = γ_j² Σ_{τ≤j} ℓ²_τ/γ_τ²``, ``[C, BD]``) and ``ℓ²`` (``[C, 1]``)."""
    L2t = tl.load(l2_ptr + tki, mask=vr, other=0.).to(tl.float32)
    if HAS_ALPHA:
        At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
        gam, cc = tl.associative_scan((At, tl.where(mc, L2t, 0.)), 0, _decay_noise)
    else:
        gam, cc = tl.associative_scan((tl.full((C, BD), 1.0, tl.float32), tl.where(mc, L2t, 0.)), 0,
                                      _decay_noise)
    return gam, cc, L2t


@triton.jit
def _kqz(q_ptr, k_ptr, a_ptr, u_ptr, tki, vr, i_g, rc, mc, ri, G: tl.constexpr, D: tl.constexpr,
         BD: tl.constexpr, C: tl.constexpr, HAS_ALPHA: tl.constexpr):
    """A chunk's ``Kγ``, ``Qγ``, ``Z = U/γ`` (``[C, BD]``) and ``γ_C`` (``[1, BD]``)."""
    Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    Qt = tl.load(q_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
    if HAS_ALPHA:
        gam, glast = _gamma(a_ptr, tki, vr, rc, mc, ri, D, C)
        Z = Ut / gam
        Kt = gam * Kt
        Qt = gam * Qt
    else:
        glast = tl.full((1, BD), 1.0, tl.float32)
        Z = Ut
    return Kt, Qt, Z, glast


if os.environ.get("TRITON_INTERPRET", "0") == "1":
    @triton.jit
    def _sync():
        """Nothing: the interpreter runs a program's whole tensors at once (it has no ``debug_barrier``)."""
        pass
else:
    @triton.jit
    def _sync():
        """A barrier of the program's threads: what one wrote to global memory, every other then reads."""
        tl.debug_barrier()


@triton.jit
def _tf32_hi(x):
    """``x`` with its low 13 mantissa bits cleared: exact in TF32, and ``x − hi`` exact in fp32."""
    return (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def _dot3(a, b, acc):
    """``acc + a b`` to about fp32 accuracy from three TF32 products (``a_lo b_hi + a_hi b_lo + a_hi b_hi``, the
    small terms first), each added onto ``acc``: the split of the operands, not of the accumulator."""
    ah = _tf32_hi(a)
    bh = _tf32_hi(b)
    acc = tl.dot(a - ah, bh, acc, input_precision="tf32")
    acc = tl.dot(ah, b - bh, acc, input_precision="tf32")
    return tl.dot(ah, bh, acc, input_precision="tf32")


@triton.jit
def _dot_onto(a, b, acc, PREC: tl.constexpr):
    """``acc + a b`` at ``PREC``; ``tf32x3`` as :func:`_dot3` (Triton's own splits the accumulator's products
    too: compiled for ``sm_90a`` at ``D = 128`` its ``D×D`` accumulations spill)."""
    if PREC == "tf32x3":
        return _dot3(a, b, acc)
    return tl.dot(a, b, acc, input_precision=PREC)


@triton.jit
def _dot_p(a, b, PREC: tl.constexpr):
    """``a b`` at ``PREC``, ``tf32x3`` as :func:`_dot3` onto zeros (the products with a ``D×BV`` state in the
    backward's mean pass: compiled for ``sm_90a`` at ``D = 128`` its spills fall from 680 to 448 B a thread)."""
    if PREC == "tf32x3":
        return _dot3(a, b, tl.full((a.shape[0], b.shape[1]), 0., tl.float32))
    return tl.dot(a, b, input_precision=PREC)


@triton.jit
def _acc_rows(tki, tok, T, TA, A0, H: tl.constexpr, C: tl.constexpr):
    """Token rows ``tki`` (``[B, T, H]`` layout) in the per-token accumulators ``[B, TA, H, ·]``, which
    hold the tokens from chunk ``A0`` on (the whole sequence: ``TA = T``, ``A0 = 0``, the same rows)."""
    i_b = tok // (T * H)
    return tki + i_b * (TA - T) * H - A0 * C * H


@triton.jit
def _mean_chunk(v_ptr, beta_ptr, e_ptr, do_ptr, w_ptr, ms_ptr, dv_ptr, daq_ptr, dn_ptr, dut_ptr, dbeta_ptr,
                dgc_ptr, dqg_ptr, dkg_ptr, Gm, Kt, Qt, Z, glast, n, sn, i_bhg, i_bh, i_g, tki, vr, cb, cv, mv,
                rr, rc, mr, mc, ri, ci, NT, tka, ra, rb, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                C: tl.constexpr, PREC: tl.constexpr):
    """One chunk of the mean adjoint from ``G`` at its end::

        d(βE) = A_qᵀ dO + Ũ G,   dV = Wᵀ d(βE),

    ``dV`` stored and, atomically over value blocks (and groups for the per-token ones):
    ``dA_q = tril(dO (βE)ᵀ)``, ``dN = stril((β ⊙ d(βE)) (V − Kγ M)ᵀ)``, ``dŨ = βE Gᵀ``,
    ``dβ = rowsum(E ⊙ d(βE))``, ``dγ_C = rowsum(G ⊙ M)``, ``d(Qγ) = dO Mᵀ``, ``d(Kγ) = −dV Mᵀ``.
    ``sn``: the chunk's row in the state buffer ``ms`` (``(b·H + h)·NS + n − N0``, see
    :func:`chunk_bwd_mean_par_kernel`); ``tka``, ``ra``, ``rb``: the chunk's rows in the accumulators
    (per token, per ``(b, h, g)`` chunk, per ``(b, h)`` chunk).  Returns ``(dO, dV)``."""
    bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
    Wm = tl.load(w_ptr + cb + ri * C + ci)
    Ms = tl.load(ms_ptr + sn * D * M + rr * M + cv, mask=mr & mv, other=0.)
    dO = tl.load(do_ptr + tki * M + cv, mask=vr & mv, other=0.).to(tl.float32)
    Et = tl.load(e_ptr + tki * M + cv, mask=vr & mv, other=0.)
    Vt = tl.load(v_ptr + tki * M + cv, mask=vr & mv, other=0.).to(tl.float32)
    Aq = tl.where(ri >= ci, tl.dot(Qt, tl.trans(Z), input_precision=PREC), 0.)
    bE = bt * Et
    dbE = tl.dot(tl.trans(Aq), dO, input_precision=PREC) + _dot_p(glast * Z, Gm, PREC)
    dV = tl.dot(tl.trans(Wm), dbE, input_precision=PREC)
    tl.store(dv_ptr + tki * M + cv, dV, mask=vr & mv)
    tl.atomic_add(dbeta_ptr + tki * G + i_g, tl.reduce(Et * dbE, 1, _sum, keep_dims=True), mask=vr)
    LE = Vt - _dot_p(Kt, Ms, PREC)
    ca = ra * C * C
    tl.atomic_add(dn_ptr + ca + ri * C + ci,
                  tl.where(ri > ci, tl.dot(bt * dbE, tl.trans(LE), input_precision=PREC), 0.))
    tl.atomic_add(daq_ptr + ca + ri * C + ci, tl.where(ri >= ci, tl.dot(dO, tl.trans(bE), input_precision=PREC), 0.))
    tl.atomic_add(dut_ptr + (ra * C + ri) * D + rc, _dot_p(bE, tl.trans(Gm), PREC), mask=mc)
    tl.atomic_add(dgc_ptr + rb * D + rr, tl.reduce(Gm * Ms, 1, _sum, keep_dims=True), mask=mr)
    tl.atomic_add(dqg_ptr + tka * D + rc, _dot_p(dO, tl.trans(Ms), PREC), mask=vr & mc)
    tl.atomic_add(dkg_ptr + tka * D + rc, -_dot_p(dV, tl.trans(Ms), PREC), mask=vr & mc)
    return dO, dV


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_bwd_pstate_kernel(k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, p0_ptr, ps_ptr, pe_ptr, T, NT, N0, N1,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee",
                            STORE_END: tl.constexpr = False):
    """Chunk-start covariances of chunks ``N0 … N1−1``, ``ps [B, H, G, N1−N0, D, D]``, from ``p0``
    (the covariance at the start of chunk ``N0``, ``[B, H, G, D, D]``):
    ``P ← (γ_Cγ_Cᵀ) ⊙ (P − Zᵀ diag(β) Z) + diag(c_C)``; with ``STORE_END`` also the covariance
    at the start of chunk ``N1`` (the end of chunk ``N1−1``) into ``pe [B, H, G, D, D]``."""
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    NS = N1 - N0
    P = tl.load(p0_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    for n in range(N0, N1):
        tl.store(ps_ptr + (pid * NS + n - N0) * D * D + rr * D + rc, P, mask=mr & mc)
        vr, tki = _rows(ri, n, tok, T, H, C)
        Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
        bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
        gam, cc, L2t = _gamma_noise(a_ptr, l2_ptr, tki, vr, rc, mc, D, BD, C, HAS_ALPHA)
        if HAS_ALPHA:
            Z = Ut / gam
        else:
            Z = Ut
        glast = _last_row(gam, ri, C)                                                   # [1, BD]
        clast = _last_row(cc, ri, C)
        P = P - tl.dot(tl.trans(Z * bt), Z, input_precision=PREC)
        P = P * (tl.trans(glast) * glast) + tl.where((rr == rc) & mr, clast, 0.)
        P = 0.5 * (P + tl.trans(P))
    if STORE_END:
        tl.store(pe_ptr + pid * D * D + rr * D + rc, P, mask=mr & mc)


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_bwd_mstate_kernel(a_ptr, u_ptr, beta_ptr, e_ptr, m0_ptr, ms_ptr, me_ptr, T, NT, N0, N1,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                            MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NVG: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee",
                            STORE_END: tl.constexpr = False):
    """Chunk-start means of chunks ``N0 … N1−1``, ``ms [B, H, N1−N0, D, m]``, from ``m0`` (the mean
    at the start of chunk ``N0``): ``M ← γ_C ⊙ M + (γ_C ⊙ Z)ᵀ (β ⊙ E)``; with ``STORE_END`` also
    the mean at the start of chunk ``N1`` into ``me [B, H, D, m]``."""
    pid = tl.program_id(0).to(tl.int64)
    i_bhg, i_g, i_bh, tok, cv, mv = _value_block(pid, T, H, G, MG, BV, NVG)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    NS = N1 - N0
    S = tl.load(m0_ptr + i_bh * D * M + rr * M + cv, mask=mr & mv, other=0.).to(tl.float32)
    for n in range(N0, N1):
        tl.store(ms_ptr + (i_bh * NS + n - N0) * D * M + rr * M + cv, S, mask=mr & mv)
        vr, tki = _rows(ri, n, tok, T, H, C)
        Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
        bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
        Et = tl.load(e_ptr + tki * M + cv, mask=vr & mv, other=0.)
        if HAS_ALPHA:
            gam, glast = _gamma(a_ptr, tki, vr, rc, mc, ri, D, C)                       # [C, BD], [1, BD]
            Ut = (glast / gam) * Ut                                                      # γ_C ⊙ Z
            S = tl.trans(glast) * S
        S = S + tl.dot(tl.trans(Ut), bt * Et, input_precision=PREC)
    if STORE_END:
        tl.store(me_ptr + i_bh * D * M + rr * M + cv, S, mask=mr & mv)


@triton.jit
def _cov_inputs(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, n, pid, tok, T, NT,
                H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                HAS_ALPHA: tl.constexpr):
    """What a chunk's covariance adjoint reads from the inputs, the same in :func:`_cov_chunk` and
    :func:`_cov_chunk_rows`: ``K``, ``Z = U/γ``, ``Kγ``, ``Qγ``, ``c/γ``, ``γ``, ``γ_C`` (``[C, BD]``; ``[1, BD]``),
    ``β`` as a column and a row, and ``N = diag(1/β) W``."""
    i_g = pid % G
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    vr, tki = _rows(ri, n, tok, T, H, C)
    vc, tkc = _rows(ci, n, tok, T, H, C)
    Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    Qt = tl.load(q_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
    gam, cc, L2t = _gamma_noise(a_ptr, l2_ptr, tki, vr, rc, mc, D, BD, C, HAS_ALPHA)
    glast = _last_row(gam, ri, C)                                                   # [1, BD]
    bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)                       # [C, 1]
    btr = tl.load(beta_ptr + tkc * G + i_g, mask=vc, other=1.)                      # [1, C]
    Nn = tl.load(w_ptr + (pid * NT + n) * C * C + ri * C + ci) / bt                 # N = diag(1/β) W
    return Kt, Ut / gam, gam * Kt, gam * Qt, cc / gam, gam, glast, bt, btr, Nn


@triton.jit
def _query_adjoint(daq_ptr, dqg_ptr, ca, tka, vr, rc, mc, ri, ci, Z, Qg, dZ, D: tl.constexpr, C: tl.constexpr,
                   PREC: tl.constexpr, OUT: tl.constexpr):
    """``A_q = tril(Qγ Zᵀ)``'s part of a chunk's covariance adjoint (shared by :func:`_cov_chunk` and
    :func:`_cov_chunk_rows`): ``dZ ⊃ dA_qᵀ Qγ`` (returned) and, with ``OUT``, ``d(Qγ) ⊃ dA_q Z``."""
    dA = tl.load(daq_ptr + ca + ri * C + ci)
    if OUT:
        tl.atomic_add(dqg_ptr + tka * D + rc, tl.dot(dA, Z, input_precision=PREC), mask=vr & mc)
    return dZ + tl.dot(tl.trans(dA), Qg, input_precision=PREC)


@triton.jit
def _factor_adjoint(dn_ptr, dr2_ptr, ca, tki, i_g, vr, ri, ci, Kg, Om, Nn, bt, btr, db, dZ, G: tl.constexpr,
                    C: tl.constexpr, PREC: tl.constexpr, OUT: tl.constexpr):
    """The rest of a chunk's covariance adjoint that has no ``D×D`` matrix in it (shared as above): from ``dZ``
    through ``Z = N Ω̃`` and the ``LDLᵀ`` factorisation ``Σ_y = L diag(1/β) Lᵀ`` to ``dΩ̃`` and ``dS_low``
    (returned); with ``OUT`` it stores ``dr²``."""
    eye = ri == ci
    dN = tl.load(dn_ptr + ca + ri * C + ci) + tl.where(ri > ci, tl.dot(dZ, tl.trans(Om), input_precision=PREC), 0.)
    dOm = tl.dot(tl.trans(Nn), dZ, input_precision=PREC)
    Psi = (-tl.where(ri > ci, tl.dot(dN, tl.trans(Nn), input_precision=PREC), 0.) * btr
           - tl.where(eye, bt * bt * db, 0.))
    dS = tl.dot(tl.dot(tl.trans(Nn), Psi, input_precision=PREC), Nn, input_precision=PREC)
    dS = 0.5 * (dS + tl.trans(dS))
    if OUT:
        tl.store(dr2_ptr + tki * G + i_g, tl.reduce(tl.where(eye, dS, 0.), 1, _sum, keep_dims=True), mask=vr)
    dSl = tl.where(ri > ci, 2.0 * dS, tl.where(eye, dS, 0.))
    # Σ_y = tril(Kγ Ω̃ᵀ) + diag(r²)
    dOm = dOm + tl.dot(tl.trans(dSl), Kg, input_precision=PREC)
    return dOm, dSl


@triton.jit
def _noise_outputs(dkd_ptr, dc_ptr, dgam_ptr, tka, vr, rc, mc, dOm, Kt, cg, gam, D: tl.constexpr):
    """A chunk's per-token ``dK`` (the noise term's), ``dc`` and ``dγ`` parts from ``dΩ̃`` (``Ω̃ ⊃ (c/γ) ⊙ K``)."""
    tdk = dOm * Kt
    tl.atomic_add(dkd_ptr + tka * D + rc, cg * dOm, mask=vr & mc)
    tl.atomic_add(dc_ptr + tka * D + rc, tdk / gam, mask=vr & mc)
    tl.atomic_add(dgam_ptr + tka * D + rc, -(tdk * cg) / gam, mask=vr & mc)


@triton.jit
def _cov_chunk(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, ps_ptr, daq_ptr, dn_ptr, dut_ptr, dbeta_ptr,
               dr2_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr, dgc_ptr, dcc_ptr,
               Hc, n, sn, pid, i_bh, tok, T, NT, TA, NA, A0,
               H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
               HAS_ALPHA: tl.constexpr, PREC: tl.constexpr, OUT: tl.constexpr, STATE_LEFT: tl.constexpr = False):
    """One chunk of the covariance adjoint: ``H`` at the chunk end → ``H`` at its start
    (returned); with ``OUT`` the per-token outputs are written / added.  Per chunk::

        dZ = −2 diag(β) Z dP_m + γ_C ⊙ dŨ + dA_qᵀ Qγ,   dP_m = (γ_Cγ_Cᵀ) ⊙ H
        dN ⊃ stril(dZ Ω̃ᵀ),  dΩ̃ = Nᵀ dZ,  Ψ = −stril(dN Nᵀ) diag(β) − diag(β² dβ),
        dΣ_y = sym(Nᵀ Ψ N) (diagonal: dr²),  dΩ̃ ⊃ dS_lowᵀ Kγ,  d(Kγ) ⊃ dS_low Ω̃ + dΩ̃ P,
        H ← dP_m + sym(Kγᵀ dΩ̃)

    ``sn``: the chunk's row in the state buffer ``ps`` (see :func:`chunk_bwd_cov_par_kernel`); the
    accumulators hold ``NA`` chunks (``TA`` token rows) a batch row from chunk ``A0`` on.
    ``STATE_LEFT``: the ``C×D`` by ``D×D`` products with the symmetric ``P`` and ``dP_m`` as the left
    operand, ``(S Xᵀ)ᵀ`` (``_by_state``; ``ChunkConfig.state_dot``).
    """
    i_g = pid % G
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    vr, tki = _rows(ri, n, tok, T, H, C)
    ra = pid * NA + n - A0
    ca = ra * C * C
    rb = (i_bh * NA + n - A0) * D
    tka = _acc_rows(tki, tok, T, TA, A0, H, C)
    Kt, Z, Kg, Qg, cg, gam, glast, bt, btr, Nn = _cov_inputs(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr,
                                                             n, pid, tok, T, NT, H, G, D, BD, C, HAS_ALPHA)
    P = tl.load(ps_ptr + sn * D * D + rr * D + rc, mask=mr & mc, other=0.)
    # P' = (γ_Cγ_Cᵀ) ⊙ (P − Zᵀ diag(β) Z) + diag(c_C)
    dPm = (tl.trans(glast) * glast) * Hc
    Pm = P - tl.dot(tl.trans(Z * bt), Z, input_precision=PREC)
    ZH = _by_state(Z, dPm, PREC, STATE_LEFT)
    dUt = tl.load(dut_ptr + (ra * C + ri) * D + rc, mask=mc, other=0.)
    dZ = -2.0 * bt * ZH + glast * dUt
    db = tl.load(dbeta_ptr + tki * G + i_g, mask=vr, other=0.) - tl.reduce(ZH * Z, 1, _sum, keep_dims=True)
    dgc = (2.0 * tl.reduce((Hc * Pm) * tl.trans(glast), 0, _sum, keep_dims=True)
           + tl.reduce(dUt * Z, 0, _sum, keep_dims=True))                           # [1, BD]
    if OUT:
        tl.atomic_add(dgc_ptr + rb + rc, dgc, mask=mc)
        tl.atomic_add(dcc_ptr + rb + rc,
                      tl.reduce(tl.where(rr == rc, Hc, 0.), 0, _sum, keep_dims=True), mask=mc)
    dZ = _query_adjoint(daq_ptr, dqg_ptr, ca, tka, vr, rc, mc, ri, ci, Z, Qg, dZ, D, C, PREC, OUT)
    # Z = N Ω̃,  Ω̃ = Kγ P + (c/γ) ⊙ K
    Om = _by_state(Kg, P, PREC, STATE_LEFT) + cg * Kt
    dOm, dSl = _factor_adjoint(dn_ptr, dr2_ptr, ca, tki, i_g, vr, ri, ci, Kg, Om, Nn, bt, btr, db, dZ, G, C, PREC, OUT)
    if OUT:
        tl.atomic_add(dkg_ptr + tka * D + rc,
                      tl.dot(dSl, Om, input_precision=PREC) + _by_state(dOm, P, PREC, STATE_LEFT), mask=vr & mc)
        _noise_outputs(dkd_ptr, dc_ptr, dgam_ptr, tka, vr, rc, mc, dOm, Kt, cg, gam, D)
    dHP = tl.dot(tl.trans(Kg), dOm, input_precision=PREC)
    Hc = dPm + 0.5 * (dHP + tl.trans(dHP))
    return Hc


@triton.jit
def _cov_chunk_rows(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, ps_ptr, hs_ptr, hsrc, daq_ptr, dn_ptr, dut_ptr,
                    dbeta_ptr, dr2_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr, dgc_ptr, dcc_ptr,
                    n, sn, pid, i_bh, tok, T, NT, TA, NA, A0,
                    H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                    HAS_ALPHA: tl.constexpr, PREC: tl.constexpr, OUT: tl.constexpr, H_ROWS: tl.constexpr):
    """:func:`_cov_chunk` with the ``D×D`` matrices (``P`` and, with ``OUT``, ``H``) never in registers: every
    product with them is summed over blocks of ``H_ROWS`` of their rows read from memory, against the matching
    columns of ``Z``, ``Kγ`` recomputed from the inputs (``Z dP_m``, ``Kγ P``), or added per block of columns
    (``dΩ̃ P``, atomically); ``colsum((H ⊙ P_m) γ_C)`` is taken as ``colsum((H ⊙ P) γ_C) − colsum(β Z ⊙ Z dP_m)/γ_C``
    and ``diag H`` read directly.  ``hsrc``: where the chunk-end ``H`` is (``D×D``, row-major; see
    :func:`chunk_bwd_cov_par_kernel`).  Without ``OUT`` (the sources, ``H = 0``) it stores ``S_n = sym(Kγᵀ dΩ̃)``
    into row ``sn`` of ``hs`` itself; with ``OUT`` it returns nothing (the caller keeps no ``H``).  For
    ``D = 128``, where :func:`_cov_chunk`'s ``D×D`` operands spill."""
    i_g = pid % G
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    vr, tki = _rows(ri, n, tok, T, H, C)
    ra = pid * NA + n - A0
    ca = ra * C * C
    rb = (i_bh * NA + n - A0) * D
    tka = _acc_rows(tki, tok, T, TA, A0, H, C)
    Kt, Z, Kg, Qg, cg, gam, glast, bt, btr, Nn = _cov_inputs(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr,
                                                             n, pid, tok, T, NT, H, G, D, BD, C, HAS_ALPHA)
    dUt = tl.load(dut_ptr + (ra * C + ri) * D + rc, mask=mc, other=0.)
    # the products with P and H, over blocks of their rows: Kγ P, and with OUT Z dP_m, colsum((H ⊙ P_m) γ_C)
    KP = tl.full((C, BD), 0., tl.float32)
    ZH = tl.full((C, BD), 0., tl.float32)
    dgc = tl.reduce(dUt * Z, 0, _sum, keep_dims=True)                               # [1, BD]
    for kb in tl.static_range(0, BD, H_ROWS):
        ck = kb + tl.arange(0, H_ROWS)[None, :]                                     # [1, H_ROWS]
        mk = ck < D
        rk = kb + tl.arange(0, H_ROWS)[:, None]                                     # [H_ROWS, 1]
        Kb = tl.load(k_ptr + tki * D + ck, mask=vr & mk, other=0.).to(tl.float32)
        Ub = tl.load(u_ptr + (tki * G + i_g) * D + ck, mask=vr & mk, other=0.)
        if HAS_ALPHA:
            gb, glb = _gamma(a_ptr, tki, vr, ck, mk, ri, D, C)
            Kb = gb * Kb
            Ub = Ub / gb
        else:
            glb = tl.full((1, H_ROWS), 1.0, tl.float32)
        Pb = tl.load(ps_ptr + sn * D * D + rk * D + rc, mask=(rk < D) & mc, other=0.)
        KP = _dot_onto(Kb, Pb, KP, PREC)
        if OUT:
            Hb = tl.load(hsrc + rk * D + rc, mask=(rk < D) & mc, other=0.)
            ZH = _dot_onto(Ub * glb, Hb, ZH, PREC)                                  # (Z ⊙ γ_C) H, by rows of H
            dgc += 2.0 * tl.reduce((Hb * Pb) * tl.trans(glb), 0, _sum, keep_dims=True)
    if OUT:
        ZH = ZH * glast                                                             # Z dP_m = ((Z ⊙ γ_C) H) ⊙ γ_C
        # colsum((H ⊙ P_m) γ_C) with P_m = P − Zᵀ diag(β) Z: the second part is colsum(β Z ⊙ Z dP_m) / γ_C
        # (Z dP_m = ((Z ⊙ γ_C) H) ⊙ γ_C), from Z dP_m at hand instead of a block of P_m a step
        dgc -= 2.0 * tl.reduce(bt * Z * ZH, 0, _sum, keep_dims=True) / glast
    dZ = -2.0 * bt * ZH + glast * dUt
    db = tl.load(dbeta_ptr + tki * G + i_g, mask=vr, other=0.) - tl.reduce(ZH * Z, 1, _sum, keep_dims=True)
    if OUT:
        tl.atomic_add(dgc_ptr + rb + rc, dgc, mask=mc)
        tl.atomic_add(dcc_ptr + rb + rc, tl.load(hsrc + rc * (D + 1), mask=mc, other=0.), mask=mc)
    dZ = _query_adjoint(daq_ptr, dqg_ptr, ca, tka, vr, rc, mc, ri, ci, Z, Qg, dZ, D, C, PREC, OUT)
    # Z = N Ω̃,  Ω̃ = Kγ P + (c/γ) ⊙ K
    Om = KP + cg * Kt
    dOm, dSl = _factor_adjoint(dn_ptr, dr2_ptr, ca, tki, i_g, vr, ri, ci, Kg, Om, Nn, bt, btr, db, dZ, G, C, PREC, OUT)
    if OUT:
        tl.atomic_add(dkg_ptr + tka * D + rc, tl.dot(dSl, Om, input_precision=PREC), mask=vr & mc)
        for kb in tl.static_range(0, BD, H_ROWS):                                   # + dΩ̃ P, by blocks of columns
            ck = kb + tl.arange(0, H_ROWS)[None, :]
            Pc = tl.load(ps_ptr + sn * D * D + rr * D + ck, mask=mr & (ck < D), other=0.)   # [BD, H_ROWS]
            part = _dot_onto(dOm, Pc, tl.full((C, H_ROWS), 0., tl.float32), PREC)
            tl.atomic_add(dkg_ptr + tka * D + ck, part, mask=vr & (ck < D))
        _noise_outputs(dkd_ptr, dc_ptr, dgam_ptr, tka, vr, rc, mc, dOm, Kt, cg, gam, D)
    else:
        dHP = _dot_onto(tl.trans(Kg), dOm, tl.full((BD, BD), 0., tl.float32), PREC)
        tl.store(hs_ptr + sn * D * D + rr * D + rc, 0.5 * (dHP + tl.trans(dHP)), mask=mr & mc)


@triton.jit
def _add(a, b):
    # our own combiner (also under the interpreter, where a scan calls it element by element)
    return a + b


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1", "TA", "NA", "A0"])
def chunk_bwd_epilogue_kernel(q_ptr, k_ptr, a_ptr, l2_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr,
                              dgc_ptr, dcc_ptr, dq_ptr, dk_ptr, dl2_ptr, dg_ptr, T, NT, N0, N1, TA, NA, A0,
                              H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                              HAS_ALPHA: tl.constexpr, NEED_DG: tl.constexpr):
    """Per-token gradients from the passes' adjoints, one program per (batch, chunk ``N0 … N1−1``,
    head), reading the accumulators' rows of :func:`_acc_rows`::

        dq = γ ⊙ d(Qγ),  dk = dK + γ ⊙ d(Kγ),  ρ_j = Σ_{τ≥j} γ_τ² dc_τ,  dℓ²_j = Σ_d ρ_j / γ_j²,
        dγ ⊃ K ⊙ d(Kγ) + Q ⊙ d(Qγ) + 2 (c/γ) dc − 2 ℓ² ρ / γ³,   dg_j = Σ_{τ≥j} γ_τ dγ_τ

    (``c = γ² cumsum(ℓ²/γ²)``; the chunk-end adjoints ``dγ_C, dc_C`` enter at the chunk's last row,
    where padded rows carry ``α = 1``)."""
    pid = tl.program_id(0).to(tl.int64)
    NS = N1 - N0
    i_h = pid % H
    i_n = N0 + (pid // H) % NS
    i_b = pid // (H * NS)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    tok = i_b * T * H + i_h
    vr, tki = _rows(ri, i_n, tok, T, H, C)
    tka = _acc_rows(tki, tok, T, TA, A0, H, C)
    mk = vr & mc
    Kt = tl.load(k_ptr + tki * D + rc, mask=mk, other=0.).to(tl.float32)
    Qt = tl.load(q_ptr + tki * D + rc, mask=mk, other=0.).to(tl.float32)
    gam, cc, L2t = _gamma_noise(a_ptr, l2_ptr, tki, vr, rc, mc, D, BD, C, HAS_ALPHA)
    dQg = tl.load(dqg_ptr + tka * D + rc, mask=mk, other=0.)
    dKg = tl.load(dkg_ptr + tka * D + rc, mask=mk, other=0.)
    last = ri == C - 1
    cb = ((i_b * H + i_h) * NA + i_n - A0) * D
    dc = tl.load(dc_ptr + tka * D + rc, mask=mk, other=0.) + tl.where(
        last, tl.load(dcc_ptr + cb + rc, mask=mc, other=0.), 0.)
    tl.store(dq_ptr + tki * D + rc, gam * dQg, mask=mk)
    tl.store(dk_ptr + tki * D + rc, tl.load(dkd_ptr + tka * D + rc, mask=mk, other=0.) + gam * dKg, mask=mk)
    g2 = gam * gam
    rho = tl.associative_scan(g2 * dc, 0, _add, reverse=True)
    rg = tl.where(mc, rho / g2, 0.)
    tl.store(dl2_ptr + tki, tl.reduce(rg, 1, _sum, keep_dims=True), mask=vr)
    if NEED_DG:
        dgam = (tl.load(dgam_ptr + tka * D + rc, mask=mk, other=0.) + Kt * dKg + Qt * dQg
                + tl.where(last, tl.load(dgc_ptr + cb + rc, mask=mc, other=0.), 0.)
                + 2.0 * (cc / gam) * dc - 2.0 * L2t * rg / gam)
        tl.store(dg_ptr + tki * D + rc, tl.associative_scan(dgam * gam, 0, _add, reverse=True), mask=mk)


# --------------------------------------------------------------------------
# the reverse chains carry only the adjoints,
#   G ← Γ G − Xᵀ (Ũ G) + s_n,   H ← Φᵀ H Φ + S_n,   Φ = Γ − Ũᵀ X,  X = W Kγ,  Γ = diag(γ_C)
# (Φ = F_C ⋯ F_1, the product of the chunk's token transitions F_t = (I − β_t u_t k_tᵀ) A_t);
# everything else runs with one program per chunk from the stored chunk-end adjoints
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_bwd_gstate_kernel(q_ptr, k_ptr, a_ptr, u_ptr, beta_ptr, do_ptr, w_ptr, dmT_ptr, gs_ptr, dm0_ptr,
                            T, NT, N0, N1,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                            MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NVG: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee"):
    """Chunk-end mean adjoints of chunks ``N0 … N1−1``, ``gs [B, H, N1−N0, D, m]``, from ``dmT`` (the
    adjoint at the end of chunk ``N1−1``), and the adjoint at the start of chunk ``N0`` into ``dm0``:
    ``G ← γ_C ⊙ G + Qγᵀ dO − Kγᵀ Wᵀ (A_qᵀ dO + Ũ G)`` (fla's ``dh`` pass)."""
    pid = tl.program_id(0).to(tl.int64)
    i_bhg, i_g, i_bh, tok, cv, mv = _value_block(pid, T, H, G, MG, BV, NVG)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    NS = N1 - N0
    Gm = tl.load(dmT_ptr + i_bh * D * M + rr * M + cv, mask=mr & mv, other=0.).to(tl.float32)
    for j in range(NS):
        n = N1 - 1 - j
        tl.store(gs_ptr + (i_bh * NS + n - N0) * D * M + rr * M + cv, Gm, mask=mr & mv)
        vr, tki = _rows(ri, n, tok, T, H, C)
        Kt, Qt, Z, glast = _kqz(q_ptr, k_ptr, a_ptr, u_ptr, tki, vr, i_g, rc, mc, ri, G, D, BD, C, HAS_ALPHA)
        Wm = tl.load(w_ptr + (i_bhg * NT + n) * C * C + ri * C + ci)
        dO = tl.load(do_ptr + tki * M + cv, mask=vr & mv, other=0.).to(tl.float32)
        Aq = tl.where(ri >= ci, tl.dot(Qt, tl.trans(Z), input_precision=PREC), 0.)
        dbE = tl.dot(tl.trans(Aq), dO, input_precision=PREC) + tl.dot(glast * Z, Gm, input_precision=PREC)
        dV = tl.dot(tl.trans(Wm), dbE, input_precision=PREC)
        Gm = (tl.trans(glast) * Gm + tl.dot(tl.trans(Qt), dO, input_precision=PREC)
              - tl.dot(tl.trans(Kt), dV, input_precision=PREC))
    tl.store(dm0_ptr + i_bh * D * M + rr * M + cv, Gm, mask=mr & mv)


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1", "TA", "NA", "A0"])
def chunk_bwd_mean_par_kernel(q_ptr, k_ptr, v_ptr, a_ptr, u_ptr, beta_ptr, e_ptr, do_ptr, w_ptr, ms_ptr, gs_ptr,
                              dv_ptr, daq_ptr, dn_ptr, dut_ptr, dbeta_ptr, dgc_ptr, dqg_ptr, dkg_ptr,
                              T, NT, N0, N1, TA, NA, A0,
                              H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                              MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NVG: tl.constexpr,
                              C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee"):
    """The mean adjoint's per-chunk outputs (:func:`_mean_chunk`), one program per (b, h, g, value
    block, chunk ``n`` of ``N0 … N1−1``), from the stored chunk-end adjoint ``G`` (``gs``) and
    chunk-start mean (``ms``), both ``[B, H, N1−N0, D, m]`` (row ``n − N0``); the accumulators hold
    ``NA`` chunks (``TA`` token rows) a batch row from chunk ``A0`` on."""
    pid = tl.program_id(0).to(tl.int64)
    NS = N1 - N0
    n = N0 + pid % NS
    i_bhg, i_g, i_bh, tok, cv, mv = _value_block(pid // NS, T, H, G, MG, BV, NVG)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    vr, tki = _rows(ri, n, tok, T, H, C)
    cb = (i_bhg * NT + n) * C * C
    sn = i_bh * NS + n - N0
    Gm = tl.load(gs_ptr + sn * D * M + rr * M + cv, mask=mr & mv, other=0.)
    Kt, Qt, Z, glast = _kqz(q_ptr, k_ptr, a_ptr, u_ptr, tki, vr, i_g, rc, mc, ri, G, D, BD, C, HAS_ALPHA)
    tka = _acc_rows(tki, tok, T, TA, A0, H, C)
    _mean_chunk(v_ptr, beta_ptr, e_ptr, do_ptr, w_ptr, ms_ptr, dv_ptr, daq_ptr, dn_ptr, dut_ptr, dbeta_ptr,
                dgc_ptr, dqg_ptr, dkg_ptr, Gm, Kt, Qt, Z, glast, n, sn, i_bhg, i_bh, i_g, tki, vr, cb, cv, mv,
                rr, rc, mr, mc, ri, ci, NT, tka, i_bhg * NA + n - A0, i_bh * NA + n - A0, G, D, M, C, PREC)


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1", "TA", "NA", "A0"])
def chunk_bwd_cov_par_kernel(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, ps_ptr, hs_ptr, ht_ptr,
                             daq_ptr, dn_ptr, dut_ptr, dbeta_ptr,
                             dr2_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr, dgc_ptr, dcc_ptr,
                             T, NT, N0, N1, TA, NA, A0,
                             H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                             C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee",
                             OUT: tl.constexpr = False, STATE_LEFT: tl.constexpr = False,
                             H_ROWS: tl.constexpr = 0):
    """One program per (b, h, g, chunk ``n`` of ``N0 … N1−1``; ``ps``, ``hs`` ``[B, H, G, N1−N0, D, D]``,
    row ``n − N0``).  ``OUT=False``: the chunk's source ``S_n`` (:func:`_cov_chunk` with ``H = 0``)
    into ``hs``; ``OUT=True``: the outputs from the chunk-end adjoint ``H_n`` in ``hs``.  A chunk
    reads only its own rows of the buffers (no neighbouring chunk's).  ``H_ROWS > 0``: :func:`_cov_chunk_rows`
    (``P`` and ``H`` read in row blocks, never whole in registers), the outputs reading the chunk-end ``H``
    where :func:`_hstate_rows` leaves it: row ``n + 1`` of ``hs``, or ``ht`` (``[B, H, G, D, D]``, the
    segment's end adjoint) for the segment's last chunk."""
    pid_ = tl.program_id(0).to(tl.int64)
    NS = N1 - N0
    n = N0 + pid_ % NS
    pid = pid_ // NS
    i_g, i_bh, tok = _head_group(pid, T, H, G)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    sn = pid * NS + n - N0
    if H_ROWS > 0:
        # H at the chunk's end: the segment's end adjoint for its last chunk, else the next chunk's row of hs
        # (where chunk_bwd_hstate_kernel leaves the adjoint at the start of chunk n + 1)
        if n == N1 - 1:
            hsrc = ht_ptr + pid * D * D
        else:
            hsrc = hs_ptr + (sn + 1) * D * D
        _cov_chunk_rows(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, ps_ptr, hs_ptr, hsrc, daq_ptr, dn_ptr, dut_ptr,
                        dbeta_ptr, dr2_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr, dgc_ptr, dcc_ptr,
                        n, sn, pid, i_bh, tok, T, NT, TA, NA, A0, H, G, D, BD, C, HAS_ALPHA, PREC, OUT, H_ROWS)
        return
    hp = hs_ptr + sn * D * D + rr * D + rc
    if OUT:
        Hc = tl.load(hp, mask=mr & mc, other=0.)
    else:
        Hc = tl.full((BD, BD), 0., tl.float32)
    Hc = _cov_chunk(q_ptr, k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, w_ptr, ps_ptr, daq_ptr, dn_ptr, dut_ptr,
                    dbeta_ptr, dr2_ptr, dqg_ptr, dkg_ptr, dkd_ptr, dc_ptr, dgam_ptr, dgc_ptr, dcc_ptr,
                    Hc, n, sn, pid, i_bh, tok, T, NT, TA, NA, A0, H, G, D, BD, C, HAS_ALPHA, PREC, OUT,
                    STATE_LEFT)
    if not OUT:
        tl.store(hp, Hc, mask=mr & mc)


@triton.jit
def _chain_inputs(k_ptr, a_ptr, u_ptr, w_ptr, n, pid, i_g, tok, T, NT, H: tl.constexpr, G: tl.constexpr,
                  D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr):
    """What one step of the ``H`` chain reads from the inputs (both forms of :func:`chunk_bwd_hstate_kernel`):
    the chunk's token rows, ``Ũ = (γ_C/γ) ⊙ U``, ``γ_C`` and ``X = W Kγ``."""
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    vr, tki = _rows(ri, n, tok, T, H, C)
    Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    Ut = tl.load(u_ptr + (tki * G + i_g) * D + rc, mask=vr & mc, other=0.)
    if HAS_ALPHA:
        gam, glast = _gamma(a_ptr, tki, vr, rc, mc, ri, D, C)
        Uc = (glast / gam) * Ut
        Kt = gam * Kt
    else:
        glast = tl.full((1, BD), 1.0, tl.float32)
        Uc = Ut
    Wm = tl.load(w_ptr + (pid * NT + n) * C * C + ri * C + ci)
    return vr, tki, Uc, glast, tl.dot(Wm, Kt, input_precision=PREC)


@triton.jit
def _hstate_rows(k_ptr, a_ptr, u_ptr, w_ptr, dpT_ptr, hs_ptr, Hc, pid, i_g, tok, T, NT, N0, N1,
                 H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                 HAS_ALPHA: tl.constexpr, PREC: tl.constexpr, H_ROWS: tl.constexpr):
    """:func:`chunk_bwd_hstate_kernel`'s chain with ``H`` never a matrix-product operand (at ``D = 128`` the
    whole-matrix form spills: its conversion and, under ``tf32x3``, its split into high and low parts):

    - ``Y = Ũ H`` is summed over blocks of ``H_ROWS`` rows of ``H`` read from memory, against the matching
      columns of ``Ũ`` recomputed from the inputs; the chunk-end ``H`` of chunk ``n`` is in memory already:
      ``dpT`` for the segment's last chunk, else row ``n + 1`` of ``hs``;
    - the three ``D×D`` terms go onto one accumulator, ``−(γ_C ⊙ Yᵀ) X + Xᵀ (Y Ũᵀ X − Y ⊙ γ_C)``;
    - ``S_n`` is read from row ``n`` last (a second ``D×D`` tile live only there) and the adjoint at the
      start of chunk ``n`` stored over it.

    So row ``n`` ends holding the adjoint at the *start* of chunk ``n`` (the end of chunk ``n − 1``), and
    :func:`chunk_bwd_cov_par_kernel` reads chunk ``n``'s from row ``n + 1`` (the segment's last chunk: from
    ``dpT``).  Returns the adjoint at the start of chunk ``N0``."""
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    NS = N1 - N0
    for j in range(NS):
        n = N1 - 1 - j
        vr, tki, Uc, glast, X = _chain_inputs(k_ptr, a_ptr, u_ptr, w_ptr, n, pid, i_g, tok, T, NT, H, G, D, BD, C,
                                              HAS_ALPHA, PREC)
        if j == 0:
            src = dpT_ptr + pid * D * D
        else:
            src = hs_ptr + (pid * NS + n + 1 - N0) * D * D
        _sync()                                         # the row stored last step, read by every thread
        Y = tl.full((C, BD), 0., tl.float32)
        for kb in tl.static_range(0, BD, H_ROWS):
            ck = kb + tl.arange(0, H_ROWS)[None, :]                                 # [1, H_ROWS]
            mk = ck < D
            Ub = tl.load(u_ptr + (tki * G + i_g) * D + ck, mask=vr & mk, other=0.)
            if HAS_ALPHA:
                gb, glb = _gamma(a_ptr, tki, vr, ck, mk, ri, D, C)
                Ub = (glb / gb) * Ub
            rk = kb + tl.arange(0, H_ROWS)[:, None]                                 # [H_ROWS, 1]
            Y = _dot_onto(Ub, tl.load(src + rk * D + rc, mask=(rk < D) & mc, other=0.), Y, PREC)
        YU = tl.dot(Y, tl.trans(Uc), input_precision=PREC)                         # [C, C]
        Hc = _dot_onto(tl.trans(Y * glast), -X, (tl.trans(glast) * glast) * Hc, PREC)
        Hc = _dot_onto(tl.trans(X), tl.dot(YU, X, input_precision=PREC) - Y * glast, Hc, PREC)
        hp = hs_ptr + (pid * NS + n - N0) * D * D + rr * D + rc
        Hc = Hc + tl.load(hp, mask=mr & mc, other=0.)                               # + S_n
        Hc = 0.5 * (Hc + tl.trans(Hc))
        _sync()                                         # every thread has read S_n before it is overwritten
        tl.store(hp, Hc, mask=mr & mc)
    return Hc


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_bwd_hstate_kernel(k_ptr, a_ptr, u_ptr, w_ptr, dpT_ptr, hs_ptr, dp0_ptr, T, NT, N0, N1,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee",
                            STATE_LEFT: tl.constexpr = False, H_ROWS: tl.constexpr = 0):
    """The covariance adjoint's chain: ``H ← Φᵀ H Φ + S_n`` with ``Φ = Γ − Ũᵀ X``, ``X = W Kγ``::

        Φᵀ H Φ = (γ_Cγ_Cᵀ) ⊙ H − A − Aᵀ + Xᵀ (Y Ũᵀ) X,   Y = Ũ H,  A = (γ_C ⊙ Yᵀ) X

    over chunks ``N1−1 … N0`` from ``dpT`` (the adjoint at the end of chunk ``N1−1``), reading ``S_n``
    from ``hs [B, H, G, N1−N0, D, D]`` (row ``n − N0``) and leaving the chunk-end adjoint ``H_n`` in
    its place; the adjoint at the start of chunk ``N0`` into ``dp0``.  ``H_ROWS > 0``:
    :func:`_hstate_rows` (``H`` read back in row blocks; row ``n`` left holding the adjoint at the start
    of chunk ``n``)."""
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    NS = N1 - N0
    Hc = tl.load(dpT_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    if H_ROWS > 0:
        Hc = _hstate_rows(k_ptr, a_ptr, u_ptr, w_ptr, dpT_ptr, hs_ptr, Hc, pid, i_g, tok, T, NT, N0, N1,
                          H, G, D, BD, C, HAS_ALPHA, PREC, H_ROWS)
    else:
        for j in range(NS):
            n = N1 - 1 - j
            hp = hs_ptr + (pid * NS + n - N0) * D * D + rr * D + rc
            S = tl.load(hp, mask=mr & mc, other=0.)
            tl.store(hp, Hc, mask=mr & mc)
            vr, tki, Uc, glast, X = _chain_inputs(k_ptr, a_ptr, u_ptr, w_ptr, n, pid, i_g, tok, T, NT, H, G, D, BD, C,
                                                  HAS_ALPHA, PREC)
            Y = _by_state(Uc, Hc, PREC, STATE_LEFT)                                # [C, BD]
            A = tl.dot(tl.trans(Y) * tl.trans(glast), X, input_precision=PREC)     # [BD, BD]
            YU = tl.dot(Y, tl.trans(Uc), input_precision=PREC)                     # [C, C]
            Hc = (tl.trans(glast) * glast) * Hc - A - tl.trans(A) \
                + tl.dot(tl.trans(X), tl.dot(YU, X, input_precision=PREC), input_precision=PREC) + S
            Hc = 0.5 * (Hc + tl.trans(Hc))
    tl.store(dp0_ptr + pid * D * D + rr * D + rc, Hc, mask=mr & mc)
