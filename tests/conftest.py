"""Shared pytest configuration.

``--runslow`` runs the tests marked ``slow``; everything else runs by default
(CI runs the default set).  Hypothesis uses a fixed profile so CI is
deterministic and bounded.
"""
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def verify_report(tmp_path_factory):
    """One ``assocmem verify --json`` run for the whole session, shared by the tests that read its report
    and by the docs site's build (``--claims-json``): ``(exit code, report, path of the JSON)``."""
    p = subprocess.run([sys.executable, "-m", "assocmem", "verify", "--json"], capture_output=True, text=True,
                       timeout=900)
    path = tmp_path_factory.mktemp("verify") / "verify.json"
    path.write_text(p.stdout, encoding="utf-8")
    return p.returncode, json.loads(p.stdout), path
