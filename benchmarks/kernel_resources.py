"""Registers, spills and shared memory of the chunked op's kernels, compiled offline for the H200.

Triton compiles for ``sm_90a`` without a GPU, and its bundled ``ptxas -v`` reports what each kernel
uses per thread: registers, the stack frame, spill stores and loads; Triton's metadata gives the
shared memory.  From those, how many programs of the kernel can be resident on one SM at once
(registers, shared memory and warps per SM of Hopper).  A sequential kernel's chain runs one program
per (batch, head): where several fit an SM, more chains (the two-level form's segments, docs/gpu.md
2.4) can hide each other's latency; spills move the chain's working set through L1 and L2.

Run it with the Triton the device runs (3.6 there) to read the device's numbers:

    pip install --no-deps --target /tmp/t36 triton==3.6.0
    PYTHONPATH=/tmp/t36 python benchmarks/kernel_resources.py --out benchmarks/cpu_kernel_resources.json
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import tempfile

# Hopper (sm_90): 64 K 32-bit registers, 228 KB shared memory (227 usable by one block), at most 32
# blocks and 64 warps per SM; registers are allocated per warp in units of 256
SM = {"regs": 65536, "shared": 228 * 1024, "blocks": 32, "warps": 64, "reg_unit": 256}
SM_COUNT = 132                 # the H100's and H200's SMs: the launch configuration depends on them
SHAPES = {"S1": (8, 2048, 16, 64, 64), "S2": (32, 2048, 4, 128, 128), "S3": (4, 8192, 16, 64, 64)}


FLOAT_ARGS = {"bound": "fp32"}    # scalar arguments passed as floats (the device-side choice's bound); the rest are ints


def _signature(fn, consts: dict) -> dict:
    """The argument types as a launch specialises them: constexprs, and arguments passed as None (the
    covariance kernel's ``guard_ptr`` and ``bound`` without the device-side choice), are constants."""
    sig = {}
    for p in fn.params:
        if p.is_constexpr or (p.name in consts and consts[p.name] is None):
            sig[p.name] = "constexpr"
        else:
            sig[p.name] = "*fp32" if p.name.endswith("_ptr") else FLOAT_ARGS.get(p.name, "i32")
    return sig


def _source(fn, consts: dict):
    """``fn`` as Triton compiles it at a launch: :func:`_signature`, and every pointer 16-byte aligned (what
    PyTorch's allocator gives and Triton's launch specialises on, ``tt.divisibility = 16``).  Integers are
    not specialised: the sequential kernels name their sizes ``do_not_specialize``; a kernel that does
    not (the epilogue, the decay check) may be specialised at a launch where this compile is not.  Until
    6 December this tool compiled ``guard_ptr`` as a pointer, ``bound`` as a float and no pointer as
    aligned, so its kernels were not the launched ones (docs/gpu.md, "The S2 regression")."""
    from triton.compiler import ASTSource

    consts = dict(consts)
    for p in fn.params:                          # a constexpr left out takes its default, as at a launch
        if p.is_constexpr and p.name not in consts and p.default is not inspect.Parameter.empty:
            consts[p.name] = p.default
    sig = _signature(fn, consts)
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(fn.params) if sig[p.name] == "*fp32"}
    return ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)


def _compile(fn, consts: dict, warps: int, maxnreg: int | None = None):
    import triton
    from triton.backends.compiler import GPUTarget

    opts = {"num_warps": warps, "num_stages": 1, **({"maxnreg": maxnreg} if maxnreg else {})}
    return triton.compile(_source(fn, consts), target=GPUTarget("cuda", 90, 32), options=opts)


def resources(fn, consts: dict, warps: int, maxnreg: int | None = None) -> dict:
    """Compile ``fn`` with ``consts`` for sm_90a as a launch would (``maxnreg``: the launch's register cap,
    None for none) and read what one program uses."""
    import triton

    k = _compile(fn, consts, warps, maxnreg)
    bin_ = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.TemporaryDirectory() as d:
        ptx = os.path.join(d, "k.ptx")
        with open(ptx, "w") as fh:
            fh.write(k.asm["ptx"])
        r = subprocess.run([os.path.join(bin_, "ptxas"), "-v", "--gpu-name", "sm_90a", "-O3", ptx, "-o",
                            os.path.join(d, "k.cubin")], capture_output=True, text=True)
        info, tool = r.stdout + r.stderr, "ptxas -v"
        if r.returncode != 0:
            # a ptxas older than the PTX Triton writes (Triton 3.9 here): Triton's own cubin, read by
            # cuobjdump, gives registers and the stack but not the spill traffic
            cubin = os.path.join(d, "t.cubin")
            with open(cubin, "wb") as fh:
                fh.write(k.asm["cubin"])
            c = subprocess.run([os.path.join(bin_, "cuobjdump"), "--dump-resource-usage", cubin],
                               capture_output=True, text=True)
            if c.returncode != 0:
                raise RuntimeError(f"ptxas: {info.strip()[-200:]}; cuobjdump: {c.stderr.strip()[-200:]}")
            info, tool = c.stdout, "cuobjdump --dump-resource-usage (spills not reported)"

    def num(pat, missing=0):
        hit = re.search(pat, info)
        return int(hit.group(1)) if hit else missing

    reg = num(r"Used (\d+) registers") or num(r"REG:(\d+)")
    spills = tool.startswith("ptxas")
    out = {"warps": warps, "maxnreg": maxnreg, "registers": reg,
           "stack_bytes": num(r"(\d+) bytes stack frame") if spills else num(r"STACK:(\d+)"),
           "spill_store_bytes": num(r"(\d+) bytes spill stores") if spills else None,
           "spill_load_bytes": num(r"(\d+) bytes spill loads") if spills else None,
           "shared_bytes": int(k.metadata.shared), "tool": tool}
    per_warp = -(-reg * 32 // SM["reg_unit"]) * SM["reg_unit"]
    by = {"registers": SM["regs"] // max(per_warp * warps, 1),
          "shared": SM["shared"] // (out["shared_bytes"] + 1024) if out["shared_bytes"] else SM["blocks"],
          "warps": SM["warps"] // warps, "blocks": SM["blocks"]}
    out["programs_per_sm"] = min(by.values())
    out["limited_by"] = min(by, key=by.get)
    out["local_bytes_per_program"] = out["stack_bytes"] * 32 * warps
    return out


def _sass(fn, consts: dict, warps: int, maxnreg: int | None = None) -> list[str]:
    """The SASS of ``fn`` compiled for sm_90a (ptxas on Triton's PTX; Triton's own cubin where that ptxas is
    older than the PTX), disassembled by the bundled nvdisasm with the source lines (``-gi``: a
    ``//## File "…", line N`` marker before the instructions of line ``N``), one line a list item."""
    import triton

    k = _compile(fn, consts, warps, maxnreg)
    bin_ = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.TemporaryDirectory() as d:
        ptx, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(ptx, "w") as fh:
            fh.write(k.asm["ptx"])
        r = subprocess.run([os.path.join(bin_, "ptxas"), "--gpu-name", "sm_90a", "-O3", ptx, "-o", cubin],
                           capture_output=True, text=True)
        if r.returncode != 0:
            with open(cubin, "wb") as fh:
                fh.write(k.asm["cubin"])
        dis = subprocess.run([os.path.join(bin_, "nvdisasm"), "-c", "-gi", cubin], capture_output=True, text=True)
        if dis.returncode != 0:
            raise RuntimeError(f"nvdisasm: {dis.stderr.strip()[-200:]}")
    return dis.stdout.splitlines()


# SASS opcodes by the unit that executes them; the rest count as "other"
SASS_CLASSES = {"FFMA": "fp32", "FMUL": "fp32", "FADD": "fp32", "LDL": "local", "STL": "local", "LDS": "shared",
                "STS": "shared", "LDSM": "shared", "STSM": "shared", "SHFL": "shuffle", "BAR": "barrier",
                "LDG": "global", "STG": "global", "HMMA": "tensor", "MUFU": "sfu"}


def sass_loops(lines: list[str]) -> list[tuple[int, int]]:
    """The loops of a disassembly: ``(label line, back-branch line)`` for each branch to an earlier label,
    except a branch to the label right above it (the trap after ``EXIT``, a branch to itself)."""
    labels = {}
    for i, ln in enumerate(lines):
        hit = re.match(r"^(\.L_x_\d+):", ln)
        if hit:
            labels[hit.group(1)] = i
    out = []
    for i, ln in enumerate(lines):
        hit = re.search(r"BRA `\((\.L_x_\d+)\)", ln)
        if hit and hit.group(1) in labels and i - labels[hit.group(1)] > 1:
            out.append((labels[hit.group(1)], i))
    return out


def _opcode(ln: str):
    hit = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)", ln)
    return (hit.group(1), hit.group(2)) if hit else None


def _shared_bytes_per_warp(name: str, mods: str) -> int:
    """Bytes one warp's shared-memory instruction moves: ``LDS``/``STS`` 32 lanes of their width (4 bytes
    unless ``.64``, ``.128``, ``.U8``/``.S8`` or ``.U16``/``.S16``), ``LDSM``/``STSM`` 128 bytes per 8×8
    16-bit matrix (one, or ``.2``/``.4``)."""
    if name in ("LDSM", "STSM"):
        return 128 * (4 if mods.endswith(".4") else 2 if mods.endswith(".2") else 1)
    width = (16 if ".128" in mods else 8 if ".64" in mods else 1 if (".U8" in mods or ".S8" in mods)
             else 2 if (".U16" in mods or ".S16" in mods) else 4)
    return 32 * width


def sass_per_step(lines: list[str], warps: int, inner_trips: int = 1) -> dict:
    """Warp instructions a program issues per trip of its outermost loop (the chunk loop), by class, with
    the innermost loop nested in it (the covariance kernel's row recursion) counted ``inner_trips`` times;
    and the shared-memory bytes those instructions move (from each access's width).  A static count: the
    branches inside a trip are taken as if every instruction ran.  ``by_source_line``: the twelve source
    lines (``file:line``, from ``-gi``'s markers; ptxas interleaves lines, so roughly) with the most
    instructions, each with its shared-memory bytes and local (spill) instructions."""
    loops = sorted(sass_loops(lines), key=lambda lp: lp[1] - lp[0])
    if not loops:
        raise ValueError("lines: no loop in this kernel's SASS")
    outer = loops[-1]
    nested = [lp for lp in loops[:-1] if outer[0] <= lp[0] and lp[1] <= outer[1]]
    weight = {}
    for i in range(outer[0], outer[1] + 1):
        weight[i] = 1
    if nested:
        inner = nested[0]
        for i in range(inner[0], inner[1] + 1):
            weight[i] = inner_trips
    by, shared_bytes, by_line = {}, 0, {}
    where = None
    for i in range(outer[1] + 1):
        hit = re.search(r'//## File "([^"]+)", line (\d+)', lines[i])
        if hit:
            where = f"{os.path.basename(hit.group(1))}:{hit.group(2)}"
        if i not in weight:
            continue
        op = _opcode(lines[i])
        if op is None:
            continue
        w = weight[i]
        name, mods = op
        cls = SASS_CLASSES.get(name, "other")
        by[cls] = by.get(cls, 0) + w * warps
        row = by_line.setdefault(where, {"instructions": 0, "shared_bytes": 0, "local": 0})
        row["instructions"] += w * warps
        if cls == "local":
            row["local"] += w * warps
        if cls == "shared":
            nbytes = w * warps * _shared_bytes_per_warp(name, mods)
            shared_bytes += nbytes
            row["shared_bytes"] += nbytes
    top = sorted(by_line.items(), key=lambda kv: -kv[1]["instructions"])[:12]
    return {"warps": warps, "inner_trips": inner_trips if nested else None, "instructions": sum(by.values()),
            "by_class": dict(sorted(by.items())), "shared_bytes": shared_bytes,
            "by_source_line": {k or "unknown": v for k, v in top}}


def forward_kernels(shape) -> dict:
    """The chunked forward's covariance and mean kernels at ``shape`` with the default launch
    configuration (``chunk_bl`` at ``C = 16``, decays present, one noise group)."""
    from assocmem.gpu import _chunk_kernels as K
    from assocmem.gpu.chunk import _block_d, _cov_maxnreg, _cov_warps, _quotient_shape, _resolve
    from assocmem.gpu.config import ChunkConfig

    B, T, H, D, m = shape
    C = 16
    BD = _block_d(D)
    cfg = _resolve(ChunkConfig(), D, m, 1, B * H, False, SM_COUNT)
    matmul = _quotient_shape(BD, C)                      # chunk._cov_kernel's rule, the decays safe
    kern = K.chunk_cov_fwd_mm_kernel if matmul else K.chunk_cov_fwd_kernel
    cov_warps = _cov_warps(cfg, matmul, C, BD)
    cov = dict(H=H, G=1, D=D, BD=BD, C=C, HAS_ALPHA=True, guard_ptr=None, bound=None)
    if matmul:
        cov.update(PREC="ieee", STATE_LEFT=cfg.state_dot == "left")
    cap = _cov_maxnreg(K, kern, cov_warps).get("maxnreg")
    NVG = -(-m // cfg.BV)
    return {"covariance": {"kernel": kern.fn.__name__ if hasattr(kern, "fn") else kern.__name__,
                           **resources(kern, _consts(kern, cov), cov_warps, cap)},
            "mean": {"kernel": "chunk_mean_fwd_kernel", "BV": cfg.BV,
                     **mean_resources(cfg.BV, cfg.mean_warps, D, m, C, H=H, prec=cfg.mean_precision)},
            "programs": {"covariance": B * H, "mean": B * H * NVG}}


def mean_resources(BV: int, warps: int, D: int = 64, m: int = 64, C: int = 16, *, H: int = 16,
                   prec: str = "ieee") -> dict:
    """The chunked forward's mean kernel at ``BV`` value columns a program and ``warps`` (products at
    ``prec``, decays present): its registers, spills and programs per SM.  The default launch gives it 8 warps and
    ``BV = 64`` from 128 programs up, one program an SM: where the chains are many (the two-level form's
    segments) its programs then run in waves."""
    from assocmem.gpu import _chunk_kernels as K
    from assocmem.gpu.chunk import _block_d

    BD = _block_d(D)
    mean = dict(H=H, G=1, D=D, M=m, MG=m, BD=BD, BV=BV, NVG=-(-m // BV), C=C, HAS_ALPHA=True, STORE_E=False,
                PREC=prec)
    return resources(K.chunk_mean_fwd_kernel, mean, warps)


def _consts(fn, values: dict) -> dict:
    """The constexpr arguments ``fn`` declares, and those passed as None, from ``values`` (its defaults where
    ``values`` has none)."""
    return {p.name: values[p.name] for p in fn.params
            if p.name in values and (p.is_constexpr or values[p.name] is None)}


def backward_kernels(shape, state_dot: str = "right", bwd_BV: int | None = None, bwd_warps: int | None = None,
                     h_rows: int | None = None) -> dict:
    """The chunked backward's kernels (``chunk._chunk_backward``) at ``shape`` with the default launch
    configuration (``bwd_BV``, ``bwd_warps``, ``h_rows``: other values of the three; ``h_rows`` 0 the covariance
    passes with the whole ``D×D`` matrices in registers, as before 6 December's fifth session): the state scans,
    the per-chunk passes and the epilogue."""
    from assocmem.gpu import _chunk_bwd_kernels as KB
    from assocmem.gpu.chunk import _block_d, _h_rows, _resolve
    from assocmem.gpu.config import ChunkConfig

    B, T, H, D, m = shape
    C = 16
    cfg = _resolve(ChunkConfig(bwd_BV=bwd_BV, bwd_warps=bwd_warps), D, m, 1, B * H, False)
    NVG = -(-m // cfg.bwd_BV)
    values = dict(H=H, G=1, D=D, BD=_block_d(D), C=C, HAS_ALPHA=True, PREC=cfg.bwd_precision, M=m, MG=m,
                  BV=cfg.bwd_BV, NVG=NVG, STORE_END=True, NEED_DG=True, STATE_LEFT=state_dot == "left")
    out = {"bwd_BV": cfg.bwd_BV, "bwd_warps": cfg.bwd_warps, "bwd_precision": cfg.bwd_precision,
           "state_dot": state_dot}
    kernels = [("pstate", KB.chunk_bwd_pstate_kernel, {}), ("mstate", KB.chunk_bwd_mstate_kernel, {}),
               ("gstate", KB.chunk_bwd_gstate_kernel, {}), ("hstate", KB.chunk_bwd_hstate_kernel, {}),
               ("mean_par", KB.chunk_bwd_mean_par_kernel, {}), ("cov_par_sources", KB.chunk_bwd_cov_par_kernel,
                                                                 {"OUT": False}),
               ("cov_par_outputs", KB.chunk_bwd_cov_par_kernel, {"OUT": True}),
               ("epilogue", KB.chunk_bwd_epilogue_kernel, {})]
    rows = {"H_ROWS": _h_rows(_block_d(D)) if h_rows is None else h_rows}     # as chunk._chunk_backward launches them
    out["h_rows"] = rows["H_ROWS"]
    for name, fn, extra in kernels:
        warps = max(4, C // 4) if name == "epilogue" else cfg.bwd_warps
        try:
            out[name] = resources(fn, _consts(fn, {**values, **extra,
                                                   **(rows if name in ("hstate", "cov_par_sources", "cov_par_outputs")
                                                      else {})}), warps)
        except Exception as exc:                  # recorded: the other kernels still report
            out[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return out


def fused_kernels(shape) -> dict:
    """The token-by-token op's kernels (``fused_recurrent_bl``; its backward is ``chunk_bl``'s at
    ``D = 128``) at ``shape`` with the default launch configuration."""
    from assocmem.gpu import _fused_recurrent_kernels as F
    from assocmem.gpu.fused_recurrent import default_config

    B, T, H, D, m = shape
    cfg = default_config(D, m, 1, B * H)
    NV = -(-m // cfg.BV)
    values = dict(H=H, G=1, D=D, M=m, MG=m, BD=D, BV=cfg.BV, NV=NV, HAS_ALPHA=True, STORE_E=True, ATOMIC=NV > 1)
    out = {"BV": cfg.BV, "cov_warps": cfg.cov_warps, "mean_warps": cfg.mean_warps}
    for name in ("cov_fwd_kernel", "mean_fwd_kernel", "mean_bwd_rev_kernel", "cov_bwd_rev_kernel",
                 "cov_bwd_fwd_kernel", "mean_bwd_fwd_kernel"):
        fn = getattr(F, name)
        warps = cfg.cov_warps if name.startswith("cov") else cfg.mean_warps
        try:
            out[name] = resources(fn, _consts(fn, values), warps)
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return out


def sass_report(mean_variants: str = "64:8,64:4,16:2") -> dict:
    """Per chunk step at S1's head size (``D = m = 64``, ``C = 16``, decays present, fp32 products): the
    covariance kernel (4 warps, the row recursion ``C`` times a step) with the state right and left, each
    also without its row recursion (``<side>_without_rows``, the kernel's ``ROWS=False``), and
    the mean kernel at each ``BV:warps[:precision]``, scaled to the whole ``m`` (its ``m / BV`` programs a chain);
    beside each, the clocks one SM would need for that step at Hopper's issue rate (4 warp instructions a
    clock) and shared-memory bandwidth (128 bytes a clock), the step's lower bounds if nothing else waited."""
    from assocmem.gpu import _chunk_kernels as K

    def bounds(r, per_chain=1):
        r = {**r, "programs_per_chain": per_chain,
             "instructions_per_chain": r["instructions"] * per_chain,
             "shared_bytes_per_chain": r["shared_bytes"] * per_chain}
        r["issue_clocks_per_chain"] = r["instructions_per_chain"] / 4
        r["shared_clocks_per_chain"] = r["shared_bytes_per_chain"] / 128
        return r
    out = {"covariance": {}, "mean": {}}
    for side in ("right", "left"):
        for rows in (True, False):
            # ROWS=False: the kernel's timing ablation without the row recursion (what the recursion adds)
            lines = _sass(K.chunk_cov_fwd_mm_kernel, dict(H=16, G=1, D=64, BD=64, C=16, HAS_ALPHA=True, PREC="ieee",
                                                          STATE_LEFT=side == "left", ROWS=rows), 4)
            out["covariance"][side if rows else f"{side}_without_rows"] = bounds(
                sass_per_step(lines, 4, inner_trips=16))
    for item in filter(None, mean_variants.split(",")):
        bv, warps, prec = _mean_variant(item)
        consts = dict(H=16, G=1, D=64, M=64, MG=64, BD=64, BV=bv, NVG=-(-64 // bv), C=16, HAS_ALPHA=True,
                      STORE_E=False, PREC=prec)
        name = f"BV{bv}_w{warps}" + ("" if prec == "ieee" else f"_{prec}")
        out["mean"][name] = bounds(sass_per_step(_sass(K.chunk_mean_fwd_kernel, consts, warps), warps), -(-64 // bv))
    return out


def s2_candidates() -> list[dict]:
    """The covariance kernels at S2's key width (``D = BD = 128``, ``C = 16``, decays) compiled as
    ``chunk_bl`` would launch them: the row kernel at its 8 warps and register cap (the default at
    ``D = 128``), the quotient kernel at 4 and 8 warps with the state on either side (no cap: the launch
    names none for it).  Each with its resources and its SASS per chunk step (the row recursion's 16 trips
    counted in)."""
    from assocmem.gpu import _chunk_kernels as K
    from assocmem.gpu.chunk import ROW_KERNEL_MAXNREG

    base = dict(H=4, G=1, D=128, BD=128, C=16, HAS_ALPHA=True, PREC="ieee")
    cands = [("rows", K.chunk_cov_fwd_kernel, base, 8, ROW_KERNEL_MAXNREG)]
    for side in ("left", "right"):
        for warps in (4, 8):
            cands.append((f"matmul_{side}", K.chunk_cov_fwd_mm_kernel, dict(base, STATE_LEFT=side == "left"), warps,
                          None))
    out = []
    for name, fn, consts, warps, cap in cands:
        r = resources(fn, _consts(fn, consts), warps, cap)
        step = sass_per_step(_sass(fn, _consts(fn, consts), warps, cap), warps, inner_trips=consts["C"])
        out.append({"kernel": name, **r, "sass_per_chunk_step": {k: v for k, v in step.items()
                                                                  if k != "by_source_line"}})
    return out


def _mean_variant(item: str) -> tuple[int, int, str]:
    """``BV:warps[:precision]`` (precision ``ieee`` unless given) as ``(BV, warps, precision)``."""
    bv, warps, *prec = item.split(":")
    return int(bv), int(warps), prec[0] if prec else "ieee"


def main(argv=None) -> int:
    import triton

    from assocmem.provenance import provenance

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="S1,S2,S3")
    p.add_argument("--variants", default="ieee:4,ieee:8,ieee:4:left,ieee:8:left,tf32x3:4,tf32x3:8,"
                                         "tf32:4,tf32:8",
                   help="the quotient covariance kernel (D = 64, C = 16) also at these PREC:warps[:state_dot] "
                        "(comma list; '' for none)")
    p.add_argument("--mean-variants", default="64:8,64:4,32:8,32:4,16:4,16:2",
                   help="the forward's mean kernel (D = m = 64, C = 16) also at these BV:warps[:precision] (comma list; "
                        "'' for none): how many of its programs share an SM when the chains are many (segments)")
    p.add_argument("--sass", action="store_true",
                   help="also the forward's kernels' SASS per chunk step (S1's D = m = 64, C = 16): warp "
                        "instructions by class and shared-memory bytes, the covariance kernel state right and left, "
                        "the mean kernel at the --mean-variants")
    p.add_argument("--s2-candidates", action="store_true",
                   help="also the covariance kernels at S2's key width (D = 128, C = 16) as they would launch: the "
                        "row kernel (the default there: 8 warps, register cap 255) against the quotient kernel at "
                        "4 and 8 warps with the state left and right (cov_kernel=matmul), resources and SASS per "
                        "chunk step")
    p.add_argument("--bwd-variants", default="",
                   help="also the chunked backward's kernels at each shape of --shapes with these "
                        "bwd_BV:bwd_warps[:state_dot[:h_rows]] (comma list; '' for none, the default; h_rows: the "
                        "rows of a D×D block the covariance passes read at a time, 0 for the whole matrix in "
                        "registers, default as launched): e.g. at S2, where \"auto\" keeps the token-by-token "
                        "backward because these spill")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    res = {"provenance": provenance({"triton": triton.__version__, "target": "sm_90a (offline: no GPU)"}),
           "sm": SM, "shapes": {}}
    for name in a.shapes.split(","):
        entry = forward_kernels(SHAPES[name])
        if SHAPES[name][3] <= 64:                 # the chunked backward runs at D <= 64 ("auto")
            entry["backward"] = backward_kernels(SHAPES[name])
            entry["backward_state_left"] = backward_kernels(SHAPES[name], "left")
        entry["fused_recurrent"] = fused_kernels(SHAPES[name])
        res["shapes"][name] = entry
        print(name, json.dumps(entry))
    for item in filter(None, a.bwd_variants.split(",")):
        bv, warps, *rest = item.split(":")
        sd = rest[0] if rest and rest[0] else "right"
        rows = int(rest[1]) if len(rest) > 1 else None
        for name in a.shapes.split(","):
            r = backward_kernels(SHAPES[name], sd, int(bv), int(warps), rows)
            res.setdefault("backward_variants", {}).setdefault(name, []).append(r)
            print("backward variant", name, item, json.dumps(r))
    if a.variants:
        from assocmem.gpu import _chunk_kernels as K

        res["covariance_variants"] = []
        for item in a.variants.split(","):
            prec, warps, *om = item.split(":")
            om = om[0] if om else "right"
            r = resources(K.chunk_cov_fwd_mm_kernel, dict(H=16, G=1, D=64, BD=64, C=16, HAS_ALPHA=True, PREC=prec,
                                                          STATE_LEFT=om == "left"), int(warps))
            res["covariance_variants"].append({"PREC": prec, "state_dot": om, **r})
            print("variant", prec, warps, om, json.dumps(r))
    if a.mean_variants:
        res["mean_variants"] = [{"BV": bv, "precision": prec, **mean_resources(bv, w, prec=prec)}
                                for bv, w, prec in map(_mean_variant, a.mean_variants.split(","))]
        for r in res["mean_variants"]:
            print("mean variant", json.dumps(r))
    if a.sass:
        res["sass_per_chunk_step"] = sass_report(a.mean_variants)
        print("sass", json.dumps(res["sass_per_chunk_step"]))
    if a.s2_candidates:
        res["s2_covariance_candidates"] = s2_candidates()
        for r in res["s2_covariance_candidates"]:
            print("S2 candidate", json.dumps(r))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
        print(f"JSON written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
