r"""Triton kernels of the token-by-token BL filter (forward and backward).

This module holds only ``@triton.jit`` functions.  :mod:`._dispatch` loads it
twice when needed: compiled (CUDA tensors) and through Triton's interpreter
(CPU tensors with ``TRITON_INTERPRET=1``), so the import order of ``triton``
does not matter.  Kernels must compile with triton 3.6 (the GPU machine) and
interpret with triton 3.9 (CPU); they use only long-standing ``tl`` calls.

Split design (why): the covariance recursion does not depend on the values, so
a *covariance pass* (one program per (batch, head, noise group), ``P`` in
registers) writes the per-token write direction ``u_t`` and precision
``β_t``, and a *mean pass* (one program per (batch, head, block of value
columns), ``Mᵀ`` block in registers) runs the generalised delta rule
``M_t = A_t M_{t-1} + β_t u_t e_tᵀ``.  Keeping ``P`` and ``M`` apart avoids
the register spills of one ``D×D + D×m`` program at ``D = 128`` (PERF.md), and
the mean pass parallelises over value columns.

Layout choices: ``P`` is held as ``[D, D]`` with the reduction of
``u = P̄ k`` along axis 1; the mean state is held transposed (``[BV, D]``), so
both of its per-token reductions (``(A M)ᵀ k`` and ``Mᵀ q``) run along ``D``.
Loads of the next token are issued before the current token's arithmetic
(register double buffering) so that global-memory latency overlaps the
sequential recursion.

Covariance update form: plain ``P = P̄ − β (u uᵀ)``, evaluated so that it stays
*bitwise* symmetric (``(a_i a_j) P_ij`` and ``(u_i u_j) β`` are symmetric in
``i, j`` because products of the same two floats commute); docs/gpu.md gives the
measured comparison with the symmetrised and Joseph forms.

Backward (reverse-time adjoints; see :mod:`.fused_recurrent` for the algebra):
only per-token *vectors* cross between passes (``u, β, e`` from the forward;
``de, dw, du, z`` in the backward); ``D×D`` and ``D×m`` states are recomputed
from the initial state (the checkpoint) in forward passes, never stored per token.
"""
import triton
import triton.language as tl

# Reductions call tl.reduce with the standard sum combiner instead of tl.sum:
# tl.sum is itself a @jit library function, built compiled or interpreted when
# triton is first imported, and a compiled one cannot run inside an
# interpreted kernel; the interpreter recognises _sum_combine and uses numpy.


# --------------------------------------------------------------------------
# forward: covariance pass
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def cov_fwd_kernel(k_ptr, a_ptr, l2_ptr, r2_ptr, p0_ptr, u_ptr, beta_ptr, pT_ptr, p0_scale, T,
                   H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                   HAS_ALPHA: tl.constexpr, HAS_P0: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g = pid % G
    i_bh = pid // G
    i_b = i_bh // H
    i_h = i_bh % H
    ri = tl.arange(0, BD)
    mi = ri < D
    diag = (ri[:, None] == ri[None, :]) & mi[:, None]
    m2 = mi[:, None] & mi[None, :]
    if HAS_P0:
        P = tl.load(p0_ptr + pid * D * D + ri[:, None] * D + ri[None, :], mask=m2, other=0.).to(tl.float32)
    else:
        P = tl.where(diag, p0_scale, 0.).to(tl.float32)
    tok = i_b * T * H + i_h          # token (b, 0, h) index; token t adds t*H
    k_nx = tl.load(k_ptr + tok * D + ri, mask=mi, other=0.).to(tl.float32)
    if HAS_ALPHA:
        a_nx = tl.load(a_ptr + tok * D + ri, mask=mi, other=0.).to(tl.float32)
    l2_nx = tl.load(l2_ptr + tok).to(tl.float32)
    r2_nx = tl.load(r2_ptr + tok * G + i_g).to(tl.float32)
    for t in range(T):
        kk = k_nx
        l2 = l2_nx
        r2 = r2_nx
        if HAS_ALPHA:
            aa = a_nx
        # prefetch token t+1 (clamped: the last prefetch re-reads token T-1)
        tn = tok + tl.minimum(t + 1, T - 1) * H
        k_nx = tl.load(k_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        if HAS_ALPHA:
            a_nx = tl.load(a_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        l2_nx = tl.load(l2_ptr + tn).to(tl.float32)
        r2_nx = tl.load(r2_ptr + tn * G + i_g).to(tl.float32)
        if HAS_ALPHA:
            P = P * (aa[:, None] * aa[None, :])
        P = P + tl.where(diag, l2, 0.)
        u = tl.reduce(P * kk[None, :], 1, tl.standard._sum_combine)                       # u = P̄ k
        uc = u[None, :]
        s = tl.reduce(uc * kk[None, :], 1, tl.standard._sum_combine)                      # kᵀu, shape [1]
        beta = 1.0 / (r2 + s)
        P = P - (u[:, None] * uc) * beta[:, None]
        cur = tok + t * H
        tl.store(u_ptr + (cur * G + i_g) * D + ri, u, mask=mi)
        tl.store(beta_ptr + cur * G + i_g + tl.arange(0, 1), beta)
    tl.store(pT_ptr + pid * D * D + ri[:, None] * D + ri[None, :], P, mask=m2)


# --------------------------------------------------------------------------
# forward: mean pass (generalised delta rule along u_t)
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def mean_fwd_kernel(q_ptr, k_ptr, v_ptr, a_ptr, u_ptr, beta_ptr, m0_ptr, o_ptr, e_ptr, mT_ptr, T,
                    H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                    MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr,
                    HAS_ALPHA: tl.constexpr, HAS_M0: tl.constexpr, STORE_E: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NV
    i_bh = pid // NV
    i_b = i_bh // H
    i_h = i_bh % H
    i_g = (i_v * BV) // MG
    ri = tl.arange(0, BD)                 # key dimension (axis 1 of the state block)
    mi = ri < D
    cv = i_v * BV + tl.arange(0, BV)      # value columns (axis 0)
    mv = cv < M
    m2 = mv[:, None] & mi[None, :]
    # state block held transposed: S[j, i] = M[i, c_j]
    if HAS_M0:
        S = tl.load(m0_ptr + i_bh * D * M + ri[None, :] * M + cv[:, None], mask=m2, other=0.).to(tl.float32)
    else:
        S = tl.full([BV, BD], 0., tl.float32)
    tok = i_b * T * H + i_h
    q_nx = tl.load(q_ptr + tok * D + ri, mask=mi, other=0.).to(tl.float32)
    k_nx = tl.load(k_ptr + tok * D + ri, mask=mi, other=0.).to(tl.float32)
    v_nx = tl.load(v_ptr + tok * M + cv, mask=mv, other=0.).to(tl.float32)
    u_nx = tl.load(u_ptr + (tok * G + i_g) * D + ri, mask=mi, other=0.)
    b_nx = tl.load(beta_ptr + tok * G + i_g)
    if HAS_ALPHA:
        a_nx = tl.load(a_ptr + tok * D + ri, mask=mi, other=0.).to(tl.float32)
    for t in range(T):
        qq = q_nx
        kk = k_nx
        vv = v_nx
        uu = u_nx
        bb = b_nx
        if HAS_ALPHA:
            aa = a_nx
        tn = tok + tl.minimum(t + 1, T - 1) * H
        q_nx = tl.load(q_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        k_nx = tl.load(k_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        v_nx = tl.load(v_ptr + tn * M + cv, mask=mv, other=0.).to(tl.float32)
        u_nx = tl.load(u_ptr + (tn * G + i_g) * D + ri, mask=mi, other=0.)
        b_nx = tl.load(beta_ptr + tn * G + i_g)
        if HAS_ALPHA:
            a_nx = tl.load(a_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
            S = S * aa[None, :]
        pred = tl.reduce(S * kk[None, :], 1, tl.standard._sum_combine)                    # (A M)ᵀ k
        e = vv - pred                                             # innovation
        S = S + e[:, None] * (bb * uu)[None, :]
        o = tl.reduce(S * qq[None, :], 1, tl.standard._sum_combine)                       # Mᵀ q
        cur = tok + t * H
        tl.store(o_ptr + cur * M + cv, o.to(o_ptr.dtype.element_ty), mask=mv)
        if STORE_E:
            tl.store(e_ptr + cur * M + cv, e, mask=mv)
    tl.store(mT_ptr + i_bh * D * M + ri[None, :] * M + cv[:, None], S, mask=m2)


# --------------------------------------------------------------------------
# backward 1: mean adjoint in reverse time
#   G_t = q_t do_tᵀ + A_{t+1}(I − k_{t+1} w_{t+1}ᵀ) G_{t+1},  w = β u
#   de_t = G_tᵀ w_t (= dv_t),  dw_t = G_t e_t
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def mean_bwd_rev_kernel(q_ptr, k_ptr, a_ptr, u_ptr, beta_ptr, e_ptr, do_ptr, dmT_ptr,
                        de_ptr, dw_ptr, dm0_ptr, T, NTOK,
                        H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                        MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr,
                        HAS_ALPHA: tl.constexpr, HAS_DMT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NV
    i_bh = pid // NV
    i_b = i_bh // H
    i_h = i_bh % H
    i_g = (i_v * BV) // MG
    ri = tl.arange(0, BD)
    mi = ri < D
    cv = i_v * BV + tl.arange(0, BV)
    mv = cv < M
    m2 = mv[:, None] & mi[None, :]
    if HAS_DMT:
        S = tl.load(dmT_ptr + i_bh * D * M + ri[None, :] * M + cv[:, None], mask=m2, other=0.).to(tl.float32)
    else:
        S = tl.full([BV, BD], 0., tl.float32)
    tok = i_b * T * H + i_h
    tlast = tok + (T - 1) * H
    q_nx = tl.load(q_ptr + tlast * D + ri, mask=mi, other=0.).to(tl.float32)
    k_nx = tl.load(k_ptr + tlast * D + ri, mask=mi, other=0.).to(tl.float32)
    u_nx = tl.load(u_ptr + (tlast * G + i_g) * D + ri, mask=mi, other=0.)
    b_nx = tl.load(beta_ptr + tlast * G + i_g)
    e_nx = tl.load(e_ptr + tlast * M + cv, mask=mv, other=0.)
    do_nx = tl.load(do_ptr + tlast * M + cv, mask=mv, other=0.).to(tl.float32)
    if HAS_ALPHA:
        a_nx = tl.load(a_ptr + tlast * D + ri, mask=mi, other=0.).to(tl.float32)
    for j in range(T):
        t = T - 1 - j
        qq = q_nx
        kk = k_nx
        uu = u_nx
        bb = b_nx
        ee = e_nx
        dd = do_nx
        if HAS_ALPHA:
            aa = a_nx
        tn = tok + tl.maximum(t - 1, 0) * H
        q_nx = tl.load(q_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        k_nx = tl.load(k_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        u_nx = tl.load(u_ptr + (tn * G + i_g) * D + ri, mask=mi, other=0.)
        b_nx = tl.load(beta_ptr + tn * G + i_g)
        e_nx = tl.load(e_ptr + tn * M + cv, mask=mv, other=0.)
        do_nx = tl.load(do_ptr + tn * M + cv, mask=mv, other=0.).to(tl.float32)
        if HAS_ALPHA:
            a_nx = tl.load(a_ptr + tn * D + ri, mask=mi, other=0.).to(tl.float32)
        S = S + dd[:, None] * qq[None, :]                          # G_t
        w = bb * uu
        de = tl.reduce(S * w[None, :], 1, tl.standard._sum_combine)                        # G_tᵀ w_t
        dw = tl.reduce(S * ee[:, None], 0, tl.standard._sum_combine)                       # G_t e_t (this block's columns)
        cur = tok + t * H
        tl.store(de_ptr + cur * M + cv, de, mask=mv)
        tl.store(dw_ptr + (i_v * NTOK + cur) * D + ri, dw, mask=mi)
        S = S - de[:, None] * kk[None, :]                          # dM̄_t = (I − k wᵀ) G_t
        if HAS_ALPHA:
            S = S * aa[None, :]                                    # A_t dM̄_t
    tl.store(dm0_ptr + i_bh * D * M + ri[None, :] * M + cv[:, None], S, mask=m2)


# --------------------------------------------------------------------------
# backward 2: covariance adjoint in reverse time (symmetric part H of dL/dP)
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def cov_bwd_rev_kernel(k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, dw_ptr, dpT_ptr,
                       du_ptr, z_ptr, sc_ptr, dp0_ptr, T,
                       H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                       HAS_ALPHA: tl.constexpr, HAS_DPT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g = pid % G
    i_bh = pid // G
    i_b = i_bh // H
    i_h = i_bh % H
    ri = tl.arange(0, BD)
    mi = ri < D
    diag = (ri[:, None] == ri[None, :]) & mi[:, None]
    m2 = mi[:, None] & mi[None, :]
    if HAS_DPT:
        Hs = tl.load(dpT_ptr + pid * D * D + ri[:, None] * D + ri[None, :], mask=m2, other=0.).to(tl.float32)
    else:
        Hs = tl.full([BD, BD], 0., tl.float32)
    tok = i_b * T * H + i_h
    for j in range(T):
        t = T - 1 - j
        cur = tok + t * H
        kk = tl.load(k_ptr + cur * D + ri, mask=mi, other=0.).to(tl.float32)
        uu = tl.load(u_ptr + (cur * G + i_g) * D + ri, mask=mi, other=0.)
        dw = tl.load(dw_ptr + (cur * G + i_g) * D + ri, mask=mi, other=0.)
        bb = tl.load(beta_ptr + cur * G + i_g)
        l2 = tl.load(l2_ptr + cur).to(tl.float32)
        c = tl.reduce(Hs * uu[None, :], 1, tl.standard._sum_combine)                       # H u
        cc = c[None, :]
        uHu = tl.reduce(cc * uu[None, :], 1, tl.standard._sum_combine)                     # uᵀ H u, shape [1]
        udw = tl.reduce(uu[None, :] * dw[None, :], 1, tl.standard._sum_combine)
        dbeta = udw - uHu
        ds = -(bb * bb) * dbeta                                    # = d r² as well
        du = -2.0 * bb * c + ds * kk + bb * dw                     # total adjoint of u_t
        dH = tl.reduce(tl.where(diag, Hs, 0.), 1, tl.standard._sum_combine)                # diag(H)
        trH = tl.reduce(dH[None, :], 1, tl.standard._sum_combine)
        duk = tl.reduce(du[None, :] * kk[None, :], 1, tl.standard._sum_combine)
        dl2 = trH + duk                                            # tr(dP̄)
        z = 2.0 * bb * uu * c + du * uu - 2.0 * l2 * (dH + du * kk)
        tl.store(du_ptr + (cur * G + i_g) * D + ri, du, mask=mi)
        tl.store(z_ptr + (cur * G + i_g) * D + ri, z, mask=mi)
        so = (cur * G + i_g) * 2 + tl.arange(0, 1)
        tl.store(sc_ptr + so, ds)
        tl.store(sc_ptr + so + 1, dl2)
        Hs = Hs + 0.5 * (du[:, None] * kk[None, :] + kk[:, None] * du[None, :])   # sym(dP̄)
        if HAS_ALPHA:
            aa = tl.load(a_ptr + cur * D + ri, mask=mi, other=0.).to(tl.float32)
            Hs = Hs * (aa[:, None] * aa[None, :])                  # A dP̄ A
    tl.store(dp0_ptr + pid * D * D + ri[:, None] * D + ri[None, :], Hs, mask=m2)


# --------------------------------------------------------------------------
# backward 3: covariance recomputed forward, x_t = P̄_t du_t
# (u_t, β_t are re-read in both layouts, so this pass needs no layout shuffle)
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def cov_bwd_fwd_kernel(a_ptr, l2_ptr, p0_ptr, u_ptr, beta_ptr, du_ptr, x_ptr, p0_scale, T,
                       H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                       HAS_ALPHA: tl.constexpr, HAS_P0: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g = pid % G
    i_bh = pid // G
    i_b = i_bh // H
    i_h = i_bh % H
    ri = tl.arange(0, BD)
    mi = ri < D
    diag = (ri[:, None] == ri[None, :]) & mi[:, None]
    m2 = mi[:, None] & mi[None, :]
    if HAS_P0:
        P = tl.load(p0_ptr + pid * D * D + ri[:, None] * D + ri[None, :], mask=m2, other=0.).to(tl.float32)
    else:
        P = tl.where(diag, p0_scale, 0.).to(tl.float32)
    tok = i_b * T * H + i_h
    for t in range(T):
        cur = tok + t * H
        uu = tl.load(u_ptr + (cur * G + i_g) * D + ri, mask=mi, other=0.)
        du = tl.load(du_ptr + (cur * G + i_g) * D + ri, mask=mi, other=0.)
        bb = tl.load(beta_ptr + cur * G + i_g)
        l2 = tl.load(l2_ptr + cur).to(tl.float32)
        if HAS_ALPHA:
            aa = tl.load(a_ptr + cur * D + ri, mask=mi, other=0.).to(tl.float32)
            P = P * (aa[:, None] * aa[None, :])
        P = P + tl.where(diag, l2, 0.)
        x = tl.reduce(P * du[None, :], 1, tl.standard._sum_combine)                        # P̄ du
        tl.store(x_ptr + (cur * G + i_g) * D + ri, x, mask=mi)
        P = P - (uu[:, None] * uu[None, :]) * bb


# --------------------------------------------------------------------------
# backward 4: mean recomputed forward: dq_t = M_t do_t, dk_t ⊃ −(A M_{t-1}) de_t
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def mean_bwd_fwd_kernel(a_ptr, u_ptr, beta_ptr, e_ptr, de_ptr, do_ptr, m0_ptr, dq_ptr, dk_ptr,
                        T, NTOK,
                        H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                        MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr,
                        HAS_ALPHA: tl.constexpr, HAS_M0: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NV
    i_bh = pid // NV
    i_b = i_bh // H
    i_h = i_bh % H
    i_g = (i_v * BV) // MG
    ri = tl.arange(0, BD)
    mi = ri < D
    cv = i_v * BV + tl.arange(0, BV)
    mv = cv < M
    m2 = mv[:, None] & mi[None, :]
    if HAS_M0:
        S = tl.load(m0_ptr + i_bh * D * M + ri[None, :] * M + cv[:, None], mask=m2, other=0.).to(tl.float32)
    else:
        S = tl.full([BV, BD], 0., tl.float32)
    tok = i_b * T * H + i_h
    for t in range(T):
        cur = tok + t * H
        uu = tl.load(u_ptr + (cur * G + i_g) * D + ri, mask=mi, other=0.)
        bb = tl.load(beta_ptr + cur * G + i_g)
        ee = tl.load(e_ptr + cur * M + cv, mask=mv, other=0.)
        de = tl.load(de_ptr + cur * M + cv, mask=mv, other=0.)
        dd = tl.load(do_ptr + cur * M + cv, mask=mv, other=0.).to(tl.float32)
        if HAS_ALPHA:
            aa = tl.load(a_ptr + cur * D + ri, mask=mi, other=0.).to(tl.float32)
            S = S * aa[None, :]
        dk = -tl.reduce(S * de[:, None], 0, tl.standard._sum_combine)
        S = S + ee[:, None] * (bb * uu)[None, :]
        dq = tl.reduce(S * dd[:, None], 0, tl.standard._sum_combine)
        tl.store(dk_ptr + (i_v * NTOK + cur) * D + ri, dk, mask=mi)
        tl.store(dq_ptr + (i_v * NTOK + cur) * D + ri, dq, mask=mi)
