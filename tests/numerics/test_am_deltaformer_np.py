"""numpy DeltaFormer (numerics/am_deltaformer.py): three forms, features, reductions, work count."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics import am_deltaformer as D
from assocmem.theory import am_deltaformer as TD

SMOOTH = [D.Kernel("linear"), D.Kernel("poly", degree=2, c=0.5), D.Kernel("relu"), D.Kernel("exp", tau=2.0),
          D.Kernel("softmax", tau=1.0)]


def rel(a, b):
    return np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(b ** 2)), 1e-300)


def data(T, d, dv, seed):
    rng = np.random.default_rng(seed)
    K, W, Q = (rng.standard_normal((T, d)) / math.sqrt(d) for _ in range(3))
    return K, rng.standard_normal((T, dv)), W, Q, rng.uniform(0.5, 1.5, T), rng.uniform(0, 1, T)


@settings(max_examples=30)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(1, 4), st.integers(1, 50),
       st.sampled_from(range(len(SMOOTH))), st.sampled_from(range(len(SMOOTH))), st.integers(0, 2 ** 31))
def test_three_forms_agree(T, d, dv, C, i1, i2, seed):
    K, V, W, Q, a, b = data(T, d, dv, seed)
    k1, k2 = SMOOTH[i1], SMOOTH[i2]
    U1, O1 = D.deltaformer_sequential(K, V, W, Q, a, b, k1, k2)
    U2, O2 = D.deltaformer_triangular(K, V, W, Q, a, b, k1, k2)
    U3, O3, wc = D.deltaformer_blockwise(K, V, W, Q, a, b, k1, k2, chunk=C)
    for X, Y in ((U2, U1), (U3, U1), (O2, O1), (O3, O1)):
        assert rel(X, Y) < 1e-11
    assert wc.sequential_steps == math.ceil(T / C)


@pytest.mark.parametrize("name", ["round2", "exact"])
def test_rounding_kernels_on_grid_keys(name):
    K, W = D.grid_keys(25, 4, seed=1), D.grid_keys(25, 4, seed=2)
    V = np.random.default_rng(0).standard_normal((25, 3))
    U1, O1 = D.deltaformer_sequential(K, V, W, K, 1.0, 0.7, name, name)
    U2, O2 = D.deltaformer_triangular(K, V, W, K, 1.0, 0.7, name, name)
    U3, O3, _ = D.deltaformer_blockwise(K, V, W, K, 1.0, 0.7, name, name, chunk=6)
    assert rel(U2, U1) < 1e-12 and rel(U3, U1) < 1e-12 and rel(O3, O1) < 1e-12


@settings(max_examples=25)
@given(st.integers(1, 60), st.integers(1, 16), st.integers(1, 6), st.integers(1, 6))
def test_work_counter_equals_theory(T, C, d, dv):
    rng = np.random.default_rng(T * 131 + C)
    _, _, wc = D.deltaformer_blockwise(rng.standard_normal((T, d)), rng.standard_normal((T, dv)), chunk=C)
    assert wc.as_dict() == TD.blockwise_work(T, C, d, dv)


@settings(max_examples=30)
@given(st.integers(1, 4), st.integers(1, 4), st.floats(0, 2), st.integers(0, 2 ** 31))
def test_poly_features_reproduce_the_kernel(d, p, c, seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((3, d)), rng.standard_normal((4, d))
    G = D.poly_features(X, p, c) @ D.poly_features(Y, p, c).T
    np.testing.assert_allclose(G, (X @ Y.T + c) ** p, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("kern", [D.Kernel("linear"), D.Kernel("poly", degree=2, c=1.0),
                                  D.Kernel("poly", degree=3, c=0.3)])
def test_feature_delta_rule_equivalence(kern):
    K, V, _, Q, a, b = data(30, 3, 2, 5)
    K *= 0.6
    _, O1 = D.deltaformer_sequential(K, V, None, Q, a, b, kern, kern)
    S, O2 = D.delta_rule_features(D.features(K, kern), V, D.features(Q, kern), a, b)
    U, _ = D.deltaformer_triangular(K, V, None, Q, a, b, kern, kern)
    assert rel(O2, O1) < 1e-12
    assert rel(U.T @ D.features(K, kern), S) < 1e-12       # S_T = Σ u_i φ(k_i)ᵀ


def test_general_model_needs_two_states():
    K, V, W, Q, a, b = data(30, 3, 2, 6)
    k1, k2 = D.Kernel("linear"), D.Kernel("poly", degree=2, c=1.0)
    _, O = D.deltaformer_sequential(K, V, W, Q, a, b, k1, k2)
    O2 = D.two_state_features(D.features(K, k1), D.features(W, k1), D.features(K, k2), D.features(Q, k2), V, a, b)
    _, O1 = D.delta_rule_features(D.features(K, k2), V, D.features(Q, k2), a, b)
    assert rel(O2, O) < 1e-12 and rel(O1, O) > 1e-2


def test_reductions():
    K, V, W, Q, _, b = data(20, 4, 3, 7)
    sm = D.Kernel("softmax", tau=2.0)
    _, O = D.deltaformer_sequential(K, V, W, Q, 1.0, 0.0, "relu", sm)
    assert rel(O, D.causal_softmax_attention(Q, K, V, 2.0)) < 1e-12
    _, O = D.deltaformer_sequential(K, V, None, Q, b, b, "linear", "linear")
    assert rel(O, D.deltanet(K, V, Q, b)) < 1e-12


def test_softmax_write_kernel_empty_first_row():
    K, V, W, Q, a, b = data(5, 2, 2, 8)
    U, _ = D.deltaformer_sequential(K, V, W, Q, a, b, D.Kernel("softmax"), "linear")
    np.testing.assert_allclose(U[0], a[0] * V[0])
    A = D.write_matrix(K, W, b, D.Kernel("softmax"))
    np.testing.assert_allclose(A[1:].sum(axis=1), b[1:])      # rows normalised over i < t
    assert np.all(np.triu(A) == 0)


def test_memory_streams_and_grows():
    K, V, W, Q, a, b = data(70, 3, 2, 9)
    mem = D.KernelMemory(3, 2, "exp", "relu", capacity=2)
    for t in range(70):
        mem.write(K[t], V[t], W[t], a[t], b[t])
    U, O = D.deltaformer_sequential(K, V, W, Q, a, b, "exp", "relu")
    assert rel(mem.U, U) < 1e-12
    assert rel(mem.read(Q[-1]), O[-1:]) < 1e-12


@pytest.mark.parametrize("call", [
    lambda: D.deltaformer_sequential(np.ones((3, 2)), np.ones((4, 2))),
    lambda: D.deltaformer_triangular(np.ones((3, 2)), np.ones((3, 2)), W=np.ones((3, 3))),
    lambda: D.deltaformer_blockwise(np.ones((3, 2)), np.ones((3, 2)), chunk=0),
    lambda: D.deltaformer_sequential(np.full((3, 2), np.nan), np.ones((3, 2))),
    lambda: D.Kernel("cosine"),
    lambda: D.Kernel("exp", tau=0.0),
    lambda: D.features(np.ones((2, 2)), D.Kernel("exp")),
])
def test_validation(call):
    with pytest.raises(ValueError):
        call()


def test_cost_curve():
    c = D.blockwise_cost_curve(64, 4, 4, [1, 8, 64])
    assert c["sequential_steps"] == [64, 8, 1]
    assert c["total"] == [TD.blockwise_work(64, C, 4, 4)["total"] for C in (1, 8, 64)]
