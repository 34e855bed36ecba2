"""Mamba2's scan as fla's simple gated linear attention: a Triton core for fla's ``Mamba2`` layer.

Without ``mamba_ssm`` (no wheel for the device machine), fla 0.6's ``Mamba2`` layer runs its
``torch_forward``, a naive chunked SSD that materialises ``[B, chunks, L, L, H, N]`` products: about
4 steps/s on MQAR Base on the H200.  The SSD recurrence with one group is exactly fla's simple GLA
(a scalar log-decay per head and token):

``h_t = exp(A Δ_t) h_{t-1} + B_t (Δ_t x_t)ᵀ``, ``y_t = C_tᵀ h_t + D x_t``  (``h_t`` is ``N × P``)

is ``chunk_simple_gla(q = C, k = B, v = Δ ⊙ x, g = A Δ, scale = 1)`` plus the skip ``D x``.
:func:`forward` is ``Mamba2.torch_forward``'s training path (no cache, no attention mask) with only
that scan replaced; everything around it (projections, convolution, gated norm) is the layer's own.

On the H200 fla refuses the gated ``chunk_bwd_dqkwg`` kernel that simple GLA's backward calls
(Hopper with Triton 3.6, fla #640), so the core runs with :mod:`.fla_hybrid`'s torch replacement
of that one kernel (:func:`.fla_hybrid.install` routes simple GLA's call too).  ``Mamba2Mixer`` takes
this core on a GPU only after :func:`self_check` has passed there: the scan's output and the
gradients of ``q, k, v, g`` against a float64 recursion.  ``tests/gpu/test_fla_mamba2.py`` checks
:func:`forward` against the layer's own ``torch_forward`` on a CPU, the scan given as a torch
recursion.
"""
from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

from .fla_hybrid import SELF_CHECK_TOL, compare_with_f64     # GDN's check: the same comparison and tolerance

_CHECKED = {}
_LOCK = threading.Lock()


def simple_gla_f64(q, k, v, g, scale: float = 1.0):
    """``h_t = e^{g_t} h_{t-1} + k_t v_tᵀ``, ``o_t = scale · h_tᵀ q_t`` token by token in float64;
    ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, ``g [B, T, H]``; differentiable."""
    q, k, v, g = (x.double() for x in (q, k, v, g))
    B, T, H, K = k.shape
    S = torch.zeros(B, H, K, v.shape[-1], dtype=torch.float64, device=q.device)
    out = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None] + k[:, t][..., None] * v[:, t][..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S))
    return torch.stack(out, 1)


def fla_scan(q, k, v, g):
    """fla's Triton ``chunk_simple_gla`` (scale 1), with the hybrid's replacement installed where fla
    refuses its gated backward kernel."""
    from fla.ops.simple_gla import chunk_simple_gla

    from .fla_hybrid import install
    install()
    return chunk_simple_gla(q, k, v, g=g, scale=1.0)[0]


def forward(layer, hidden_states: torch.Tensor, scan=fla_scan) -> torch.Tensor:
    """``layer`` (fla 0.6's ``Mamba2``, one group) on ``hidden_states [B, T, d]`` as its
    ``torch_forward`` computes it without cache or mask, the SSD scan given by ``scan(q, k, v, g)``
    (default :func:`fla_scan`).  Returns the layer's output ``[B, T, d]``."""
    if layer.n_groups != 1:
        raise NotImplementedError("the simple-GLA Mamba2 core is written for one group")
    b, T, _ = hidden_states.shape
    dtype = hidden_states.dtype
    proj = layer.in_proj(hidden_states)
    d_mlp = (proj.shape[-1] - 2 * layer.intermediate_size - 2 * layer.n_groups * layer.ssm_state_size
             - layer.num_heads) // 2
    _, _, gate, xBC, dt = proj.split([d_mlp, d_mlp, layer.intermediate_size, layer.conv_dim, layer.num_heads], dim=-1)
    xBC = layer.act(layer.conv1d(xBC.transpose(1, 2))[..., :T].transpose(1, 2))
    x, Bm, Cm = torch.split(xBC, [layer.intermediate_size, layer.ssm_state_size, layer.ssm_state_size], dim=-1)
    f = torch.promote_types(torch.float32, x.dtype)                       # the scan in fp32 at least
    A = -torch.exp(layer.A_log.to(f))                                     # [H]
    dt = F.softplus(dt + layer.dt_bias)
    dt = torch.clamp(dt, layer.dt_limit[0], layer.dt_limit[1]).to(f)      # [b, T, H]
    H, P, N = layer.num_heads, layer.head_dim, layer.ssm_state_size
    x = x.reshape(b, T, H, P).to(f)
    q = Cm.to(f)[:, :, None, :].expand(b, T, H, N).contiguous()
    k = Bm.to(f)[:, :, None, :].expand(b, T, H, N).contiguous()
    v = (x * dt[..., None]).contiguous()
    g = (A * dt).contiguous()
    y = scan(q, k, v, g) + layer._get_D(expand_to_head_dim=True) * x
    y = y.reshape(b, T, -1)
    out = layer.norm(y, gate) if layer.rmsnorm else y * layer.act(gate)
    return layer.out_proj(out.to(dtype))


# the regimes the check covers: (name, heads, K, V, largest per-token decay -g).  "mild" is the check as
# first written; "mamba2" is the MQAR mixer's own scan (H = 4, N = 32, P = 64, as in the committed runs)
# with decays to -2 (fla's Mamba2 starts at A = -1..-H and dt in [0.001, 0.1]; training moves both), so
# that a core right only on small, slowly decaying inputs does not pass
SELF_CHECK_REGIMES = (("mild", 2, 16, 32, 0.2), ("mamba2", 4, 32, 64, 2.0))


def self_check(device, T: int = 150, tol: float = SELF_CHECK_TOL) -> dict:
    """One check per process and GPU before ``Mamba2Mixer`` takes this core there: :func:`fla_scan`'s
    output and the gradients of ``q, k, v, g`` against :func:`simple_gla_f64` (fp32 inputs; ``T = 150``:
    two full chunks of 64 and a partial one), in each of :data:`SELF_CHECK_REGIMES`.  Returns
    ``{"passed", "max_rel_err", "tol", "T", "errors", "regimes"}``: ``errors`` the worst over the regimes
    per tensor, ``regimes`` each regime's own."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    key = (dev.type, dev.index)
    with _LOCK:
        if key in _CHECKED:
            return _CHECKED[key]
    gen = torch.Generator().manual_seed(0)
    scan = fla_scan if dev.type == "cuda" else _cpu_scan
    names = ("o", "dq", "dk", "dv", "dg")
    regimes = {}
    for name, H, K, Vd, gmax in SELF_CHECK_REGIMES:
        B = 2
        q, k = (torch.randn(B, T, H, K, generator=gen) * 0.5 for _ in range(2))
        v = torch.randn(B, T, H, Vd, generator=gen)
        g = -torch.rand(B, T, H, generator=gen) * gmax
        do = torch.randn(B, T, H, Vd, generator=gen)
        regimes[name] = compare_with_f64(dev, scan, simple_gla_f64, (q, k, v, g), do, names, tol)
    errors = {n: max(r["errors"][n] for r in regimes.values()) for n in names}
    out = {"passed": all(r["passed"] for r in regimes.values()), "max_rel_err": max(errors.values()), "tol": tol,
           "errors": errors, "T": T, "regimes": {n: r["errors"] for n, r in regimes.items()}}
    with _LOCK:
        _CHECKED[key] = out
    return out


def _cpu_scan(q, k, v, g):
    """fla's chunked torch reference of simple GLA (a CPU stand-in for :func:`fla_scan` in tests)."""
    from fla.ops.simple_gla.naive import naive_recurrent_simple_gla

    return naive_recurrent_simple_gla(q, k, v, g, scale=1.0, output_final_state=False)[0]


def core_ok(device) -> bool:
    """Whether ``Mamba2Mixer`` may take this core on ``device``: a CUDA device where fla's Triton
    simple GLA imports and :func:`self_check` passes."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return False
    try:
        import fla.ops.simple_gla  # noqa: F401
    except ImportError:
        return False
    return self_check(dev)["passed"]
