r"""Triton kernels of the chunked BL forward.

Only ``@triton.jit`` functions; :mod:`.chunk` loads this file compiled or
interpreted (through :func:`._dispatch.kernels`, as every kernel file).  Kernels
must compile with triton 3.6 and interpret with triton 3.9.

Two passes, as the token-by-token op, but chunk by chunk (chunk of ``C`` tokens,
notation of :mod:`.chunk`; ``R[τ, i] = α_{i+1} ⊙ … ⊙ α_τ`` relative to the chunk):

* **covariance pass** (one program per (batch, head, noise group), ``P_0``
  ``[D, D]`` in registers, sequential over chunks).  Per chunk:
  ``γ, c`` by one associative scan of ``(α_τ, ℓ_τ²)``; ``ω = γ ⊙ ((γ⊙K) P_0) + c ⊙ K``
  (one ``C×D×D`` matmul); then one loop over the chunk's rows ``τ`` that builds
  row ``τ`` of ``R`` by products only (``R[τ, ·] = α_τ ⊙ R[τ-1, ·]``, 1 on the
  diagonal: exact for zero, negative and strong decays, nothing divided), row
  ``τ`` of ``Σ_y`` (``Σ_y[τ, i] = k_τ · (R[τ, i] ⊙ ω_i)``) and row ``τ`` of ``L⁻¹``
  by the innovations recursion

      ``r = L⁻¹_{<τ} Σ_y[τ, <τ]``,  ``d_τ = Σ_y[τ, τ] − Σ_j r_j² / d_j``,
      ``L⁻¹[τ, ·] = e_τ − Σ_j (r_j / d_j) L⁻¹[j, ·]``,

  (the LDLᵀ factorisation ``Σ_y = L diag(d) Lᵀ`` one row at a time, all ``C×C``
  vector operations); ``β_τ = 1/d_τ``, ``u_τ = Σ_i L⁻¹[τ, i] R[τ, i] ⊙ ω_i``.
  The dependency chain per token is on ``C×C`` tiles, not the recurrence's
  ``D×D`` (the ``C×D`` work of a row does not feed the next row).  The chunk
  end: ``P_C = (γ_C γ_Cᵀ) ⊙ P_0 + diag(c_C) − Ũᵀ diag(β) Ũ`` with
  ``Ũ = R[C-1, ·] ⊙ U`` (one ``D×C×D`` matmul), symmetrised.  All products in
  full fp32 (``PREC="ieee"``, the default): TF32 loses three digits in
  ``Σ_y``'s pivots ``r² + kᵀP̄k``.
  Per chunk it writes, for the mean pass, ``W = diag(β) L⁻¹`` and
  ``Aq[τ, i] = q_τ · (R[τ, i] ⊙ u_i)`` (``C×C``) and ``Ũ`` (``C×D``), and per
  token ``u_t, β_t`` (the fused backward's inputs).
* **mean pass** (one program per (batch, head, group, block of value columns),
  ``M`` block ``[D, BV]`` in registers, sequential over chunks), matmuls only:
  ``βE = W (V − (γ⊙K) M_0)``, ``O = (γ⊙Q) M_0 + Aq βE``,
  ``M_C = γ_C ⊙ M_0 + Ũᵀ βE`` (BL App. D's triangular mean form; ``E`` are the
  innovations ``e_t = v_t − (A_t M_{t-1})ᵀ k_t``, written for the backward).
  ``PREC`` selects the precision of these value-side products ("ieee", or
  "tf32x3" at ``D = 128``: see :class:`.config.ChunkConfig`).

A second covariance-pass kernel, :func:`chunk_cov_fwd_mm_kernel` (the *quotient*
form: ratios ``γ_τ/γ_i``, five matmuls a chunk, only ``C×C`` work left in the row
loop), has the same inputs and outputs; ``chunk._cov_kernel`` picks it where
:func:`_abs_log_decay_sum` finds the decays safe and it is the faster kernel.

Choice on the device (``cov_kernel="device"``, ``chunk._cov_launches``): both covariance kernels
are launched on the same grid, after the guard pass, with ``guard_ptr`` (its one-element result)
and ``bound``; ``SELECT = 1`` runs the quotient kernel only where ``guard ≤ bound`` and ``SELECT = 2``
the row kernel only where not (NaN and inf compare False: unsafe), so exactly one of the two writes
the outputs and the other returns before its first load of the inputs.  No host read, so the
forward can be captured in a CUDA graph.  ``SELECT = 0`` (every other launch, ``guard_ptr`` and
``bound`` None) compiles the kernels as without the check.

Chunk range: each kernel walks chunks ``N0 … N1−1`` of the sequence (global chunk indices,
so tokens and per-chunk outputs are where a one-launch pass would put them), starting from the
state at ``p0_ptr`` / ``m0_ptr`` and leaving the state after chunk ``N1−1`` at ``pT_ptr`` /
``mT_ptr``: :func:`.chunk._chunk_forward` runs the sequence as a few such segments so that the
mean pass of one segment overlaps the covariance pass of the next.

Padding: tokens past ``T`` load ``k = q = v = 0``, ``α = 1``, ``ℓ² = 0``,
``r² = 1`` (they do not touch the state); key dimensions past ``D`` load 0
(and ``ℓ²`` is masked there), so the padded block of ``P`` stays 0.
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


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_cov_fwd_kernel(q_ptr, k_ptr, a_ptr, l2_ptr, r2_ptr, p0_ptr,
                         u_ptr, beta_ptr, w_ptr, aq_ptr, ut_ptr, pT_ptr, T, NT, N0, N1, guard_ptr, bound,
                         H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                         C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee",
                         SELECT: tl.constexpr = 0):
    if SELECT != 0:                                     # the choice on the device (module docstring)
        if (tl.load(guard_ptr) <= bound) != (SELECT == 1):     # NaN/inf compare False: unsafe
            return
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)          # token t of (b, h) is tok + t*H
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)           # key dim as rows / columns, chunk rows / columns
    z11 = tl.arange(0, 1)[None, :]
    P = tl.load(p0_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    for n in range(N0, N1):
        t0 = n * C
        tr = t0 + ri                                        # [C, 1] token indices
        vr = tr < T
        tki = tok + tr * H
        Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)     # [C, BD]
        if HAS_ALPHA:
            At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
        else:
            At = tl.full((C, BD), 1.0, tl.float32)
        L2t = tl.load(l2_ptr + tki, mask=vr, other=0.).to(tl.float32)                 # [C, 1]
        L2t = tl.where(mc, L2t, 0.)                                                   # [C, BD]
        gam, cc = tl.associative_scan((At, L2t), 0, _decay_noise)
        # ω_i = Π_i k_i = γ_i ⊙ (P_0 (γ_i ⊙ k_i)) + c_i ⊙ k_i
        Om = gam * tl.dot(gam * Kt, P, input_precision=PREC) + cc * Kt
        Rr = tl.full((C, BD), 0., tl.float32)                  # row τ of R (rows: i)
        U = tl.full((C, BD), 0., tl.float32)                   # rows u_i, i ≤ τ
        Li = tl.full((C, C), 0., tl.float32)                   # rows of L⁻¹ (j, i)
        bet = tl.full((C, 1), 0., tl.float32)                  # β_j
        cbase = (pid * NT + n) * C * C
        for t in range(C):
            tt = t0 + t
            vt = (tt + z11) < T                             # [1, 1] (a tensor mask)
            tk = tok + tt * H
            kt = tl.load(k_ptr + tk * D + rc, mask=mc & vt, other=0.).to(tl.float32)   # [1, BD]
            qt = tl.load(q_ptr + tk * D + rc, mask=mc & vt, other=0.).to(tl.float32)
            r2 = tl.load(r2_ptr + tk * G + i_g + z11, mask=vt, other=1.).to(tl.float32)   # [1, 1]
            if HAS_ALPHA:
                at = tl.load(a_ptr + tk * D + rc, mask=mc & vt, other=1.).to(tl.float32)
                Rr = Rr * at
            Rr = tl.where(ri == t, 1., Rr)
            Wt = Rr * Om                                    # R[τ, i] ⊙ ω_i
            sr = tl.reduce(Wt * kt, 1, _sum, keep_dims=True)        # Σ_y[τ, i], [C(i), 1]
            sc = tl.trans(sr)                                        # [1, C(i)]
            stt = tl.reduce(tl.where(ci == t, sc, 0.), 1, _sum, keep_dims=True) + r2   # [1, 1]
            rj = tl.reduce(Li * sc, 1, _sum, keep_dims=True)         # r_j, [C(j), 1] (0 for j ≥ τ)
            lam = rj * bet
            d = stt - tl.reduce(rj * lam, 0, _sum, keep_dims=True)   # [1, 1]
            new = tl.where(ci == t, 1., 0.) - tl.reduce(lam * Li, 0, _sum, keep_dims=True)   # L⁻¹[τ, ·]
            Li = tl.where(ri == t, new, Li)
            b = 1.0 / d
            bet = tl.where(ri == t, b, bet)
            ut = tl.reduce(tl.trans(new) * Wt, 0, _sum, keep_dims=True)   # u_τ, [1, BD]
            U = tl.where(ri == t, ut, U)
            aq = tl.reduce(Rr * U * qt, 1, _sum, keep_dims=True)     # q_τ · R[τ, i] ⊙ u_i, [C, 1]
            tl.store(aq_ptr + cbase + t * C + ri, aq)
            tl.store(w_ptr + cbase + t * C + ci, new * b)
            tl.store(u_ptr + (tk * G + i_g) * D + rc, ut, mask=mc & vt)
            tl.store(beta_ptr + tk * G + i_g + z11, b, mask=vt)
        Ut = Rr * U                                         # ũ_i = R[C-1, i] ⊙ u_i
        tl.store(ut_ptr + ((pid * NT + n) * C + ri) * D + rc, Ut, mask=mc)
        glast = tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True)   # [1, BD]
        clast = tl.reduce(tl.where(ri == C - 1, cc, 0.), 0, _sum, keep_dims=True)
        P = P * (tl.trans(glast) * glast) + tl.where((rr == rc) & mr, clast, 0.)
        P = P - tl.dot(tl.trans(Ut * bet), Ut, input_precision=PREC)
        P = 0.5 * (P + tl.trans(P))                         # bitwise symmetric
    tl.store(pT_ptr + pid * D * D + rr * D + rc, P, mask=mr & mc)


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_mean_fwd_kernel(q_ptr, k_ptr, v_ptr, a_ptr, beta_ptr, w_ptr, aq_ptr, ut_ptr, m0_ptr,
                          o_ptr, e_ptr, mT_ptr, T, NT, N0, N1,
                          H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                          MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NVG: tl.constexpr,
                          C: tl.constexpr, HAS_ALPHA: tl.constexpr, STORE_E: tl.constexpr,
                          PREC: tl.constexpr = "ieee"):
    i_bhg, i_g, i_bh, tok, cv, mv = _value_block(tl.program_id(0).to(tl.int64), T, H, G, MG, BV, NVG)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    S = tl.load(m0_ptr + i_bh * D * M + rr * M + cv, mask=mr & mv, other=0.).to(tl.float32)   # [BD, BV]
    for n in range(N0, N1):
        tr = n * C + ri
        vr = tr < T
        tki = tok + tr * H
        cb = (i_bhg * NT + n) * C * C
        # loads in the order of use (short live ranges: the tiles are C×D each)
        Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
        if HAS_ALPHA:
            At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
            gam = tl.associative_scan(At, 0, _mul)                       # γ_τ, [C, BD]
            # γ_C along the rows of the state block
            gl = tl.trans(tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True))   # [BD, 1]
            Kt = gam * Kt
        Vt = tl.load(v_ptr + tki * M + cv, mask=vr & mv, other=0.).to(tl.float32)
        Wm = tl.load(w_ptr + cb + ri * C + ci)
        bE = tl.dot(Wm, Vt - tl.dot(Kt, S, input_precision=PREC), input_precision=PREC)   # β ⊙ E
        Qt = tl.load(q_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
        if HAS_ALPHA:
            Qt = gam * Qt
        Aq = tl.load(aq_ptr + cb + ri * C + ci)
        o = tl.dot(Qt, S, input_precision=PREC) + tl.dot(Aq, bE, input_precision=PREC)
        tl.store(o_ptr + tki * M + cv, o.to(o_ptr.dtype.element_ty), mask=vr & mv)
        if STORE_E:
            bt = tl.load(beta_ptr + tki * G + i_g, mask=vr, other=1.)
            tl.store(e_ptr + tki * M + cv, bE / bt, mask=vr & mv)
        if HAS_ALPHA:
            S = gl * S
        Ut = tl.load(ut_ptr + ((i_bhg * NT + n) * C + ri) * D + rc, mask=mc, other=0.)
        S = S + tl.dot(tl.trans(Ut), bE, input_precision=PREC)
    tl.store(mT_ptr + i_bh * D * M + rr * M + cv, S, mask=mr & mv)


@triton.jit
def _ldl_row_t(Sy, dg, LiT, betr, t, ri, ci):
    """Row ``t`` of ``L⁻¹`` and ``β_t`` of ``Σ_y = L diag(1/β) Lᵀ`` from the rows ``< t`` (the
    innovations recursion ``r = L⁻¹_{<t} Σ_y[t, <t]``, ``d_t = Σ_y[t, t] − Σ_j β_j r_j²``,
    ``L⁻¹[t, ·] = e_t − Σ_j β_j r_j L⁻¹[j, ·]``), on the transposed factor
    ``LiT[i, j] = L⁻¹[j, i]`` with ``β`` as a row.

    ``Σ_y`` symmetric, ``dg`` its diagonal as a row.  Per row: column ``t`` of
    ``Σ_y`` (= row ``t``) and the new column of ``LiT`` are reductions along axis 1,
    ``d_t = Σ_y[t, t] − Σ_j β_j r_j²`` too; only ``r = L⁻¹ Σ_y[·, t]`` reduces
    along axis 0.  Triton lays a ``C×C`` tile out with whole rows inside a warp
    and the warps stacked along the rows, so axis-1 reductions are warp shuffles
    and only the axis-0 one goes through shared memory and a barrier.
    """
    sc = tl.reduce(tl.where(ci == t, Sy, 0.), 1, _sum, keep_dims=True)         # Σ_y[·, t], [C(i), 1]
    r = tl.reduce(LiT * sc, 0, _sum, keep_dims=True)                           # r_j, [1, C(j)]
    lam = r * betr
    stt = tl.reduce(tl.where(ci == t, dg, 0.), 1, _sum, keep_dims=True)        # [1, 1]
    d = stt - tl.reduce(r * lam, 1, _sum, keep_dims=True)
    new = tl.where(ri == t, 1., 0.) - tl.reduce(LiT * lam, 1, _sum, keep_dims=True)   # L⁻¹[t, ·] as a column
    return tl.where(ci == t, new, LiT), tl.where(ci == t, 1.0 / d, betr)


@triton.jit
def _mm_chunk_inputs(q_ptr, k_ptr, a_ptr, l2_ptr, r2_ptr, tok, n, T, ri, rc, mc, i_g,
                     H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                     C: tl.constexpr, HAS_ALPHA: tl.constexpr):
    """The per-token inputs of chunk ``n`` as ``[C, BD]`` / ``[C, 1]`` tiles (padding past ``T``)."""
    tr = n * C + ri
    vr = tr < T
    tki = tok + tr * H
    Kt = tl.load(k_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    Qt = tl.load(q_ptr + tki * D + rc, mask=vr & mc, other=0.).to(tl.float32)
    L2t = tl.load(l2_ptr + tki, mask=vr, other=0.).to(tl.float32)
    R2t = tl.load(r2_ptr + tki * G + i_g, mask=vr, other=1.).to(tl.float32)
    if HAS_ALPHA:
        At = tl.load(a_ptr + tki * D + rc, mask=vr & mc, other=1.).to(tl.float32)
    else:
        At = tl.full((C, BD), 1.0, tl.float32)
    return Kt, Qt, L2t, R2t, At


@triton.jit(do_not_specialize=["T", "NT", "N0", "N1"])
def chunk_cov_fwd_mm_kernel(q_ptr, k_ptr, a_ptr, l2_ptr, r2_ptr, p0_ptr,
                            u_ptr, beta_ptr, w_ptr, aq_ptr, ut_ptr, pT_ptr, T, NT, N0, N1, guard_ptr, bound,
                            H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                            C: tl.constexpr, HAS_ALPHA: tl.constexpr, PREC: tl.constexpr = "ieee",
                            STATE_LEFT: tl.constexpr = False, SELECT: tl.constexpr = 0,
                            ROWS: tl.constexpr = True):
    """The covariance pass with every ``C×D`` product hoisted out of the row loop.

    Decay ratios as quotients of cumulative decays *relative to the chunk*:
    ``R[τ, i] = γ_τ / γ_i``, so with ``Kγ = γ ⊙ K`` and
    ``Ω̃_i = ω_i / γ_i = P_0 (γ_i ⊙ k_i) + (c_i / γ_i) ⊙ k_i``

        ``Σ_y = tril(Kγ Ω̃ᵀ) + diag(r²)``,  ``Z = L⁻¹ Ω̃``,  ``u_τ = γ_τ ⊙ Z_τ``,
        ``Aq = tril((γ ⊙ Q) Zᵀ)``,  ``Ũ = γ_C ⊙ Z``,
        ``P_C = (γ_C γ_Cᵀ) ⊙ (P_0 − Zᵀ diag(β) Z) + diag(c_C)``

    (five matmuls a chunk); the only sequential work left is the ``C×C`` LDLᵀ
    row recursion (``L⁻¹`` and ``β``) on ``Σ_y``.  The quotient needs
    ``γ_τ ≠ 0`` and no over/underflow inside a chunk: the caller
    (:func:`.chunk._decays_safe`) checks the cumulative decays and otherwise
    runs :func:`chunk_cov_fwd_kernel` (products only), or launches both with
    ``SELECT`` so that the guard's result picks one on the device.  Same inputs
    and outputs as that kernel.

    ``STATE_LEFT``: form ``(γ⊙K) P_0`` as ``(P_0 (γ⊙K)ᵀ)ᵀ`` (``_by_state``; ``P_0`` is kept bitwise
    symmetric).  At ``D = 64``, ``C = 16``, 4 warps the direct product's fp32 operand layout makes ptxas
    spill 2.6 KB a thread; the transposed one compiles without spills (``benchmarks/kernel_resources.py``).

    ``ROWS=False`` is a timing ablation, never launched by the op (:func:`.chunk.pass_times` only): the row
    recursion is replaced by ``L⁻¹ = I``, ``β_τ = 1/(C Σ_y[τ, τ])`` (each downdate a single-token update
    scaled by ``1/C``, so ``P`` stays positive semi-definite and the products see ordinary numbers), so that
    the chain step's time without the recursion can be measured under the same load.  Its outputs are wrong.
    """
    if SELECT != 0:                                     # the choice on the device (module docstring)
        if (tl.load(guard_ptr) <= bound) != (SELECT == 1):     # NaN/inf compare False: unsafe
            return
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)
    rr, rc, mr, mc, ri, ci = _tiles(D, BD, C)
    eye_c = ri == ci
    low = ri > ci
    P = tl.load(p0_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    for n in range(N0, N1):
        tr = n * C + ri
        vr = tr < T
        tki = tok + tr * H
        Kt, Qt, L2t, R2t, At = _mm_chunk_inputs(q_ptr, k_ptr, a_ptr, l2_ptr, r2_ptr, tok, n, T, ri, rc,
                                                mc, i_g, H, G, D, BD, C, HAS_ALPHA)
        if HAS_ALPHA:
            gam, cc = tl.associative_scan((At, tl.where(mc, L2t, 0.)), 0, _decay_noise)
            Kg = gam * Kt
            Og = _by_state(Kg, P, PREC, STATE_LEFT) + (cc / gam) * Kt                  # Ω̃ (P symmetric)
        else:
            gam = At
            cc = tl.associative_scan(tl.where(mc, L2t, 0.), 0, _sum)
            Kg = Kt
            Og = _by_state(Kt, P, PREC, STATE_LEFT) + cc * Kt
        Sy = tl.dot(Kg, tl.trans(Og), input_precision=PREC)                               # [C(τ), C(i)]
        Sy = tl.where(eye_c, Sy + R2t, Sy)
        # LDLᵀ of Σ_y one row at a time (innovations recursion), C×C tiles only, on the
        # transposed factor so that one reduction per row crosses warps (see _ldl_row_t)
        Sy = tl.where(ri >= ci, Sy, tl.trans(Sy))                                          # symmetric
        dg = tl.reduce(tl.where(eye_c, Sy, 0.), 0, _sum, keep_dims=True)                  # Σ_y[t, t], [1, C]
        if ROWS:
            LiT = tl.full((C, C), 0., tl.float32)              # LiT[i, j] = L⁻¹[j, i]
            betr = tl.full((1, C), 0., tl.float32)             # β_j along the columns
            for t in range(C):
                LiT, betr = _ldl_row_t(Sy, dg, LiT, betr, t, ri, ci)
        else:                                                  # timing ablation (docstring): outputs wrong
            LiT = tl.where(eye_c, 1., 0.)
            betr = 1.0 / (C * dg)
        Li = tl.trans(LiT)
        bet = tl.trans(betr)
        Z = tl.dot(Li, Og, input_precision=PREC)                                          # [C, BD]
        Aq = tl.dot(gam * Qt, tl.trans(Z), input_precision=PREC)
        Aq = tl.where(low | eye_c, Aq, 0.)
        cb = (pid * NT + n) * C * C
        tl.store(aq_ptr + cb + ri * C + ci, Aq)
        tl.store(w_ptr + cb + ri * C + ci, bet * Li)
        tl.store(u_ptr + (tki * G + i_g) * D + rc, gam * Z, mask=vr & mc)
        tl.store(beta_ptr + tki * G + i_g, bet, mask=vr)
        glast = tl.reduce(tl.where(ri == C - 1, gam, 0.), 0, _sum, keep_dims=True)      # [1, BD]
        clast = tl.reduce(tl.where(ri == C - 1, cc, 0.), 0, _sum, keep_dims=True)
        tl.store(ut_ptr + ((pid * NT + n) * C + ri) * D + rc, glast * Z, mask=mc)
        P = P - tl.dot(tl.trans(Z * bet), Z, input_precision=PREC)
        P = P * (tl.trans(glast) * glast) + tl.where((rr == rc) & mr, clast, 0.)
        P = 0.5 * (P + tl.trans(P))                         # bitwise symmetric
    tl.store(pT_ptr + pid * D * D + rr * D + rc, P, mask=mr & mc)


@triton.jit
def _abs_log_decay_sum(a_ptr, out_ptr, T, NT, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                       C: tl.constexpr):
    """Guard of the quotient kernel: ``max`` over (dimension, chunk) of ``Σ_τ |log|α_τ||`` inside
    a chunk, atomically into ``out[0]`` (read on the host, or by the covariance kernels with
    ``SELECT``).  One program per (batch, chunk, head)."""
    pid = tl.program_id(0).to(tl.int64)
    i_h = pid % H
    i_n = (pid // H) % NT
    i_b = pid // (H * NT)
    ri = tl.arange(0, C)[:, None]
    rc = tl.arange(0, BD)[None, :]
    t = i_n * C + ri
    m = (t < T) & (rc < D)
    x = tl.load(a_ptr + ((i_b * T + t) * H + i_h) * D + rc, mask=m, other=1.0).to(tl.float32)
    la = tl.abs(tl.log(tl.maximum(tl.abs(x), 1e-30)))          # α = 0 counts |log 1e-30| ≈ 69 > the bound
    tl.atomic_max(out_ptr, tl.reduce(tl.reduce(la, 0, _sum), 0, _max))
