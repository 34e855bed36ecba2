"""The numpy filter's write mask against the textbook Kalman filter with observations dropped.

Three independent routes to the same posterior: ``bl_filter(write_mask=…)``
(skips the update), ``vec_kalman_filter(observed=…)`` (the vec-S Kalman filter
with its update skipped) and ``joint_gaussian_posterior(observed=…)`` (no
recursion: the joint Gaussian conditioned on the observed values only).
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from assocmem.numerics.bl_filter import bl_filter
from assocmem.numerics.kalman import joint_gaussian_posterior, vec_kalman_filter


def _seq(rng, T, D, m):
    K = rng.normal(size=(T, D))
    K /= np.linalg.norm(K, axis=-1, keepdims=True)
    return K, rng.normal(size=(T, m))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 7), D=st.integers(1, 3), m=st.integers(1, 2),
       decay=st.booleans(), l2=st.sampled_from([0.0, 0.05, 0.3]), r2=st.sampled_from([1e-3, 0.05, 1.0]))
def test_masked_filter_equals_kalman_with_observations_dropped(seed, T, D, m, decay, l2, r2):
    rng = np.random.default_rng(seed)
    K, Vv = _seq(rng, T, D, m)
    mask = rng.random(T) < 0.5
    alpha = rng.uniform(0.3, 1.0, size=(T, D)) if decay else None
    tr = bl_filter(K, Vv, K, l2=l2, r2=r2, p0=0.7, alpha=alpha, write_mask=mask, keep_states=True)
    means, covs = vec_kalman_filter(K, Vv, l2=l2, r2=r2, P0=0.7, A=alpha, observed=mask)
    for t in range(T):
        assert np.allclose(tr.Ms[t], means[t], atol=1e-10)
        assert np.allclose(np.kron(np.eye(m), tr.Ps[t]), covs[t], atol=1e-10)
    mean, cov = joint_gaussian_posterior(K, Vv, l2=l2, r2=r2, P0=0.7, A=alpha, observed=mask)
    assert np.allclose(tr.M, mean, atol=1e-8)
    assert np.allclose(np.kron(np.eye(m), tr.P), cov, atol=1e-8)
    # a non-writing step reports no gain; its read-out is still M_tᵀ q_t
    assert np.all(tr.gain[~mask] == 0)
    assert np.allclose(tr.y, np.einsum("tdm,td->tm", tr.Ms, K))


def test_all_written_mask_is_the_default_and_none_written_is_prediction_only():
    rng = np.random.default_rng(3)
    K, Vv = _seq(rng, 9, 4, 3)
    a = bl_filter(K, Vv, K, l2=0.1, r2=0.2)
    b = bl_filter(K, Vv, K, l2=0.1, r2=0.2, write_mask=np.ones(9, bool))
    assert np.array_equal(a.M, b.M) and np.array_equal(a.P, b.P) and np.array_equal(a.y, b.y)
    c = bl_filter(K, Vv, K, l2=0.1, r2=0.2, p0=0.5, write_mask=np.zeros(9, bool))
    assert np.all(c.M == 0)
    assert np.allclose(c.P, (0.5 + 9 * 0.1) * np.eye(4))           # only the prediction steps ran


@pytest.mark.parametrize("variant,kw", [("reset", {}), ("iso", {"iso_c": 0.4}), ("linear", {"omega": 0.7}),
                                        ("diag", {})])
def test_masked_variants_skip_exactly_the_masked_writes(variant, kw):
    """Without decay or process noise, the masked run = the run on the writing steps alone
    (``reset``/``iso``/``linear``/``diag`` carry nothing else from step to step)."""
    rng = np.random.default_rng(11)
    K, Vv = _seq(rng, 12, 4, 2)
    mask = rng.random(12) < 0.6
    full = bl_filter(K, Vv, K, l2=0.0, r2=0.3, variant=variant, write_mask=mask, **kw)
    sub = bl_filter(K[mask], Vv[mask], l2=0.0, r2=0.3, variant=variant, **kw)
    assert np.allclose(full.M, sub.M, atol=1e-13)
    if full.P is not None and variant != "reset" and variant != "iso":
        assert np.allclose(full.P, sub.P, atol=1e-13)


def test_mask_broadcasts_over_configurations_and_checks_its_type():
    rng = np.random.default_rng(5)
    K, Vv = _seq(rng, 6, 3, 2)
    masks = rng.random((4, 6)) < 0.5
    tr = bl_filter(K, Vv, l2=0.05, r2=0.1, write_mask=masks)
    for i in range(4):
        one = bl_filter(K, Vv, l2=0.05, r2=0.1, write_mask=masks[i])
        assert np.allclose(tr.M[i], one.M)
    with pytest.raises(ValueError, match="write_mask"):
        bl_filter(K, Vv, write_mask=np.ones(6))                      # not bool
    with pytest.raises(ValueError, match="write_mask"):
        bl_filter(K, Vv, write_mask=np.ones(5, bool))                # wrong length
    with pytest.raises(ValueError, match="observed"):
        vec_kalman_filter(K, Vv, l2=0.1, r2=0.1, observed=np.ones(5, bool))
