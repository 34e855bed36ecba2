"""scripts/ingest_device_return.py: a device call's return taken into a checkout (a synthetic one)."""
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ingest_device_return.py"


def _module():
    spec = importlib.util.spec_from_file_location("ingest_device_return", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tgz(path: Path, files: dict):
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    (r / "results" / "mqar").mkdir(parents=True)
    (r / "results" / "logs").mkdir()
    (r / "results" / "mqar" / "done.json").write_text(json.dumps({"acc": 0.5}))
    (r / "results" / "mqar" / "fin.partial.json").write_text(json.dumps({"step": 10}))
    (r / "results" / "mqar" / "run.partial.json").write_text(json.dumps({"step": 100}))
    (r / ".resume").mkdir()
    (r / ".resume" / "ckpts.tgz.part-zz").write_text("stale")
    return r


def _returned(tmp_path, ckpt=True, log="run log text\n"):
    ret = tmp_path / "ret"
    ret.mkdir(exist_ok=True)
    _tgz(ret / "results.tgz", {
        "results/mqar/done.json": json.dumps({"acc": 0.9}),            # differs from the committed one
        "results/mqar/fin.json": json.dumps({"acc": 0.8}),             # its run finished
        "results/mqar/run.partial.json": json.dumps({"step": 200}),    # progress
        "results/mqar/probes/p.json": json.dumps({"x": 1}),            # new, nested
        "results/figures/ignored.json": "{}",
        "results/campaign.log": "campaign text\n",
        "results/mqar/run.log": log,
        "results/bench/gpu_bench.json": "{}",
    })
    (ret / "triton-cache.tgz").write_bytes(b"cache")
    if ckpt:
        (ret / "ckpts.tgz.part-aa").write_bytes(b"piece")
    return ret


def test_a_return_lands_where_the_next_call_and_the_commit_need_it(tmp_path, repo):
    lines = []
    done = _module().ingest(_returned(tmp_path), "s9call1", repo, date="2026-12-06", out=lines.append)
    res = repo / "results"
    assert json.loads((res / "mqar" / "done.json").read_text()) == {"acc": 0.5}      # committed result kept
    assert done["kept"] == ["mqar/done.json"] and any("--overwrite" in ln for ln in lines)
    assert json.loads((res / "mqar" / "fin.json").read_text()) == {"acc": 0.8}
    assert not (res / "mqar" / "fin.partial.json").exists()                          # finished: partial gone
    assert json.loads((res / "mqar" / "run.partial.json").read_text()) == {"step": 200}
    assert (res / "mqar" / "probes" / "p.json").is_file() and not (res / "figures").exists()
    assert sorted(p.name for p in (res / "logs").iterdir()) == [
        "2026-12-06-s9call1-campaign.log", "2026-12-06-s9call1-mqar-run.log"]
    resume = sorted(p.name for p in (repo / ".resume").iterdir())
    assert resume == ["bench-s9call1", "ckpts.tgz.part-aa", "results.tgz", "triton-cache.tgz"]   # stale piece gone
    assert (repo / ".resume" / "bench-s9call1" / "gpu_bench.json").is_file()


def test_no_pieces_back_removes_the_stale_ones_and_a_repeated_log_is_not_copied_twice(tmp_path, repo):
    mod = _module()
    mod.ingest(_returned(tmp_path), "s9call1", repo, date="2026-12-06", out=lambda s: None)
    ret2 = tmp_path / "ret2"
    ret2.mkdir()
    _tgz(ret2 / "results.tgz", {"results/mqar/run.log": "run log text\n",
                                "results/mqar/other.log": "another run\n"})
    mod.ingest(ret2, "s9call2", repo, date="2026-12-06", out=lambda s: None)
    logs = sorted(p.name for p in (repo / "results" / "logs").iterdir())
    assert logs == ["2026-12-06-s9call1-campaign.log", "2026-12-06-s9call1-mqar-run.log",
                    "2026-12-06-s9call2-mqar-other.log"]
    assert not list((repo / ".resume").glob("ckpts.tgz.part-*"))


def test_benchmarks_a_warm_machine_returns_again_are_not_taken_twice(tmp_path, repo):
    """The second call's return carries the first call's benchmark file again (same bytes) and one new one:
    only the new one lands in .resume/bench-s9call2/, and a call returning only the old one makes no folder."""
    mod = _module()
    mod.ingest(_returned(tmp_path), "s9call1", repo, date="2026-12-06", out=lambda s: None)
    ret2 = tmp_path / "ret2"
    ret2.mkdir()
    _tgz(ret2 / "results.tgz", {"results/bench/gpu_bench.json": "{}", "results/bench/gpu_bench_2.json": "{\"x\": 1}"})
    done = mod.ingest(ret2, "s9call2", repo, date="2026-12-06", out=lambda s: None)
    assert done["bench"] == ["bench-s9call2/gpu_bench_2.json"]
    ret3 = tmp_path / "ret3"
    ret3.mkdir()
    _tgz(ret3 / "results.tgz", {"results/bench/gpu_bench.json": "{}"})
    lines = []
    done = mod.ingest(ret3, "s9call3", repo, date="2026-12-06", out=lines.append)
    assert done["bench"] == [] and not (repo / ".resume" / "bench-s9call3").exists()
    assert not any(ln.startswith("bench:") for ln in lines)


def test_overwrite_takes_the_returned_result(tmp_path, repo):
    _module().ingest(_returned(tmp_path), "s9call1", repo, overwrite=True, out=lambda s: None)
    assert json.loads((repo / "results" / "mqar" / "done.json").read_text()) == {"acc": 0.9}


@pytest.mark.parametrize("args, flag", [(["--tag", "a/b"], "--tag"), (["--tag", "s1"], "RETURNED")])
def test_bad_input_is_one_line_naming_what_was_typed_and_writes_nothing(tmp_path, repo, args, flag):
    shutil.rmtree(repo / ".resume")                 # a checkout without one: not even that may appear
    ret = tmp_path / "ret"
    ret.mkdir()                                      # no results.tgz in it
    before = sorted(p for p in repo.rglob("*"))
    p = subprocess.run([sys.executable, str(SCRIPT), str(ret), "--repo", str(repo), *args],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and flag in p.stderr and "Traceback" not in p.stderr
    assert sorted(p for p in repo.rglob("*")) == before


def test_in_a_git_checkout_the_last_line_says_whether_the_next_carry_fits(tmp_path, repo):
    """After the return is taken in, a git checkout gets one more line: the size of what a call to a cold
    machine would carry (.whl, .resume and the tree) against 64 MiB, and the repacking command when it is
    over (seen with the limit lowered to a byte); outside git (the other tests) there is no such line."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    mod = _module()
    lines = []
    done = mod.ingest(_returned(tmp_path), "s9call1", repo, date="2026-12-06", out=lines.append)
    assert lines[-1] == done["carry"]
    assert lines[-1].startswith("carry to a cold machine (.whl, .resume, the tree): ") and lines[-1].endswith(
        "MiB of 64: fits")
    over = mod._carry_line(repo, limit_mib=1e-6)           # one byte
    assert over.endswith(": over; python3 scripts/pack_carry.py --repack"), over


def test_outside_git_there_is_no_carry_line(tmp_path, repo):
    lines = []
    done = _module().ingest(_returned(tmp_path), "s9call1", repo, date="2026-12-06", out=lines.append)
    assert "carry" not in done and not any(x.startswith("carry to") for x in lines)


def _pieces(folder: Path, files: dict, piece: int = 0):
    """``files`` as device_campaign.sh packs checkpoints: one gzip archive split into ckpts.tgz.part-aa, ..."""
    _tgz(folder / "ck.tgz", files)
    data = (folder / "ck.tgz").read_bytes()
    (folder / "ck.tgz").unlink()
    step = piece or len(data)
    for k, i in enumerate(range(0, len(data), step)):
        (folder / f"ckpts.tgz.part-a{'abcdefghij'[k]}").write_bytes(data[i:i + step])


def _carried(repo: Path) -> dict:
    data = b"".join(p.read_bytes() for p in sorted((repo / ".resume").glob("ckpts.tgz.part-*")))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        return {m.name: tf.extractfile(m).read().decode() for m in tf.getmembers()}


@pytest.mark.parametrize("pieces_back", [True, False])
def test_a_checkpoint_the_call_left_behind_is_kept_from_the_pieces_before(tmp_path, repo, pieces_back):
    """The pieces carried so far hold four runs' checkpoints: the one the call returned again is replaced by
    the returned one, the two whose runs finished (in this return, or committed before) go, and the one the
    call did not return (left behind, or a benchmark-only call) stays, so its run resumes instead of
    restarting (6 December: a GDN run's 6,000 steps were kept only by hand)."""
    for p in (repo / ".resume").glob("ckpts.tgz.part-*"):
        p.unlink()
    _pieces(repo / ".resume", {"results/mqar/run.ckpt.pt": "old run", "results/mqar/fin.ckpt.pt": "old fin",
                               "results/mqar/done.ckpt.pt": "old done", "results/mqar/gone_0.003_s0.ckpt.pt": "left"},
            piece=64)
    ret = _returned(tmp_path, ckpt=False)
    if pieces_back:
        _pieces(ret, {"results/mqar/run.ckpt.pt": "new run"})
    lines = []
    done = _module().ingest(ret, "s9call1", repo, date="2026-12-06", out=lines.append)
    want = {"results/mqar/gone_0.003_s0.ckpt.pt": "left"}
    if pieces_back:
        want["results/mqar/run.ckpt.pt"] = "new run"
    else:
        want["results/mqar/run.ckpt.pt"] = "old run"          # nothing came back: the older one is all there is
    assert _carried(repo) == want
    assert done["ckpt_kept"] == sorted(set(want) - ({"results/mqar/run.ckpt.pt"} if pieces_back else set()))
    assert ("checkpoint kept from the pieces before (its run neither came back nor finished): "
            "results/mqar/gone_0.003_s0.ckpt.pt") in lines


def test_kept_checkpoints_are_split_into_pieces_the_device_script_reads(tmp_path, repo, monkeypatch):
    """Merged checkpoints over one piece's size come back as ckpts.tgz.part-aa, -ab, ... that concatenate
    into one archive."""
    mod = _module()
    monkeypatch.setattr(mod, "PIECE", 100)
    for p in (repo / ".resume").glob("ckpts.tgz.part-*"):
        p.unlink()
    import os

    big = os.urandom(400).hex()                              # does not compress below a piece
    _pieces(repo / ".resume", {"results/mqar/gone_s0.ckpt.pt": big})
    ret = _returned(tmp_path, ckpt=False)
    _pieces(ret, {"results/mqar/run.ckpt.pt": "new run"})
    mod.ingest(ret, "s9call1", repo, date="2026-12-06", out=lambda s: None)
    names = sorted(p.name for p in (repo / ".resume").glob("ckpts.tgz.part-*"))
    assert len(names) > 2 and names[:2] == ["ckpts.tgz.part-aa", "ckpts.tgz.part-ab"]
    assert all((repo / ".resume" / n).stat().st_size <= 100 for n in names)
    assert _carried(repo) == {"results/mqar/gone_s0.ckpt.pt": big, "results/mqar/run.ckpt.pt": "new run"}


def test_checkpoints_that_would_not_fit_the_next_carry_go_least_training_first(tmp_path, repo, monkeypatch):
    """In a git checkout, the older checkpoints kept beside the returned one would put the next carry over its
    limit: the checkpoints go least training first (their .partial.json's wall_s), kept or returned alike, each
    named, until the carry fits (6 December: a returned BL checkpoint of 55 s against a kept GDN one of 185 s)."""
    import os

    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    mod = _module()
    for p in (repo / ".resume").glob("ckpts.tgz.part-*"):
        p.unlink()
    short, long, new = (os.urandom(20000).hex() for _ in range(3))
    _pieces(repo / ".resume", {"results/mqar/short_s0.ckpt.pt": short, "results/mqar/long_s0.ckpt.pt": long})
    (repo / "results" / "mqar" / "short_s0.partial.json").write_text(json.dumps({"step": 50, "wall_s": 40.0}))
    (repo / "results" / "mqar" / "long_s0.partial.json").write_text(json.dumps({"step": 900, "wall_s": 700.0}))
    ret = tmp_path / "ret"
    ret.mkdir()
    _tgz(ret / "results.tgz", {"results/mqar/run.partial.json": json.dumps({"step": 20, "wall_s": 55.0})})
    _pieces(ret, {"results/mqar/run.ckpt.pt": new})

    def carried_bytes(r, limit_mib=None):                 # the pieces alone, against room for two checkpoints
        return sum(p.stat().st_size for p in (r / ".resume").glob("ckpts.tgz.part-*")), 50000

    monkeypatch.setattr(mod, "_carry_total", carried_bytes)
    lines = []
    done = mod.ingest(ret, "s9call1", repo, date="2026-12-06", out=lines.append)
    assert _carried(repo) == {"results/mqar/long_s0.ckpt.pt": long, "results/mqar/run.ckpt.pt": new}
    assert done["ckpt_dropped"] == ["results/mqar/short_s0.ckpt.pt"]
    assert done["ckpt_kept"] == ["results/mqar/long_s0.ckpt.pt"]
    assert ("checkpoint dropped, over what the next call carries: results/mqar/short_s0.ckpt.pt (40 s of training; "
            "from the pieces before)") in lines
    # room for one: the returned checkpoint (55 s) goes before the kept one (700 s)
    monkeypatch.setattr(mod, "_carry_total", lambda r, limit_mib=None: (carried_bytes(r)[0], 25000))
    for p in (repo / ".resume").glob("ckpts.tgz.part-*"):
        p.unlink()
    _pieces(repo / ".resume", {"results/mqar/short_s0.ckpt.pt": short, "results/mqar/long_s0.ckpt.pt": long})
    lines = []
    done = mod.ingest(ret, "s9call2", repo, date="2026-12-06", out=lines.append)
    assert _carried(repo) == {"results/mqar/long_s0.ckpt.pt": long}
    assert done["ckpt_dropped"] == ["results/mqar/short_s0.ckpt.pt", "results/mqar/run.ckpt.pt"]
    assert ("checkpoint dropped, over what the next call carries: results/mqar/run.ckpt.pt (55 s of training; "
            "returned by this call)") in lines


def test_returned_checkpoints_alone_over_the_next_carry_go_least_training_first(tmp_path, repo, monkeypatch):
    """Nothing is kept from before, but the returned checkpoints alone would put the next carry over its limit
    (6 December, eighth session: two returned checkpoints of 27 and 29 MB, 79 MiB in all): the one holding
    the least training goes, named; under the limit nothing is dropped."""
    import os

    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    mod = _module()
    for p in (repo / ".resume").glob("ckpts.tgz.part-*"):
        p.unlink()
    a, b = (os.urandom(20000).hex() for _ in range(2))
    ret = tmp_path / "ret"
    ret.mkdir()
    _tgz(ret / "results.tgz", {"results/mqar/a_s0.partial.json": json.dumps({"step": 9500, "wall_s": 287.0}),
                               "results/mqar/b_s0.partial.json": json.dumps({"step": 12000, "wall_s": 266.0})})
    _pieces(ret, {"results/mqar/a_s0.ckpt.pt": a, "results/mqar/b_s0.ckpt.pt": b})

    def pieces_against(room):
        return lambda r, limit_mib=None: (sum(p.stat().st_size for p in (r / ".resume").glob("ckpts.tgz.part-*")),
                                          room)

    monkeypatch.setattr(mod, "_carry_total", pieces_against(30000))       # room for one
    lines = []
    done = mod.ingest(ret, "s9call1", repo, date="2026-12-06", out=lines.append)
    assert _carried(repo) == {"results/mqar/a_s0.ckpt.pt": a}
    assert done["ckpt_dropped"] == ["results/mqar/b_s0.ckpt.pt"]
    assert ("checkpoint dropped, over what the next call carries: results/mqar/b_s0.ckpt.pt (266 s of training; "
            "returned by this call)") in lines
    monkeypatch.setattr(mod, "_carry_total", pieces_against(10 ** 6))     # room for both
    done = mod.ingest(ret, "s9call2", repo, date="2026-12-06", out=lambda s: None)
    assert _carried(repo) == {"results/mqar/a_s0.ckpt.pt": a, "results/mqar/b_s0.ckpt.pt": b}
    assert "ckpt_dropped" not in done
