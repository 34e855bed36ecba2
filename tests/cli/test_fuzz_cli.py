"""Property-based fuzz of the command line: every bad input is one clean line.

For each sub-command, hypothesis picks one flag and a bad value for it (NaN,
±inf, out of range, float64-unsafe magnitudes, non-numbers, empty, unknown
names, duplicates, huge sizes, bad paths) or a contradictory combination, and
runs ``assocmem.cli.main`` in-process in a scratch folder.  Whatever it picks,
the user must see: exit status 2, exactly one stderr line, naming the flag
(or one of the flags) they typed, no traceback, no new file, and the refusal
within a few seconds and without a memory spike (the size estimates refuse
before allocating).

The bad values are generated from the flag's *kind* (a scale, a count, a
size, a list, an output path ...), so a new flag of a known kind needs one
line in :data:`SPECS`.
"""
from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from assocmem.cli import main

# -- bad values by kind -------------------------------------------------------
NAN = st.sampled_from(["nan", "NaN", "-nan", "+nan"])
INF = st.sampled_from(["inf", "-inf", "+inf", "Infinity", "-Infinity", "1e400", "-1e999"])
NOT_A_NUMBER = st.one_of(st.sampled_from(["", " ", "abc", "1,5", "0x", "--", "1e", "e5", "one", "½"]),
                         st.text(st.characters(whitelist_categories=("L",)), min_size=1, max_size=6))
NON_FINITE = st.one_of(NAN, INF, NOT_A_NUMBER)


def _num(x) -> str:
    return repr(float(x))


def real_outside(lo=None, hi=None, *, lo_open=False, hi_open=False, scale=False):
    """Strings of numbers a ``Real(lo, hi, ...)`` flag must refuse."""
    opts = [NON_FINITE]
    if lo is not None:       # (the filters drop -0.0, which compares equal to 0)
        below = st.floats(max_value=lo, min_value=-1e300).filter(lambda x: x <= lo if lo_open else x < lo)
        opts.append(below.map(_num))
    if hi is not None:
        above = st.floats(min_value=hi, max_value=1e300).filter(lambda x: x >= hi if hi_open else x > hi)
        opts.append(above.map(_num))
    if scale:
        lo_mag = max(lo or 0.0, 0.0)
        opts.append(st.floats(min_value=1.01e100, max_value=1e308).map(_num))
        opts.append(st.floats(min_value=5e-324, max_value=0.99e-100).filter(lambda x: x > lo_mag or
                                                                          (x == lo_mag and lo_open)).map(_num))
    return st.one_of(*opts)


def int_outside(lo=None, hi=None):
    opts = [NON_FINITE, st.sampled_from(["1.5", "2.25", "1e-3", "0.5", "3.000001"])]
    if lo is not None:
        opts.append(st.integers(max_value=lo - 1, min_value=-10 ** 12).map(str))
    if hi is not None:
        opts.append(st.integers(min_value=hi + 1, max_value=hi + 10 ** 12).map(str))
    return st.one_of(*opts)


def huge():
    """Counts and dimensions no machine runs: refused by the size estimates (in either spelling)."""
    return st.one_of(st.integers(min_value=10 ** 12, max_value=10 ** 18).map(str),
                     st.integers(min_value=12, max_value=18).map(lambda e: f"1e{e}"))


def count(lo, hi=None, size=True):
    return st.one_of(int_outside(lo, hi), huge()) if size else int_outside(lo, hi)


def choice_outside(choices):
    # no commas (a list's separator) and no glob characters (a pattern that might match)
    word = st.text(st.characters(blacklist_characters=",*?[]", blacklist_categories=("Cs", "Cc")),
                   min_size=1, max_size=8)
    return st.one_of(st.sampled_from(["", " ", "none", "NULL", "--x"]).filter(lambda s: s not in choices),
                     word.filter(lambda s: s not in choices and s.strip() == s and s))


def list_bad(choices=None, item_bad=None):
    """Comma lists a flag must refuse: empty, stray commas, duplicates, unknown (or bad) items."""
    opts = [st.sampled_from(["", " ", ",", ",,", " , "])]
    if choices:
        good = st.sampled_from(choices)
        opts += [good.map(lambda c: f"{c},"), good.map(lambda c: f",{c}"), good.map(lambda c: f"{c},,{c}"),
                 good.map(lambda c: f"{c},{c}"),
                 st.tuples(good, choice_outside(choices)).map(lambda t: f"{t[0]},{t[1]}".replace(",,", ",x,"))]
    if item_bad is not None:
        opts.append(item_bad)
    return st.one_of(*opts)


def bad_file():
    return st.sampled_from(["", " ", "adir", "missing/sub/out.file", "exists.txt/out.file",
                            "/proc/assocmem-fuzz/out.file", "/proc/out.file", "x" * 300, "adir/" + "y" * 300])


def bad_dir():
    return st.sampled_from(["", " ", "exists.txt", "exists.txt/sub", "missing/sub", "/proc/assocmem-fuzz",
                            "/sys/assocmem-fuzz", "x" * 300])


def _matches_nothing_somewhere(text: str) -> bool:
    """A --only value is bad when it is empty or one of its patterns matches no claim ID."""
    import fnmatch

    from assocmem import registry

    ids = list(registry.load())
    pats = [p.strip() for p in text.split(",")]
    return not all(pats) or any(not any(fnmatch.fnmatchcase(i, p) for i in ids) for p in pats) \
        or len(set(pats)) < len(pats)


# -- one spec per sub-command: base argv, and flag -> strategy of bad values ----------
TRAIN = ["gpu", "train", "random_keys", "--model", "linear", "--device", "cpu", "--steps", "1",
         "--batch-size", "2", "--eval", "none", "--no-progress", "--out", "runs"]
CURRICULUM = ["gpu", "train", "swap_tracking", "--model", "curriculum-linear-nope", "--device", "cpu",
              "--steps", "1", "--batch-size", "2", "--eval", "none", "--no-progress", "--out", "runs"]
SPECS = {
    "collision": (["collision", "--json"], {
        "--rho": real_outside(-1, 1), "--p0": real_outside(0, scale=True),
        "--r2": real_outside(0, lo_open=True, scale=True), "--l2": real_outside(0, scale=True),
        "--n-b": count(0), "--n-a": count(0), "--rounds": count(0), "--D": count(2), "--m": count(2),
        "--variants": list_bad(("dense", "diag", "reset", "iso", "linear")),
        "--iso-c": real_outside(0, lo_open=True, scale=True),
        "--reset-lambda": real_outside(0, lo_open=True, scale=True), "--la-gain": real_outside(0, scale=True),
    }),
    "snr": (["snr", "--kernel", "exp", "--n", "8", "--d", "8", "--samples", "50", "--json"], {
        "--kernel": choice_outside(("linear", "relu", "exp")), "--n": count(1), "--d": count(1),
        "--tau": st.one_of(real_outside(0, lo_open=True, scale=True),
                           st.floats(min_value=1e-90, max_value=0.8).map(_num)),   # E[...] diverges
        "--values": choice_outside(("sphere", "gaussian")), "--dv": count(1), "--samples": count(2),
        "--seed": int_outside(0, 2 ** 63 - 1),
    }),
    "swap": (["swap", "--n", "16", "--swaps", "20", "--json"], {
        "--n": count(2), "--d": count(1), "--swaps": count(0), "--kernel": choice_outside(("exact", "round2", "linear")),
        "--eps": st.one_of(real_outside(0, 1, lo_open=True, hi_open=True),
                           st.floats(min_value=0.125, max_value=0.999).map(_num),       # >= 1/8: exact kernel
                           st.floats(min_value=1e-300, max_value=1e-4).map(_num)),      # d beyond any memory
        "--seed": int_outside(0, 2 ** 63 - 1),
    }),
    "verify": (["verify", "--no-progress", "--only", "bl.iso_ablation"], {
        "--only": st.one_of(list_bad(("bl.iso_ablation", "bl.*")),
                            st.sampled_from(["zz.*", "bl.iso_ablation,zz", "BL.*", "bl.iso_ablation ,nope"])
                            ).filter(_matches_nothing_somewhere),
        "--report": bad_file(),
    }),
    "figures": (["figures", "--only", "bl_fig3a"], {
        "--format": list_bad(("png", "pdf", "svg"), st.sampled_from(["jpg", "PNG", "png,jpeg", "eps"])),
        "--out": bad_dir(),
        "--only": st.sampled_from(["", "nope", "bl_fig3a bl_fig3a", "BL_FIG3A"]),
    }),
    "gpu bench": (["gpu", "bench", "--shapes", "tiny", "--ops", "fused"], {
        "--shapes": list_bad(("S1", "S2", "S3", "S4", "tiny"), st.sampled_from(["S5", "tiny,S9", "s1"])),
        "--ops": list_bad(("fused", "chunk", "fla"), st.sampled_from(["recurrent", "fused,fla2", "FLA"])),
        "--modes": list_bad(("fwd", "fwdbwd"), st.sampled_from(["bwd", "fwd,both"])),
        "--chunk-sizes": list_bad(("16", "32", "64"), st.sampled_from(["8", "48", "16,128", "1e9", "-16"])),
        "--bwd-segments": st.sampled_from(["", "0", "-4", "16,16", "none,none", "2.5", "x", "16,", "None,0"]),
        "--chunk-config": st.sampled_from(["", "BV", "BV=8", "BV=16,BV=32", "super_chunks=2", "segments=0",
                                           "cov_kernel=fast", "=3"]),
        "--out": bad_file(),
    }),
    "gpu train": (TRAIN, {
        "--model": choice_outside(("bl", "reset", "delta", "linear", "gla", "diag")),
        "--seed": int_outside(0, 2 ** 63 - 1),
        "--steps": st.one_of(int_outside(1, 10_000_000), st.integers(10 ** 6, 10 ** 7).map(str)),  # CPU: hours
        "--batch-size": st.one_of(int_outside(1), st.integers(10 ** 8, 10 ** 15).map(str)),
        "--device": choice_outside(("auto", "cuda", "cpu")),
        "--eval": choice_outside(("auto", "full", "quick", "none")), "--out": bad_dir(),
    }),
    "gpu train curriculum": (CURRICULUM, {
        "--curriculum-lengths": list_bad(("32", "64", "128"),
                                         st.sampled_from(["0", "-1", "a,b", "64,32", "32,32", "1e9", "10000000"])),
        "--curriculum-threshold": real_outside(0, 1),
        "--curriculum-window": st.one_of(int_outside(1), st.integers(2, 10 ** 12).map(str)),   # > --steps 1
        "--curriculum-switch-at": list_bad(("10", "20", "30"), st.sampled_from(["0", "x", "30,20,10", "5"])),
    }),
    "gpu sweep": (["gpu", "sweep", "random_keys", "--out", "runs", "--models", "linear", "--seeds", "0",
                   "--steps", "1", "--batch-size", "2"], {
        "--models": list_bad(("bl", "linear", "delta"), st.sampled_from(["mamba", "linear,mamba"])),
        "--seeds": list_bad(("0", "1", "2"), st.sampled_from(["-1", "a", "1.5", "0,-3"])),
        "--steps": int_outside(1, 10_000_000), "--batch-size": st.one_of(int_outside(1), huge()),
        "--workers-per-device": int_outside(1, 256), "--out": bad_dir(),
    }),
}

# contradictory combinations: (argv, the flags the message may name)
COMBOS = {
    "collision": [(["collision", "--iso-c", "0.5"], ("--iso-c",)),
                  (["collision", "--variants", "iso"], ("--iso-c",)),
                  (["collision", "--variants", "dense", "--reset-lambda", "0.1"], ("--reset-lambda",)),
                  (["collision", "--variants", "reset", "--la-gain", "0.2"], ("--la-gain",)),
                  (["collision", "--D", "6", "--m", "7"], ("--D", "--m")),
                  (["collision", "--rounds", "0", "--n-b", "0", "--n-a", "0"], ("--rounds", "--n-b", "--n-a")),
                  (["collision", "--rho", "-inf"], ("--rho",))],
    "snr": [(["snr", "--kernel", "linear", "--n", "8", "--d", "8", "--tau", "2"], ("--tau",)),
            (["snr", "--kernel", "relu", "--n", "8", "--d", "8", "--tau", "2"], ("--tau",)),
            (["snr", "--n", "8", "--d", "8"], ("--kernel",)),
            (["snr", "--kernel", "linear", "--n", "100000", "--d", "100000", "--samples", "10"], ("--n", "--d"))],
    "swap": [(["swap", "--n", "16", "--d", "8"], ("--d",)), (["swap"], ("--n",))],
    "gpu train": [(TRAIN + ["--curriculum-window", "5"], ("--curriculum-window",)),
                  (["gpu", "train", "swap_tracking", "--model", "direct-linear-nope", "--device", "cpu",
                    "--curriculum-threshold", "0.5", "--out", "runs"], ("--curriculum-threshold",)),
                  (TRAIN + ["--resume"], ("--resume",)),
                  (["gpu", "train", "--model", "bl"], ("task",))],
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    # import what the commands import, so the memory and time bounds measure the refusals, not imports
    from assocmem import registry
    import assocmem.figures  # noqa: F401

    registry.load()
    try:
        import torch  # noqa: F401
        import assocmem.gpu.bench  # noqa: F401
        import assocmem.gpu.tasks.train  # noqa: F401
    except ImportError:
        pass
    d = tmp_path_factory.mktemp("fuzz")
    (d / "exists.txt").write_text("x")
    (d / "adir").mkdir()
    return d


def _files(d: Path) -> set:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


TIMEOUT_S = 60


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"no answer within {TIMEOUT_S} s")


def _run(argv, cwd: Path):
    """``main(argv)`` in ``cwd``: (status, stdout, stderr, seconds, peak-RSS growth in MB, new paths)."""
    before = _files(cwd)
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    prev = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)               # a hang fails the example instead of stalling the suite
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, prev)
        os.chdir(old)
    dt = time.perf_counter() - t0
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    return rc, out.getvalue(), err.getvalue(), dt, grew, sorted(_files(cwd) - before)


def _assert_clean(argv, flags, cwd):
    rc, out, err, dt, grew, new = _run(argv, cwd)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    shown = " ".join(repr(a) for a in argv)
    assert rc == 2, f"{shown}: exit {rc}, stderr {err[-400:]!r}"
    assert "Traceback" not in err, f"{shown}: traceback\n{err}"
    assert len(lines) == 1, f"{shown}: {len(lines)} stderr lines: {err[-600:]!r}"
    assert any(f in lines[0] for f in flags), f"{shown}: the line does not name {flags}: {lines[0]!r}"
    assert not new, f"{shown}: wrote {new}"
    assert dt < 30, f"{shown}: took {dt:.1f} s to refuse"
    assert grew < 400, f"{shown}: peak memory grew by {grew:.0f} MB before refusing"


@pytest.fixture(autouse=True)
def _limits(monkeypatch):
    # fixed limits, so a refusal does not depend on the machine running the tests
    monkeypatch.setenv("ASSOCMEM_MAX_MEMORY", "4G")
    monkeypatch.setenv("ASSOCMEM_MAX_SECONDS", "600")


def _needs(cmd):
    if cmd.startswith("gpu"):
        pytest.importorskip("torch")
        if cmd == "gpu bench":
            pytest.importorskip("triton")


# 25 examples per command in CI (about 30 s in all); ASSOCMEM_FUZZ_EXAMPLES=500 for a thorough, random run
_N = int(os.environ.get("ASSOCMEM_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize="ASSOCMEM_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("cmd", list(SPECS))
@FUZZ
@given(data=st.data())
def test_one_bad_flag_is_one_clean_line(cmd, data, scratch):
    _needs(cmd)
    base, flags = SPECS[cmd]
    flag = data.draw(st.sampled_from(sorted(flags)), label="flag")
    value = data.draw(flags[flag], label="value")
    if cmd == "figures" and flag == "--only":
        argv = ["figures", "--only", *(value.split() or [""])]
    else:
        argv = [a for i, a in enumerate(base) if not (a == flag or (i and base[i - 1] == flag))]
        argv += [flag, value] if not value.startswith("-") else [f"{flag}={value}"]
    _assert_clean(argv, (flag,), scratch)


@pytest.mark.parametrize("cmd", list(COMBOS))
def test_contradictory_combinations_are_one_clean_line(cmd, scratch):
    _needs(cmd)
    for argv, flags in COMBOS[cmd]:
        _assert_clean(argv, flags, scratch)

