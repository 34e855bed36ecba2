"""benchmarks/alloc_peak.py: the host-side count of what forward+backward holds at its peak, and what
it says about the token-by-token backward (the backward ``chunk_bl`` takes at D = 128, S2)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "alloc_peak.py"
spec = importlib.util.spec_from_file_location("alloc_peak", SCRIPT)
ap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ap)


def test_the_counter_follows_frees():
    with ap.peak_counter() as c:
        a = torch.ones(1000)            # 4,000 bytes
        b = a * 2                       # 8,000 live
        del a
        d = b + 1                       # a freed: 8,000 again
        assert c.current == 8000
        del b, d
    assert c.peak == 8000 and c.current == 0


@pytest.mark.parametrize("op, backward", [("fused", "auto"), ("chunk", "recurrent")])
@pytest.mark.parametrize("alpha", [True, False])
def test_the_token_by_token_backward_holds_at_most_eight_token_buffers(op, backward, alpha):
    """At its peak forward+backward holds at most eight ``[B, T, H, D]`` buffers (the output, the saved
    ``u`` and ``e``, the value gradient and four of the backward's own), with or without the decay
    gradient: its assembly builds in z's buffer, and dw goes before the next passes allocate (it held
    eleven with decays before 6 December, 1,491 MiB at S2).  T ≫ D, so the D×D states are small."""
    B, T, H, D = 1, 1024, 2, 32
    r = ap.peak_fwdbwd((B, T, H, D, D), op=op, backward=backward, alpha=alpha, snapshot=True)
    unit = B * T * H * D * 4 / 2**20
    full = [e for e in r["at_peak"] if abs(e["MiB"] - unit) < 1e-9]
    assert len(full) <= 8, f"{len(full)} [B, T, H, D] buffers at the peak"
    assert r["peak_MiB"] < 8.5 * unit


def test_bad_shape_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "x.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--shapes", "S9", "--out", str(out)], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "--shapes" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_an_existing_output_is_not_written_over(tmp_path):
    out = tmp_path / "x.json"
    out.write_text("{}")
    p = subprocess.run([sys.executable, str(SCRIPT), "--shapes", "S4", "--out", str(out)], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "--out" in p.stderr and out.read_text() == "{}"


@pytest.mark.parametrize("bad", ["0", "x", "2,-1"])
def test_bad_start_every_is_one_line_and_writes_nothing(tmp_path, bad):
    out = tmp_path / "x.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--shapes", "S4", "--start-every", bad, "--out", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--start-every" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("L", [1, 2])
def test_keeping_every_kth_start_state_lowers_the_peak_by_the_states_not_held(L):
    """The chunked backward in segments (D = 16, C = 16, 256 tokens: NT = 16 chunks, S = 16 / L segments):
    keeping the start state of every K-th segment only (K = 4) holds ⌊(S−1)/4⌋ + 3 start states instead of
    S − 1, each a D×D and a D×m fp32 matrix per (batch, head); the count's peak falls by exactly that
    many (at this shape the peak is in the reverse pass, where every start state buffer is live)."""
    B, T, H, D = 2, 256, 2, 16
    S = 16 // L
    every = ap.peak_fwdbwd((B, T, H, D, D), bwd_segment_chunks=L, bwd_start_every=1)["peak_MiB"]
    fourth = ap.peak_fwdbwd((B, T, H, D, D), bwd_segment_chunks=L, bwd_start_every=4)["peak_MiB"]
    state = 2 * B * H * D * D * 4 / 2**20
    fewer = (S - 1) - ((S - 1) // 4 + 3)
    assert fewer > 0
    assert every - fourth == pytest.approx(fewer * state, rel=1e-6), (every, fourth, fewer * state)
