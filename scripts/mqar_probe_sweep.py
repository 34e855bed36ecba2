"""Run a named set of MQAR mixer probes (scripts/mqar_mixer_probe.py) side by side on one GPU.

The probes are small (width 128, T = 24): one of them uses a sliver of an H200, so a few run at once.
Each probe writes its own JSON under ``--out``; one whose JSON is there already is skipped, so a
sweep cut by a device call's limit resumes where it stopped.  A probe that runs past its share of
``--budget-s`` is stopped by its own ``--max-s`` and still tests what it learned.

    python scripts/mqar_probe_sweep.py mamba2-v1024 --out /tmp/probes --bundle $OUT/probes.tgz --parallel 6 --budget-s 330

``--bundle`` packs the folder into one ``.tgz`` at the end: a device call returns at most 8 files, and
on 3 December a sweep writing its JSONs under ``$OUT`` got one of twelve back.

Sweeps (``--list`` prints them):

- ``mamba2-v1024``: why Mamba2 does not bind at vocabulary 1,024 (issue 16).  The CPU probe of
  3 December found GDN at 1.00 and Mamba2 at chance after 2,000 steps at ``lr = 3e-3``; this sweep
  asks whether Zoology's own Mamba2 block (our ``mixers`` backbone: no gated convolution before the
  mixer), Mamba2's learning rate, the vocabulary, the number of steps or Zoology's initialisation
  changes that, with GDN at the same settings for reference.
- ``mamba2-vocab``: it does bind at 1,024, after a plateau whose end moves with the vocabulary, the
  rate and the block;
  this sweep asks where the plateau ends at 2,048, 4,096 and the paper's 8,192, at 3e-3, 1e-2 and
  3.2e-2 (seven probes, each as long as the budget allows).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

PROBE = Path(__file__).resolve().with_name("mqar_mixer_probe.py")

# the settings all probes of a sweep share: one configuration (T, P, b), fresh data every step
BASE = {"config": "24,4,1", "d-model": 128, "batch-size": 64, "warmup": 100, "n-test": 512}


def _mamba2_v1024() -> list[tuple[str, str, dict]]:
    # the long probes first (more than 5,000 steps: they take whatever the budget leaves them).  Zoology runs
    # Mamba2 in its own block (norm, mixer, residual: no BaseConv before it, no MLP), our backbone "mixers",
    # over the rates np.logspace(-3, -1.5, 4); ours, "zoology", puts the gated convolution before every mixer
    runs = [("mamba2-v1024-lr0.003-mixers-long", "mamba2",
             {"vocab": 1024, "lr": 3e-3, "steps": 8000, "backbone": "mixers"}),
            ("mamba2-v1024-lr0.003-long", "mamba2", {"vocab": 1024, "lr": 3e-3, "steps": 8000}),
            ("mamba2-v1024-lr0.01-mixers-long", "mamba2",
             {"vocab": 1024, "lr": 1e-2, "steps": 8000, "backbone": "mixers"}),
            ("mamba2-v1024-lr0.001-mixers", "mamba2",
             {"vocab": 1024, "lr": 1e-3, "steps": 3000, "backbone": "mixers"})]
    for lr in (3e-4, 1e-3, 3e-3, 1e-2):
        runs.append((f"mamba2-v1024-lr{lr:g}", "mamba2", {"vocab": 1024, "lr": lr, "steps": 3000}))
    runs.append(("gdn-v1024-lr0.003", "gdn", {"vocab": 1024, "lr": 3e-3, "steps": 3000}))
    for v in (256, 512):
        runs.append((f"mamba2-v{v}-lr0.003", "mamba2", {"vocab": v, "lr": 3e-3, "steps": 3000}))
    runs.append(("mamba2-v1024-lr0.001-initzoology", "mamba2",
                 {"vocab": 1024, "lr": 1e-3, "steps": 3000, "init": "zoology"}))
    return runs


def _mamba2_vocab() -> list[tuple[str, str, dict]]:
    """Where Mamba2's plateau ends as the vocabulary grows to the paper's 8,192, at our grid's top rate and
    above it (Zoology's grid reaches 1e-2 and 3.2e-2), with GDN at 8,192 for reference.  Every probe has a
    30,000-step schedule, so the rate stays high while the budget lasts; --max-s stops each one and it is
    tested where it stopped."""
    long = {"steps": 30000}
    runs = [("mamba2-v8192-lr0.01", "mamba2", {"vocab": 8192, "lr": 1e-2, **long}),
            ("mamba2-v8192-lr0.003", "mamba2", {"vocab": 8192, "lr": 3e-3, **long}),
            ("mamba2-v8192-lr0.032", "mamba2", {"vocab": 8192, "lr": 3.2e-2, **long}),
            ("mamba2-v8192-lr0.01-mixers", "mamba2", {"vocab": 8192, "lr": 1e-2, "backbone": "mixers", **long}),
            ("gdn-v8192-lr0.003", "gdn", {"vocab": 8192, "lr": 3e-3, **long})]
    for v in (2048, 4096):
        runs.append((f"mamba2-v{v}-lr0.01", "mamba2", {"vocab": v, "lr": 1e-2, **long}))
    return runs


SWEEPS = {"mamba2-v1024": _mamba2_v1024, "mamba2-vocab": _mamba2_vocab}


def command(spec: str, settings: dict, out: Path, device: str, max_s: float) -> list[str]:
    cmd = [sys.executable, str(PROBE), spec, "--device", device, "--out", str(out), "--max-s", f"{max_s:.0f}"]
    for k, v in {**BASE, **settings}.items():
        cmd += [f"--{k}", str(v)]
    return cmd


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweep", nargs="?", choices=sorted(SWEEPS))
    p.add_argument("--out", help="folder of the probes' JSONs (created; existing probes are skipped)")
    p.add_argument("--parallel", type=int, default=3, help="probes at once")
    p.add_argument("--budget-s", type=float, default=420.0, help="wall seconds for the whole sweep")
    p.add_argument("--device", default="cuda")
    p.add_argument("--bundle", help="at the end, pack the --out folder into this .tgz (one file to bring back)")
    p.add_argument("--list", action="store_true", help="print the sweep's probes and stop")
    a = p.parse_args(argv)
    if a.sweep is None:
        p.error("sweep: name one of " + ", ".join(sorted(SWEEPS)))
    if a.parallel < 1:
        p.error(f"--parallel {a.parallel}: must be >= 1")
    if not a.budget_s > 0:
        p.error(f"--budget-s {a.budget_s}: must be > 0")
    runs = SWEEPS[a.sweep]()
    if a.list:
        for name, spec, s in runs:
            print(name, spec, " ".join(f"--{k} {v}" for k, v in {**BASE, **s}.items()))
        return 0
    if not a.out:
        p.error("--out: required unless --list")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [r for r in runs if not (out / f"{r[0]}.json").exists()]
    t0, live = time.monotonic(), []
    while todo or live:
        live = [(n, q) for n, q in live if q.poll() is None]
        left = a.budget_s - (time.monotonic() - t0)
        while todo and len(live) < a.parallel and left > 30:
            name, spec, s = todo.pop(0)
            log = open(out / f"{name}.log", "w")
            # the long probes get what is left; the others a fair share of it
            share = left if s.get("steps", 0) > 5000 else min(left, a.budget_s / 2)
            q = subprocess.Popen(command(spec, s, out / f"{name}.json", a.device, share - 20),
                                 stdout=log, stderr=subprocess.STDOUT)
            live.append((name, q))
            print(f"started {name} (max {share - 20:.0f} s)", flush=True)
        if not live:
            break
        time.sleep(2)
    for name, _, _ in todo:
        print(f"not started: {name} (budget spent)", flush=True)
    if a.bundle:
        import tarfile
        with tarfile.open(a.bundle, "w:gz") as tar:
            tar.add(out, arcname=out.name)
        print(f"bundle: {a.bundle}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
