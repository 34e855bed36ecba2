"""``bl.chunked``, the ``triton`` layer: the chunked kernels equal the token-by-token recurrence (BL App. D, p.16).

``assocmem.gpu.chunk_bl`` on its kernel path (compiled on CUDA, else Triton's
interpreter on CPU), fp32 arithmetic, against the float64 recursion
``numerics.bl_filter`` (the model simulated step by step; the kernel never
calls it).  The kernel factorises each chunk's observation covariance row by
row (the innovations recursion), a different algorithm from both the
recursion and the numpy chunkwise form (``numerics.bl_chunked``, Cholesky;
its ``numpy`` check lives in :mod:`assocmem.claims.bl_theory`).  Settings:
chunk sizes 16/32/64 with lengths that are not multiples of them, strong,
signed and zero diagonal decays, grouped noise, initial states.  Tolerance
1e-5 relative RMS (fp32; measured ~2e-7).  The H200 run of the same kernels
(``benchmarks/h200_chunk.json``) is recorded as measured there, not recomputed.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from assocmem.registry import Evidence, check

FP32_REL = 1e-5


def _case(rng, lead, T, D, m, G, decay, init):
    K = rng.standard_normal(lead + (T, D))
    K /= np.linalg.norm(K, axis=-1, keepdims=True)
    Q = rng.standard_normal(lead + (T, D))
    Vv = rng.standard_normal(lead + (T, m))
    l2 = rng.uniform(0.0, 0.1, lead + (T,))
    r2 = rng.uniform(0.05, 0.5, lead + (T, G)) if G > 1 else rng.uniform(0.05, 0.5, lead + (T,))
    A = None
    if decay != "none":
        A = rng.uniform(0.5, 1.0, lead + (T, D))
        if decay == "strong":
            A = A * 0.4                        # γ over a 64-token chunk ~ 1e-30: ratios as products
        elif decay == "signed_zeros":
            A = A * np.sign(rng.standard_normal(A.shape))
            A[..., T // 2, :] = 0.0
    kw = {}
    if init:
        L = rng.standard_normal(lead + (G, D, D)) * 0.3
        P0 = L @ np.swapaxes(L, -1, -2) + 0.1 * np.eye(D)
        kw = {"p0": P0 if G > 1 else P0[..., 0, :, :], "M0": rng.standard_normal(lead + (D, m))}
    return dict(keys=K, values=Vv, queries=Q, l2=l2, r2=r2, alpha=A, groups=G, **kw)


SETTINGS = [  # (T, D, m, G, chunk, decay, init)
    (37, 6, 4, 1, 16, "strong", True),
    (41, 8, 8, 2, 32, "signed_zeros", False),
    (70, 4, 4, 1, 64, "weak", True),
]


@check("bl.chunked", status="confirmed")
def chunked_triton(ev: Evidence) -> None:
    from assocmem.claims.gpu import _kernel_mode, _torch_and_device

    torch, dev = _torch_and_device(ev)
    if torch is None:
        return
    from assocmem.gpu import chunk_bl
    from assocmem.numerics.bl_filter import bl_filter

    rng = np.random.default_rng(7)
    worst = 0.0
    with _kernel_mode(dev) as how:
        for T, D, m, G, C, decay, init in SETTINGS:
            x = _case(rng, (1,), T, D, m, G, decay, init)
            ref = bl_filter(x["keys"], x["values"], x["queries"], l2=x["l2"], r2=x["r2"], alpha=x["alpha"],
                            groups=G, **{k: x[k] for k in ("p0", "M0") if k in x})

            def t(a):       # [1, T, ...] -> [1, T, 1, ...] fp32 tensors in fla layout
                return torch.tensor(np.asarray(a)[:, :, None], dtype=torch.float32, device=dev)
            st = None
            if init:
                P0 = x["p0"]
                st = (torch.tensor(x["M0"][:, None], dtype=torch.float32, device=dev),
                      torch.tensor(P0[:, None], dtype=torch.float32, device=dev))
            o, (M, P) = chunk_bl(t(x["queries"]), t(x["keys"]), t(x["values"]), t(x["l2"]), t(x["r2"]),
                                 None if x["alpha"] is None else t(x["alpha"]), 1.0, st, True, chunk_size=C)
            y = o[:, :, 0].double().cpu().numpy()
            Mk = M[:, 0].double().cpu().numpy()
            Pk = P[:, 0].double().cpu().numpy()

            def rms(a, b):
                return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
            e = max(rms(y, ref.y), rms(Mk, ref.M), rms(Pk, ref.P))
            worst = max(worst, e)
            ev.holds("triton", f"T={T} D={D} m={m} G={G} C={C} decay={decay}: fp32 chunked kernel vs float64 "
                     f"recursion (relative RMS of read-outs, M, P; {how})", e <= FP32_REL, computed=e,
                     expected=f"<= {FP32_REL}")
    ev.record(triton_mode=how, triton_worst_rel_rms=worst)
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "h200_chunk.json"
    if path.exists():
        d = json.loads(path.read_text())
        dev_err = {n: max(v["vs_f64_o"] for k, v in e["check"].items() if k.startswith("C"))
                   for n, e in d.get("shapes", {}).items() if isinstance(e.get("check"), dict)}
        ev.record(h200_measured_chunk_vs_f64_o=dev_err)
        ev.note("H200 run (benchmarks/h200_chunk.json, measured there, not recomputed): chunked kernel vs "
                f"float64 naive_bl relative error {dev_err}")
    mine = f"fp32 Triton chunked kernel vs float64 recursion worst {worst:.1e}"
    ev.summary = f"{ev.summary}; {mine}" if ev.summary else f"chunked = recurrence: {mine}"
