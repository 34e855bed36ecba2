"""Tree-reachability generator (gpu/tasks/dag.py): every target against a graph search, and the documented properties."""
from collections import deque

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from assocmem.gpu.tasks import dag as D  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)          # small tensors: threads only contend on a shared machine
    yield
    torch.set_num_threads(n)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def parse(cfg, tokens):
    """Decode one row by the documented layout: (root name, edge list in token order, query names)."""
    n, voc = cfg.n_nodes, D.dag_vocab(cfg)
    t = tokens.tolist()
    ne = cfg.edge_len
    if cfg.root_position == "first":
        root_tok, etoks, rest = t[0], t[1:1 + ne], t[1 + ne:]
    else:
        etoks, root_tok, rest = t[:ne], t[ne], t[ne + 1:]
    assert voc.root <= root_tok < voc.root + n
    if cfg.edge_tokens == "single":
        assert all(voc.edge <= x < voc.edge + n * n for x in etoks)
        edges = [divmod(x - voc.edge, n) for x in etoks]
    else:
        assert all(voc.node <= x < voc.node + n for x in etoks)
        edges = [(etoks[i] - voc.node, etoks[i + 1] - voc.node) for i in range(0, ne, 2)]
    if cfg.output == "multilabel":
        assert rest == [voc.ans]
        queries = None
    else:
        assert all(voc.node <= x < voc.node + n for x in rest)
        queries = [x - voc.node for x in rest]
    return root_tok - voc.root, edges, queries


def bfs(edges, root):
    adj = {}
    for u, v in edges:
        adj.setdefault(u, []).append(v)
    seen, todo = {root}, deque([root])
    while todo:
        for v in adj.get(todo.popleft(), []):
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return seen


def check_row(cfg, bt, r):
    n = cfg.n_nodes
    root, edges, queries = parse(cfg, bt.tokens[r])
    assert root == int(bt.root[r])
    # a tree on the n names: n-1 edges, one parent per non-root node, everything reached from the tree root
    assert len(edges) == n - 1
    children = [v for _, v in edges]
    assert len(set(children)) == n - 1
    top = (set(range(n)) - set(children)).pop()
    assert bfs(edges, top) == set(range(n))
    assert top == int(bt.names[r, 0])
    reach = bfs(edges, root)
    if not cfg.include_root:
        reach.discard(root)
    assert set(torch.nonzero(bt.targets[r]).flatten().tolist()) == reach
    # masks and the read-out
    T = cfg.length
    assert bt.tokens.shape[1] == T
    q_at = torch.nonzero(bt.is_query[r]).flatten().tolist()
    if cfg.output == "multilabel":
        assert q_at == [T - 1] and (bt.labels[r] == D.IGNORE).all()
    else:
        assert q_at == list(range(T - n, T))
        assert sorted(queries) == list(range(n))
        assert bt.labels[r, T - n:].tolist() == [int(x in reach) for x in queries]
        assert (bt.labels[r, :T - n] == D.IGNORE).all()
        if cfg.query_order == "sorted":
            assert queries == list(range(n))
    e_at = torch.nonzero(bt.is_edge[r]).flatten().tolist()
    start = 1 if cfg.root_position == "first" else 0
    assert e_at == list(range(start, start + cfg.edge_len))
    # src/dst agree with the tokens
    per = 1 if cfg.edge_tokens == "single" else 2
    assert bt.src[r, e_at].tolist() == [u for u, _ in edges for _ in range(per)]
    assert bt.dst[r, e_at].tolist() == [v for _, v in edges for _ in range(per)]
    assert (bt.src[r][~bt.is_edge[r]] == -1).all() and (bt.dst[r][~bt.is_edge[r]] == -1).all()
    # topological generation order
    par = bt.parent[r].tolist()
    assert par[0] == -1 and all(0 <= par[i] < i for i in range(1, n))
    names = bt.names[r].tolist()
    assert sorted(names) == list(range(n))
    assert sorted(edges) == sorted((names[par[i]], names[i]) for i in range(1, n))
    if cfg.edge_order == "topological":
        assert edges == [(names[par[i]], names[i]) for i in range(1, n)]
        seen = {top}
        for u, v in edges:
            assert u in seen, "an edge's source is already placed"
            seen.add(v)
    if cfg.root_choice == "internal":
        assert any(u == root for u, _ in edges)
    fam = D.FAMILIES[int(bt.family[r])]
    if fam == "narrow":
        assert all(i - cfg.window <= par[i] for i in range(1, n))
    if cfg.family != "mixed":
        assert fam == cfg.family


@st.composite
def configs(draw):
    return D.DAGConfig(n_nodes=draw(st.integers(2, 12)), family=draw(st.sampled_from(["recursive", "narrow", "mixed"])),
                       window=draw(st.integers(1, 4)), root_position=draw(st.sampled_from(["first", "last"])),
                       root_choice=draw(st.sampled_from(["internal", "any"])), include_root=draw(st.booleans()),
                       output=draw(st.sampled_from(["multilabel", "per_node"])),
                       edge_tokens=draw(st.sampled_from(["single", "pair"])),
                       edge_order=draw(st.sampled_from(["topological", "shuffled"])), relabel=draw(st.booleans()),
                       query_order=draw(st.sampled_from(["shuffled", "sorted"])))


@settings(max_examples=50)
@given(cfg=configs(), seed=st.integers(0, 2 ** 31 - 1))
def test_targets_match_graph_search(cfg, seed):
    bt = D.dag_batch(cfg, 6, generator=gen(seed))
    for r in range(6):
        check_row(cfg, bt, r)


@pytest.mark.parametrize("root_position", ["first", "last"])
@pytest.mark.parametrize("output", ["multilabel", "per_node"])
def test_paper_size_rows(root_position, output):
    cfg = D.DAGConfig(root_position=root_position, output=output)
    bt = D.dag_batch(cfg, 32, generator=gen(1))
    assert cfg.length == {"multilabel": 33, "per_node": 64}[output]
    for r in range(32):
        check_row(cfg, bt, r)
    root_at = 0 if root_position == "first" else 31
    assert ((bt.tokens[:, root_at] - cfg.vocab.root) == bt.root).all()


def test_shapes_dtypes_vocab():
    cfg = D.DAGConfig()
    bt = D.dag_batch(cfg, 4)
    assert bt._fields == ("tokens", "labels", "targets", "is_query", "is_edge", "src", "dst", "root", "parent",
                          "names", "family")
    assert bt.tokens.dtype == bt.labels.dtype == torch.long and bt.tokens.shape == (4, 33)
    assert bt.targets.dtype == torch.bool and bt.targets.shape == (4, 32)
    assert bt.is_query.dtype == bt.is_edge.dtype == torch.bool
    assert bt.root.shape == bt.family.shape == (4,) and bt.parent.shape == bt.names.shape == (4, 32)
    v = cfg.vocab
    assert (v.edge, v.node, v.root, v.ans, v.size) == (0, 1024, 1056, 1088, 1089)
    assert int(bt.tokens.max()) < v.size
    vp = cfg.replace(edge_tokens="pair").vocab
    assert (vp.node, vp.root, vp.ans, vp.size) == (0, 32, 64, 65)
    assert cfg.replace(edge_tokens="pair", output="per_node").length == 62 + 1 + 32


def test_determinism_by_seed():
    cfg = D.DAGConfig(output="per_node", edge_order="shuffled")
    a, b, c = (D.dag_batch(cfg, 16, generator=gen(s)) for s in (5, 5, 6))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a.tokens, c.tokens)


def test_families_differ_in_depth():
    n = 32
    rec = D.depths(D.random_parents(4000, n, "recursive", generator=gen(0))).double()
    nar = D.depths(D.random_parents(4000, n, "narrow", generator=gen(0))).double()
    # random recursive tree: E[depth of node i] = H_i, mean over the 32 nodes ≈ 3.06; narrow (window 2): ≈ 10.5
    h = [sum(1.0 / k for k in range(1, i + 1)) for i in range(n)]
    assert abs(float(rec.mean()) - sum(h) / n) < 0.05
    assert float(nar.mean()) > 9.5
    assert float(nar.max(1).values.mean()) > 3 * float(rec.max(1).values.mean())
    # mixed batches hold both, about half each
    bt = D.dag_batch(D.DAGConfig(), 2000, generator=gen(2))
    frac = float(bt.family.double().mean())
    assert 0.45 < frac < 0.55
    d = D.depths(bt.parent).double().max(1).values
    assert d[bt.family == 1].mean() > 2 * d[bt.family == 0].mean()


def test_reachable_matches_bfs_on_parents():
    par = D.random_parents(50, 20, "recursive", generator=gen(3))
    root = torch.randint(0, 20, (50,), generator=gen(4))
    r = D.reachable(par, root)
    for b in range(50):
        edges = [(int(par[b, i]), i) for i in range(1, 20)]
        assert set(torch.nonzero(r[b]).flatten().tolist()) == bfs(edges, int(root[b]))
    assert not D.reachable(par, root, include_root=False)[torch.arange(50), root].any()


def test_relabel_hides_the_topological_order():
    bt = D.dag_batch(D.DAGConfig(family="narrow"), 500, generator=gen(7))
    up = (bt.src[bt.is_edge] < bt.dst[bt.is_edge]).double().mean()
    assert 0.45 < float(up) < 0.55, "parent name below child name about half the time"
    bt = D.dag_batch(D.DAGConfig(relabel=False), 50, generator=gen(7))
    assert (bt.src[bt.is_edge] < bt.dst[bt.is_edge]).all() and (bt.names == torch.arange(32)).all()


def test_root_choice():
    cfg = D.DAGConfig(family="recursive", root_choice="any")
    bt = D.dag_batch(cfg, 400, generator=gen(8))
    assert (bt.targets.sum(1) == 1).any(), "leaves are roots sometimes"
    bt = D.dag_batch(cfg.replace(root_choice="internal"), 400, generator=gen(8))
    assert (bt.targets.sum(1) >= 2).all()


@pytest.mark.parametrize("kw", [dict(n_nodes=1), dict(family="star"), dict(root_position="middle"),
                                dict(output="sequence"), dict(window=0), dict(relabel=1)])
def test_invalid_configs(kw):
    with pytest.raises(ValueError):
        D.DAGConfig(**kw)
