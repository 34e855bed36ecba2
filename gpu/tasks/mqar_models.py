r"""Model building blocks for MQAR (BL §4.2, App. F): token embeddings, 2 mixer layers, 8,192 state per layer.

Backbone (:class:`MQARModel`): token embedding (``n_tokens`` rows: the shared
vocabulary and ``PAD``), ``n_layers = 2`` pre-norm residual blocks
``h += mixer(LN h, write_mask); h += MLP(LN h)``, a final LayerNorm and a
linear read-out over the ``vocab_size`` value ids (the labels are value ids).

BL mixer (:class:`BLMixer`): learned projections ``q = W_q h``, ``k = W_k h``
(both L2-normalised per head), ``v = W_v h``; per-token gates
``ℓ² = softplus(·)``, ``r² = softplus(·) + 1e-4`` (one ``r²`` per noise group;
biases start at ``softplus⁻¹(0.05)``, BL App. E.4's ``ℓ² = r² = 0.05``); the
core is ``assocmem.gpu.fused_recurrent_bl(q, k, v, l2, r2, None, p0,
validate=False)`` (Triton on CUDA, the torch reference ``naive_bl`` on CPU),
then an output projection ``H·m → d_model``.

Write mask: ``write_mask [B, T]`` (``MQARBatch.is_write``) makes a token a
Kalman missing observation (the BL op's ``write_mask``, as in every learned
task): its process noise still enters ``P̄``, the update does not happen, and
its query still reads the memory.  ``None``: every token writes.

State budget (BL Table 5 as the notes read it: mean plus covariance): a BL
layer with ``H`` heads, key dimension ``D``, value dimension ``m`` per head and
``G`` noise groups per head stores ``H (D m + G D²)`` numbers
(:func:`bl_state_size`).  :func:`bl_head_sizes` picks ``(D, m)`` for a budget
(default 8,192): with both free, the largest ``D = m`` (a multiple of ``G``)
with ``H (1 + G) D² <= budget`` (``H = 4, G = 1``: ``D = m = 32``, exactly
8,192); with one fixed, the largest other.  The mixer's inner width ``H·m`` is
decoupled from ``d_model`` by the projections, so the model width can sweep
(Fig. 4a) at a fixed state.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch
from torch import nn
import torch.nn.functional as F

from assocmem import validate as V
from .models import MLP

STATE_BUDGET = 8192
_INV_SOFTPLUS_005 = math.log(math.expm1(0.05))


def bl_state_size(n_heads: int, key_dim: int, value_dim: int, groups: int = 1) -> int:
    """Numbers of state of one BL layer: ``H (D m + G D²)`` (mean ``D × m`` and ``G`` covariances ``D × D`` per head)."""
    H = V.count("n_heads", n_heads, 1)
    D = V.count("key_dim", key_dim, 1)
    m = V.count("value_dim", value_dim, 1)
    G = V.count("groups", groups, 1)
    return H * (D * m + G * D * D)


def bl_head_sizes(budget: int = STATE_BUDGET, *, n_heads: int = 4, key_dim: Optional[int] = None,
                  value_dim: Optional[int] = None, groups: int = 1, pow2: bool = False) -> tuple[int, int]:
    """``(key_dim, value_dim)`` per head with ``bl_state_size(...) <= budget``, the free size as large as possible.

    Both free: the largest ``D = m``; ``key_dim`` fixed: the largest ``m``;
    ``value_dim`` fixed: the largest ``D``.  ``m`` is always a multiple of
    ``groups`` (the groups split the value columns); ``pow2`` restricts the
    free size(s) to powers of two (the kernel pads ``D`` to one).
    """
    budget = V.count("budget", budget, 1)
    H = V.count("n_heads", n_heads, 1)
    G = V.count("groups", groups, 1)
    if key_dim is not None and value_dim is not None:
        raise ValueError("give at most one of key_dim and value_dim")

    def fits(D, m):
        return m % G == 0 and bl_state_size(H, D, m, G) <= budget

    def ok(x):
        return not pow2 or x & (x - 1) == 0

    top = math.isqrt(budget) + 1
    if key_dim is None and value_dim is None:
        found = [(D, D) for D in range(top, 0, -1) if ok(D) and fits(D, D)]
    elif key_dim is not None:
        D = V.count("key_dim", key_dim, 1)
        found = [(D, m) for m in range(budget // (H * D), 0, -1) if ok(m) and fits(D, m)]
    else:
        m = V.count("value_dim", value_dim, 1)
        if m % G:
            raise ValueError(f"value_dim={m} must be a multiple of groups={G}")
        found = [(D, m) for D in range(top, 0, -1) if ok(D) and fits(D, m)]
    if not found:
        raise ValueError(f"no head sizes fit a budget of {budget} with {H} heads, {G} groups "
                         f"(key_dim={key_dim}, value_dim={value_dim}, pow2={pow2})")
    return found[0]


def _resolve_bl_op():
    from assocmem.gpu import fused_recurrent_bl
    return fused_recurrent_bl


class BLMixer(nn.Module):
    """Multi-head BL mixer with learned q/k/v projections and an optional write mask."""

    def __init__(self, d_model: int, *, n_heads: int = 4, key_dim: Optional[int] = None,
                 value_dim: Optional[int] = None, groups: int = 1, p0: float = 1.0,
                 budget: Optional[int] = STATE_BUDGET):
        super().__init__()
        d_model = V.count("d_model", d_model, 1)
        H = V.count("n_heads", n_heads, 1)
        G = V.count("groups", groups, 1)
        if key_dim is None or value_dim is None:
            key_dim, value_dim = bl_head_sizes(STATE_BUDGET if budget is None else budget, n_heads=H,
                                               key_dim=key_dim, value_dim=value_dim, groups=G)
        D, m = V.count("key_dim", key_dim, 1), V.count("value_dim", value_dim, 1)
        if m % G:
            raise ValueError(f"value_dim={m} must be a multiple of groups={G}")
        if budget is not None and bl_state_size(H, D, m, G) > budget:
            raise ValueError(f"state {bl_state_size(H, D, m, G)} is above the budget {budget}")
        self.H, self.D, self.m, self.G, self.p0 = H, D, m, G, float(p0)
        self.q_proj = nn.Linear(d_model, H * D, bias=False)
        self.k_proj = nn.Linear(d_model, H * D, bias=False)
        self.v_proj = nn.Linear(d_model, H * m, bias=False)
        self.o_proj = nn.Linear(H * m, d_model, bias=False)
        self.gate = nn.Linear(d_model, H * (1 + G))            # ℓ² per head, r² per head and group
        nn.init.normal_(self.gate.weight, std=0.02)
        nn.init.constant_(self.gate.bias, _INV_SOFTPLUS_005)
        self._op = None

    @property
    def state_size(self) -> int:
        return bl_state_size(self.H, self.D, self.m, self.G)

    def forward(self, h: torch.Tensor, write_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        B, T, _ = h.shape
        H, D, m, G = self.H, self.D, self.m, self.G
        q = F.normalize(self.q_proj(h).reshape(B, T, H, D), dim=-1)
        k = F.normalize(self.k_proj(h).reshape(B, T, H, D), dim=-1)
        v = self.v_proj(h).reshape(B, T, H, m)
        g = self.gate(h)
        l2 = F.softplus(g[..., :H])
        r2 = F.softplus(g[..., H:]).reshape(B, T, H, G) + 1e-4
        if G == 1:
            r2 = r2[..., 0]
        kw = {}
        if write_mask is not None:
            if write_mask.shape != (B, T):
                raise ValueError(f"write_mask must be [B, T] = [{B}, {T}] (got {list(write_mask.shape)})")
            kw["write_mask"] = write_mask[:, :, None].expand(B, T, H).contiguous()
        if self._op is None:
            self._op = _resolve_bl_op()
        o, _ = self._op(q, k, v, l2, r2, None, self.p0, validate=False, **kw)
        return self.o_proj(o.reshape(B, T, H * m).to(h.dtype))


MixerFactory = Callable[[int], nn.Module]


class MQARModel(nn.Module):
    """Token embedding, ``n_layers`` (mixer, MLP) pre-norm blocks, read-out over the value ids.

    ``mixer``: ``"bl"`` (:class:`BLMixer`, ``mixer_kw`` passed on) or a factory
    ``d_model -> nn.Module`` whose modules take ``(h, write_mask)``.
    """

    def __init__(self, n_tokens: int, n_classes: int, *, d_model: int = 128, n_layers: int = 2,
                 mixer: Union[str, MixerFactory] = "bl", mlp_ratio: int = 4, **mixer_kw):
        super().__init__()
        n_tokens = V.count("n_tokens", n_tokens, 2)
        n_classes = V.count("n_classes", n_classes, 2)
        d_model = V.count("d_model", d_model, 1)
        n_layers = V.count("n_layers", n_layers, 1)
        if isinstance(mixer, str):
            V.choice("mixer", mixer, ("bl",))
            factory = lambda d: BLMixer(d, **mixer_kw)  # noqa: E731
        elif callable(mixer):
            if mixer_kw:
                raise ValueError("mixer_kw only applies to the named mixers")
            factory = mixer
        else:
            raise ValueError(f"mixer must be 'bl' or a callable (got {mixer!r})")
        self.embed = nn.Embedding(n_tokens, d_model)
        self.mixers = nn.ModuleList(factory(d_model) for _ in range(n_layers))
        self.norm1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        self.norm2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        self.mlps = nn.ModuleList(MLP(d_model, mlp_ratio) for _ in range(n_layers))
        self.out_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def state_sizes(self) -> list[int]:
        return [int(getattr(mx, "state_size", -1)) for mx in self.mixers]

    def forward(self, tokens: torch.Tensor, write_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        h = self.embed(tokens)
        for mix, n1, n2, mlp in zip(self.mixers, self.norm1, self.norm2, self.mlps):
            h = h + mix(n1(h), write_mask)
            h = h + mlp(n2(h))
        return self.head(self.out_norm(h))


def mqar_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy on the query positions (labels ``-100`` elsewhere) and the query accuracy."""
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
    mask = labels != -100
    acc = (logits.argmax(-1)[mask] == labels[mask]).float().mean() if bool(mask.any()) else logits.new_zeros(())
    return loss, acc
