"""MQAR generator (gpu/tasks/mqar.py): labels against a dictionary replay, and every documented property."""
import math

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from assocmem.gpu.tasks import mqar as M  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)          # small tensors: threads only contend on a shared machine
    yield
    torch.set_num_threads(n)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def replay(cfg, tokens, labels, is_query, is_write, role, qupd):
    """Brute force for one row: parse the documented layout, replay the writes into a dict, check everything."""
    P, U, b, C = cfg.n_pairs, cfg.n_updates, cfg.block_size, cfg.write_len
    tokens, labels = tokens.tolist(), labels.tolist()
    last, first, writes = {}, {}, {}
    keys_in_order = []
    for blk in range(0, C, 2 * b):
        ks, vs = tokens[blk:blk + b], tokens[blk + b:blk + 2 * b]
        for k, v in zip(ks, vs):
            assert 0 <= k < cfg.vocab_size and 0 <= v < cfg.vocab_size
            if k not in first:
                first[k] = v
                keys_in_order.append(k)
            else:
                assert v != last[k], "an update must change the value"
            last[k] = v
            writes[k] = writes.get(k, 0) + 1
    assert len(first) == P, "P distinct keys"
    assert not set(last) & {v for blk in range(0, C, 2 * b) for v in tokens[blk + b:blk + 2 * b]}, \
        "no id is both a key and a value in one sequence"
    queried = []
    for t in range(cfg.length):
        if labels[t] != M.IGNORE:
            assert C <= t < cfg.seq_len and (t - C) % cfg.query_stride == 0, "queries on slot starts"
            assert tokens[t] in last, "a query is an earlier key"
            assert labels[t] == last[tokens[t]], "label = the key's last value"
            assert int(qupd[t]) == writes[tokens[t]] - 1
            queried.append(tokens[t])
        else:
            assert int(qupd[t]) == -1
    assert sorted(queried) == sorted(last), "every key queried exactly once"
    assert is_query.tolist() == [lab != M.IGNORE for lab in labels]
    assert is_write.tolist() == [t < C for t in range(cfg.length)]
    exp_role = [M.KEY if (t < C and t % (2 * b) < b) else M.VALUE if t < C else
                M.QUERY if labels[t] != M.IGNORE else M.FILLER for t in range(cfg.length)]
    assert role.tolist() == exp_role
    if cfg.filler == "pad":
        assert all(tokens[t] == cfg.pad_id for t in range(C, cfg.length) if labels[t] == M.IGNORE)
    else:
        assert all(0 <= tokens[t] < cfg.vocab_size for t in range(cfg.length))
    if cfg.distinct_values:
        vals = [v for blk in range(0, C, 2 * b) for v in tokens[blk + b:blk + 2 * b]]
        assert len(set(vals)) == len(vals)
    return first, last, writes


@st.composite
def configs(draw):
    b = draw(st.sampled_from([1, 2]))
    P = b * draw(st.integers(1, 4 if b == 2 else 6))
    U = draw(st.integers(0, 6)) if b == 1 else 0
    update_keys = draw(st.sampled_from(["replace", "distinct"])) if U <= P else "replace"
    stride = draw(st.integers(1, 3))
    distinct = draw(st.booleans())
    vocab = draw(st.integers(2 * P + U if distinct else P + 2, 40))
    C = 2 * (P + U)
    T = C + stride * (P - 1) + 1 + draw(st.integers(0, 12))
    pad = draw(st.sampled_from([None, T + 5]))
    return M.MQARConfig(T, P, n_updates=U, block_size=b, vocab_size=vocab, query_stride=stride,
                        power_a=draw(st.sampled_from([0.01, 0.5, 1.0, 2.0])),
                        query_order=draw(st.sampled_from(["zoology", "shuffled"])),
                        filler=draw(st.sampled_from(["pad", "random"])), distinct_values=distinct,
                        update_keys=update_keys, update_order=draw(st.sampled_from(["after", "interleaved"])),
                        pad_to=pad)


@settings(max_examples=60)
@given(cfg=configs(), seed=st.integers(0, 2 ** 31 - 1))
def test_labels_match_dictionary_replay(cfg, seed):
    bt = M.mqar_batch(cfg, 6, generator=gen(seed))
    for r in range(6):
        first, last, writes = replay(cfg, *(x[r] for x in bt[:6]))
        if cfg.update_order == "after" and cfg.n_updates:
            # the initial pairs come first, the updates re-assign earlier keys only
            init_keys = bt.tokens[r, 0:2 * cfg.n_pairs:2].tolist()
            assert len(set(init_keys)) == cfg.n_pairs
        assert sum(writes.values()) == cfg.n_pairs + cfg.n_updates
        if cfg.update_keys == "distinct":
            assert sum(w == 2 for w in writes.values()) == cfg.n_updates
        # other pairs kept: keys never updated answer their first value
        for k, w in writes.items():
            if w == 1:
                assert last[k] == first[k]


def test_paper_layouts_replay():
    for cfg in (M.MQARConfig(512, 64), M.MQARConfig(128, 16, n_updates=16), M.MQARConfig(128, 8, block_size=2),
                M.MQARConfig(64, 4, n_updates=4, pad_to=128)):
        bt = M.mqar_batch(cfg, 4, generator=gen(3))
        assert bt.tokens.shape == (4, cfg.length)
        for r in range(4):
            replay(cfg, *(x[r] for x in bt[:6]))


def test_update_example_from_the_notes():
    """A→4, B→5, A→4*: the answer for A is 4*, B keeps 5."""
    cfg = M.MQARConfig(16, 2, n_updates=1, update_keys="distinct", vocab_size=10)
    for s in range(20):
        bt = M.mqar_batch(cfg, 1, generator=gen(s))
        t = bt.tokens[0].tolist()
        A, four, B, five, A2, four_star = t[:6]
        assert A2 in (A, B) and four_star not in (four, five)
        ans = dict(zip(bt.tokens[0][bt.is_query[0]].tolist(), bt.labels[0][bt.is_query[0]].tolist()))
        if A2 == A:
            assert ans == {A: four_star, B: five}
        else:
            assert ans == {A: four, B: four_star}


def test_block_example_from_the_notes():
    """Block size 2: A, B, then 4, 5 binds A→4 and B→5."""
    bt = M.mqar_batch(M.MQARConfig(16, 2, block_size=2, vocab_size=10), 1, generator=gen(1))
    A, B, four, five = bt.tokens[0, :4].tolist()
    assert bt.role[0, :4].tolist() == [M.KEY, M.KEY, M.VALUE, M.VALUE]
    ans = dict(zip(bt.tokens[0][bt.is_query[0]].tolist(), bt.labels[0][bt.is_query[0]].tolist()))
    assert ans == {A: four, B: five}


def test_shapes_dtypes_and_fields():
    cfg = M.MQARConfig(128, 16, n_updates=3)
    bt = M.mqar_batch(cfg, 5)
    assert bt._fields == ("tokens", "labels", "is_query", "is_write", "role", "query_updates", "config")
    for f in ("tokens", "labels", "query_updates"):
        assert getattr(bt, f).dtype == torch.long and getattr(bt, f).shape == (5, 128)
    assert bt.is_query.dtype == bt.is_write.dtype == torch.bool
    assert bt.role.dtype == torch.int8 and bt.config.shape == (5,)
    assert (bt.is_query.sum(1) == 16).all() and (bt.is_write.sum(1) == 2 * (16 + 3)).all()
    assert not (bt.is_query & bt.is_write).any(), "queries do not write"
    assert int(bt.tokens.max()) <= cfg.pad_id and cfg.n_tokens == M.VOCAB + 1


def test_determinism_by_seed():
    cfg = M.MQARConfig(128, 16, n_updates=4, update_order="interleaved", distinct_values=False)
    a, b, c = (M.mqar_batch(cfg, 8, generator=gen(s)) for s in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a.tokens, c.tokens)


def test_shared_vocabulary_and_no_role_shortcut():
    """Over 3,000 Base sequences every id of the 8,192 is used as a key and as a value, and the
    best id -> role rule is near chance (Zoology's split halves would make it exact)."""
    cfg = M.MQARConfig(512, 64)
    bt = M.mqar_batch(cfg, 3000, generator=gen(11))
    keys = bt.tokens[bt.role == M.KEY]
    vals = bt.tokens[bt.role == M.VALUE]
    ck = torch.bincount(keys, minlength=M.VOCAB)
    cv = torch.bincount(vals, minlength=M.VOCAB)
    assert ck.shape == cv.shape == (M.VOCAB,)
    assert (ck > 0).all() and (cv > 0).all(), "every id appears in both roles"
    best = float(torch.maximum(ck, cv).sum()) / float(ck.sum() + cv.sum())
    assert best < 0.6
    # lower/upper halves: each role splits about evenly (Zoology: keys 100 % lower, values 100 % upper)
    for x in (keys, vals):
        assert abs(float((x < M.VOCAB // 2).double().mean()) - 0.5) < 0.01
    # queries are keys: the query ids have the key id distribution too
    q = bt.tokens[bt.is_query]
    assert abs(float((q < M.VOCAB // 2).double().mean()) - 0.5) < 0.01


def _chi2_pvalue(counts, probs):
    from scipy.stats import chisquare
    n = counts.sum()
    return float(chisquare(counts, probs * n).pvalue)


def test_gap_distribution_single_query_follows_the_power_law():
    """With one query the slot's law is exactly p_g ∝ (g+1)^(a-1) (Zoology, a = 0.01)."""
    cfg = M.MQARConfig(64, 1)                            # 2 write tokens, 31 slots
    bt = M.mqar_batch(cfg, 20000, generator=gen(5))
    pos = bt.is_query.double().argmax(1)
    g = ((pos - cfg.write_len) // cfg.query_stride).long()
    counts = torch.bincount(g, minlength=cfg.n_slots).double().numpy()
    pmf = M.gap_pmf(cfg.n_slots, 0.01).numpy()
    assert 0.5 * abs(counts / counts.sum() - pmf).sum() < 0.02
    assert _chi2_pvalue(counts, pmf) > 1e-3
    assert pmf[0] > 0.2 and pmf[0] / pmf[9] == pytest.approx(10 ** 0.99)


def test_gap_distribution_base_first_draw_and_successive_sampling():
    """Base: the first key's slot follows the pmf over 192 slots; for a tiny case the ordered
    pair of drawn slots matches successive sampling (np.random.choice(replace=False, p))."""
    cfg = M.MQARConfig(512, 64)
    bt = M.mqar_batch(cfg, 4000, generator=gen(6))
    first_key = bt.tokens[:, 0]
    pos = (bt.tokens == first_key[:, None]) & bt.is_query
    g = (pos.double().argmax(1) - cfg.write_len) // 2
    pmf = M.gap_pmf(cfg.n_slots).numpy()
    edges = [0, 1, 2, 4, 8, 16, 32, 64, 128, cfg.n_slots]
    counts = torch.tensor([int(((g >= lo) & (g < hi)).sum()) for lo, hi in zip(edges, edges[1:])]).double()
    probs = torch.tensor([pmf[lo:hi].sum() for lo, hi in zip(edges, edges[1:])])
    assert _chi2_pvalue(counts.numpy(), probs.numpy()) > 1e-3
    # mean slot of all queries: well below the uniform mean (95.5)
    allg = ((torch.nonzero(bt.is_query)[:, 1] - cfg.write_len) // 2).double()
    assert allg.mean() < 80

    small = M.MQARConfig(4 + 2 * 3, 2, power_a=0.3, vocab_size=8)   # 4 write tokens, 3 slots, 2 queries
    bt = M.mqar_batch(small, 30000, generator=gen(9))
    k0, k1 = bt.tokens[:, 0], bt.tokens[:, 2]
    slot = lambda k: (((bt.tokens == k[:, None]) & bt.is_query).double().argmax(1) - 4) // 2  # noqa: E731
    s0, s1 = slot(k0), slot(k1)
    w = [(g + 1) ** (0.3 - 1) for g in range(3)]
    W = sum(w)
    exp, obs = [], []
    for i in range(3):
        for j in range(3):
            if i != j:
                exp.append(w[i] / W * w[j] / (W - w[i]))
                obs.append(int(((s0 == i) & (s1 == j)).sum()))
    import numpy as np
    assert _chi2_pvalue(np.array(obs, float), np.array(exp)) > 1e-3


def test_distinct_ids_uniform():
    import numpy as np
    ids = M._distinct_ids(12000, 4, 2, gen(2))
    assert (ids[:, 0] != ids[:, 1]).all()
    code = (ids[:, 0] * 4 + ids[:, 1]).numpy()
    counts = np.bincount(code, minlength=16)[[a * 4 + b for a in range(4) for b in range(4) if a != b]]
    assert _chi2_pvalue(counts.astype(float), np.full(12, 1 / 12)) > 1e-3


def test_values_may_repeat_when_not_distinct():
    cfg = M.MQARConfig(32, 6, n_updates=4, vocab_size=12, distinct_values=False)
    bt = M.mqar_batch(cfg, 200, generator=gen(4))
    vals = bt.tokens[:, 1:cfg.write_len:2]
    repeats = sum(len(set(r.tolist())) < r.numel() for r in vals)
    assert repeats > 0
    for r in range(200):
        replay(cfg, *(x[r] for x in bt[:6]))


def test_random_filler_and_pad():
    cfg = M.MQARConfig(64, 4, filler="random", vocab_size=50)
    bt = M.mqar_batch(cfg, 20, generator=gen(0))
    fill = bt.tokens[bt.role == M.FILLER]
    assert fill.max() < 50 and len(set(fill.tolist())) > 20
    bt = M.mqar_batch(cfg.replace(filler="pad"), 20, generator=gen(0))
    assert (bt.tokens[bt.role == M.FILLER] == 50).all()


def _order_stats(cfg, n=600, seed=0):
    """Per sequence: Spearman's rank correlation between each queried key's write position and its query's
    position (no ties: distinct keys, distinct slots), and the lags (query position − write position)."""
    bt = M.mqar_batch(cfg, n, generator=gen(seed))
    rhos, lags = [], []
    for i in range(n):
        wpos = {}
        for p in (bt.role[i] == M.KEY).nonzero().flatten().tolist():
            wpos.setdefault(int(bt.tokens[i, p]), p)          # a key's first write
        qs = bt.is_query[i].nonzero().flatten().tolist()
        w = [wpos[int(bt.tokens[i, p])] for p in qs]
        rw = torch.tensor(w).argsort().argsort().double()
        rq = torch.arange(len(qs), dtype=torch.double)           # qs is sorted by position
        rhos.append(float(torch.corrcoef(torch.stack([rw, rq]))[0, 1]))
        lags += [q - x for q, x in zip(qs, w)]
    return sum(rhos) / n, sorted(lags)


@pytest.mark.parametrize("pairs", [8, 16])
def test_query_order_zoology_links_write_and_query_order_and_shuffled_does_not(pairs):
    """docs/tasks_mqar_dag.md, ``query_order``: in Zoology's assignment the i-th drawn slot asks the i-th written key
    and the power law draws early slots first, so keys written earlier tend to be asked earlier (a positive rank
    correlation, growing with the pairs); shuffled assigns keys to the same slots at random (correlation ≈ 0).
    The slots are drawn alike, so the two orders share the set of lags; only which key waits which lag changes."""
    cfg = M.MQARConfig(128, pairs, block_size=2)
    rz, lz = _order_stats(cfg)
    rs, ls = _order_stats(cfg.replace(query_order="shuffled"))
    assert rz > 0.08 and abs(rs) < 0.05, (rz, rs)
    assert abs(sum(lz) / len(lz) - sum(ls) / len(ls)) < 0.05 * sum(lz) / len(lz)
    if pairs == 16:
        assert rz > _order_stats(M.MQARConfig(128, 8, block_size=2))[0]


def test_pool_matches_generator_and_is_compact():
    cfgs = [M.MQARConfig(64, 4, n_updates=2, vocab_size=300), M.MQARConfig(96, 8, vocab_size=300)]
    pool = M.build_pool(cfgs, 50, seed=3, weights=[2, 3], chunk=16)
    assert len(pool) == 50 and pool.counts == (20, 30) and pool.length == 96
    assert pool.tokens.dtype == pool.answers.dtype == torch.int16 and pool.role.dtype == torch.int8
    bt = pool.batch(torch.arange(50))
    assert (bt.config[:20] == 0).all() and (bt.config[20:] == 1).all()
    # rows 16..19 are chunk 1 of config 0, generated with its own seed, padded to 96
    ref = M.mqar_batch(cfgs[0].replace(pad_to=96), 4, generator=gen(M._chunk_seed(3, 0, 1)))
    for f in ("tokens", "labels", "is_query", "is_write", "role", "query_updates"):
        assert torch.equal(getattr(bt, f)[16:20], getattr(ref, f)), f
    for r in range(50):
        replay(pool.configs[int(bt.config[r])].replace(pad_to=96), *(x[r] for x in bt[:6]))
    # a larger pool with the same seed and chunk size shares each configuration's whole chunks
    big = M.build_pool(cfgs, 100, seed=3, weights=[2, 3], chunk=16)
    assert torch.equal(big.tokens[:16], pool.tokens[:16]) and torch.equal(big.tokens[40:56], pool.tokens[20:36])
    assert not torch.equal(M.build_pool(cfgs, 50, seed=4, weights=[2, 3], chunk=16).tokens, pool.tokens)
    # epochs: every row once
    seen = torch.cat([b.tokens for b in pool.batches(16, generator=gen(0))])
    assert seen.shape[0] == 50
    assert sorted(map(tuple, seen.tolist())) == sorted(map(tuple, pool.tokens.long().tolist()))
    assert sum(1 for _ in pool.batches(16, drop_last=True)) == 3


def test_base_pool_memory_budget():
    pool = M.build_pool(M.MQARConfig(512, 64), 200, seed=0)
    per_row = pool.nbytes / len(pool)
    assert per_row * M.POOL_SIZES["base"] < 200e6          # int64 tokens alone would be 410 MB


def test_variant_presets():
    cfgs, w = M.train_configs("base")
    assert cfgs == [M.MQARConfig(512, 64)] and cfgs[0].vocab_size == 8192 and cfgs[0].power_a == 0.01
    cfgs, w = M.train_configs("update")
    assert {(c.seq_len, c.n_pairs) for c in cfgs} == {(64, 4), (128, 16)}
    assert {c.n_updates for c in cfgs if c.n_pairs == 4} == set(range(5))
    assert {c.n_updates for c in cfgs if c.n_pairs == 16} == set(range(17))
    assert math.isclose(sum(x for x, c in zip(w, cfgs) if c.n_pairs == 4), 0.5)
    cfgs, w = M.train_configs("block")
    assert [(c.seq_len, c.n_pairs, c.block_size) for c in cfgs] == [(128, p, 2) for p in (2, 4, 6, 8)]
    assert [c.n_updates for c in M.testset_configs("update")] == list(range(0, 17, 2))
    assert all(c.seq_len == 128 and c.n_pairs == 16 for c in M.testset_configs("update"))
    assert [c.n_pairs for c in M.testset_configs("block")] == list(range(2, 17, 2))
    assert M.POOL_SIZES == {"base": 100_000, "update": 160_000, "block": 120_000} and M.TEST_SIZE == 3000
    pool = M.train_pool("update", n=440, vocab_size=512)
    assert pool.length == 128 and len(pool) == 440 and pool.counts[0] == 44
    sets = M.build_test_sets("block", n=10, sweep=(2, 16), vocab_size=512)
    assert list(sets) == ["T128_P2_b2", "T128_P16_b2"] and all(len(p) == 10 for p in sets.values())
    again = M.build_test_sets("block", n=10, sweep=(2, 16), vocab_size=512)
    assert torch.equal(sets["T128_P16_b2"].tokens, again["T128_P16_b2"].tokens)
    tr = M.build_pool([M.MQARConfig(128, 16, block_size=2, vocab_size=512)], 10, seed=0)
    assert not torch.equal(tr.tokens, sets["T128_P16_b2"].tokens), "test seed differs from the train seed"


@pytest.mark.parametrize("kw", [dict(seq_len=20, n_pairs=8), dict(seq_len=64, n_pairs=3, block_size=2),
                                dict(seq_len=64, n_pairs=4, n_updates=2, block_size=2),
                                dict(seq_len=64, n_pairs=4, vocab_size=5), dict(seq_len=64, n_pairs=4, filler="zero"),
                                dict(seq_len=64, n_pairs=2, n_updates=3, update_keys="distinct"),
                                dict(seq_len=64, n_pairs=4, power_a=0.0), dict(seq_len=64, n_pairs=4, pad_to=32)])
def test_invalid_configs(kw):
    with pytest.raises(ValueError):
        M.MQARConfig(**kw)


# ---------------------------------------------------------------------------
# model building blocks (gpu/tasks/mqar_models.py): state budget, CPU forward/backward, write mask
# ---------------------------------------------------------------------------
from assocmem.gpu.tasks import mqar_models as MM  # noqa: E402


def test_state_budget_defaults():
    assert MM.bl_state_size(4, 32, 32, 1) == 8192
    assert MM.bl_head_sizes() == (32, 32)
    assert MM.bl_head_sizes(n_heads=1) == (64, 64)
    assert MM.bl_head_sizes(n_heads=2, pow2=True) == (32, 32)
    mx = MM.BLMixer(64)
    assert (mx.H, mx.D, mx.m, mx.G) == (4, 32, 32, 1) and mx.state_size == 8192
    model = MM.MQARModel(M.VOCAB + 1, M.VOCAB, d_model=64)
    assert model.state_sizes() == [8192, 8192] and len(model.mixers) == 2
    with pytest.raises(ValueError):
        MM.BLMixer(64, key_dim=64, value_dim=64)              # 4 (64·64 + 64²) > 8192


@settings(max_examples=40)
@given(budget=st.integers(8, 5000), H=st.integers(1, 4), G=st.integers(1, 3), which=st.sampled_from(["both", "D", "m"]),
       fixed=st.integers(1, 12), pow2=st.booleans())
def test_head_sizes_meet_the_budget_and_are_maximal(budget, H, G, which, fixed, pow2):
    kw = {} if which == "both" else {"key_dim": fixed} if which == "D" else {"value_dim": fixed * G}
    p2 = lambda x: not pow2 or (x & (x - 1)) == 0  # noqa: E731
    # brute force, ascending: every admissible pair, then the one with the largest free size
    if which == "both":
        ok = [(D, D) for D in range(1, 100) if D % G == 0 and p2(D)]
    elif which == "D":
        ok = [(fixed, m) for m in range(G, 5000, G) if p2(m)]
    else:
        ok = [(D, fixed * G) for D in range(1, 100) if p2(D)]
    ok = [x for x in ok if MM.bl_state_size(H, x[0], x[1], G) <= budget]
    if not ok:
        with pytest.raises(ValueError):
            MM.bl_head_sizes(budget, n_heads=H, groups=G, pow2=pow2, **kw)
        return
    assert MM.bl_head_sizes(budget, n_heads=H, groups=G, pow2=pow2, **kw) == max(ok)


def test_model_forward_backward_on_cpu():
    cfg = M.MQARConfig(24, 3, n_updates=1, vocab_size=32)
    bt = M.mqar_batch(cfg, 3, generator=gen(0))
    model = MM.MQARModel(cfg.n_tokens, cfg.vocab_size, d_model=16, n_heads=2, key_dim=4, value_dim=4)
    logits = model(bt.tokens, bt.is_write)
    assert logits.shape == (3, 24, 32) and torch.isfinite(logits).all()
    loss, acc = MM.mqar_loss(logits, bt.labels)
    assert torch.isfinite(loss) and 0.0 <= float(acc) <= 1.0
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert any(float(p.grad.abs().sum()) > 0 for n, p in model.named_parameters() if "k_proj" in n)


def test_write_mask_makes_pure_reads():
    """A masked token is a missing observation: with the noise gates pinned (its process noise then
    does not depend on its content) nothing it carries reaches a later read; its own query reads."""
    torch.manual_seed(0)
    mx = MM.BLMixer(8, n_heads=2, key_dim=4, value_dim=4).double()
    torch.nn.init.zeros_(mx.gate.weight)
    h = torch.randn(2, 10, 8, dtype=torch.float64)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[:, 4] = False
    out = mx(h, mask)
    h2 = h.clone()
    h2[:, 4] = torch.randn(2, 8, dtype=torch.float64)
    out2 = mx(h2, mask)
    keep = [t for t in range(10) if t != 4]
    assert torch.allclose(out[:, keep], out2[:, keep], atol=1e-12), "a masked token changes no later read"
    assert not torch.allclose(out[:, 4], out2[:, 4]), "its own query still reads"
    assert not torch.allclose(mx(h2, None)[:, 5:], out2[:, 5:]), "unmasked, it writes"
    assert mx(h, torch.zeros(2, 10, dtype=torch.bool)).abs().max() == 0, "no writes: M stays 0"


@given(frac=st.floats(0.01, 1.0))
@settings(max_examples=60, deadline=None)
def test_update_training_mixture_stops_at_its_fraction_of_the_pairs(frac):
    """``update_frac``: each half of Update's training mixture spreads ``U`` evenly over
    ``0..⌊frac·P⌋`` (P = 4 and 16), half the weight each; at 1 it is the default mixture exactly."""
    cfgs, w = M.train_configs("update", update_frac=frac)
    for P in (4, 16):
        top = math.floor(frac * P + 1e-9)
        us = [c.n_updates for c in cfgs if c.n_pairs == P]
        assert us == list(range(top + 1))
        ws = [x for x, c in zip(w, cfgs) if c.n_pairs == P]
        assert math.isclose(sum(ws), 0.5) and max(ws) - min(ws) < 1e-12
    if frac == 1.0:
        assert (cfgs, w) == M.train_configs("update")


def test_update_fraction_half_leaves_the_test_counts_above_eight_unseen():
    cfgs, _ = M.train_configs("update", update_frac=0.5)
    assert max(c.n_updates for c in cfgs if c.n_pairs == 16) == 8
    assert max(c.n_updates for c in cfgs if c.n_pairs == 4) == 2
    unseen = [c.n_updates for c in M.testset_configs("update") if c.n_updates > 8]
    assert unseen == [10, 12, 14, 16]
    pool = M.train_pool("update", n=120, vocab_size=512, update_frac=0.5)
    assert max(c.n_updates for c in pool.configs) == 8 and sum(pool.counts) == 120


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), True, "0.5"])
def test_update_fraction_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="update_frac"):
        M.train_configs("update", update_frac=bad)


def test_final_training_accuracy_is_the_mean_of_the_last_eight_logged_batches():
    curve = [{"step": 25 * i, "acc": a} for i, a in enumerate([0.0] * 5 + [0.5] * 4 + [1.0] * 4, 1)]
    assert M.final_train_acc(curve) == pytest.approx((4 * 0.5 + 4 * 1.0) / 8)
    assert M.final_train_acc(curve[:3]) == 0.0
    assert M.final_train_acc([]) is None and M.final_train_acc(None) is None
