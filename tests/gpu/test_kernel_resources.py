"""benchmarks/kernel_resources.py: the chunked forward's kernels compiled offline for sm_90a (no GPU),
their registers, spills and shared memory read from ptxas, and the programs that fit an SM."""
import importlib.util
import os
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
pytestmark = pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas is missing")


def _module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_resources.py"
    spec = importlib.util.spec_from_file_location("kernel_resources", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_small_covariance_kernel_compiles_and_reports(monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kr = _module()
    from assocmem.gpu import _chunk_kernels as K

    r = kr.resources(K.chunk_cov_fwd_mm_kernel, dict(H=2, G=1, D=16, BD=16, C=16, HAS_ALPHA=True, PREC="ieee"), 4)
    assert 16 <= r["registers"] <= 255 and r["warps"] == 4 and r["shared_bytes"] >= 0
    assert r["stack_bytes"] >= 0
    # ptxas -v reports the spill traffic; a ptxas older than Triton's PTX leaves cuobjdump, which does not
    assert (r["spill_store_bytes"] >= 0) if r["tool"] == "ptxas -v" else r["spill_store_bytes"] is None
    assert r["local_bytes_per_program"] == r["stack_bytes"] * 128
    # the residency bound: registers (allocated per warp in units of 256), shared memory, warps, blocks
    per_warp = -(-r["registers"] * 32 // 256) * 256
    by_regs = 65536 // (per_warp * 4)
    assert r["programs_per_sm"] <= min(by_regs, 16, 32)
    assert r["programs_per_sm"] >= 1


def test_the_resource_limit_is_named():
    kr = _module()
    assert kr.SM["regs"] == 65536 and kr.SHAPES["S1"] == (8, 2048, 16, 64, 64)
    assert os.path.basename(kr.__file__) == "kernel_resources.py"


def test_the_mean_kernel_compiles_at_a_chosen_value_block(monkeypatch):
    """``mean_resources``: the forward's mean kernel at a chosen ``BV`` and warps, with the same report (the
    residency that decides whether many chains, the two-level form's segments, share an SM)."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kr = _module()
    r = kr.mean_resources(16, 2, D=16, m=16)
    assert r["warps"] == 2 and 16 <= r["registers"] <= 255 and r["programs_per_sm"] >= 1
    per_warp = -(-r["registers"] * 32 // 256) * 256
    assert r["programs_per_sm"] <= 65536 // (per_warp * 2)


def test_sass_loops_and_per_step_counts_on_a_hand_written_listing():
    """The loop finder and the per-step count on a listing whose answer is known by hand: an outer loop of
    five instructions holding an inner loop of three (run ``inner_trips`` times), the trap after EXIT (a
    branch to itself) not a loop; shared bytes from each access's width."""
    kr = _module()
    lines = ["        /*0000*/                   MOV R1, c[0x0][0x28] ;",
             ".L_x_2:",
             '\t//## File "/x/k.py", line 7',
             "        /*0010*/                   FFMA R2, R3, R4, R5 ;",
             "        /*0020*/                   LDS.128 R8, [R2] ;",
             ".L_x_1:",
             '\t//## File "/x/k.py", line 9',
             "        /*0030*/                   SHFL.BFLY PT, R9, R8, 0x1, 0x1f ;",
             "        /*0040*/                   FADD R8, R8, R9 ;",
             "        /*0050*/               @P1 BRA `(.L_x_1) ;",
             "        /*0060*/                   STS [R2], R8 ;",
             "        /*0070*/               @P2 BRA `(.L_x_2) ;",
             "        /*0080*/                   EXIT ;",
             ".L_x_3:",
             "        /*0090*/                   BRA `(.L_x_3);"]
    assert kr.sass_loops(lines) == [(5, 9), (1, 11)]
    r = kr.sass_per_step(lines, warps=2, inner_trips=10)
    # outer: FFMA, LDS.128, STS, BRA once; inner: SHFL, FADD, BRA ten times; two warps
    assert r["by_class"] == {"fp32": 2 * (1 + 10), "shared": 2 * 2, "shuffle": 2 * 10, "other": 2 * (1 + 10)}
    assert r["instructions"] == 2 * (4 + 30) and r["inner_trips"] == 10
    assert r["shared_bytes"] == 2 * 32 * (16 + 4)
    # by source line: the inner loop's line 9 (SHFL, FADD, BRA ten times), then STS and BRA after it, also
    # under line 9's marker; line 7 holds FFMA and LDS.128
    assert r["by_source_line"] == {"k.py:9": {"instructions": 2 * (30 + 2), "shared_bytes": 2 * 32 * 4, "local": 0},
                                   "k.py:7": {"instructions": 2 * 2, "shared_bytes": 2 * 32 * 16, "local": 0}}
    with pytest.raises(ValueError, match="lines"):
        kr.sass_per_step(lines[:3], warps=1)


def test_sass_of_the_covariance_kernel_counts_its_row_loop(monkeypatch):
    """Compiled for sm_90a, a small covariance kernel has a chunk loop with the row recursion nested in it:
    counting the rows C times adds (C - 1) times the row loop's instructions."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kr = _module()
    from assocmem.gpu import _chunk_kernels as K

    lines = kr._sass(K.chunk_cov_fwd_mm_kernel, dict(H=2, G=1, D=16, BD=16, C=16, HAS_ALPHA=True, PREC="ieee"), 4)
    loops = kr.sass_loops(lines)
    assert len(loops) >= 2
    one, sixteen = kr.sass_per_step(lines, 4, 1), kr.sass_per_step(lines, 4, 16)
    inner = min(loops, key=lambda lp: lp[1] - lp[0])
    n_inner = sum(1 for i in range(inner[0], inner[1] + 1) if kr._opcode(lines[i]))
    assert sixteen["instructions"] - one["instructions"] == 15 * n_inner * 4
    assert one["by_class"]["fp32"] > 0 and one["shared_bytes"] > 0


def test_a_mean_variant_names_its_precision_or_takes_full_fp32():
    kr = _module()
    assert kr._mean_variant("64:4") == (64, 4, "ieee")
    assert kr._mean_variant("32:4:tf32x3") == (32, 4, "tf32x3")


def test_shared_bytes_per_warp_follow_each_access_width():
    kr = _module()
    assert kr._shared_bytes_per_warp("LDS", "") == 128 and kr._shared_bytes_per_warp("LDS", ".128") == 512
    assert kr._shared_bytes_per_warp("STS", ".64") == 256 and kr._shared_bytes_per_warp("LDS", ".U16") == 64
    assert kr._shared_bytes_per_warp("LDSM", ".16.M88.4") == 512 and kr._shared_bytes_per_warp("STSM", ".16.M88") == 128


def test_the_ab_compile_reports_the_s2_row_kernel_and_repeats_exactly(tmp_path):
    """benchmarks/kernel_resources_ab.py: one JSON line per run, appended; two compiles of the same code give the
    same opcode sequence (what a comparison across commits relies on), S2's launch constants as given."""
    import json
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_resources_ab.py"
    out = tmp_path / "ab.jsonl"
    env = {**os.environ, "TRITON_DEFAULT_FP_FUSION": "1"}
    env.pop("TRITON_INTERPRET", None)
    for tag in ("one", "two"):
        r = subprocess.run([sys.executable, str(script), "--tag", tag, "--out", str(out)], capture_output=True,
                           text=True, timeout=600, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
    a, b = [json.loads(x) for x in out.read_text().splitlines()]
    assert (a["tag"], b["tag"]) == ("one", "two")
    assert a["consts"]["D"] == 128 and a["consts"]["C"] == 16 and a["warps"] == 8
    assert 16 <= a["resources"]["registers"] <= 255 and a["instructions"] > 1000
    assert a["per_chunk_step"]["inner_trips"] == 16 and a["per_chunk_step"]["instructions"] > 0
    assert a["opcode_sequence_sha1"] == b["opcode_sequence_sha1"] and a["opcodes"] == b["opcodes"]


def test_the_offline_source_is_specialised_as_a_launch_is(monkeypatch):
    """``_source``: the kernel as a launch specialises it.  Arguments passed as None (the covariance kernel's
    ``guard_ptr`` and ``bound`` without the device-side choice) are constants, not a pointer and a float;
    every pointer is 16-byte aligned; a constexpr left out takes its default (``SELECT = 0``, so the guard
    branch is compiled out).  Before 6 December the tool compiled another kernel than the one launched."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kr = _module()
    from assocmem.gpu import _chunk_kernels as K

    fn = K.chunk_cov_fwd_kernel
    src = kr._source(fn, dict(H=4, G=1, D=128, BD=128, C=16, HAS_ALPHA=True, guard_ptr=None, bound=None))
    names = [p.name for p in fn.params]
    sig = src.signature
    assert sig["guard_ptr"] == sig["bound"] == "constexpr" and sig["T"] == "i32" and sig["k_ptr"] == "*fp32"
    consts = {names[i]: v for (i,), v in src.constants.items()}
    assert consts["guard_ptr"] is None and consts["bound"] is None and consts["SELECT"] == 0
    assert consts["PREC"] == "ieee" and consts["D"] == 128
    aligned = {names[i] for (i,), a in src.attrs.items() if a == [["tt.divisibility", 16]]}
    assert aligned == {n for n in names if n.endswith("_ptr") and n != "guard_ptr"}
    with_guard = kr._source(fn, dict(H=4, G=1, D=128, BD=128, C=16, HAS_ALPHA=True, SELECT=2))
    assert with_guard.signature["guard_ptr"] == "*fp32" and with_guard.signature["bound"] == "fp32"


def test_s2_candidates_compile_what_the_launches_would(monkeypatch):
    """``--s2-candidates``: the row kernel as ``chunk_bl`` launches it at ``D = 128`` (8 warps, the register cap
    its launch names) and the quotient kernel at 4 and 8 warps with the state on either side, no cap (its
    launch names none), all at ``D = BD = 128``, ``C = 16`` with decays; each entry carries its resources and
    its SASS per chunk step with the row recursion's 16 trips (compiles stubbed: the wiring is checked)."""
    kr = _module()
    from assocmem.gpu import _chunk_kernels as K
    from assocmem.gpu.chunk import _cov_maxnreg

    seen = []
    monkeypatch.setattr(kr, "resources", lambda fn, consts, warps, cap=None: seen.append((fn, consts, warps, cap))
                        or {"warps": warps, "maxnreg": cap})
    monkeypatch.setattr(kr, "_sass", lambda fn, consts, warps, cap=None: ["listing"])
    trips = []
    monkeypatch.setattr(kr, "sass_per_step", lambda lines, warps, inner_trips=1: trips.append(inner_trips)
                        or {"instructions": 1, "by_source_line": []})
    out = kr.s2_candidates()
    assert [(e["kernel"], e["warps"]) for e in out] == [("rows", 8), ("matmul_left", 4), ("matmul_left", 8),
                                                        ("matmul_right", 4), ("matmul_right", 8)]
    assert seen[0][0] is K.chunk_cov_fwd_kernel and seen[0][3] == _cov_maxnreg(K, K.chunk_cov_fwd_kernel, 8)["maxnreg"]
    for fn, consts, warps, cap in seen[1:]:
        assert fn is K.chunk_cov_fwd_mm_kernel and cap is None and _cov_maxnreg(K, fn, warps) == {}
    assert [c["STATE_LEFT"] for _, c, _, _ in seen[1:]] == [True, True, False, False]
    assert all(c["D"] == c["BD"] == 128 and c["C"] == 16 and c["HAS_ALPHA"] for _, c, _, _ in seen)
    assert trips == [16] * 5 and all("by_source_line" not in e["sass_per_chunk_step"] for e in out)


def _bwd_variants(monkeypatch, tmp_path, variants):
    """``kernel_resources --shapes S2 --bwd-variants VARIANTS`` with the compiles stubbed: the JSON's S2 entries and
    every (kernel, constants, warps) the stub was asked to compile."""
    import json

    kr = _module()
    seen = []
    monkeypatch.setattr(kr, "resources", lambda fn, consts, warps, cap=None: seen.append((fn, consts, warps))
                        or {"warps": warps})
    monkeypatch.setattr(kr, "forward_kernels", lambda shape: {})
    monkeypatch.setattr(kr, "fused_kernels", lambda shape: {})
    out = tmp_path / "r.json"
    assert kr.main(["--shapes", "S2", "--variants", "", "--mean-variants", "", "--bwd-variants", variants,
                    "--out", str(out)]) == 0
    return json.loads(out.read_text())["backward_variants"]["S2"], seen


def test_bwd_variants_launch_the_backward_at_the_given_block_and_warps(monkeypatch, tmp_path):
    """``--bwd-variants BV:warps[:state_dot]``: the chunked backward's kernels at each shape with those launch
    values (the epilogue keeps its own warps), one entry per shape and variant (compiles stubbed)."""
    got, seen = _bwd_variants(monkeypatch, tmp_path, "16:4:left,32:16")
    assert [(e["bwd_BV"], e["bwd_warps"], e["state_dot"]) for e in got] == [(16, 4, "left"), (32, 16, "right")]
    first = [s for s in seen[:8] if s[0].fn.__name__ != "chunk_bwd_epilogue_kernel"]
    assert len(first) == 7 and all(w == 4 and c["D"] == 128 for _, c, w in first)
    blocked = [c for _, c, _ in first if "BV" in c]
    assert blocked and all(c["BV"] == 16 and c.get("NVG", 8) == 8 for c in blocked)
    assert any(c.get("STATE_LEFT") for _, c, _ in first)
    assert all(c["BV"] == 32 for _, c, _ in seen[8:] if "BV" in c)
    assert {w for f, _, w in seen if f.fn.__name__ == "chunk_bwd_epilogue_kernel"} == {4}
    # the covariance passes read the D×D matrices in blocks of 32 rows at D = 128, as chunk_bl launches them
    cov = ("chunk_bwd_hstate_kernel", "chunk_bwd_cov_par_kernel")
    assert [c["H_ROWS"] for f, c, _ in seen if f.fn.__name__ in cov] == [32] * 6
    assert all("H_ROWS" not in c for f, c, _ in seen if f.fn.__name__ not in cov)
    assert [e["h_rows"] for e in got] == [32, 32]


def test_bwd_variants_take_the_row_block_of_the_covariance_passes(monkeypatch, tmp_path):
    """``--bwd-variants BV:warps:state_dot:h_rows``: 0 compiles the covariance passes with the whole ``D×D``
    matrices in registers (the form before the row blocks), another value those rows a block."""
    got, seen = _bwd_variants(monkeypatch, tmp_path, "32:8::0,32:8:right:64")
    assert [(e["state_dot"], e["h_rows"]) for e in got] == [("right", 0), ("right", 64)]
    rows = [c["H_ROWS"] for f, c, _ in seen if "H_ROWS" in c]
    assert rows == [0, 0, 0, 64, 64, 64]
