"""numerics/bl_chunked.py: the chunkwise form equals the token-by-token filter."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics import bl_filter
from assocmem.numerics.bl_chunked import _ratios, bl_chunked


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 40), D=st.integers(1, 6), G=st.sampled_from([1, 2, 3]),
       chunk=st.integers(1, 20), zero_l2=st.booleans(), forget=st.booleans())
def test_chunked_equals_recurrence(seed, T, D, G, chunk, zero_l2, forget):
    rng = np.random.default_rng(seed)
    m = 2 * G
    keys, values, queries = rng.normal(size=(T, D)), rng.normal(size=(T, m)), rng.normal(size=(T, D))
    alpha = rng.uniform(0.2, 1.0, size=(T, D))
    if forget:
        alpha[rng.integers(0, T)] = 0.0
    l2 = np.zeros(T) if zero_l2 else rng.uniform(0, 0.5, T)
    r2 = 10.0 ** rng.uniform(-2, 0.5, size=(T, G))
    B = rng.normal(size=(D, D))
    P0, M0 = B @ B.T / D, rng.normal(size=(D, m))
    ref = bl_filter(keys, values, queries, l2=l2, r2=r2 if G > 1 else r2[:, 0], alpha=alpha, p0=P0, groups=G, M0=M0)
    ch = bl_chunked(keys, values, queries, l2=l2, r2=r2, alpha=alpha, p0=P0, groups=G, chunk=chunk, M0=M0)
    scale = max(1.0, np.abs(ref.y).max())
    assert np.abs(ch.y - ref.y).max() / scale < 1e-11
    assert np.allclose(ch.M, ref.M, rtol=1e-11, atol=1e-11)
    assert np.allclose(ch.P, ref.P, rtol=1e-11, atol=1e-12)
    assert np.allclose(ch.beta, ref.beta, rtol=1e-11)
    assert ch.L_minus_WY < 1e-11


def test_scalar_inputs_and_defaults():
    rng = np.random.default_rng(0)
    keys, values = rng.normal(size=(10, 3)), rng.normal(size=(10, 2))
    ch = bl_chunked(keys, values, l2=0.1, r2=0.5, p0=2.0, chunk=4)
    ref = bl_filter(keys, values, l2=0.1, r2=0.5, p0=2.0)
    assert ch.y is None and np.allclose(ch.M, ref.M, atol=1e-13) and np.allclose(ch.P, ref.P, atol=1e-13)


def test_ratios():
    a = np.array([[2.0], [3.0], [0.5], [0.0]])
    R = _ratios(a)[..., 0]
    assert R[3, 0] == 3.0 * 0.5 * 0.0 and R[2, 0] == 1.5 and R[2, 2] == 1.0 and R[0, 2] == 0.0


@pytest.mark.parametrize("kw, name", [
    (dict(chunk=0), "chunk"), (dict(r2=0.0), "r2"), (dict(l2=-1.0), "l2"), (dict(groups=3), "groups"),
    (dict(p0=-np.eye(2)), "p0"), (dict(M0=np.zeros((3, 3))), "M0"), (dict(r2=np.ones((5, 3))), "r2"),
])
def test_bad_input_names_the_parameter(kw, name):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=name):
        bl_chunked(rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), **kw)
