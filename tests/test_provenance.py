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
