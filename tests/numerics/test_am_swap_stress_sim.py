"""The swap stress test's keys and simulation (numerics/am_swap.py, stress section)."""
import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics import am_swap as W


def _gauss(n, d, seed):
    K = np.random.default_rng(seed).standard_normal((n, d))
    return K / np.linalg.norm(K, axis=1, keepdims=True)


@settings(max_examples=40)
@given(st.integers(1, 40), st.integers(1, 60), st.integers(0, 10 ** 6))
def test_welch_bound_holds_for_random_keys(d, extra, seed):
    n = d + extra                                   # n > d
    K = _gauss(n, d, seed)
    assert W.coherence(K) >= W.welch_bound(n, d) - 1e-12
    fro, low = W.frame_potential(K)
    assert fro >= low * (1 - 1e-12)


def test_welch_bound_values_and_edges():
    assert W.welch_bound(512, 128) == pytest.approx(0.0766214166358195, rel=1e-14)
    assert W.welch_bound(256, 128) == pytest.approx(1 / math.sqrt(255), rel=1e-14)
    assert W.welch_bound(128, 128) == 0.0 and W.welch_bound(5, 9) == 0.0
    assert W.welch_bound(129, 128) == pytest.approx(1 / 128, rel=1e-14)
    assert W.welch_bound(2, 1) == 1.0
    # equality: an equiangular tight frame (3 vectors at 120 degrees in R^2)
    ang = 2 * np.pi * np.arange(3) / 3
    K = np.stack([np.cos(ang), np.sin(ang)], 1)
    assert W.coherence(K) == pytest.approx(W.welch_bound(3, 2), abs=1e-15)
    fro, low = W.frame_potential(K)
    assert fro == pytest.approx(low, rel=1e-14)


def test_welch_bound_holds_for_constructed_keys():
    for ks in (W.unbiased_bases_keys(512, 128), W.incoherent_keys(96, 32, eps=0.3, seed=1),
               W.near_orthogonal_keys(64, 0.2, d=40, method="greedy")):
        n, d = ks.keys.shape
        assert ks.max_abs_inner >= W.welch_bound(n, d)


def test_gf2_rank_matches_determinant_parity():
    rng = np.random.default_rng(0)
    for m in range(1, 7):
        for _ in range(30):
            M = rng.integers(0, 2, (m, m))
            full = round(abs(np.linalg.det(M))) % 2 == 1
            assert (W.gf2_rank(M) == m) == full
    assert W.gf2_rank(np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]])) == 2      # rows sum to 0 mod 2
    assert W.gf2_rank(np.zeros((2, 3), int)) == 0


def test_unbiased_symmetric_matrices():
    for m, count in ((1, 2), (3, 5), (6, 4)):
        Ss = W.unbiased_symmetric_matrices(m, count)
        assert len(Ss) == count and all((S == S.T).all() for S in Ss)
        for a in range(count):
            for b in range(a + 1, count):
                assert W.gf2_rank(Ss[a] - Ss[b]) == m
    with pytest.raises(ValueError):
        W.unbiased_symmetric_matrices(2, 5)


@pytest.mark.parametrize("n, d", [(2, 2), (8, 8), (16, 8), (64, 32), (128, 128), (129, 128), (256, 128),
                                  (384, 128), (512, 128), (640, 128), (1024, 512)])
def test_unbiased_keys_coherence_is_exact(n, d):
    ks = W.unbiased_bases_keys(n, d, seed=n)
    D, B = d // 2, -(-n // d)
    expected = math.cos(math.pi / (2 * B)) / math.sqrt(D) if B > 1 else 0.0
    assert ks.keys.shape == (n, d)
    np.testing.assert_allclose(np.linalg.norm(ks.keys, axis=1), 1.0, atol=1e-14)
    assert ks.max_abs_inner == pytest.approx(expected, abs=1e-14)
    # every overlap is 0 or cos(j pi/(2B))/sqrt(D) for some j
    G = np.abs(ks.keys @ ks.keys.T)[np.triu_indices(n, 1)]
    allowed = np.abs(np.cos(np.arange(B + 1) * np.pi / (2 * B))) / math.sqrt(D) if B > 1 else np.zeros(1)
    assert np.all(np.min(np.abs(G[:, None] - allowed[None, :]), axis=1) < 1e-13)


def test_unbiased_keys_seed_and_validation():
    a, b = W.unbiased_bases_keys(512, 128, seed=0), W.unbiased_bases_keys(512, 128, seed=0)
    assert np.array_equal(a.keys, b.keys)
    c = W.unbiased_bases_keys(512, 128, seed=1)
    assert not np.array_equal(a.keys, c.keys)
    ga = np.sort(np.abs(a.keys @ a.keys.T).ravel())
    gc = np.sort(np.abs(c.keys @ c.keys.T).ravel())
    np.testing.assert_allclose(ga, gc, atol=1e-14)                  # same overlaps, other order
    for n, d in ((10, 96), (10, 7), (20, 2), (48, 16), (300, 256)):       # 16, 256: D = 2^odd
        with pytest.raises(ValueError):
            W.unbiased_bases_keys(n, d)


def test_incoherent_keys():
    ks = W.incoherent_keys(96, 64, eps=0.12, seed=2)
    assert ks.certified and ks.max_abs_inner <= 0.12 and ks.method == "incoherent"
    assert ks.max_abs_inner == pytest.approx(W.coherence(ks.keys), abs=0)
    np.testing.assert_allclose(np.linalg.norm(ks.keys, axis=1), 1.0, atol=1e-14)
    again = W.incoherent_keys(96, 64, eps=0.12, seed=2)
    assert np.array_equal(ks.keys, again.keys)
    orth = W.incoherent_keys(16, 32, seed=0)
    assert orth.method == "orthonormal" and orth.max_abs_inner < 1e-14
    with pytest.raises(ValueError, match="Welch"):
        W.incoherent_keys(512, 128, eps=0.07)                      # below the bound 0.0766: impossible
    flagged = W.incoherent_keys(512, 128, eps=0.08, max_iter=3)
    assert not flagged.certified


@pytest.mark.slow
def test_incoherent_keys_at_the_stress_size():
    ks = W.incoherent_keys(512, 128, eps=0.11, seed=0)
    assert ks.certified and W.welch_bound(512, 128) < ks.max_abs_inner <= 0.11


def test_rounding_exact_keys_methods():
    keys, beta, ks = W.rounding_exact_keys(512, 128)
    assert ks.method == "unbiased" and beta == 100.0
    np.testing.assert_allclose(keys, 0.1 * ks.keys, rtol=0, atol=0)
    assert ks.max_abs_inner < 0.125
    _, _, ks64 = W.rounding_exact_keys(96, 64, eps=0.12)            # d = 64 is not 2·4^k: falls back
    assert ks64.method == "incoherent" and ks64.max_abs_inner <= 0.12
    _, _, ks32 = W.rounding_exact_keys(40, 32, eps=0.12)            # d = 32, n > d: 1/4·cos(pi/4) > 1/8
    assert ks32.method == "incoherent"
    with pytest.raises(ValueError):
        W.rounding_exact_keys(96, 64, method="unbiased")
    with pytest.raises(ValueError):
        W.rounding_exact_keys(64, 32, method="optimised", eps=0.125)


def test_scaled_round2_is_integer_rounding():
    """round(c^2 x, 2) * beta == rint(x) for overlaps away from the half-integers."""
    rng = np.random.default_rng(0)
    ideal = rng.integers(-2, 3, 20000).astype(float)
    x = ideal + rng.uniform(-0.49, 0.49, ideal.shape)
    keys_scale = W.ROUND2_SCALE
    assert np.array_equal(W.ROUND2_BETA * np.round(keys_scale ** 2 * x, 2), ideal)


def test_stress_sequence():
    sigma, pairs = W.stress_sequence(50, 400, seed=3)
    assert sorted(sigma) == list(range(50)) and np.all(pairs[:, 0] != pairs[:, 1])
    assert np.any(pairs[:, 0] > pairs[:, 1])                        # either orientation
    s2, p2 = W.stress_sequence(50, 400, seed=3, orientation="sorted")
    assert np.array_equal(s2, sigma) and np.array_equal(p2, np.sort(pairs, axis=1))


@pytest.fixture(scope="module")
def stress256():
    keys, beta, ks = W.rounding_exact_keys(256, 128, seed=0)
    sigma, pairs = W.stress_sequence(256, 512, seed=5)
    return keys, beta, ks, sigma, pairs


def test_round2_with_constructed_keys_tracks_exactly(stress256):
    keys, beta, ks, sigma, pairs = stress256
    r = W.simulate_stress(keys, sigma, pairs, "round2", beta, reads=("kernel", "linear"))
    assert r.wrong_kernel_values == 0 and r.max_gram_error <= 4 * ks.max_abs_inner + 1e-12
    assert r.accuracy == {"kernel": 1.0, "linear": 1.0} and r.accuracy_pos0["kernel"] == 1.0
    assert r.max_readout_error < 1e-12
    ex = W.simulate_stress(ks.keys, sigma, pairs, "exact", 1.0, reads=("kernel",))
    assert ex.accuracy["kernel"] == 1.0 and ex.wrong_kernel_values == 0
    np.testing.assert_allclose(r.U, ex.U, rtol=0, atol=1e-12)       # the same u's as the exact kernel


def test_linear_and_unscaled_round2_fail(stress256):
    keys, beta, ks, sigma, pairs = stress256
    lin = W.simulate_stress(ks.keys, sigma, pairs, "linear", 1.0, reads=("kernel",))
    un = W.simulate_stress(ks.keys, sigma, pairs, "round2", 1.0, reads=("kernel",))
    for r in (lin, un):
        assert r.wrong_kernel_values > 1000 and r.accuracy["kernel"] < 0.5
    # linear kappa1 is scale-free: c = 0.1 with beta = 100 is the same recursion as c = 1, beta = 1
    lin_s = W.simulate_stress(keys, sigma, pairs, "linear", beta, reads=("kernel",))
    np.testing.assert_allclose(lin_s.U, lin.U, rtol=1e-9, atol=1e-9)


def test_softmax_read_cannot_follow_while_linear_read_does(stress256):
    keys, beta, ks, sigma, pairs = stress256
    r = W.simulate_stress(keys, sigma, pairs, "round2", beta, taus=(3.0, 10.0, 100.0), reads=("linear", "softmax"))
    assert r.accuracy["linear"] == 1.0
    assert r.accuracy["softmax"] < 0.8 and max(r.softmax_by_tau.values()) == r.accuracy["softmax"]
    # the exact read needs weight -1 on swaps written k_i - k_c ...
    assert r.negative_weights == int(np.sum(pairs[:, 1] == 0))


def test_first_subtracted_swap_breaks_every_nonnegative_read():
    """Position c = 0, one swap written as k_1 - k_0: any read with token weights >= 0 is wrong
    either before or after it (theory: nonnegative_read_obstruction); the kernel read is right."""
    n = 8
    keys = np.eye(n)
    sigma = np.arange(n)
    pairs = np.array([[1, 0]])
    r = W.simulate_stress(keys, sigma, pairs, "exact", 1.0, reads=("kernel",))
    U = r.U                                                       # init u's, then e_0 - e_1
    assert np.array_equal(U[n], np.eye(n)[0] - np.eye(n)[1]) and r.accuracy["kernel"] == 1.0
    for w0, w1, ws in product(np.linspace(0, 1, 11), repeat=3):
        before = np.argmax(w0 * U[0] + w1 * U[1]) == 0 and w0 > w1
        o = w0 * U[0] + w1 * U[1] + ws * U[n]
        after = o[1] > o[0]
        assert not (before and after)


def test_sorted_orientation_needs_no_negative_weight_at_position_0(stress256):
    keys, beta, ks, _, _ = stress256
    sigma, pairs = W.stress_sequence(256, 512, seed=5, orientation="sorted")
    r = W.simulate_stress(keys, sigma, pairs, "round2", beta, reads=("kernel",))
    assert r.negative_weights == 0 and r.accuracy["kernel"] == 1.0


def test_random_keys_scaled_are_not_enough():
    """Gaussian unit keys (coherence ~0.38 at n=256, d=128) scaled by 1/10: rounding errs."""
    K = _gauss(256, 128, 4321)
    sigma, pairs = W.stress_sequence(256, 512, seed=5)
    r = W.simulate_stress(0.1 * K, sigma, pairs, "round2", 100.0, reads=("kernel",))
    assert W.coherence(K) > 0.25 and r.wrong_kernel_values > 0 and r.accuracy["kernel"] < 0.9


def test_simulate_stress_validation():
    keys = np.eye(4)
    with pytest.raises(ValueError):
        W.simulate_stress(keys, np.array([0, 1, 2, 2]), np.array([[0, 1]]))
    with pytest.raises(ValueError):
        W.simulate_stress(keys, np.arange(4), np.array([[1, 1]]))
    with pytest.raises(ValueError):
        W.simulate_stress(keys, np.arange(4), np.array([[0, 4]]))
    with pytest.raises(ValueError):
        W.simulate_stress(keys, np.arange(4), np.array([[0, 1]]), kernel="relu")
    r = W.simulate_stress(keys, np.arange(4), np.zeros((0, 2), int), "exact")
    assert r.swaps == 0 and r.accuracy["kernel"] == 1.0


@pytest.mark.slow
def test_stress_n512_d128():
    keys, beta, ks = W.rounding_exact_keys(512, 128, seed=0)
    sigma, pairs = W.stress_sequence(512, 1024, seed=1)
    r = W.simulate_stress(keys, sigma, pairs, "round2", beta)
    assert r.wrong_kernel_values == 0 and r.accuracy["kernel"] == 1.0 and r.accuracy["linear"] == 1.0
    assert r.accuracy["softmax"] < 0.8
    lin = W.simulate_stress(ks.keys, sigma, pairs, "linear", 1.0, reads=("kernel",))
    assert lin.accuracy["kernel"] < 0.1
