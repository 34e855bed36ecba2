"""The two-level form of the parallel BL filter (numerics.bl_segments) against the token-by-token filter.

``bl_filter`` is the reference, as for ``bl_parallel``: every read-out and state across segment lengths
(one chunk, some, more than the sequence has), chunk sizes, decays, the collapsing covariance, write
masks, noise groups and initial states; and the chunk absorb (no ``D×D`` solve) against the general
combine for any valid earlier element.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from assocmem.numerics.bl_parallel import (SCANS, ScanElement, chunk_elements, chunk_factors, combine, fold,
                                           token_elements)
from assocmem.numerics.bl_segments import absorb, absorb_flops, bl_segments, segment_elements
from test_bl_parallel import _case, _check as _check_op, _rel


def _check(x, G, C, L, how="tree"):
    return _check_op(x, G, C, how, op=lambda **kw: bl_segments(**kw, segment_chunks=L, scan_how=how))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 48), D=st.integers(1, 5), mg=st.integers(1, 3),
       G=st.sampled_from([1, 2]), C=st.integers(1, 8), L=st.integers(1, 9), how=st.sampled_from(SCANS),
       decay=st.sampled_from(["none", "one", "weak", "strong", "signed", "zeros"]),
       l2_kind=st.sampled_from(["zero", "small", "normal"]), r2_kind=st.sampled_from(["small", "normal"]),
       mask=st.booleans(), init=st.booleans())
def test_two_level_equals_token_by_token(seed, T, D, mg, G, C, L, how, decay, l2_kind, r2_kind, mask, init):
    rng = np.random.default_rng(seed)
    x = _case(rng, T, D, G * mg, G, decay, l2_kind, r2_kind, mask, init)
    _check(x, G, C, L, how)


@pytest.mark.parametrize("T,C,L", [(1, 1, 1), (1, 16, 4), (64, 16, 4), (65, 16, 4), (63, 4, 4), (40, 4, 3),
                                   (40, 4, 10), (40, 4, 11), (40, 4, 64)])
def test_edge_lengths(T, C, L):
    """A segment of one chunk, segments dividing the chunks or not, one segment longer than the sequence."""
    rng = np.random.default_rng(T * 100 + C * 10 + L)
    x = _case(rng, T, 4, 4, 2, "weak", "normal", "normal", True, True)
    got = _check(x, 2, C, L)
    assert got.chunk_P.shape == (-(-T // C), 2, 4, 4)


@pytest.mark.parametrize("decay", ["none", "weak", "strong"])
def test_collapsing_covariance_long_sequence(decay):
    """ℓ² = 0 and r² = 1e-4 over 300 tokens: segments of 4 chunks of 8 (10 segments)."""
    rng = np.random.default_rng(3)
    x = _case(rng, 300, 4, 3, 1, decay, "zero", "small", False, False)
    _check(x, 1, 8, 4)


def _random_element(rng, n, D, m):
    """An element of a real run of tokens (so C, J ⪰ 0): the fold of random token elements."""
    k = rng.normal(size=(n, D))
    e = fold(token_elements(k, rng.normal(size=(n, m)), rng.uniform(0, 0.5, n), rng.uniform(0.01, 1, n),
                            rng.uniform(-1, 1, (n, D))))
    return ScanElement(*(x[-1] for x in e))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), C=st.integers(1, 6), D=st.integers(1, 6),
       m=st.integers(1, 3), decay=st.sampled_from(["none", "weak", "strong", "signed", "zeros"]))
def test_absorb_is_the_combine_with_the_chunk_element(seed, n, C, D, m, decay):
    """For any element S of a real run and any chunk, absorb(S, factors) = S ⊕ chunk_element."""
    rng = np.random.default_rng(seed)
    S = _random_element(rng, n, D, m)
    x = _case(rng, C, D, m, 1, decay, "normal", "normal", False, False)
    args = (x["keys"], x["values"], x["l2"], x["r2"], x["alpha"], C)
    f = [z[0] for z in chunk_factors(*args)]
    e = ScanElement(*(z[0] for z in chunk_elements(*args)))
    want = combine(S, e)
    got = absorb(S, f)
    scale = max(1.0, max(float(np.abs(z).max()) for z in S))
    for name, a, b in zip(ScanElement._fields, got, want):
        assert _rel(a, b) <= 1e-11 * scale, name


def test_a_segment_element_is_the_fold_of_its_chunk_elements():
    rng = np.random.default_rng(5)
    T, C, L, D, m = 37, 3, 4, 4, 2
    x = _case(rng, T, D, m, 1, "weak", "normal", "normal", False, False)
    args = (x["keys"], x["values"], x["l2"], x["r2"], x["alpha"], C)
    E = segment_elements(chunk_factors(*args), L)
    ce = chunk_elements(*args)
    N = ce.A.shape[0]
    assert E.A.shape == (-(-N // L), D, D)
    for s in range(E.A.shape[0]):
        want = fold(ScanElement(*(z[s * L:min(N, (s + 1) * L)] for z in ce)))
        for a, b in zip(E, want):
            assert _rel(a[s], b[-1]) <= 1e-12


def test_absorb_flops_count_the_chunk_rank_not_D_cubed():
    """A step costs O(C D²): doubling D quadruples it (to leading order), doubling C doubles it; the
    level-3 step (start known) costs about half a level-1 step."""
    f1 = absorb_flops(16, 64, 64)
    assert 3.5 < absorb_flops(16, 128, 128) / f1 < 4.5
    assert 1.8 < absorb_flops(32, 64, 64) / f1 < 2.6
    assert 0.4 < absorb_flops(16, 64, 64, start_known=True) / f1 < 0.65


@pytest.mark.parametrize("kw,name", [(dict(segment_chunks=0), "segment_chunks"),
                                     (dict(segment_chunks=1.5), "segment_chunks"),
                                     (dict(scan_how="blelloch"), "scan_how"), (dict(chunk_size=0), "chunk_size")])
def test_bad_arguments_name_the_parameter(kw, name):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=name):
        bl_segments(rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), **kw)
