#!/usr/bin/env python3
"""Take what one device call of ``scripts/device_campaign.sh`` returned into the checkout.

    python3 scripts/ingest_device_return.py RETURNED --tag s51call1

``RETURNED`` is the folder the call's ``$OUT`` files came back to (``files_at``; copy it somewhere
first if the next call may reuse that folder).  From the repo root, this:

- puts ``results.tgz`` and ``triton-cache.tgz`` in ``.resume/`` for the next call, and replaces the
  checkpoint pieces there with the returned ones, keeping beside them the checkpoints of the pieces there
  before whose runs neither came back nor finished (a run whose checkpoint the call left behind resumes
  from the older one rather than from step 0; on a warm machine its own newer copy wins, since
  ``device_campaign.sh`` does not unpack a carried checkpoint over one the machine kept); in a git
  checkout, while the checkpoints (merged, or only the returned ones) would put the next carry over 64 MiB
  the one holding the least training goes, kept or returned alike (the wall time in the run's
  ``.partial.json``), each named;
- copies every result JSON that is new or changed into ``results/``: unfinished runs'
  ``.partial.json`` always (they only move forward), a finished run's JSON only when the checkout has
  none (a finished result that differs from the committed one is reported and left alone unless
  ``--overwrite``: committed results are not written over silently);
- removes a ``.partial.json`` once its run's finished JSON is in ``results/``;
- copies the campaign log and each run's log into ``results/logs/`` as ``DATE-TAG-campaign.log`` and
  ``DATE-TAG-TASK-RUN.log``, skipping a log whose text is already there under another call's name
  (a warm machine returns the last call's logs again);
- copies the benchmarks' files (``bench/``) to ``.resume/bench-TAG/`` and lists them, skipping a file
  already taken from an earlier call (a warm machine returns the last benchmarks again): they go into
  ``benchmarks/`` under names that say the card and the question, by hand.

It prints one line per action, then (in a git checkout) whether ``.whl`` and ``.resume`` fit beside the
tree in what a call to a cold machine carries (``scripts/pack_carry.py``), and writes nothing outside
``results/`` and ``.resume/``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import filecmp
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

SKIP_DIRS = {"figures", "logs", "bench"}      # copies of committed material, or not results


def _unpack(tgz: Path, into: Path) -> Path:
    with tarfile.open(tgz) as tf:
        tf.extractall(into, filter="data")
    return into


def _over(repo: Path) -> bool:
    """Whether the next carry to a cold machine (tree, ``.whl``, ``.resume``) is over its limit."""
    total, limit = _carry_total(repo)
    return total > limit


def _log_name(rel: Path, date: str, tag: str) -> str:
    return f"{date}-{tag}-" + "-".join(rel.with_suffix("").parts) + ".log"


def ingest(returned: Path, tag: str, repo: Path, *, date: str | None = None, overwrite: bool = False,
           out=print) -> dict:
    """Do what the module docstring says; returns the lists of what was done, by kind."""
    returned, repo = Path(returned), Path(repo)
    if not tag or any(c in tag for c in "/ \\"):
        raise ValueError(f"tag must be a short name without slashes or spaces (such as s51call1), not {tag!r}")
    if not returned.is_dir():
        raise ValueError(f"returned must be the folder a device call's files came back to: {returned} is not one")
    if not (repo / "results").is_dir():
        raise ValueError(f"repo must be the checkout's root (it has results/): {repo} has none")
    date = date or _dt.date.today().isoformat()
    tgz = returned / "results.tgz"
    if not tgz.is_file():
        raise ValueError(f"returned has no results.tgz: {returned} is not what device_campaign.sh returns")
    done = {"resume": [], "new": [], "updated": [], "kept": [], "removed": [], "logs": [], "bench": []}
    resume = repo / ".resume"
    resume.mkdir(exist_ok=True)
    for name in ("results.tgz", "triton-cache.tgz"):
        if (returned / name).is_file():
            shutil.copyfile(returned / name, resume / name)
            done["resume"].append(name)
    before = tempfile.TemporaryDirectory()             # the checkpoints carried so far, read before they go
    older = _read_checkpoints(sorted(resume.glob("ckpts.tgz.part-*")), resume / "ckpts.tar.xz", Path(before.name))
    for old in list(resume.glob("ckpts.tgz.part-*")) + list(resume.glob("ckpts.tar.xz")):
        old.unlink()
    back = sorted(returned.glob("ckpts.tgz.part-*"))
    for piece in back:
        shutil.copyfile(piece, resume / piece.name)
        done["resume"].append(piece.name)

    with tempfile.TemporaryDirectory() as tmp:
        x = _unpack(tgz, Path(tmp))
        res = x / "results"
        bench = [b for b in (x / "bench", res / "bench") if b.is_dir()]
        if res.is_dir():
            for f in sorted(res.rglob("*.json")):
                rel = f.relative_to(res)
                if rel.parts[0] in SKIP_DIRS or len(rel.parts) < 2:
                    continue
                dst = repo / "results" / rel
                if dst.is_file() and filecmp.cmp(f, dst, shallow=False):
                    continue
                finished = not f.name.endswith(".partial.json")
                if not finished and (dst.with_name(f.name[: -len(".partial.json")] + ".json").is_file()
                                     or f.with_name(f.name[: -len(".partial.json")] + ".json").is_file()):
                    continue                         # its run has finished: the partial curve is not needed
                if dst.is_file() and finished and not overwrite:
                    done["kept"].append(str(rel))
                    out(f"kept: results/{rel} differs from the returned one (a rerun?); pass --overwrite to take it")
                    continue
                kind = "updated" if dst.is_file() else "new"
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dst)
                done[kind].append(str(rel))
                out(f"{kind}: results/{rel}")
            logs = repo / "results" / "logs"
            logs.mkdir(exist_ok=True)
            existing = sorted(logs.glob("*.log"))
            cands = [(res / "campaign.log", Path("campaign.log"))] if (res / "campaign.log").is_file() else []
            cands += [(f, f.relative_to(res)) for f in sorted(res.rglob("*.log"))
                      if f.relative_to(res).parts[0] not in SKIP_DIRS and len(f.relative_to(res).parts) > 1]
            for f, rel in cands:
                if any(filecmp.cmp(f, e, shallow=False) for e in existing):
                    continue
                dst = logs / _log_name(rel, date, tag)
                shutil.copyfile(f, dst)
                done["logs"].append(dst.name)
                out(f"log: results/logs/{dst.name}")
        for f in sorted((repo / "results").rglob("*.partial.json")):
            if f.with_name(f.name[: -len(".partial.json")] + ".json").is_file():
                f.unlink()
                done["removed"].append(str(f.relative_to(repo / "results")))
                out(f"removed: {f.relative_to(repo)} (its run finished)")
        # a warm machine returns the last benchmarks again: a file already taken (same name, same bytes) is not
        seen = [e for e in resume.glob("bench-*/**/*") if e.is_file()]
        for b in bench:
            dst = resume / f"bench-{tag}"
            for f in sorted(p for p in b.rglob("*") if p.is_file()):
                if any(e.name == f.name and filecmp.cmp(f, e, shallow=False) for e in seen):
                    continue
                (dst / f.relative_to(b)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dst / f.relative_to(b))
                done["bench"].append(str((dst / f.relative_to(b)).relative_to(resume)))
        if done["bench"]:
            out(f"bench: {len(done['bench'])} file(s) in .resume/bench-{tag}/ (name and commit them under benchmarks/)")
        # the older checkpoints whose runs neither came back nor finished (here or in this return) stay
        with tempfile.TemporaryDirectory() as tmp2:
            newer = _read_checkpoints(back, None, Path(tmp2)) if back else {}
            keep = {n: f for n, f in (older or {}).items() if n not in (newer or {})
                    and not any((d / (n[: -len(".ckpt.pt")] + ".json")).is_file() for d in (repo, x))}
            over = bool(newer) and (repo / ".git").exists() and _over(repo)
            if newer is not None and (keep or over):
                # in a git checkout, while the next carry would be over its limit the checkpoint holding the least
                # training goes (the wall time in its run's .partial.json), kept or returned alike: that is
                # what its run would have to train again
                def training(n):
                    return _wall_s(repo / (n[: -len(".ckpt.pt")] + ".partial.json"))

                pool = {**keep, **newer}
                order = sorted(pool, key=lambda n: (training(n), n))
                while True:
                    for p in resume.glob("ckpts.tgz.part-*"):
                        p.unlink()
                    pieces = _write_pieces(pool, resume) if pool else []
                    if not pool or not (repo / ".git").exists():
                        break
                    total, limit = _carry_total(repo)
                    if total <= limit:
                        break
                    n = order.pop(0)
                    del pool[n]
                    done.setdefault("ckpt_dropped", []).append(n)
                    out(f"checkpoint dropped, over what the next call carries: {n} ({training(n):.0f} s of "
                        f"training; {'returned by this call' if n in newer else 'from the pieces before'})")
                done["resume"] = [n for n in done["resume"] if not n.startswith("ckpts.tgz.part-")] + pieces
                done["ckpt_kept"] = sorted(n for n in pool if n in keep)
                for n in done["ckpt_kept"]:
                    out(f"checkpoint kept from the pieces before (its run neither came back nor finished): {n}")
    before.cleanup()
    if older is None:
        out("checkpoint pieces before: unreadable, dropped")
    out(f"resume: {', '.join(done['resume'])} in .resume/ for the next call")
    if (repo / ".git").exists():
        done["carry"] = _carry_line(repo)
        out(done["carry"])
    return done


PIECE = 15 * 1024 * 1024         # the size device_campaign.sh splits checkpoint archives into


def _read_checkpoints(pieces, xz, into: Path):
    """{member name: extracted file} of the ``*.ckpt.pt`` in the concatenated gzip ``pieces`` (or the ``xz``
    archive ``pack_carry.py --repack`` writes), unpacked under ``into``; {} when there are none, None when
    they cannot be read (then nothing of them is kept)."""
    import io

    blobs = [(b"".join(p.read_bytes() for p in pieces), "r:gz")] if pieces else []
    if xz is not None and xz.is_file():
        blobs.append((xz.read_bytes(), "r:xz"))
    found = {}
    try:
        for data, mode in blobs:
            with tarfile.open(fileobj=io.BytesIO(data), mode=mode) as tf:
                members = [m for m in tf.getmembers() if m.isfile() and m.name.endswith(".ckpt.pt")]
                tf.extractall(into, members=members, filter="data")
                found.update({m.name: into / m.name for m in members})
    except (tarfile.TarError, OSError, EOFError):
        return None
    return found


def _write_pieces(files: dict, resume: Path) -> list:
    """The checkpoints ``files`` ({member name: path}) as one gzip archive split into 15 MiB
    ``ckpts.tgz.part-aa``, ``-ab``, ... in ``resume`` (what device_campaign.sh unpacks); their names."""
    import io
    import string

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in sorted(files):
            tf.add(files[name], arcname=name)
    data, names = buf.getvalue(), []
    for i in range(0, len(data), PIECE):
        k = i // PIECE
        name = "ckpts.tgz.part-" + string.ascii_lowercase[k // 26] + string.ascii_lowercase[k % 26]
        (resume / name).write_bytes(data[i:i + PIECE])
        names.append(name)
    return names


CARRY_MIB = 64.0                 # what a call to a cold machine carries at most


def _wall_s(partial: Path) -> float:
    """The training wall time a stopped run's ``.partial.json`` records (0 where there is none)."""
    import json

    try:
        return float(json.loads(partial.read_text()).get("wall_s", 0.0))
    except (OSError, ValueError, AttributeError):
        return 0.0


def _carry_total(repo: Path, limit_mib: float | None = None) -> tuple:
    """(bytes, limit in bytes) of what the next call to a cold machine carries: ``.whl`` and ``.resume``
    beside the tree (``scripts/pack_carry.py``'s count)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pack_carry", Path(__file__).with_name("pack_carry.py"))
    pc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pc)
    limit = (CARRY_MIB if limit_mib is None else limit_mib) * pc.MiB
    return pc.report(repo, [".whl", ".resume"], limit)[0], limit


def _carry_line(repo: Path, limit_mib: float | None = None) -> str:
    """Whether the next call can carry ``.whl`` and ``.resume`` beside the tree to a cold machine
    (``scripts/pack_carry.py``'s count against ``limit_mib``, 64 MiB)."""
    total, limit = _carry_total(repo, limit_mib)
    limit_mib = limit / (1024 * 1024)
    head = f"carry to a cold machine (.whl, .resume, the tree): {total / 2**20:.1f} MiB of {limit_mib:g}"
    return head + (": fits" if total <= limit else ": over; python3 scripts/pack_carry.py --repack")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("returned", help="the folder a device call's files came back to")
    ap.add_argument("--tag", required=True, help="the call's name in log file names, such as s51call1")
    ap.add_argument("--date", default=None, help="the date in log file names (default: today)")
    ap.add_argument("--repo", default=".", help="the checkout's root (default: here)")
    ap.add_argument("--overwrite", action="store_true", help="take returned finished results over committed ones")
    a = ap.parse_args(argv)
    try:
        ingest(Path(a.returned), a.tag, Path(a.repo), date=a.date, overwrite=a.overwrite)
    except ValueError as exc:
        flag = {"tag": "--tag", "returned": "RETURNED", "repo": "--repo"}.get(str(exc).split(" ")[0], "")
        print(f"ingest_device_return: {flag + ': ' if flag else ''}{exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
