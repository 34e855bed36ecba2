"""Data generators of the learned tasks: the stated structure, checked from the outputs."""
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from assocmem.gpu.tasks import data as Dt

pytestmark = pytest.mark.gpu


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _pair_overlaps(b: Dt.CollisionBatch):
    """Overlap of each target with its distractor, found through the value labels.

    Every identity owns one label (a permutation); the query of a target carries
    its label and its partner's, and the partner's query token carries the
    partner's address.  So the pairing is recovered without the generator's ids.
    """
    out = []
    for i in range(b.x.shape[0]):
        q = b.is_query[i]
        keys, labs, par, tgt = b.keys[i][q].double(), b.labels[i][q], b.partner[i][q], b.is_target[i][q]
        by_label = {int(l): k for l, k in zip(labs, keys)}
        out.append([float(keys[j] @ by_label[int(par[j])]) for j in range(len(labs)) if tgt[j]])
    return torch.tensor(out, dtype=torch.float64)


def test_collision_layout_and_loss_mask():
    n_f, n_b = 3, 4
    b = Dt.collision_batch(16, n_f=n_f, n_b=n_b, generator=_gen())
    T = 8 * (n_b + n_f) + 16
    assert b.x.shape == (16, T, 33) and b.keys.shape == (16, T, 16) and Dt.collision_length(n_f, n_b) == T
    # loss only on the 16 query tokens at the end; writes carry no label
    assert torch.equal(b.labels != Dt.IGNORE, b.is_query)
    assert b.is_query[:, -16:].all() and not b.is_query[:, :-16].any()
    # flag is 1 exactly on writes; queries carry no value
    assert torch.equal(b.x[..., 0] == 1, ~b.is_query)
    assert torch.all(b.x[:, -16:, 17:] == 0)
    # a write's one-hot value is the label later queried at the same address
    for i in range(4):
        wk, wl = b.keys[i][~b.is_query[i]], b.x[i][~b.is_query[i], 17:].argmax(-1)
        qk, ql = b.keys[i][b.is_query[i]], b.labels[i][b.is_query[i]]
        for k, l in zip(wk, wl):
            j = int(torch.argmin((qk - k).norm(dim=-1)))
            assert torch.allclose(qk[j], k, atol=1e-6) and int(ql[j]) == int(l)
    # every address is queried once, and the values are a permutation of 16 labels
    for i in range(16):
        assert sorted(b.labels[i][b.is_query[i]].tolist()) == list(range(16))
    # 8 target queries and 8 distractor queries; targets written n_b times, distractors n_f times
    assert (b.is_target.sum(1) == 8).all()
    keys0, q0, tgt0 = b.keys[0], b.is_query[0], b.is_target[0]
    for k, is_t in zip(keys0[q0], tgt0[q0]):
        count = int(((keys0[~q0] - k).norm(dim=-1) < 1e-6).sum())
        assert count == (n_b if is_t else n_f)
    # targets come first, then distractors
    first_d = 8 * n_b
    tgt_keys = keys0[q0][tgt0[q0]]
    assert all(((tgt_keys - k).norm(dim=-1) < 1e-6).any() for k in keys0[:first_d])


def test_collision_overlap_in_stated_range():
    b = Dt.collision_batch(64, n_f=2, rho_range=(0.60, 0.80), generator=_gen(1))
    ov = _pair_overlaps(b)
    assert ov.shape == (64, 8)
    assert float(ov.min()) >= 0.60 - 1e-6 and float(ov.max()) <= 0.80 + 1e-6
    # the overlaps found from the tokens are the generator's per-pair ρ (in query order)
    assert torch.allclose(torch.sort(ov, 1).values, torch.sort(b.rho.double(), 1).values, atol=1e-6)
    # the draw covers the range (not one fixed value)
    assert float(ov.max() - ov.min()) > 0.15
    # addresses are unit vectors; different pairs are orthogonal
    k = b.keys[0][b.is_query[0]].double()
    assert torch.allclose(k.norm(dim=-1), torch.ones(16, dtype=torch.float64), atol=1e-6)
    G = (k @ k.T).abs()
    big = (G > 1e-5).sum()
    assert int(big) == 16 + 16          # the diagonal and one partner per address


@given(rho=st.floats(-0.99, 0.99), n_f=st.integers(0, 5), n_b=st.integers(0, 3), seed=st.integers(0, 10_000))
def test_collision_fixed_rho_property(rho, n_f, n_b, seed):
    b = Dt.collision_batch(2, n_f=n_f, n_b=n_b, rho=rho, generator=_gen(seed))
    assert b.x.shape[1] == 8 * (n_b + n_f) + 16
    assert torch.allclose(_pair_overlaps(b), torch.full((2, 8), rho, dtype=torch.float64), atol=1e-5)


def test_collision_seeded():
    a = Dt.collision_batch(4, n_f=2, generator=_gen(7))
    b = Dt.collision_batch(4, n_f=2, generator=_gen(7))
    c = Dt.collision_batch(4, n_f=2, generator=_gen(8))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a.keys, c.keys)
    # values are permuted per sequence
    assert not torch.equal(a.labels[0], a.labels[1])


@pytest.mark.parametrize("kw, name", [({"n_f": -1}, "n_f"), ({"n_f": 1, "rho": 1.5}, "rho"),
                                      ({"n_f": 1, "rho_range": (0.8, 0.6)}, "rho_range"),
                                      ({"n_f": 1, "rho_range": (0.5, 1.2)}, "rho_range")])
def test_collision_bad_input(kw, name):
    with pytest.raises(ValueError, match=name):
        Dt.collision_batch(2, **kw)


def test_random_keys_structure():
    W = Dt.row_orthogonal_projection()
    assert W.shape == (16, 64)
    assert torch.allclose(W @ W.T, torch.eye(16, dtype=torch.float64), atol=1e-12)
    b = Dt.random_keys_batch(8, n=40, generator=_gen(2))
    assert b.x.shape == (8, 48, 81)
    assert torch.equal(b.labels != Dt.IGNORE, b.is_query) and (b.is_query.sum(1) == 8).all()
    assert torch.allclose(b.keys.double().norm(dim=-1), torch.ones(8, 48, dtype=torch.float64), atol=1e-5)
    for i in range(8):
        wk, wl = b.keys[i, :40], b.x[i, :40, 17:].argmax(-1)
        qk, ql = b.keys[i, 40:], b.labels[i, 40:]
        idx = [int(torch.argmin((wk - k).norm(dim=-1))) for k in qk]
        assert len(set(idx)) == 8                         # distinct written items
        assert all(torch.allclose(wk[j], k, atol=1e-6) and int(wl[j]) == int(l) for j, k, l in zip(idx, qk, ql))
    # the keys live in the projection's row space: k ∝ W a for a unit-norm a
    # (a generic 16-d unit vector is, so check the statistics instead: E[k kᵀ] ≈ I/16)
    big = Dt.random_keys_batch(64, n=64, generator=_gen(3)).keys.reshape(-1, 16).double()
    C = big.T @ big / big.shape[0]
    assert torch.allclose(C, torch.eye(16, dtype=torch.float64) / 16, atol=0.01)
    with pytest.raises(ValueError, match="n_query"):
        Dt.random_keys_batch(2, n=4)


def _swap_reference(tokens, n):
    pairs = list(itertools.combinations(range(n), 2))
    out = []
    for seq in tokens.tolist():
        state = list(range(n))
        labs = []
        for t in seq:
            i, j = pairs[t]
            state[i], state[j] = state[j], state[i]
            labs.append(state[0])
        out.append(labs)
    return torch.tensor(out)


def test_swap_labels_match_direct_simulation():
    b = Dt.swap_batch(32, generator=_gen(4))
    assert b.tokens.shape == (32, 16) and int(b.tokens.max()) < 10
    assert torch.equal(b.labels, _swap_reference(b.tokens, 5))
    assert len(Dt.swap_pairs(5)) == 10


def test_swap_stress_labels():
    n = 7
    b = Dt.swap_stress_batch(5, n=n, generator=_gen(5))
    assert b.pos_a.shape == (5, 3 * n)
    assert (b.labels[:, :n] == Dt.IGNORE).all() and (b.labels[:, n:] >= 0).all()
    for i in range(5):
        state = b.elem[i, :n].tolist()
        assert sorted(state) == list(range(n))
        for t in range(n, 3 * n):
            a, c = int(b.pos_a[i, t]), int(b.pos_b[i, t])
            assert a != c
            state[a], state[c] = state[c], state[a]
            assert int(b.labels[i, t]) == state[0]
    K = Dt.near_orthogonal_keys(512, 128)
    G = K @ K.T - torch.eye(512, dtype=torch.float64)
    assert float(G.abs().max()) < 0.5 and abs(float(G.mean())) < 0.01


# --- the stress test's no-tracking level -------------------------------------------------
def _no_tracking_by_enumeration(n, length):
    """Exact mean over t of P(initial element at position 0), by propagating the full
    distribution of its position over all n(n-1)/2 transpositions (no closed form used)."""
    pairs = list(itertools.combinations(range(n), 2))
    dist = np.zeros(n)
    dist[0] = 1.0
    total = 0.0
    for _ in range(length):
        new = np.zeros(n)
        for i, j in pairs:
            moved = dist.copy()
            moved[i], moved[j] = dist[j], dist[i]
            new += moved / len(pairs)
        dist = new
        total += dist[0]
    return total / length


@given(n=st.integers(3, 9), length=st.integers(1, 25))
def test_no_tracking_accuracy_matches_enumeration(n, length):
    assert Dt.no_tracking_accuracy(n, length) == pytest.approx(_no_tracking_by_enumeration(n, length), abs=1e-12)


def test_no_tracking_accuracy_limit_and_errors():
    # 2n swaps, n large: (1 - e^-4)/4 (the stress test's level)
    assert Dt.no_tracking_accuracy(10**6, 2 * 10**6) == pytest.approx((1 - np.exp(-4)) / 4, abs=1e-5)
    assert Dt.no_tracking_accuracy(3, 1) == pytest.approx(1 / 3)      # n = 3: r = 0, one swap leaves 1/n
    with pytest.raises(ValueError, match="n must"):
        Dt.no_tracking_accuracy(2, 4)
    with pytest.raises(ValueError, match="length"):
        Dt.no_tracking_accuracy(5, 0)
