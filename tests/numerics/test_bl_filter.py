"""The numpy BL filter family against references that share none of its code."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocmem.numerics import bl_filter, joint_gaussian_posterior, vec_kalman_filter


@st.composite
def settings(draw, max_D=5, max_m=3, max_T=6):
    D = draw(st.integers(1, max_D))
    m = draw(st.integers(1, max_m))
    T = draw(st.integers(1, max_T))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dyn = draw(st.sampled_from(["identity", "diag", "full"]))
    keys = rng.normal(size=(T, D)) * draw(st.sampled_from([0.1, 1.0, 3.0]))
    values = rng.normal(size=(T, m))
    l2 = rng.uniform(0, 1, size=T) * draw(st.sampled_from([0.0, 0.01, 1.0]))
    r2 = 10.0 ** rng.uniform(draw(st.sampled_from([-6, -2, 0])), 1, size=T)
    rank = draw(st.integers(0, D))
    B = rng.normal(size=(D, rank))
    P0 = B @ B.T + draw(st.sampled_from([0.0, 0.5])) * np.eye(D)
    A = {"identity": None, "diag": rng.uniform(-1, 1, size=(T, D)),
         "full": rng.normal(size=(T, D, D)) / np.sqrt(D)}[dyn]
    return dict(keys=keys, values=values, l2=l2, r2=r2, P0=P0, A=A, dyn=dyn, D=D, m=m, T=T)


def _run(s, **kw):
    dyn_kw = {"alpha": s["A"]} if s["dyn"] == "diag" else {"A": s["A"]}
    return bl_filter(s["keys"], s["values"], l2=s["l2"], r2=s["r2"], p0=s["P0"], **dyn_kw, **kw)


def _rel(a, b):
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


@given(settings())
def test_dense_equals_vec_kalman_every_step(s):
    tr = _run(s, keep_states=True)
    means, covs = vec_kalman_filter(s["keys"], s["values"], l2=s["l2"], r2=s["r2"], P0=s["P0"], A=s["A"])
    assert _rel(tr.Ms, means) < 1e-9
    kron = np.stack([np.kron(np.eye(s["m"]), P) for P in tr.Ps])
    assert _rel(kron, covs) < 1e-9


@given(settings(max_D=3, max_m=2, max_T=4))
def test_dense_equals_joint_gaussian_conditioning(s):
    s["r2"] = np.maximum(s["r2"], 1e-2)     # keep the joint covariance well conditioned
    tr = _run(s)
    mean, cov = joint_gaussian_posterior(s["keys"], s["values"], l2=s["l2"], r2=s["r2"], P0=s["P0"], A=s["A"])
    assert _rel(tr.M, mean) < 1e-7
    assert _rel(np.kron(np.eye(s["m"]), tr.P), cov) < 1e-7


@given(settings(), st.floats(0.01, 10.0))
def test_reset_is_the_delta_rule(s, lam):
    """Prop. 2: P̄ ← λI gives M = AM + η k (v − (AM)ᵀk)ᵀ, η = λ/(r² + λ‖k‖²)."""
    tr = _run(s, variant="reset", lam=lam)
    M = np.zeros((s["D"], s["m"]))
    for t in range(s["T"]):
        k, v = s["keys"][t], s["values"][t]
        A = np.eye(s["D"]) if s["A"] is None else (np.diag(s["A"][t]) if s["dyn"] == "diag" else s["A"][t])
        Mb = A @ M
        eta = lam / (s["r2"][t] + lam * k @ k)
        M = Mb + eta * np.outer(k, v - Mb.T @ k)
        assert tr.gain[t] == pytest.approx(eta * (k @ k), rel=1e-12, abs=1e-15)
    assert _rel(tr.M, M) < 1e-12


def test_reset_default_lambda_is_r2_gain_half():
    rng = np.random.default_rng(0)
    k = rng.normal(size=(9, 4))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    tr = bl_filter(k, rng.normal(size=(9, 2)), l2=0.3, r2=rng.uniform(0.01, 5, 9), variant="reset")
    np.testing.assert_allclose(tr.gain, 0.5, rtol=1e-14)


@given(settings(), st.floats(0.001, 100.0))
def test_iso_is_reset_with_lambda_c(s, c):
    a = _run(s, variant="iso", iso_c=c)
    b = _run(s, variant="reset", lam=c)
    np.testing.assert_array_equal(a.M, b.M)


@given(settings(), st.floats(0.0, 2.0))
def test_linear_is_the_additive_recursion(s, omega):
    tr = _run(s, variant="linear", omega=omega)
    M = np.zeros((s["D"], s["m"]))
    for t in range(s["T"]):
        A = np.eye(s["D"]) if s["A"] is None else (np.diag(s["A"][t]) if s["dyn"] == "diag" else s["A"][t])
        M = A @ M + omega * np.outer(s["keys"][t], s["values"][t])
    assert _rel(tr.M, M) < 1e-12
    assert tr.P is None and np.all(tr.gain == omega)


@given(settings())
def test_diag_keeps_only_the_diagonal(s):
    tr = _run(s, variant="diag", keep_states=True)
    P = s["P0"].copy()                      # the first prediction still sees the full P0
    for t in range(s["T"]):
        A = np.eye(s["D"]) if s["A"] is None else (np.diag(s["A"][t]) if s["dyn"] == "diag" else s["A"][t])
        Pb = A @ P @ A.T + s["l2"][t] * np.eye(s["D"])
        u = Pb @ s["keys"][t]
        P = np.diag(np.diag(Pb - np.outer(u, u) / (s["r2"][t] + s["keys"][t] @ u)))
        np.testing.assert_allclose(tr.Ps[t], P, rtol=1e-10, atol=1e-12)


@given(settings(max_T=8))
def test_gain_in_unit_interval_and_P_psd(s):
    tr = _run(s, keep_states=True)
    assert np.all(tr.gain >= 0)
    assert np.all(s["r2"] * tr.beta > 0)           # 1 − g = r²β > 0
    for P in tr.Ps:
        assert np.linalg.eigvalsh(P).min() >= -1e-9 * max(1.0, np.trace(P))


def test_batched_equals_loop():
    rng = np.random.default_rng(3)
    B, T, D, m = 5, 7, 4, 3
    keys = rng.normal(size=(B, T, D))
    values = rng.normal(size=(B, T, m))
    q = rng.normal(size=(B, T, D))
    l2 = rng.uniform(0, 0.2, size=(B, 1))
    r2 = rng.uniform(0.1, 1, size=(B, T))
    p0 = rng.uniform(0.5, 3, size=B)
    alpha = rng.uniform(0.5, 1, size=(B, T, D))
    for variant in ("dense", "diag", "reset", "linear"):
        tb = bl_filter(keys, values, q, l2=l2, r2=r2, p0=p0, alpha=alpha, variant=variant)
        for b in range(B):
            t1 = bl_filter(keys[b], values[b], q[b], l2=l2[b], r2=r2[b], p0=p0[b], alpha=alpha[b], variant=variant)
            np.testing.assert_allclose(tb.M[b], t1.M, rtol=1e-13, atol=1e-14)
            np.testing.assert_allclose(tb.y[b], t1.y, rtol=1e-13, atol=1e-14)


@given(settings(max_m=1), st.integers(2, 3))
def test_grouped_noise_is_per_group_filter_and_block_kalman(s, G):
    """App. D: per-group r² gives one covariance per column group; the full
    Kalman filter with per-column noise agrees block by block."""
    rng = np.random.default_rng(s["T"])
    m = 2 * G
    values = rng.normal(size=(s["T"], m))
    r2g = 10.0 ** rng.uniform(-2, 1, size=(s["T"], G))
    dyn_kw = {"alpha": s["A"]} if s["dyn"] == "diag" else {"A": s["A"]}
    tr = bl_filter(s["keys"], values, l2=s["l2"], r2=r2g, p0=s["P0"], groups=G, **dyn_kw)
    assert tr.P.shape == (G, s["D"], s["D"])
    for g in range(G):
        one = bl_filter(s["keys"], values[:, 2 * g:2 * g + 2], l2=s["l2"], r2=r2g[:, g], p0=s["P0"], **dyn_kw)
        np.testing.assert_allclose(tr.M[:, 2 * g:2 * g + 2], one.M, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(tr.P[g], one.P, rtol=1e-12, atol=1e-12)
    means, covs = vec_kalman_filter(s["keys"], values, l2=s["l2"], r2=np.repeat(r2g, 2, axis=1),
                                    P0=s["P0"], A=s["A"])
    assert _rel(tr.M, means[-1]) < 1e-9
    D = s["D"]
    for j in range(m):
        blk = covs[-1][j * D:(j + 1) * D, j * D:(j + 1) * D]
        assert _rel(tr.P[j // 2], blk) < 1e-9


def test_edge_cases_zero_process_noise_and_tiny_r2():
    k = np.tile([[1.0, 0.0]], (50, 1))
    v = np.ones((50, 1))
    tr = bl_filter(k, v, l2=0.0, r2=1e-12, p0=1.0)
    assert np.all(np.isfinite(tr.M)) and tr.M[0, 0] == pytest.approx(1.0, abs=1e-9)
    # with ℓ² = 0 the same-key variance decays like r²/t and the gain → 1/t-ish but stays < 1
    tr = bl_filter(k, v, l2=0.0, r2=0.5, p0=1.0)
    x = 1.0
    for t in range(50):
        g = x / (0.5 + x)
        assert tr.gain[t] == pytest.approx(g, rel=1e-12)
        x = 0.5 * x / (0.5 + x)


@pytest.mark.parametrize("kwargs, name", [
    (dict(r2=0.0), "r2"), (dict(r2=-1.0), "r2"), (dict(l2=-0.1), "l2"), (dict(l2=np.nan), "l2"),
    (dict(p0=np.array([[1.0, 2.0], [2.0, 1.0]])), "p0"), (dict(p0=-1.0), "p0"),
    (dict(variant="kalman"), "variant"), (dict(groups=2), "groups"),
    (dict(variant="iso"), "iso_c"), (dict(alpha=np.ones((3, 2)), A=np.ones((3, 2, 2))), "alpha"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    keys, values = np.ones((3, 2)), np.ones((3, 3))
    base = dict(l2=0.1, r2=0.1, p0=1.0)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name):
        bl_filter(keys, values, **base)


def test_shape_mismatch_and_nan_keys():
    with pytest.raises(ValueError, match="values"):
        bl_filter(np.ones((3, 2)), np.ones((4, 1)), r2=1.0)
    with pytest.raises(ValueError, match="keys"):
        bl_filter(np.array([[np.nan, 1.0]]), np.ones((1, 1)), r2=1.0)
    with pytest.raises(ValueError, match="queries"):
        bl_filter(np.ones((3, 2)), np.ones((3, 1)), np.ones((3, 5)), r2=1.0)


@given(settings(max_D=3, max_m=2, max_T=4), st.sampled_from(["dense", "diag", "reset", "linear"]))
def test_numpy_matches_mpmath_rerun(s, variant):
    from assocmem.theory.bl_mp import bl_filter_mp

    if s["dyn"] == "full":
        s["dyn"], s["A"] = "identity", None
    P0 = float(s["P0"][0, 0]) + 0.1
    tr = _run(dict(s, P0=P0), variant=variant)
    mp = bl_filter_mp(s["keys"].tolist(), s["values"].tolist(), l2=s["l2"].tolist(), r2=s["r2"].tolist(),
                      p0=P0, alpha=None if s["A"] is None else s["A"].tolist(), variant=variant, dps=40)
    M = np.array([[float(x) for x in row] for row in mp.M])
    # float inputs converted exactly; agreement up to float64 round-off growth
    assert _rel(tr.M, M) < 1e-8


# -- what the public function accepts (the API's boundary) ---------------------
def test_p0_matrix_of_the_wrong_size_is_refused_not_read_as_a_batch():
    K, Vv = np.eye(4)[[0, 1, 2]], np.eye(2)[[0, 1, 0]]
    with pytest.raises(ValueError, match=r"p0 of shape \(3, 3\).*D=4"):
        bl_filter(K, Vv, p0=np.eye(3))
    assert bl_filter(K, Vv, p0=np.eye(4)).M.shape == (4, 2)
    assert bl_filter(K, Vv, p0=np.array([1.0, 2.0, 3.0])).M.shape == (3, 4, 2)     # scalars: a batch


@pytest.mark.parametrize("kw, name", [(dict(keys="abc"), "keys"), (dict(values=[["x"]]), "values"),
                                      (dict(values=None), "values"), (dict(queries="q"), "queries"),
                                      (dict(r2="fast"), "r2"), (dict(p0=object()), "p0")])
def test_non_numeric_arguments_are_named(kw, name):
    args = dict(keys=np.eye(3), values=np.eye(3)[:, :2])
    args.update(kw)
    keys, values = args.pop("keys"), args.pop("values")
    with pytest.raises(ValueError, match=rf"^{name} must be numeric"):
        bl_filter(keys, values, **args)
