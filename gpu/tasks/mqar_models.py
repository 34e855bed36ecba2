r"""Model building blocks for MQAR (BL §4.2, App. F): token embeddings, 2 mixer layers, 8,192 state per layer.

Backbone (:class:`MQARModel`, the ``backbone`` protocol option): token embedding
(``n_tokens`` rows: the shared vocabulary and ``PAD``), ``n_layers = 2`` pre-norm
residual blocks, a final LayerNorm and a linear read-out over the ``vocab_size``
value ids (the labels are value ids).  The blocks (default ``backbone="zoology"``)
are Zoology's MQAR harness as we read it, ``h += conv(LN h); h += mixer(LN h,
write_mask)`` per mixer layer, ``conv`` a gated short convolution of width 3
(:class:`GatedShortConv`, Zoology's ``BaseConv``: in its MQAR configurations every
model is a ``Hybrid`` of that convolution and the mixer), and no MLP.
``backbone="mlp"`` (ours until 2 December) has no convolution and an MLP after each
mixer, ``h += mixer(LN h, write_mask); h += MLP(LN h)``: under it BL memorised its
Block pool and tested at about 1/P (docs/tasks_mqar_dag.md).
Positions are not embedded in either (Zoology's MQAR models set
``max_position_embeddings = 0``).

BL mixer (:class:`BLMixer`): learned projections ``q = W_q h``, ``k = W_k h``
(both L2-normalised per head), ``v = W_v h``; per-token gates
``ℓ² = softplus(·)``, ``r² = softplus(·) + 1e-4`` (one ``r²`` per noise group;
biases start at ``softplus⁻¹(0.05)``, BL App. E.4's ``ℓ² = r² = 0.05``); the
core is ``assocmem.gpu.fused_recurrent_bl(q, k, v, l2, r2, None, p0,
validate=False)`` (Triton on CUDA, the torch reference ``naive_bl`` on CPU),
then an output projection ``H·m → d_model``.

Dynamics: ``A_t = I`` (default; the ``bl_decay`` protocol option off) or, with
``decay=True``, a learned per-token, per-head decay ``A_t = α_t I``,
``α_t = sigmoid(w·h + b)`` (bias 4: ``α ≈ 0.982`` at the start), passed to the op
as the log-decay ``g`` -- GDN's form of ``A_t``, and the collision tasks'
``bl_decay``.  The paper's layer has learned structured dynamics ``A_t``; which
ones its MQAR runs used, the notes do not say.

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

Baselines (BL §4.2: GDN, GDN with short convolution, Mamba2), fla 0.6.0's own
layers in the same backbone, each at the same budget (:func:`mixer_sizes`):

- ``gdn`` / ``gdn-conv`` (:class:`GDNMixer`, ``fla.layers.GatedDeltaNet``):
  state ``H dk dv`` (:func:`gdn_state_size`).  With BL's heads and key width
  (``H = 4``, ``dk = 32``) the value width matches the budget:
  ``dv = 8192 / (4 · 32) = 64`` (fla's ``expand_v = 2``), exactly 8,192.
  ``gdn`` has no short convolution (fla then applies SiLU to q, k, v),
  ``gdn-conv`` has fla's default width-4 causal convolutions on q, k, v
  (their ``(2 H dk + H dv) · 4`` cache numbers are not counted in the state,
  as the issue counts it; :meth:`GDNMixer.config` records them).
- ``mamba2`` (:class:`Mamba2Mixer`, ``fla.layers.Mamba2``): state
  ``H P N`` (heads × head dim × ``d_state``; :func:`mamba2_state_size`).
  fla ties ``H P = expand · d_model`` (``expand = 2``), so with ``H = 4``:
  ``P = d_model / 2`` and ``N = 8192 // (2 d_model)``, exactly 8,192 whenever
  ``2 d_model`` divides 8,192 (``d_model = 128``: ``P = 64``, ``N = 32``).
  Its width-4 convolution cache is not counted either.

The baselines ignore the write mask (fla's layers have no per-token write
gate; their ``attention_mask`` drops padding tokens, reads included): every
token writes, as in the paper's baselines.  On a GPU the layers run fla's
kernels as they are; on a CPU :func:`.fla_cpu.torch_ops` swaps each Triton
piece for torch code (fla's own naive ops where it has them), so the CPU runs
and tests exercise the same layer code.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Optional, Union

import torch
from torch import nn
import torch.nn.functional as F

from assocmem import validate as V
from .models import MLP
from .names import MQAR_BACKBONES, MQAR_MODELS

STATE_BUDGET = 8192
MQAR_HEADS = 4           # heads of every MQAR mixer (BL's bl_head_sizes default; ours for the baselines)
GDN_KEY_DIM = 32         # GDN's key width per head: BL's D at H = 4
MAMBA2_EXPAND = 2        # fla's / Mamba2's default inner width expand · d_model
MAMBA2_CHUNK = 64        # chunk of Mamba2's scan: speed and memory only (fla's naive SSD holds B·T·chunk·H·P)
CONV_SIZE = 4            # short-convolution width (fla's default for GDN and Mamba2)


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


def gdn_state_size(n_heads: int, key_dim: int, value_dim: int) -> int:
    """Numbers of state of one GatedDeltaNet layer: ``H dk dv`` (one ``dk × dv`` matrix per head)."""
    return V.count("n_heads", n_heads, 1) * V.count("key_dim", key_dim, 1) * V.count("value_dim", value_dim, 1)


def mamba2_state_size(n_heads: int, head_dim: int, d_state: int) -> int:
    """Numbers of state of one Mamba2 layer: ``H P N`` (one ``P × N`` SSM state per head)."""
    return V.count("n_heads", n_heads, 1) * V.count("head_dim", head_dim, 1) * V.count("d_state", d_state, 1)


def gdn_head_sizes(budget: int = STATE_BUDGET, *, n_heads: int = MQAR_HEADS,
                   key_dim: int = GDN_KEY_DIM) -> tuple[int, int]:
    """``(key_dim, value_dim)``: the key width fixed, the largest value width with ``H dk dv <= budget``."""
    budget = V.count("budget", budget, 1)
    H, dk = V.count("n_heads", n_heads, 1), V.count("key_dim", key_dim, 1)
    dv = budget // (H * dk)
    if dv < 1:
        raise ValueError(f"no GDN value width fits a budget of {budget} with {H} heads of key width {dk}")
    return dk, dv


def mamba2_sizes(d_model: int, budget: int = STATE_BUDGET, *, n_heads: int = MQAR_HEADS,
                 expand: int = MAMBA2_EXPAND) -> tuple[int, int]:
    """``(head_dim, d_state)`` of a Mamba2 layer: fla ties ``H P = expand · d_model``; ``N`` is the largest with
    ``H P N <= budget``."""
    d = V.count("d_model", d_model, 1)
    budget = V.count("budget", budget, 1)
    H, e = V.count("n_heads", n_heads, 1), V.count("expand", expand, 1)
    inner = e * d
    if inner % H:
        raise ValueError(f"Mamba2: expand · d_model = {inner} must be a multiple of n_heads = {H}")
    N = budget // inner
    if N < 1:
        raise ValueError(f"Mamba2: no d_state fits a budget of {budget} at expand · d_model = {inner}")
    return inner // H, N


def mixer_sizes(mixer: str, d_model: int = 128, budget: int = STATE_BUDGET, *, n_heads: int = MQAR_HEADS) -> dict:
    """The head sizes and per-layer state of each MQAR mixer at a budget (what :class:`MQARModel` builds).

    ``bl``: ``H (D m + D²)``; ``gdn``/``gdn-conv``: ``H dk dv``; ``mamba2``: ``H P N``.
    """
    V.choice("mixer", mixer, MQAR_MODELS)
    if mixer == "bl":
        D, m = bl_head_sizes(budget, n_heads=n_heads)
        return {"n_heads": n_heads, "key_dim": D, "value_dim": m, "groups": 1,
                "state_size": bl_state_size(n_heads, D, m, 1)}
    if mixer in ("gdn", "gdn-conv"):
        dk, dv = gdn_head_sizes(budget, n_heads=n_heads)
        return {"n_heads": n_heads, "key_dim": dk, "value_dim": dv, "state_size": gdn_state_size(n_heads, dk, dv)}
    P, N = mamba2_sizes(d_model, budget, n_heads=n_heads)
    return {"n_heads": n_heads, "head_dim": P, "d_state": N, "expand": MAMBA2_EXPAND,
            "state_size": mamba2_state_size(n_heads, P, N)}


BL_OPS = ("fused", "chunk")


def _resolve_bl_op(op: str = "fused"):
    """``fused``: :func:`assocmem.gpu.fused_recurrent_bl`; ``chunk``: :func:`assocmem.gpu.chunk_bl`
    (chunks of 16; on a CPU its torch form).  The same filter, exactly, either way."""
    V.choice("op", op, BL_OPS)
    if op == "chunk":
        from assocmem.gpu import chunk_bl
        return chunk_bl
    from assocmem.gpu import fused_recurrent_bl
    return fused_recurrent_bl


class BLMixer(nn.Module):
    """Multi-head BL mixer with learned q/k/v projections and an optional write mask."""

    def __init__(self, d_model: int, *, n_heads: int = 4, key_dim: Optional[int] = None,
                 value_dim: Optional[int] = None, groups: int = 1, p0: float = 1.0,
                 budget: Optional[int] = STATE_BUDGET, op: str = "fused", decay: bool = False,
                 noise_init: float = 0.05):
        super().__init__()
        self.op = V.choice("op", op, BL_OPS)
        if isinstance(noise_init, bool) or not isinstance(noise_init, (int, float)) \
                or not (0 < noise_init <= 100 and math.isfinite(noise_init)):
            raise ValueError(f"noise_init must be a number in (0, 100] (got {noise_init!r})")
        self.noise_init = float(noise_init)
        if not isinstance(decay, bool):
            raise ValueError(f"decay must be a bool (got {decay!r})")
        self.decay = decay
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
        # ℓ² and r² start at noise_init (r² plus its floor 1e-4): softplus(bias) = noise_init
        nn.init.constant_(self.gate.bias, math.log(math.expm1(self.noise_init)))
        self.gate.bias._keep_init = True                      # init="zoology" leaves the designed start
        if decay:                                              # A_t = α_t I per head, α_t = sigmoid(·)
            self.decay_gate = nn.Linear(d_model, H)
            nn.init.normal_(self.decay_gate.weight, std=0.02)
            nn.init.constant_(self.decay_gate.bias, 4.0)      # α ≈ 0.982 at the start
            self.decay_gate.bias._keep_init = True
        self._op = None

    @property
    def state_size(self) -> int:
        return bl_state_size(self.H, self.D, self.m, self.G)

    def config(self) -> dict:
        return {"mixer": "bl", "n_heads": self.H, "key_dim": self.D, "value_dim": self.m, "groups": self.G,
                "state_size": self.state_size, "p0": self.p0, "noise_init": self.noise_init, "write_mask": "used",
                "dynamics": "alpha_t I per head, alpha_t = sigmoid(.)" if self.decay else "identity",
                "op": {"fused": "fused_recurrent_bl", "chunk": "chunk_bl"}[self.op]}

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
        if self.decay:
            kw["g"] = F.logsigmoid(self.decay_gate(h)).float()[..., None].expand(B, T, H, D).contiguous()
        if self._op is None:
            self._op = _resolve_bl_op(self.op)
        o, _ = self._op(q, k, v, l2, r2, None, self.p0, validate=False, **kw)
        return self.o_proj(o.reshape(B, T, H * m).to(h.dtype))


def require_fla(model: str) -> None:
    """Raise a ``--model`` error naming what to install when fla's layers cannot be imported."""
    from .fla_cpu import FLA_VERSION, fla_version

    if fla_version() is None:
        raise V.ParamError("model", f"--model {model}: the baseline needs flash-linear-attention's layers "
                                    f"(pip install flash-linear-attention=={FLA_VERSION}, which brings "
                                    f"transformers; or the package's gpu extra)")


class _FLAMixer(nn.Module):
    """An fla layer as an MQAR mixer: ``(h, write_mask) -> layer(h)[0]``; the write mask is ignored."""

    name = ""

    backend = "auto"      # the GPU core (GDN: fla_cpu.gdn_backend); the CPU always runs torch ops

    def forward(self, h: torch.Tensor, write_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        from .fla_cpu import torch_ops
        if h.device.type == "cpu":
            with torch_ops(self.layer):
                return self.layer(h)[0]
        backend = self._gpu_backend(h.device)
        if backend == "torch":
            with torch_ops(self.layer, recurrence="chunk"):
                return self.layer(h)[0]
        if backend == "hybrid":
            from .fla_hybrid import install
            install()                                # fla's Triton GDN, its refused backward kernel in torch
        if backend == "simple_gla":                  # Mamba2's scan as fla's Triton simple GLA
            from .fla_mamba2 import forward
            return forward(self.layer, h)
        return self.layer(h)[0]

    def _gpu_backend(self, device=None) -> str:
        return "triton"

    def _core(self) -> str:
        raise NotImplementedError

    def config(self) -> dict:
        from .fla_cpu import fla_version

        return {"mixer": self.name, **self.sizes(), "state_size": self.state_size,
                "conv_state_size": self.conv_state_size, "layer": f"fla.layers.{type(self.layer).__name__}",
                "fla_version": fla_version(), "core": self._core(),
                "write_mask": "ignored (every token writes)"}


class GDNMixer(_FLAMixer):
    """fla's ``GatedDeltaNet`` (output gate and norm, q/k L2-normalised in the kernel, β = sigmoid,
    decay ``-exp(A_log) softplus(a + dt_bias)``), with or without its short convolutions.

    Sizes: ``H = n_heads``, ``dk = key_dim``, ``dv = value_dim`` (default :func:`gdn_head_sizes`).
    """

    def __init__(self, d_model: int, *, conv: bool = False, n_heads: int = MQAR_HEADS, key_dim: int = GDN_KEY_DIM,
                 value_dim: Optional[int] = None, budget: Optional[int] = STATE_BUDGET, conv_size: int = CONV_SIZE,
                 backend: str = "auto"):
        super().__init__()
        import warnings
        from fla.layers import GatedDeltaNet

        from .fla_cpu import gdn_backend

        gdn_backend(backend)                      # a bad name, or triton where fla refuses it, fails here
        self.backend = backend

        d_model = V.count("d_model", d_model, 1)
        H, dk = V.count("n_heads", n_heads, 1), V.count("key_dim", key_dim, 1)
        if value_dim is None:
            dk, value_dim = gdn_head_sizes(STATE_BUDGET if budget is None else budget, n_heads=H, key_dim=dk)
        dv = V.count("value_dim", value_dim, 1)
        if budget is not None and gdn_state_size(H, dk, dv) > budget:
            raise ValueError(f"state {gdn_state_size(H, dk, dv)} is above the budget {budget}")
        self.name = "gdn-conv" if conv else "gdn"
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="ShortConvolution is crucial")    # GDN without conv, on purpose
            self.layer = GatedDeltaNet(hidden_size=d_model, head_dim=dk, num_heads=H, expand_v=dv / dk,
                                       use_gate=True, use_short_conv=bool(conv),
                                       conv_size=V.count("conv_size", conv_size, 1), mode="chunk")

    def sizes(self) -> dict:
        L = self.layer
        return {"n_heads": L.num_heads, "key_dim": L.head_k_dim, "value_dim": L.head_v_dim,
                "conv_size": L.conv_size if L.use_short_conv else None}

    @property
    def state_size(self) -> int:
        L = self.layer
        return gdn_state_size(L.num_v_heads, L.head_k_dim, L.head_v_dim)

    @property
    def conv_state_size(self) -> int:
        L = self.layer
        return sum(c.state_size for c in (L.q_conv1d, L.k_conv1d, L.v_conv1d)) if L.use_short_conv else 0

    def _gpu_backend(self, device=None) -> str:
        from .fla_cpu import gdn_backend
        return gdn_backend(self.backend, device)

    def _core(self) -> str:
        dev = next(self.parameters()).device
        if dev.type == "cuda":
            backend = self._gpu_backend(dev)
            if backend == "torch":
                return ("torch on GPU (fla naive_chunk_gated_delta_rule under autograd; fla's Triton backward "
                        "is refused on this GPU/Triton, fla #640)")
            if backend == "hybrid":
                from .fla_hybrid import _CHECKED
                chk = _CHECKED.get((dev.type, dev.index))
                note = (f"; self-check against fla's float64 reference: max relative error "
                        f"{chk['max_rel_err']:.2e} (tol {chk['tol']:g})" if chk else "")
                return ("fla Triton (chunk_gated_delta_rule) with its refused chunk_bwd_dqkwg in torch "
                        f"(assocmem.gpu.tasks.fla_hybrid){note}")
            return "fla Triton (chunk_gated_delta_rule)"
        return "torch on CPU (fla naive_recurrent_gated_delta_rule; assocmem.gpu.tasks.fla_cpu)"


class Mamba2Mixer(_FLAMixer):
    """fla's ``Mamba2`` (one group, gated RMSNorm after the gate, ``D`` skip per head, width-4 convolution).

    Sizes: ``H = n_heads``, head dim ``P = expand · d_model / H``, ``N = d_state``
    (default :func:`mamba2_sizes`).
    """

    name = "mamba2"

    def __init__(self, d_model: int, *, n_heads: int = MQAR_HEADS, d_state: Optional[int] = None,
                 expand: int = MAMBA2_EXPAND, budget: Optional[int] = STATE_BUDGET, conv_size: int = CONV_SIZE,
                 chunk_size: int = MAMBA2_CHUNK, core: str = "auto"):
        super().__init__()
        from fla.layers import Mamba2

        self.core = V.choice("core", core, ("auto", "layer"))

        d_model = V.count("d_model", d_model, 1)
        H, e = V.count("n_heads", n_heads, 1), V.count("expand", expand, 1)
        P, N = mamba2_sizes(d_model, STATE_BUDGET if budget is None else budget, n_heads=H, expand=e)
        if d_state is not None:
            N = V.count("d_state", d_state, 1)
        if budget is not None and mamba2_state_size(H, P, N) > budget:
            raise ValueError(f"state {mamba2_state_size(H, P, N)} is above the budget {budget}")
        self.layer = Mamba2(num_heads=H, head_dim=P, hidden_size=d_model, state_size=N, expand=e, n_groups=1,
                            conv_kernel=V.count("conv_size", conv_size, 1),
                            chunk_size=V.count("chunk_size", chunk_size, 1))

    def sizes(self) -> dict:
        L = self.layer
        return {"n_heads": L.num_heads, "head_dim": L.head_dim, "d_state": L.ssm_state_size, "expand": L.expand,
                "n_groups": L.n_groups, "conv_size": L.conv_kernel_size, "chunk_size": L.chunk_size}

    @property
    def state_size(self) -> int:
        L = self.layer
        return mamba2_state_size(L.num_heads, L.head_dim, L.ssm_state_size)

    @property
    def conv_state_size(self) -> int:
        return self.layer.conv_dim * self.layer.conv_kernel_size

    def _gpu_backend(self, device=None) -> str:
        """``"simple_gla"`` (:mod:`.fla_mamba2`: the SSD scan as fla's Triton simple GLA) on a GPU where
        ``mamba_ssm`` is missing and that core's self-check passes; else ``"triton"`` (the layer as fla
        runs it: mamba_ssm's kernels, or its naive ``torch_forward``), and always with ``core="layer"``."""
        from fla.layers import mamba2

        from .fla_mamba2 import core_ok
        if self.core == "auto" and not mamba2.is_fast_path_available and device is not None and core_ok(device):
            return "simple_gla"
        return "triton"

    def _core(self) -> str:
        from fla.layers import mamba2

        dev = next(self.parameters()).device
        if dev.type == "cuda":
            if self._gpu_backend(dev) == "simple_gla":
                from .fla_mamba2 import _CHECKED
                chk = _CHECKED.get((dev.type, dev.index))
                note = (f"; self-check against a float64 recursion: max relative error {chk['max_rel_err']:.2e} "
                        f"(tol {chk['tol']:g})" if chk else "")
                return ("fla Triton chunk_simple_gla as the SSD scan (assocmem.gpu.tasks.fla_mamba2; its refused "
                        f"chunk_bwd_dqkwg in torch, fla_hybrid){note}")
            return ("mamba_ssm fused kernels" if mamba2.is_fast_path_available else
                    "fla torch_forward (naive chunked SSD; mamba_ssm missing) with fla's Triton SiLU and norm")
        return "torch on CPU (fla torch_forward; assocmem.gpu.tasks.fla_cpu)"


def mixer_dynamics(net: nn.Module) -> Optional[list]:
    """The input-independent part of each fla mixer's decay (GDN and Mamba2 alike: a token's log-decay
    is ``A · softplus(w·x + dt_bias)`` per head, ``A = -exp(A_log)``), per layer: ``A``, ``dt_bias``,
    ``dt = softplus(dt_bias)`` and ``retention = exp(A · dt)``, what one token keeps of the state where
    the input term is 0 (its memory is about ``1 / (1 - retention)`` tokens).  ``None`` for a model
    without such mixers (BL)."""
    rows = []
    for i, mx in enumerate(getattr(net, "mixers", [])):
        layer = getattr(mx, "layer", None)
        if layer is None or not hasattr(layer, "A_log") or not hasattr(layer, "dt_bias"):
            continue
        A = -torch.exp(layer.A_log.detach().double().cpu())
        bias = layer.dt_bias.detach().double().cpu()
        dt = F.softplus(bias)
        rows.append({"layer": i, "A": A.tolist(), "dt_bias": bias.tolist(), "dt": dt.tolist(),
                     "retention": torch.exp(A * dt).tolist()})
    return rows or None


_MIXER_CLASSES = {"bl": BLMixer, "gdn": GDNMixer, "gdn-conv": functools.partial(GDNMixer, conv=True),
                  "mamba2": Mamba2Mixer}


MixerFactory = Callable[[int], nn.Module]


BACKBONES = MQAR_BACKBONES
ZOOLOGY_CONV_WIDTH = 3        # Zoology's MQAR configurations: BaseConv with kernel_size=3


MQAR_INITS = ("torch", "zoology")
ZOOLOGY_INIT_STD = 0.02                       # Zoology's initializer_range
ZOOLOGY_RESCALED = ("out_proj.weight", "fc2.weight", "output_linear.0.weight")


def zoology_init_(model: nn.Module, n_layers: int, std: float = ZOOLOGY_INIT_STD) -> list[str]:
    """Zoology's initialisation (``zoology/model.py::_init_weights``, applied there to the whole language
    model), re-drawn in place on ``model``: every ``nn.Linear`` weight and every ``nn.Embedding`` from
    N(0, std²), every Linear bias 0, then every parameter whose name contains one of
    :data:`ZOOLOGY_RESCALED` (Zoology's residual output projections, matched by name as Zoology matches
    them: Mamba2's ``out_proj``, an MLP's ``fc2``; not the ``o_proj`` of BL's and GDN's layers) from
    N(0, (std / sqrt(2 n_layers))²).  Parameters that are not Linear or Embedding weights (fla's
    ``A_log``, ``dt_bias``, ``D``, convolutions, norms) keep their own initialisation, as in Zoology; so do
    biases marked ``_keep_init`` (BL's noise and decay gates, whose start values are protocol options).
    Returns the names of the rescaled parameters."""
    n_layers = V.count("n_layers", n_layers, 1)
    std = float(V.positive("std", std))
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=std)
            if isinstance(mod, nn.Linear) and mod.bias is not None and not getattr(mod.bias, "_keep_init", False):
                nn.init.zeros_(mod.bias)
        rescaled = []
        for name, p in model.named_parameters():
            if any(key in name for key in ZOOLOGY_RESCALED):
                nn.init.normal_(p, std=std / math.sqrt(2 * n_layers))
                rescaled.append(name)
    return rescaled


class GatedShortConv(nn.Module):
    """Zoology's ``BaseConv`` block as we read it: ``y = conv(u) ⊙ (W u + b)``, ``conv`` a causal depthwise
    convolution of width ``width`` (each channel sees its token and the ``width - 1`` before it).  The
    residual is added by :class:`MQARModel`; the write mask does not apply (it is a local mix, not a memory)."""

    def __init__(self, d_model: int, width: int = ZOOLOGY_CONV_WIDTH):
        super().__init__()
        d = V.count("d_model", d_model, 1)
        self.width = V.count("width", width, 1)
        self.conv = nn.Conv1d(d, d, self.width, groups=d, padding=self.width - 1)
        self.proj = nn.Linear(d, d)

    def forward(self, h: torch.Tensor, write_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        T = h.shape[1]
        c = self.conv(h.transpose(1, 2))[..., :T].transpose(1, 2)      # causal: drop the right padding
        return c * self.proj(h)


class MQARModel(nn.Module):
    """Token embedding, ``n_layers`` pre-norm blocks (``backbone``: ``"zoology"``, (gated short conv,
    mixer); ``"mlp"``, (mixer, MLP); ``"mixers"``, the mixer alone: no convolution and no MLP), read-out
    over the value ids.

    ``mixer``: a name of :data:`~.names.MQAR_MODELS` (``"bl"``: :class:`BLMixer`,
    ``"gdn"``/``"gdn-conv"``: :class:`GDNMixer`, ``"mamba2"``: :class:`Mamba2Mixer`;
    ``mixer_kw`` passed on) or a factory ``d_model -> nn.Module`` whose modules
    take ``(h, write_mask)``.
    """

    def __init__(self, n_tokens: int, n_classes: int, *, d_model: int = 128, n_layers: int = 2,
                 mixer: Union[str, MixerFactory] = "bl", mlp_ratio: int = 4, backbone: str = "zoology",
                 init: str = "torch", **mixer_kw):
        super().__init__()
        self.backbone = V.choice("backbone", backbone, BACKBONES)
        self.init = V.choice("init", init, MQAR_INITS)
        n_tokens = V.count("n_tokens", n_tokens, 2)
        n_classes = V.count("n_classes", n_classes, 2)
        d_model = V.count("d_model", d_model, 1)
        n_layers = V.count("n_layers", n_layers, 1)
        if isinstance(mixer, str):
            V.choice("mixer", mixer, MQAR_MODELS)
            cls = _MIXER_CLASSES[mixer]
            factory = lambda d: cls(d, **mixer_kw)  # noqa: E731
        elif callable(mixer):
            if mixer_kw:
                raise ValueError("mixer_kw only applies to the named mixers")
            factory = mixer
        else:
            raise ValueError(f"mixer must be one of {', '.join(MQAR_MODELS)} or a callable (got {mixer!r})")
        self.embed = nn.Embedding(n_tokens, d_model)
        self.mixers = nn.ModuleList(factory(d_model) for _ in range(n_layers))
        self.norm1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        if backbone != "mixers":       # the norm before each layer's MLP or convolution
            self.norm2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layers))
        if backbone == "mlp":          # each mixer layer followed by an MLP
            self.mlps = nn.ModuleList(MLP(d_model, mlp_ratio) for _ in range(n_layers))
        elif backbone == "zoology":    # Zoology's hybrid: a gated short convolution before each mixer, no MLP
            self.convs = nn.ModuleList(GatedShortConv(d_model) for _ in range(n_layers))
        # "mixers": nothing between the mixer layers (only the residual stream and the norms)
        self.out_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)
        self.mixer_name = mixer if isinstance(mixer, str) else "custom"
        self.d_model, self.n_layers = d_model, n_layers
        self.rescaled = zoology_init_(self, n_layers) if init == "zoology" else []

    def state_sizes(self) -> list[int]:
        return [int(getattr(mx, "state_size", -1)) for mx in self.mixers]

    def config(self) -> dict:
        """What a result records of the model: width, layers, the mixer's sizes and its state per layer."""
        first = self.mixers[0]
        mix = first.config() if hasattr(first, "config") else {"mixer": self.mixer_name}
        return {"d_model": self.d_model, "n_layers": self.n_layers, "state_budget": STATE_BUDGET, **mix,
                "state_sizes": self.state_sizes(),
                "backbone": {"mlp": "pre-norm (mixer, MLP) x n_layers",
                             "zoology": f"pre-norm (gated short conv of width {ZOOLOGY_CONV_WIDTH}, mixer) x n_layers, "
                                        "no MLP",
                             "mixers": "pre-norm mixer x n_layers, no convolution, no MLP"}[self.backbone],
                "init": {"torch": "torch's defaults (Embedding N(0, 1), Linear uniform(+-1/sqrt(fan_in))), the "
                                  "mixers' own",
                         "zoology": f"Zoology's: Linear and Embedding weights N(0, {ZOOLOGY_INIT_STD}^2), Linear "
                                    f"biases 0, {', '.join(self.rescaled) or 'no parameter'} "
                                    f"N(0, ({ZOOLOGY_INIT_STD}/sqrt({2 * self.n_layers}))^2)"}[self.init]}

    def forward(self, tokens: torch.Tensor, write_mask: Optional[torch.Tensor] = None,
                at: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits ``[B, T, n_classes]``; with ``at`` (bool ``[B, T]``, the labelled positions) only those
        rows, ``[N, n_classes]``: the read-out over 8,192 values is then computed where the loss is (4 %
        of Block's training tokens) instead of everywhere — the same logits there."""
        h = self.embed(tokens)
        if self.backbone == "mlp":
            for mix, n1, n2, mlp in zip(self.mixers, self.norm1, self.norm2, self.mlps):
                h = h + mix(n1(h), write_mask)
                h = h + mlp(n2(h))
        elif self.backbone == "zoology":
            for mix, n1, n2, conv in zip(self.mixers, self.norm1, self.norm2, self.convs):
                h = h + conv(n2(h))
                h = h + mix(n1(h), write_mask)
        else:
            for mix, n1 in zip(self.mixers, self.norm1):
                h = h + mix(n1(h), write_mask)
        if at is not None:
            h = h[at]
        return self.head(self.out_norm(h))


def mqar_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy on the query positions (labels ``-100`` elsewhere) and the query accuracy."""
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
    mask = labels != -100
    acc = (logits.argmax(-1)[mask] == labels[mask]).float().mean() if bool(mask.any()) else logits.new_zeros(())
    return loss, acc
