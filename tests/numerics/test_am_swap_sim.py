"""Swap construction and simulation (numerics/am_swap.py)."""
import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics import am_swap as W


def brute_max_inner(signs):
    X = [[int(v) for v in row] for row in signs]
    d = len(X[0])
    return max(abs(sum(a * b for a, b in zip(X[i], X[j]))) for i, j in combinations(range(len(X)), 2)) / d


@settings(max_examples=12)
@given(st.integers(2, 12), st.sampled_from([0.1, 0.12, 0.2, 0.3]))
def test_greedy_meets_its_guarantee(n, eps):
    ks = W.greedy_sign_keys(n, eps)
    assert ks.d == W.greedy_dimension(n, eps)
    assert ks.certified and ks.max_abs_inner < eps
    assert ks.max_abs_inner == brute_max_inner(ks.signs)
    np.testing.assert_allclose(np.linalg.norm(ks.keys, axis=1), 1.0, rtol=1e-14)


def test_greedy_is_deterministic_and_compact():
    a, b = W.compact_greedy_keys(24, 0.12), W.compact_greedy_keys(24, 0.12)
    assert np.array_equal(a.keys, b.keys)
    assert a.certified and a.d < W.greedy_dimension(24, 0.12) / 10


def test_random_keys_are_seeded_and_certified_or_flagged():
    a, b = W.random_sign_keys(10, 0.3, 200, seed=3), W.random_sign_keys(10, 0.3, 200, seed=3)
    assert np.array_equal(a.keys, b.keys) and a.certified
    bad = W.random_sign_keys(30, 0.05, 8, seed=0, tries=3)
    assert not bad.certified and bad.max_abs_inner > 0.05


def test_basis_when_d_at_least_n():
    ks = W.near_orthogonal_keys(6, 0.12, d=9)
    assert ks.method == "basis" and ks.max_abs_inner == 0.0 and ks.d == 9
    with pytest.raises(ValueError):
        W.near_orthogonal_keys(6, 0.12, d=3, method="basis")


def test_swap_pairs():
    p = W.swap_pairs(7, 500, seed=1)
    assert p.shape == (500, 2) and np.all(p[:, 0] < p[:, 1]) and p.min() >= 0 and p.max() <= 6
    assert len({tuple(x) for x in p}) == 21                        # every pair occurs


def _track(n, pairs):
    perm = list(range(n))
    out = []
    for a, b in pairs:
        perm[a], perm[b] = perm[b], perm[a]
        out.append(list(perm))
    return out


@pytest.mark.parametrize("n, swaps, seed", [(5, 300, 0), (12, 400, 1)])
def test_exact_kernel_tracks_every_swap(n, swaps, seed):
    ks = W.near_orthogonal_keys(n, 0.12)
    pairs = W.swap_pairs(n, swaps, seed)
    r = W.simulate_swaps(ks.keys, pairs, "exact")
    assert r.mismatches == 0 and r.max_readout_error == 0.0
    truth = _track(n, pairs)[-1]
    assert list(r.final_permutation) == truth
    assert np.array_equal(r.final_readout, np.eye(n)[truth])
    # the recursion is the ideal DeltaNet on orthonormal keys, bit for bit
    ideal = W.simulate_swaps(np.eye(n), pairs, "linear")
    assert np.array_equal(ideal.memory.U, r.memory.U)


def test_incremental_readout_equals_memory_read():
    ks = W.near_orthogonal_keys(10, 0.12)
    r = W.simulate_swaps(ks.keys, W.swap_pairs(10, 60, 2), "linear")
    np.testing.assert_allclose(r.final_readout, r.memory.read(ks.keys), rtol=1e-10, atol=1e-12)


def test_linear_and_round2_lose_track_in_few_dimensions():
    ks = W.near_orthogonal_keys(32, 0.12)
    pairs = W.swap_pairs(32, 400, 3)
    for k in ("linear", "round2"):
        assert W.simulate_swaps(ks.keys, pairs, k).mismatches > 0


def test_bound_is_sharp_beyond_one_eighth():
    """Four keys with cross inner products ±0.15 (ε = 0.15 > 1/8): the swap keys
    (k_0 − k_1) and (k_2 − k_3) have inner product 0.6 (ideal 0), which the
    rounding kernel sends to 1: the read-outs go wrong."""
    G = np.eye(4)
    for (i, j), v in {(0, 2): 0.15, (0, 3): -0.15, (1, 2): -0.15, (1, 3): 0.15}.items():
        G[i, j] = G[j, i] = v
    K = np.linalg.cholesky(G)
    assert abs((K[0] - K[1]) @ (K[2] - K[3]) - 0.6) < 1e-12
    r = W.simulate_swaps(K, np.array([[0, 1], [2, 3]]), "exact")
    assert r.mismatches > 0 or r.max_readout_error > 0.5


@pytest.mark.parametrize("call", [
    lambda: W.simulate_swaps(np.eye(4), np.array([[1, 1]])),
    lambda: W.simulate_swaps(np.eye(4), np.array([[2, 1]])),
    lambda: W.simulate_swaps(np.eye(4), np.array([[0, 4]])),
    lambda: W.simulate_swaps(np.eye(4), np.array([[0, 1]]), "softmax"),
    lambda: W.run_swap_experiment(8, 10, "exact", eps=0.125),
    lambda: W.run_swap_experiment(8, 10, "exact", eps=0.12, d=4),
    lambda: W.run_swap_experiment(1, 10),
    lambda: W.near_orthogonal_keys(8, 1.5),
])
def test_validation(call):
    with pytest.raises(ValueError):
        call()


def test_tracking_curve():
    c = W.tracking_curve(8, 50, eps=0.12)
    assert set(c) >= {"exact", "linear", "round2", "d"}
    assert c["exact"]["mismatches"].sum() == 0 and len(c["linear"]["max_error"]) == 50


def test_dimension_constant_matches_formula():
    for n in (2, 10, 1000):
        d = W.greedy_dimension(n, 0.12)
        assert n * (n - 1) * math.exp(-d * W.kl_half(0.12)) < 1 <= n * (n - 1) * math.exp(-(d - 1) * W.kl_half(0.12))


def test_tiny_eps_is_a_named_error_not_a_division_by_zero():
    assert W.kl_half(1e-6) == pytest.approx(5e-13, rel=1e-9)          # the series, where the closed form cancels
    assert W.greedy_dimension(16, 1e-6) > 10 ** 12
    with pytest.raises(ValueError, match="^eps = 1e-300 is too small"):
        W.near_orthogonal_keys(16, 1e-300)
