"""AM Fig. 7 as a reader sees it: every protocol in the committed results has a panel titled in
words (a raw tag is unreadable), the panels wrap four to a row, and each is drawn."""
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("torch")

from pathlib import Path  # noqa: E402

from assocmem.gpu.tasks import plots as P  # noqa: E402

pytestmark = pytest.mark.gpu
RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_every_committed_protocol_has_a_panel_title_in_words():
    tags = set(P.dag_curves_data(RESULTS))
    assert "" in tags and len(tags) > 4
    missing = sorted(t for t in tags if t not in P.DAG_TAG_LABELS)
    assert not missing, f"add a title to plots.DAG_TAG_LABELS for {missing}"


def test_the_figure_wraps_its_panels_and_draws_each(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = {}
    real = plt.subplots

    def spy(*a, **kw):
        fig, axs = real(*a, **kw)
        seen["axs"] = axs
        return fig, axs

    monkeypatch.setattr(plt, "subplots", spy)
    paths = P.plot_dag(RESULTS, tmp_path)
    assert {p.suffix for p in paths} == {".png", ".pdf"} and all(p.stat().st_size > 10_000 for p in paths)
    axs = seen["axs"]
    n = len(P.dag_curves_data(RESULTS))
    assert axs.shape[1] == 4 and axs.shape[0] == -(-n // 4)
    drawn = [ax for ax in axs.flat if ax.get_visible()]
    assert len(drawn) == n and all(ax.lines and ax.get_title() for ax in drawn)
    assert all("__" not in ax.get_title() for ax in drawn)          # no raw tag as a title
