"""Every named campaign plan is runnable as written: each job's protocol resolves for its model
(a plan with a misspelt option or value would otherwise fail on the GPU machine, minutes in)."""
import pytest

pytest.importorskip("torch")

from assocmem.gpu.tasks import campaign as C  # noqa: E402
from assocmem.gpu.tasks.train import resolve_protocol, task_def  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("plan", sorted(C.PLANS))
def test_every_job_of_every_plan_resolves(plan):
    jobs = C.PLANS[plan]()
    assert jobs, plan
    for job in jobs:
        task, model = job[0], job[1]
        assert model in task_def(task).models, job
        resolve_protocol(task, dict(job[3]) if len(job) > 3 else {}, model)
    assert len({(j[0], C.job_name(j)) for j in jobs}) == len(jobs), f"{plan}: a run is listed twice"


def test_a_bad_plan_is_caught(monkeypatch):
    monkeypatch.setitem(C.PLANS, "bad", lambda: C.grid("mqar", ["bl"], [0], {"variant": "blocks"}))
    with pytest.raises(ValueError, match="variant"):
        test_every_job_of_every_plan_resolves("bad")


def test_a_reserve_that_leaves_no_time_is_refused_in_one_line(tmp_path, capsys):
    """--reserve-s at or above --budget-s would start nothing (a device call lost its campaign to this on
    1 December): one line naming the flag, exit 2, nothing written."""
    import sys
    from unittest import mock

    argv = ["campaign", "--plan", "device14", "--out", str(tmp_path), "--budget-s", "260", "--reserve-s", "300"]
    with mock.patch.object(sys, "argv", argv):
        rc = C._cli()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--reserve-s 300" in err[0] and "--budget-s 260" in err[0], err
    assert not list(tmp_path.rglob("*"))
