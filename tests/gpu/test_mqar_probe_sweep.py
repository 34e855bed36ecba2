"""scripts/mqar_probe_sweep.py: a named set of MQAR probes, run side by side, resumable, refusing bad flags."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mqar_probe_sweep.py"


def _run(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def _module():
    spec = importlib.util.spec_from_file_location("mqar_probe_sweep", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _written(tmp_path, sweep="mamba2-v1024"):
    """An --out folder where every probe of the sweep has its JSON already."""
    out = tmp_path / "o"
    out.mkdir()
    for name, _, _ in _module().SWEEPS[sweep]():
        (out / f"{name}.json").write_text("{}")
    return out


def _assert_each_command_parses(runs, tmp_path, capsys):
    """Each command the sweep builds is accepted by mqar_mixer_probe.py's parser: pointed at an existing
    --out, the probe gets past its parser and then refuses to overwrite, naming --out, not another flag.
    The first command runs as the sweep runs it (a subprocess); the others go through the probe's
    ``main`` in this process (the same parser, without a Python start-up each)."""
    m = _module()
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    spec = importlib.util.spec_from_file_location("mqar_mixer_probe", m.PROBE)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    for i, (name, spec_name, s) in enumerate(runs):
        cmd = m.command(spec_name, s, taken, "cpu", 100)
        assert cmd[:2] == [sys.executable, str(m.PROBE)], cmd
        if i == 0:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            code, err = p.returncode, p.stderr
        else:
            with pytest.raises(SystemExit) as exc:
                probe.main(cmd[2:])
            code, err = exc.value.code, capsys.readouterr().err
        assert code == 2 and "--out" in err and "never overwrites" in err, (name, err)


def test_list_names_every_probe_with_its_flags(tmp_path):
    p = _run("mamba2-v1024", "--list", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    names = [ln.split()[0] for ln in lines]
    assert len(names) == len(set(names)) == 12
    assert "gdn-v1024-lr0.003" in names and names[0] == "mamba2-v1024-lr0.003-mixers-long"
    assert sum("--backbone mixers" in ln for ln in lines) == 3 and "--steps 8000" in lines[1]
    assert all("--config 24,4,1" in ln and "--d-model 128" in ln for ln in lines)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args,flag", [(["mamba2-v1024", "--parallel", "0", "--out", "o"], "--parallel"),
                                       (["mamba2-v1024", "--budget-s", "0", "--out", "o"], "--budget-s"),
                                       (["mamba2-v1024"], "--out"), (["--out", "o"], "sweep")])
def test_bad_flags_exit_2_in_one_line_and_write_nothing(tmp_path, args, flag):
    p = _run(*args, cwd=tmp_path)
    assert p.returncode == 2 and flag in p.stderr.strip().splitlines()[-1] and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()


def test_probes_already_written_are_skipped(tmp_path):
    out = _written(tmp_path)
    p = _run("mamba2-v1024", "--out", str(out), "--device", "cpu", "--budget-s", "60", cwd=tmp_path)
    assert p.returncode == 0 and "started" not in p.stdout
    assert sorted(f.suffix for f in out.iterdir()) == [".json"] * 12


def test_every_probe_command_parses_in_the_probe(tmp_path, capsys):
    _assert_each_command_parses(_module().SWEEPS["mamba2-v1024"](), tmp_path, capsys)


def test_bundle_packs_the_folder_into_one_file(tmp_path):
    import tarfile

    out = _written(tmp_path)
    p = _run("mamba2-v1024", "--out", str(out), "--bundle", str(tmp_path / "b.tgz"), "--device", "cpu", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    with tarfile.open(tmp_path / "b.tgz") as tar:
        names = tar.getnames()
    assert "o/gdn-v1024-lr0.003.json" in names and sum(n.endswith(".json") for n in names) == 12


def test_the_vocabulary_sweep_runs_long_schedules_up_to_the_papers_vocabulary(tmp_path, capsys):
    """mamba2-vocab: every probe on a 30,000-step schedule (stopped by the budget, not by the cosine), the
    paper's vocabulary at three rates, and every command accepted by the probe's parser."""
    m = _module()
    runs = m.SWEEPS["mamba2-vocab"]()
    assert all(s["steps"] == 30000 for _, _, s in runs)
    assert sorted(s["lr"] for _, spec, s in runs if spec == "mamba2" and s["vocab"] == 8192
                  and "backbone" not in s) == [3e-3, 1e-2, 3.2e-2]
    assert {s["vocab"] for _, _, s in runs} == {2048, 4096, 8192}
    _assert_each_command_parses(runs, tmp_path, capsys)
