"""The CLI's shared mechanisms, one property each: help on every option, flag
names in messages, output-path checks that leave nothing behind, size
refusals naming the flag, the verify table and the result files it read."""
import argparse
import json

import pytest

from assocmem import budget, outputs, registry, report
from assocmem.args import name_flags, selected_parser
from assocmem.cli import build_parser, main
from assocmem.validate import ParamError


def _parsers(p, seen=None):
    seen = [] if seen is None else seen
    seen.append(p)
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                if sp not in seen:
                    _parsers(sp, seen)
    return seen


def test_every_option_of_every_command_has_help():
    missing = [f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
               for p in _parsers(build_parser()) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and not (a.help and a.help.strip())]
    assert not missing, missing


def _sub(*argv):
    parser = build_parser()
    return selected_parser(parser, parser.parse_args(list(argv)))


@pytest.mark.parametrize("argv, message, expected", [
    (["collision"], "lam must be > 0 (got -1.0)", "--reset-lambda must be > 0 (got -1.0)"),
    (["collision"], "omega must be finite", "--la-gain must be finite"),
    (["collision"], "n_a must be >= 0 (got -3)", "--n-a must be >= 0 (got -3)"),
    (["gpu", "train", "random_keys", "--model", "bl"], "curriculum threshold must lie in [0, 1]",
     "--curriculum-threshold must lie in [0, 1]"),
    (["gpu", "train", "random_keys", "--model", "bl"], "curriculum lengths[0] must be >= 1",
     "--curriculum-lengths[0] must be >= 1"),
    (["gpu", "train", "random_keys", "--model", "bl"], "batch_size must be >= 1", "--batch-size must be >= 1"),
    (["snr", "--kernel", "exp", "--n", "2", "--d", "2"], "tau must exceed 0.83", "--tau must exceed 0.83"),
    (["collision"], "something else went wrong", "something else went wrong"),
])
def test_messages_name_the_flag_the_user_typed(argv, message, expected):
    assert name_flags(message, _sub(*argv)) == expected


def test_param_error_names_its_parameter():
    p = _sub("collision")
    assert name_flags(str(ParamError("lam", "lam must be > 0")), p, "lam") == "--reset-lambda must be > 0"
    assert str(ParamError("x", "bad")) == "x: bad"


def test_negative_numbers_are_values_not_options(capsys):
    assert main(["collision", "--rho", "-1e-1", "--variants", "reset", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["rho"] == -0.1
    assert main(["collision", "--rho", "-inf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--rho" in err[0] and "finite" in err[0]


def test_output_checks_leave_nothing_behind(tmp_path):
    f = tmp_path / "out.json"
    assert outputs.output_file("--out", f) == f and not f.exists()
    d = tmp_path / "newdir"
    assert outputs.output_dir("--out", d) == d and not d.exists()
    made = tmp_path / "runs" / "sub" / "x.json"
    outputs.output_file("--out", made, parents=True)        # a default location: its folders are made
    assert made.parent.is_dir() and not made.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


@pytest.mark.parametrize("make, kind, word", [
    (lambda t: t / "missing" / "r.md", "file", "does not exist"),
    (lambda t: t, "file", "is a folder"),
    (lambda t: t / "f.txt" / "r.md", "file", "is a file"),
    (lambda t: t / "f.txt", "dir", "is a file"),
    (lambda t: "", "file", "empty path"),
    (lambda t: "/proc/assocmem-test", "dir", "cannot"),
    (lambda t: t / ("n" * 300), "file", "longer than"),
])
def test_bad_output_paths_are_refused_naming_the_flag(tmp_path, make, kind, word):
    (tmp_path / "f.txt").write_text("x")
    before = sorted(tmp_path.rglob("*"))
    check = outputs.output_file if kind == "file" else outputs.output_dir
    with pytest.raises(ValueError, match=word) as exc:
        check("--report", make(tmp_path))
    assert str(exc.value).startswith("--report")
    assert sorted(tmp_path.rglob("*")) == before


def test_existing_result_needs_force(tmp_path):
    f = tmp_path / "r.json"
    f.write_text("{}")
    with pytest.raises(ValueError, match="--force"):
        outputs.output_file("--out", f, overwrite=False)
    assert outputs.output_file("--out", f) == f and f.read_text() == "{}"


def test_budget_names_the_flag_that_makes_the_estimate_large(monkeypatch):
    monkeypatch.setenv("ASSOCMEM_MAX_MEMORY", "1G")
    monkeypatch.setenv("ASSOCMEM_MAX_SECONDS", "60")
    args = argparse.Namespace(n=10, d=10 ** 9)
    est = lambda a: budget.Estimate(8.0 * (a.n + a.d), 1e-9 * a.n * a.d)    # noqa: E731
    flags = {"n": ("--n", 10), "d": ("--d", 10)}
    with pytest.raises(ValueError) as exc:
        budget.check(est, args, flags)
    msg = str(exc.value)
    assert msg.startswith("--d 1000000000:") and "8 GB" in msg and "1.07 GB" in msg and "ASSOCMEM_MAX_MEMORY" in msg
    args = argparse.Namespace(n=10 ** 6, d=10 ** 5)                      # 9 MB, but 100 s
    with pytest.raises(ValueError, match=r"--n 1000000, --d 100000: .* take about 1.67 min"):
        budget.check(est, args, flags)
    assert budget.check(est, argparse.Namespace(n=10, d=10), flags).bytes == 160


def test_budget_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("ASSOCMEM_MAX_MEMORY", "512M")
    assert budget.memory_limit() == 512 * 2 ** 20
    monkeypatch.setenv("ASSOCMEM_MAX_MEMORY", "lots")
    with pytest.raises(ValueError, match="ASSOCMEM_MAX_MEMORY"):
        budget.memory_limit()


def _result(cid, detail, files=()):
    return registry.ClaimResult(cid, "confirmed", ["numpy"], "src", "pub", {}, detail, files=list(files))


def test_verify_table_wraps_the_result_column_without_losing_text():
    detail = " ".join(f"word{i}" for i in range(60))
    res = [_result("bl.example", detail)]
    lines = report.table(res, width=80).splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    assert " ".join(" ".join(ln.split()) for ln in lines).count("word59") == 1
    wide = report.table(res, width=80, wide=True).splitlines()
    assert any(detail in ln for ln in wide)


def test_the_files_a_check_reads_are_listed(tmp_path, monkeypatch):
    (tmp_path / "results" / "task_a").mkdir(parents=True)
    for s in (0, 1):
        (tmp_path / "results" / "task_a" / f"bl_s{s}.json").write_text("{}")
    (tmp_path / "elsewhere.json").write_text("{}")
    monkeypatch.setattr(registry, "ROOT", tmp_path)
    monkeypatch.setattr(registry, "EVIDENCE_ROOTS", (tmp_path / "results",))

    def check(ev):
        for p in sorted((tmp_path / "results" / "task_a").glob("*.json")):
            json.loads(p.read_text())
        (tmp_path / "elsewhere.json").read_text()             # not evidence: not listed
        ev.holds("numpy", "read", True)

    claim = registry.Claim("x.files", "t", "s", "p", check=check)
    r = claim.run()
    assert r.files == ["results/task_a/bl_s0.json", "results/task_a/bl_s1.json"]
    assert r.as_dict()["files"] == r.files
    assert "results/task_a/ (2): bl_s0 bl_s1" in report.table([r], width=120)
    md = report.markdown([r])
    assert "## Saved results read" in md and "`results/task_a/bl_s1.json`" in md


def test_verify_checks_the_report_path_before_running(tmp_path, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(registry.Claim, "run", lambda self, **kw: ran.append(self.id))
    rc = main(["verify", "--no-progress", "--only", "bl.iso_ablation", "--report", str(tmp_path / "no" / "r.md")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and not ran and len(err) == 1 and "--report" in err[0]


def test_verify_only_every_pattern_must_match(capsys):
    assert main(["verify", "--only", "bl.iso_ablation,zz.*"]) == 2
    err = capsys.readouterr().err
    assert "--only" in err and "'zz.*'" in err
