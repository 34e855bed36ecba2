"""provenance.git_commit: HEAD in a checkout; on a device's copy without .git, the commit the copy was
made from (ASSOCMEM_COMMIT), so that a benchmark's JSON names it."""
import subprocess

from assocmem import provenance


def test_commit_is_head_in_this_checkout(monkeypatch):
    monkeypatch.setenv("ASSOCMEM_COMMIT", "abc1234")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=provenance.Path(provenance.__file__).resolve().parent.parent).stdout.strip()
    got = provenance.git_commit()
    assert got.split("+")[0] == head and "ASSOCMEM_COMMIT" not in got


def test_without_git_the_copy_names_its_source_commit(monkeypatch):
    class NoGit:
        stdout = ""

    monkeypatch.setattr(provenance.subprocess, "run", lambda *a, **k: NoGit())
    monkeypatch.setenv("ASSOCMEM_COMMIT", "abc1234")
    assert provenance.git_commit() == "abc1234 (ASSOCMEM_COMMIT)"
    monkeypatch.delenv("ASSOCMEM_COMMIT")
    assert provenance.git_commit() == "unknown"


import sys
import types

import pytest


@pytest.mark.parametrize("argv, main_spec, expected", [
    (["/usr/local/bin/assocmem", "gpu", "train", "dag_reachability", "--seed", "1"], None,
     "assocmem gpu train dag_reachability --seed 1"),
    (["/x/gpu/tasks/run_child.py", "train", "random_keys", "--model", "delta"], "assocmem.gpu.tasks.run_child",
     "python -m assocmem.gpu.tasks.run_child train random_keys --model delta"),
    (["/x/gpu/tasks/__main__.py", "train", "mqar"], "assocmem.gpu.tasks.__main__",
     "python -m assocmem.gpu.tasks train mqar"),
    (["scripts/probe_steps.py", "--device", "cuda"], None, "python scripts/probe_steps.py --device cuda"),
    ([], None, ""),
])
def test_the_recorded_command_is_one_a_user_can_type_again(monkeypatch, argv, main_spec, expected):
    """A sweep's child ran ``python -m assocmem.gpu.tasks.run_child train ...`` and its JSON said ``assocmem
    train ...``, a command the CLI refuses (it is ``assocmem gpu train``)."""
    fake_main = types.ModuleType("__main__")
    fake_main.__spec__ = types.SimpleNamespace(name=main_spec) if main_spec else None
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    assert provenance.invocation(argv) == expected
