"""``assocmem snr`` and ``assocmem swap``: JSON schemas, values, bad input -> exit 2."""
import json
import math
import subprocess
import sys

import pytest

from assocmem.cli import main
from assocmem.theory import am_snr as T


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "assocmem", *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_snr_json_schema_and_values(capsys):
    assert main(["snr", "--kernel", "linear", "--n", "64", "--d", "8", "--samples", "4000", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert set(obj) == {"leading_order", "exact", "monte_carlo"}
    assert set(obj["monte_carlo"]) == {"mean", "stderr", "samples"}
    assert obj["leading_order"] == 8.0 and obj["exact"] == 10.5 and obj["monte_carlo"]["samples"] == 4000
    mc = obj["monte_carlo"]
    assert abs(mc["mean"] - 10.5) < 4.5 * mc["stderr"]


def test_snr_exp_default_tau_is_sqrt_d(capsys):
    assert main(["snr", "--kernel", "exp", "--n", "32", "--d", "16", "--samples", "3000", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["exact"] == pytest.approx(float(T.inverse_snr_exact("exp", 32, 16, "4.0")), rel=1e-14)
    assert obj["leading_order"] == pytest.approx(32 * math.exp(-6.0), rel=1e-14)  # N e^{-2(τ-1)d/τ²}, τ = 4
    assert abs(obj["monte_carlo"]["mean"] - obj["exact"]) < 4.5 * obj["monte_carlo"]["stderr"]


def test_snr_gaussian_values(capsys):
    assert main(["snr", "--kernel", "relu", "--n", "16", "--d", "10", "--values", "gaussian", "--dv", "7",
                 "--samples", "500", "--seed", "3", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["exact"] == pytest.approx(15 / 16 * 7 / 5, rel=1e-14)


def test_snr_seed_reproducible(capsys):
    args = ["snr", "--kernel", "relu", "--n", "8", "--d", "6", "--samples", "200", "--seed", "5", "--json"]
    main(args)
    a = capsys.readouterr().out
    main(args)
    assert capsys.readouterr().out == a


def test_snr_human_output(capsys):
    assert main(["snr", "--kernel", "exp", "--n", "16", "--d", "9", "--samples", "300"]) == 0
    out = capsys.readouterr().out
    assert "leading order" in out and "exact" in out and "Monte Carlo" in out


@pytest.mark.parametrize("args, word", [
    (["--kernel", "linear", "--n", "8", "--d", "2"], "d"),
    (["--kernel", "relu", "--n", "8", "--d", "1"], "d"),
    (["--kernel", "exp", "--n", "8", "--d", "8", "--tau", "0.8"], "tau"),
    (["--kernel", "exp", "--n", "8", "--d", "8", "--tau", "-2"], "tau"),
    (["--kernel", "linear", "--n", "0", "--d", "8"], "n"),
    (["--kernel", "linear", "--n", "8", "--d", "8", "--values", "gaussian", "--dv", "2"], "dv"),
    (["--kernel", "linear", "--n", "8", "--d", "8", "--tau", "3"], "tau"),
    (["--kernel", "linear", "--n", "8", "--d", "8", "--samples", "1"], "samples"),
])
def test_snr_bad_input_exit_2(args, word):
    rc, out, err = run_cli("snr", *args)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in err


def test_swap_json_schema_exact(capsys):
    assert main(["swap", "--n", "12", "--swaps", "300", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert set(obj) == {"n", "d", "eps", "max_abs_inner", "swaps", "mismatches", "max_readout_error"}
    assert obj["n"] == 12 and obj["swaps"] == 300 and obj["eps"] == 0.12
    assert obj["max_abs_inner"] <= obj["eps"] < 0.125
    assert obj["mismatches"] == 0 and obj["max_readout_error"] == 0.0


def test_swap_linear_and_round2_lose_track(capsys):
    for k in ("linear", "round2"):
        assert main(["swap", "--n", "24", "--swaps", "300", "--kernel", k, "--json"]) == 0
        obj = json.loads(capsys.readouterr().out)
        assert obj["mismatches"] > 0 and obj["max_readout_error"] > 0.5


def test_swap_orthonormal_keys_when_d_at_least_n(capsys):
    assert main(["swap", "--n", "6", "--d", "6", "--kernel", "linear", "--swaps", "50", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["max_abs_inner"] == 0.0 and obj["mismatches"] == 0


def test_swap_human_output(capsys):
    assert main(["swap", "--n", "8", "--swaps", "20", "--kernel", "linear", "--d", "5"]) == 0
    out = capsys.readouterr().out
    assert "mismatches" in out and "d=5" in out


@pytest.mark.parametrize("args, word", [
    (["--n", "1"], "n"),
    (["--n", "16", "--eps", "0.2"], "eps"),
    (["--n", "16", "--eps", "1.5"], "eps"),
    (["--n", "16", "--d", "8"], "certify"),
    (["--n", "16", "--swaps", "-1"], "swaps"),
    (["--n", "16", "--d", "0"], "d"),
])
def test_swap_bad_input_exit_2(args, word):
    rc, out, err = run_cli("swap", *args)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in err
