"""The install gives a working Jupyter (``pytest -k notebook``): the front-end
commands exist, and a real Jupyter server opens the jupytext ``.py`` files as
notebooks (jupytext's contents manager), with the widget manager installed."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def jupyter(*args, timeout=120):
    exe = BIN / "jupyter"
    if not exe.exists():
        pytest.fail(f"no `jupyter` beside {sys.executable}: the notebooks extra is not installed")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.notebook
@pytest.mark.parametrize("command", ["lab", "notebook", "nbconvert"])
def test_notebook_frontend_commands_exist(command):
    proc = jupyter(command, "--version")
    assert proc.returncode == 0, proc.stderr[-500:]


@pytest.mark.notebook
def test_notebook_frontend_extensions_installed():
    proc = jupyter("labextension", "list")
    listing = proc.stdout + proc.stderr
    assert "jupyterlab-jupytext" in listing and "@jupyter-widgets/jupyterlab-manager" in listing, listing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.notebook
def test_notebook_frontend_opens_py_percent_files_as_notebooks(tmp_path):
    port, token = _free_port(), "assocmem-test"
    cmd = [str(BIN / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}", "--ServerApp.port_retries=0",
           "--allow-root"]  # CI runs as root
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    base = f"http://127.0.0.1:{port}"

    def get(path):
        req = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    try:
        deadline = time.time() + 90
        while True:
            try:
                get("/api/status")
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    pytest.fail("jupyter lab did not start: " + (server.stdout.read() if server.poll() is not None
                                                                 else "timeout"))
                time.sleep(0.5)
        model = get("/api/contents/notebooks/03_bl_collision.py?type=notebook&content=1")
        assert model["type"] == "notebook"
        cells = model["content"]["cells"]
        assert cells[0]["cell_type"] == "markdown" and "collision experiment" in "".join(cells[0]["source"])
        assert sum(c["cell_type"] == "code" for c in cells) >= 5
        kernels = get("/api/kernelspecs")
        assert "python3" in kernels["kernelspecs"]
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
