r"""``BayesianLayer``: the BL token mixer as an ``nn.Module`` (the learned tasks' mixer).

From the hidden state ``x_t`` (width ``d_model``), per head ``h``:

* keys ``k_t = normalise(W_k x_t)`` (unit norm, as in the paper's layers and
  DeltaNet), queries ``q_t = normalise(W_q x_t)`` (``norm_q=False`` keeps them raw),
  values ``v_t = W_v x_t``;
* noise variances ``ℓ²_t = softplus(w_ℓ·x_t + b_ℓ)`` and
  ``r²_{t,g} = softplus(w_{r,g}·x_t + b_{r,g}) + r2_min`` (``G`` groups, App. D),
  so ``ℓ² ≥ 0`` and ``r² > 0`` by construction;
* decays ``α_t = sigmoid(W_a x_t + b_a)`` per key dimension (``decay="diag"``,
  KDA-like), one per head (``"scalar"``, GDN-like) or none (``"none"``, ``A = I``);
  they reach the op as log-decays ``g = logsigmoid(·)`` so strong forgetting
  keeps exact gradients;
* the filter (BL Prop. 1) gives ``o_t = M_tᵀ q_t``; an output projection maps the
  heads back to ``d_model``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from assocmem import validate as V

from .fused_recurrent import fused_recurrent_bl
from .naive import naive_bl

DECAYS = ("diag", "scalar", "none")


class BayesianLayer(nn.Module):
    """Bayesian Layer mixer.

    Parameters
    ----------
    d_model : hidden width.  n_heads : heads.  head_dim : key/query width ``D``
    (default ``d_model // n_heads``).  value_dim : value width ``m`` per head
    (default ``head_dim``).  groups : observation-noise groups ``G`` (divides ``m``).
    decay : ``"diag" | "scalar" | "none"``.  p0 : prior scale ``P_0 = p0 I``.
    r2_min : floor of ``r²``.  impl : ``"auto"`` (Triton kernels where available,
    see :func:`fused_recurrent_bl`) or ``"naive"`` (the torch recurrence).

    ``forward(x [B, T, d_model], initial_state=None, output_final_state=False)``
    returns ``y [B, T, d_model]``, or ``(y, (M, P))`` with ``output_final_state``.
    """

    def __init__(self, d_model: int, n_heads: int = 4, head_dim: int | None = None,
                 value_dim: int | None = None, groups: int = 1, decay: str = "diag", p0: float = 1.0,
                 r2_min: float = 1e-4, norm_q: bool = True, impl: str = "auto"):
        super().__init__()
        d_model = V.count("d_model", d_model, 1)
        H = V.count("n_heads", n_heads, 1)
        D = V.count("head_dim", head_dim if head_dim is not None else d_model // H, 1)
        m = V.count("value_dim", value_dim if value_dim is not None else D, 1)
        G = V.count("groups", groups, 1)
        if m % G:
            raise ValueError(f"groups={G} must divide value_dim={m}")
        V.choice("decay", decay, DECAYS)
        V.choice("impl", impl, ("auto", "naive"))
        p0 = float(V.scalar("p0", p0))
        if p0 < 0:
            raise ValueError(f"p0 must be >= 0 (got {p0!r})")
        r2_min = float(V.positive("r2_min", r2_min))
        self.d_model, self.n_heads, self.head_dim, self.value_dim, self.groups = d_model, H, D, m, G
        self.decay, self.p0, self.r2_min, self.norm_q, self.impl = decay, p0, r2_min, norm_q, impl
        self.q_proj = nn.Linear(d_model, H * D, bias=False)
        self.k_proj = nn.Linear(d_model, H * D, bias=False)
        self.v_proj = nn.Linear(d_model, H * m, bias=False)
        self.noise_proj = nn.Linear(d_model, H * (1 + G))
        self.a_proj = None
        if decay != "none":
            self.a_proj = nn.Linear(d_model, H * D if decay == "diag" else H)
        self.o_proj = nn.Linear(H * m, d_model, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            nn.init.xavier_uniform_(lin.weight)
        nn.init.normal_(self.noise_proj.weight, std=0.02)
        H, G = self.n_heads, self.groups
        b = self.noise_proj.bias.view(H, 1 + G)
        b[:, 0] = math.log(math.expm1(0.01))     # ℓ² ≈ 0.01 at start
        b[:, 1:] = math.log(math.expm1(0.5))     # r² ≈ 0.5
        if self.a_proj is not None:
            nn.init.normal_(self.a_proj.weight, std=0.02)
            # multi-scale retention at start: α between sigmoid(2) ≈ 0.88 and sigmoid(6) ≈ 0.998
            n = self.a_proj.bias.numel()
            self.a_proj.bias.copy_(torch.linspace(2.0, 6.0, n))

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, "
                f"value_dim={self.value_dim}, groups={self.groups}, decay={self.decay!r}, p0={self.p0}, "
                f"impl={self.impl!r}")

    def forward(self, x, initial_state=None, output_final_state: bool = False):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape [B, T, {self.d_model}] (got {tuple(x.shape)})")
        B, T, _ = x.shape
        H, D, m, G = self.n_heads, self.head_dim, self.value_dim, self.groups
        q = self.q_proj(x).view(B, T, H, D)
        k = F.normalize(self.k_proj(x).view(B, T, H, D).float(), dim=-1).to(x.dtype)
        if self.norm_q:
            q = F.normalize(q.float(), dim=-1).to(x.dtype)
        v = self.v_proj(x).view(B, T, H, m)
        nz = self.noise_proj(x).float().view(B, T, H, 1 + G)
        l2 = F.softplus(nz[..., 0])
        r2 = F.softplus(nz[..., 1:]) + self.r2_min
        if G == 1:
            r2 = r2[..., 0]
        g = None
        if self.a_proj is not None:
            g = F.logsigmoid(self.a_proj(x).float())
            g = g.view(B, T, H, D) if self.decay == "diag" else g.view(B, T, H, 1).expand(B, T, H, D)
        op = fused_recurrent_bl if self.impl == "auto" else naive_bl
        o, state = op(q, k, v, l2, r2, g=g, p0=self.p0, initial_state=initial_state,
                      output_final_state=output_final_state, validate=False)
        y = self.o_proj(o.reshape(B, T, H * m).to(x.dtype))
        return (y, state) if output_final_state else y
