r"""Models of the learned tasks.

Shared backbone (BL App. E.5, pp.23-26): input projection to width 64, two
pre-norm residual blocks ``h += mixer(LN h); h += MLP(LN h)``, a final
LayerNorm and a linear read-out to the label logits.  Every mixer has 4 heads
of dimension 16, takes the task's addresses directly as keys and queries
(``q = k = address`` in every layer and head; no learned key projection, so a
model cannot project a designed collision away), and learns only the value
projection, its per-token gates and the output projection.  Mixers differ only
in the recurrent core (see :mod:`.recurrences`):

=========  ==================================================================
``bl``     the Bayesian Layer op (dense covariance, ``A = I``), per-token
           ``ℓ_t² = softplus(·)``, ``r_t² = softplus(·) + ε`` per head
``diag``   the same with the diagonal-covariance ablation
``reset``  covariance reset (delta rule in BL's noise parameterisation,
           ``η = ℓ²/(r² + ℓ²‖k‖²)``, same gate parameterisation as ``bl``)
``delta``  DeltaNet-style core, ``η_t = sigmoid(·)``
``linear`` linear-attention core in the additive family, ``ω = λ/(λ + r²)``
``gla``    GLA-style core, per-key-dimension decay ``α = sigmoid(·)^{1/16}``
=========  ==================================================================

For swap tracking (AM §3.2): a causal softmax Transformer (1/2/4/8 layers,
RoPE) and the DeltaFormer (AM Eqs. 37-42, pp.12-14)

.. math::  u_t = v_t - \beta_t \sum_{i<t} \kappa_1(k_i, k_t)\, u_i ,\qquad
           o_t = \sum_{i\le t} \operatorname{softmax}_i(q_t^\top k_i/\sqrt{d})\, u_i ,

with ``κ1 ∈ {linear, round2, relu, exp, softmax}`` and ``κ2 = softmax``; the
``u`` system is solved in one triangular solve, ``U = (I + diag(β) A)^{-1} V``
(App. D.3).  ``round2`` rounds the similarity to two decimals; its gradient is
passed straight through (the rounding has zero derivative almost everywhere).
"""
from __future__ import annotations

import inspect
import math
from typing import Callable, Optional

import torch
from torch import nn
import torch.nn.functional as F

from . import recurrences as R
from .names import KAPPAS, MIXERS, SWAP_MODELS  # noqa: F401  (re-exported)

GATES = ("token", "head")

_INV_SOFTPLUS_005 = math.log(math.expm1(0.05))     # softplus⁻¹(0.05): BL App. E.4's r² = ℓ² = 0.05


# ---------------------------------------------------------------------------
# the BL op (issue 5's kernel), resolved lazily so this module imports without it
# ---------------------------------------------------------------------------
def resolve_bl_op() -> tuple[Callable, str]:
    """Return ``(op, name)``: the fused Triton BL op when available, else ``naive_bl``.

    ``fused_recurrent_bl`` itself dispatches: CUDA tensors run Triton, CPU
    tensors run the interpreter when ``TRITON_INTERPRET=1``, else ``naive_bl``.
    """
    try:
        from assocmem.gpu import fused_recurrent_bl as op
        return op, "fused_recurrent_bl"
    except ImportError:
        pass
    try:
        from assocmem.gpu.fused_recurrent import fused_recurrent_bl as op
        return op, "fused_recurrent_bl"
    except ImportError:
        pass
    from assocmem.gpu.naive import naive_bl as op
    return op, "naive_bl"


def _accepts(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------
# address-keyed mixers
# ---------------------------------------------------------------------------
class AddressMixer(nn.Module):
    """One multi-head recurrent mixer whose keys/queries are the given addresses.

    Protocol choices (recorded in every result's ``protocol`` block, docs/tasks.md):

    ``gates``    ``"token"`` (ours, default): the noise/step gates are computed per
                 token from the hidden state; ``"head"``: one learned constant per head
                 (the paper's main text: "a learnable scalar per head").
    ``reset_l2`` ``None`` (learned, default) or a fixed ``ℓ²`` for the ``reset`` mixer
                 (the paper's App. E.5.5 fixes it at 0.05).
    ``decay``    ``False`` (default, ``A = I``) or a learned per-token, per-head decay
                 ``α_t = sigmoid(·)`` for the BL mixer (passed as the log-decay ``g``).
    """

    def __init__(self, kind: str, d_model: int = 64, n_heads: int = 4, head_dim: int = 16,
                 p0: float = 1.0, chunk_size: int = 64, gates: str = "token", reset_l2=None,
                 decay: bool = False):
        super().__init__()
        if kind not in MIXERS:
            raise ValueError(f"mixer must be one of {', '.join(MIXERS)} (got {kind!r})")
        if gates not in GATES:
            raise ValueError(f"gates must be one of {', '.join(GATES)} (got {gates!r})")
        if reset_l2 is not None and not (float(reset_l2) > 0 and math.isfinite(float(reset_l2))):
            raise ValueError(f"reset_l2 must be a positive number or None (got {reset_l2!r})")
        self.kind, self.H, self.m, self.p0, self.chunk = kind, n_heads, head_dim, float(p0), chunk_size
        self.gates, self.reset_l2 = gates, (None if reset_l2 is None else float(reset_l2))
        self.decay = bool(decay) and kind == "bl"
        self.v_proj = nn.Linear(d_model, n_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * head_dim, d_model, bias=False)
        if kind in ("bl", "diag", "reset", "linear"):
            n_out, bias = 2 * n_heads, _INV_SOFTPLUS_005             # (ℓ² or λ, r²) pre-activations
        elif kind == "delta":
            n_out, bias = n_heads, 0.0                               # η = 1/2 at start, as reset's
        else:  # gla
            n_out, bias = n_heads * head_dim, 3.0                    # α ≈ sigmoid(3)^{1/16} ≈ 0.997
        if gates == "token":
            self.gate = nn.Linear(d_model, n_out)
            nn.init.normal_(self.gate.weight, std=0.02)
            nn.init.constant_(self.gate.bias, bias)
        else:
            self.gate_const = nn.Parameter(torch.full((n_out,), float(bias)))
        if self.decay:
            self.decay_gate = nn.Linear(d_model, n_heads)
            nn.init.normal_(self.decay_gate.weight, std=0.02)
            nn.init.constant_(self.decay_gate.bias, 4.0)            # α ≈ 0.982 at start
        self._bl_op = None

    def gate_pre(self, h):
        """The gates' pre-activations ``[B, T, n_out]`` (per token, or one constant per head)."""
        if self.gates == "token":
            return self.gate(h)
        return self.gate_const.expand(*h.shape[:2], -1)

    def noise(self, h):
        """Per-token ``(ℓ² or λ, r²)``, each ``[B, T, H]``."""
        g = self.gate_pre(h)
        a, b = g[..., :self.H], g[..., self.H:]
        return F.softplus(a), F.softplus(b) + 1e-4

    def core(self, q, k, v, h, write_mask=None):
        """Run the recurrent core on ``q, k [B,T,H,D]``, ``v [B,T,H,m]``; ``h`` feeds the gates.

        ``write_mask [B, T, H]`` (None: every token writes): a token with False does
        not write (BL: a missing observation, decay and process noise still apply;
        reset/Delta: step size 0; linear attention: no write; GLA: decay only).  The
        BL op takes the mask itself; the baseline cores get a zero write key there,
        which is each family's "no write" (checked against the numpy filter).
        """
        kind = self.kind
        kw_ = k if write_mask is None else torch.where(write_mask[..., None], k, torch.zeros_like(k))
        if kind == "bl":
            l2, r2 = self.noise(h)
            if self._bl_op is None:
                self._bl_op = resolve_bl_op()[0]
            kw = {"validate": False} if _accepts(self._bl_op, "validate") else {}
            if write_mask is not None:
                kw["write_mask"] = write_mask
            if self.decay:
                B, T, _ = h.shape
                g = F.logsigmoid(self.decay_gate(h))[..., None].expand(B, T, self.H, q.shape[-1])
                kw["g"] = g.to(q.dtype).contiguous()
            o, _ = self._bl_op(q, k, v, l2, r2, None, self.p0, **kw)
            return o
        if kind == "diag":
            l2, r2 = self.noise(h)
            return R.diag_bl(q, kw_, v, l2.to(q.dtype), r2.to(q.dtype), self.p0, chunk_size=self.chunk)
        if kind == "reset":
            l2, r2 = self.noise(h)
            if self.reset_l2 is not None:
                l2 = torch.full_like(l2, self.reset_l2)
            eta = R.reset_gain(l2.to(q.dtype), r2.to(q.dtype), k)
            return R.chunk_delta(q, kw_, v, eta, chunk_size=self.chunk)[0]
        if kind == "delta":
            eta = torch.sigmoid(self.gate_pre(h)).to(q.dtype)
            return R.chunk_delta(q, kw_, v, eta, chunk_size=self.chunk)[0]
        if kind == "linear":
            lam, r2 = self.noise(h)
            omega = (lam / (lam + r2)).to(q.dtype)
            return R.additive(q, kw_, v, omega=omega)[0]
        # gla
        B, T, _ = h.shape
        log_alpha = (F.logsigmoid(self.gate_pre(h)) / 16.0).reshape(B, T, self.H, -1).to(q.dtype)
        return R.additive(q, kw_, v, log_alpha=log_alpha)[0]

    def forward(self, h, keys, writes=None):
        """``writes [B, T]`` bool (None: every token writes)."""
        B, T, _ = h.shape
        if keys.shape[-1] != self.m and self.kind == "gla":
            raise ValueError(f"gla needs address dim {keys.shape[-1]} == head_dim {self.m}")
        k = keys[:, :, None, :].expand(B, T, self.H, keys.shape[-1]).to(h.dtype)
        v = self.v_proj(h).reshape(B, T, self.H, self.m)
        wm = None if writes is None else writes[:, :, None].expand(B, T, self.H).contiguous()
        o = self.core(k, k, v, h, wm)
        return self.o_proj(o.reshape(B, T, self.H * self.m).to(h.dtype))


class MLP(nn.Module):
    def __init__(self, d: int, ratio: int = 4):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, ratio * d), nn.Linear(ratio * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class AddressBackbone(nn.Module):
    """The shared 2-layer, width-64, 4-head × 16 model of the BL learned tasks."""

    def __init__(self, d_in: int, n_classes: int, mixer: str, *, n_layers: int = 2, d_model: int = 64,
                 n_heads: int = 4, head_dim: int = 16, p0: float = 1.0, gates: str = "token", reset_l2=None,
                 decay: bool = False):
        super().__init__()
        self.mixer_kind = mixer
        self.inp = nn.Linear(d_in, d_model)
        self.mixers = nn.ModuleList(AddressMixer(mixer, d_model, n_heads, head_dim, p0, gates=gates,
                                                 reset_l2=reset_l2, decay=decay) for _ in range(n_layers))
        self.norm1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        self.norm2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        self.mlps = nn.ModuleList(MLP(d_model) for _ in range(n_layers))
        self.out_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, x, keys, writes=None):
        """``writes [B, T]`` bool: which tokens write to the memories (None: all)."""
        h = self.inp(x)
        for mix, n1, n2, mlp in zip(self.mixers, self.norm1, self.norm2, self.mlps):
            h = h + mix(n1(h), keys, writes)
            h = h + mlp(n2(h))
        return self.head(self.out_norm(h))


# ---------------------------------------------------------------------------
# swap tracking: Transformer and DeltaFormer
# ---------------------------------------------------------------------------
def rope(x, base: float = 10000.0):
    """Rotary position embedding on ``x [B, H, T, d]`` (d even)."""
    B, H, T, d = x.shape
    half = d // 2
    freq = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    ang = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * freq[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:2 * half]
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
    return torch.cat([out, x[..., 2 * half:]], -1) if d % 2 else out


def causal_softmax_weights(scores, strict: bool):
    """Row softmax over ``i ≤ t`` (``i < t`` if strict) of ``scores [..., T, T]``; empty rows give 0."""
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril(-1 if strict else 0)
    s = scores.masked_fill(~mask, float("-inf"))
    mx = s.amax(-1, keepdim=True).clamp_min(-1e30)          # rows with no entry: max = -inf -> finite
    e = torch.exp(s - mx).masked_fill(~mask, 0.0)
    return e / e.sum(-1, keepdim=True).clamp_min(1e-20)


def kappa1_matrix(k, kind: str, w=None):
    """Strictly lower-triangular ``A[t, i] = κ1(k_i, w_t)`` for ``i < t``; ``k, w [B, H, T, d]``;
    the write query ``w`` defaults to the key itself (``w_t = k_t``)."""
    d = k.shape[-1]
    s = (k if w is None else w) @ k.transpose(-1, -2)
    T = s.shape[-1]
    strict = torch.ones(T, T, dtype=torch.bool, device=k.device).tril(-1)
    if kind == "linear":
        a = s
    elif kind == "round2":
        a = s + (torch.round(s * 100.0) / 100.0 - s).detach()   # straight-through rounding
    elif kind == "relu":
        a = F.relu(s)
    elif kind == "exp":
        a = torch.exp((s / math.sqrt(d)).clamp_max(30.0))
    elif kind == "softmax":
        return causal_softmax_weights(s / math.sqrt(d), strict=True)
    else:
        raise ValueError(f"kappa1 must be one of {', '.join(KAPPAS)} (got {kind!r})")
    return a.masked_fill(~strict, 0.0)


def deltaformer_u(v, k, beta, kind: str, w=None):
    """Solve ``u_t = v_t − β_t Σ_{i<t} κ1(k_i, w_t) u_i`` for all t: ``[B, H, T, m]`` (AM's general
    DeltaFormer, Eqs. 37-42; ``w = None``: the write query is the key, ``w_t = k_t``)."""
    A = kappa1_matrix(k, kind, w) * beta[..., :, None]
    T = A.shape[-1]
    eye = torch.eye(T, dtype=A.dtype, device=A.device)
    return torch.linalg.solve_triangular(eye + A, v, upper=False, unitriangular=True)


class AttentionLayer(nn.Module):
    """Causal softmax attention (``deltaformer=None``) or a DeltaFormer layer (κ1 given)."""

    def __init__(self, d_model: int, n_heads: int, kappa1: Optional[str] = None, pos: str = "rope",
                 key_norm: bool = False, beta_max: float = 1.0, write_query: bool = False,
                 signed_beta: bool = False):
        super().__init__()
        self.H, self.dh, self.kappa1, self.pos = n_heads, d_model // n_heads, kappa1, pos
        # key_norm: κ1 on unit keys.  With raw keys the u-recursion is an unstable delta rule
        # once β κ1(k, k) > 2 (it overflows at init from length ~128 on); unit keys and
        # β ≤ 2 keep it non-expanding (Theorem 1's keys are unit vectors too).
        # beta_max: β = beta_max · sigmoid(.).  With unit keys, β < 1 cannot learn the swaps
        # (measured: 0.53 after 300 steps at length 16, where raw keys reach 1.0 by step ~125);
        # β ∈ (0, 2) can (1.0 by step ~175): a swap is a reflection, which needs β κ1(k, k) = 2
        # (the delta rule's eigenvalue 1 − β‖k‖² = −1).
        if not 0.0 < float(beta_max) <= 2.0:
            raise ValueError(f"beta_max must lie in (0, 2] (got {beta_max!r})")
        # signed_beta: β = beta_max · tanh(./2) in (−beta_max, beta_max) instead of (0, beta_max).  With
        # κ1 ≥ 0 (ReLU, exp, softmax) and β > 0 every earlier u_i enters u_t with a negative weight; adding
        # one (u_child = v_child + u_parent, a path composed along the edges) needs β κ1 < 0, which a
        # non-negative kernel can only reach through β's sign (linear and round2 reach it through κ1's)
        self.key_norm, self.beta_max, self.signed_beta = key_norm, float(beta_max), bool(signed_beta)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        if kappa1 is not None:
            self.beta = nn.Linear(d_model, n_heads)
        # write_query: κ1 compares the earlier keys with a write query w_t of its own projection (AM's
        # general form) rather than with the key k_t, so the relation it reads can be asymmetric
        self.wq = nn.Linear(d_model, d_model, bias=False) if (kappa1 is not None and write_query) else None

    def forward(self, h):
        B, T, Dm = h.shape
        q, k, v = self.qkv(h).reshape(B, T, 3, self.H, self.dh).permute(2, 0, 3, 1, 4)
        if self.kappa1 is not None:
            gate = torch.tanh(0.5 * self.beta(h)) if self.signed_beta else torch.sigmoid(self.beta(h))
            beta = self.beta_max * gate.transpose(1, 2)                 # [B, H, T]
            kk = F.normalize(k, dim=-1) if self.key_norm else k
            if self.wq is None:
                v = deltaformer_u(v, kk, beta, self.kappa1)            # κ1 on the raw (or unit) keys
            else:
                w = self.wq(h).reshape(B, T, self.H, self.dh).transpose(1, 2)
                v = deltaformer_u(v, kk, beta, self.kappa1, F.normalize(w, dim=-1) if self.key_norm else w)
        if self.pos == "rope":
            q, k = rope(q), rope(k)
        w = causal_softmax_weights(q @ k.transpose(-1, -2) / math.sqrt(self.dh), strict=False)
        o = (w @ v).transpose(1, 2).reshape(B, T, Dm)
        return self.o(o)


class SequenceModel(nn.Module):
    """Token-embedding sequence model: pre-norm blocks of attention (or DeltaFormer) + MLP."""

    def __init__(self, vocab: int, n_classes: int, *, n_layers: int, d_model: int = 128, n_heads: int = 4,
                 kappa1: Optional[str] = None, pos: str = "rope", key_norm: bool = False, beta_max: float = 1.0,
                 factored_edges: int = 0, write_query: bool = False, signed_beta: bool = False):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        # factored_edges = n: ids below n² are one-token edges EDGE(u, v) = u·n + v, embedded as
        # E_from[u] + E_to[v] (both endpoints in one token from 2n rows) rather than one row per edge
        self.n_fact = int(factored_edges)
        if self.n_fact:
            if self.n_fact * self.n_fact > vocab:
                raise ValueError(f"factored_edges: {self.n_fact}² edge ids exceed the vocabulary of {vocab}")
            self.emb_from = nn.Embedding(self.n_fact, d_model)
            self.emb_to = nn.Embedding(self.n_fact, d_model)
        self.layers = nn.ModuleList(AttentionLayer(d_model, n_heads, kappa1, pos, key_norm, beta_max, write_query,
                                                   signed_beta) for _ in range(n_layers))
        self.n1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        self.n2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        self.mlps = nn.ModuleList(MLP(d_model) for _ in range(n_layers))
        self.out_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def embed(self, tokens):
        h = self.emb(tokens)
        if self.n_fact:
            n = self.n_fact
            edge = tokens < n * n
            e = tokens.clamp(max=n * n - 1)
            h = torch.where(edge[..., None], self.emb_from(e // n) + self.emb_to(e % n), h)
        return h

    def forward(self, tokens):
        h = self.embed(tokens)
        for att, n1, n2, mlp in zip(self.layers, self.n1, self.n2, self.mlps):
            h = h + att(n1(h))
            h = h + mlp(n2(h))
        return self.head(self.out_norm(h))


def swap_model(name: str, *, n_elems: int = 5, d_model: int = 128, n_heads: int = 4,
               deltaformer_layers: int = 1, pos: str = "rope", key_norm: bool = False,
               beta_max: float = 1.0) -> SequenceModel:
    """``deltaformer-<κ1>`` (``deltaformer_layers`` layers) or ``transformer-<L>``."""
    vocab = n_elems * (n_elems - 1) // 2
    if name.startswith("deltaformer-"):
        kappa = name.split("-", 1)[1]
        if kappa not in KAPPAS:
            raise ValueError(f"model: kappa1 must be one of {', '.join(KAPPAS)} (got {name!r})")
        return SequenceModel(vocab, n_elems, n_layers=deltaformer_layers, d_model=d_model, n_heads=n_heads,
                             kappa1=kappa, pos=pos, key_norm=key_norm, beta_max=beta_max)
    if name.startswith("transformer-"):
        try:
            L = int(name.split("-", 1)[1])
        except ValueError:
            raise ValueError(f"model: transformer-<layers> expected (got {name!r})") from None
        if L < 1:
            raise ValueError(f"model: transformer needs >= 1 layer (got {name!r})")
        return SequenceModel(vocab, n_elems, n_layers=L, d_model=d_model, n_heads=n_heads, kappa1=None, pos=pos)
    raise ValueError(f"model must be one of {', '.join(SWAP_MODELS)} (got {name!r})")


class FixedKeySwapModel(nn.Module):
    """The AM Fig. 5 stress test: fixed near-orthogonal keys, the model learns the read.

    Init token ``(p, e)``: key ``k_p``, value ``E_e``; swap token ``(a, b)``: key
    ``k_a − k_b``, value 0 (the Theorem 1 construction, AM App. E).  ``u`` from
    κ1 with ``β = 1``; the read is κ2 = softmax attention at a learned query
    ``q`` with a learned temperature, then a linear classifier.  Keys ``K``
    and values ``E`` are frozen buffers.

    ``keys``: ``"random"`` (ours: random unit vectors, overlaps ≈ ±3/√d) or
    ``"rounding_exact"`` (:func:`.data.rounding_exact_keys`: a key set on which
    two-decimal rounding zeroes every cross term, with the ``β`` that keeps the
    swap update an exact reflection).  ``kappa2``: the read, ``"softmax"`` or
    ``"linear"`` (an exact read needs signed weights, which a softmax cannot give).
    """

    def __init__(self, n: int, d: int = 128, kappa1: str = "round2", kappa2: str = "softmax",
                 keys: str = "random"):
        super().__init__()
        from . import data as Dt

        if kappa1 not in KAPPAS:
            raise ValueError(f"kappa1 must be one of {', '.join(KAPPAS)} (got {kappa1!r})")
        if kappa2 not in ("softmax", "linear"):
            raise ValueError(f"kappa2 must be softmax or linear (got {kappa2!r})")
        if keys not in ("random", "rounding_exact"):
            raise ValueError(f"keys must be random or rounding_exact (got {keys!r})")
        self.kappa1, self.kappa2, self.keys = kappa1, kappa2, keys
        if keys == "random":
            K, self.beta = Dt.near_orthogonal_keys(n, d, seed=4321), 1.0
        else:
            rk = Dt.rounding_exact_keys(n, d)
            K, self.beta = rk.keys, rk.beta
        self.register_buffer("K", K.float())
        self.register_buffer("E", Dt.near_orthogonal_keys(n, d, seed=8765).float())
        self.q = nn.Parameter(self.K[0].clone() + 0.01 * torch.randn(d))
        self.log_tau = nn.Parameter(torch.zeros(()))
        self.head = nn.Linear(d, n)

    def read(self, pos_a, pos_b, elem):
        """The memory read-out ``o_t`` (before the classifier): ``[B, T, d]``."""
        init = pos_b < 0
        ka = self.K[pos_a]
        kb = torch.where(init[..., None], torch.zeros_like(ka), self.K[pos_b.clamp_min(0)])
        k = (ka - kb)[:, None]                                           # [B, 1, T, d]
        v = torch.where(init[..., None], self.E[elem.clamp_min(0)], torch.zeros_like(ka))[:, None]
        beta = torch.full(k.shape[:3], self.beta, dtype=k.dtype, device=k.device)
        u = deltaformer_u(v, k, beta, self.kappa1)
        s = (k @ self.q)                                                 # [B, 1, T]
        if self.kappa2 == "softmax":
            T = s.shape[-1]
            scores = (s * torch.exp(self.log_tau))[..., None, :].expand(*s.shape[:2], T, T)
            w = causal_softmax_weights(scores, strict=False)
            o = w @ u
        else:
            o = torch.cumsum(s[..., None] * u, dim=2)
        return o[:, 0]

    def forward(self, pos_a, pos_b, elem):
        return self.head(self.read(pos_a, pos_b, elem))
