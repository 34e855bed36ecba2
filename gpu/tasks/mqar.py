r"""MQAR with one shared key/value vocabulary (BL §4.2, App. F, pp.8-9, 26-27; Fig. 4).

Zoology's ``multiquery_ar`` draws keys from the lower half of the vocabulary
and values from the upper half, so a token id tells its role.  The BL paper
draws both from **one** vocabulary of 8,192 ids; here a sequence's keys and
values are ``2P (+U)`` *distinct* ids drawn uniformly from ``[0, V)``, so over
sequences every id is as likely a key as a value (no role shortcut) and the
role is carried only by the layout.

Layout of one sequence (``P`` pairs, ``U`` updates, block size ``b``)::

    write segment (C = 2(P+U) tokens)         query region (seq_len - C tokens)
    k v k v ... k v | k' v' ...               . . q . . . q . q . . .
    (b = 2:  k1 k2 v1 v2  k3 k4 v3 v4 ...)

* **write segment** -- the ``P`` initial pairs, then (Update) the ``U``
  re-assignments; with ``b > 1`` (Block) keys come ``b`` at a time followed by
  their ``b`` values in the same order.  ``is_write`` marks these tokens.
* **query region** -- split into ``S = ⌈(seq_len - C) / query_stride⌉`` slots
  (Zoology: ``(seq_len - C) / 2``); slot ``g`` starts at position
  ``C + query_stride·g``.  Every key is queried
  once; the slots are drawn *without replacement* with weights
  ``(g + 1)^(a - 1)`` (Zoology's ``p ∝ a·g^(a-1)``, ``g = 1..S``; ``a = 0.01``,
  nearly ``1/g``: most queries sit just after the writes), by successive
  sampling exactly as ``np.random.choice(replace=False, p=p)`` (implemented as
  Gumbel top-``P``).  The ``i``-th draw goes to the ``i``-th written key
  (Zoology's assignment; ``query_order="shuffled"`` breaks that link).  The
  "gap" is therefore measured from the end of the write segment, in slots, as
  in Zoology.
* **label** -- at the query key's own position (Zoology's next-token
  convention after its one-token shift): the model reads key ``A`` and must
  output ``A``'s *last* value.  ``IGNORE`` (-100) everywhere else.
* **filler** -- every other position.  ``filler="pad"`` (default) uses one
  dedicated token ``PAD = vocab_size`` outside the shared vocabulary (so the
  embedding table has ``vocab_size + 1`` rows); ``filler="random"`` draws
  filler uniformly from ``[0, vocab_size)`` like Zoology's
  ``random_non_queries`` (a filler may then equal a key; it carries no label).

Variants (presets below; every choice is a field of :class:`MQARConfig`):

=======  ===================================================================
Base     ``seq_len = 512``, ``P = 64``; pool 100,000 (Fig. 4a: width sweep)
Update   ``U`` re-assignments ``A→4*`` of keys drawn uniformly (with
         replacement) among the ``P`` keys, placed after the initial pairs;
         each new value is fresh.  Train: (64, 4 pairs) and (128, 16 pairs),
         half the pool each, ``U`` spread evenly over ``0..P``, padded to
         128; pool 160,000.  Test: 128, 16 pairs, ``U ∈ 0, 2, …, 16``
         (Fig. 4b)
Block    ``b = 2``; train 128 with 2/4/6/8 pairs (a quarter each), pool
         120,000; test 128 with 2, 4, …, 16 pairs (Fig. 4c)
=======  ===================================================================

Test sets: 3,000 sequences per configuration (Zoology's default), from a seed
other than the training pool's.

Storage: :func:`build_pool` generates in seeded chunks into ``int16`` tokens,
``int8`` roles and per-query ``int16`` answers (Base: about 160 MB instead of
400 MB for the ``int64`` tokens alone); :meth:`MQARPool.batch` expands rows to
:class:`MQARBatch` (``long`` tensors) on demand.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional, Sequence

import torch

from assocmem import validate as V

IGNORE = -100
VOCAB = 8192
POOL_SIZES = {"base": 100_000, "update": 160_000, "block": 120_000}
TEST_SIZE = 3000
UPDATE_TEST_UPDATES = (0, 2, 4, 6, 8, 10, 12, 14, 16)
BLOCK_TRAIN_PAIRS = (2, 4, 6, 8)
BLOCK_TEST_PAIRS = (2, 4, 6, 8, 10, 12, 14, 16)
VARIANTS = ("base", "update", "block")

# token roles (the ``role`` field)
FILLER, KEY, VALUE, QUERY = 0, 1, 2, 3


@dataclass(frozen=True)
class MQARConfig:
    """One MQAR configuration; every open choice of the sources is a field.

    seq_len        tokens of the sequence proper (queries are placed inside it)
    n_pairs        ``P`` distinct keys, each written once, then queried once
    n_updates      ``U`` re-assignments of already-written keys (Update)
    block_size     ``b``: keys come ``b`` at a time, then their ``b`` values (Block)
    vocab_size     the shared key/value vocabulary ``[0, V)``; ``PAD = V``
    power_a        Zoology's power-law exponent ``a``: slot weights ``(g+1)^(a-1)``
    query_stride   positions per query slot (Zoology: 2, queries at even offsets)
    query_order    "zoology": the i-th drawn slot queries the i-th written key;
                   "shuffled": a random key per drawn slot
    filler         "pad" (the token ``V``) or "random" (uniform over ``[0, V)``)
    distinct_values  True: all keys and values (updates included) of a sequence
                   are distinct ids (Zoology draws values without replacement);
                   False: each value uniform over the ids that are not keys of
                   the sequence, an update always changing the key's value
    update_keys    "replace": each update picks a key uniformly among the ``P``
                   (a key may be updated several times); "distinct": ``U <= P``
                   different keys
    update_order   "after": all initial pairs, then the updates (A→4, B→5, A→4*);
                   "interleaved": the ``P + U`` writes in a random order (a
                   key's first write is its initial pair)
    pad_to         total length after padding with filler (mixed-length pools);
                   None: ``seq_len``
    """
    seq_len: int
    n_pairs: int
    n_updates: int = 0
    block_size: int = 1
    vocab_size: int = VOCAB
    power_a: float = 0.01
    query_stride: int = 2
    query_order: str = "zoology"
    filler: str = "pad"
    distinct_values: bool = True
    update_keys: str = "replace"
    update_order: str = "after"
    pad_to: Optional[int] = None

    def __post_init__(self):
        P = V.count("n_pairs", self.n_pairs, 1)
        U = V.count("n_updates", self.n_updates, 0)
        b = V.count("block_size", self.block_size, 1)
        T = V.count("seq_len", self.seq_len, 2)
        Vs = V.count("vocab_size", self.vocab_size, 2)
        stride = V.count("query_stride", self.query_stride, 1)
        a = float(V.positive("power_a", self.power_a))
        V.choice("query_order", self.query_order, ("zoology", "shuffled"))
        V.choice("filler", self.filler, ("pad", "random"))
        V.choice("update_keys", self.update_keys, ("replace", "distinct"))
        V.choice("update_order", self.update_order, ("after", "interleaved"))
        if not isinstance(self.distinct_values, bool):
            raise ValueError(f"distinct_values must be a bool (got {self.distinct_values!r})")
        if P % b:
            raise ValueError(f"n_pairs={P} must be a multiple of block_size={b}")
        if U and b != 1:
            raise ValueError("updates are defined for block_size = 1 only")
        if self.update_keys == "distinct" and U > P:
            raise ValueError(f"update_keys='distinct' needs n_updates <= n_pairs (got {U} > {P})")
        C = 2 * (P + U)
        if -(-(T - C) // stride) < P:
            raise ValueError(f"seq_len={T} leaves {max(0, -(-(T - C) // stride))} query slots after the {C} write "
                             f"tokens; {P} queries need {C + stride * (P - 1) + 1} tokens")
        need = 2 * P + U if self.distinct_values else P + 2
        if need > Vs:
            raise ValueError(f"vocab_size={Vs} is too small for {P} pairs and {U} updates (needs {need})")
        if self.pad_to is not None and V.count("pad_to", self.pad_to, T) < T:
            raise ValueError(f"pad_to must be >= seq_len={T}")
        object.__setattr__(self, "power_a", a)

    # derived quantities -----------------------------------------------------
    @property
    def write_len(self) -> int:
        return 2 * (self.n_pairs + self.n_updates)

    @property
    def n_slots(self) -> int:
        return -(-(self.seq_len - self.write_len) // self.query_stride)     # ceil: slot starts inside seq_len

    @property
    def length(self) -> int:
        return self.seq_len if self.pad_to is None else self.pad_to

    @property
    def n_tokens(self) -> int:
        """Rows of the embedding table: the shared vocabulary and ``PAD``."""
        return self.vocab_size + 1

    @property
    def pad_id(self) -> int:
        return self.vocab_size

    @property
    def name(self) -> str:
        s = f"T{self.seq_len}_P{self.n_pairs}"
        if self.n_updates:
            s += f"_U{self.n_updates}"
        if self.block_size > 1:
            s += f"_b{self.block_size}"
        return s

    def replace(self, **kw) -> "MQARConfig":
        return dataclasses.replace(self, **kw)


class MQARBatch(NamedTuple):
    tokens: torch.Tensor          # [B, T] long, ids in [0, V] (V = PAD)
    labels: torch.Tensor          # [B, T] long: the key's last value at query positions, IGNORE elsewhere
    is_query: torch.Tensor        # [B, T] bool: query key tokens (where the loss is read)
    is_write: torch.Tensor        # [B, T] bool: key and value tokens of the write segment
    role: torch.Tensor            # [B, T] int8: FILLER / KEY / VALUE / QUERY
    query_updates: torch.Tensor   # [B, T] long: times the queried key was re-assigned, -1 off queries
    config: torch.Tensor          # [B] long: index of the row's configuration (pools of several)


def gap_pmf(n_slots: int, power_a: float = 0.01) -> torch.Tensor:
    """Zoology's slot distribution ``p_g ∝ (g + 1)^(a - 1)``, ``g = 0..n_slots-1`` (float64).

    This is the law of the *first* query's slot; later queries are drawn from
    the remaining slots with the same weights renormalised.
    """
    n_slots = V.count("n_slots", n_slots, 1)
    a = float(V.positive("power_a", power_a))
    w = torch.arange(1, n_slots + 1, dtype=torch.float64) ** (a - 1.0)
    return w / w.sum()


def _gumbel_topk(logw: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """``k`` indices per row without replacement, in successive-sampling order."""
    u = torch.rand(logw.shape, generator=gen, dtype=torch.float64).clamp_(min=1e-300)
    return torch.topk(logw - torch.log(-torch.log(u)), k, dim=-1).indices


def _distinct_ids(batch: int, vocab: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """``k`` distinct ids per row: a uniformly random ordered sample of ``[0, vocab)``.

    Draw iid, then redraw every repeated entry (all but its first occurrence)
    until none is left.  Relabelling the vocabulary commutes with every step,
    so each ordered tuple of distinct ids is equally likely.
    """
    ids = torch.randint(0, vocab, (batch, k), generator=gen)
    while True:
        srt, order = torch.sort(ids, dim=1, stable=True)
        dup_sorted = torch.zeros_like(ids, dtype=torch.bool)
        dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
        if not bool(dup_sorted.any()):
            return ids
        dup = torch.zeros_like(dup_sorted).scatter_(1, order, dup_sorted)
        ids[dup] = torch.randint(0, vocab, (int(dup.sum()),), generator=gen)


def _write_events(cfg: MQARConfig, batch: int, gen: torch.Generator) -> torch.Tensor:
    """Key index of each write, ``[B, P + U]``; key ``i`` is the ``i``-th key to be first written."""
    P, U = cfg.n_pairs, cfg.n_updates
    first = torch.arange(P).expand(batch, P)
    if U == 0:
        return first.clone()
    if cfg.update_keys == "replace":
        upd = torch.randint(0, P, (batch, U), generator=gen)
    else:
        upd = torch.argsort(torch.rand(batch, P, generator=gen), dim=-1)[:, :U]
    ev = torch.cat([first, upd], 1)
    if cfg.update_order == "interleaved":
        perm = torch.argsort(torch.rand(batch, P + U, generator=gen), dim=-1)
        ev = torch.gather(ev, 1, perm)
        # rename keys by the order of their first write
        pos = torch.arange(P + U).expand(batch, P + U)
        first_pos = torch.full((batch, P), P + U, dtype=torch.long).scatter_reduce(1, ev, pos, "amin")
        rank = torch.argsort(torch.argsort(first_pos, dim=-1), dim=-1)
        ev = torch.gather(rank, 1, ev)
    return ev


def mqar_batch(cfg: MQARConfig, batch: int, *, generator: Optional[torch.Generator] = None,
               config_index: int = 0) -> MQARBatch:
    """One batch of ``cfg`` (see the module docstring), generated on the CPU."""
    if not isinstance(cfg, MQARConfig):
        raise ValueError(f"cfg must be an MQARConfig (got {type(cfg).__name__})")
    batch = V.count("batch", batch, 1)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    P, U, b, Vs = cfg.n_pairs, cfg.n_updates, cfg.block_size, cfg.vocab_size
    E, C, L, stride = P + U, cfg.write_len, cfg.length, cfg.query_stride
    rows = torch.arange(batch)

    ev = _write_events(cfg, batch, gen)                                  # [B, E] key index per write
    if cfg.distinct_values:
        ids = _distinct_ids(batch, Vs, P + E, gen)
        keys, vals = ids[:, :P], ids[:, P:]
    else:
        keys = _distinct_ids(batch, Vs, P, gen)
        vals = torch.empty(batch, E, dtype=torch.long)
    if cfg.distinct_values:
        # the last write of each key decides its answer
        last = torch.full((batch, P), -1, dtype=torch.long).scatter_reduce(
            1, ev, torch.arange(E).expand(batch, E), "amax")
        cur = torch.gather(vals, 1, last)
    else:
        cur = torch.full((batch, P), -1, dtype=torch.long)            # current value of each key
        for j in range(E):
            kj = ev[:, j]
            old = cur[rows, kj]
            v = torch.randint(0, Vs, (batch,), generator=gen)
            while True:
                bad = (v[:, None] == keys).any(-1) | (v == old)
                if not bool(bad.any()):
                    break
                v[bad] = torch.randint(0, Vs, (int(bad.sum()),), generator=gen)
            vals[:, j] = v
            cur[rows, kj] = v
    n_upd = torch.zeros(batch, P, dtype=torch.long).scatter_add_(1, ev, torch.ones_like(ev)) - 1

    j = torch.arange(E)
    kpos = 2 * b * (j // b) + j % b                                       # [E]
    vpos = kpos + b

    S = cfg.n_slots
    logw = (cfg.power_a - 1.0) * torch.log(torch.arange(1, S + 1, dtype=torch.float64))
    slots = _gumbel_topk(logw.expand(batch, S), P, gen)                  # [B, P], i-th draw
    if cfg.query_order == "zoology":
        qkey = torch.arange(P).expand(batch, P)
    else:
        qkey = torch.argsort(torch.rand(batch, P, generator=gen), dim=-1)
    qpos = C + stride * slots                                            # [B, P]

    if cfg.filler == "pad":
        tokens = torch.full((batch, L), cfg.pad_id, dtype=torch.long)
    else:
        tokens = torch.randint(0, Vs, (batch, L), generator=gen)
    role = torch.full((batch, L), FILLER, dtype=torch.int8)
    labels = torch.full((batch, L), IGNORE, dtype=torch.long)
    qupd = torch.full((batch, L), -1, dtype=torch.long)
    tokens[:, kpos] = torch.gather(keys, 1, ev)
    tokens[:, vpos] = vals
    role[:, kpos] = KEY
    role[:, vpos] = VALUE
    r2 = rows[:, None]
    tokens[r2, qpos] = torch.gather(keys, 1, qkey)
    role[r2, qpos] = QUERY
    labels[r2, qpos] = torch.gather(cur, 1, qkey)
    qupd[r2, qpos] = torch.gather(n_upd, 1, qkey)
    is_write = (role == KEY) | (role == VALUE)
    return MQARBatch(tokens, labels, role == QUERY, is_write, role, qupd,
                     torch.full((batch,), config_index, dtype=torch.long))


# ---------------------------------------------------------------------------
# fixed-size pools
# ---------------------------------------------------------------------------
def _chunk_seed(seed: int, config_index: int, chunk_index: int) -> int:
    """A generator seed per (pool seed, configuration, chunk); chunks are independent."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + config_index * 0xBF58476D1CE4E5B9 + chunk_index * 0x94D049BB133111EB)
    return x % (2 ** 63 - 1)


def _split(n: int, weights: Sequence[float]) -> list[int]:
    """Largest-remainder split of ``n`` rows by ``weights``."""
    w = [float(V.nonnegative("weights", x)) for x in weights]
    tot = sum(w)
    if tot <= 0:
        raise ValueError("weights must not all be zero")
    raw = [n * x / tot for x in w]
    out = [int(math.floor(r)) for r in raw]
    order = sorted(range(len(w)), key=lambda i: (out[i] - raw[i], i))
    for i in order[: n - sum(out)]:
        out[i] += 1
    return out


class MQARPool:
    """A fixed pool of MQAR sequences in compact storage (see :func:`build_pool`).

    ``tokens`` int16/int32 [N, L], ``role`` int8 [N, L], ``answers`` int16/int32
    [N, Q] (the labels of the row's query positions in position order, IGNORE
    padded), ``query_updates`` int8 [N, Q], ``config`` int16 [N];
    ``configs`` the configurations, ``counts`` rows per configuration.
    """

    def __init__(self, configs, counts, tokens, role, answers, query_updates, config):
        self.configs = tuple(configs)
        self.counts = tuple(counts)
        self.tokens, self.role, self.answers = tokens, role, answers
        self.query_updates, self.config = query_updates, config

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def length(self) -> int:
        return self.tokens.shape[1]

    @property
    def n_tokens(self) -> int:
        return max(c.n_tokens for c in self.configs)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in
                   (self.tokens, self.role, self.answers, self.query_updates, self.config))

    def batch(self, idx) -> MQARBatch:
        """Rows ``idx`` (a slice, list or long tensor) as an :class:`MQARBatch` of long tensors."""
        if isinstance(idx, slice):
            idx = torch.arange(len(self))[idx]
        idx = torch.as_tensor(idx, dtype=torch.long)
        tokens = self.tokens[idx].long()
        role = self.role[idx]
        is_query = role == QUERY
        ans = self.answers[idx].long()
        valid = ans != IGNORE
        labels = torch.full(tokens.shape, IGNORE, dtype=torch.long)
        labels[is_query] = ans[valid]
        qupd = torch.full(tokens.shape, -1, dtype=torch.long)
        qupd[is_query] = self.query_updates[idx].long()[valid]
        is_write = (role == KEY) | (role == VALUE)
        return MQARBatch(tokens, labels, is_query, is_write, role, qupd, self.config[idx].long())

    def batches(self, batch_size: int, *, generator: Optional[torch.Generator] = None,
                shuffle: bool = True, drop_last: bool = False) -> Iterator[MQARBatch]:
        """One epoch of batches (a seeded permutation when ``shuffle``)."""
        batch_size = V.count("batch_size", batch_size, 1)
        n = len(self)
        if shuffle:
            gen = generator if generator is not None else torch.Generator().manual_seed(0)
            order = torch.randperm(n, generator=gen)
        else:
            order = torch.arange(n)
        stop = n - n % batch_size if drop_last else n
        for s in range(0, stop, batch_size):
            yield self.batch(order[s:s + batch_size])


def build_pool(configs, n: int, *, seed: int, weights: Optional[Sequence[float]] = None,
               chunk: int = 512) -> MQARPool:
    """A seeded pool of ``n`` sequences split over ``configs`` (by ``weights``; equal by default).

    Rows are stored configuration by configuration, padded with filler to the
    longest ``length`` (causal models see the same prefix).  Chunk ``c`` of
    configuration ``j`` uses its own generator, seeded from ``(seed, j, c)``:
    the same arguments give the same pool, and a larger pool with the same
    seed and chunk size shares each configuration's complete chunks.
    """
    if isinstance(configs, MQARConfig):
        configs = [configs]
    configs = list(configs)
    if not configs or not all(isinstance(c, MQARConfig) for c in configs):
        raise ValueError("configs must be an MQARConfig or a non-empty sequence of them")
    n = V.count("n", n, 1)
    seed = V.count("seed", seed, 0)
    chunk = V.count("chunk", chunk, 1)
    if weights is None:
        weights = [1.0] * len(configs)
    if len(weights) != len(configs):
        raise ValueError(f"weights has {len(weights)} entries for {len(configs)} configs")
    counts = _split(n, weights)
    L = max(c.length for c in configs)
    Q = max(c.n_pairs for c in configs)
    big = max(c.n_tokens for c in configs) > 2 ** 15 - 1
    tdt = torch.int32 if big else torch.int16
    tokens = torch.empty(n, L, dtype=tdt)
    role = torch.full((n, L), FILLER, dtype=torch.int8)
    answers = torch.full((n, Q), IGNORE, dtype=tdt)
    qupd = torch.full((n, Q), -1, dtype=torch.int8)
    cfg_idx = torch.empty(n, dtype=torch.int16)
    row = 0
    for j, (cfg, cnt) in enumerate(zip(configs, counts)):
        if cfg.length < L:
            cfg = cfg.replace(pad_to=L)
        for c, s in enumerate(range(0, cnt, chunk)):
            m = min(chunk, cnt - s)
            bt = mqar_batch(cfg, m, generator=torch.Generator().manual_seed(_chunk_seed(seed, j, c)),
                            config_index=j)
            sl = slice(row + s, row + s + m)
            tokens[sl] = bt.tokens.to(tdt)
            role[sl] = bt.role
            # per-row queries in position order
            order = torch.argsort((~bt.is_query).to(torch.int8), dim=1, stable=True)[:, :cfg.n_pairs]
            answers[sl, :cfg.n_pairs] = torch.gather(bt.labels, 1, order).to(tdt)
            qupd[sl, :cfg.n_pairs] = torch.gather(bt.query_updates, 1, order).to(torch.int8)
            cfg_idx[sl] = j
        row += cnt
    return MQARPool(configs, counts, tokens, role, answers, qupd, cfg_idx)


# ---------------------------------------------------------------------------
# the paper's variants
# ---------------------------------------------------------------------------
def train_configs(variant: str, *, update_frac: float = 1.0, **overrides) -> tuple[list[MQARConfig], list[float]]:
    """The training mixture of a variant: ``(configs, weights)``.

    base    (512, 64 pairs)
    update  (64, 4 pairs) and (128, 16 pairs), half each, ``U`` spread evenly
            over ``0..⌊update_frac·P⌋`` within each half (``0..P`` by default), padded to 128
    block   (128, P pairs, b = 2) for ``P ∈ 2, 4, 6, 8``, a quarter each
    ``overrides`` replace fields of every configuration (e.g. ``vocab_size``).  ``update_frac`` in
    ``(0, 1]``: the notes say "mixed update counts" without their range; below 1 the test's largest
    update counts lie beyond what training showed.
    """
    V.choice("variant", variant, VARIANTS)
    if isinstance(update_frac, bool) or not isinstance(update_frac, (int, float)) or not 0 < update_frac <= 1:
        raise ValueError(f"update_frac must be a number in (0, 1] (got {update_frac!r})")
    if variant == "base":
        return [MQARConfig(512, 64, **overrides)], [1.0]
    if variant == "update":
        cfgs, w = [], []
        for T, P in ((64, 4), (128, 16)):
            top = math.floor(update_frac * P + 1e-9)
            for u in range(top + 1):
                cfgs.append(MQARConfig(T, P, n_updates=u, **overrides))
                w.append(0.5 / (top + 1))
        return cfgs, w
    cfgs = [MQARConfig(128, P, block_size=2, **overrides) for P in BLOCK_TRAIN_PAIRS]
    return cfgs, [1.0] * len(cfgs)


def final_train_acc(curve) -> Optional[float]:
    """A run's final training accuracy on its pool: the mean of the last 8 logged batches of ``curve``
    (``[{"acc": …}, …]``), None without one.  Below ``1/P`` the run learned neither its pool nor the binding."""
    tail = list(curve or [])[-8:]
    return sum(x["acc"] for x in tail) / len(tail) if tail else None


def pick_rates(cands: dict) -> dict:
    """The paper's learning-rate pick over ``cands``, ``{(group, seed): {lr: (score, item)}}`` (``score`` the
    mean validation accuracy): ``{(group, seed): (score, item)}``.  Seed 0 takes its best-scoring rate; a later
    seed is read at seed 0's pick where it ran there (picking each seed's own best rate would select on
    luck), and falls back to its own best only where it did not."""
    def best(rates):
        return max(rates.values(), key=lambda si: si[0])

    out = {}
    for (group, seed), rates in cands.items():
        first = cands.get((group, 0))
        lr0 = max(first, key=lambda lr: first[lr][0]) if first else None
        out[(group, seed)] = rates[lr0] if seed != 0 and lr0 in rates else best(rates)
    return out


def testset_configs(variant: str, *, sweep: Optional[Sequence[int]] = None, **overrides) -> list[MQARConfig]:
    """The test configurations: base (512, 64); update (128, 16, U) for ``U`` in ``sweep``
    (default 0, 2, …, 16); block (128, P, b = 2) for ``P`` in ``sweep`` (default 2, 4, …, 16)."""
    V.choice("variant", variant, VARIANTS)
    if variant == "base":
        return [MQARConfig(512, 64, **overrides)]
    if variant == "update":
        return [MQARConfig(128, 16, n_updates=u, **overrides) for u in (sweep or UPDATE_TEST_UPDATES)]
    return [MQARConfig(128, P, block_size=2, **overrides) for P in (sweep or BLOCK_TEST_PAIRS)]


def train_pool(variant: str, *, seed: int = 0, n: Optional[int] = None, chunk: int = 512,
               update_frac: float = 1.0, **overrides) -> MQARPool:
    """The variant's training pool (default sizes 100k / 160k / 120k; ``update_frac``: :func:`train_configs`)."""
    cfgs, w = train_configs(variant, update_frac=update_frac, **overrides)
    return build_pool(cfgs, POOL_SIZES[variant] if n is None else n, seed=seed, weights=w, chunk=chunk)


def build_test_sets(variant: str, *, seed: int = 1, n: int = TEST_SIZE, sweep: Optional[Sequence[int]] = None,
              chunk: int = 512, **overrides) -> dict[str, MQARPool]:
    """``{config.name: pool of n sequences}`` per test configuration (3,000 each by default).

    The seed must differ from the training pool's (default 1 vs 0); each
    configuration gets its own seed stream (``seed`` and its index).
    """
    seed = V.count("seed", seed, 0)
    out = {}
    for i, cfg in enumerate(testset_configs(variant, sweep=sweep, **overrides)):
        out[cfg.name] = build_pool([cfg], n, seed=_chunk_seed(seed, 1_000_003, i) % (2 ** 31), chunk=chunk)
    return out
