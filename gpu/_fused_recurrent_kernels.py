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
the register spills of one ``D×D + D×m`` program at ``D = 128``, and
the mean pass parallelises over value columns.

Layout choices (they decide the per-token latency, which is what a sequential
kernel is bound by): states are loaded from memory at the start (the coalesced
2-D load fixes the register layout: rows over warps, 4 contiguous columns per
thread, 32 lanes along the columns); ``P`` is ``[D, D]`` with ``u = P̄ k``
reduced along the columns, the mean state is held transposed (``[BV, D]``) so
that ``(A M)ᵀ k`` and ``Mᵀ q`` reduce along ``D``: all of these stay inside a
warp.  Per-token vectors are loaded directly as ``[1, D]`` rows or ``[D, 1]``
columns of that layout (loading twice is cheaper than a shared-memory layout
conversion); the only conversion left on a critical path is ``u`` (row to
column) in the covariance passes.  The next token's loads are issued before the
current token's arithmetic (register double buffering), so global-memory
latency overlaps the recursion.

Covariance update form: plain ``P = P̄ − β (u uᵀ)``, evaluated so that it stays
*bitwise* symmetric (``(a_i a_j) P_ij`` and ``(u_i u_j) β`` are symmetric in
``i, j`` because products of the same two floats commute).  A symmetrised and a
Joseph form cost a transpose or two ``D×D`` products per token and are no more
accurate in fp32 with the exact gain.

Backward (reverse-time adjoints; see :mod:`.fused_recurrent` for the algebra):
only per-token *vectors* cross between passes (``u, β, e`` from the forward;
``de, dw, du, z`` in the backward); ``D×D`` and ``D×m`` states are recomputed
from the initial state (the checkpoint) in forward passes, never stored per token.
"""
import os

import triton
import triton.language as tl

# shared helpers, loaded in this file's mode (see _kernel_common.py).  Reductions use its ``_sum``
# with tl.reduce, not tl.sum: tl.sum is a @jit library function built in whatever mode triton was
# first imported in, and a compiled function cannot run inside an interpreted kernel
from ._dispatch import kernels as _load_kernels

_common = _load_kernels(os.environ.get("TRITON_INTERPRET", "0") == "1", "_kernel_common.py")
_sum, _head_group, _value_block_t, _dims = _common._sum, _common._head_group, _common._value_block_t, _common._dims


# --------------------------------------------------------------------------
# forward: covariance pass
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def cov_fwd_kernel(k_ptr, a_ptr, l2_ptr, r2_ptr, p0_ptr, u_ptr, beta_ptr, pT_ptr, T,
                   H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                   HAS_ALPHA: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)          # token t of (b, h) is tok + t*H
    rr, rc, mr, mc = _dims(D, BD)
    diag = (rr == rc) & mr
    z11 = tl.arange(0, 1)[None, :]
    P = tl.load(p0_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    k_nx = tl.load(k_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    if HAS_ALPHA:
        ar_nx = tl.load(a_ptr + tok * D + rr, mask=mr, other=0.).to(tl.float32)
        ac_nx = tl.load(a_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    l2_nx = tl.load(l2_ptr + tok).to(tl.float32)
    r2_nx = tl.load(r2_ptr + tok * G + i_g).to(tl.float32)
    for t in range(T):
        kc = k_nx
        l2 = l2_nx
        r2 = r2_nx
        if HAS_ALPHA:
            ar = ar_nx
            ac = ac_nx
        # prefetch token t+1 (clamped: the last prefetch re-reads token T-1)
        tn = tok + tl.minimum(t + 1, T - 1) * H
        k_nx = tl.load(k_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        if HAS_ALPHA:
            ar_nx = tl.load(a_ptr + tn * D + rr, mask=mr, other=0.).to(tl.float32)
            ac_nx = tl.load(a_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        l2_nx = tl.load(l2_ptr + tn).to(tl.float32)
        r2_nx = tl.load(r2_ptr + tn * G + i_g).to(tl.float32)
        if HAS_ALPHA:
            P = P * (ar * ac)
        P = P + tl.where(diag, l2, 0.)
        u1 = tl.reduce(P * kc, 1, _sum)         # u = P̄ k
        ur = u1[:, None]
        uc = u1[None, :]                                             # the one layout shuffle
        s = tl.reduce(uc * kc, 1, _sum, keep_dims=True)   # kᵀu, [1, 1]
        beta = 1.0 / (r2 + s)
        P = P - (ur * uc) * beta
        cur = tok + t * H
        tl.store(u_ptr + (cur * G + i_g) * D + rc, uc, mask=mc)
        tl.store(beta_ptr + cur * G + i_g + z11, beta)
    tl.store(pT_ptr + pid * D * D + rr * D + rc, P, mask=mr & mc)


# --------------------------------------------------------------------------
# forward: mean pass (generalised delta rule along u_t)
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def mean_fwd_kernel(q_ptr, k_ptr, v_ptr, a_ptr, u_ptr, beta_ptr, m0_ptr, o_ptr, e_ptr, mT_ptr, T,
                    H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                    MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr,
                    HAS_ALPHA: tl.constexpr, STORE_E: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok, cv, mv = _value_block_t(pid, T, H, G, MG, BV, NV // G)   # columns along axis 0
    rr, rc, mr, mc = _dims(D, BD)
    # the state block is held transposed, S[j, i] = M[i, c_j], and stored so in
    # memory ([B, H, m, D]): the coalesced load puts D along the lanes
    S = tl.load(m0_ptr + i_bh * D * M + cv * D + rc, mask=mv & mc, other=0.).to(tl.float32)
    q_nx = tl.load(q_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    k_nx = tl.load(k_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    v_nx = tl.load(v_ptr + tok * M + cv, mask=mv, other=0.).to(tl.float32)
    u_nx = tl.load(u_ptr + (tok * G + i_g) * D + rc, mask=mc, other=0.)
    b_nx = tl.load(beta_ptr + tok * G + i_g)
    if HAS_ALPHA:
        a_nx = tl.load(a_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    for t in range(T):
        qq = q_nx
        kk = k_nx
        vv = v_nx
        uu = u_nx
        bb = b_nx
        if HAS_ALPHA:
            aa = a_nx
        tn = tok + tl.minimum(t + 1, T - 1) * H
        q_nx = tl.load(q_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        k_nx = tl.load(k_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        v_nx = tl.load(v_ptr + tn * M + cv, mask=mv, other=0.).to(tl.float32)
        u_nx = tl.load(u_ptr + (tn * G + i_g) * D + rc, mask=mc, other=0.)
        b_nx = tl.load(beta_ptr + tn * G + i_g)
        if HAS_ALPHA:
            a_nx = tl.load(a_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
            S = S * aa
        pred = tl.reduce(S * kk, 1, _sum, keep_dims=True)   # (A M)ᵀ k, [BV, 1]
        e = vv - pred                                                           # innovation
        S = S + e * (bb * uu)
        o = tl.reduce(S * qq, 1, _sum, keep_dims=True)      # Mᵀ q
        cur = tok + t * H
        tl.store(o_ptr + cur * M + cv, o.to(o_ptr.dtype.element_ty), mask=mv)
        if STORE_E:
            tl.store(e_ptr + cur * M + cv, e, mask=mv)
    tl.store(mT_ptr + i_bh * D * M + cv * D + rc, S, mask=mv & mc)


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
                        HAS_ALPHA: tl.constexpr, ATOMIC: tl.constexpr = False):
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NV                                       # the value block, of NV (NV/G per group)
    i_g, i_bh, tok, cv, mv = _value_block_t(pid, T, H, G, MG, BV, NV // G)   # columns along axis 0
    rr, rc, mr, mc = _dims(D, BD)
    S = tl.load(dmT_ptr + i_bh * D * M + cv * D + rc, mask=mv & mc, other=0.).to(tl.float32)
    tlast = tok + (T - 1) * H
    q_nx = tl.load(q_ptr + tlast * D + rc, mask=mc, other=0.).to(tl.float32)
    k_nx = tl.load(k_ptr + tlast * D + rc, mask=mc, other=0.).to(tl.float32)
    u_nx = tl.load(u_ptr + (tlast * G + i_g) * D + rc, mask=mc, other=0.)
    b_nx = tl.load(beta_ptr + tlast * G + i_g)
    e_nx = tl.load(e_ptr + tlast * M + cv, mask=mv, other=0.)
    do_nx = tl.load(do_ptr + tlast * M + cv, mask=mv, other=0.).to(tl.float32)
    if HAS_ALPHA:
        a_nx = tl.load(a_ptr + tlast * D + rc, mask=mc, other=0.).to(tl.float32)
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
        q_nx = tl.load(q_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        k_nx = tl.load(k_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        u_nx = tl.load(u_ptr + (tn * G + i_g) * D + rc, mask=mc, other=0.)
        b_nx = tl.load(beta_ptr + tn * G + i_g)
        e_nx = tl.load(e_ptr + tn * M + cv, mask=mv, other=0.)
        do_nx = tl.load(do_ptr + tn * M + cv, mask=mv, other=0.).to(tl.float32)
        if HAS_ALPHA:
            a_nx = tl.load(a_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        S = S + dd * qq                                                     # G_t
        de = tl.reduce(S * (bb * uu), 1, _sum, keep_dims=True)   # G_tᵀ w_t
        dw = tl.reduce(S * ee, 0, _sum, keep_dims=True)   # G_t e_t (block part)
        cur = tok + t * H
        tl.store(de_ptr + cur * M + cv, de, mask=mv)
        if ATOMIC:      # one [B, T, H, G, D] buffer, the value blocks of a group add into it
            tl.atomic_add(dw_ptr + (cur * G + i_g) * D + rc, dw, mask=mc)
        else:           # per-block partials [NV, B, T, H, D], summed by the caller
            tl.store(dw_ptr + (i_v * NTOK + cur) * D + rc, dw, mask=mc)
        S = S - de * kk                                                     # dM̄_t = (I − k wᵀ) G_t
        if HAS_ALPHA:
            S = S * aa                                                      # A_t dM̄_t
    tl.store(dm0_ptr + i_bh * D * M + cv * D + rc, S, mask=mv & mc)


# --------------------------------------------------------------------------
# backward 2: covariance adjoint in reverse time (symmetric part H of dL/dP)
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def cov_bwd_rev_kernel(k_ptr, a_ptr, l2_ptr, u_ptr, beta_ptr, dw_ptr, dpT_ptr,
                       du_ptr, z_ptr, dd_ptr, ds_ptr, dp0_ptr, T,
                       H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                       HAS_ALPHA: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)          # token t of (b, h) is tok + t*H
    rr, rc, mr, mc = _dims(D, BD)
    diag = (rr == rc) & mr
    z11 = tl.arange(0, 1)[None, :]
    Hs = tl.load(dpT_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    tlast = (tok + (T - 1) * H) * G + i_g
    kr_nx = tl.load(k_ptr + (tok + (T - 1) * H) * D + rr, mask=mr, other=0.).to(tl.float32)
    kc_nx = tl.load(k_ptr + (tok + (T - 1) * H) * D + rc, mask=mc, other=0.).to(tl.float32)
    ur_nx = tl.load(u_ptr + tlast * D + rr, mask=mr, other=0.)
    uc_nx = tl.load(u_ptr + tlast * D + rc, mask=mc, other=0.)
    wr_nx = tl.load(dw_ptr + tlast * D + rr, mask=mr, other=0.)
    wc_nx = tl.load(dw_ptr + tlast * D + rc, mask=mc, other=0.)
    b_nx = tl.load(beta_ptr + tlast)
    l2_nx = tl.load(l2_ptr + tok + (T - 1) * H).to(tl.float32)
    if HAS_ALPHA:
        ar_nx = tl.load(a_ptr + (tok + (T - 1) * H) * D + rr, mask=mr, other=0.).to(tl.float32)
        ac_nx = tl.load(a_ptr + (tok + (T - 1) * H) * D + rc, mask=mc, other=0.).to(tl.float32)
    for j in range(T):
        t = T - 1 - j
        kr = kr_nx
        kc = kc_nx
        ur = ur_nx
        uc = uc_nx
        dwr = wr_nx
        dwc = wc_nx
        bb = b_nx
        l2 = l2_nx
        if HAS_ALPHA:
            ar = ar_nx
            ac = ac_nx
        tn = tok + tl.maximum(t - 1, 0) * H
        gn = tn * G + i_g
        kr_nx = tl.load(k_ptr + tn * D + rr, mask=mr, other=0.).to(tl.float32)
        kc_nx = tl.load(k_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        ur_nx = tl.load(u_ptr + gn * D + rr, mask=mr, other=0.)
        uc_nx = tl.load(u_ptr + gn * D + rc, mask=mc, other=0.)
        wr_nx = tl.load(dw_ptr + gn * D + rr, mask=mr, other=0.)
        wc_nx = tl.load(dw_ptr + gn * D + rc, mask=mc, other=0.)
        b_nx = tl.load(beta_ptr + gn)
        l2_nx = tl.load(l2_ptr + tn).to(tl.float32)
        if HAS_ALPHA:
            ar_nx = tl.load(a_ptr + tn * D + rr, mask=mr, other=0.).to(tl.float32)
            ac_nx = tl.load(a_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
        c1 = tl.reduce(Hs * uc, 1, _sum)                # H u
        cr = c1[:, None]
        cc = c1[None, :]                                                     # the one layout shuffle
        uHu = tl.reduce(cc * uc, 1, _sum, keep_dims=True)
        udw = tl.reduce(uc * dwc, 1, _sum, keep_dims=True)
        ds = -(bb * bb) * (udw - uHu)                                        # dβ → ds (= dr²)
        dur = -2.0 * bb * cr + ds * kr + bb * dwr                            # total adjoint of u_t
        duc = -2.0 * bb * cc + ds * kc + bb * dwc
        dPd = tl.reduce(tl.where(diag, Hs, 0.), 1, _sum, keep_dims=True) + dur * kr
        z = 2.0 * bb * ur * cr + dur * ur - 2.0 * l2 * dPd                   # (see fused_recurrent)
        cur = (tok + t * H) * G + i_g
        tl.store(du_ptr + cur * D + rc, duc, mask=mc)
        tl.store(z_ptr + cur * D + rr, z, mask=mr)
        tl.store(dd_ptr + cur * D + rr, dPd, mask=mr)                        # diag(dP̄_t)
        tl.store(ds_ptr + cur + z11, ds)
        Hs = Hs + 0.5 * (dur * kc + kr * duc)                                # sym(dP̄_t)
        if HAS_ALPHA:
            Hs = Hs * (ar * ac)                                              # A dP̄ A
    tl.store(dp0_ptr + pid * D * D + rr * D + rc, Hs, mask=mr & mc)


# --------------------------------------------------------------------------
# backward 3: covariance recomputed forward, x_t = P̄_t du_t
# (u_t, β_t are re-read in both layouts, so this pass needs no layout shuffle)
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def cov_bwd_fwd_kernel(a_ptr, l2_ptr, p0_ptr, u_ptr, beta_ptr, du_ptr, x_ptr, T,
                       H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                       HAS_ALPHA: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    i_g, i_bh, tok = _head_group(pid, T, H, G)          # token t of (b, h) is tok + t*H
    rr, rc, mr, mc = _dims(D, BD)
    diag = (rr == rc) & mr
    P = tl.load(p0_ptr + pid * D * D + rr * D + rc, mask=mr & mc, other=0.).to(tl.float32)
    g0 = tok * G + i_g
    ur_nx = tl.load(u_ptr + g0 * D + rr, mask=mr, other=0.)
    uc_nx = tl.load(u_ptr + g0 * D + rc, mask=mc, other=0.)
    du_nx = tl.load(du_ptr + g0 * D + rc, mask=mc, other=0.)
    b_nx = tl.load(beta_ptr + g0)
    l2_nx = tl.load(l2_ptr + tok).to(tl.float32)
    if HAS_ALPHA:
        ar_nx = tl.load(a_ptr + tok * D + rr, mask=mr, other=0.).to(tl.float32)
        ac_nx = tl.load(a_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    for t in range(T):
        ur = ur_nx
        uc = uc_nx
        du = du_nx
        bb = b_nx
        l2 = l2_nx
        if HAS_ALPHA:
            ar = ar_nx
            ac = ac_nx
        tn = tok + tl.minimum(t + 1, T - 1) * H
        gn = tn * G + i_g
        ur_nx = tl.load(u_ptr + gn * D + rr, mask=mr, other=0.)
        uc_nx = tl.load(u_ptr + gn * D + rc, mask=mc, other=0.)
        du_nx = tl.load(du_ptr + gn * D + rc, mask=mc, other=0.)
        b_nx = tl.load(beta_ptr + gn)
        l2_nx = tl.load(l2_ptr + tn).to(tl.float32)
        if HAS_ALPHA:
            ar_nx = tl.load(a_ptr + tn * D + rr, mask=mr, other=0.).to(tl.float32)
            ac_nx = tl.load(a_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
            P = P * (ar * ac)
        P = P + tl.where(diag, l2, 0.)
        x = tl.reduce(P * du, 1, _sum, keep_dims=True)    # P̄ du, [D, 1]
        cur = (tok + t * H) * G + i_g
        tl.store(x_ptr + cur * D + rr, x, mask=mr)
        P = P - (ur * uc) * bb


# --------------------------------------------------------------------------
# backward 4: mean recomputed forward: dq_t = M_t do_t, dk_t ⊃ −(A M_{t-1}) de_t
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["T"])
def mean_bwd_fwd_kernel(a_ptr, u_ptr, beta_ptr, e_ptr, de_ptr, do_ptr, m0_ptr, dq_ptr, dk_ptr,
                        T, NTOK,
                        H: tl.constexpr, G: tl.constexpr, D: tl.constexpr, M: tl.constexpr,
                        MG: tl.constexpr, BD: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr,
                        HAS_ALPHA: tl.constexpr, ATOMIC: tl.constexpr = False):
    pid = tl.program_id(0).to(tl.int64)
    i_v = pid % NV                                       # the value block, of NV (NV/G per group)
    i_g, i_bh, tok, cv, mv = _value_block_t(pid, T, H, G, MG, BV, NV // G)   # columns along axis 0
    rr, rc, mr, mc = _dims(D, BD)
    S = tl.load(m0_ptr + i_bh * D * M + cv * D + rc, mask=mv & mc, other=0.).to(tl.float32)
    u_nx = tl.load(u_ptr + (tok * G + i_g) * D + rc, mask=mc, other=0.)
    b_nx = tl.load(beta_ptr + tok * G + i_g)
    e_nx = tl.load(e_ptr + tok * M + cv, mask=mv, other=0.)
    de_nx = tl.load(de_ptr + tok * M + cv, mask=mv, other=0.)
    do_nx = tl.load(do_ptr + tok * M + cv, mask=mv, other=0.).to(tl.float32)
    if HAS_ALPHA:
        a_nx = tl.load(a_ptr + tok * D + rc, mask=mc, other=0.).to(tl.float32)
    for t in range(T):
        uu = u_nx
        bb = b_nx
        ee = e_nx
        de = de_nx
        dd = do_nx
        if HAS_ALPHA:
            aa = a_nx
        tn = tok + tl.minimum(t + 1, T - 1) * H
        u_nx = tl.load(u_ptr + (tn * G + i_g) * D + rc, mask=mc, other=0.)
        b_nx = tl.load(beta_ptr + tn * G + i_g)
        e_nx = tl.load(e_ptr + tn * M + cv, mask=mv, other=0.)
        de_nx = tl.load(de_ptr + tn * M + cv, mask=mv, other=0.)
        do_nx = tl.load(do_ptr + tn * M + cv, mask=mv, other=0.).to(tl.float32)
        if HAS_ALPHA:
            a_nx = tl.load(a_ptr + tn * D + rc, mask=mc, other=0.).to(tl.float32)
            S = S * aa
        dk = -tl.reduce(S * de, 0, _sum, keep_dims=True)
        S = S + ee * (bb * uu)
        dq = tl.reduce(S * dd, 0, _sum, keep_dims=True)
        cur = tok + t * H
        if ATOMIC:      # one [B, T, H, D] buffer each
            tl.atomic_add(dk_ptr + cur * D + rc, dk, mask=mc)
            tl.atomic_add(dq_ptr + cur * D + rc, dq, mask=mc)
        else:
            tl.store(dk_ptr + (i_v * NTOK + cur) * D + rc, dk, mask=mc)
            tl.store(dq_ptr + (i_v * NTOK + cur) * D + rc, dq, mask=mc)
