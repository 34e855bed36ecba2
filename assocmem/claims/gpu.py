"""The ``triton`` layer: BL claims re-run through the GPU kernels.

The kernels (``assocmem.gpu``) run compiled on a CUDA device, otherwise through
Triton's interpreter on CPU (the same kernel source).  Their fp32 results are
compared with the float64 numpy simulation (``assocmem.numerics``), never with
a closed form.  Without torch/triton the layer is skipped with the reason.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from assocmem.registry import Evidence, check

# fp32 kernel vs float64 filter on the 112-step protocol: the observed gap is
# ~1e-7; 2e-5 keeps the 5-decimal figures meaningful.
FP32_ABS = 2e-5


def _torch_and_device(ev: Evidence, layer: str = "triton"):
    try:
        import torch
        import triton  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the machine
        ev.skip(layer, f"torch/triton not available: {exc}")
        return None, None
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    return torch, dev


@contextlib.contextmanager
def _kernel_mode(dev):
    """On CPU route the kernels through Triton's interpreter for the duration."""
    if dev.type == "cuda":
        yield "compiled (CUDA)"
        return
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield "Triton interpreter (CPU)"
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def _kernel_collision(torch, dev, pr, rhos):
    """The collision protocol through ``fused_recurrent_bl_trace``: batch over ρ.

    Returns ``p_ab [B, T]`` and ``gain [B, T]`` from the kernel's outputs.
    """
    from assocmem.gpu import fused_recurrent_bl_trace
    from assocmem.numerics.collision import collision_inputs

    keys, values, kA, kB = collision_inputs(np.asarray(rhos, float), pr.D, pr.m, pr.schedule())
    B, T = len(rhos), pr.T
    f32 = dict(dtype=torch.float32, device=dev)
    k = torch.tensor(keys, **f32)[:, :, None, :]                                     # [B, T, 1, D]
    q = torch.tensor(np.broadcast_to(kB[:, None, :], (B, T, pr.D)).copy(), **f32)[:, :, None, :]
    v = torch.tensor(np.broadcast_to(values, (B, T, pr.m)).copy(), **f32)[:, :, None, :]
    l2 = torch.full((B, T, 1), pr.l2, **f32)
    r2 = torch.full((B, T, 1), pr.r2, **f32)
    o, _, u, beta = fused_recurrent_bl_trace(q, k, v, l2, r2, p0=pr.p0)
    y = o[:, :, 0].double().cpu().numpy()                                           # [B, T, m]
    gain = (beta[..., 0] * (u[:, :, :, 0, :] * k).sum(-1))[:, :, 0].double().cpu().numpy()
    p_ab = 1.0 / (1.0 + np.exp(-(y[..., 1] - y[..., 0])))
    return p_ab, gain


@check("bl.collision_table", status="confirmed")
def collision_table_triton(ev: Evidence) -> None:
    torch, dev = _torch_and_device(ev)
    if torch is None:
        return
    from assocmem.numerics.collision import run_collision
    from assocmem.protocol import PAPER, CollisionProtocol

    settings = [(PAPER, (PAPER.rho, 0.5, 0.99)),
                (CollisionProtocol(rho=0.7, p0=0.8, r2=0.2, l2=0.01, n_b=9, n_a=13, rounds=1, D=9, m=4),
                 (0.7, -0.3))]
    worst = 0.0
    with _kernel_mode(dev) as how:
        for i, (pr, rhos) in enumerate(settings):
            p_ab, gain = _kernel_collision(torch, dev, pr, rhos)
            ref = run_collision(pr, variants=("dense",), rho=np.asarray(rhos))["dense"]
            dp = float(np.abs(p_ab - ref.p_ab).max())
            dg = float(np.abs(gain - ref.gain).max())
            worst = max(worst, dp, dg)
            tag = "paper setting" if pr == PAPER else f"setting {i}"
            ev.holds("triton", f"{tag}: p_AB trajectory, kernel vs float64 filter, rho={list(rhos)}",
                     dp <= FP32_ABS, computed=dp, expected=f"<= {FP32_ABS}")
            ev.holds("triton", f"{tag}: gain trajectory, kernel vs float64 filter",
                     dg <= FP32_ABS, computed=dg, expected=f"<= {FP32_ABS}")
            if pr == PAPER:
                b, a = pr.end_of_b - 1, pr.first_a - 1
                table = {"p_ab_end_of_b": (p_ab[0, b], ref.p_ab[0, b]),
                         "p_ab_final": (p_ab[0, -1], ref.p_ab[0, -1]),
                         "margin_final": (2 * p_ab[0, -1] - 1, ref.margin[0, -1]),
                         "gain_first_a": (gain[0, a], ref.gain[0, a]),
                         "gain_long_run": (gain[0, -1], ref.gain[0, -1])}
                for name, (kern, f64) in table.items():
                    ev.close("triton", f"{name}[dense]: fp32 kernel vs float64 filter", kern, f64,
                             abs_tol=FP32_ABS)
                ev.record(triton_paper_setting={n: float(kv[0]) for n, kv in table.items()})
    ev.record(triton_mode=how, triton_max_abs_gap=worst)
    ev.note(f"triton layer ran the dense BL kernel ({how}); worst gap to float64 {worst:.2e}")


def _per_token_saved_bytes(torch, dev, D, m, G, T1=3, T2=8):
    """Bytes the op keeps for backward per token and head, from autograd's saved tensors."""
    from assocmem.gpu import fused_recurrent_bl

    def saved(T):
        g = torch.Generator(device="cpu").manual_seed(T)
        q = torch.randn(1, T, 1, D, generator=g).to(dev)
        k = torch.nn.functional.normalize(torch.randn(1, T, 1, D, generator=g), dim=-1).to(dev)
        v = torch.randn(1, T, 1, m, generator=g).to(dev).requires_grad_(True)
        l2 = torch.full((1, T, 1), 0.1, device=dev)
        r2 = torch.full((1, T, 1, G), 0.5, device=dev)
        o, st = fused_recurrent_bl(q, k, v, l2, r2, output_final_state=True)
        tensors = o.grad_fn.saved_tensors
        nbytes = sum(t.numel() * t.element_size() for t in tensors if t is not None)
        state = sum(t.numel() * t.element_size() for t in st)
        return nbytes, state

    (n1, s1), (n2, s2) = saved(T1), saved(T2)
    return (n2 - n1) / (T2 - T1), s1


@check("bl.cost", status="confirmed")
def cost_triton(ev: Evidence) -> None:
    torch, dev = _torch_and_device(ev)
    if torch is None:
        return
    rows = []
    with _kernel_mode(dev):
        for D, m, G in ((16, 16, 1), (8, 12, 3), (32, 8, 2), (5, 6, 2)):
            per_tok, state = _per_token_saved_bytes(torch, dev, D, m, G)
            state_formula = 4 * (D * m + G * D * D)            # fp32 M (D×m) and G covariances (D×D)
            # kept per token: the fp32 inputs q, k, ℓ² (the op's own inputs) plus
            # u (G·D), β (G) and the innovation e (m): O(G D + m), no D×D
            tok_formula = 4 * (2 * D + 1) + 4 * (G * D + G + m)
            ev.close("triton", f"final-state bytes D={D} m={m} G={G} = 4(Dm + G D^2)", state, state_formula,
                     abs_tol=0)
            ev.close("triton", f"backward bytes per token D={D} m={m} G={G} = 4(2D+1) + 4(GD+G+m)",
                     per_tok, tok_formula, abs_tol=0)
            rows.append({"D": D, "m": m, "G": G, "state_bytes": state, "per_token_bytes": per_tok})
    ev.record(triton_state_bytes=rows)
    if not ev.summary:
        ev.summary = ("kernel state = 4(Dm + G D^2) bytes per head; per token it keeps O(GD + m) "
                      "bytes for backward (no D×D)")


@check("am.deltaformer_chunked", status="confirmed")
def deltaformer_solve_torch(ev: Evidence) -> None:
    """The torch DeltaFormer solve the GPU tasks train with (one unit-triangular
    solve, ``gpu.tasks.models.deltaformer_u``) against the numpy token-by-token
    ``u_t`` recursion, kernel by kernel, in float64."""
    try:
        import torch
    except Exception as exc:  # pragma: no cover - depends on the machine
        ev.skip("torch", f"torch not available: {exc}")
        return
    from assocmem.gpu.tasks.models import deltaformer_u
    from assocmem.numerics.am_deltaformer import Kernel, deltaformer_sequential

    rng = np.random.default_rng(31)
    T, d, dv = 41, 8, 3
    worst = {}
    for name in ("linear", "relu", "exp", "softmax"):
        K = rng.standard_normal((T, d)) / np.sqrt(d)
        V = rng.standard_normal((T, dv))
        beta = rng.uniform(0.1, 0.9, T)
        # the task model scales exp/softmax scores by 1/√d: the numpy kernel's τ = √d
        kern = Kernel(name, tau=float(np.sqrt(d))) if name in ("exp", "softmax") else Kernel(name)
        U_np, _ = deltaformer_sequential(K, V, beta=beta, kappa1=kern)
        U_t = deltaformer_u(torch.tensor(V)[None, None], torch.tensor(K)[None, None],
                            torch.tensor(beta)[None, None], name)[0, 0].numpy()
        worst[name] = float(np.abs(U_t - U_np).max() / max(1.0, np.abs(U_np).max()))
        ev.close("torch", f"torch triangular solve (GPU task model) = numpy u_t recursion, κ1 = {name}",
                 worst[name], 0.0, abs_tol=1e-12)
    ev.record(torch_vs_numpy_max_rel=worst)
