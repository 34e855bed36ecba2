"""FFN memory, running memories and the Softmax denominator, DeltaNet on stationary inputs."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics import am_deltaformer as D
from assocmem.numerics import am_updates as U


@settings(max_examples=25)
@given(st.integers(1, 40), st.integers(1, 9), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2 ** 31))
def test_ffn_is_a_relu_memory(m, Din, Dout, B, seed):
    rng = np.random.default_rng(seed)
    WK, WV, x = rng.standard_normal((m, Din)), rng.standard_normal((m, Dout)), rng.standard_normal((B, Din))
    want = sum(np.outer(np.maximum(x @ WK[a], 0), WV[a]) for a in range(m))
    np.testing.assert_allclose(U.ffn(x, WK, WV), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D.kernel_readout(WK, WV, x, "relu"), want, rtol=1e-12, atol=1e-12)


@settings(max_examples=25)
@given(st.integers(1, 60), st.integers(0, 2 ** 31))
def test_running_memory_is_the_running_mean(T, seed):
    X = np.random.default_rng(seed).standard_normal((T, 3))
    want = np.cumsum(X, axis=0) / np.arange(1, T + 1)[:, None]
    np.testing.assert_allclose(U.running_memory(X), want, rtol=1e-12, atol=1e-13)


def test_summable_steps_keep_the_past():
    X = np.r_[np.ones((10, 1)), -2 * np.ones((990, 1))]
    S = U.running_memory(X, "1/t2")
    S10 = S[9, 0]
    w = 10 * 1001 / (1000 * 11)
    assert math.isclose(S[-1, 0], w * S10 - 2 * (1 - w), rel_tol=1e-12)
    assert S[-1, 0] > 0.7               # most of the early value survives (w = 0.91)...
    assert U.running_memory(X, "1/t")[-1, 0] < -1.9   # ...while 1/t steps forget it (w = 0.01)


def test_softmax_output_is_mean_over_denominator():
    rng = np.random.default_rng(2)
    K, V, q = rng.standard_normal((50, 4)), rng.standard_normal((50, 2)), rng.standard_normal(4)
    o, num, z = U.softmax_attention_memory(K, V, q, 2.0)
    np.testing.assert_allclose(num / z[:, None], o, rtol=1e-12)
    np.testing.assert_allclose(o, D.causal_softmax_attention(np.tile(q, (50, 1)), K, V, 2.0), rtol=1e-12)


def test_denominator_fluctuation_matches_lognormal_variance():
    st_ = U.denominator_fluctuation(8, 2.0, 4.0, [50, 400], streams=5000, seed=1)
    pred = math.exp(4.0 / 4.0) - 1
    assert np.all(np.abs(st_.rel_mse_times_t - pred) < 4.5 * st_.rel_mse_se)
    assert np.allclose(st_.mean, math.exp(4.0 / 8.0), rtol=0.05)


def test_deltanet_converges_to_wv_wk_inverse_for_any_covariance():
    rng = np.random.default_rng(0)
    Wk = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
    Wv = rng.standard_normal((2, 3))
    for Sig in (np.eye(3), np.diag([3.0, 1.0, 0.3])):
        S, _ = U.deltanet_stationary(Wk, Wv, Sig, steps=8000, beta=0.1, seed=1)
        np.testing.assert_allclose(S, Wv @ np.linalg.inv(Wk), atol=1e-9)


def test_deltanet_validation():
    with pytest.raises(ValueError):
        U.deltanet_stationary(np.eye(2), np.eye(2), np.array([[1.0, 2.0], [2.0, 1.0]]), 10, 0.1)
    with pytest.raises(ValueError):
        U.deltanet_stationary(np.eye(2), np.eye(2), np.eye(2), 10, 0.0)
    with pytest.raises(ValueError):
        U.running_memory(np.ones((3, 1)), "1/sqrt(t)")
