"""Where does fla's gated delta rule lose accuracy on this GPU?  (issue 16: the hybrid GDN core)

Runs ``chunk_gated_delta_rule`` (fp32 inputs) forward and backward three ways and compares the
output and the gradients of ``q, k, v, g, beta`` with a float64 token-by-token recursion computed
here (``fla_hybrid.gated_delta_rule_f64``; fla's naive op computes in fp32):

* ``hybrid``: fla's kernels, the refused ``chunk_bwd_dqkwg`` by :mod:`assocmem.gpu.tasks.fla_hybrid`;
* ``fla_forced``: fla's own refused kernel, its guard switched off for the measurement only;
* ``torch_chunk``: fla's chunked torch reference (``naive_chunk_gated_delta_rule``) under autograd;

each with ``state_v_first`` False and True (fla's GatedDeltaNet layer uses True), and with TF32
matmuls allowed or not for the torch reference.  Errors are max-abs relative to the reference's max.

    python3 scripts/gdn_hybrid_diag.py --out diag.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--T", type=int, default=150)
    ap.add_argument("--device", default="cuda", help="cuda (a CPU only checks the reference: the fla modes fail there)")
    a = ap.parse_args(argv)
    import torch
    import fla.ops.common.chunk_o as co
    import fla.ops.gated_delta_rule.chunk as mod
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.gated_delta_rule.naive import naive_chunk_gated_delta_rule

    from assocmem.gpu.tasks import fla_hybrid
    from assocmem.provenance import provenance

    dev = torch.device(a.device)
    gen = torch.Generator().manual_seed(0)
    B, T, H, K, V = 2, a.T, 2, 32, 32
    q, k = (torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, V, generator=gen)
    g = -torch.rand(B, T, H, generator=gen) * 0.2
    beta = torch.rand(B, T, H, generator=gen)
    do = torch.randn(B, T, H, V, generator=gen)
    ins = [x.to(dev) for x in (q, k, v, g, beta)]
    scale = K ** -0.5
    names = ("o", "dq", "dk", "dv", "dg", "dbeta")

    def run(fn, dtype):
        xs = [x.to(dtype).requires_grad_(True) for x in ins]
        o = fn(*xs)
        grads = torch.autograd.grad((o * do.to(dev, dtype)).sum(), xs)
        return [o.detach().double(), *(x.double() for x in grads)]

    ref = run(lambda q, k, v, g, b: fla_hybrid.gated_delta_rule_f64(q, k, v, g, b, scale), torch.float64)

    def errs(got):
        return {n: float((x - r).abs().max() / r.abs().max()) for n, x, r in zip(names, got, ref)}

    rows = []
    fla_hybrid.install()
    orig = fla_hybrid._ORIGINAL["chunk_bwd_dqkwg"]
    for svf in (False, True):
        for mode in ("hybrid", "fla_forced"):
            try:
                if mode == "fla_forced":
                    mod.chunk_bwd_dqkwg, saved = orig, co.TRITON_ABOVE_3_7_1
                    co.TRITON_ABOVE_3_7_1 = True
                got = run(lambda q, k, v, g, b: chunk_gated_delta_rule(q, k, v, g, b, scale=scale,
                                                                        state_v_first=svf)[0], torch.float32)
                rows.append({"mode": mode, "state_v_first": svf, "errors": errs(got)})
            except Exception as e:                       # noqa: BLE001  (a diagnostic: record and go on)
                rows.append({"mode": mode, "state_v_first": svf, "error": f"{type(e).__name__}: {e}"[:300]})
            finally:
                if mode == "fla_forced":
                    co.TRITON_ABOVE_3_7_1 = saved
                    mod.chunk_bwd_dqkwg = fla_hybrid._hybrid
            print(rows[-1], flush=True)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        got = run(lambda q, k, v, g, b: naive_chunk_gated_delta_rule(q, k, v, g, b, scale=scale)[0], torch.float32)
        rows.append({"mode": "torch_chunk", "tf32": tf32, "errors": errs(got)})
        print(rows[-1], flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {"benchmark": "fla gated delta rule: fp32 errors against a float64 recursion (scripts/gdn_hybrid_diag.py)",
           "shape": {"B": B, "T": T, "H": H, "K": K, "V": V}, "rows": rows,
           "self_check": fla_hybrid.self_check(dev) if dev.type == "cuda" else None, "provenance": provenance({"command": " ".join(sys.argv)})}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
