"""The chunked forward of whichever ``assocmem`` is importable, timed the same way at every commit.

To find where S2's forward slowed down (9.64 ms on 30 November at e1436b3, 11.9-13.1 in every run
since 1 December; docs/gpu.md), an older commit is installed apart (``pip install --no-deps --target
DIR``, no git needed on the device) and this script runs once with ``PYTHONPATH=DIR`` and once
without, alternating, on one GPU.  It uses only what every commit since 30 November has:
``assocmem.gpu.chunk_bl(q, k, v, l2, r2, alpha, chunk_size=, validate=False, config=)`` with the
same inputs (``gpu.bench``'s distributions, drawn here).  ``config`` is passed with the overrides
given (a ``ChunkConfig`` where the commit has one, else a dict), or left out, so that each commit runs
its own defaults.

It writes the forward's median time (CUDA events, after warm-up), each kernel's GPU time in one
profiled forward (``torch.profiler``), the first output's checksum (so that two commits can be seen
to compute the same thing), the driver and clocks (nvidia-smi, :func:`gpu_state`) and which ``assocmem``
ran, as one JSON line (``--out`` appends to a
file).  On a CPU it refuses: the interpreter's times mean nothing here.

    PYTHONPATH=/tmp/old python3 benchmarks/chunk_ab.py --tag e1436b3 --out ab.jsonl
    python3 benchmarks/chunk_ab.py --tag head --out ab.jsonl

``--dump DIR`` also writes what Triton compiled for each kernel that ran (:func:`dump_kernels`: its
specialisation key, registers, spills, shared memory, and its PTX and TTGIR), so that two commits'
kernels can be compared as launched, not as compiled offline with an assumed signature.
"""
from __future__ import annotations

import argparse
import json
import sys

SHAPES = {"S1": (8, 2048, 16, 64, 64), "S2": (32, 2048, 4, 128, 128), "S3": (4, 8192, 16, 64, 64)}


def parse_config(text: str | None) -> dict:
    """``"k=v,k=v"`` as a dict, the values read as int, float, ``true``/``false`` or left as text."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        if "=" not in item:
            raise ValueError(f"config: {item!r} is not key=value")
        k, v = item.split("=", 1)
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except ValueError:
                pass
        else:
            v = {"true": True, "false": False}.get(v, v)
        out[k.strip()] = v
    return out


def inputs(torch, shape, device, seed: int = 2) -> dict:
    """``gpu.bench``'s distributions: unit keys and queries, decays 0.88-0.998, l2 <= 0.05, r2 0.05-0.55."""
    import torch.nn.functional as F

    B, T, H, D, m = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = dict(q=F.normalize(torch.randn(B, T, H, D, generator=g), dim=-1),
             k=F.normalize(torch.randn(B, T, H, D, generator=g), dim=-1), v=torch.randn(B, T, H, m, generator=g),
             l2=torch.rand(B, T, H, generator=g) * 0.05, r2=torch.rand(B, T, H, generator=g) * 0.5 + 0.05,
             alpha=torch.sigmoid(torch.rand(B, T, H, D, generator=g) * 4 + 2))
    return {n: t.to(device) for n, t in x.items()}


def emit(row: dict, out: str | None) -> None:
    """One run's JSON line on stdout, and appended to ``out`` when given (runs at several commits, one file)."""
    line = json.dumps(row)
    print(line)
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def gpu_state() -> dict:
    """The machine beside the times: driver, clocks now and at most, power limit, temperature (nvidia-smi), so
    that two machines' runs can be told apart; empty where nvidia-smi is missing."""
    import subprocess

    fields = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader", "-i", "0"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if r.returncode != 0:
        return {}
    return dict(zip(fields.split(","), (v.strip() for v in r.stdout.strip().split(","))))


def _compiled(fn):
    """``(key, compiled kernel)`` for every specialisation a ``JITFunction`` holds (Triton 3.x keeps them per
    device in ``device_caches[device][0]``)."""
    for entry in getattr(fn, "device_caches", {}).values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        if isinstance(cache, dict):
            yield from cache.items()


def dump_kernels(directory, fns) -> list[dict]:
    """Write each compiled specialisation of the named Triton functions ``fns`` (``{name: JITFunction}``) to
    ``directory``: ``NAME.I.ptx`` and ``NAME.I.ttgir`` where Triton kept them, and one ``kernels.json`` with
    each one's key, registers, spills, shared memory, warps and stages.  Returns the JSON's rows."""
    import os

    os.makedirs(directory, exist_ok=True)
    rows = []
    for name, fn in sorted(fns.items()):
        for i, (key, ck) in enumerate(_compiled(fn)):
            md = getattr(ck, "metadata", None)
            row = {"kernel": name, "index": i, "key": str(key),
                   "n_regs": getattr(ck, "n_regs", None), "n_spills": getattr(ck, "n_spills", None),
                   "shared": getattr(md, "shared", None), "num_warps": getattr(md, "num_warps", None),
                   "num_stages": getattr(md, "num_stages", None)}
            for ext in ("ptx", "ttgir"):
                text = (getattr(ck, "asm", None) or {}).get(ext)
                if isinstance(text, bytes):
                    text = text.decode(errors="replace")
                if text:
                    with open(os.path.join(directory, f"{name}.{i}.{ext}"), "w", encoding="utf-8") as fh:
                        fh.write(text)
                    row[ext] = f"{name}.{i}.{ext}"
            rows.append(row)
    with open(os.path.join(directory, "kernels.json"), "w", encoding="utf-8") as fh:
        json.dump(rows, fh, indent=1)
    return rows


def _jit_functions() -> dict:
    """Every Triton ``JITFunction`` alive in this process whose source is one of ``assocmem``'s, by name."""
    import gc

    from triton.runtime.jit import JITFunction

    out = {}
    for obj in gc.get_objects():
        if isinstance(obj, JITFunction) and "assocmem" in (getattr(obj.fn, "__module__", "") or "") + \
                (getattr(getattr(obj.fn, "__code__", None), "co_filename", "") or ""):
            out[obj.fn.__name__] = obj
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="S2", choices=sorted(SHAPES))
    p.add_argument("--tag", required=True, help="a name for this run's commit in the output")
    p.add_argument("--config", default=None, help="chunk_bl config overrides, k=v,k=v (default: none)")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out", default=None, help="append the JSON line to this file")
    p.add_argument("--dump", default=None, help="write the compiled kernels (keys, registers, PTX) to this folder")
    a = p.parse_args(argv)
    if a.reps < 1:
        p.error(f"--reps must be at least 1 (got {a.reps})")
    try:
        cfg = parse_config(a.config)
    except ValueError as exc:
        p.error(f"--config: {exc}")
    import torch

    if not torch.cuda.is_available():
        print("chunk_ab: needs a CUDA GPU (the interpreter's times mean nothing)", file=sys.stderr)
        return 2
    import assocmem
    from assocmem.gpu import chunk_bl

    dev = torch.device("cuda")
    x = inputs(torch, SHAPES[a.shape], dev)
    kw = dict(chunk_size=16, validate=False)
    if cfg:
        try:                                # typed since 1 December (3203d4e); a dict before
            from assocmem.gpu.config import ChunkConfig
        except ImportError:
            kw["config"] = cfg
        else:
            kw["config"] = ChunkConfig(**cfg)

    def fwd():
        return chunk_bl(**x, **kw)

    for _ in range(3):
        o = fwd()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fwd()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd()
        torch.cuda.synchronize()
    kernels = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0)
        if t:
            kernels[ev.key[:80]] = {"ms": round(t / 1e3, 4), "calls": ev.count}
    o = o[0] if isinstance(o, tuple) else o
    import datetime

    row = {"tag": a.tag, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "shape": a.shape, "config": cfg, "assocmem_file": assocmem.__file__,
           "fwd_ms_median": times[len(times) // 2], "fwd_ms_min": times[0], "reps": a.reps,
           "kernels": dict(sorted(kernels.items(), key=lambda kv: -kv[1]["ms"])),
           "checksum_o": float(o.double().sum()), "device": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu_state()}
    if a.dump:
        row["compiled"] = [{k: v for k, v in r.items() if k not in ("ptx", "ttgir")}
                           for r in dump_kernels(a.dump, _jit_functions())]
    emit(row, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
