"""The main job: ``assocmem verify`` on defaults passes (no claim failed)."""
import json
import subprocess
import sys


def test_verify_defaults_no_failures():
    p = subprocess.run([sys.executable, "-m", "assocmem", "verify", "--json"], capture_output=True,
                       text=True, timeout=900)
    obj = json.loads(p.stdout)
    failed = [(c["id"], c["detail"]) for c in obj["claims"] if c["status"] == "failed"]
    assert not failed, failed
    assert p.returncode == 0
    ids = {c["id"] for c in obj["claims"]}
    assert {"bl.collision_table", "bl.iso_ablation", "bl.diag_ablation", "bl.fig3a_plateau"} <= ids
    assert obj["provenance"]["versions"]["numpy"]
