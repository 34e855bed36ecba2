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
