"""scripts/device_campaign.sh, run here with stand-ins for python3 and nvidia-smi: the campaign's
budget is cut to what the device call has left, only unfinished runs' checkpoints come back, and a
TERM (the call's own limit) still packs the results."""
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_campaign.sh"

STUB = r'''#!/bin/bash
echo "python3 $*" >> "$STUB_LOG"
[[ "$*" == *"import distributed"* && -n "$STUB_NO_DASK" ]] && exit 1
if [[ "$*" == *"assocmem.gpu.tasks.campaign"* ]]; then
  out=""; prev=""
  for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done
  mkdir -p "$out/mqar"
  echo "checkpoints at the start: $(cd "$out/mqar" && ls *.ckpt.pt 2>/dev/null | tr '\n' ' ')" >> "$STUB_LOG"
  echo "results at the start: $(cd "$out/mqar" && ls *.json 2>/dev/null | tr '\n' ' ')" >> "$STUB_LOG"
  echo "gdn_s0 at the start: $(cat "$out/mqar/gdn_s0.ckpt.pt" 2>/dev/null)" >> "$STUB_LOG"
  echo '{}' > "$out/mqar/bl_s0.json"; echo ck > "$out/mqar/bl_s0.ckpt.pt"; echo ck > "$out/mqar/gdn_s0.ckpt.pt"
  [ -n "$STUB_FINISH" ] && echo '{}' > "$out/mqar/$STUB_FINISH.json"
  # large unfinished checkpoints of random bytes (they do not compress, as trained weights barely do)
  for n in $STUB_BIG_CKPTS; do head -c "${STUB_BIG_SIZE:-25M}" /dev/urandom > "$out/mqar/big${n}_s0.ckpt.pt"; done
  # the .partial.json the campaign writes for a run it stopped (NAME:WALL_S): the training its checkpoint holds
  for w in $STUB_PARTIALS; do echo "{\"step\": 500, \"wall_s\": ${w##*:}}" > "$out/mqar/${w%%:*}.partial.json"; done
  # the plan's priority order, as the campaign writes it to --order-file
  order=""; prev=""
  for a in "$@"; do [ "$prev" = "--order-file" ] && order="$a"; prev="$a"; done
  [ -n "$order" ] && [ -n "$STUB_ORDER" ] && for n in $STUB_ORDER; do echo "mqar/$n"; done > "$order"
  # a few bytes more or less than the others (NAME:BYTES, BYTES < 0 cuts the file)
  for g in $STUB_GROW; do
    f="$out/mqar/${g%%:*}.ckpt.pt"; n=${g##*:}
    if [ "$n" -gt 0 ]; then head -c "$n" /dev/urandom >> "$f"; else truncate -s "$n" "$f"; fi
  done
  [ -n "$STUB_SLEEP" ] && sleep "$STUB_SLEEP"
  # what Triton would leave: the carried cache is there, new autotuning results and kernels are added
  echo "the run sees TRITON_CACHE_AUTOTUNING=$TRITON_CACHE_AUTOTUNING carried=$(cat "$TRITON_CACHE_DIR/k0/old.autotune.json" 2>/dev/null)" >> "$STUB_LOG"
  mkdir -p "$TRITON_CACHE_DIR/k1"; echo '{"configs_timings": []}' > "$TRITON_CACHE_DIR/k1/new.autotune.json"
  if [ -n "$STUB_TRITON_BIG" ]; then head -c 17M /dev/urandom > "$TRITON_CACHE_DIR/k1/kernel.cubin"
  else echo small > "$TRITON_CACHE_DIR/k1/kernel.cubin"; fi
fi
if [[ "$*" == *"assocmem gpu bench"* || "$*" == *"cpu_scan_precision.py"* ]]; then
  out=""; prev=""
  for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done
  echo '{"bench": 1}' > "$out"
  [ -n "$STUB_BENCH_SLEEP" ] && sleep "$STUB_BENCH_SLEEP"
fi
if [[ "$*" == *"chunk_ab.py"* ]]; then
  out=""; prev=""
  for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done
  echo "chunk_ab from ${PYTHONPATH%%:*}" >> "$STUB_LOG"
  echo '{"ab": 1}' >> "$out"
fi
exit 0
'''

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _checkout(tmp_path):
    """A bare checkout to run the script in: this one's .resume/ and .whl/ (carried between device
    calls) must not leak into the test."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / SCRIPT.name)
    (root / "results").mkdir()
    return root


def _env(tmp_path, **extra):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text(STUB)
    (bin_ / "nvidia-smi").write_text("#!/bin/bash\necho GPU0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "OUT": str(out), "STUB_LOG": str(tmp_path / "log"),
           "ASSOCMEM_CKPT_STASH": str(tmp_path / "stash"), **extra}
    return env, out


def _packed(out):
    with tarfile.open(out / "results.tgz") as t:
        names = t.getnames()
    pieces = sorted(out.glob("ckpts.tgz.part-*"))
    ck = []
    if pieces:
        data = b"".join(p.read_bytes() for p in pieces)
        tmp = out / "ck.tgz"
        tmp.write_bytes(data)
        with tarfile.open(tmp) as t:
            ck = t.getnames()
    return names, ck


def _call(root, env, *extra, timeout=120):
    """One device call of the script (plan device5, a 300 s call), which must exit 0."""
    r = subprocess.run(["bash", str(SCRIPT), *extra, "--plan", "device5", "--call-limit-s", "300"], cwd=root,
                       env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_budget_is_clamped_and_only_unfinished_checkpoints_return(tmp_path):
    env, out = _env(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "--plan", "device5", "--budget-s", "9999", "--call-limit-s", "300"],
                       cwd=_checkout(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "budget: 9999 s clamped to the call's" in r.stdout
    line = [x for x in (tmp_path / "log").read_text().splitlines() if "assocmem.gpu.tasks.campaign" in x][0]
    budget = int(line.split("--budget-s ")[1].split()[0])
    assert 200 <= budget <= 255                      # 300 s less the set-up and the 45 s kept for packing
    names, ck = _packed(out)
    assert "results/mqar/bl_s0.json" in names and not any(n.endswith(".ckpt.pt") for n in names)
    assert ck == ["results/mqar/gdn_s0.ckpt.pt"]     # bl_s0 finished: its checkpoint stays behind
    assert not (out / "results").exists()


def test_a_term_still_packs_what_there_is(tmp_path):
    env, out = _env(tmp_path, STUB_SLEEP="30")
    p = subprocess.Popen(["bash", str(SCRIPT), "--plan", "device5"], cwd=_checkout(tmp_path), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and "assocmem.gpu.tasks.campaign" not in (
            (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""):
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGTERM)                 # the device call's limit: the whole process group
    stdout, _ = p.communicate(timeout=60)
    assert p.returncode == 124, stdout
    assert "terminated: packing what there is" in stdout
    names, ck = _packed(out)
    assert "results/mqar/bl_s0.json" in names and ck == ["results/mqar/gdn_s0.ckpt.pt"]


def test_gpu_bench_runs_before_the_campaign_and_comes_back(tmp_path):
    env, out = _env(tmp_path)
    root = _checkout(tmp_path)
    (root / "results" / "bench").mkdir()                      # as resumed from an earlier call
    (root / "results" / "bench" / "probe_steps.json").write_text("{}")
    r = subprocess.run(["bash", str(SCRIPT), "--gpu-bench", "--shapes S1 --ops chunk,scan,fla", "--plan", "device5",
                        "--call-limit-s", "300"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    log = (tmp_path / "log").read_text().splitlines()
    order = [i for i, x in enumerate(log) if "gpu bench" in x or "cpu_scan_precision" in x or "campaign" in x]
    kinds = ["bench" if "gpu bench" in log[i] else "precision" if "precision" in log[i] else "campaign" for i in order]
    assert kinds == ["bench", "precision", "campaign"]
    assert "--shapes S1 --ops chunk,scan,fla --out" in log[order[0]]
    names, _ = _packed(out)
    assert "results/bench/gpu_bench.json" in names and "results/bench/scan_precision_cuda.json" in names
    assert "results/bench/probe_steps.json" in names and not any("bench/bench" in n for n in names)


def test_several_benchmarks_run_in_order_each_into_its_own_json(tmp_path):
    """``--gpu-bench`` given three times: the three benchmarks run in order before the campaign, each into its
    own JSON (``gpu_bench.json``, ``_2``, ``_3``), and ``--no-scan-precision`` leaves the precision run out."""
    env, out = _env(tmp_path)
    root = _checkout(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "--gpu-bench", "--shapes S1", "--gpu-bench", "--shapes S3 --kernels",
                        "--gpu-bench", "--shapes S1 --chunk-config BV=64", "--no-scan-precision", "--plan", "device5",
                        "--call-limit-s", "300"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    log = (tmp_path / "log").read_text().splitlines()
    runs = [x for x in log if "gpu bench" in x or "cpu_scan_precision" in x or "campaign" in x]
    assert len(runs) == 4 and "campaign" in runs[3] and not any("precision" in x for x in runs)
    assert "--shapes S1 --out" in runs[0] and runs[0].endswith("bench/gpu_bench.json")
    assert "--shapes S3 --kernels --out" in runs[1] and runs[1].endswith("bench/gpu_bench_2.json")
    assert "--shapes S1 --chunk-config BV=64 --out" in runs[2] and runs[2].endswith("bench/gpu_bench_3.json")
    names, _ = _packed(out)
    assert {f"results/bench/gpu_bench{s}.json" for s in ("", "_2", "_3")} <= set(names)
    assert "results/bench/scan_precision_cuda.json" not in names


def test_a_slow_benchmark_is_stopped_at_its_limit_and_the_campaign_still_runs(tmp_path):
    env, out = _env(tmp_path, STUB_BENCH_SLEEP="30")
    t0 = time.time()
    r = subprocess.run(["bash", str(SCRIPT), "--gpu-bench", "--shapes S1", "--gpu-bench-limit-s", "2",
                        "--plan", "device5", "--call-limit-s", "300"], cwd=_checkout(tmp_path), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.time() - t0 < 25                                 # not the stub's 2 x 30 s
    assert "gpu bench: stopped (rc 124" in r.stdout
    assert "assocmem.gpu.tasks.campaign" in (tmp_path / "log").read_text()
    names, _ = _packed(out)
    assert "results/bench/gpu_bench.json" in names            # what it wrote before the limit comes back


def _returned(out):
    """What the device gives back of $OUT: at most 8 plain files, 16 MiB each, 64 MiB together."""
    files = [p for p in out.iterdir() if p.is_file()]
    sizes = [p.stat().st_size for p in files]
    return len(files) <= 8 and max(sizes) <= 16 * 2**20 and sum(sizes) <= 64 * 2**20


@pytest.mark.parametrize("n_big", (2, 3))
def test_results_always_come_back_and_the_checkpoints_fit_beside_them(tmp_path, n_big):
    """Checkpoints of 25 MB that do not compress: two fit beside results.tgz and the cache (64 MiB
    together), three do not, so the largest is named as left behind and results.tgz still comes back
    (2 December: five pieces of checkpoints crowded out results.tgz and a finished run was lost)."""
    env, out = _env(tmp_path, STUB_BIG_CKPTS=" ".join(str(i) for i in range(n_big)))
    r = _call(_checkout(tmp_path), env, timeout=240)
    assert _returned(out), sorted((p.name, p.stat().st_size) for p in out.iterdir())
    names, ck = _packed(out)
    assert "results/mqar/bl_s0.json" in names
    assert "results/mqar/gdn_s0.ckpt.pt" in ck
    big = [c for c in ck if "big" in c]
    left = [line for line in r.stdout.splitlines() if line.startswith("checkpoint left behind")]
    assert len(big) == 2 and len(left) == n_big - 2, (ck, left)
    assert all(b not in line for b in big for line in left)


def test_a_warm_machine_keeps_the_last_calls_results_even_when_they_did_not_come_back(tmp_path):
    """A run finished in the last call on a machine held warm is not run again, though that call's
    results.tgz never reached the next call's .resume/ (only an older one did)."""
    env, out = _env(tmp_path, STUB_FINISH="base_s0")
    root = _checkout(tmp_path)
    r = _call(root, env)
    shutil.rmtree(out)
    out.mkdir()                                     # its return was lost: nothing carried back
    env.pop("STUB_FINISH")
    r = _call(root, env)
    assert "results from this machine's stash (the last call's)" in r.stdout
    starts = [x for x in (tmp_path / "log").read_text().splitlines() if x.startswith("results at the start")]
    assert starts == ["results at the start: ", "results at the start: base_s0.json bl_s0.json "], starts
    names, _ = _packed(out)
    assert "results/mqar/base_s0.json" in names


def test_a_background_command_runs_beside_the_campaign_and_its_log_comes_back(tmp_path):
    env, out = _env(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "--bg", "echo diag-ran; echo $ROOT > $OUT/bench/root.txt",
                        "--plan", "device5", "--call-limit-s", "300"],
                       cwd=_checkout(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "background command: rc 0" in r.stdout and "diag-ran" in r.stdout
    names, _ = _packed(out)
    assert "results/bench/bg.log" in names and "results/bench/root.txt" in names


@pytest.mark.parametrize("big", (False, True))
def test_the_triton_cache_is_carried_in_and_comes_back(tmp_path, big):
    """.resume/triton-cache.tgz is unpacked into TRITON_CACHE_DIR before the campaign, which runs with
    TRITON_CACHE_AUTOTUNING=1; the cache comes back as $OUT/triton-cache.tgz, whole when it fits one
    returned file, else its autotuning results only (said in one line)."""
    import io

    root = _checkout(tmp_path)
    (root / ".resume").mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b"carried-json"
        info = tarfile.TarInfo("./k0/old.autotune.json")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    (root / ".resume" / "triton-cache.tgz").write_bytes(buf.getvalue())
    env, out = _env(tmp_path, TRITON_CACHE_DIR=str(tmp_path / "tcache"), **({"STUB_TRITON_BIG": "1"} if big else {}))
    r = _call(root, env)
    assert "triton cache from .resume/triton-cache.tgz: 1 autotuning results" in r.stdout
    assert "the run sees TRITON_CACHE_AUTOTUNING=1 carried=carried-json" in (tmp_path / "log").read_text()
    with tarfile.open(out / "triton-cache.tgz") as t:
        names = sorted(n.lstrip("./") for n in t.getnames() if n.endswith((".json", ".cubin")))
    if big:
        assert names == ["k0/old.autotune.json", "k1/new.autotune.json"]
        assert "triton cache: over 15 MiB; only its 2 autotuning results come back" in r.stdout
        assert (out / "triton-cache.tgz").stat().st_size < 1024 * 1024
    else:
        assert names == ["k0/old.autotune.json", "k1/kernel.cubin", "k1/new.autotune.json"]
        assert "over 15 MiB" not in r.stdout


def test_a_warm_machine_keeps_the_unfinished_checkpoints_for_the_next_call(tmp_path):
    """The next call on a machine held warm finds the last call's unfinished checkpoints in the stash,
    though it carried none back (two or three 30 MB checkpoints are over what a call carries); a
    finished run's checkpoint is not kept."""
    env, out = _env(tmp_path)
    root = _checkout(tmp_path)
    r = _call(root, env)
    assert sorted(p.name for p in (tmp_path / "stash").rglob("*.ckpt.pt")) == ["gdn_s0.ckpt.pt"]
    shutil.rmtree(out)
    out.mkdir()                                     # the device empties $OUT before each call
    r = _call(root, env)
    assert "checkpoint from this machine's stash: results/mqar/gdn_s0.ckpt.pt" in r.stdout
    starts = [x for x in (tmp_path / "log").read_text().splitlines() if x.startswith("checkpoints at the start")]
    assert starts == ["checkpoints at the start: ", "checkpoints at the start: gdn_s0.ckpt.pt "], starts


def test_a_carried_checkpoint_never_rewinds_the_warm_machines_newer_one(tmp_path):
    """The next call on a warm machine carries pieces holding an older checkpoint of a run the stash also
    has (ingest_device_return.py keeps older ones for runs a call left behind) and one the stash lacks: the
    stash's copy is resumed, and the other is added."""
    import io

    env, out = _env(tmp_path)
    root = _checkout(tmp_path)
    _call(root, env)                                 # the stash now holds gdn_s0's checkpoint ("ck")
    shutil.rmtree(out)
    out.mkdir()
    (root / ".resume").mkdir()
    with tarfile.open(root / ".resume" / "ckpts.tgz.part-aa", "w:gz") as tf:
        for name, text in (("results/mqar/gdn_s0.ckpt.pt", b"older"), ("results/mqar/left_s0.ckpt.pt", b"kept")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tf.addfile(info, io.BytesIO(text))
    r = _call(root, env)
    assert "checkpoints from .resume/ckpts.tgz.part-* (those the stash lacks)" in r.stdout
    log = (tmp_path / "log").read_text().splitlines()
    assert [x for x in log if x.startswith("gdn_s0 at the start")][-1] == "gdn_s0 at the start: ck"
    starts = [x for x in log if x.startswith("checkpoints at the start")]
    assert starts[-1] == "checkpoints at the start: gdn_s0.ckpt.pt left_s0.ckpt.pt ", starts


def test_chunk_ab_times_each_carried_commit_then_this_one_before_the_campaign(tmp_path):
    """``--chunk-ab "ROUNDS SHAPE"``: per round, each ``.resume/site_<commit>/`` from its own install, then this
    checkout's defaults and ``segments=1``, each a process of its own, before any training; the lines come back."""
    env, out = _env(tmp_path, ASSOCMEM_COMMIT="abc123")
    root = _checkout(tmp_path)
    (root / ".resume" / "site_e1436b3").mkdir(parents=True)
    _call(root, env, "--chunk-ab", "2 S2")
    log = (tmp_path / "log").read_text().splitlines()
    ab = [x for x in log if x.startswith("python3") and "chunk_ab.py" in x]
    assert len(ab) == 6 and all("--shape S2" in x for x in ab)
    tags = [x.split("--tag ")[1].split()[0] for x in ab]
    assert tags == ["e1436b3", "abc123", "abc123"] * 2
    assert ["--config segments=1" in x for x in ab] == [False, False, True] * 2
    dumps = [x.split("--dump ")[1].split()[0] if "--dump " in x else None for x in ab]
    assert [d and d.rsplit("/", 1)[1] for d in dumps] == ["e1436b3", "head", "head-segments1", None, None, None]
    assert all(d.startswith(str(out / "bench" / "kernels")) for d in dumps[:3])
    sources = [x for x in log if x.startswith("chunk_ab from")]
    assert sources[0] == f"chunk_ab from {root / '.resume' / 'site_e1436b3'}"
    assert not sources[1].endswith("site_e1436b3")
    first_campaign = next(i for i, x in enumerate(log) if "assocmem.gpu.tasks.campaign" in x)
    assert max(i for i, x in enumerate(log) if "chunk_ab.py" in x) < first_campaign
    with tarfile.open(out / "results.tgz") as t:
        lines = t.extractfile("results/bench/chunk_ab.jsonl").read().decode().splitlines()
    assert len(lines) == 6


def test_of_equal_checkpoints_the_plans_earlier_runs_come_back(tmp_path):
    """Three 25 MB checkpoints within a few hundred bytes of one another (their curves differ in length), two of
    which fit: the two the plan ranks first come back,
    whatever their names (4 December: of two GDN runs the one at chance came back, the learning one stayed)."""
    env, out = _env(tmp_path, STUB_BIG_CKPTS="0 1 2", STUB_ORDER="bl_s0 big2_s0 gdn_s0 big0_s0 big1_s0",
                    STUB_GROW="big1_s0:-300 big2_s0:700")
    r = _call(_checkout(tmp_path), env, timeout=240)
    assert _returned(out)
    _, ck = _packed(out)
    assert sorted(c for c in ck if "big" in c) == ["results/mqar/big0_s0.ckpt.pt", "results/mqar/big2_s0.ckpt.pt"]
    left = [line for line in r.stdout.splitlines() if line.startswith("checkpoint left behind")]
    assert len(left) == 1 and "results/mqar/big1_s0.ckpt.pt" in left[0], left
    assert "results/mqar/gdn_s0.ckpt.pt" in ck                       # the small one fits beside them


def test_the_checkpoints_holding_the_most_training_come_back_first(tmp_path):
    """Three 25 MB checkpoints, two of which fit: the two whose runs trained longest (their .partial.json's
    wall_s) come back, whatever the plan's order or a few MB of size (6 December: a BL checkpoint of 55 s came
    back, being 2 MB smaller, and a GDN run's 200 s stayed behind); the one left behind says what it held."""
    env, out = _env(tmp_path, STUB_BIG_CKPTS="0 1 2", STUB_ORDER="big0_s0 big1_s0 big2_s0 gdn_s0",
                    STUB_PARTIALS="big0_s0:55.2 big1_s0:900.5 big2_s0:300", STUB_GROW="big0_s0:-2000000")
    r = _call(_checkout(tmp_path), env, timeout=240)
    assert _returned(out)
    _, ck = _packed(out)
    assert sorted(c for c in ck if "big" in c) == ["results/mqar/big1_s0.ckpt.pt", "results/mqar/big2_s0.ckpt.pt"]
    left = [line for line in r.stdout.splitlines() if line.startswith("checkpoint left behind")]
    assert left == ["checkpoint left behind (over what a call returns beside results.tgz; the run restarts unless "
                    "the machine is still warm): results/mqar/big0_s0.ckpt.pt (55 s of training)"], left
    assert "results/mqar/gdn_s0.ckpt.pt" in ck                       # no partial: last, but it still fits


def test_a_benchmark_only_call_needs_no_dask_and_a_campaign_call_says_what_is_missing(tmp_path):
    """Without Dask's wheels (6 December: a fresh checkout carried fla's only) a ``--skip-campaign`` call still
    runs its benchmarks; a campaign call stops at once (exit 3) naming what to carry, before any training."""
    env, out = _env(tmp_path, STUB_NO_DASK="1")
    root = _checkout(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "--skip-campaign", "--gpu-bench", "--shapes S1", "--no-scan-precision"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    with tarfile.open(out / "results.tgz") as t:
        assert "bench/gpu_bench.json" in t.getnames()
    (tmp_path / "second").mkdir()
    env2, _ = _env(tmp_path / "second", STUB_NO_DASK="1")
    r = subprocess.run(["bash", str(SCRIPT), "--plan", "device5"], cwd=root, env=env2, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 3 and "dask: not importable; carry its wheels in .whl/" in r.stdout
    assert "assocmem.gpu.tasks.campaign" not in (tmp_path / "second" / "log").read_text()


def test_fetch_wheels_downloads_every_pinned_wheel_for_the_device_into_whl(tmp_path):
    """scripts/fetch_wheels.sh: one ``pip download`` of every wheel a device call carries (Dask's set and fla's),
    built for the device's Python 3.12, into ``.whl/`` (ignored by git); the one list of pins, which docs/tasks.md names."""
    import re

    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "fetch_wheels.sh", root / "scripts")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text('#!/bin/bash\necho "$*" >> "$STUB_LOG"\n'
                                  'prev=""; for a in "$@"; do [ "$prev" = "-d" ] && touch "$a/x.whl"; prev="$a"; done\n')
    (bin_ / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "log")}
    r = subprocess.run(["bash", str(root / "scripts" / "fetch_wheels.sh")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "carry \".whl\"" in r.stdout and (root / ".whl").is_dir()
    call, = (tmp_path / "log").read_text().splitlines()
    assert call.startswith("-m pip download") and "--python-version 3.12" in call and "-d .whl" in call
    pins = set(re.findall(r"([a-z-]+==[0-9.]+)", call))
    for name in ("dask", "distributed", "tornado", "zict", "tblib", "locket", "partd", "cloudpickle",
                 "flash-linear-attention", "fla-core", "einops"):
        assert any(p.startswith(name + "==") for p in pins), name
    assert "scripts/fetch_wheels.sh" in (ROOT / "docs" / "tasks.md").read_text()   # the docs point here for the pins
    assert "/.whl/" in (ROOT / ".gitignore").read_text()
