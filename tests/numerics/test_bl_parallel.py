"""The parallel-in-time BL filter (numerics.bl_parallel) against the token-by-token numpy filter.

The reference is ``bl_filter`` (written from the recurrence, sharing no code with the scan): every
read-out, every state, the write directions and precisions, the chunk-start states, for every scan
order, across chunk sizes, decays (none, α = 1, weak, strong, signed, zeros), ℓ² = 0 with small r²
(the collapsing covariance), write masks, grouped noise and initial states.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from assocmem.numerics import bl_filter
from assocmem.numerics.bl_parallel import (SCANS, ScanElement, bl_parallel, chunk_elements, combine, fold,
                                           identity_element, prior_element, scan, token_elements)

TOL = 1e-13
EPS = np.finfo(float).eps


def _tol(x):
    """1e-13, plus the combine's conditioning: its solve with ``I + C₁J₂`` loses ``‖C₁‖‖J₂‖``, at most
    ``κ = (max p₀ + Σℓ²) · max‖k‖² / min r²`` (the prior ⊕ the first chunk, whose ``J`` has rank < D).
    Measured: error/κ ≤ 6e-17 over 600 random cases; against 40-digit mpmath the token filter is exact to
    3e-16 where the scan is off by 1e-13 (κ = 3e4), so the error is the scan's, not the reference's."""
    kmax = float(np.max(np.sum(np.asarray(x["keys"]) ** 2, -1)))
    kappa = (max(1.0, float(np.max(np.abs(x["p0"])))) + float(np.sum(x["l2"]))) * kmax / float(np.min(x["r2"]))
    return TOL + 2 * EPS * kappa


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(1.0, float(np.abs(b).max())))


def _case(rng, T, D, m, G, decay, l2_kind, r2_kind, mask, init):
    k = rng.normal(size=(T, D))
    k /= np.maximum(np.linalg.norm(k, axis=1, keepdims=True), 1e-12)
    x = dict(keys=k, values=rng.normal(size=(T, m)), queries=rng.normal(size=(T, D)))
    x["l2"] = {"zero": np.zeros(T), "small": rng.uniform(0, 1e-3, T), "normal": rng.uniform(0, 0.2, T)}[l2_kind]
    lo, hi = {"small": (1e-4, 1e-3), "normal": (0.05, 0.6)}[r2_kind]
    x["r2"] = rng.uniform(lo, hi, (T, G)) if G > 1 else rng.uniform(lo, hi, T)
    a = {"none": None, "one": np.ones((T, D)), "weak": rng.uniform(0.9, 1.0, (T, D)),
         "strong": rng.uniform(0.05, 0.3, (T, D)),
         "signed": rng.uniform(0.5, 1.0, (T, D)) * rng.choice([-1, 1], (T, D))}
    if decay == "zeros":
        al = rng.uniform(0.5, 1.0, (T, D))
        al[T // 2] = 0.0
        al[:, 0] = np.where(rng.uniform(size=T) < 0.2, 0.0, al[:, 0])
    else:
        al = a[decay]
    x["alpha"] = al
    if mask:
        x["write_mask"] = rng.uniform(size=T) < 0.7
    if init:
        L = rng.normal(size=(G, D, D)) * 0.5
        P0 = L @ np.swapaxes(L, -1, -2) + 0.05 * np.eye(D)
        x["p0"] = P0 if G > 1 else P0[0]
        x["M0"] = rng.normal(size=(D, m))
    else:
        x["p0"] = float(rng.choice([0.0, 1.0, 3.0]))
    return x


def _check(x, G, C, how, op=None):
    """``op(**x, groups=G, chunk_size=C, keep_states=True)`` (default: ``bl_parallel`` with ``scan=how``)
    against ``bl_filter``: every read-out and state, and the chunk-start states."""
    tol = _tol(x)
    ref = bl_filter(**x, groups=G, keep_states=True)
    op = op or (lambda **kw: bl_parallel(**kw, scan=how))
    got = op(**x, groups=G, chunk_size=C, keep_states=True)
    for name in ("y", "M", "P", "Ms", "Ps", "beta", "u"):
        e = _rel(getattr(got, name), getattr(ref, name))
        assert e <= tol, (name, e)
    T = x["keys"].shape[0]
    # the chunk-start states: the reference's state after token n·C − 1 (the initial state for n = 0)
    starts = range(C, T, C)
    if len(starts):
        assert _rel(got.chunk_P[1:], ref.Ps[[s - 1 for s in starts]]) <= tol
        assert _rel(got.chunk_M[1:], ref.Ms[[s - 1 for s in starts]]) <= tol
    return got


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 40), D=st.integers(1, 5), mg=st.integers(1, 3),
       G=st.sampled_from([1, 2]), C=st.integers(1, 20), how=st.sampled_from(SCANS),
       decay=st.sampled_from(["none", "one", "weak", "strong", "signed", "zeros"]),
       l2_kind=st.sampled_from(["zero", "small", "normal"]), r2_kind=st.sampled_from(["small", "normal"]),
       mask=st.booleans(), init=st.booleans())
def test_parallel_equals_token_by_token(seed, T, D, mg, G, C, how, decay, l2_kind, r2_kind, mask, init):
    rng = np.random.default_rng(seed)
    x = _case(rng, T, D, G * mg, G, decay, l2_kind, r2_kind, mask, init)
    _check(x, G, C, how)


@pytest.mark.parametrize("T,C", [(1, 1), (1, 16), (17, 16), (16, 16), (33, 8), (50, 7), (64, 64), (5, 64)])
@pytest.mark.parametrize("how", SCANS)
def test_edge_lengths(T, C, how):
    """T = 1, T a multiple of C or not, C > T: the padded last chunk is the identity element."""
    rng = np.random.default_rng(T * 100 + C)
    x = _case(rng, T, 4, 4, 2, "weak", "normal", "normal", True, True)
    got = _check(x, 2, C, how)
    assert got.chunk_P.shape == (-(-T // C), 2, 4, 4)


@pytest.mark.parametrize("decay", ["none", "weak", "strong"])
def test_collapsing_covariance_long_sequence(decay):
    """ℓ² = 0 and r² = 1e-4 over 300 tokens at D = 4: P shrinks by orders of magnitude."""
    rng = np.random.default_rng(3)
    x = _case(rng, 300, 4, 3, 1, decay, "zero", "small", False, False)
    ref = bl_filter(**x, keep_states=True)
    if decay != "strong":
        assert np.trace(ref.P) < 1e-3 * np.trace(np.eye(4) * x["p0"]) or x["p0"] == 0
    for how in SCANS:
        got = bl_parallel(**x, chunk_size=16, scan=how, keep_states=True)
        assert _rel(got.Ps, ref.Ps) <= _tol(x) and _rel(got.y, ref.y) <= _tol(x)


def _random_element(rng, n, D, m):
    """Elements of real chunks (so C, J ⪰ 0): folds of random token elements."""
    k = rng.normal(size=(n, D))
    return fold(token_elements(k, rng.normal(size=(n, m)), rng.uniform(0, 0.5, n), rng.uniform(0.01, 1, n),
                               rng.uniform(-1, 1, (n, D))))


def _last(e):
    return ScanElement(*(x[-1:] for x in e))


def _close_elem(e1, e2, tol):
    return all(_rel(a, b) <= tol for a, b in zip(e1, e2))


@pytest.mark.parametrize("seed", range(5))
def test_combine_is_associative_with_an_identity(seed):
    rng = np.random.default_rng(seed)
    D, m = 4, 3
    e1, e2, e3 = (_last(_random_element(rng, n, D, m)) for n in (3, 5, 2))
    assert _close_elem(combine(combine(e1, e2), e3), combine(e1, combine(e2, e3)), 1e-12)
    I = identity_element(D, m, (1,))
    assert _close_elem(combine(I, e1), e1, 1e-15) and _close_elem(combine(e1, I), e1, 1e-15)
    # not commutative
    assert not _close_elem(combine(e1, e2), combine(e2, e1), 1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_I_plus_CJ_has_eigenvalues_at_least_one(seed):
    """The solves of the combine are benign: spec(I + C₁J₂) ⊂ [1, ∞) for C, J ⪰ 0 (real spectrum)."""
    rng = np.random.default_rng(seed)
    e1, e2 = (_last(_random_element(rng, n, 5, 2)) for n in (4, 6))
    lam = np.linalg.eigvals(np.eye(5) + e1.C[0] @ e2.J[0])
    assert np.abs(lam.imag).max() < 1e-9 and lam.real.min() >= 1 - 1e-12
    for e in (e1, e2):
        assert np.linalg.eigvalsh(e.C[0]).min() >= -1e-12 and np.linalg.eigvalsh(e.J[0]).min() >= -1e-12


@pytest.mark.parametrize("decay", ["none", "weak", "strong", "signed", "zeros"])
@pytest.mark.parametrize("C", [1, 3, 8])
def test_chunk_element_equals_the_fold_of_its_tokens(decay, C):
    """The closed form (one C×C Cholesky a chunk) against the combine of the chunk's token elements."""
    rng = np.random.default_rng(C)
    T, D, m = 3 * C + 1, 4, 3
    x = _case(rng, T, D, m, 1, decay, "normal", "normal", True, False)
    k = np.where(x["write_mask"][:, None], x["keys"], 0.0)
    a = x["alpha"]
    ce = chunk_elements(k, x["values"], x["l2"], x["r2"], a, C)
    te = token_elements(k, x["values"], x["l2"], x["r2"], a)
    for n in range(-(-T // C)):
        sl = slice(n * C, min(T, (n + 1) * C))
        want = _last(fold(ScanElement(*(z[sl] for z in te))))
        got = ScanElement(*(z[n:n + 1] for z in ce))
        assert _close_elem(got, want, 1e-12), n


def test_without_process_noise_the_leaves_are_decays_and_information():
    """ℓ² = 0: given the chunk start the state is deterministic, so A = diag(α_0 ⊙ … ⊙ α_{C−1}), b = C = 0,
    and J, η are the information of the chunk's observations, Σ_τ g_τ g_τᵀ/r_τ², Σ_τ g_τ y_τᵀ/r_τ²."""
    rng = np.random.default_rng(0)
    C, D, m = 6, 3, 2
    k, y = rng.normal(size=(C, D)), rng.normal(size=(C, m))
    a, r2 = rng.uniform(0.2, 1.0, (C, D)), rng.uniform(0.01, 1.0, C)
    e = chunk_elements(k, y, np.zeros(C), r2, a, C)
    gam = np.cumprod(a, axis=0)
    g = gam * k
    assert np.allclose(e.A[0], np.diag(gam[-1]), atol=1e-15) and not e.b.any() and not e.C.any()
    assert _rel(e.J[0], (g / r2[:, None]).T @ g) < 1e-14 and _rel(e.eta[0], (g / r2[:, None]).T @ y) < 1e-14


def test_prefixes_of_the_prior_are_the_filtered_states():
    """(0, M₀, P₀, 0, 0) ⊕ … has A = J = η = 0 and (b, C) = the reference's (M_t, P_t)."""
    rng = np.random.default_rng(1)
    T, D, m = 12, 3, 2
    x = _case(rng, T, D, m, 1, "weak", "normal", "normal", False, True)
    te = token_elements(x["keys"], x["values"], x["l2"], x["r2"], x["alpha"])
    el = ScanElement(*(np.concatenate([p, t]) for p, t in zip(prior_element(x["M0"][None], x["p0"][None]), te)))
    ref = bl_filter(**x, keep_states=True)
    for how in SCANS:
        pre = scan(el, how)
        assert not pre.A[1:].any() or np.abs(pre.A[1:]).max() < 1e-300
        assert np.abs(pre.J[1:]).max() == 0 and np.abs(pre.eta[1:]).max() == 0
        assert _rel(pre.C[1:], ref.Ps) < TOL and _rel(pre.b[1:], ref.Ms) < TOL


@pytest.mark.parametrize("kw,name", [
    (dict(chunk_size=0), "chunk_size"), (dict(chunk_size=2.5), "chunk_size"), (dict(scan="blelloch"), "scan"),
    (dict(r2=0.0), "r2"), (dict(l2=-1.0), "l2"), (dict(p0=-1.0), "p0"), (dict(p0=-np.eye(3)), "p0"),
    (dict(p0=np.ones((2, 2))), "p0"), (dict(groups=3), "groups"), (dict(write_mask=np.ones(5)), "write_mask"),
    (dict(write_mask=np.ones(4, bool)), "write_mask"), (dict(alpha=np.ones((5, 2))), "alpha"),
    (dict(M0=np.zeros((3, 3))), "M0"), (dict(queries=np.ones((5, 2))), "queries"),
    (dict(keys=np.full((5, 3), np.nan)), "keys"), (dict(l2=np.ones(4)), "l2"), (dict(r2=np.ones((5, 3))), "r2"),
])
def test_bad_inputs_raise_naming_the_parameter(kw, name):
    rng = np.random.default_rng(0)
    x = dict(keys=rng.normal(size=(5, 3)), values=rng.normal(size=(5, 2)))
    x.update(kw)
    with pytest.raises(ValueError, match=name):
        bl_parallel(**x)
