#!/usr/bin/env python3
"""Whether a device call's carry fits, and what to do so that it does.

    python3 scripts/pack_carry.py [--carry .whl,.resume] [--limit-mib 64] [--repack]

A device call copies the checkout's tracked files (and untracked ones git does not ignore) and the
ignored paths it carries, at most 64 MiB together.  A cold machine needs the wheels (``.whl/``, about
5 MB) and an unfinished run's checkpoint (``.resume/ckpts.tgz.part-*``: 53 MB for GDN at width 256),
and the tracked tree is about 14 MB, so a checkpoint from another session may not fit beside them.

This prints the sizes (tree, each carried path, the total against the limit) and, when over:

- with ``--repack``, recompresses the checkpoint pieces into ``.resume/ckpts.tar.xz`` (xz -9e, which
  ``device_campaign.sh`` unpacks; about 2 % smaller for fp32 weights) and moves the pieces and
  ``results.tgz`` (the last call's results, already taken into ``results/`` by
  ``ingest_device_return.py``; a checkpoint carries its own curve and step) to ``.resume-aside/``,
  outside the carry;
- if it is still over, names the tracked folders the device does not read (figures and logs) with
  the commands that set them aside for the call and restore them after.

Exit status: 0 when the carry fits (after ``--repack``), 1 when it does not, 2 for a bad argument.
Run from the repository root.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# tracked folders that the device call never reads (the campaign reads results/<task>/*.json)
NOT_NEEDED_ON_DEVICE = ("results/figures", "docs/figures", "results/logs")
MiB = 2**20


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def tree_bytes(root: Path) -> int:
    """Bytes of the files a call copies besides the carried paths: tracked files that exist and
    untracked files git does not ignore."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout
    names = {n for n in out.decode().split("\0") if n}
    return sum((root / n).stat().st_size for n in names if (root / n).is_file())


def repack(resume: Path, aside: Path) -> int:
    """``resume/ckpts.tgz.part-*`` recompressed into ``resume/ckpts.tar.xz``; the pieces and
    ``results.tgz`` moved to ``aside``.  Returns the new file's bytes (0 when there were no pieces)."""
    parts = sorted(resume.glob("ckpts.tgz.part-*"))
    if not parts:
        return 0
    aside.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "ckpts.tgz"
        with open(whole, "wb") as fh:
            for p in parts:
                fh.write(p.read_bytes())
        unpacked = Path(tmp) / "x"
        with tarfile.open(whole) as tf:
            tf.extractall(unpacked, filter="data")
        xz = resume / "ckpts.tar.xz.tmp"
        with open(xz, "wb") as fh:
            tar = subprocess.Popen(["tar", "cf", "-", "-C", str(unpacked), "."], stdout=subprocess.PIPE)
            subprocess.run(["xz", "-9e", "-T0"], stdin=tar.stdout, stdout=fh, check=True)
            if tar.wait() != 0:
                raise RuntimeError("tar failed")
        xz.rename(resume / "ckpts.tar.xz")
    for p in parts + [resume / "results.tgz"]:
        if p.exists():
            shutil.move(str(p), str(aside / p.name))
    return (resume / "ckpts.tar.xz").stat().st_size


def report(root: Path, carry: list[str], limit: int) -> tuple[int, list[str]]:
    tree = tree_bytes(root)
    lines = [f"tree (tracked and untracked-not-ignored files): {tree / MiB:.1f} MiB"]
    total = tree
    for c in carry:
        b = _size(root / c)
        total += b
        lines.append(f"carry {c}: {b / MiB:.1f} MiB" + ("" if (root / c).exists() else " (absent)"))
    lines.append(f"total: {total / MiB:.1f} MiB of {limit / MiB:.0f}: " + ("fits" if total <= limit else "over"))
    return total, lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--carry", default=".whl,.resume", help="comma list of the paths the call carries")
    ap.add_argument("--limit-mib", type=float, default=64.0, help="what a call carries at most (64 MiB)")
    ap.add_argument("--repack", action="store_true",
                    help="when over, recompress .resume's checkpoint pieces into .resume/ckpts.tar.xz")
    a = ap.parse_args(argv)
    carry = [c.strip().rstrip("/") for c in a.carry.split(",") if c.strip()]
    if not carry or any(c.startswith("/") or ".." in Path(c).parts for c in carry):
        print(f"pack_carry: --carry: {a.carry!r} must name paths inside the checkout", file=sys.stderr)
        return 2
    if not a.limit_mib > 0:
        print(f"pack_carry: --limit-mib: {a.limit_mib} must be positive", file=sys.stderr)
        return 2
    if a.repack and shutil.which("xz") is None:
        print("pack_carry: --repack needs xz (Debian: apt-get install xz-utils)", file=sys.stderr)
        return 2
    root = Path.cwd()
    if not (root / ".git").exists():
        print("pack_carry: run it from the repository root (no .git here)", file=sys.stderr)
        return 2
    limit = int(a.limit_mib * MiB)
    total, lines = report(root, carry, limit)
    print("\n".join(lines))
    if total <= limit:
        return 0
    if a.repack and ".resume" in carry:
        b = repack(root / ".resume", root / ".resume-aside")
        if b:
            print(f"repacked: .resume/ckpts.tar.xz {b / MiB:.1f} MiB; the pieces and results.tgz are in .resume-aside/")
            total, lines = report(root, carry, limit)
            print("\n".join(lines))
            if total <= limit:
                return 0
    elif any((root / ".resume").glob("ckpts.tgz.part-*")) and ".resume" in carry:
        print("over: --repack recompresses the checkpoint pieces (xz)")
    spare = [(d, _size(root / d)) for d in NOT_NEEDED_ON_DEVICE if (root / d).exists()]
    if total - sum(b for _, b in spare) <= limit:
        names = " ".join(d for d, _ in spare)
        print(f"still over by {(total - limit) / MiB:.1f} MiB: the device does not read {names} "
              f"({sum(b for _, b in spare) / MiB:.1f} MiB); for the call: rm -rf {names}; "
              f"after it: git checkout -- {names}")
    else:
        print(f"over by {(total - limit) / MiB:.1f} MiB even without the figures and logs: carry less "
              "(a machine held warm keeps the wheels and its checkpoint stash between calls)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
