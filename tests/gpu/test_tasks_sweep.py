"""Sweeps and the campaign on Dask distributed (``gpu/tasks/sweep.py``, ``campaign.py``).

The cluster tests use a CPU local cluster of two single-run workers and tiny
runs; the fault test kills a worker process mid-run (after a checkpoint) and
checks that the run resumes from it on another worker and ends exactly as an
uninterrupted run of the same seed.
"""
import json
import os
import re
import signal
import threading
import time

import pytest
import torch

from assocmem.gpu.tasks import campaign, cli, plots, sweep as Sw, train as Tr

pytestmark = pytest.mark.gpu

TINY = ("--eval", "none")


# ---------------------------------------------------------------------------
# the grid, the cluster's shape, the per-run environment (no cluster)
# ---------------------------------------------------------------------------
def test_sweep_grid_and_skip(tmp_path):
    g = Sw.grid("collision_recall")
    assert len(g) == 18 and {m for _, m, _ in g} == set(Tr.TASK_DEFS["collision_recall"].models)
    assert {s for *_, s in g} == {0, 1, 2}
    assert len(Sw.grid("swap_tracking")) == len(Tr.TASK_DEFS["swap_tracking"].models)
    # finished runs are skipped: nothing is submitted (no cluster is started) when every JSON exists
    for task, model, seed in g[:2]:
        (tmp_path / task).mkdir(parents=True, exist_ok=True)
        (tmp_path / task / f"{model}_s{seed}.json").write_text("{}")
    logs = []
    recs = Sw.run_jobs(g[:2], out=tmp_path, scheduler="tcp://127.0.0.1:1", log=logs.append)
    assert recs == [] and "2 run(s) already have results" in logs[0]
    pri = campaign.priority()
    assert pri[:4] == [("collision_recall", m, 0) for m in ("bl", "reset", "delta", "linear")]
    assert len(set(pri)) == len(pri)


def test_train_command_resumes_and_carries_the_protocol():
    job = Sw.grid("random_keys", ["bl"], [1], {"train_n": [16, 32]})[0]
    cmd = Sw.train_command(job, out="/o", device="cuda", steps=7, batch_size=3, extra_args=("--eval", "none"))
    assert cmd[1:4] == ["-m", "assocmem.gpu.tasks.run_child", "train"]
    s = " ".join(cmd)
    assert "--resume" in cmd and "--no-progress" in cmd and "--device cuda" in s and "--seed 1" in s
    assert "--protocol train_n=16,32" in s and "--steps 7" in s and "--batch-size 3" in s
    assert cmd[-2:] == ["--eval", "none"]
    assert Sw.job_name(job) == "bl__train_n-16.32_s1"


def test_cluster_spec_one_worker_per_gpu_with_gpu_units(monkeypatch):
    """12 runs per GPU: one worker per GPU, 12 threads, GPU=12, pinned by CUDA_VISIBLE_DEVICES; each run
    gets cores / (GPUs x 12) OpenMP threads unless the user set them."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    monkeypatch.setattr(Sw, "_gpu_count", lambda: 2)
    spec = Sw.cluster_spec("cuda", workers_per_device=12, cores=96)
    assert [w["name"] for w in spec] == ["gpu0", "gpu1"]
    assert all(w["nthreads"] == 12 and w["resources"] == {"GPU": 12} for w in spec)
    assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in spec] == ["0", "1"]
    assert spec[0]["env"]["OMP_NUM_THREADS"] == "4" and spec[0]["env"]["ASSOCMEM_RUN_THREADS"] == "4"
    assert spec[0]["env"]["MKL_NUM_THREADS"] == "3"                    # a user's setting wins
    assert [w["nthreads"] for w in Sw.cluster_spec("cuda", cores=8)] == [4, 4]      # the default, 4 per GPU
    # --heavy-gpus: the last GPUs' workers offer GPU_HEAVY units (their own count), the threads split over all
    monkeypatch.setattr(Sw, "_gpu_count", lambda: 4)
    spec = Sw.cluster_spec("cuda", workers_per_device=9, heavy_gpus=1, heavy_workers_per_device=3, cores=60)
    assert [w["resources"] for w in spec] == [{"GPU": 9}] * 3 + [{"GPU_HEAVY": 3}]
    assert spec[3]["env"]["CUDA_VISIBLE_DEVICES"] == "3" and spec[0]["env"]["OMP_NUM_THREADS"] == "2"  # 60 // 30
    # the CPU: single-run workers on the cores (default one per core), no GPU for their runs
    cpu = Sw.cluster_spec("cpu", cores=6)
    assert len(cpu) == 6 and all(w["nthreads"] == 1 and w["resources"] == {} for w in cpu)
    assert all(w["env"]["CUDA_VISIBLE_DEVICES"] == "" and w["env"]["OMP_NUM_THREADS"] == "1" for w in cpu)
    assert [w["env"]["OMP_NUM_THREADS"] for w in Sw.cluster_spec("cpu", workers_per_device=2, cores=6)] == ["3"] * 2


@pytest.mark.parametrize("kw, needle", [
    (dict(device="cuda", heavy_gpus=2), "--heavy-gpus"),
    (dict(device="cpu", heavy_gpus=1), "--heavy-gpus"),
    (dict(device="cuda", workers_per_device=0), "--workers-per-device"),
    (dict(device="gpu"), "device"),
])
def test_cluster_spec_rejects(kw, needle, monkeypatch):
    monkeypatch.setattr(Sw, "_gpu_count", lambda: 2)
    with pytest.raises(ValueError, match=needle):
        Sw.cluster_spec(**kw)


def test_cluster_spec_cuda_without_gpu(monkeypatch):
    monkeypatch.setattr(Sw, "_gpu_count", lambda: 0)
    with pytest.raises(ValueError, match="--device cuda"):
        Sw.cluster_spec("cuda")


def test_job_resources_and_heavy_runs():
    light, heavy = ("collision_recall", "bl", 0), ("swap_tracking", "direct-round2-nope", 0)
    assert Sw.job_resources(light, "cpu") is None
    assert Sw.job_resources(heavy, "cuda") == {"GPU": 1}
    assert Sw.job_resources(heavy, "cuda", campaign.is_heavy) == {"GPU_HEAVY": 1}
    assert Sw.job_resources(light, "cuda", campaign.is_heavy) == {"GPU": 1}


def test_run_env_on_a_foreign_worker(monkeypatch):
    """A worker we did not start (no ASSOCMEM_RUN_THREADS): its runs share its host's cores by its threads."""
    class W:
        class state:
            nthreads = 4
    monkeypatch.delenv("ASSOCMEM_RUN_THREADS", raising=False)
    monkeypatch.setattr(Sw, "_cores", lambda: 32)
    env = Sw.run_env(W())
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "8"
    monkeypatch.setenv("ASSOCMEM_RUN_THREADS", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert Sw.run_env(W())["OMP_NUM_THREADS"] == "5"          # ours: the worker's env is the run's


def test_run_one_deadline_and_time_limit(tmp_path):
    """Past the deadline nothing starts; at kill_at the run is stopped (no retry) and its log says so."""
    job = ("random_keys", "linear", 0)
    rec = Sw.run_one(job, out=tmp_path, deadline=time.time() - 1)
    assert rec["status"] == "not started" and not (tmp_path / "random_keys").exists()
    rec = Sw.run_one(job, out=tmp_path, steps=100000, batch_size=4, kill_at=time.time(), token="t", poll_s=0.1)
    assert rec["status"] == "stopped" and rec["rc"] != 0 and rec["attempt"] == 1
    assert "stopped at the time limit" in (tmp_path / "random_keys" / "linear_s0.log").read_text()
    assert not (tmp_path / "random_keys" / "linear_s0.json").exists()


def test_run_failed_carries_the_last_log_line():
    e = Sw.RunFailed("random_keys:x_s0", 2, "boom: out of memory")
    import pickle
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.rc, e2.last_line) == (2, "boom: out of memory") and "boom" in str(e2)


# ---------------------------------------------------------------------------
# bad input: one line, exit 2, no hang
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("extra, needle", [
    (["--retries", "-1"], "--retries"),
    (["--workers-per-device", "0"], "--workers-per-device"),
    (["--connect-timeout", "0"], "--connect-timeout"),
    (["--ckpt-every", "7"], "--ckpt-every"),
    (["--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1"], "--scheduler"),
    (["--scheduler", "nonsense://x:1", "--connect-timeout", "1"], "--scheduler"),
])
def test_sweep_bad_input_is_one_line_exit_2(extra, needle, tmp_path, capsys):
    t = time.perf_counter()
    rc = cli.main(["sweep", "random_keys", "--models", "linear", "--seeds", "0", "--device", "cpu",
                   "--out", str(tmp_path)] + extra)
    assert time.perf_counter() - t < 15               # an unreachable scheduler fails within its timeout
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0], err
    assert not list(tmp_path.rglob("*.json"))


def test_train_ckpt_every_flag(tmp_path, capsys):
    assert cli.LOG_EVERY == __import__("inspect").signature(Tr.train).parameters["log_every"].default
    assert cli.main(["train", "random_keys", "--model", "linear", "--ckpt-every", "30", "--device", "cpu",
                     "--out", str(tmp_path)]) == 2
    assert "--ckpt-every" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# on a CPU cluster
# ---------------------------------------------------------------------------
def test_sweep_cli_on_a_local_cpu_cluster(tmp_path, capsys):
    """`assocmem gpu sweep` starts its own local cluster (two single-run workers) and runs two tiny runs."""
    from assocmem.cli import main as assocmem_main

    rc = assocmem_main(["gpu", "sweep", "random_keys", "--models", "linear,delta", "--seeds", "0", "--steps", "2",
                        "--batch-size", "4", "--device", "cpu", "--eval", "none", "--workers-per-device", "2",
                        "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "local Dask cluster: 2 worker(s)" in out and "dashboard:" in out and "sweep: 2/2 run(s) done" in out
    for m in ("linear", "delta"):
        assert f"done random_keys:{m}_s0" in out and re.search(f"start random_keys:{m}_s0 on tcp://", out)
        r = json.loads((tmp_path / "random_keys" / f"{m}_s0.json").read_text())
        assert r["steps"] == 2 and r["batch_size"] == 4 and r["eval"] == {} and r["provenance"]["wall_s"] > 0
        assert r["provenance"]["command"].startswith("python -m assocmem.gpu.tasks.run_child train random_keys")
        log = (tmp_path / "random_keys" / f"{m}_s0.log").read_text()
        assert log.count("] attempt 1 on tcp://") == 1 and '"final_train"' in log


@pytest.fixture(scope="module")
def cpu_cluster():
    """A local cluster of two single-run CPU workers, joined by address (the --scheduler path)."""
    from distributed import Client

    cluster = Sw.start_local_cluster(Sw.cluster_spec("cpu", workers_per_device=2), dashboard=False)
    client = Client(cluster)
    yield cluster, client
    client.close()
    cluster.close()


def test_gpu_workers_are_pinned_and_offer_gpu_units(monkeypatch):
    """The local cluster of cluster_spec('cuda') (two GPUs faked): each worker process sees its own GPU
    only, offers GPU units, and a task asking for one unit runs there with the run's thread share."""
    from distributed import Client

    monkeypatch.setattr(Sw, "_gpu_count", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    spec = Sw.cluster_spec("cuda", workers_per_device=3, cores=12)
    cluster = Sw.start_local_cluster(spec, dashboard=False)
    try:
        with Client(cluster) as client:
            info = client.scheduler_info(n_workers=-1)["workers"].values()
            assert sorted((w["name"], w["resources"].get("GPU"), w["nthreads"]) for w in info) == \
                [("gpu0", 3, 3), ("gpu1", 3, 3)]
            envs = client.run(lambda: {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")})
            assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in envs.values()) == ["0", "1"]
            assert {e["OMP_NUM_THREADS"] for e in envs.values()} == {"2"}             # 12 cores / 6 runs
            futs = [client.submit(Sw.run_env, resources={"GPU": 1}, pure=False) for _ in range(6)]
            seen = [f.result() for f in futs]
            assert {e["CUDA_VISIBLE_DEVICES"] for e in seen} <= {"0", "1"}
            assert all(e["OMP_NUM_THREADS"] == e["MKL_NUM_THREADS"] == "2" for e in seen)
    finally:
        cluster.close()


def _result_core(path):
    r = json.loads(path.read_text())
    return {k: r[k] for k in ("curve", "eval", "steps", "batch_size", "protocol", "n_params")}


def test_worker_killed_mid_run_resumes_from_its_checkpoint_elsewhere(cpu_cluster, tmp_path):
    """Kill the worker process of a run after its first checkpoint: its subprocess dies with it, the run
    resumes from the checkpoint on another worker, and curve and evaluation equal an uninterrupted run."""
    import psutil

    cluster, client = cpu_cluster
    job = ("random_keys", "linear", 5)
    kw = dict(steps=75, batch_size=4, extra_args=("--eval", "quick", "--ckpt-every", "25"),
              scheduler=cluster.scheduler_address, progress=False)
    d = tmp_path / "fault" / "random_keys"
    recs, logs = [], []
    t = threading.Thread(target=lambda: recs.extend(Sw.run_jobs([job], out=tmp_path / "fault", log=logs.append,
                                                                **kw)))
    t.start()
    deadline = time.time() + 120
    while not (d / "linear_s5.ckpt.pt").exists():
        assert time.time() < deadline and t.is_alive(), logs
        time.sleep(0.05)
    addr = re.search(r"attempt 1 on (tcp://\S+)", (d / "linear_s5.log").read_text()).group(1)
    pid = client.run(os.getpid)[addr]
    children = psutil.Process(pid).children()
    assert children, "the run's subprocess"
    os.kill(pid, signal.SIGKILL)
    _, alive = psutil.wait_procs(children, timeout=2)

    def running(p):                    # a zombie has exited: only its parent (gone with the worker) had to reap it
        try:
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    alive = [p for p in alive if running(p)]
    assert not alive, "the run's subprocess must die with its worker (run_child: PR_SET_PDEATHSIG)"
    killed_at = torch.load(d / "linear_s5.ckpt.pt", weights_only=False)["step"]
    assert not (d / "linear_s5.json").exists() and 25 <= killed_at < 75
    # the uninterrupted run of the same seed, on the same cluster (same thread count per run)
    Sw.run_jobs([job], out=tmp_path / "ref", log=lambda m: None, **kw)
    t.join(timeout=180)
    assert not t.is_alive()
    (rec,) = recs
    assert rec["status"] == "done" and rec["attempt"] == 2 and rec["worker"] != addr, (rec, logs)
    assert rec["resumed_from"] is not None and rec["resumed_from"] >= killed_at
    assert any("attempt 2" in m and "resuming from step" in m for m in logs), logs
    log = (d / "linear_s5.log").read_text()
    assert "attempt 2 on" in log and "resuming from the checkpoint at step" in log
    # train() itself continued from there: after the second header every per-checkpoint line comes later (a run
    # restarted from step 0 would log step 25 again).  Where the kill landed after the checkpoint at step 50 the
    # resumed run has no checkpoint line left before its end (a fast machine: 2 of 10 runs on 6 December)
    second = log.split("] attempt 2 on", 1)[1]
    steps_logged = [int(s) for s in re.findall(r"step (\d+)/75 after", second)]
    assert all(s > rec["resumed_from"] for s in steps_logged), second
    assert steps_logged or rec["resumed_from"] >= 50, second
    a, b = _result_core(d / "linear_s5.json"), _result_core(tmp_path / "ref" / "random_keys" / "linear_s5.json")
    assert a["eval"] and len(a["curve"]) == 3
    assert a == b


def test_failed_run_is_retried_and_reported_while_the_others_go_on(cpu_cluster, tmp_path):
    cluster, _ = cpu_cluster
    logs = []
    recs = Sw.run_jobs([("random_keys", "linear", 0), ("random_keys", "mamba", 0)], out=tmp_path, steps=2,
                       batch_size=4, extra_args=TINY, scheduler=cluster.scheduler_address, retries=1,
                       progress=False, log=logs.append)
    by = {r["model"]: r for r in recs}
    assert by["linear"]["status"] == "done" and (tmp_path / "random_keys" / "linear_s0.json").exists()
    assert by["mamba"]["status"] == "failed" and by["mamba"]["rc"] == 2 and "model" in by["mamba"]["error"]
    assert any(m.startswith("FAILED (rc 2) random_keys:mamba_s0 after 2 attempt(s)") for m in logs), logs
    assert (tmp_path / "random_keys" / "mamba_s0.log").read_text().count("] attempt ") == 2


def test_campaign_runs_on_the_same_engine(cpu_cluster, tmp_path, capsys):
    """The campaign is a sweep with a time budget on the same engine (here joined by --scheduler)."""
    cluster, _ = cpu_cluster
    out = tmp_path / "c"
    rc = campaign.main(["--plan", "paper", "--limit", "1", "--steps", "2", "--batch-size", "4",
                        "--scheduler", cluster.scheduler_address, "--out", str(out), "--budget-s", "120",
                        "--reserve-s", "0"])
    text = capsys.readouterr().out
    assert rc == 0 and "campaign: 1/1 runs finished" in text and "done collision_recall:bl_s0" in text, text
    assert json.loads((out / "collision_recall" / "bl_s0.json").read_text())["steps"] == 2


def test_campaign_heavy_gpus_and_cli(monkeypatch, capsys):
    """--heavy-gpus and the other campaign flags reach the engine; heavy = cost > 1."""
    jobs = campaign.priority()
    assert {m for _, m, _ in filter(campaign.is_heavy, jobs)} >= {"direct-round2-nope", "curriculum-linear-rope",
                                                                   "stress-round2-128"}
    assert not campaign.is_heavy(("collision_recall", "bl", 0))
    calls = []
    monkeypatch.setattr(campaign, "run_jobs", lambda j, **kw: calls.append((list(j), kw)) or [])
    monkeypatch.setattr(campaign, "write_partials", lambda jobs, out: [])
    assert campaign.main(["--heavy-gpus", "1", "--workers-per-device", "9", "--heavy-workers-per-device", "3",
                          "--longest-first", "--limit", "10", "--retries", "2", "--budget-s", "100",
                          "--reserve-s", "30"]) == 0
    (j, kw), = calls
    assert j == campaign.longest_first(jobs[:10])
    assert (kw["heavy_gpus"], kw["workers_per_device"], kw["heavy_workers_per_device"], kw["retries"]) == (1, 9, 3, 2)
    assert kw["heavy"] is campaign.is_heavy and abs(kw["kill_at"] - kw["deadline"] - 30) < 1e-6
    calls.clear()
    campaign.main(["--limit", "2"])
    assert calls[0][1]["heavy"] is None


@pytest.mark.parametrize("plan, limit", [("device37", 3), ("device37", None), ("device38", None), ("device39", None),
                                         ("device40", 4), ("device41", 8), ("device42", 10),
                                         ("device43", 10), ("device44", 7), ("device45", 6), ("device46", 6),
                                         ("device47", 8), ("device48", 9), ("device49", 7), ("device50", 5),
                                         ("device51", 3), ("device52", 6), ("device53", 3),
                                         ("paper", 4)])
def test_campaign_order_file_keeps_the_plans_priority(monkeypatch, tmp_path, plan, limit):
    """--order-file: TASK/NAME of each run, one a line, in the plan's order even under --longest-first (the device
    script ranks equal checkpoints by it)."""
    monkeypatch.setattr(campaign, "run_jobs", lambda j, **kw: [])
    monkeypatch.setattr(campaign, "write_partials", lambda jobs, out: [])
    order = tmp_path / "order.txt"
    args = ["--plan", plan, "--order-file", str(order), "--longest-first", "--budget-s", "100", "--reserve-s", "0"]
    assert campaign.main(args + (["--limit", str(limit)] if limit else [])) == 0
    jobs = campaign.PLANS[plan]()[:limit]
    assert order.read_text().splitlines() == [f"{j[0]}/{campaign.job_name(j)}" for j in jobs]
    whole = campaign.PLANS[plan]()                                        # the whole plan: no run twice
    assert len({(j[0], campaign.job_name(j)) for j in whole}) == len(whole)
    names = [campaign.job_name(j) for j in whole]
    if plan == "device37":
        assert order.read_text().splitlines()[:3] == ["mqar/bl__d_model-64__lr-0.003_s0", "mqar/gdn__lr-0.003_s0",
                                                      "mqar/gdn__lr-0.01_s0"]
    if plan == "device38":     # GDN's rate pilot first: with one run at a time it is the one that finishes
        assert order.read_text().splitlines() == ["mqar/gdn__lr-0.003_s0", "mqar/bl__d_model-64__lr-0.003_s0"]
    if plan == "device39":     # GDN's width row first (64 fits one call), then the Base pilots of the other two
        assert order.read_text().splitlines() == ["mqar/gdn__d_model-64__lr-0.003_s0",
                                                  "mqar/gdn__d_model-256__lr-0.003_s0",
                                                  "mqar/gdn-conv__lr-0.003_s0", "mqar/mamba2__lr-0.003_s0"]
    if plan == "device40":     # GDN at width 256 at the lower rate first, Mamba2's Base run, then device33's seeds
        # the disputed readings' candidate causes first: panels b/c's width, then Update's training range
        assert order.read_text().splitlines() == ["mqar/bl__variant-block__d_model-64__lr-0.01_s0",
                                                  "mqar/gdn__variant-block__d_model-64_s0",
                                                  "mqar/gdn-conv__variant-update__update_train_frac-0.5_s0",
                                                  "mqar/mamba2__variant-update__lr-0.01__update_train_frac-0.5_s0"]
        jobs = campaign.PLANS[plan]()
        assert dict(jobs[6][3]) == {"variant": "base", "lr": 1e-3, "d_model": 256}
    if plan == "device41":     # the two unfinished width-64 Update runs, then what width 64 says of Update's
        # reproduced readings, then BL's Block seeds at width 64; device40's finished runs not again
        assert order.read_text().splitlines() == ["mqar/gdn-conv__variant-update__d_model-64_s0",
                                                  "mqar/mamba2__variant-update__d_model-64__lr-0.01_s0",
                                                  "mqar/bl__variant-update__d_model-64__lr-0.01_s0",
                                                  "mqar/gdn__variant-update__d_model-64__lr-0.01_s0",
                                                  "mqar/bl__variant-block__d_model-64__lr-0.01_s1",
                                                  "mqar/bl__variant-block__d_model-64__lr-0.01_s2",
                                                  "mqar/gdn__variant-block__d_model-64_s1",
                                                  "mqar/bl__variant-block__d_model-64__lr-0.01_s0"]
    if plan == "device42":     # BL's head split (Block, Update), the default protocol's seeds at the picked rates
        # (Block, then Update), then Base
        assert order.read_text().splitlines() == ["mqar/bl__variant-block__lr-0.01__bl_heads-8_s0",
                                                  "mqar/bl__variant-update__lr-0.01__bl_heads-8_s0",
                                                  "mqar/bl__variant-block__lr-0.01_s1", "mqar/bl__variant-block__lr-0.01_s2",
                                                  "mqar/gdn__variant-block_s1", "mqar/gdn__variant-block_s2",
                                                  "mqar/bl__variant-update__lr-0.01_s1", "mqar/bl__variant-update__lr-0.01_s2",
                                                  "mqar/gdn__variant-update__lr-0.01_s1",
                                                  "mqar/gdn__variant-update__lr-0.01_s2"]
        assert "gdn__variant-block__d_model-64_s1" in names
    if plan == "device43":     # the filler (both disputed readings: BL's Block run first, GDN's Block seed 2 from
        # its checkpoint beside it), then the query order, then device42's rest without width 64
        assert order.read_text().splitlines() == ["mqar/bl__variant-block__lr-0.01__filler-random_s0",
                                                  "mqar/gdn__variant-block_s2",
                                                  "mqar/gdn-conv__variant-update__filler-random_s0",
                                                  "mqar/mamba2__variant-update__lr-0.01__filler-random_s0",
                                                  "mqar/gdn__variant-block__filler-random_s0",
                                                  "mqar/bl__variant-update__lr-0.01__filler-random_s0",
                                                  "mqar/gdn__variant-update__lr-0.01__filler-random_s0",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/gdn__variant-block__query_order-shuffled_s0",
                                                  # device42's own order next (its finished runs are skipped
                                                  # where their results are, as in every plan)
                                                  "mqar/bl__variant-block__lr-0.01__bl_heads-8_s0"]
        assert not any("d_model-64" in n for n in names)
        assert "gdn__variant-update__lr-0.01_s2" in names and "mamba2__lr-0.01_s0" in names
    if plan == "device44":     # BL without its write mask (Block and Update, side by side), the query order, GDN's filler
        # Block run (from its checkpoint), then device43's rest with the filler's Update runs last
        assert order.read_text().splitlines() == ["mqar/bl__queries_write-true__variant-block__lr-0.01_s0",
                                                  "mqar/bl__queries_write-true__variant-update__lr-0.01_s0",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/gdn__variant-block__filler-random_s0",
                                                  "mqar/gdn__variant-block__query_order-shuffled_s0",
                                                  "mqar/gdn__variant-block_s2",
                                                  "mqar/bl__variant-block__lr-0.01__bl_heads-8_s0"]
        assert not any("d_model-64" in n for n in names)
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device45":     # the query order before it is named the cause: GDN's Block run (from its
        # checkpoint), the two Update runs (one broken reading rules it out), BL's Block seeds 1 and 2, then
        # device44's order
        assert order.read_text().splitlines() == ["mqar/gdn__variant-block__query_order-shuffled_s0",
                                                  "mqar/bl__variant-update__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/gdn__variant-update__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s1",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s2",
                                                  "mqar/bl__queries_write-true__variant-block__lr-0.01_s0"]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device47":     # BL's shuffled Block seed 1 (resumed), the Transformers under the DAG's input and
        # output changes (deepest first), BL's seed 2, then device46's order
        fact = "edge_tokens-single__output-per_node__edge_embedding-factored_s0"
        assert order.read_text().splitlines() == ["mqar/bl__variant-block__lr-0.01__query_order-shuffled_s1",
                                                  *(f"dag_reachability/transformer-{n}__{fact}" for n in (8, 4, 2, 1)),
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s2",
                                                  "mqar/gdn__variant-block__query_order-shuffled_s0",
                                                  "mqar/gdn__variant-update__lr-0.01__query_order-shuffled_s0"]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device48":     # the signed write strength's consistency (exp, softmax), its seed 1, round2 on seed
        # 0, GDN's shuffled Block seeds 2 and 1, then device47's order
        three = "edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__deltaformer_beta-signed"
        assert order.read_text().splitlines() == [f"dag_reachability/deltaformer-exp__{three}_s0",
                                                  f"dag_reachability/deltaformer-softmax__{three}_s0",
                                                  *(f"dag_reachability/deltaformer-{k}__{three}_s1"
                                                    for k in ("relu", "round2", "linear")),
                                                  f"dag_reachability/deltaformer-round2__{three}_s0",
                                                  "mqar/gdn__variant-block__query_order-shuffled_s2",
                                                  "mqar/gdn__variant-block__query_order-shuffled_s1",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s1"]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device49":     # two heads under the signed write strength: round2 and linear on seed 0, the three
        # fast arms on seed 1, ReLU's one-head run to its end, then device48's rest
        two = ("edge_tokens-single__output-per_node__edge_embedding-factored__deltaformer_write-query__n_heads-2"
               "__deltaformer_beta-signed")
        one, signed = two.replace("n_heads-2", "n_heads-1"), two.replace("__n_heads-2", "")
        assert order.read_text().splitlines() == [f"dag_reachability/deltaformer-round2__{two}_s0",
                                                  f"dag_reachability/deltaformer-linear__{two}_s0",
                                                  *(f"dag_reachability/deltaformer-{k}__{two}_s1"
                                                    for k in ("relu", "round2", "linear")),
                                                  f"dag_reachability/deltaformer-relu__{one}_s0",
                                                  f"dag_reachability/deltaformer-exp__{signed}_s0"]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device50":     # the shuffled order on GDN-conv's and Mamba2's Update runs, GDN-conv's seeds, then
        # device49's rest
        assert order.read_text().splitlines() == ["mqar/gdn-conv__variant-update__query_order-shuffled_s0",
                                                  "mqar/mamba2__variant-update__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/gdn-conv__variant-update_s1",
                                                  "mqar/gdn-conv__variant-update_s2",
                                                  "dag_reachability/deltaformer-round2__edge_tokens-single__output-"
                                                  "per_node__edge_embedding-factored__deltaformer_write-query__"
                                                  "n_heads-2__deltaformer_beta-signed_s0"]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device51":     # GDN-conv's Block run from its checkpoint, Mamba2 on Base at 3e-3, then device50's
        # rest without GDN's width-256 Base run (its checkpoint cannot be carried)
        assert order.read_text().splitlines() == ["mqar/gdn-conv__variant-block_s0", "mqar/mamba2__lr-0.003_s0",
                                                  "dag_reachability/deltaformer-linear_s1"]
        dag = [n for n in names if not n.startswith(("bl", "gdn", "mamba2"))]
        assert dag[:18] == [f"{m}_s{s}" for s in (1, 2) for m in ("deltaformer-linear", "deltaformer-round2",
                                                                  "deltaformer-relu", "deltaformer-exp",
                                                                  "deltaformer-softmax", "transformer-1",
                                                                  "transformer-2", "transformer-4", "transformer-8")]
        assert "gdn__d_model-256_s0" not in names and "gdn__d_model-256_s0" in [campaign.job_name(j) for j in campaign.device50()]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device52":     # seed 1's DAG Transformers (longest first), GDN-conv's Block run from its checkpoint,
        # seed 2's nine DAG models, then device51's rest
        assert order.read_text().splitlines() == [f"dag_reachability/transformer-{n}_s1" for n in (8, 4, 2, 1)] + [
            "mqar/gdn-conv__variant-block_s0", "dag_reachability/deltaformer-linear_s2"]
        assert names[5:14] == [f"{m}_s2" for m in ("deltaformer-linear", "deltaformer-round2", "deltaformer-relu",
                                                   "deltaformer-exp", "deltaformer-softmax", "transformer-1",
                                                   "transformer-2", "transformer-4", "transformer-8")]
        assert names[14] == "mamba2__lr-0.003_s0" and len(names) == len(set(names))
        assert sorted(names) == sorted(campaign.job_name(j) for j in campaign.device51())
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]
    if plan == "device53":     # Mamba2 on Block (Fig. 4c's missing model), Mamba2 on Base at 3e-3, then device52's rest
        assert order.read_text().splitlines() == ["mqar/mamba2__variant-block__lr-0.01_s0", "mqar/mamba2__lr-0.003_s0",
                                                  "dag_reachability/transformer-8_s1"]
        assert sorted(names) == sorted([campaign.job_name(j) for j in campaign.device52()]
                                       + ["mamba2__variant-block__lr-0.01_s0"])
    if plan == "device46":     # device45's runs, GDN's long Update run second (beside its resumed Block run)
        assert order.read_text().splitlines() == ["mqar/gdn__variant-block__query_order-shuffled_s0",
                                                  "mqar/gdn__variant-update__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/bl__variant-update__lr-0.01__query_order-shuffled_s0",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s1",
                                                  "mqar/bl__variant-block__lr-0.01__query_order-shuffled_s2",
                                                  "mqar/bl__queries_write-true__variant-block__lr-0.01_s0"]
        assert names[-2:] == ["bl__variant-update__lr-0.01__filler-random_s0",
                              "gdn__variant-update__lr-0.01__filler-random_s0"]


def test_campaign_longest_first_and_partials(tmp_path):
    """--longest-first: heavy runs first, ties in priority order; a stopped run's checkpoint -> .partial.json."""
    pri = campaign.priority()
    lf = campaign.longest_first(pri)
    assert sorted(lf) == sorted(pri)
    costs = [campaign.cost(j) for j in lf]
    assert costs == sorted(costs, reverse=True)
    assert lf[0][1].startswith("direct-") and campaign.cost(("swap_tracking", "stress-round2-512", 0)) > 1
    light = [j for j in lf if campaign.cost(j) == 1.0]
    assert light == [j for j in pri if campaign.cost(j) == 1.0]          # stable
    # a run stopped at the limit: checkpoint but no JSON -> partial record; finished runs are left alone
    d = tmp_path / "swap_tracking"
    d.mkdir()
    torch.save({"model": {"w": torch.zeros(2)}, "opt": {}, "gen": torch.zeros(4, dtype=torch.uint8),
                "step": 500, "wall_s": 12.3, "curve": [{"step": 25, "acc": 0.5, "length": 32}],
                "curriculum": {"stage": 1}, "protocol": {"queries_write": False, "lr": 0.003}},
               d / "curriculum-round2-nope_s0.ckpt.pt")
    torch.save({"step": 500, "curve": []}, d / "stress-linear-128_s0.ckpt.pt")
    (d / "stress-linear-128_s0.json").write_text("{}")
    jobs = [("swap_tracking", "curriculum-round2-nope", 0), ("swap_tracking", "stress-linear-128", 0),
            ("swap_tracking", "direct-linear-rope", 0)]
    paths = campaign.write_partials(jobs, tmp_path)
    assert [p.name for p in paths] == ["curriculum-round2-nope_s0.partial.json"]
    rec = json.loads(paths[0].read_text())
    assert rec["step"] == 500 and rec["curriculum"] == {"stage": 1} and rec["curve"][0]["length"] == 32
    assert rec["protocol"] == {"queries_write": False, "lr": 0.003}      # the run's choices come along
    assert "eval" not in rec and plots.load_results(tmp_path, "swap_tracking") == []


def test_slurm_path_of_the_readme():
    """The README's dask-jobqueue snippet builds a job script with one GPU worker of 12 run units."""
    jq = pytest.importorskip("dask_jobqueue")
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    m = re.search(r"```python\n(from dask_jobqueue import SLURMCluster.*?)```", readme, re.S)
    assert m, "the README's SLURM snippet"
    code = m.group(1).split("cluster.scale")[0]           # build it, do not submit jobs
    ns = {}
    exec(code, ns)
    cluster = ns["cluster"]
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert isinstance(cluster, jq.SLURMCluster)
    assert "--resources GPU=12" in script and "--nthreads 12" in script and "--gres=gpu:1" in script


def test_cost_ranks_the_new_task_families_by_their_measured_times():
    c = campaign.cost
    mq = lambda variant, epochs: ("mqar", "bl", 0, (("epochs", epochs), ("variant", variant)))  # noqa: E731
    assert c(mq("base", 40)) > c(mq("update", 40)) > c(mq("block", 40)) > c(mq("base", 4)) > 1
    assert c(("mqar", "gdn", 0)) == c(mq("base", 40))                  # the defaults: Base, 40 epochs
    dag = [c(("dag_reachability", m, 0)) for m in ("transformer-1", "transformer-2", "transformer-4", "transformer-8")]
    assert dag == sorted(dag) and dag[0] > 1.0
    assert c(("dag_reachability", "deltaformer-round2", 0)) > c(("collision_recall", "bl", 0))


def _tree(d):
    return sorted((str(p.relative_to(d)), p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*"))


def test_campaign_list_says_where_each_run_of_a_plan_stands_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """--list: one line per run in the plan's order (done / partial with its step of the schedule / checkpoint /
    to run) and a line of counts; it runs nothing and leaves --out as it was."""
    monkeypatch.setattr(campaign, "run_jobs", lambda *a, **k: pytest.fail("--list must not run anything"))
    d = tmp_path / "dag_reachability"
    d.mkdir()
    (d / "deltaformer-linear_s0.json").write_text("{}")
    (d / "deltaformer-round2_s0.partial.json").write_text(json.dumps({"step": 1250, "curve": []}))
    (d / "deltaformer-relu_s0.ckpt.pt").write_bytes(b"x")
    (d / "transformer-8_s1.json").write_text("{}")                   # not a run of the plan: not listed
    before = _tree(tmp_path)
    assert campaign.main(["--plan", "dag", "--out", str(tmp_path), "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert tmp_path.joinpath("runs").exists() is False and _tree(tmp_path) == before
    models = ["deltaformer-linear", "deltaformer-round2", "deltaformer-relu", "deltaformer-exp",
              "deltaformer-softmax", "transformer-1", "transformer-2", "transformer-4", "transformer-8"]
    runs = [f"dag_reachability/{m}_s0" for m in models] + \
           [f"dag_reachability/{m}__root_position-last_s0" for m in models]
    assert [ln.split()[-1] if "step" not in ln else ln.split()[1] for ln in lines[:-1]] == runs
    assert lines[0] == "done       dag_reachability/deltaformer-linear_s0"
    # the DAG schedule is 5,000 steps (AM Fig. 7's x-axis)
    assert lines[1] == "partial    dag_reachability/deltaformer-round2_s0  step 1,250 of 5,000"
    assert lines[2] == "checkpoint dag_reachability/deltaformer-relu_s0"
    assert all(ln.startswith("to run     ") for ln in lines[3:-1])
    assert lines[-1].startswith(f"plan dag in {tmp_path}: 18 run(s): 1 done, 1 stopped part-way, 1 with a "
                                "checkpoint only, 15 not started; ")


@pytest.mark.parametrize("argv, flag", [(["--list", "--out", "{tmp}/nowhere"], "--out"),
                                        (["--list", "--out", "{tmp}", "--order-file", "{tmp}/o.txt"], "--order-file")])
def test_campaign_list_refuses_bad_input_in_one_line_naming_the_flag(tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.setattr("sys.argv", ["campaign", "--plan", "dag"] + [a.format(tmp=tmp_path) for a in argv])
    before = _tree(tmp_path)
    assert campaign._cli() == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(f"campaign: error: {flag}"), err
    assert _tree(tmp_path) == before
