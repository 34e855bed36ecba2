r"""Reachability in random trees (AM §3.3, Fig. 7, pp.20-21).

The notes give: 32 nodes, two families of trees generated in topological
order, and the task "predict the nodes reachable from a given root".  They
name neither the families, the tokenisation, where the root goes, nor the
output format; the choices below are fields of :class:`DAGConfig`.

Trees (generated in topological order: node ``i``'s parent is an earlier node)
    ``recursive``  random recursive tree: parent uniform over ``0..i-1``
                   (depth grows like ``ln n``: mean node depth ≈ 3 for n = 32)
    ``narrow``     deep, narrow tree: parent uniform over the last ``window``
                   nodes ``max(0, i-window)..i-1`` (default ``window = 2``;
                   depth grows linearly: mean node depth ≈ 10 for n = 32)
    ``mixed``      (default) each sequence draws one of the two families with
                   probability 1/2; ``DAGBatch.family`` tells which
    Edges point from parent to child, so "reachable from r" is the subtree
    of ``r``; with ``include_root`` (default) ``r`` reaches itself.

Names
    With ``relabel`` (default) each sequence gives its nodes a random
    permutation of the names ``0..n-1``, so a name carries no topological
    information (otherwise every descendant would have a larger name).

Tokens (``n`` nodes; :func:`dag_vocab` gives the offsets)
    edges   ``edge_tokens="single"`` (default): one token per edge,
            ``EDGE(u, v) = u·n + v`` (n² ids); ``"pair"``: two node tokens
            ``NODE(u) NODE(v)``
    root    one token ``ROOT(r)`` (its own id range), placed before the edges
            (``root_position="first"``) or after them (``"last"``)
    edge order  ``"topological"`` (default: the edge into node ``i`` comes
            ``i``-th, as generated) or ``"shuffled"``
    read-out
        ``output="multilabel"`` (default): one final token ``ANS``; the target
        is the multi-hot set over the ``n`` names (``targets``; a model reads
        ``n`` logits at the ``ANS`` position, binary cross-entropy);
        ``output="per_node"``: after the edges and root, every name once
        (``NODE(x)``, random order or sorted) with label 1 if ``x`` is
        reachable, else 0 (two-class cross-entropy on those tokens).

Sequence (single edge tokens, n = 32): root-first
``ROOT(r) e_1 … e_31 ANS`` (33 tokens), root-last ``e_1 … e_31 ROOT(r) ANS``;
per-node read-out replaces ``ANS`` by the 32 query tokens (63 tokens).
With edges in topological order and the root first, the set can be built in
one left-to-right pass (a child is reachable iff its parent is); with the
root last it cannot, the model must store the edges and compose them.

Root choice: ``root_choice="internal"`` (default) draws ``r`` uniformly among
nodes with at least one child, so the answer is never the root alone;
``"any"`` draws among all nodes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple, Optional

import torch

from assocmem import validate as V

IGNORE = -100
N_NODES = 32
FAMILIES = ("recursive", "narrow")


@dataclass(frozen=True)
class DAGConfig:
    """One reachability configuration (see the module docstring for each field)."""
    n_nodes: int = N_NODES
    family: str = "mixed"              # "recursive" | "narrow" | "mixed"
    window: int = 2                    # narrow trees: parent among the last `window` nodes
    root_position: str = "first"       # "first" | "last"
    root_choice: str = "internal"      # "internal" | "any"
    include_root: bool = True
    output: str = "multilabel"         # "multilabel" | "per_node"
    edge_tokens: str = "single"        # "single" | "pair"
    edge_order: str = "topological"    # "topological" | "shuffled"
    relabel: bool = True
    query_order: str = "shuffled"      # per_node read-out: "shuffled" | "sorted"

    def __post_init__(self):
        V.count("n_nodes", self.n_nodes, 2)
        V.count("window", self.window, 1)
        V.choice("family", self.family, FAMILIES + ("mixed",))
        V.choice("root_position", self.root_position, ("first", "last"))
        V.choice("root_choice", self.root_choice, ("internal", "any"))
        V.choice("output", self.output, ("multilabel", "per_node"))
        V.choice("edge_tokens", self.edge_tokens, ("single", "pair"))
        V.choice("edge_order", self.edge_order, ("topological", "shuffled"))
        V.choice("query_order", self.query_order, ("shuffled", "sorted"))
        for f in ("include_root", "relabel"):
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"{f} must be a bool (got {getattr(self, f)!r})")

    @property
    def edge_len(self) -> int:
        return (self.n_nodes - 1) * (1 if self.edge_tokens == "single" else 2)

    @property
    def length(self) -> int:
        return self.edge_len + 1 + (1 if self.output == "multilabel" else self.n_nodes)

    @property
    def vocab(self) -> "DAGVocab":
        return dag_vocab(self)

    def replace(self, **kw) -> "DAGConfig":
        return dataclasses.replace(self, **kw)


class DAGVocab(NamedTuple):
    edge: int     # EDGE(u, v) = edge + u·n + v   (single edge tokens; n² ids)
    node: int     # NODE(x) = node + x
    root: int     # ROOT(x) = root + x
    ans: int      # the read-out token of the multilabel format
    size: int     # rows of the embedding table


def dag_vocab(cfg: DAGConfig) -> DAGVocab:
    n = cfg.n_nodes
    e = n * n if cfg.edge_tokens == "single" else 0
    return DAGVocab(0, e, e + n, e + 2 * n, e + 2 * n + 1)


class DAGBatch(NamedTuple):
    tokens: torch.Tensor      # [B, T] long
    labels: torch.Tensor      # [B, T] long: per_node 0/1 at query tokens; IGNORE elsewhere (all IGNORE for multilabel)
    targets: torch.Tensor     # [B, n] bool: name x reachable from the root
    is_query: torch.Tensor    # [B, T] bool: where the loss is read (per_node queries, or the ANS token)
    is_edge: torch.Tensor     # [B, T] bool: edge tokens (the writes)
    src: torch.Tensor         # [B, T] long: parent name at edge tokens (both tokens of a pair), -1 elsewhere
    dst: torch.Tensor         # [B, T] long: child name at edge tokens, -1 elsewhere
    root: torch.Tensor        # [B] long: root name
    parent: torch.Tensor      # [B, n] long: parent of topological node i (topological index), -1 for i = 0
    names: torch.Tensor       # [B, n] long: name of topological node i
    family: torch.Tensor      # [B] long: index into FAMILIES


def random_parents(batch: int, n: int, family: str, *, window: int = 2,
                   generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Parent arrays ``[B, n]`` (topological index, ``parent[:, 0] = -1``) of one family."""
    V.choice("family", family, FAMILIES)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    i = torch.arange(1, n)
    lo = torch.zeros_like(i) if family == "recursive" else (i - window).clamp(min=0)
    width = i - lo
    u = torch.rand(batch, n - 1, generator=gen, dtype=torch.float64)
    par = lo + torch.minimum((u * width).long(), width - 1)
    return torch.cat([torch.full((batch, 1), -1, dtype=torch.long), par], 1)


def depths(parent: torch.Tensor) -> torch.Tensor:
    """Depth of every node (root 0) from topological parent arrays ``[B, n]``."""
    B, n = parent.shape
    d = torch.zeros(B, n, dtype=torch.long)
    rows = torch.arange(B)
    for i in range(1, n):
        d[:, i] = d[rows, parent[:, i]] + 1
    return d


def reachable(parent: torch.Tensor, root: torch.Tensor, include_root: bool = True) -> torch.Tensor:
    """``[B, n]`` bool over topological indices: nodes in the subtree of ``root`` (one pass)."""
    B, n = parent.shape
    rows = torch.arange(B)
    r = torch.zeros(B, n, dtype=torch.bool)
    r[rows, root] = True
    for i in range(1, n):
        r[:, i] |= r[rows, parent[:, i]]
    if not include_root:
        r[rows, root] = False
    return r


def dag_batch(cfg: DAGConfig, batch: int, *, generator: Optional[torch.Generator] = None) -> DAGBatch:
    """One batch of tree reachability (see the module docstring), generated on the CPU."""
    if not isinstance(cfg, DAGConfig):
        raise ValueError(f"cfg must be a DAGConfig (got {type(cfg).__name__})")
    batch = V.count("batch", batch, 1)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    n, voc = cfg.n_nodes, dag_vocab(cfg)
    rows = torch.arange(batch)

    if cfg.family == "mixed":
        fam = (torch.rand(batch, generator=gen) < 0.5).long()
    else:
        fam = torch.full((batch,), FAMILIES.index(cfg.family), dtype=torch.long)
    par = torch.where(fam[:, None] == 0,
                      random_parents(batch, n, "recursive", window=cfg.window, generator=gen),
                      random_parents(batch, n, "narrow", window=cfg.window, generator=gen))
    has_child = torch.zeros(batch, n, dtype=torch.bool)
    has_child[rows[:, None].expand(batch, n - 1), par[:, 1:]] = True
    w = (has_child if cfg.root_choice == "internal" else torch.ones(batch, n, dtype=torch.bool)).double()
    root_t = torch.multinomial(w, 1, generator=gen)[:, 0]                  # topological index
    reach_t = reachable(par, root_t, cfg.include_root)

    names = (torch.argsort(torch.rand(batch, n, generator=gen), dim=-1) if cfg.relabel
             else torch.arange(n).expand(batch, n).clone())
    child_t = torch.arange(1, n).expand(batch, n - 1)
    if cfg.edge_order == "shuffled":
        child_t = torch.gather(child_t, 1, torch.argsort(torch.rand(batch, n - 1, generator=gen), dim=-1))
    u = torch.gather(names, 1, torch.gather(par, 1, child_t))              # parent names, edge order
    v = torch.gather(names, 1, child_t)                                    # child names
    root = names[rows, root_t]
    targets = torch.zeros(batch, n, dtype=torch.bool).scatter_(1, names, reach_t)

    if cfg.edge_tokens == "single":
        e_tok, e_src, e_dst = voc.edge + u * n + v, u, v
    else:
        e_tok = torch.stack([voc.node + u, voc.node + v], 2).reshape(batch, -1)
        e_src = u.repeat_interleave(2, dim=1)
        e_dst = v.repeat_interleave(2, dim=1)
    root_tok = (voc.root + root)[:, None]
    if cfg.output == "multilabel":
        q_tok = torch.full((batch, 1), voc.ans, dtype=torch.long)
        q_lab = torch.full((batch, 1), IGNORE, dtype=torch.long)
    else:
        q = (torch.argsort(torch.rand(batch, n, generator=gen), dim=-1) if cfg.query_order == "shuffled"
             else torch.arange(n).expand(batch, n))
        q_tok = voc.node + q
        q_lab = torch.gather(targets, 1, q).long()
    ne = cfg.edge_len
    minus = torch.full((batch, 1), -1, dtype=torch.long)
    mq = torch.full_like(q_tok, -1)
    if cfg.root_position == "first":
        parts = [(root_tok, minus, minus), (e_tok, e_src, e_dst)]
        edge_at = slice(1, 1 + ne)
    else:
        parts = [(e_tok, e_src, e_dst), (root_tok, minus, minus)]
        edge_at = slice(0, ne)
    parts.append((q_tok, mq, mq))
    tokens = torch.cat([p[0] for p in parts], 1)
    src = torch.cat([p[1] for p in parts], 1)
    dst = torch.cat([p[2] for p in parts], 1)
    T = tokens.shape[1]
    is_edge = torch.zeros(batch, T, dtype=torch.bool)
    is_edge[:, edge_at] = True
    is_query = torch.zeros(batch, T, dtype=torch.bool)
    is_query[:, T - q_tok.shape[1]:] = True
    labels = torch.full((batch, T), IGNORE, dtype=torch.long)
    labels[:, T - q_tok.shape[1]:] = q_lab
    return DAGBatch(tokens, labels, targets, is_query, is_edge, src, dst, root, par, names, fam)
