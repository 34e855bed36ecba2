"""Execute every jupytext notebook under notebooks/ and check what a reader sees
(``pytest -k notebook``).

Each notebook is executed once (nbclient, a real ipykernel with its default
inline matplotlib backend, no MPLBACKEND override) and the outputs are checked:
no cell raised; every cell that draws a figure shows exactly one decodable PNG
and no bare ``<Figure size …>`` text; the derivation notebooks show LaTeX
(``text/latex``) whose proof marks are all ✓; claim results show as HTML; the
slider cells offer widgets and still show the static figure.
"""
import base64
import re
import struct
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.py"))
IDS = [p.stem for p in NOTEBOOKS]
DERIVATION_NOTEBOOKS = {"01_bl_recurrence", "02_bl_steady_state_geometry", "04_am_inverse_snr",
                        "05_deltaformer_swap"}
CLAIM_NOTEBOOKS = {"03_bl_collision", "06_gpu_kernel"}
SLIDER_NOTEBOOKS = {"02_bl_steady_state_geometry", "03_bl_collision", "04_am_inverse_snr"}
# a cell draws a figure when it builds one (make / an explorer with sliders)
DRAWS = re.compile(r"\bmake\(|\bsliders\(")

FIGURE_NOTEBOOKS = {p.stem for p in NOTEBOOKS if DRAWS.search(p.read_text(encoding="utf-8"))}

_EXECUTED: dict = {}


def executed(path: Path, tmp_dir: Path):
    """The notebook at ``path``, executed once per test session."""
    if path not in _EXECUTED:
        jupytext = pytest.importorskip("jupytext")
        nbclient = pytest.importorskip("nbclient")
        nb = jupytext.read(path)
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_dir)}}).execute()
        _EXECUTED[path] = nb
    return _EXECUTED[path]


@pytest.fixture
def nb(request, tmp_path_factory, monkeypatch):
    monkeypatch.delenv("MPLBACKEND", raising=False)   # the kernel's own default: inline figures
    return executed(request.param, tmp_path_factory.mktemp("nb"))


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def outputs(cell, mime=None):
    outs = [o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")]
    return [o for o in outs if mime is None or mime in o.get("data", {})]


def png_size(b64: str) -> tuple[int, int]:
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", raw[16:24])


def notebooks(selection=None):
    picked = [(p, i) for p, i in zip(NOTEBOOKS, IDS) if selection is None or i in selection]
    return pytest.mark.parametrize("nb", [p for p, _ in picked], ids=[i for _, i in picked], indirect=True)


@pytest.mark.notebook
@notebooks()
def test_notebook_executes_without_errors(nb):
    errors = [o for c in code_cells(nb) for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors[0].get("evalue") if errors else ""


@pytest.mark.notebook
@notebooks(FIGURE_NOTEBOOKS)
def test_notebook_figures_render_as_png(nb):
    drawing = [c for c in code_cells(nb) if DRAWS.search(c.source)]
    assert drawing
    for cell in drawing:
        pngs = outputs(cell, "image/png")
        assert len(pngs) == 1, f"{len(pngs)} images for figure cell:\n{cell.source}"
        w, h = png_size(pngs[0]["data"]["image/png"])
        assert w >= 300 and h >= 150, (w, h, cell.source)
    bare = [o["data"]["text/plain"] for c in code_cells(nb) for o in outputs(c)
            if "<Figure size" in o["data"].get("text/plain", "") and "image/png" not in o["data"]]
    assert not bare, f"figure shown as text only: {bare[0]}"


@pytest.mark.notebook
@notebooks(DERIVATION_NOTEBOOKS)
def test_notebook_derivations_render_as_latex(nb):
    latex = [o["data"]["text/latex"] for c in code_cells(nb) for o in outputs(c, "text/latex")]
    assert latex, "no text/latex output"
    for tex in latex:
        assert tex.lstrip().startswith("$") and tex.count("{") == tex.count("}"), tex[:200]
    # a displayed Derivation marks each step; none of them failed
    assert not any(r"&\times\ \text{" in t for t in latex), "a displayed derivation has a failing step"


@pytest.mark.notebook
@notebooks(DERIVATION_NOTEBOOKS - {"05_deltaformer_swap"})
def test_notebook_shows_derivation_objects_with_their_proof(nb):
    shown = [o["data"]["text/markdown"] for c in code_cells(nb) for o in outputs(c, "text/markdown")]
    assert shown, "no Derivation displayed"
    for md in shown:
        assert "*Proved:*" in md and "\\begin{aligned}" in md
        assert "✗" not in md


@pytest.mark.notebook
@notebooks(CLAIM_NOTEBOOKS)
def test_notebook_claim_results_render_as_html(nb):
    html = [o["data"]["text/html"] for c in code_cells(nb) for o in outputs(c, "text/html")]
    assert any('class="assocmem-claim"' in h and "<table>" in h for h in html)


@pytest.mark.notebook
@notebooks(SLIDER_NOTEBOOKS)
def test_notebook_sliders_offer_widgets_and_a_static_figure(nb):
    cells = [c for c in code_cells(nb) if "sliders(" in c.source]
    assert cells
    for cell in cells:
        mimes = [set(o["data"]) for o in outputs(cell)]
        assert any("application/vnd.jupyter.widget-view+json" in m for m in mimes), mimes
        assert any("image/png" in m for m in mimes), mimes
