"""The collision protocol (BL App. E.4): published table, any other setting, edge cases."""
import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.numerics.collision import collision_summary, run_collision
from assocmem.theory.bl_mp import collision_mp
from assocmem.protocol import PAPER, PUBLISHED, CollisionProtocol


def test_schedule_and_phases():
    pr = CollisionProtocol()
    s = pr.schedule()
    assert len(s) == pr.T == 112
    assert s[:12] == [0, 1, 2, 3, 4, 5] * 2 and set(s[12:52]) == {1} and set(s[52:]) == {0}
    assert pr.phases() == {"rounds": (1, 12), "B": (13, 52), "A": (53, 112)}
    assert (pr.end_of_b, pr.first_a) == (52, 53)


@pytest.mark.parametrize("quantity", sorted(PUBLISHED))
def test_published_values_to_five_decimals(quantity):
    """Published numbers (App. E.4) are the inputs compared against."""
    num = collision_summary(run_collision(PAPER, variants=("dense", "reset", "linear")), PAPER)
    for variant, published in PUBLISHED[quantity].items():
        assert round(num[variant][quantity], 5) == pytest.approx(published, abs=1e-12), (variant, quantity)


def test_long_run_gain_is_golden_ratio_conjugate():
    g = run_collision(PAPER, variants=("dense",))["dense"].gain[-1]
    assert g == pytest.approx((np.sqrt(5) - 1) / 2, rel=1e-12)


@settings(max_examples=6)
@given(rho=st.floats(-0.999, 0.999), p0=st.floats(0.01, 10), r2=st.floats(1e-3, 2), l2=st.floats(0, 1),
       n_b=st.integers(0, 6), n_a=st.integers(0, 6))
def test_any_setting_float64_equals_high_precision(rho, p0, r2, l2, n_b, n_a):
    pr = CollisionProtocol(rho=rho, p0=p0, r2=r2, l2=l2, n_b=n_b, n_a=n_a, rounds=1, D=5, m=4)
    variants = ("dense", "diag", "reset", "linear")
    a = collision_summary(run_collision(pr, variants=variants), pr)
    with mp.workdps(50):
        b = collision_mp(pr, variants, dps=50)
    for v in variants:
        for q in a[v]:
            assert a[v][q] == pytest.approx(float(b[v][q]), rel=1e-11, abs=1e-14), (v, q)


def test_batched_sweep_equals_single_runs():
    rhos = np.array([0.0, 0.3, 0.92, 1.0])
    batch = run_collision(PAPER, rho=rhos)
    for i, r in enumerate(rhos):
        one = run_collision(CollisionProtocol(rho=float(r)))
        for v in one:
            np.testing.assert_allclose(batch[v].p_ab[i], one[v].p_ab, rtol=1e-13, atol=1e-15)


def test_identical_keys_last_write_wins():
    """ρ = 1: A and B share a key; a linear read-out cannot keep both values."""
    runs = run_collision(CollisionProtocol(rho=1.0))
    for v in ("dense", "diag", "reset"):
        assert runs[v].p_ab[-1] < 0.5
    assert runs["dense"].p_ab[-1] == pytest.approx(1 / (1 + np.e), abs=1e-9)


def test_zero_process_noise_and_tiny_r2_stay_finite():
    for kw in (dict(l2=0.0), dict(r2=1e-10), dict(r2=1e-10, l2=0.0)):
        runs = run_collision(CollisionProtocol(**kw))
        for r in runs.values():
            assert np.all(np.isfinite(r.p_ab)) and np.all((r.gain >= 0) & (r.gain <= 1))


def test_uncertainty_traces():
    r = run_collision(PAPER, variants=("dense", "diag"), uncertainty=True)
    # B reinforcement shrinks the variance along k_B; A writes shrink it along k_A
    d = r["dense"]
    assert d.var_b[51] < d.var_b[11] and d.var_a[-1] < d.var_a[51]


@pytest.mark.parametrize("kw, name", [(dict(rho=1.01), "rho"), (dict(r2=0.0), "r2"), (dict(l2=-1e-3), "l2"),
                                      (dict(p0=-1.0), "p0"), (dict(n_b=-1), "n_b"), (dict(n_a=1.5), "n_a"),
                                      (dict(D=3), "D"), (dict(m=1), "m"), (dict(rho=float("nan")), "rho")])
def test_protocol_validation(kw, name):
    with pytest.raises(ValueError, match=name):
        CollisionProtocol(**kw)


def test_iso_requires_c():
    with pytest.raises(ValueError, match="iso_c"):
        run_collision(PAPER, variants=("iso",))


@pytest.mark.parametrize("protocol", ["paper", 3, {"rho": 0.9}])
def test_protocol_must_be_a_collision_protocol(protocol):
    with pytest.raises(ValueError, match=r"^protocol must be a CollisionProtocol"):
        run_collision(protocol)
