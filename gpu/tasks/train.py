"""Training loop of the learned tasks: one run = (task, model, seed).

The paper's optimiser (BL App. E.5): AdamW, learning rate 3e-4, weight decay
1e-4, gradient-norm clipping at 1.0.  A run checkpoints every ``ckpt_every``
steps (model, optimiser, step, data-generator state, curve) and ``resume=True``
continues from the checkpoint bit-for-bit in the data stream.  At the end it
evaluates the task's test settings on a fixed test set (the same sequences for
every model and seed, so comparisons are paired) and writes
``<out>/<task>/<model>_s<seed>.json`` with provenance (command, commit,
device name, versions, seed, wall time).
"""
from __future__ import annotations

import functools
import json
import math
import os
import time
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from assocmem import validate as V
from . import dag as Dg
from . import data as Dt
from . import mqar as Mq
from . import mqar_models as Mm
from . import models as Mo

from . import curriculum as Cu
from .names import (CURRICULUM_MODELS, DAG_MODELS, MQAR_BACKBONES, MQAR_MODELS, STRESS_MODELS, STRESS_NS, TASKS,  # noqa: F401
                    is_curriculum_model)
EVAL_SEED = 20240611          # the fixed test set (independent of the training seed)


# ---------------------------------------------------------------------------
# task definitions
# ---------------------------------------------------------------------------
@dataclass
class TaskDef:
    name: str
    models: tuple
    steps: int
    batch_size: int
    source: str
    train_settings: dict = field(default_factory=dict)
    test_settings: dict = field(default_factory=dict)
    quick_test_settings: dict = field(default_factory=dict)


CURRICULUM_STEPS = 5000      # ours (Fig. 6's step budget is not in the notes): room for 4 stages
MQAR_VAL_SIZE = 1000         # validation sequences per MQAR configuration (ours; seed 2, test 1, pool 0)
CURRICULUM_BETA_MAX = 2.0    # ours: β = 2 sigmoid(.) on unit keys (β < 1 does not learn; models.AttentionLayer)

TASK_DEFS = {
    "collision_recall": TaskDef(
        "collision_recall", Mo.MIXERS, 2500, 256, "BL §4.1, App. E.5, pp.23-26; Fig. 3(c,d)",
        train_settings={"n_b": 4, "n_f": [1, 2, 4, 8], "rho_range": [0.60, 0.80]},
        test_settings={"writes": {"rho": 0.80, "n_f": [1, 2, 4, 8, 16, 32, 64, 128, 256]},
                       "overlap": {"n_f": 64, "rho": [0.60, 0.70, 0.80, 0.85, 0.90, 0.95]},
                       "n_seqs": 256},
        quick_test_settings={"writes": {"rho": 0.80, "n_f": [1, 8, 16]},
                             "overlap": {"n_f": 8, "rho": [0.70, 0.95]}, "n_seqs": 8}),
    "random_keys": TaskDef(
        "random_keys", Mo.MIXERS, 2500, 256, "BL App. E.5.4, pp.25-26; Fig. 7",
        train_settings={"n": [16, 32, 48, 64], "D": 16},
        test_settings={"n": [16, 32, 48, 64, 96, 128, 192, 256], "n_seqs": 512},
        quick_test_settings={"n": [16, 96], "n_seqs": 8}),
    "swap_tracking": TaskDef(
        "swap_tracking", Mo.SWAP_MODELS + STRESS_MODELS + CURRICULUM_MODELS, 2000, 256,
        "AM §3.2, Figs. 3-6, pp.18-20",
        train_settings={"n_elems": 5, "length": 16},
        test_settings={"n_seqs": 2048},
        quick_test_settings={"n_seqs": 8}),
    "dag_reachability": TaskDef(
        "dag_reachability", DAG_MODELS, 5000, 256, "AM §3.3, Fig. 7, pp.20-21",
        train_settings={"n_nodes": Dg.N_NODES},
        test_settings={"n_seqs": 2048},
        quick_test_settings={"n_seqs": 16}),
    "mqar": TaskDef(
        "mqar", MQAR_MODELS, 0, 256, "BL §4.2, App. F, Fig. 4",     # steps: epochs x pool / batch
        train_settings={"vocab": Mq.VOCAB, "pools": dict(Mq.POOL_SIZES)},
        test_settings={"n_seqs": Mq.TEST_SIZE, "n_val": MQAR_VAL_SIZE},
        quick_test_settings={"n_seqs": 16, "n_val": 8}),
}


# ---------------------------------------------------------------------------
# protocol: every choice the papers leave open, named, defaulted and recorded
# ---------------------------------------------------------------------------
def _bool(name, v):
    if isinstance(v, bool):
        return v
    t = str(v).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"protocol {name} must be true or false (got {v!r})")


def _pos_float_or_none(name, v):
    if v is None or str(v).strip().lower() in ("none", "learned", ""):
        return None
    return _pos_float(name, v)


def _pos_float(name, v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"protocol {name} must be a number (got {v!r})") from None
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"protocol {name} must be a finite number > 0 (got {v!r})")
    return x


def _unit_frac(name, v):
    x = _pos_float(name, v)
    if x > 1:
        raise ValueError(f"protocol {name} must lie in (0, 1] (got {v!r})")
    return x


def _noise_init(name, v):
    x = _pos_float(name, v)
    if x > 100:
        raise ValueError(f"protocol {name} must lie in (0, 100] (got {v!r})")
    return x


def _int_in(lo, hi):
    def conv(name, v):
        try:
            x = int(str(v))
        except ValueError:
            raise ValueError(f"protocol {name} must be an integer (got {v!r})") from None
        if not lo <= x <= hi:
            raise ValueError(f"protocol {name} must lie in [{lo}, {hi}] (got {x})")
        return x
    return conv


def _choice(*options):
    def conv(name, v):
        if v not in options:
            raise ValueError(f"protocol {name} must be one of {', '.join(options)} (got {v!r})")
        return v
    return conv


def _int_choice(*options):
    def conv(name, v):
        x = int(v) if not isinstance(v, bool) and str(v).strip().lstrip("-").isdigit() else None
        if x not in options:
            raise ValueError(f"protocol {name} must be one of {', '.join(map(str, options))} (got {v!r})")
        return x
    return conv


def _int_list(name, v):
    items = v if isinstance(v, (list, tuple)) else str(v).replace(";", ",").split(",")
    try:
        out = [int(x) for x in items if str(x).strip()]
    except ValueError:
        raise ValueError(f"protocol {name} must be comma-separated integers (got {v!r})") from None
    if not out or any(x < 8 or x > 1024 for x in out):
        raise ValueError(f"protocol {name} needs integers in [8, 1024] (got {v!r})")
    return out


_ADDRESS_PROTOCOL = {
    # name: (default, converter, what it means)
    "queries_write": (False, _bool, "query tokens also write to the memory (ours before issue 14; the BL "
                                    "design model's read-out is not an observation, so the default is false)"),
    "p0": (1.0, _pos_float, "prior covariance scale P0 = p0 I of the BL-family mixers"),
    "gates": ("token", _choice("token", "head"), "noise/step gates per token from the hidden state (ours) or "
                                                  "one learned constant per head (the paper's main text)"),
    "reset_l2": (None, _pos_float_or_none, "reset mixer's process noise: learned (None) or fixed (App. E.5.5: 0.05)"),
    "n_layers": (2, _int_in(1, 8), "mixer layers of the backbone (paper: 2)"),
    "bl_decay": (False, _bool, "BL mixer with a learned per-token decay alpha = sigmoid(.) (paper: A = I)"),
}
PROTOCOL = {
    "collision_recall": {**_ADDRESS_PROTOCOL,
                         "opening_rounds": (0, _int_in(0, 4), "rounds writing every identity once before the "
                                                              "target rounds (the App. E.4 run opens with two)")},
    "random_keys": {**_ADDRESS_PROTOCOL,
                    "train_n": ([16, 32, 48, 64], _int_list, "numbers of writes per training sequence (paper: "
                                                             "16, 32, 48, 64, i.e. n/D <= 4)")},
    "swap_tracking": {
        "queries_write": (True, _bool, "fixed: every token is a swap, which must write before it is read"),
        "d_model": (128, _int_in(8, 1024), "width of the Transformer / DeltaFormer models"),
        "stress_keys": ("random", _choice("random", "rounding_exact"),
                        "stress test keys: random unit vectors (ours) or a construction on which two-decimal "
                        "rounding acts exactly (issue 14)"),
        "stress_read": ("softmax", _choice("softmax", "linear"), "stress test read-out kappa2"),
        "curriculum_keys": ("unit", _choice("unit", "raw"),
                            "curriculum DeltaFormer: unit keys with beta in (0, 2) (ours) or raw keys with "
                            "beta in (0, 1) (the paper-like parameterisation)"),
        "supervision": ("every", _choice("every", "last"),
                        "plain swap models (Figs. 3-4): a label after every swap (ours) or at the last token "
                        "only (the notes: 'predict the element at position 1'; which tokens carry the loss is "
                        "not stated); accuracy is measured where the loss is"),
        "pos": ("rope", _choice("rope", "nope"),
                "position encoding of the plain swap Transformers and DeltaFormers: RoPE (ours) or none "
                "(the paper does not say)"),
    },
    "mqar": {
        "queries_write": (False, _bool, "query and filler tokens also write (default: only key and value tokens "
                                        "write, MQARBatch.is_write)"),
        "variant": ("base", _choice(*Mq.VARIANTS), "Base (Fig. 4a), Update (4b) or Block (4c)"),
        "d_model": (128, _int_in(8, 4096), "model width (Fig. 4a's x-axis); the mixer state stays 8,192"),
        "lr": (1e-3, _pos_float, "peak learning rate (the paper picks it per model from a grid by validation "
                                 "accuracy: campaign plan mqar_lr)"),
        "epochs": (40, _int_in(1, 1000), "passes over the pool (as steps: epochs x pool / batch)"),
        "pool_size": (0, _int_in(0, 10_000_000), "training sequences (0: the paper's 100k / 160k / 120k)"),
        "warmup_steps": (1024, _int_in(0, 1_000_000), "linear warm-up, then cosine decay to 0"),
        "gdn_backend": ("auto", _choice("auto", "triton", "torch", "hybrid"),
                        "GDN's core on a GPU: fla's Triton kernels, or fla's chunked torch reference under "
                        "autograd; auto takes Triton unless fla refuses its backward there (Hopper with Triton "
                        ">= 3.4 and < 3.7.1, fla #640: the H200 here) and there the hybrid after its self-check "
                        "passes on the GPU, else the torch reference; hybrid: fla's kernels with the refused "
                        "one in torch (assocmem.gpu.tasks.fla_hybrid)"),
        "wd_exempt": ("none", _choice("none", "marked"),
                      "which parameters AdamW's weight decay skips: none (Zoology's trainer decays every "
                      "parameter; ours so far), or those fla's layers mark _no_weight_decay (GDN's and Mamba2's "
                      "A_log and dt_bias, Mamba2's D), as mamba_ssm's and fla's own trainers leave them: under "
                      "decay Mamba2's A_log and dt_bias drift toward 0 as the decay alone predicts, so its "
                      "memory shortens (docs/tasks_mqar_dag.md); gdn, gdn-conv and mamba2 only"),
        "init": ("torch", _choice("torch", "zoology"),
                 "the model's initialisation: torch's defaults and the mixers' own (ours so far: Embedding "
                 "N(0, 1), Linear uniform), or Zoology's (its model.py _init_weights: Linear and Embedding weights "
                 "N(0, 0.02^2), Linear biases 0, parameters named out_proj / fc2 N(0, (0.02/sqrt(2 n_layers))^2); "
                 "A_log, dt_bias, D, convolutions, norms and BL's gate biases keep their own). The paper does "
                 "not say; the ablation of ours where Mamba2 does not learn (mqar_models.zoology_init_)"),
        "mamba2_core": ("auto", _choice("auto", "layer"),
                        "Mamba2's scan on a GPU: auto takes fla's Triton simple GLA as the SSD scan where its "
                        "self-check against a float64 recursion passes (assocmem.gpu.tasks.fla_mamba2), else "
                        "the layer as fla runs it; layer: always the layer's own path (mamba_ssm's kernels, or "
                        "without them fla's naive chunked SSD in torch). The ablation of our core where Mamba2 "
                        "does not learn"),
        "backbone": ("zoology", _choice(*MQAR_BACKBONES),
                     "the blocks around the two mixer layers: Zoology's MQAR harness as we read it (the paper "
                     "changed Zoology's generator and gives no blocks of its own), a gated short convolution of "
                     "width 3 (its BaseConv) before each mixer and no MLP; or ours before 2 December, pre-norm "
                     "(mixer, MLP) x 2, under which BL memorised its Block pool (docs/tasks_mqar_dag.md); or "
                     "mixers: the two mixer layers alone, no convolution and no MLP (the notes read Fig. 4c as BL "
                     "spanning the key-value gap without a local convolution)"),
        "bl_decay": (False, _bool, "BL mixer dynamics: A = I (ours, as in the collision tasks) or a learned "
                                   "per-token, per-head decay A_t = alpha_t I, alpha_t = sigmoid(.) (GDN's form); "
                                   "the paper's layer has learned structured A_t, its MQAR setting is not given"),
        "bl_heads": (4, _int_choice(1, 2, 4, 8),
                     "BL mixer heads; each head's key and value sizes the largest D = m inside the 8,192 state "
                     "(Dm + D^2 per head: 1 head 64, 2 heads 45, 4 heads 32, 8 heads 22); the paper's split is "
                     "not given (the notes: its Table 5 is misaligned)"),
        "bl_noise_init": (0.05, _noise_init,
                          "the value at which BL's per-token noise gates start, l^2 = r^2 (the gate's bias is "
                          "softplus^-1 of it, its weights small): 0.05 as in BL App. E.4's collision setting; the "
                          "paper's MQAR initialisation is not given"),
        # the generator's open choices (MQARConfig's fields, docs/tasks_mqar_dag.md), for the training pool,
        # the test and the validation sets alike
        "query_order": ("zoology", _choice("zoology", "shuffled"),
                        "which key each drawn query slot asks: Zoology's (the i-th slot the i-th written key, so "
                        "early keys tend to be asked early) or a random key per slot"),
        "filler": ("pad", _choice("pad", "random"),
                   "the tokens between queries: one PAD token, or ids uniform over the vocabulary (Zoology's "
                   "random_non_queries; never labelled)"),
        "distinct_values": (True, _bool, "all keys and values of a sequence distinct ids (Zoology draws values "
                                         "without replacement), or each value uniform over the non-key ids"),
        "update_keys": ("replace", _choice("replace", "distinct"),
                        "Update only: each update re-assigns a key drawn among all P (a key may be updated "
                        "several times), or U <= P different keys"),
        "update_order": ("after", _choice("after", "interleaved"),
                         "Update only: the initial pairs first, then the updates (A->4, B->5, A->4*: the notes' "
                         "example), or the P + U writes in a random order"),
        "update_train_frac": (1.0, _unit_frac,
                              "Update only: the most updates a training sequence carries, as a fraction of its "
                              "P pairs (U spread evenly over 0..floor(frac P) in each half of the mixture: 0..4 "
                              "and 0..16 by default); the notes say 'mixed update counts' without their range. "
                              "Below 1 the test's largest counts (16 updates) lie beyond training: whether a "
                              "short convolution extrapolates is then part of the reading"),
        "bl_op": ("fused", _choice("fused", "chunk"),
                  "BL's op on a GPU: fused_recurrent_bl (token by token) or chunk_bl (chunks of 16); both "
                  "compute the same filter exactly (checked against numerics), so this is an implementation "
                  "choice: recorded in the protocol block and model_config, left out of the run's tag"),
    },
    "dag_reachability": {
        "queries_write": (True, _bool, "fixed: attention models, every token is in the context (the read-out "
                                       "token has no value to write)"),
        "d_model": (128, _int_in(8, 1024), "width of the Transformer / DeltaFormer models"),
        "root_position": ("first", _choice("first", "last"), "the ROOT token before the edges or after them"),
        "family": ("mixed", _choice("mixed", "recursive", "narrow"),
                   "tree family: random recursive, deep/narrow (parent among the last 2), or one of the two "
                   "per sequence"),
        "edge_order": ("topological", _choice("topological", "shuffled"), "order of the edge tokens"),
        "edge_tokens": ("pair", _choice("single", "pair"),
                        "two node tokens NODE(u) NODE(v) sharing the n node embeddings, or one token per edge, "
                        "EDGE(u, v) of n^2 ids (the notes do not give the tokenisation; with one-token edges no "
                        "model learned in 5,000 steps: docs/tasks_mqar_dag.md)"),
        "output": ("multilabel", _choice("multilabel", "per_node"),
                   "the read-out: the n node logits at one final ANS token (binary cross-entropy), or a query "
                   "token NODE(x) per node in shuffled order, each answered reachable or not (two-class "
                   "cross-entropy; the notes do not give the format)"),
        "edge_embedding": ("table", _choice("table", "factored"),
                           "one-token edges only: one embedding row per edge id EDGE(u, v), or E_from[u] + "
                           "E_to[v] (both endpoints in one token from 2n rows; ours, to test whether the "
                           "two-token edges keep a 1-layer DeltaFormer from seeing an edge in one token)"),
        "deltaformer_write": ("key", _choice("key", "query"),
                              "what kappa1 compares the earlier keys with: the key itself (w_t = k_t, as in the "
                              "swap theorem) or a write query w_t of its own projection (AM's general DeltaFormer; "
                              "reachability's parent/child relation is asymmetric, which kappa1(k_i, k_t) on "
                              "one key cannot express)"),
        "deltaformer_keys": ("unit", _choice("unit", "raw"),
                             "the DeltaFormers' kappa1 keys: unit keys with beta in (0, 2), as the swap "
                             "curriculum's (ours), or raw keys with beta in (0, 1) (with two-token edges, 64 "
                             "tokens, raw keys diverged to NaN within 75-1,250 steps)"),
        "lr": (3e-4, _pos_float, "AdamW learning rate (the BL tasks' 3e-4; the notes do not give AM's)"),
        "n_heads": (4, _int_choice(1, 2, 4, 8),
                    "attention heads of every layer, each of d_model / n_heads dimensions (32 by default; the "
                    "notes do not give the head layout; AM's SNR argument, Sec. 2.1 and Fig. 2, is that linear "
                    "and ReLU kernels' retrieval noise falls with the head dimension)"),
        "deltaformer_beta": ("positive", _choice("positive", "signed"),
                             "the DeltaFormers' write strength: beta in (0, beta_max) by a sigmoid (ours, as the "
                             "swap curriculum's) or in (-beta_max, beta_max) by a tanh (the notes give no range). "
                             "With kappa1 >= 0 (ReLU, exp, softmax) and beta > 0 an earlier u_i can only be "
                             "subtracted from u_t; composing a path adds the parent's"),
    },
}


# options that one kind of model takes alone (resolve_protocol refuses them for the others): the others run the
# same experiment with them at their defaults, under the tag :func:`tag_for_model` gives
MODEL_ONLY_OPTIONS = {("dag_reachability", "deltaformer_keys"): ("deltaformer-", "the DeltaFormers"),
                      ("dag_reachability", "deltaformer_write"): ("deltaformer-", "the DeltaFormers"),
                      ("dag_reachability", "deltaformer_beta"): ("deltaformer-", "the DeltaFormers")}


def tag_for_model(task: str, tag: str, model: str) -> str:
    """The tag under which ``model`` runs the experiment of ``tag``: its options that do not apply to ``model``
    (:data:`MODEL_ONLY_OPTIONS`) left at their defaults, e.g. a Transformer's run of the DeltaFormers' write-query
    ablation is the same edges and read-out without it."""
    def applies(part):
        prefix = MODEL_ONLY_OPTIONS.get((task, part.split("-", 1)[0]), (model, ""))[0]
        return model.startswith(prefix)

    return "__".join(p for p in tag.split("__") if p and applies(p))


def resolve_protocol(task: str, overrides: Optional[dict] = None, model: Optional[str] = None) -> dict:
    """The full protocol of a run: the task's defaults with ``overrides`` applied and checked.

    ``overrides`` maps option names to values (or their text, as the CLI's
    ``--protocol KEY=VALUE`` gives them).  Unknown names and bad values raise a
    ``ValueError`` naming the option; with ``model``, so do options that do not
    apply to that model.
    """
    spec = PROTOCOL[V.choice("task", task, TASKS)]
    out = {k: d for k, (d, _, _) in spec.items()}
    for k, v in (overrides or {}).items():
        if k not in spec:
            raise ValueError(f"protocol: {task} has no option {k!r} (options: {', '.join(spec)})")
        out[k] = spec[k][1](k, v)
    if task == "swap_tracking" and not out["queries_write"]:
        raise ValueError("protocol queries_write: swap tracking's query tokens are the swaps themselves; "
                         "they must write")
    if task == "swap_tracking" and (out["supervision"] != "every" or out["pos"] != "rope") and model is not None \
            and not (model.startswith("transformer-") or model.startswith("deltaformer-")):
        bad = "supervision" if out["supervision"] != "every" else "pos"
        raise ValueError(f"protocol {bad}: applies to the plain swap models (transformer-*, deltaformer-*), "
                         f"not {model!r}")
    for opt in ("update_keys", "update_order", "update_train_frac"):
        if task == "mqar" and out[opt] != spec[opt][0] and out["variant"] != "update":
            raise ValueError(f"protocol {opt}: applies to variant=update, not {out['variant']!r}")
    for opt in ("bl_op", "bl_decay", "bl_heads", "bl_noise_init"):
        if task == "mqar" and out[opt] != spec[opt][0] and model is not None and model != "bl":
            raise ValueError(f"protocol {opt}: applies to bl, not {model!r}")
    if task == "mqar" and out["gdn_backend"] != "auto" and model is not None and model not in ("gdn", "gdn-conv"):
        raise ValueError(f"protocol gdn_backend: applies to gdn and gdn-conv, not {model!r}")
    if task == "mqar" and out["wd_exempt"] != "none" and model is not None and model not in ("gdn", "gdn-conv",
                                                                                            "mamba2"):
        raise ValueError(f"protocol wd_exempt: applies to gdn, gdn-conv and mamba2 (fla's layers, which mark "
                         f"parameters _no_weight_decay), not {model!r}")
    if task == "mqar" and out["mamba2_core"] != "auto" and model is not None and model != "mamba2":
        raise ValueError(f"protocol mamba2_core: applies to mamba2, not {model!r}")
    for (t, opt), (prefix, who) in MODEL_ONLY_OPTIONS.items():
        if task == t and out[opt] != spec[opt][0] and model is not None and not model.startswith(prefix):
            raise ValueError(f"protocol {opt}: applies to {who}, not {model!r}")
    if task == "dag_reachability" and out["edge_embedding"] != "table" and out["edge_tokens"] != "single":
        raise ValueError("protocol edge_embedding: applies to one-token edges (edge_tokens=single)")
    if task == "dag_reachability" and out["d_model"] % out["n_heads"]:
        raise ValueError(f"protocol n_heads: {out['n_heads']} heads do not divide d_model = {out['d_model']}")
    if task == "dag_reachability" and not out["queries_write"]:
        raise ValueError("protocol queries_write: the reachability models are attention models with no "
                         "separate write; it is fixed at true")
    return out


MQAR_GENERATOR_OPTIONS = ("query_order", "filler", "distinct_values", "update_keys", "update_order")


def mqar_pool_size(protocol: dict) -> int:
    return protocol["pool_size"] or Mq.POOL_SIZES[protocol["variant"]]


def mqar_generator(protocol: dict) -> dict:
    """The generator's choices of a resolved MQAR protocol, as ``MQARConfig`` fields (a result recorded
    before they were options took the defaults, which are MQARConfig's own)."""
    spec = PROTOCOL["mqar"]
    return {k: protocol.get(k, spec[k][0]) for k in MQAR_GENERATOR_OPTIONS}


@functools.lru_cache(maxsize=2)
def _mqar_pool_cached(variant: str, n: int, generator: tuple, update_frac: float = 1.0):
    return Mq.train_pool(variant, seed=0, n=n, update_frac=update_frac, **dict(generator))


def _mqar_pool(protocol: dict):
    """The fixed training pool (seed 0, the same for every model and run seed; built once per process;
    Update's mixture up to ``update_train_frac`` of P updates)."""
    return _mqar_pool_cached(protocol["variant"], mqar_pool_size(protocol),
                             tuple(sorted(mqar_generator(protocol).items())),
                             float(protocol.get("update_train_frac", PROTOCOL["mqar"]["update_train_frac"][0])))


def optimizer_settings(task: str, protocol: dict) -> dict:
    """AdamW settings: the BL tasks' (App. E.5) or MQAR's (App. F: β = (0.9, 0.95), wd 0.1, warm-up + cosine)."""
    if task == "mqar":
        return {"name": "AdamW", "lr": protocol["lr"], "betas": [0.9, 0.95], "weight_decay": 0.1, "clip": 1.0,
                "schedule": f"linear warm-up {protocol['warmup_steps']} steps, then cosine to 0"}
    return {"name": "AdamW", "lr": protocol.get("lr", 3e-4), "weight_decay": 1e-4, "clip": 1.0}


def optimizer_groups(net: torch.nn.Module, task: str, protocol: dict) -> tuple[list, list]:
    """AdamW's parameter groups and the names of the parameters its weight decay skips: one group for
    every parameter, or with ``wd_exempt=marked`` (MQAR) a second one at weight decay 0 holding those
    the layers mark ``_no_weight_decay``."""
    params = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    if task != "mqar" or protocol.get("wd_exempt", "none") == "none":
        return [{"params": [p for _, p in params]}], []
    skip = [n for n, p in params if getattr(p, "_no_weight_decay", False)]
    if not skip:
        raise ValueError("protocol wd_exempt=marked: the model marks no parameter _no_weight_decay")
    keep = [p for n, p in params if n not in skip]
    return [{"params": keep}, {"params": [p for n, p in params if n in skip], "weight_decay": 0.0}], skip


def decay_only_factor(step: int, steps: int, lr: float, warmup: int, weight_decay: float) -> float:
    """The factor AdamW's decoupled weight decay alone leaves on a parameter after ``step`` steps of the
    MQAR schedule (:func:`lr_factor`): ``prod_t (1 - lr_t · wd)``, i.e. where the parameter would be had
    its gradient been zero (Adam's step of a zero gradient is zero)."""
    f = 1.0
    for t in range(V.count("step", step, 0)):
        f *= 1.0 - lr * lr_factor(t, steps, warmup) * weight_decay
    return f


def lr_factor(step: int, steps: int, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``steps``."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    span = max(1, steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / span)))


def dag_config(protocol: dict) -> "Dg.DAGConfig":
    """The reachability generator's configuration for a resolved protocol."""
    return Dg.DAGConfig(root_position=protocol["root_position"], family=protocol["family"],
                        edge_order=protocol["edge_order"], edge_tokens=protocol["edge_tokens"],
                        output=protocol.get("output", "multilabel"))


def result_tag(task: str, result: dict) -> Optional[str]:
    """The protocol tag of a saved result ('' = the default protocol); None if it records no protocol."""
    pr = result.get("protocol")
    if pr is None:
        return None
    return protocol_tag(task, resolve_protocol(task, {k: v for k, v in pr.items() if k in PROTOCOL[task]}))


# options that choose how a run is computed, not what is computed (exact alternatives, checked
# against each other): recorded in the protocol block, left out of the tag, so runs under either
# are the same experiment
IMPLEMENTATION_OPTIONS = {("mqar", "bl_op")}


def protocol_tag(task: str, protocol: dict) -> str:
    """The options that differ from the task's defaults, as a file-name tag ('' for the default protocol);
    the implementation options (:data:`IMPLEMENTATION_OPTIONS`) are left out."""
    spec = PROTOCOL[task]
    parts = []
    for k, (d, _, _) in spec.items():
        if (task, k) in IMPLEMENTATION_OPTIONS:
            continue
        v = protocol.get(k, d)
        if v != d:
            txt = ",".join(str(x) for x in v) if isinstance(v, list) else str(v).lower()
            parts.append(f"{k}-{txt.replace(',', '.')}")
    return "__".join(parts)


def task_def(task: str) -> TaskDef:
    V.choice("task", task, TASKS)
    return TASK_DEFS[task]


def build_model(task: str, model: str, protocol: Optional[dict] = None) -> torch.nn.Module:
    td = task_def(task)
    if model not in td.models:
        raise ValueError(f"model for {task} must be one of {', '.join(td.models)} (got {model!r})")
    pr = resolve_protocol(task, None) if protocol is None else protocol
    # a protocol recorded before an option existed took its default, read from the table
    opt = lambda k: pr.get(k, PROTOCOL[task][k][0])  # noqa: E731
    if task in ("collision_recall", "random_keys"):
        d_in, n_cls = ((Dt.COLLISION_FEATURES, 2 * Dt.COLLISION_PAIRS) if task == "collision_recall"
                       else (Dt.RK_FEATURES, Dt.RK_LABELS))
        return Mo.AddressBackbone(d_in, n_cls, model, n_layers=pr["n_layers"], p0=pr["p0"], gates=pr["gates"],
                                  reset_l2=pr["reset_l2"], decay=pr["bl_decay"])
    if task == "mqar":
        from .mqar_models import MQARModel

        cfg = Mq.train_configs(pr["variant"])[0][0]
        kw = {}
        if model in ("gdn", "gdn-conv"):
            kw = {"backend": opt("gdn_backend")}
        elif model == "mamba2":
            kw = {"core": opt("mamba2_core")}
        elif model == "bl":
            kw = {"op": opt("bl_op"), "decay": opt("bl_decay"), "n_heads": opt("bl_heads"),
                  "noise_init": opt("bl_noise_init")}
        return MQARModel(cfg.n_tokens, Mq.VOCAB, d_model=pr["d_model"], n_layers=2, mixer=model,
                         backbone=pr["backbone"], init=opt("init"), **kw)
    if task == "dag_reachability":
        cfg = dag_config(pr)
        fact = cfg.n_nodes if opt("edge_embedding") == "factored" else 0
        n_out = 2 if cfg.output == "per_node" else cfg.n_nodes
        if model.startswith("deltaformer-"):
            # the one exception to the table: runs from before the option existed used raw keys
            unit = pr.get("deltaformer_keys", "raw") == "unit"
            return Mo.SequenceModel(Dg.dag_vocab(cfg).size, n_out, n_layers=1, d_model=pr["d_model"],
                                    kappa1=model.split("-", 1)[1], key_norm=unit,
                                    beta_max=CURRICULUM_BETA_MAX if unit else 1.0, factored_edges=fact,
                                    write_query=opt("deltaformer_write") == "query", n_heads=opt("n_heads"),
                                    signed_beta=opt("deltaformer_beta") == "signed")
        return Mo.SequenceModel(Dg.dag_vocab(cfg).size, n_out, n_layers=int(model.split("-")[1]),
                                d_model=pr["d_model"], factored_edges=fact, n_heads=opt("n_heads"))
    if model.startswith("stress-"):
        _, kappa, n = model.split("-")
        return Mo.FixedKeySwapModel(int(n), 128, kappa1=kappa, kappa2=pr["stress_read"], keys=pr["stress_keys"])
    if is_curriculum_model(model):
        # a 1-layer DeltaFormer (κ2 softmax); "nope": no position encoding anywhere; unit keys in κ1
        # (lengths up to 256: with raw keys the u-recursion overflows at init) and β ∈ (0, 2)
        # (with unit keys β < 1 cannot learn the swaps); see AttentionLayer
        _, kappa, pos = model.split("-")
        unit = pr["curriculum_keys"] == "unit"
        return Mo.swap_model(f"deltaformer-{kappa}", pos=pos, key_norm=unit,
                             beta_max=CURRICULUM_BETA_MAX if unit else 1.0, d_model=pr["d_model"])
    return Mo.swap_model(model, d_model=pr["d_model"], pos=pr["pos"])


# ---------------------------------------------------------------------------
# batches and losses
# ---------------------------------------------------------------------------
def _to(batch, device):
    return type(batch)(*(x.to(device, non_blocking=True) for x in batch))


def sample_train(task: str, model: str, batch_size: int, gen: torch.Generator, length: Optional[int] = None,
                 protocol: Optional[dict] = None):
    """One training batch; ``length`` overrides the swap-tracking length (the curriculum's current stage)."""
    td = TASK_DEFS[task]
    pr = resolve_protocol(task, None) if protocol is None else protocol
    if task == "collision_recall":
        nfs = td.train_settings["n_f"]
        n_f = nfs[int(torch.randint(0, len(nfs), (1,), generator=gen))]
        return Dt.collision_batch(batch_size, n_f=n_f, n_b=td.train_settings["n_b"],
                                  rho_range=tuple(td.train_settings["rho_range"]), n_open=pr["opening_rounds"],
                                  generator=gen)
    if task == "random_keys":
        ns = pr["train_n"]
        n = ns[int(torch.randint(0, len(ns), (1,), generator=gen))]
        return Dt.random_keys_batch(batch_size, n=n, generator=gen)
    if task == "dag_reachability":
        return Dg.dag_batch(dag_config(pr), batch_size, generator=gen)
    if task == "mqar":
        # uniform draws from the fixed pool (ours: with replacement, rather than epoch permutations)
        pool = _mqar_pool(pr)
        return pool.batch(torch.randint(0, len(pool), (batch_size,), generator=gen))
    if model.startswith("stress-"):
        return Dt.swap_stress_batch(batch_size, n=int(model.split("-")[2]), generator=gen)
    b = Dt.swap_batch(batch_size, n_elems=td.train_settings["n_elems"],
                      length=td.train_settings["length"] if length is None else length, generator=gen)
    return _supervise(b, pr)


def _supervise(b: "Dt.SwapBatch", pr: dict) -> "Dt.SwapBatch":
    """The plain swap batch with labels where the protocol puts the loss (``supervision``)."""
    if pr.get("supervision", "every") == "every":
        return b
    labels = b.labels.clone()
    labels[:, :-1] = Dt.IGNORE
    return b._replace(labels=labels)


def forward(net, task: str, batch, protocol: Optional[dict] = None):
    """Logits ``[B, T, C]`` and labels ``[B, T]`` for any task batch (MQAR: ``[N, C]`` and ``[N]`` at
    its ``N`` labelled positions).

    BL tasks: unless the protocol's ``queries_write`` is true, the query tokens do
    not write (``writes = ~is_query``; the WRITE/QUERY flag of the input).
    """
    if task in ("collision_recall", "random_keys"):
        qw = False if protocol is None else protocol["queries_write"]
        return net(batch.x, batch.keys, None if qw else ~batch.is_query), batch.labels
    if task == "dag_reachability":
        if (protocol or {}).get("output") == "per_node":
            # per-node read-out: two logits at each NODE(x) query token against its 0/1 label
            return net(batch.tokens), batch.labels
        # multilabel read-out: the n logits at the ANS token against the reachable set
        return net(batch.tokens)[batch.is_query], batch.targets
    if task == "mqar":
        # logits only at the labelled (query) positions: [N, values] against labels [N]
        qw = False if protocol is None else protocol["queries_write"]
        at = batch.labels != Mq.IGNORE
        return net(batch.tokens, None if qw else batch.is_write, at=at), batch.labels[at]
    if isinstance(batch, Dt.SwapStressBatch):
        return net(batch.pos_a, batch.pos_b, batch.elem), batch.labels
    return net(batch.tokens), batch.labels


def loss_and_acc(logits, labels):
    """Cross-entropy over labelled tokens (``labels != -100``) and their accuracy.

    Bool ``labels`` (reachability's multi-hot sets, ``[B, n]`` against logits ``[B, n]``):
    binary cross-entropy per node, and the per-node accuracy.
    """
    if labels.dtype == torch.bool:
        lg = logits.float()
        loss = F.binary_cross_entropy_with_logits(lg, labels.float())
        return loss, ((lg > 0) == labels).float().mean()
    mask = labels != Dt.IGNORE
    lg = logits[mask].float()
    lb = labels[mask]
    loss = F.cross_entropy(lg, lb)
    acc = (lg.argmax(-1) == lb).float().mean()
    return loss, acc


# ---------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------
@torch.no_grad()
def _batched(net, task, make, n_seqs: int, chunk: int, device, protocol: Optional[dict] = None):
    """Run ``make(b, gen)`` batches (fixed test generator) and concatenate per-token outputs."""
    gen = torch.Generator().manual_seed(EVAL_SEED)
    outs = []
    done = 0
    while done < n_seqs:
        b = min(chunk, n_seqs - done)
        batch = make(b, gen)
        logits, _ = forward(net, task, _to(batch, device), protocol)
        outs.append((batch, logits.float().cpu()))
        done += b
    return outs


def evaluate(net, task: str, model: str, settings: dict, device, chunk: int = 64,
             protocol: Optional[dict] = None) -> dict:
    net.eval()
    pr = resolve_protocol(task, None) if protocol is None else protocol
    try:
        if task == "collision_recall":
            return _eval_collision(net, settings, device, chunk, pr)
        if task == "random_keys":
            return _eval_random_keys(net, settings, device, chunk, pr)
        if task == "dag_reachability":
            return _eval_dag(net, settings, device, chunk, pr)
        if task == "mqar":
            return _eval_mqar(net, settings, device, chunk, pr)
        return _eval_swap(net, model, settings, device, chunk, pr)
    finally:
        net.train()


def collision_metrics(batch: Dt.CollisionBatch, logits: torch.Tensor) -> dict:
    """Accuracy (targets, distractors, all queries) and the target margin.

    Margin at a target query (BL Eq. 20, App. E.5.5): with the full-label
    softmax ``p``, ``Δ = p(v_target) − p(v_distractor)``; ``Δ > 0`` means the
    target's own value wins over the colliding distractor's.
    """
    p = torch.softmax(logits.double(), -1)
    pred = logits.argmax(-1)
    q, tgt = batch.is_query, batch.is_target
    dis = q & ~tgt
    lab = batch.labels.clamp_min(0)
    par = batch.partner.clamp_min(0)
    correct = (pred == lab)
    p_lab = torch.gather(p, -1, lab[..., None])[..., 0]
    p_par = torch.gather(p, -1, par[..., None])[..., 0]
    margin = (p_lab - p_par)[tgt]
    return {"acc_target": float(correct[tgt].float().mean()),
            "acc_distractor": float(correct[dis].float().mean()),
            "acc_all": float(correct[q].float().mean()),
            "margin_target": float(margin.mean()),
            "margin_target_se": float(margin.std() / math.sqrt(max(margin.numel(), 1))),
            "n_target_queries": int(tgt.sum())}


def _merge(parts):
    """Pool the metrics of sub-batches weighted by their number of target queries."""
    if len(parts) == 1:
        return parts[0]
    w = torch.tensor([p["n_target_queries"] for p in parts], dtype=torch.float64)
    out = {}
    for key in parts[0]:
        if key == "n_target_queries":
            out[key] = int(w.sum())
        elif key == "margin_target_se":
            continue
        else:
            out[key] = float((torch.tensor([p[key] for p in parts], dtype=torch.float64) * w).sum() / w.sum())
    return out


def _eval_collision(net, s, device, chunk, pr):
    res = {"writes": [], "overlap": []}
    n = s["n_seqs"]

    def run(n_f, rho):
        outs = _batched(net, "collision_recall",
                        lambda b, g: Dt.collision_batch(b, n_f=n_f, rho=rho, n_open=pr["opening_rounds"], generator=g),
                        n, chunk, device, pr)
        if len(outs) == 1:
            return collision_metrics(*outs[0])
        # concatenate along the batch for an exact pooled standard error
        B = Dt.CollisionBatch(*(torch.cat([o[0][i] for o in outs]) for i in range(len(outs[0][0]))))
        return collision_metrics(B, torch.cat([o[1] for o in outs]))

    for n_f in s["writes"]["n_f"]:
        res["writes"].append({"n_f": n_f, "rho": s["writes"]["rho"], **run(n_f, s["writes"]["rho"])})
    for rho in s["overlap"]["rho"]:
        res["overlap"].append({"n_f": s["overlap"]["n_f"], "rho": rho, **run(s["overlap"]["n_f"], rho)})
    return res


def calibrated_ce(logits: torch.Tensor, labels: torch.Tensor, n_grid: int = 121) -> dict:
    """Cross-entropy after a fitted temperature (a calibration diagnostic, BL Fig. 7's y-axis).

    The temperature ``τ`` (logits / τ) is chosen on the first half of the rows
    from a log grid over [1/20, 20] and the cross-entropy is reported on the
    second half, so a model whose only fault is over- or under-confidence gets
    its accuracy-limited cross-entropy back.  Returns ``{"temperature", "ce_cal",
    "ce_raw_half"}`` (the last: the uncalibrated CE of the same held-out half).
    """
    n = logits.shape[0]
    if n < 2:
        raise ValueError(f"calibrated_ce needs at least 2 rows (got {n})")
    fit, held = slice(0, n // 2), slice(n // 2, n)
    temps = torch.logspace(math.log10(0.05), math.log10(20.0), n_grid, dtype=torch.float64)
    lg = logits.double()

    def ce(rows, tau):
        return F.cross_entropy(lg[rows] / tau, labels[rows])

    best = min(temps.tolist(), key=lambda t: float(ce(fit, t)))
    return {"temperature": best, "ce_cal": float(ce(held, best)), "ce_raw_half": float(ce(held, 1.0))}


def _eval_random_keys(net, s, device, chunk, pr):
    res = []
    for n in s["n"]:
        outs = _batched(net, "random_keys", lambda b, g: Dt.random_keys_batch(b, n=n, generator=g),
                        s["n_seqs"], chunk, device, pr)
        logits = torch.cat([o[1] for o in outs])
        labels = torch.cat([o[0].labels for o in outs])
        mask = labels != Dt.IGNORE
        ce = F.cross_entropy(logits[mask].double(), labels[mask], reduction="none")
        acc = (logits[mask].argmax(-1) == labels[mask]).double()
        res.append({"n": n, "n_over_D": n / Dt.RK_D, "ce": float(ce.mean()),
                    "ce_se": float(ce.std() / math.sqrt(ce.numel())), "acc": float(acc.mean()),
                    "acc_se": float(acc.std() / math.sqrt(acc.numel())),
                    **calibrated_ce(logits[mask], labels[mask])})
    return {"crowding": res}


@torch.no_grad()
def _eval_mqar(net, s, device, chunk, pr):
    """Query accuracy on each test configuration (3,000 sequences each; seed 1, the pool's is 0) and on
    a validation set of the same configurations (``n_val`` each, seed 2), which is what the learning
    rate is chosen by (the paper: "by validation accuracy"; the test rows are then reported)."""
    out = {}
    for key, seed, n_seqs in (("test", 1, s["n_seqs"]), ("val", 2, s.get("n_val", 0))):
        if not n_seqs:
            continue
        rows = []
        for name, pool in Mq.build_test_sets(pr["variant"], seed=seed, n=n_seqs, **mqar_generator(pr)).items():
            hit = n = 0
            for b in pool.batches(chunk, shuffle=False):
                logits, labels = forward(net, "mqar", _to(b, device), pr)
                mask = labels != Mq.IGNORE
                hit += int((logits.argmax(-1)[mask] == labels[mask]).sum())
                n += int(mask.sum())
            cfg = pool.configs[0]
            rows.append({"config": name, "seq_len": cfg.seq_len, "n_pairs": cfg.n_pairs,
                         "n_updates": cfg.n_updates, "block_size": cfg.block_size, "acc": hit / max(n, 1),
                         "n_queries": n})
        out[key] = rows
    return out


def _eval_dag(net, s, device, chunk, pr):
    """Per-node and exact-set accuracy of the reachable set, overall and per tree family."""
    cfg = dag_config(pr)
    outs = _batched(net, "dag_reachability", lambda b, g: Dg.dag_batch(cfg, b, generator=g),
                    s["n_seqs"], chunk, device, pr)
    if cfg.output == "per_node":                                     # each query's answer, by the name it asks
        node0 = Dg.dag_vocab(cfg).node
        rows = []
        for b, lg in outs:
            names = (b.tokens - node0).masked_fill(~b.is_query, 0)
            yes = (lg.argmax(-1) == 1) & b.is_query
            rows.append(torch.zeros(b.tokens.shape[0], cfg.n_nodes).scatter_add(1, names, yes.float()) > 0)
        pred = torch.cat(rows)
    else:
        pred = torch.cat([o[1] for o in outs]) > 0                   # [N, n]
    tgt = torch.cat([o[0].targets for o in outs])
    fam = torch.cat([o[0].family for o in outs])
    node = (pred == tgt).double()
    exact = node.min(-1).values
    res = {"acc_node": float(node.mean()), "acc_set": float(exact.mean()),
           "acc_set_se": float(exact.std() / math.sqrt(exact.numel())), "by_family": {}}
    for i, f in enumerate(Dg.FAMILIES):
        sel = fam == i
        if bool(sel.any()):
            res["by_family"][f] = {"acc_node": float(node[sel].mean()), "acc_set": float(exact[sel].mean()),
                                   "n": int(sel.sum())}
    return res


def _eval_swap_lengths(net, s, device, chunk):
    """Accuracy at every length in ``s["lengths"]`` (the curriculum's stage lengths; AM Fig. 6)."""
    rows = []
    for L in s["lengths"]:
        outs = _batched(net, "swap_tracking", lambda b, g: Dt.swap_batch(b, length=L, generator=g), s["n_seqs"],
                        chunk, device)
        logits = torch.cat([o[1] for o in outs])
        labels = torch.cat([o[0].labels for o in outs])
        acc = (logits.argmax(-1) == labels).double().flatten()
        rows.append({"length": L, "acc": float(acc.mean()), "acc_se": float(acc.std() / math.sqrt(acc.numel()))})
    # "acc" at the final training length, as for the other swap models
    final = next(r for r in rows if r["length"] == s["train_length"])
    return {"acc": final["acc"], "acc_se": final["acc_se"], "by_length": rows}


def _eval_swap(net, model, s, device, chunk, pr=None):
    if is_curriculum_model(model):
        return _eval_swap_lengths(net, s, device, chunk)
    if model.startswith("stress-"):
        n = int(model.split("-")[2])
        make = lambda b, g: Dt.swap_stress_batch(b, n=n, generator=g)   # noqa: E731
    else:
        make = lambda b, g: _supervise(Dt.swap_batch(b, generator=g), pr or {})   # noqa: E731
    n_seqs = min(s["n_seqs"], 256) if model.startswith("stress-") else s["n_seqs"]
    outs = _batched(net, "swap_tracking", make, n_seqs, min(chunk, 64) if model.startswith("stress-") else chunk,
                    device)
    logits = torch.cat([o[1] for o in outs])
    labels = torch.cat([o[0].labels for o in outs])
    mask = labels != Dt.IGNORE
    acc = (logits.argmax(-1)[mask] == labels[mask]).double()
    per_pos = []
    if not model.startswith("stress-"):
        # per position over the labelled ones (None where the protocol puts no label)
        per_pos = [float((logits[:, t].argmax(-1) == labels[:, t]).double().mean()) if bool(mask[:, t].any())
                   else None for t in range(labels.shape[1])]
    return {"acc": float(acc.mean()), "acc_se": float(acc.std() / math.sqrt(acc.numel())),
            "acc_by_position": per_pos}


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------
def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform
    return f"cpu ({platform.processor() or platform.machine()})"


def model_cores(net: torch.nn.Module) -> list:
    """The distinct compute cores of a model's fla mixers (GDN, Mamba2), as their configs name them
    (``GDNMixer._core``: fla's Triton op, the hybrid, or fla's torch reference): which one ran can
    differ between calls of one run (``gdn_backend=auto`` decides per process), so each training
    segment records it.  Empty for models without fla mixers."""
    from .mqar_models import _FLAMixer

    return sorted({m._core() for m in net.modules() if isinstance(m, _FLAMixer)})


def run_name(model: str, seed: int, tag: str = "") -> str:
    """``MODEL_sSEED`` for the default protocol, ``MODEL__OPTION-VALUE..._sSEED`` otherwise."""
    return f"{model}{'__' + tag if tag else ''}_s{seed}"


# ---------------------------------------------------------------------------
# before a run: checkpoints, output paths, memory (helpers of the CLI and the sweep)
# ---------------------------------------------------------------------------
CKPT_KEYS = ("model", "opt", "gen", "step", "curve")
MAX_STEPS = 10_000_000


def load_checkpoint(path, map_location="cpu") -> dict:
    """A training checkpoint written by :func:`train`, loaded with ``weights_only=True``.

    Checkpoints hold tensors and plain containers only (state dicts, the
    generator state, the curve), so nothing in them can run code on load.  A
    missing file, a file that is not a torch checkpoint, one that needs
    arbitrary unpickling (not one of ours) or one without our keys raises a
    ``ValueError`` naming ``resume`` (one line).
    """
    path = Path(path)
    if not path.is_file():
        raise V.ParamError("resume", f"resume: no checkpoint at {path} (run without --resume to start afresh)")
    try:
        ck = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:     # UnpicklingError, RuntimeError, EOFError, ...: every way a foreign file fails
        raise V.ParamError("resume", f"resume: {path} is not an assocmem checkpoint "
                                     f"(not loaded: {_load_error(exc)})") from None
    if not isinstance(ck, dict) or any(k not in ck for k in CKPT_KEYS):
        raise V.ParamError("resume", f"resume: {path} is not an assocmem checkpoint "
                                     f"(expected the keys {', '.join(CKPT_KEYS)})")
    return ck


def _load_error(exc: Exception) -> str:
    """The informative line of torch.load's (long, multi-paragraph) refusal."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Weights only load failed"):
        # the middle paragraph says what was refused (a global such as posix.system, a bad opcode)
        mid = [ln for ln in lines[1:] if not ln.startswith(("Check the documentation", "Please file an issue"))]
        return ("it is not plain tensors and containers: " + " ".join(mid))[:160]
    return f"{type(exc).__name__}: {' '.join(lines)}"[:160] if lines else type(exc).__name__


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``."""
    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def train_length(task: str, model: str, length: Optional[int] = None, protocol: Optional[dict] = None) -> int:
    """Tokens of the longest training sequence (``length``: the curriculum's last stage; ``protocol``:
    MQAR's variant, whose training lengths differ: Base 512, Update and Block 128)."""
    td = task_def(task)
    if task == "collision_recall":
        return Dt.collision_length(max(td.train_settings["n_f"]), td.train_settings["n_b"])
    if task == "random_keys":
        return max(td.train_settings["n"]) + Dt.RK_QUERIES
    if model.startswith("stress-"):
        return 3 * int(model.split("-")[2])
    if is_curriculum_model(model):
        return int(length if length is not None else Cu.DEFAULT_LENGTHS[-1])
    if task == "dag_reachability":
        return Dg.DAGConfig().length
    if task == "mqar":
        variants = Mq.VARIANTS if protocol is None else (resolve_protocol(task, protocol)["variant"],)
        return max(c.length for v in variants for c in Mq.train_configs(v)[0])
    return td.train_settings["length"]


def train_memory(task: str, model: str, batch_size: Optional[int] = None, length: Optional[int] = None,
                 protocol: Optional[dict] = None) -> float:
    """Rough peak bytes of one training step: ``B T (120 kB + 200 B T)``.

    Measured on CPU (forward + backward + AdamW, one step): 14-108 kB per token
    for the models here at their training lengths, softmax attention growing
    with ``T``; the constants bound those with room.
    """
    td = task_def(task)
    if batch_size is None:
        batch_size = 64 if model.startswith("stress-") else td.batch_size
    T = train_length(task, model, length, protocol)
    return float(batch_size) * T * (120e3 + 200.0 * T)


def memory_limit(device: str) -> float:
    """The limit a run's estimate must stay under: the GPU's memory, or the CPU budget."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return 0.9 * torch.cuda.mem_get_info(torch.device(device))[1]
    from assocmem.budget import memory_limit as cpu_limit
    return cpu_limit()


def check_memory(task: str, model: str, batch_size: Optional[int], length: Optional[int], device: str,
                 protocol: Optional[dict] = None) -> None:
    from assocmem.budget import fmt_bytes

    need, lim = train_memory(task, model, batch_size, length, protocol), memory_limit(device)
    if need > lim:
        # blame the curriculum length when the batch alone would fit
        if length is not None and train_memory(task, model, batch_size, None, protocol) <= lim:
            name, val = "curriculum lengths", length
        else:
            name, val = "batch_size", batch_size if batch_size is not None else "(default)"
        raise V.ParamError(name, f"{name} {val}: a training step would need about {fmt_bytes(need)} of memory, "
                                 f"over the limit of {fmt_bytes(lim)} on {device}")


# One CPU core, forward + backward + AdamW: measured 1-20 us per token for these models (more on a
# loaded machine), plus a per-step overhead; the fast end, so a refusal is never a close call.
CPU_SECONDS_PER_TOKEN, CPU_SECONDS_PER_STEP = 2e-5, 0.02


def default_steps(task: str, model: str, protocol: Optional[dict] = None, batch_size: Optional[int] = None) -> int:
    """The run's length without ``--steps``: the task's (the curriculum's for those models); MQAR's is
    its epochs over the pool, ``epochs x pool / batch``."""
    td = task_def(task)
    if is_curriculum_model(model):
        return CURRICULUM_STEPS
    if task == "mqar":
        pr = resolve_protocol(task, protocol, model)
        return max(1, pr["epochs"] * mqar_pool_size(pr) // (batch_size or td.batch_size))
    return td.steps


def check_time(task: str, model: str, steps: Optional[int], batch_size: Optional[int], length: Optional[int],
               device: str, protocol: Optional[dict] = None, done: int = 0) -> None:
    """On a CPU, refuse a run estimated past the time limit (``ASSOCMEM_MAX_SECONDS``); GPU runs are not
    limited.  ``done``: steps a resumed run's checkpoint already has (only the rest is estimated)."""
    if device.startswith("cuda"):
        return
    from assocmem.budget import fmt_seconds, time_limit

    td = task_def(task)
    n = (steps if steps is not None else default_steps(task, model, protocol, batch_size)) - done
    B = batch_size if batch_size is not None else (64 if model.startswith("stress-") else td.batch_size)
    T = train_length(task, model, length, protocol)
    need, lim = n * (CPU_SECONDS_PER_STEP + CPU_SECONDS_PER_TOKEN * B * T), time_limit()
    if need > lim:
        shown = f"--steps {n + done}{'' if steps is not None else ' (default)'}" \
                + (f" ({n} left after the checkpoint's {done})" if done else "") + f", --batch-size {B}" \
                f"{'' if batch_size is not None else ' (default)'}"
        raise V.ParamError("steps", f"{shown}: training on the CPU would take about {fmt_seconds(need)} "
                                    f"({T} tokens a sequence), over the limit of {fmt_seconds(lim)} "
                                    f"(ASSOCMEM_MAX_SECONDS raises it; give fewer --steps or a smaller --batch-size)")


def preflight(task: str, model: str, *, seed: int = 0, steps: Optional[int] = None,
              batch_size: Optional[int] = None, device: str = "cpu", out="runs", resume: bool = False,
              force: bool = False, length: Optional[int] = None, protocol: Optional[dict] = None) -> None:
    """Everything a run can be refused for, before it starts: model, device,
    memory, the output folder, an existing result (``force`` overwrites), the
    checkpoint of ``resume`` (ours, and not past ``steps``)."""
    from assocmem.outputs import output_dir

    td = task_def(task)
    if model not in td.models:
        raise V.ParamError("model", f"model for {task} must be one of {', '.join(td.models)} (got {model!r})")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise V.ParamError("device", "device: cuda requested but torch sees no GPU (use --device cpu or auto)")
    if task == "mqar" and model != "bl":
        from .mqar_models import require_fla
        require_fla(model)
    check_memory(task, model, batch_size, length, device, protocol)
    output_dir("--out", out)
    name = run_name(model, seed, protocol_tag(task, resolve_protocol(task, protocol)))
    res = Path(out) / task / f"{name}.json"
    if res.exists() and not force:
        raise V.ParamError("force", f"--out: the result {res} exists; use --force to overwrite it "
                                    f"(or choose another --out or --seed)")
    if resume:
        ck = load_checkpoint(Path(out) / task / f"{name}.ckpt.pt")
        total = steps if steps is not None else default_steps(task, model, protocol, batch_size)
        if int(ck["step"]) > total:
            raise V.ParamError("steps", f"steps {total} is below the checkpoint's step {int(ck['step'])} "
                                        f"(give --steps >= {int(ck['step'])})")
    # a resumed run is estimated on the steps it has left
    check_time(task, model, steps, batch_size, length, device, protocol, int(ck["step"]) if resume else 0)


def train(task: str, model: str, *, seed: int = 0, steps: Optional[int] = None, batch_size: Optional[int] = None,
          device: str = "cuda", out: str | Path = "runs", resume: bool = False, eval_mode: str = "auto",
          ckpt_every: int = 500, log_every: int = 25, progress: bool = True,
          eval_chunk: Optional[int] = None, curriculum: Optional[Cu.CurriculumSchedule] = None,
          protocol: Optional[dict] = None) -> dict:
    """Train one model on one task and write its JSON result; returns the result dict.

    ``protocol``: overrides of the task's protocol options (:data:`PROTOCOL`,
    e.g. ``{"queries_write": True}``); the full resolved protocol is recorded in
    the result's ``protocol`` block, and a non-default one tags the file name
    (:func:`run_name`).

    ``curriculum``: the length schedule of a ``curriculum-*``/``direct-*`` swap
    model (default :func:`curriculum.schedule_for`, the paper's 32 → 256).
    """
    td = task_def(task)
    if model not in td.models:
        raise ValueError(f"model for {task} must be one of {', '.join(td.models)} (got {model!r})")
    seed = V.count("seed", seed, 0)
    pr = resolve_protocol(task, protocol, model)
    is_cur = is_curriculum_model(model)
    if curriculum is not None and not is_cur:
        raise ValueError(f"curriculum: only the curriculum-*/direct-* swap models take a schedule (got {model!r})")
    sched = (curriculum if curriculum is not None else Cu.schedule_for(model)) if is_cur else None
    if steps is None:
        steps = default_steps(task, model, pr, batch_size)
    steps = V.count("steps", steps, 1)
    if batch_size is None:
        # the stress test's sequences are 3n long (n up to 512): a smaller default batch
        batch_size = 64 if model.startswith("stress-") else td.batch_size
    batch_size = V.count("batch_size", batch_size, 1)
    V.choice("device", device.split(":")[0], ("cuda", "cpu"))
    V.choice("eval", eval_mode, ("auto", "full", "quick", "none"))
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device: cuda requested but torch sees no GPU (use --device cpu)")
    dev = torch.device(device)
    if eval_mode == "auto":
        eval_mode = "full" if dev.type == "cuda" else "quick"
    if eval_chunk is None:
        eval_chunk = 256 if dev.type == "cuda" else 64
    out_dir = Path(out) / task
    out_dir.mkdir(parents=True, exist_ok=True)
    name = run_name(model, seed, protocol_tag(task, pr))
    ckpt_path = out_dir / f"{name}.ckpt.pt"

    torch.manual_seed(seed)
    net = build_model(task, model, pr).to(dev)
    opt_cfg = optimizer_settings(task, pr)
    groups, no_decay = optimizer_groups(net, task, pr)
    if no_decay:
        opt_cfg["no_weight_decay"] = no_decay
    dynamics0 = Mm.mixer_dynamics(net) if task == "mqar" else None      # before a checkpoint replaces them
    opt = torch.optim.AdamW(groups, lr=opt_cfg["lr"], weight_decay=opt_cfg["weight_decay"],
                            **({"betas": tuple(opt_cfg["betas"])} if "betas" in opt_cfg else {}))
    gen = torch.Generator().manual_seed(seed)
    step0, curve, wall_before = 0, [], 0.0
    win_sum0, win_n0 = 0.0, 0
    segments = []                                # which device trained which steps (a run may resume elsewhere)
    if resume:
        ck = load_checkpoint(ckpt_path, dev)
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        gen.set_state(ck["gen"].cpu())          # the data stream's generator is a CPU one; ck is mapped to dev
        step0, curve, wall_before = ck["step"], ck["curve"], ck.get("wall_s", 0.0)
        segments = list(ck.get("segments") or [{"steps": [0, int(step0)],
                                                "device": "not recorded (a checkpoint from before segments)"}])
        if model_cores(net):                     # segments from before the core was recorded say so
            segments = [s if "core" in s else {**s, "core": ["not recorded (trained before 2 December 2026, "
                                                             "when segments began to record their core)"]}
                        for s in segments]
        if sched is not None and ck.get("curriculum") is not None:
            # the schedule continues where it was (stage, switches, the partial accuracy window)
            sched = Cu.CurriculumSchedule.from_state(ck["curriculum"])
            win_sum0, win_n0 = ck["curriculum_window"]

    bar = None
    if progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=steps, initial=step0, desc=f"{task}:{model}:s{seed}", leave=False, dynamic_ncols=True)
        except ImportError:          # tqdm is optional on the GPU machine
            bar = None
    t0 = time.perf_counter()
    acc_sum = torch.zeros((), device=dev)
    loss_sum = torch.zeros((), device=dev)
    n_acc = 0
    # the curriculum's accuracy window (summed on the device: one sync per window, not per step)
    win_sum = torch.full((), win_sum0, device=dev)
    win_n = win_n0

    def segment(a, b):                           # steps [a, b): the device, and the mixers' cores where they vary
        seg = {"steps": [int(a), int(b)], "device": device_name(dev)}
        cores = model_cores(net)
        if cores:
            seg["core"] = cores
        return seg

    def save_ckpt(step):
        tmp = ckpt_path.with_suffix(".tmp")
        extra = {}
        if sched is not None:
            extra = {"curriculum": sched.state_dict(), "curriculum_window": (float(win_sum), win_n)}
        torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(), "step": step,
                    "curve": curve, "wall_s": wall_before + time.perf_counter() - t0,
                    "segments": segments + [segment(step0, step)], "protocol": pr, **extra}, tmp)
        os.replace(tmp, ckpt_path)

    for step in range(step0, steps):
        if task == "mqar":
            for group in opt.param_groups:
                group["lr"] = opt_cfg["lr"] * lr_factor(step, steps, pr["warmup_steps"])
        length = sched.length if sched is not None else None
        batch = _to(sample_train(task, model, batch_size, gen, length=length, protocol=pr), dev)
        logits, labels = forward(net, task, batch, pr)
        loss, acc = loss_and_acc(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        loss_sum += loss.detach()
        acc_sum += acc.detach()
        n_acc += 1
        if sched is not None:
            win_sum += acc.detach()
            win_n += 1
            mean = None
            if sched.window_due(step + 1):
                mean = float(win_sum) / win_n
                win_sum.zero_()
                win_n = 0
            sched.update(step + 1, mean)
        if (step + 1) % log_every == 0 or step + 1 == steps:
            # one device sync per log interval, not per step
            rec = {"step": step + 1, "loss": float(loss_sum) / n_acc, "acc": float(acc_sum) / n_acc}
            if length is not None:
                rec["length"] = length          # Fig. 6's axis: accuracy at the current training length
            if not math.isfinite(rec["loss"]):
                # a diverged run is a result too (e.g. the paper-like raw-key DeltaFormer overflowing):
                # record it, with its protocol and curve, then fail the run
                curve.append(rec)
                from assocmem.provenance import provenance
                bad = {"task": task, "model": model, "seed": seed, "steps": steps, "batch_size": batch_size,
                       "status": "diverged", "diverged_at_step": step + 1, "protocol": pr, "curve": curve,
                       "eval": {}, "provenance": provenance({"device": device_name(dev), "seed": seed})}
                (out_dir / f"{name}.json").write_text(json.dumps(bad, indent=1), encoding="utf-8")
                raise FloatingPointError(f"{task}:{model}: loss became {rec['loss']} at step {step + 1}")
            curve.append(rec)
            loss_sum.zero_()
            acc_sum.zero_()
            n_acc = 0
            if bar:
                bar.set_postfix(loss=f"{rec['loss']:.3f}", acc=f"{rec['acc']:.3f}")
        if bar:
            bar.update()
        if ckpt_every and (step + 1) % ckpt_every == 0 and step + 1 < steps:
            save_ckpt(step + 1)
            if bar is None:      # a line per checkpoint in the run's log (sweeps run without a bar)
                el = time.perf_counter() - t0
                print(f"{task}:{model}:s{seed} step {step + 1}/{steps} after {el:.0f}s "
                      f"({1e3 * el / (step + 1 - step0):.1f} ms/step)"
                      + (f", last loss {curve[-1]['loss']:.3f} acc {curve[-1]['acc']:.3f}" if curve else ""),
                      flush=True)
    if bar:
        bar.close()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    train_s = wall_before + time.perf_counter() - t0
    save_ckpt(steps)

    t1 = time.perf_counter()
    if eval_mode == "none":
        ev = {}
    else:
        settings = td.test_settings if eval_mode == "full" else td.quick_test_settings
        if sched is not None:
            # every stage length of the schedule; the full grid adds twice the final length
            lengths = list(Cu.DEFAULT_LENGTHS if model.startswith("direct-") and curriculum is None
                           else sched.lengths)
            if sched.lengths[-1] not in lengths:
                lengths.append(sched.lengths[-1])
            if eval_mode == "full":
                lengths.append(2 * sched.lengths[-1])
            settings = {**settings, "lengths": sorted(set(lengths)), "train_length": sched.lengths[-1]}
        ev = evaluate(net, task, model, settings, dev, chunk=eval_chunk, protocol=pr)
    eval_s = time.perf_counter() - t1

    from assocmem.provenance import provenance
    extra = {"device": device_name(dev), "seed": seed, "wall_s": round(train_s + eval_s, 3),
             "train_s": round(train_s, 3), "eval_s": round(eval_s, 3)}
    if segments:                                 # resumed: every device that trained part of the run
        extra["segments"] = segments + [segment(step0, steps)]
    if os.environ.get("ASSOCMEM_COMMIT"):
        # a copy of the tree without .git (the GPU machine): the commit it was sent from
        extra["source_commit"] = os.environ["ASSOCMEM_COMMIT"]
    if task in ("collision_recall", "random_keys") and model == "bl":
        extra["bl_op"] = Mo.resolve_bl_op()[1] + (" (triton)" if dev.type == "cuda" or
                                                   os.environ.get("TRITON_INTERPRET") == "1" else "")
    result = {
        "task": task, "model": model, "seed": seed, "steps": steps, "batch_size": batch_size,
        "source": td.source, "optimizer": opt_cfg,
        "train_settings": td.train_settings if sched is None else
        {"n_elems": td.train_settings["n_elems"], "curriculum": sched.config(), "switches": sched.switches,
         "final_stage": sched.stage, "final_length": sched.length,
         "deltaformer": {"key_norm": True, "beta_max": CURRICULUM_BETA_MAX}},
        "protocol": pr,
        "eval_mode": eval_mode,
        "n_params": sum(p.numel() for p in net.parameters() if p.requires_grad),
        **({"model_config": net.config()} if task == "mqar" else {}),
        **({"mixer_dynamics": {"init": dynamics0, "final": Mm.mixer_dynamics(net)}} if dynamics0 else {}),
        "curve": curve, "eval": ev, "provenance": provenance(extra),
    }
    path = out_dir / f"{name}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return result
