"""The row covariance kernel at S2 (``chunk_cov_fwd_kernel``, ``D = 128``, ``C = 16``, 8 warps, decays,
fp32), compiled offline for ``sm_90a`` from whichever ``assocmem`` is importable: registers, spills,
shared memory and its SASS per chunk step (:mod:`kernel_resources`' readers, loaded from this
checkout).  Run once per commit, an older one installed apart, and compare the lines:

    pip install --no-deps --target /tmp/t36 triton==3.6.0          # the device's Triton
    pip install --no-deps --no-build-isolation --target /tmp/old_site <checkout of the old commit>
    PYTHONPATH=/tmp/old_site:/tmp/t36 python3 benchmarks/kernel_resources_ab.py --tag e1436b3 --out ab.jsonl
    PYTHONPATH=/tmp/t36 python3 benchmarks/kernel_resources_ab.py --tag head --out ab.jsonl

Identical code for the kernel (same opcode counts, same resources) puts a slowdown in its launch,
its inputs or the machine, not in the kernel.  The kernel is compiled as a launch specialises it
(``kernel_resources._source``: aligned pointers, the guard arguments None) with the register cap the
commit's launch names (``--cap none``: without it).  Before 6 December it was not, and both commits
read 255 registers; as launched, HEAD's read 128 until the cap (docs/gpu.md, "The S2 regression").
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONSTS = dict(H=4, G=1, D=128, BD=128, C=16, HAS_ALPHA=True, PREC="ieee", SELECT=0,   # S2's launch
              guard_ptr=None, bound=None)
WARPS = 8


def _sibling(name: str):
    """``benchmarks/NAME.py`` of this checkout, loaded by path (the ``assocmem`` imported may be an older install)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kr():
    return _sibling("kernel_resources")


def _cap(K, fn) -> int | None:
    """The register cap this commit's launch names for the kernel (``chunk._cov_maxnreg``; None before it)."""
    try:
        from assocmem.gpu.chunk import _cov_maxnreg
    except ImportError:
        return None
    return _cov_maxnreg(K, fn, WARPS).get("maxnreg")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tag", required=True, help="a name for the commit compiled")
    p.add_argument("--cap", choices=("launch", "none"), default="launch",
                   help="the register cap: the one this commit's launch names (default), or none")
    p.add_argument("--out", default=None, help="append the JSON line to this file")
    a = p.parse_args(argv)
    import triton

    import assocmem
    from assocmem.gpu import _chunk_kernels as K

    kr = _kr()
    fn = K.chunk_cov_fwd_kernel
    consts = kr._consts(fn, CONSTS)
    cap = _cap(K, fn) if a.cap == "launch" else None
    lines = kr._sass(fn, consts, WARPS, cap)
    ops: dict = {}
    for ln in lines:
        op = kr._opcode(ln)
        if op:
            ops[op[0]] = ops.get(op[0], 0) + 1
    step = kr.sass_per_step(lines, WARPS, inner_trips=CONSTS["C"])
    step.pop("by_source_line")
    import datetime

    row = {"tag": a.tag, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "assocmem_file": assocmem.__file__, "triton": triton.__version__, "target": "sm_90a (offline)",
           "kernel": "chunk_cov_fwd_kernel", "consts": consts, "warps": WARPS,
           "maxnreg": cap, "resources": kr.resources(fn, consts, WARPS, cap), "per_chunk_step": step,
           "instructions": sum(ops.values()), "opcodes": dict(sorted(ops.items())),
           "opcode_sequence_sha1": hashlib.sha1("\n".join(
               " ".join(kr._opcode(ln)) for ln in lines if kr._opcode(ln)).encode()).hexdigest()}
    _sibling("chunk_ab").emit(row, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
