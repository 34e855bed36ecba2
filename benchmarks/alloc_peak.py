#!/usr/bin/env python3
"""The peak memory of ``chunk_bl``'s forward+backward at the benchmark shapes, on a CPU, without a GPU.

    python3 benchmarks/alloc_peak.py --shapes S1,S2,S3 --bwd-segments none,8,16 --out benchmarks/cpu_alloc_peak.json

Every tensor the op allocates is created by a torch call from Python (the Triton kernels only write
into buffers allocated beforehand), so the allocation pattern does not depend on what the kernels
compute. This script replaces the kernels with launches that do nothing and counts, under a
``TorchDispatchMode``, the bytes of every storage that an op creates and holds, freeing them as
their last reference goes. The peak is taken above what exists before the call, as
``assocmem gpu bench`` measures ``fwdbwd_peak_MB`` (MiB above ``memory_allocated()`` before it).

Against the H200's measured peaks (``h200_bwd_segments.json`` and the S2 entry of README's table) the
count is within 1 MiB: S1 1,933 / 644 / 702 MiB at one segment / ``L = 8`` / ``L = 16`` against 1,932 /
643 / 701 measured, and S2's 1,492 before the change of 6 December against 1,491; after it, 1,108 against
the 1,107 an H100 measured (``h100_S2_fwdbwd_peak.json``). ``--start-every 1,auto`` counts the segmented
backward at each spacing of its kept start states (``ChunkConfig.bwd_start_every``). It is not a
measurement of the CUDA caching allocator, whose rounding and fragmentation it does not model;
the benchmark on the device remains the number to report.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import weakref
from pathlib import Path

SHAPES = {"S1": (8, 2048, 16, 64, 64), "S2": (32, 2048, 4, 128, 128), "S3": (4, 8192, 16, 64, 64),
          "S4": (256, 128, 4, 16, 16)}


def peak_counter(snapshot: bool = False):
    """A ``TorchDispatchMode`` that counts the bytes of live storages created inside it: ``current``,
    ``peak`` (bytes) and, with ``snapshot``, ``at_peak`` (``(bytes, shape)`` of what was live then)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class PeakCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live, self.current, self.peak, self.at_peak = {}, 0, 0, None

        def _drop(self, key):
            self.current -= self.live.pop(key, (0, ()))[0]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                s = t.untyped_storage()
                key = s.data_ptr()
                if s.nbytes() == 0 or key in self.live:
                    continue
                self.live[key] = (s.nbytes(), tuple(t.shape))
                self.current += s.nbytes()
                if self.current > self.peak:
                    self.peak = self.current
                    if snapshot:
                        self.at_peak = sorted(self.live.values(), key=lambda e: -e[0])
                weakref.finalize(s, self._drop, key)      # freed with the storage's last reference
            return out

    return PeakCounter()


class _NoLaunch:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


class _NoKernels:
    def __getattr__(self, name):
        return _NoLaunch()


def stub_kernels():
    """Replace every kernel module the chunked and token-by-token ops launch from with launches that
    do nothing; returns a function that puts them back."""
    from assocmem.gpu import chunk, fused_recurrent

    saved = [(fused_recurrent, "kernels", fused_recurrent.kernels), (chunk, "chunk_kernels", chunk.chunk_kernels),
             (chunk, "chunk_bwd_kernels", chunk.chunk_bwd_kernels), (chunk, "_decays_safe", chunk._decays_safe)]
    fused_recurrent.kernels = chunk.chunk_kernels = chunk.chunk_bwd_kernels = lambda *a, **k: _NoKernels()
    chunk._decays_safe = lambda *a, **k: True      # the stubs compute nothing; real decays are in range
    return lambda: [setattr(mod, name, f) for mod, name, f in saved]


def peak_fwdbwd(shape, *, op: str = "chunk", bwd_segment_chunks=None, bwd_start_every=None,
                backward: str = "auto", alpha: bool = True, snapshot: bool = False) -> dict:
    """Peak bytes of one forward+backward of ``chunk_bl`` (``op="chunk"``) or ``fused_recurrent_bl``
    (``"fused"``) on ``shape = (B, T, H, D, m)``, the inputs allocated before it, fp32 and with decays
    like the benchmark's; kernels stubbed (:func:`stub_kernels`)."""
    import torch
    from assocmem.gpu import chunk, fused_recurrent
    from assocmem.gpu.config import ChunkConfig

    if op not in ("chunk", "fused"):
        raise ValueError(f"op must be 'chunk' or 'fused', not {op!r}")
    B, T, H, D, m = shape
    x = dict(q=torch.zeros(B, T, H, D), k=torch.zeros(B, T, H, D), v=torch.zeros(B, T, H, m),
             l2=torch.zeros(B, T, H), r2=torch.ones(B, T, H))
    if alpha:
        x["alpha"] = torch.ones(B, T, H, D)
    leaves = {n: t.requires_grad_(True) for n, t in x.items()}
    do = torch.zeros(B, T, H, m)
    restore = stub_kernels()
    env = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"           # the kernels' dispatch for CPU tensors (stubbed above)
    try:
        mode = peak_counter(snapshot)
        with mode:
            if op == "chunk":
                cfg = ChunkConfig(bwd_segment_chunks=bwd_segment_chunks, bwd_start_every=bwd_start_every)
                o, _ = chunk.chunk_bl(**leaves, validate=False, backward=backward, config=cfg)
            else:
                o, _ = fused_recurrent.fused_recurrent_bl(**leaves, validate=False)
            o.backward(do)
            del o
    finally:
        restore()
        if env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = env
    out = {"peak_MiB": mode.peak / 2**20, "unit_MiB": B * T * H * D * 4 / 2**20}
    if snapshot:
        out["at_peak"] = [{"MiB": n / 2**20, "shape": list(s)} for n, s in mode.at_peak]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="S1,S2,S3")
    ap.add_argument("--bwd-segments", default="none", help="values of ChunkConfig.bwd_segment_chunks, 'none' for one")
    ap.add_argument("--start-every", default="auto",
                    help="values of ChunkConfig.bwd_start_every, 'auto' for its default (the integer nearest √S)")
    ap.add_argument("--out", default=None, help="JSON to write (not written over if it exists; pass a new name)")
    a = ap.parse_args(argv)
    shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    bad = [s for s in shapes if s not in SHAPES]
    if bad:
        print(f"alloc_peak: --shapes: unknown {', '.join(bad)} (known: {', '.join(SHAPES)})", file=sys.stderr)
        return 2
    try:
        segs = [None if s.strip() == "none" else int(s) for s in a.bwd_segments.split(",")]
    except ValueError:
        print(f"alloc_peak: --bwd-segments: {a.bwd_segments!r} is not a list of 'none' or integers", file=sys.stderr)
        return 2
    try:
        Ks = [None if s.strip() == "auto" else int(s) for s in a.start_every.split(",")]
        if any(K is not None and K < 1 for K in Ks):
            raise ValueError
    except ValueError:
        print(f"alloc_peak: --start-every: {a.start_every!r} is not a list of 'auto' or integers >= 1",
              file=sys.stderr)
        return 2
    if a.out and Path(a.out).exists():
        print(f"alloc_peak: --out: {a.out} exists; pass a new name", file=sys.stderr)
        return 2
    rows = []
    for name in shapes:
        for L in segs:
            for K in (Ks if L is not None else [None]):     # one segment keeps no start state
                r = peak_fwdbwd(SHAPES[name], bwd_segment_chunks=L, bwd_start_every=K)
                rows.append({"shape": name, "bwd_segment_chunks": L, "bwd_start_every": K, **r})
                print(f"{name} L={L} K={'auto' if K is None else K}: {r['peak_MiB']:.0f} MiB "
                      f"({r['peak_MiB'] / r['unit_MiB']:.2f} [B, T, H, D] buffers)", flush=True)
    if a.out:
        from assocmem.provenance import provenance
        Path(a.out).write_text(json.dumps({"provenance": provenance({}), "rows": rows,
                                           "notes": [__doc__.split("\n\n")[1].replace("\n", " ")]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
