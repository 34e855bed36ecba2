"""Run a corpus of malformed command lines and classify what a user sees.

    python scripts/bad_input_corpus.py [--jobs 2] [--timeout 40] [--filter WORD] [-v]

Each case runs ``python -m assocmem ...`` in a fresh scratch folder (holding a
file ``exists.txt``, a folder ``adir/``, a checkpoint that runs code when
unpickled and one that is not a checkpoint), under a 6 GiB address-space
limit, and is classified:

* ``clean``     exit 2, exactly one stderr line naming the expected flag, no traceback, no new file;
* ``unnamed``   as clean, but the line does not name the flag;
* ``multiline`` exit 2 without traceback, more than one stderr line (argparse's usage + error);
* ``traceback`` a Python traceback on stderr;
* ``accepted``  exit 0 or 1 (a bad input was taken);
* ``files``     exit 2 but a file was written;
* ``hang``      ran past the timeout;
* ``killed``    killed by a signal (memory limit).

The corpus is a list of fixed cases: it is a measuring tape for the issue, not
the test (the test suite fuzzes the flags with hypothesis).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAST_CLAIM = "bl.iso_ablation"
TRAIN = ["gpu", "train", "random_keys", "--model", "linear", "--device", "cpu", "--steps", "2",
         "--batch-size", "2", "--eval", "none", "--no-progress"]


def corpus():
    C = []

    def add(flag, *argv):
        C.append((flag, list(argv)))

    # -- collision ------------------------------------------------------
    for v in ("nan", "inf", "-inf", "1.5", "-1.01", "abc", "", "1e400"):
        add("--rho", "collision", "--rho", v)
    for v in ("nan", "-1", "inf", "1e308", "1e300", "1e-320", "-inf", "x"):
        add("--p0", "collision", "--p0", v)
    for v in ("0", "-0.1", "nan", "inf", "1e-320", "1e308", "1e-300", "1e300", ""):
        add("--r2", "collision", "--r2", v)
    for v in ("-1", "inf", "nan", "1e308", "1e300"):
        add("--l2", "collision", "--l2", v)
    for v in ("-1", "1.5", "abc", "1e9", "10000000000", ""):
        add("--n-b", "collision", "--n-b", v)
    for v in ("-3", "1e9", "1000000000", "100000000", "", "nan"):
        add("--n-a", "collision", "--n-a", v)
    for v in ("-1", "1000000000", "1e7"):
        add("--rounds", "collision", "--rounds", v)
    add("--rounds", "collision", "--rounds", "0", "--n-b", "0", "--n-a", "0")
    for v in ("1", "0", "100000", "20000", "3", "-5", "1e12"):
        add("--D", "collision", "--D", v)
    for v in ("1", "0", "100000", "-2"):
        add("--m", "collision", "--m", v)
    add("--m", "collision", "--m", "7", "--D", "6")
    for v in ("", "nope", "dense,,nope", ",", "iso", "DENSE", " "):
        add("--variants" if v != "iso" else "--iso-c", "collision", "--variants", v)
    add("--iso-c", "collision", "--iso-c", "0.5")
    for v in ("nan", "-1", "0", "inf", "1e308"):
        add("--iso-c", "collision", "--variants", "iso", "--iso-c", v)
    for v in ("-1", "nan", "0", "inf", "1e308"):
        add("--reset-lambda", "collision", "--variants", "reset", "--reset-lambda", v)
    add("--reset-lambda", "collision", "--variants", "dense", "--reset-lambda", "0.1")
    for v in ("nan", "inf", "-inf", "1e308", "1e300"):
        add("--la-gain", "collision", "--variants", "linear", "--la-gain", v)
    add("--la-gain", "collision", "--variants", "dense", "--la-gain", "0.3")
    add("--bogus", "collision", "--bogus", "1")
    add("--json", "collision", "--json=3")
    # -- snr --------------------------------------------------------------
    S = ["snr", "--kernel", "linear", "--n", "8", "--d", "8"]
    add("--kernel", "snr", "--n", "8", "--d", "8")
    add("--kernel", "snr", "--kernel", "foo", "--n", "8", "--d", "8")
    for v in ("0", "-1", "1e9", "1000000000", "abc", ""):
        add("--n", "snr", "--kernel", "linear", "--n", v, "--d", "8")
    for v in ("0", "-1", "1000000", "1e9", "x"):
        add("--d", "snr", "--kernel", "linear", "--n", "8", "--d", v)
    for v in ("nan", "inf", "-inf", "0", "1e-300", "1e308", "-2", "abc"):
        add("--tau", "snr", "--kernel", "exp", "--n", "8", "--d", "8", "--tau", v)
    add("--tau", *S, "--tau", "3")
    add("--values", *S, "--values", "foo")
    for v in ("0", "-1", "1000000000", "y"):
        add("--dv", *S, "--dv", v)
    for v in ("1e9", "1000000000", "0", "1", "-5", "100000000", "z"):
        add("--samples", *S, "--samples", v)
    for v in ("-1", "abc", "", "1e30", "1.5"):
        add("--seed", *S, "--seed", v)
    add("--n", "snr", "--kernel", "linear", "--n", "100000", "--d", "100000", "--samples", "10")
    # -- swap -------------------------------------------------------------
    for v in ("1", "0", "-1", "1e9", "1000000000", "100000", "abc"):
        add("--n", "swap", "--n", v)
    for v in ("0", "-1", "1000000000", "x"):
        add("--d", "swap", "--n", "16", "--d", v)
    for v in ("1e-300", "1e-10", "0", "nan", "inf", "0.125", "-0.1", "1e-5", "abc"):
        add("--eps", "swap", "--n", "16", "--eps", v)
    for v in ("-1", "1e12", "1000000000000", "x"):
        add("--swaps", "swap", "--n", "16", "--swaps", v)
    add("--kernel", "swap", "--n", "16", "--kernel", "foo")
    add("--seed", "swap", "--n", "16", "--seed", "-1")
    add("--n", "swap", "--n", "100000", "--d", "100000", "--kernel", "linear")
    add("--eps", "swap", "--n", "16", "--kernel", "linear", "--eps", "1e-300")
    # -- verify -----------------------------------------------------------
    for v in ("zz.*", "", ",", f"{FAST_CLAIM},zz", " "):
        add("--only", "verify", "--no-progress", "--only", v)
    for v in ("missing/dir/r.md", "/proc/r.md", "", "adir", "exists.txt/r.md", "/sys/r.md"):
        add("--report", "verify", "--no-progress", "--only", FAST_CLAIM, "--report", v)
    add("--bogus", "verify", "--bogus")
    # -- figures ----------------------------------------------------------
    for v in ("", ",", "jpg", "png,,", " ", "PNG"):
        add("--format", "figures", "--only", "bl_fig3a", "--format", v)
    add("--only", "figures", "--only", "nope")
    add("--only", "figures", "--only", "")
    add("--only", "figures", "--only")
    for v in ("/proc/figs", "", "exists.txt", "exists.txt/sub", "/sys/figs"):
        add("--out", "figures", "--only", "bl_fig3a", "--out", v)
    # -- gpu bench --------------------------------------------------------
    for v in ("", "S9", ",", "tiny,S9"):
        add("--shapes", "gpu", "bench", "--shapes", v)
    for v in ("/proc/b.json", "", "adir", "missing/dir/b.json", "exists.txt/b.json"):
        add("--out", "gpu", "bench", "--shapes", "tiny", "--out", v)
    for v in ("48", "16,16", ""):
        add("--chunk-sizes", "gpu", "bench", "--chunk-sizes", v)
    for v in ("BV=8", "super_chunks=2", "BV"):
        add("--chunk-config", "gpu", "bench", "--chunk-config", v)
    # -- gpu train --------------------------------------------------------
    add("task", "gpu", "train")
    add("task", "gpu", "train", "nope", "--model", "bl")
    add("--model", "gpu", "train", "random_keys", "--model", "nope", "--device", "cpu")
    for v in ("0", "-1", "abc", "1e30"):
        add("--steps", *[a if a != "2" or i != TRAIN.index("--steps") + 1 else v for i, a in enumerate(TRAIN)])
    for v in ("0", "1e9", "1000000000", "-4", "10000000"):
        add("--batch-size", *[a if i != TRAIN.index("--batch-size") + 1 else v for i, a in enumerate(TRAIN)])
    for v in ("-1", "abc", ""):
        add("--seed", *TRAIN, "--seed", v)
    add("--device", "gpu", "train", "random_keys", "--model", "linear", "--device", "tpu")
    for v in ("/proc/runs", "", "exists.txt", "exists.txt/sub"):
        add("--out", *TRAIN, "--out", v)
    add("--resume", *TRAIN, "--resume", "--out", "adir")
    add("--resume", *TRAIN, "--resume", "--out", "evil")
    add("--resume", *TRAIN, "--resume", "--out", "junk")
    add("--eval", *TRAIN, "--eval", "foo")
    CU = ["gpu", "train", "swap_tracking", "--model", "curriculum-linear-nope", "--device", "cpu", "--steps", "2",
          "--batch-size", "2", "--eval", "none", "--no-progress"]
    for v in ("", "a,b", "0", "-1", "1000000000", "64,32"):
        add("--curriculum-lengths", *CU, "--curriculum-lengths", v)
    for v in ("nan", "2", "-1", "inf"):
        add("--curriculum-threshold", *CU, "--curriculum-threshold", v)
    for v in ("0", "-1", "1e9"):
        add("--curriculum-window", *CU, "--curriculum-window", v)
    add("--curriculum-switch-at", *CU, "--curriculum-switch-at", "x")
    add("--curriculum-lengths", *TRAIN, "--curriculum-lengths", "32,64")
    add("--steps", "gpu", "train", "collision_recall", "--model", "bl", "--device", "cpu", "--no-progress")
    add("--steps", *[a if i != TRAIN.index("--steps") + 1 else "5000000" for i, a in enumerate(TRAIN)])
    # -- gpu sweep --------------------------------------------------------
    SW = ["gpu", "sweep", "random_keys", "--out", "adir"]
    for v in ("0", "-1", "abc"):
        add("--workers-per-device", *SW, "--workers-per-device", v)
    for v in ("", "a", "-1", ",", "1,1"):
        add("--seeds", *SW, "--seeds", v)
    for v in ("", "nope", ","):
        add("--models", *SW, "--models", v)
    for v in ("0", "-1"):
        add("--steps", *SW, "--steps", v)
    add("--batch-size", *SW, "--batch-size", "0")
    add("--out", "gpu", "sweep", "random_keys", "--out", "/proc/x", "--models", "linear", "--seeds", "0",
        "--steps", "1", "--batch-size", "2")
    return C


EVIL = ("import torch, os\nclass E:\n    def __reduce__(self):\n        return (os.system, ('touch PWNED',))\n"
        "torch.save({'model': E()}, 'evil/random_keys/linear_s0.ckpt.pt')\n")


def scratch() -> Path:
    d = Path(tempfile.mkdtemp(prefix="corpus-"))
    (d / "exists.txt").write_text("x")
    (d / "adir").mkdir()
    (d / "evil" / "random_keys").mkdir(parents=True)
    (d / "junk" / "random_keys").mkdir(parents=True)
    (d / "junk" / "random_keys" / "linear_s0.ckpt.pt").write_bytes(b"not a checkpoint")
    return d


def _files(d: Path) -> set:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()}


def _limit():
    lim = 6 * 2 ** 30
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def run_case(flag, argv, timeout):
    d = scratch()
    if "evil" in argv:
        subprocess.run([sys.executable, "-c", EVIL], cwd=d, check=True)
    before = _files(d)
    t0 = time.time()
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    try:
        p = subprocess.run([sys.executable, "-m", "assocmem", *argv], cwd=d, capture_output=True, text=True,
                           timeout=timeout, preexec_fn=_limit, env=env)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, err = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    dt = time.time() - t0
    new = sorted(_files(d) - before)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc is None:
        cat = "hang"
    elif rc < 0:
        cat = "killed"
    elif "Traceback" in err or "MemoryError" in err:
        cat = "traceback"
    elif rc in (0, 1):
        cat = "accepted"
    elif new:
        cat = "files"
    elif len(lines) != 1:
        cat = "multiline"
    elif flag not in lines[0]:
        cat = "unnamed"
    else:
        cat = "clean"
    subprocess.run(["rm", "-rf", str(d)])
    return cat, flag, argv, rc, dt, (lines[-1] if lines else ""), new


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=40)
    ap.add_argument("--filter", default=None)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    cases = [c for c in corpus() if a.filter is None or a.filter in " ".join(c[1])]
    counts = {}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(run_case, f, argv, a.timeout) for f, argv in cases]
        for fut in futs:
            cat, flag, argv, rc, dt, last, new = fut.result()
            counts[cat] = counts.get(cat, 0) + 1
            if a.v or cat != "clean":
                print(f"{cat:<9} rc={rc} {dt:5.1f}s  {' '.join(repr(x) if not x or ' ' in x else x for x in argv)}"
                      f"\n          -> {last[:200]}" + (f"  new files: {new[:3]}" if new else ""), flush=True)
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
