"""Boundary checks shared by :func:`naive_bl`, :func:`fused_recurrent_bl` and :func:`chunk_bl`.

The write mask
--------------
Every op takes ``write_mask`` (bool ``[B, T, H]``, True = the token writes).
A token with ``False`` is a *missing observation* of the Kalman filter: the
prediction step runs (``P̄_t = A_t P A_t + ℓ_t² I``, ``M̄_t = A_t M``), the
update does not, and the read-out ``o_t = M_tᵀ q_t`` still happens.  Here it
is applied by zeroing that token's *write* key: with ``k_t = 0`` the gated
update has ``u_t = P̄_t k_t = 0``, so ``M_t = M̄_t`` and ``P_t = P̄_t`` exactly,
in every kernel, forward and backward (the masked keys get zero gradient);
the query ``q_t`` is untouched.  The numpy filter implements the same rule
independently (it skips the update), and the tests compare the two.

Shapes follow flash-linear-attention: tokens ``[B, T, H, D]``, per-token
scalars ``[B, T, H]``, states ``[B, H, D, m]``.  Every failure is a
``ValueError`` naming the argument (the CLI turns it into one line, exit 2).
"""
from __future__ import annotations

from numbers import Real
from typing import NamedTuple, Optional

import torch

from assocmem import validate as V


class Inputs(NamedTuple):
    """Validated, shape-normalised inputs (tensors keep their dtype/device)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    l2: torch.Tensor          # [B, T, H]
    r2: torch.Tensor          # [B, T, H, G] (a trailing G axis is always present)
    log_alpha: bool           # True when the decay was given as g = log α
    alpha: Optional[torch.Tensor]   # [B, T, H, D] (α, or g when log_alpha) or None
    p0: float
    M0: Optional[torch.Tensor]      # [B, H, D, m]
    P0: Optional[torch.Tensor]      # [B, H, G, D, D]
    G: int
    grouped: bool             # r2 was given with a G axis (state P then has one too)

    @property
    def dims(self):
        B, T, H, D = self.q.shape
        return B, T, H, D, self.v.shape[-1]


def _tensor(name, x, ndim=None):
    if not torch.is_tensor(x):
        raise ValueError(f"{name} must be a torch tensor (got {type(x).__name__})")
    if not (x.is_floating_point()):
        raise ValueError(f"{name} must have a floating dtype (got {x.dtype})")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions (got shape {tuple(x.shape)})")
    return x


ALPHA_ZEROS = ("alpha has exact zeros: its gradient is computed as dL/dlog(alpha) / alpha; "
               "pass the log-decay as g= instead")


def _check_values(q, k, v, l2, r2, dec, log_alpha, M0, P0, D, values, forbid_alpha_zeros):
    """The value checks as device operations whose flags are read back in one transfer (one host
    synchronisation on a GPU, where each check used to cost one or two), in the order of their
    error messages: the first failing check raises.  A message that quotes a value (the minimum of
    ``l2`` or ``r2``, the smallest eigenvalue of ``P``) computes it only then.

    The positive semi-definiteness of ``P₀`` (``λ_min ≥ −1e-6 · max(1, max|P|) · D``) is tested as a
    Cholesky of ``sym(P₀) + 1e-6 · max(1, max|P|) · D · I`` without error checks (``cholesky_ex``:
    no synchronisation) instead of an eigendecomposition (``eigvalsh`` synchronises)."""
    checks = []                            # (flag: 0-dim bool tensor, message: () -> str)

    def add(flag, msg):
        checks.append((flag.reshape(()), msg))
    if values:
        for name, x in (("q", q), ("k", k), ("v", v), ("l2", l2), ("r2", r2)):
            add(~torch.isfinite(x).all(), lambda name=name: f"{name} must be finite (got NaN or Inf)")
        add((l2 < 0).any(), lambda: f"l2 must be >= 0 (got {float(l2.min())!r})")
        add((r2 <= 0).any(), lambda: f"r2 must be > 0 (got {float(r2.min())!r})")
        if dec is not None:
            if log_alpha:
                # g = -inf is a legal "forget everything" decay (α = 0)
                add((torch.isnan(dec) | (dec == float("inf"))).any(), lambda: "g must not be NaN or +Inf")
            else:
                add(~torch.isfinite(dec).all(), lambda: "alpha must be finite (got NaN or Inf)")
        if M0 is not None:
            add(~torch.isfinite(M0).all(), lambda: "initial_state[0] (M) must be finite (got NaN or Inf)")
            add(~torch.isfinite(P0).all(), lambda: "initial_state[1] (P) must be finite (got NaN or Inf)")
            Pd = P0.detach().double()
            scale = Pd.abs().amax().clamp_min(1.0)
            add(((Pd - Pd.transpose(-1, -2)).abs() > 1e-6 * scale).any(),
                lambda: "initial_state[1] (P) must be symmetric")
            S = 0.5 * (Pd + Pd.transpose(-1, -2))
            eye = torch.eye(D, dtype=S.dtype, device=S.device)
            add((torch.linalg.cholesky_ex(S + (1e-6 * D) * scale * eye).info != 0).any(),
                lambda: f"initial_state[1] (P) must be positive semi-definite "
                        f"(min eigenvalue {float(torch.linalg.eigvalsh(S).min()):.3g})")
    if forbid_alpha_zeros and dec is not None and not log_alpha and dec.requires_grad:
        add((dec.detach() == 0).any(), lambda: ALPHA_ZEROS)
    if not checks:
        return
    bad = torch.stack([f for f, _ in checks]).tolist()          # the one synchronisation
    for (_, msg), b in zip(checks, bad):
        if b:
            raise ValueError(msg())


def apply_write_mask(k, write_mask):
    """``k`` with the keys of non-writing tokens set to zero (see the module docstring).

    ``write_mask``: None (every token writes) or a bool tensor ``[B, T, H]`` on ``k``'s device.
    """
    if write_mask is None:
        return k
    if not torch.is_tensor(write_mask) or write_mask.dtype != torch.bool:
        raise ValueError(f"write_mask must be a bool tensor [B, T, H] (got "
                         f"{write_mask.dtype if torch.is_tensor(write_mask) else type(write_mask).__name__})")
    if tuple(write_mask.shape) != tuple(k.shape[:3]):
        raise ValueError(f"write_mask must have shape [B, T, H] = {list(k.shape[:3])} "
                         f"(got {list(write_mask.shape)})")
    if write_mask.device != k.device:
        raise ValueError(f"write_mask is on {write_mask.device} but k is on {k.device}")
    return torch.where(write_mask[..., None], k, torch.zeros((), dtype=k.dtype, device=k.device))


def check_inputs(q, k, v, l2, r2, alpha=None, p0=1.0, initial_state=None, *, g=None,
                 values: bool = True, write_mask=None, forbid_alpha_zeros: bool = False) -> Inputs:
    """Validate the BL op's arguments.

    ``values=False`` keeps the shape/dtype checks (free) and skips the value
    checks (finite, ``l2 ≥ 0``, ``r2 > 0``, PSD ``P0``), which need a device
    synchronisation (one for all of them, :func:`_check_values`); layers whose
    parameterisation guarantees them use it.  ``forbid_alpha_zeros``: also refuse
    ``alpha`` with exact zeros when it requires a gradient (the kernels' decay
    gradient divides by ``α``), in the same synchronisation.
    """
    q = _tensor("q", q, 4)
    B, T, H, D = q.shape
    k = _tensor("k", k, 4)
    if k.shape != q.shape:
        raise ValueError(f"k must have the shape of q {tuple(q.shape)} (got {tuple(k.shape)})")
    v = _tensor("v", v, 4)
    if v.shape[:3] != (B, T, H):
        raise ValueError(f"v must have shape [B, T, H, m] = [{B}, {T}, {H}, m] (got {tuple(v.shape)})")
    m = v.shape[-1]
    if T < 1 or D < 1 or m < 1:
        raise ValueError(f"q and v need T, D, m >= 1 (got q {tuple(q.shape)}, v {tuple(v.shape)})")
    dev = q.device
    for name, x in (("k", k), ("v", v)):
        if x.device != dev:
            raise ValueError(f"{name} is on {x.device} but q is on {dev}")

    def per_token(name, x, trailing=None):
        if isinstance(x, Real) and not isinstance(x, bool):
            x = torch.full((B, T, H), float(x), dtype=torch.float32, device=dev)
            return x if trailing is None else x[..., None]
        x = _tensor(name, x)
        if x.device != dev:
            raise ValueError(f"{name} is on {x.device} but q is on {dev}")
        return x

    l2 = per_token("l2", l2)
    if tuple(l2.shape) != (B, T, H):
        raise ValueError(f"l2 must have shape [B, T, H] = [{B}, {T}, {H}] (got {tuple(l2.shape)})")
    grouped = torch.is_tensor(r2) and r2.ndim == 4
    r2 = per_token("r2", r2)
    if r2.ndim == 3:
        if tuple(r2.shape) != (B, T, H):
            raise ValueError(f"r2 must have shape [B, T, H] or [B, T, H, G] (got {tuple(r2.shape)})")
        r2 = r2[..., None]
    elif r2.ndim != 4 or tuple(r2.shape[:3]) != (B, T, H):
        raise ValueError(f"r2 must have shape [B, T, H] or [B, T, H, G] (got {tuple(r2.shape)})")
    G = r2.shape[-1]
    if G < 1 or m % G:
        raise ValueError(f"r2's group count G={G} must divide the value width m={m}")

    if alpha is not None and g is not None:
        raise ValueError("give at most one of alpha (decay) and g (log-decay)")
    dec, log_alpha = (alpha, False) if g is None else (g, True)
    dec_name = "g" if log_alpha else "alpha"
    if dec is not None:
        dec = _tensor(dec_name, dec)
        if dec.device != dev:
            raise ValueError(f"{dec_name} is on {dec.device} but q is on {dev}")
        if tuple(dec.shape) != (B, T, H, D):
            raise ValueError(f"{dec_name} must have shape [B, T, H, D] = [{B}, {T}, {H}, {D}] "
                             f"(got {tuple(dec.shape)})")

    p0 = V.scalar("p0", p0)
    if p0 < 0:
        raise ValueError(f"p0 must be >= 0 (got {p0!r})")

    M0 = P0 = None
    if initial_state is not None:
        if not isinstance(initial_state, (tuple, list)) or len(initial_state) != 2:
            raise ValueError("initial_state must be a pair (M [B, H, D, m], P [B, H, D, D])")
        M0, P0 = initial_state
        M0 = _tensor("initial_state[0] (M)", M0, 4)
        if tuple(M0.shape) != (B, H, D, m):
            raise ValueError(f"initial_state[0] (M) must have shape [B, H, D, m] = [{B}, {H}, {D}, {m}] "
                             f"(got {tuple(M0.shape)})")
        P0 = _tensor("initial_state[1] (P)", P0)
        if P0.ndim == 4 and G == 1 and tuple(P0.shape) == (B, H, D, D):
            P0 = P0[:, :, None]
        if tuple(P0.shape) != (B, H, G, D, D):
            want = f"[{B}, {H}, {D}, {D}]" if G == 1 else f"[{B}, {H}, {G}, {D}, {D}]"
            raise ValueError(f"initial_state[1] (P) must have shape {want} (got {tuple(P0.shape)})")
        for name, x in (("initial_state[0] (M)", M0), ("initial_state[1] (P)", P0)):
            if x.device != dev:
                raise ValueError(f"{name} is on {x.device} but q is on {dev}")

    if values or forbid_alpha_zeros:
        _check_values(q, k, v, l2, r2, dec, log_alpha, M0, P0, D, values, forbid_alpha_zeros)
    k = apply_write_mask(k, write_mask)
    return Inputs(q, k, v, l2, r2, log_alpha, dec, p0, M0, P0, G, grouped)
