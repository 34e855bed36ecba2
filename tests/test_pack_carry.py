"""scripts/pack_carry.py: whether a device call's carry fits, and the repacking that makes it fit (a synthetic
checkout: a git repository with a tracked file, wheels and checkpoint pieces)."""
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pack_carry.py"
KiB = 1024
needs_xz = pytest.mark.skipif(shutil.which("xz") is None, reason="needs xz (the repacking's compressor)")


def _run(cwd, *args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def checkout(tmp_path):
    """A repository with 20 KiB tracked (10 of them figures), 10 KiB of wheels, a checkpoint of 30 KiB of
    random bytes in gzip pieces and a 40 KiB results.tgz in .resume/."""
    root = tmp_path / "repo"
    (root / "results" / "figures").mkdir(parents=True)
    (root / "code.py").write_bytes(os.urandom(10 * KiB))
    (root / "results" / "figures" / "f.png").write_bytes(os.urandom(10 * KiB))
    (root / ".gitignore").write_text("/.whl/\n/.resume/\n/.resume-aside/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    (root / ".whl").mkdir()
    (root / ".whl" / "a.whl").write_bytes(os.urandom(10 * KiB))
    res = root / ".resume"
    res.mkdir()
    ck = os.urandom(30 * KiB)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("results/mqar/run_s0.ckpt.pt")
        info.size = len(ck)
        tf.addfile(info, io.BytesIO(ck))
    data = buf.getvalue()
    half = len(data) // 2
    (res / "ckpts.tgz.part-aa").write_bytes(data[:half])
    (res / "ckpts.tgz.part-ab").write_bytes(data[half:])
    (res / "results.tgz").write_bytes(os.urandom(40 * KiB))
    return root, ck


def test_a_carry_that_fits_is_said_to_and_nothing_moves(checkout):
    root, _ = checkout
    p = _run(root, "--limit-mib", "1")
    assert p.returncode == 0 and "fits" in p.stdout, p.stdout + p.stderr
    assert "tree (tracked" in p.stdout and "carry .resume" in p.stdout
    assert sorted(x.name for x in (root / ".resume").iterdir()) == ["ckpts.tgz.part-aa", "ckpts.tgz.part-ab",
                                                                    "results.tgz"]


def test_over_without_repack_names_it_and_moves_nothing(checkout):
    root, _ = checkout
    p = _run(root, "--limit-mib", str(80 / 1024))          # 20 + 10 + ~31 + 40 KiB is over 80
    assert p.returncode == 1 and "over" in p.stdout and "--repack" in p.stdout
    assert not (root / ".resume" / "ckpts.tar.xz").exists() and not (root / ".resume-aside").exists()


@needs_xz
def test_repack_makes_it_fit_and_keeps_the_checkpoint_bytes(checkout):
    root, ck = checkout
    p = _run(root, "--limit-mib", str(80 / 1024), "--repack")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "repacked" in p.stdout and p.stdout.rstrip().endswith("fits")
    assert sorted(x.name for x in (root / ".resume").iterdir()) == ["ckpts.tar.xz"]
    assert sorted(x.name for x in (root / ".resume-aside").iterdir()) == ["ckpts.tgz.part-aa", "ckpts.tgz.part-ab",
                                                                          "results.tgz"]
    # what device_campaign.sh does with it: tar xJf into $OUT
    out = root / "out"
    out.mkdir()
    subprocess.run(["tar", "xJf", str(root / ".resume" / "ckpts.tar.xz"), "-C", str(out)], check=True)
    assert (out / "results" / "mqar" / "run_s0.ckpt.pt").read_bytes() == ck


@needs_xz
def test_still_over_names_the_folders_the_device_does_not_read(checkout):
    root, _ = checkout
    p = _run(root, "--limit-mib", str(55 / 1024), "--repack")    # ~20 + 10 + ~31: over until the figures go
    assert p.returncode == 1
    assert "rm -rf results/figures" in p.stdout and "git checkout -- results/figures" in p.stdout
    assert (root / "results" / "figures" / "f.png").exists()        # named, not removed


@pytest.mark.parametrize("args,flag", [(["--carry", "/etc"], "--carry"), (["--carry", "../x"], "--carry"),
                                       (["--limit-mib", "0"], "--limit-mib"), (["--carry", ","], "--carry")])
def test_bad_argument_is_one_line_naming_the_flag(checkout, args, flag):
    root, _ = checkout
    p = _run(root, *args)
    assert p.returncode == 2 and flag in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (root / ".resume-aside").exists() and not (root / ".resume" / "ckpts.tar.xz").exists()
