"""A time-boxed campaign over all three tasks, in priority order (for a GPU lease).

``python -m assocmem.gpu.tasks.campaign --budget-s 300 --out results`` is a
sweep with a time budget on the same Dask engine (:func:`.sweep.run_jobs`: a
local cluster, one worker per GPU taking ``--workers-per-device`` runs, or
``--scheduler``): it starts runs from a plan (:data:`PLANS`) until ``budget_s``
minus ``reserve_s`` has passed, lets the running ones finish, and stops the
runs still going at ``budget_s``.  Results land in
``OUT/TASK/MODEL_sSEED.json`` as usual; what was not run is printed.

``--longest-first`` starts the heaviest runs first (:func:`cost`, a rough
estimate), so the long ones get the whole window while the short ones fill
the slots they free; ties keep the priority order.  A run stopped at the time
limit leaves its checkpoint; the campaign then writes
``OUT/TASK/MODEL_sSEED.partial.json`` from it (the training curve so far, the
step reached, the curriculum state), which the plots and claim checks do not
treat as a result (it has no evaluation).

``--heavy-gpus N`` keeps the heavy runs (``cost > 1``: the curriculum arms and
the stress test) on the last N GPUs and the light ones on the others, each
group with its own worker count: the heavy GPUs' workers offer ``GPU_HEAVY``
resource units, the others ``GPU``, and each run asks for one unit of its kind.
Mixing them on one GPU starves the light runs: they are launch-bound, and
every one of their many small kernels waits behind the heavy processes' time
slices.  Measured on two H200s with 16
processes per GPU, heavy and light mixed: no run of 37 finished in 480 s; the
learned-collision runs, 59 s alone, did not reach step 500 of 2,500
(docs/tasks.md).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .sweep import grid, job_name, run_jobs
from .names import CURRICULUM_MODELS, MQAR_LR_GRID, MQAR_LR_GRID_UNTIL_3DEC, STRESS_MODELS   # no torch at import (sweep.py says why)


def priority():
    """The grid in the order it should be spent on when device time is short."""
    core = ["bl", "reset", "delta", "linear"]
    jobs = grid("collision_recall", core, [0])
    jobs += grid("collision_recall", ["gla", "diag"], [0])
    jobs += grid("swap_tracking", ["deltaformer-linear", "deltaformer-round2", "transformer-1", "transformer-2",
                                   "transformer-4", "transformer-8", "deltaformer-relu", "deltaformer-exp",
                                   "deltaformer-softmax"], [0])
    jobs += grid("random_keys", None, [0])
    jobs += grid("collision_recall", None, [1, 2])
    jobs += grid("swap_tracking", list(STRESS_MODELS), [0])
    jobs += grid("random_keys", None, [1, 2])
    # AM Fig. 6 (length curriculum 32 -> 256 vs direct 256; round2 then linear κ1, NoPE then RoPE)
    jobs += grid("swap_tracking", list(CURRICULUM_MODELS), [0])
    return jobs


def issue14():
    """The protocol issue's runs (docs/tasks.md, "Protocol"), most decisive first.

    1. the BL-task grids under the default protocol (queries do not write);
    2. collision recall: the choices of ours that could keep Delta/reset at 1.0 where
       the paper draws 0.75 (per-head constant gates as in the paper's main text,
       reset's ℓ² fixed at 0.05 as in its appendix, one layer, an opening round);
    3. random keys: the choices that could put BL's cross-entropy above the others'
       (p0, a learned decay, denser training; the calibrated CE is in every result);
    4. swap tracking: the stress test on keys where rounding is exact, with a linear
       read; Transformer width; the curriculum with the paper-like raw keys.

    The queries-write protocol's grid is the earlier committed runs (made before
    the write mask existed, on the code path that ``queries_write=true`` takes).
    """
    core = ["bl", "delta", "reset"]
    jobs = grid("collision_recall", core, [0, 1, 2])
    jobs += grid("random_keys", core, [0, 1, 2])
    jobs += grid("collision_recall", ["linear", "gla", "diag"], [0, 1, 2])
    jobs += grid("random_keys", ["linear", "gla", "diag"], [0, 1, 2])
    for pr in ({"gates": "head"}, {"n_layers": 1}, {"opening_rounds": 1}):
        jobs += grid("collision_recall", core, [0], pr)
    jobs += grid("collision_recall", ["reset"], [0], {"gates": "head", "reset_l2": 0.05})
    for pr in ({"p0": 0.1}, {"p0": 10.0}, {"bl_decay": True}):
        jobs += grid("random_keys", ["bl"], [0], pr)
    jobs += grid("random_keys", core, [0], {"train_n": [16, 32, 64, 128, 256]})
    for pr in ({"gates": "head"}, {"n_layers": 1}):
        jobs += grid("collision_recall", core, [1], pr)
    jobs += grid("swap_tracking", ["stress-round2-512"], [0], {"stress_read": "linear"})
    for d in (32, 64):
        jobs += grid("swap_tracking", ["transformer-1", "transformer-2", "transformer-4", "transformer-8"], [0],
                     {"d_model": d})
    jobs += grid("swap_tracking", ["curriculum-round2-nope", "direct-round2-nope"], [0], {"curriculum_keys": "raw"})
    jobs += grid("swap_tracking", ["stress-round2-512", "stress-linear-512"], [0], {"stress_keys": "rounding_exact"})
    jobs += grid("swap_tracking", ["stress-round2-512", "stress-linear-512"], [0],
                 {"stress_keys": "rounding_exact", "stress_read": "linear"})
    return jobs


def issue14_seeds():
    """The second pass of issue 14: the rounding-exact stress runs and more seeds for the ablations
    that moved a result in the first pass (training density, one layer, per-head gates)."""
    core = ["bl", "delta", "reset"]
    jobs = grid("swap_tracking", ["stress-round2-512", "stress-linear-512"], [0], {"stress_keys": "rounding_exact"})
    jobs += grid("swap_tracking", ["stress-round2-512", "stress-linear-512"], [0],
                 {"stress_keys": "rounding_exact", "stress_read": "linear"})
    jobs += grid("random_keys", core, [1, 2], {"train_n": [16, 32, 64, 128, 256]})
    jobs += grid("collision_recall", core, [2], {"n_layers": 1})
    jobs += grid("collision_recall", core, [2], {"gates": "head"})
    jobs += grid("collision_recall", core, [0], {"gates": "head", "n_layers": 1})
    return jobs


def issue14_width():
    """The third pass of issue 14: the narrowest Transformers (width 16; widths 32/64 did not flip the
    depth trend)."""
    return grid("swap_tracking", ["transformer-1", "transformer-2", "transformer-4", "transformer-8"], [0],
                {"d_model": 16})


def issue14_causes():
    """The fourth pass of issue 14: the two trends still without a cause.

    Random keys (BL's cross-entropy not the lowest): one mixer layer (the cause found for
    collision recall's Delta/reset) and per-head constant gates.  Transformer depth (2/4/8
    layers improve where the paper's stay ≈ 0.4): the loss at the last token only rather
    than after every swap (with the fast DeltaFormers, to see they still learn), and no
    position encoding.
    """
    core = ["bl", "delta", "reset"]
    jobs = []
    for pr in ({"n_layers": 1}, {"gates": "head"}):
        jobs += grid("random_keys", core, [0], pr)
    trs = ["transformer-1", "transformer-2", "transformer-4", "transformer-8"]
    jobs += grid("swap_tracking", trs + ["deltaformer-linear", "deltaformer-round2"], [0], {"supervision": "last"})
    jobs += grid("swap_tracking", trs, [0], {"pos": "nope"})
    return jobs


def device4():
    """This session's device plan: issue 14's remaining causes, then AM Fig. 7, then the MQAR pilot."""
    return issue14_causes() + dag() + mqar_lr()


def device4b():
    """The second call: confirm the random-keys cause on seeds 1 and 2, the MQAR pilot, and AM Fig. 7
    with two-token edges (the one-token edges of the first call learned nothing in 5,000 steps),
    root first then root last."""
    from .names import DAG_MODELS

    jobs = grid("random_keys", ["bl", "delta", "reset"], [1, 2], {"n_layers": 1})
    jobs += grid("dag_reachability", DAG_MODELS, [0], {"edge_tokens": "pair"})
    jobs += mqar_lr()
    jobs += grid("dag_reachability", DAG_MODELS, [0], {"edge_tokens": "pair", "root_position": "last"})
    return jobs


def device4c():
    """The third call: AM Fig. 7 under the settled protocol (two-token edges; the DeltaFormers on unit
    keys, as raw keys diverged), root first and root last, the runs that finish first first."""
    dfs = [f"deltaformer-{k}" for k in ("linear", "round2", "relu", "exp", "softmax")]
    jobs = grid("dag_reachability", dfs, [0])
    jobs += grid("dag_reachability", dfs + ["transformer-1", "transformer-2"], [0], {"root_position": "last"})
    jobs += grid("dag_reachability", ["transformer-4", "transformer-8"], [0])
    jobs += grid("dag_reachability", ["transformer-4", "transformer-8"], [0], {"root_position": "last"})
    return jobs


def device5():
    """The next session's first call (docs/tasks.md, "The second device session"): AM Fig. 7 under the
    default protocol, which call 3 of 1 December ran but could not return (device4c's runs, the longest
    last), then a longer MQAR pilot on Base for BL and GDN (12 epochs, three learning rates).  Probe
    first: ``--probe "mqar:gdn:variant=base,pool_size=2048 mqar:gdn-conv:variant=base,pool_size=2048"``."""
    jobs = device4c()
    for model in ("bl", "gdn"):
        for lr in MQAR_LR_GRID_UNTIL_3DEC:
            jobs += grid("mqar", [model], [0], {"variant": "base", "lr": lr, "epochs": 12})
    return jobs


def device6():
    """The second call of 1 December's third device session: the Transformers of AM Fig. 7 that call 1
    left unfinished (4 and 8 layers, root first and last; resumed), then the ablation the first
    DeltaFormer results asked for (they sat at the Transformers' level, ≈ 0.85 per node, not ≈ 1):
    one token per edge with both endpoints in it (``edge_embedding=factored``), as the delta rule's
    reachability reading needs one key per edge, the five DeltaFormers and the 1-layer Transformer,
    round2 also at lr 1e-3; and the BL MQAR pilots (12 epochs; resumed)."""
    jobs = grid("dag_reachability", ["transformer-4", "transformer-8"], [0])
    jobs += grid("dag_reachability", ["transformer-4", "transformer-8"], [0], {"root_position": "last"})
    dfs = [f"deltaformer-{k}" for k in ("linear", "round2", "relu", "exp", "softmax")]
    fact = {"edge_tokens": "single", "edge_embedding": "factored"}
    jobs += grid("dag_reachability", dfs + ["transformer-1"], [0], fact)
    jobs += grid("dag_reachability", ["deltaformer-round2"], [0], {**fact, "lr": 1e-3})
    for lr in MQAR_LR_GRID_UNTIL_3DEC:
        jobs += grid("mqar", ["bl"], [0], {"variant": "base", "lr": lr, "epochs": 12})
    return jobs


def device7():
    """The last call of that session: device6's AM Fig. 7 runs alone (call 2's kernel benchmark took the
    call; the MQAR pilots wait for the next session), the ablation first."""
    return [j for j in device6()[4:] + device6()[:4] if j[0] == "dag_reachability"]


def device8():
    """The next session's plan (after a first call of ``--pytest "gpu/test_mqar_baselines.py -k cuda"
    --probe "mqar:gdn:variant=base,pool_size=2048,gdn_backend=hybrid"``): the 8-layer root-first
    Transformer of AM Fig. 7 again (its 4,500-step checkpoint is not committed), the DeltaFormers with a
    write query of their own (one-token factored edges and two-token edges), the per-node read-out
    ablation for the DeltaFormers and the 1-layer Transformer (the multilabel ANS token must read the
    whole set from one softmax read), then the 12-epoch MQAR pilots on Base, BL and then GDN.  The GDN
    runs take the default ``gdn_backend=auto``: switch ``auto`` to the hybrid where fla refuses its
    kernel once the CUDA test passed (an explicit ``gdn_backend=hybrid`` would make them a non-default
    protocol, which Fig. 4 does not read); without that switch, drop them (53 minutes each)."""
    dfs = [f"deltaformer-{k}" for k in ("linear", "round2", "relu", "exp", "softmax")]
    fact = {"edge_tokens": "single", "edge_embedding": "factored"}
    jobs = grid("dag_reachability", ["transformer-8"], [0])
    # the three changes together (linear reached 0.98 with them on a CPU), then each pair, to isolate
    jobs += grid("dag_reachability", dfs, [0], {**fact, "deltaformer_write": "query", "output": "per_node"})
    jobs += grid("dag_reachability", dfs, [0], {**fact, "output": "per_node"})
    jobs += grid("dag_reachability", dfs, [0], {"deltaformer_write": "query", "output": "per_node"})
    jobs += grid("dag_reachability", dfs, [0], {**fact, "deltaformer_write": "query"})
    jobs += grid("dag_reachability", dfs, [0], {"deltaformer_write": "query"})
    jobs += grid("dag_reachability", dfs + ["transformer-1"], [0], {"output": "per_node"})
    for model in ("bl", "gdn"):
        for lr in MQAR_LR_GRID_UNTIL_3DEC:
            jobs += grid("mqar", [model], [0], {"variant": "base", "lr": lr, "epochs": 12})
    return jobs


def device9():
    """The fourth device session of 1 December (docs/tasks.md).  MQAR first: BL and GDN on Update and
    Block, 40 epochs at the default lr (Fig. 4b/c carry three of the notes' four readings; a 12-run
    BL Base run made 2.3 steps/s at 12 per H200, so concurrency buys little on MQAR and the grid of
    three learning rates does not fit one session: the other two rates come next).  GDN runs under
    the default ``gdn_backend=auto``, which takes the hybrid after its self-check.  Then AM Fig. 7:
    the 8-layer root-first Transformer (resumed), the three DAG changes together for the other four
    κ1 (linear learned with them on a CPU), and for linear each pair with the per-node read-out and
    the per-node read-out alone, to isolate which change is needed."""
    jobs = []
    for variant in ("update", "block"):
        jobs += grid("mqar", ["bl", "gdn"], [0], {"variant": variant})
    fact = {"edge_tokens": "single", "edge_embedding": "factored"}
    jobs += grid("dag_reachability", ["transformer-8"], [0])
    jobs += grid("dag_reachability", [f"deltaformer-{k}" for k in ("round2", "relu", "exp", "softmax")], [0],
                 {**fact, "deltaformer_write": "query", "output": "per_node"})
    jobs += grid("dag_reachability", ["deltaformer-linear"], [0], {**fact, "output": "per_node"})
    jobs += grid("dag_reachability", ["deltaformer-linear"], [0], {"deltaformer_write": "query", "output": "per_node"})
    jobs += grid("dag_reachability", ["deltaformer-linear"], [0], {"output": "per_node"})
    return jobs


def device10():
    """Calls 2 and 3 of that session: device9 less what call 1 showed cannot run here now.  GDN is
    out (auto fell back to fla's torch reference: the hybrid's self-check failed on the H200, so a
    40-epoch run would take hours); BL's two 40-epoch runs (30 MB checkpoints each: two fit in what a
    call returns) run beside the DAG isolation runs, which call 1 stopped at 4,000 steps and could
    not return (nine checkpoint pieces; the device script now returns the smallest first)."""
    return [j for j in device9() if not (j[0] == "mqar" and j[1] == "gdn") and j[1] != "transformer-8"]


def device11():
    """The next session's plan for BL Fig. 4 (b, c), two runs at a time (``--workers-per-device 2``:
    MQAR runs share the H200 badly, and a call returns at most two 30 MB checkpoints).  GDN first at
    the default rate under ``gdn_backend=auto``, which takes the hybrid core once its self-check
    passes on the GPU (``--bg 'python3 $ROOT/scripts/gdn_hybrid_diag.py --out $OUT/bench/gdn_hybrid_diag.json'``
    records it; if the check fails, the GDN runs fall back to fla's torch reference, far too slow:
    stop them); then BL's other two learning rates, then GDN's.  First BL Update at the default rate,
    resumed from its 23,500-step checkpoint (carry it as ``.resume/ckpts.tgz.part-*``).  Probe first, in
    the same call: ``--probe "mqar:bl:variant=update,pool_size=2048 mqar:bl:variant=update,pool_size=2048,bl_op=chunk
    mqar:gdn:variant=update,pool_size=2048"`` (BL's two ops; GDN under auto, which runs the hybrid's
    self-check); if ``bl_op=chunk`` is faster, make it the default before the BL runs."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "update"})
    for variant in ("block", "update"):
        jobs += grid("mqar", ["gdn"], [0], {"variant": variant})
    OTHER_LRS = sorted((x for x in MQAR_LR_GRID_UNTIL_3DEC if x != 1e-3), reverse=True)       # the default is 1e-3
    for lr in OTHER_LRS:
        for variant in ("block", "update"):
            jobs += grid("mqar", ["bl"], [0], {"variant": variant, "lr": lr})
    for lr in OTHER_LRS:
        for variant in ("block", "update"):
            jobs += grid("mqar", ["gdn"], [0], {"variant": variant, "lr": lr})
    return jobs


def device12():
    """The fifth device session of 1 December (issue 16, MQAR), call 1, two runs at a time: GDN on Block
    and Update at the default rate first (does any model bind keys to values under our generator and training?  BL's
    Block run sits at about 1/P on the test sets while its training accuracy is 0.64: it memorised
    the pool), under ``gdn_backend=auto`` (the hybrid after its self-check)."""
    jobs = []
    for variant in ("block", "update"):
        jobs += grid("mqar", ["gdn"], [0], {"variant": variant})
    return jobs


def device12b():
    """That session's last call: BL on Block at lr 3e-3, alone on the H200 (about 60 steps/s: 40 epochs
    in about 5 minutes).  The 4-epoch pilot learned fastest at 3e-3, and the paper picks the rate per
    model from a grid by validation accuracy, so this run is needed before BL's Block reading (0.02 at
    16 pairs at 1e-3) is read against the paper.  A fresh-data probe on the GPU
    (``scripts/mqar_mixer_probe.py``: BL with and without ``bl_decay`` and GDN, 2-3k steps) put every
    mixer at about 1/P by then, so decay is not yet separable from the plateau there."""
    return grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3})


def device13():
    """The next session's plan (issue 16, MQAR), one BL run at a time (``--workers-per-device 1``: alone a
    BL run makes about 60 steps/s, a 40-epoch Block run takes about 6 minutes with its start).  BL on Block
    memorised its pool under our backbone and stayed at 1/P on fresh data; Zoology's MQAR harness, which
    the paper modified, puts a gated short convolution of width 3 before every mixer (our option
    ``backbone=zoology``), which gives each token the two before it, as Block's ``A B 4 5`` needs.  So:
    BL on Block and Update under ``backbone=zoology`` at the pilot's best rate (3e-3), then the grid's
    missing rate for BL on Block under ours, then BL with ``bl_decay``.  GDN (about 25 minutes a run
    alone on the hybrid core) comes after, under whichever backbone these runs decide.  (Ran on 1 December,
    before ``backbone=zoology`` became the default; every job names its backbone, so the plan still means
    the same runs: the first two now untagged, the last two tagged ``backbone-mlp``; see :func:`device14`.)"""
    jobs = []
    for variant in ("block", "update"):
        jobs += grid("mqar", ["bl"], [0], {"variant": variant, "backbone": "zoology", "lr": 3e-3})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-4, "backbone": "mlp"})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "bl_decay": True, "lr": 3e-3, "backbone": "mlp"})
    return jobs


def device14():
    """The next session's plan (issue 16, MQAR), one run at a time (``--workers-per-device 1``).
    ``backbone=zoology`` is the default since 2 December: under it BL on Block (lr 3e-3) tests at 1.00 on
    2-8 pairs and 0.91 at 16, where under ``backbone=mlp`` it memorised its pool (0.03 at 16).  First BL on
    Update at 3e-3, resumed from its 22,500-step checkpoint (carry ``.resume/ckpts.tgz.part-*``: about a
    minute and a half left), then GDN on Block and Update at the default rate (no pilot of GDN's rate yet;
    its speed under this backbone is not measured: probe it first in the call,
    ``--probe "mqar:gdn:variant=block,pool_size=2048"``), then the grid's other rates for BL."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "update", "lr": 3e-3})
    for variant in ("block", "update"):
        jobs += grid("mqar", ["gdn"], [0], {"variant": variant})
    for lr in (1e-3, 3e-4):
        for variant in ("block", "update"):
            jobs += grid("mqar", ["bl"], [0], {"variant": variant, "lr": lr})
    return jobs


def _mqar_other_rates_and_base():
    """The tail of the MQAR plans since :func:`device15`: BL's other two rates of the grid on Block and
    Update (under ``zoology``; 3e-3 ran first), then Fig. 4a's Base for BL (lr 3e-3) and GDN."""
    jobs = []
    for lr in (1e-3, 3e-4):
        for variant in ("block", "update"):
            jobs += grid("mqar", ["bl"], [0], {"variant": variant, "lr": lr})
    jobs += grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3})
    return jobs + grid("mqar", ["gdn"], [0], {"variant": "base"})


def device15():
    """The next session's plan (issue 16, MQAR), after the first session of 2 December: GDN on Block's last
    3,750 steps (its checkpoint in ``.resume/``), GDN on Update (25,000 steps), both on the hybrid core
    (about 40 steps/s alone; carry ``.resume/triton-cache.tgz`` once a call has returned one), then BL on
    Block under ``backbone=mixers`` (no convolution, no MLP: the Block reading's candidate cause), then
    seeds 1 and 2 of BL on Update and Block at lr 3e-3 (a reading counts as confirmed on 3 seeds), then
    GDN with its short convolution on both, then BL's other two rates, then Fig. 4a's Base (length 512,
    64 pairs; about 15,600 steps, BL about 19 steps/s alone) for BL (lr 3e-3) and GDN at the default
    width.  Mamba2's Triton scan (``fla_mamba2``) is new and unmeasured: probe it first
    (``--probe "mqar:mamba2:variant=update,pool_size=2048"``) before it is planned.  Every MQAR model here is small
    (d_model 128, batch 256) and leaves the H200 mostly idle alone, so two at a time
    (``--workers-per-device 2``) should nearly double what a call does; its steps/s is measured by the
    runs' logs."""
    jobs = []
    for variant in ("block", "update"):
        jobs += grid("mqar", ["gdn"], [0], {"variant": variant})
    # BL at 16 pairs is 0.91 under the convolution and 0.03 under (mixer, MLP); the notes read 0.75 "without
    # a local convolution": the mixers alone separate the convolution from the MLP
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3, "backbone": "mixers"})
    for variant in ("update", "block"):
        jobs += grid("mqar", ["bl"], [1, 2], {"variant": variant, "lr": 3e-3})
    for variant in ("block", "update"):
        jobs += grid("mqar", ["gdn-conv"], [0], {"variant": variant})
    return jobs + _mqar_other_rates_and_base()


def device16():
    """The next session's plan (issue 16, MQAR), after its new checkout came without ``.resume/``
    (ignored files do not survive a session; GDN Block's 15,000-step checkpoint with it): a run must now
    finish inside the session that starts it.  GDN on Block again from step 0 (18,750 steps), BL on Block
    under ``backbone=mixers`` (the Block reading's candidate cause), GDN on Update, then BL's seeds 1 and 2
    on Block and Update at lr 3e-3, two at a time (``--workers-per-device 2``; the sharing's steps/s is
    read from the runs' logs).  The rest of :func:`device15` (GDN-conv, BL's other rates, Base) waits."""
    jobs = grid("mqar", ["gdn"], [0], {"variant": "block"})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3, "backbone": "mixers"})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "update"})
    for variant in ("block", "update"):
        jobs += grid("mqar", ["bl"], [1, 2], {"variant": variant, "lr": 3e-3})
    return jobs


def device17():
    """The next session's plan (issue 16, MQAR), two at a time, each run finishing inside the session
    (checkpoints do not outlive it): BL's seeds for the readings to count as confirmed (Update seeds 1
    and 2, Block seed 2, at lr 3e-3; Update seed 1 and Block seed 2 stopped with the last session at
    6,000 and 12,000 steps and restart), then GDN-conv on Update (the "≈ 60 %" reading with Mamba2),
    Mamba2 on Update (its Triton scan passed its CUDA check; probe its steps/s first:
    ``--probe "mqar:mamba2:variant=update,pool_size=2048"``), BL on Block with one head of 64
    (``bl_heads=1``: the head split, a candidate cause of the Block reading), GDN-conv on Block, BL's other rates under
    ``zoology``, then Base.  About 25,000 steps at 20-33 ms a step is 8-14 minutes a run: a session of
    three calls finishes about four (measured 2 December, second session)."""
    jobs = grid("mqar", ["bl"], [1, 2], {"variant": "update", "lr": 3e-3})
    jobs += grid("mqar", ["bl"], [2], {"variant": "block", "lr": 3e-3})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update"})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update"})
    # BL's head split, a candidate cause of the Block reading (one head of 64 against four of 32)
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3, "bl_heads": 1})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "block"})
    return jobs + _mqar_other_rates_and_base()


def device17b():
    """:func:`device17` for a session's last call, when a run cannot finish in it: BL Block seed 2
    (resumed) and BL Block with ``bl_heads=1`` (about 410 s each beside another BL) before GDN-conv on
    Update (about 800 s beside another run: a call of its own, in a later session)."""
    first = grid("mqar", ["bl"], [2], {"variant": "block", "lr": 3e-3})
    first += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3, "bl_heads": 1})
    names = {job_name(j) for j in first}
    return first + [j for j in device17() if job_name(j) not in names]


def device18():
    """The next session's plan (issue 16, MQAR), after the third session of 2 December (BL's three
    seeds finished on both readings): BL Block with ``bl_heads=1`` (the head split, the next candidate
    cause of the Block reading) beside GDN-conv on Update (about 800 s beside another run: it spans two
    calls, its checkpoint carried within the session), Mamba2 on Update (probe its steps/s first), BL on
    Block with its noise gates starting at 0.5 and 0.005 (``bl_noise_init``; 0.05 by default), GDN's
    seeds 1 and 2 on Update and Block (its readings hold on seed 0 only), GDN-conv on Block, BL's other
    rates and Base."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3, "bl_heads": 1})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update"})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update"})
    # where BL's noise gates start (0.05 by default), the next candidate cause of the Block reading
    for x in (0.5, 0.005):
        jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 3e-3, "bl_noise_init": x})
    for variant in ("update", "block"):
        jobs += grid("mqar", ["gdn"], [1, 2], {"variant": variant})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "block"})
    return jobs + _mqar_other_rates_and_base()


def device19():
    """The next session's plan (issue 16, MQAR), after the fourth session of 2 December (three at a time,
    ``--workers-per-device 3``: 30-41 ms a step each, about 95 steps/s together): Mamba2 on Update at the
    grid's other two rates (at 1e-3 it did not learn: training accuracy 0.02 after 25,000 steps, so its
    half of the "≈ 60 %" reading says nothing of Mamba2 yet), 3e-3 first (Zoology's grid reaches 3.2e-2);
    GDN-conv on Update with the updates interleaved among the initial pairs, then with distinct updated
    keys (the generator's two Update choices, protocol options since this session: GDN-conv's 1.00 against
    the notes' 0.60 is the reading's other half); GDN's seeds 1 and 2 on Update (they stopped at 11,500
    and 10,000 steps with the session; their checkpoints are lost with it) and Block; GDN-conv on Block;
    then BL's other rates and GDN's Base.  BL's Base run (Fig. 4a, length 512: 15,625 steps at about 53 ms
    a step alone, 14 minutes, more beside two others) goes first: it is the longest, and a run must
    finish in the session that starts it (checkpoints do not outlive a session)."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 3e-3})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_order": "interleaved"})
    jobs += grid("mqar", ["gdn"], [1, 2], {"variant": "update"})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 3e-4})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_keys": "distinct"})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "block"})
    jobs += grid("mqar", ["gdn"], [1, 2], {"variant": "block"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in _mqar_other_rates_and_base() if job_name(j) not in names]


def device20():
    """The next session's plan (issue 16, MQAR), after the fifth session of 2 December.  BL's Base run
    (Fig. 4a) again first: it finished there, but its JSON did not come back (checkpoint pieces filled
    what a call returns; fixed in scripts/device_campaign.sh), and a run must finish in the session that
    starts it.  Then Mamba2 on Update at the grid's last rate, 3e-4 (it did not learn at 1e-3 or 3e-3:
    training accuracy 0.02 and 0.05 after 25,000 steps); run the CUDA tests of its core first
    (``--pytest "gpu/test_fla_mamba2.py gpu/test_gpu_chunk_triton.py -k cuda"``, paths from ``tests/``:
    the core's gradients against the layer's own path at the MQAR sizes, and its self-check, now also in
    the mixer's own regime; docs/tasks.md has the calls).  Then
    GDN-conv on Update with the updates interleaved (it trained to 1.00 in the fifth session and stopped
    in its test evaluation), then :func:`device19`'s remaining runs."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 3e-4})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_order": "interleaved"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device19() if job_name(j) not in names]


def device21():
    """The next session's plan (issue 16, MQAR), after the sixth session of 2 December.  BL's Base run
    finished there (test 0.83 at length 512, 64 pairs).  Mamba2 did not learn on Update at any rate of
    the grid (training accuracy 0.02, 0.05 after 25,000 steps at 1e-3, 3e-3; 0.005 at step 11,500 of
    3e-4), and the CUDA tests cleared its core (gradients equal to the layer's own path at the MQAR sizes).
    What its checkpoint showed instead: its A_log and dt_bias moved as AdamW's weight decay alone moves
    them (results/mqar/diagnostics/, scripts/mqar_decay_drift.py), which at 1e-3 and 3e-3 shortens every
    head's memory at the bias to 2-3.5 tokens by the end.  So Mamba2 on Update with ``wd_exempt=marked``
    (those parameters not decayed, as mamba_ssm's and fla's trainers leave them) at 1e-3 and 3e-3 first,
    then GDN-conv interleaved (trained to 1.00 twice, its test evaluation never reached), then
    :func:`device20`'s remaining runs."""
    jobs = grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-3, "wd_exempt": "marked"})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 3e-3, "wd_exempt": "marked"})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_order": "interleaved"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device20() if job_name(j) not in names]


def device22():
    """The next session's plan (issue 16, MQAR), after the session of 3 December.  The weight-decay
    ablation of Mamba2 is made (with ``wd_exempt=marked`` its training follows the decayed run's to step
    17,500: not the cause), so its runs are not continued.  GDN-conv interleaved first (trained to
    1.00 three times, its test evaluation never reached: one call of about 560 s takes it from step 0
    only on a warm machine, so give it ``--workers-per-device 1``), then :func:`device20`'s remaining
    runs."""
    jobs = grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_order": "interleaved"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device20() if job_name(j) not in names]


def device23():
    """The next session's plan (issue 16, MQAR), after the session of 3 December.  Mamba2 does not learn
    Update at any rate of the grid, and the weight decay on its A_log / dt_bias is ruled out.  The next
    of our choices that differs from Zoology's harness is the initialisation (torch's defaults: the
    token embedding N(0, 1); Zoology's: N(0, 0.02²) and Mamba2's out_proj at 0.01), so Mamba2 on Update
    with ``init=zoology`` at 1e-3 first (the torch-init run at 1e-3 had training accuracy 0.0075 at step
    5,500: a few thousand steps tell), then :func:`device22`'s runs."""
    jobs = grid("mqar", ["mamba2"], [0], {"variant": "update", "init": "zoology"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device22() if job_name(j) not in names]


def device24():
    """The next session's plan (issue 16, MQAR), after the second session of 3 December.  Mamba2 under
    Zoology's initialisation did not learn either (training accuracy 0.044, test 0.0001 at 16 updates)
    and GDN-conv with interleaved updates tests at 1.000: both Update ablations are made.  So
    :func:`device22`'s remaining runs, with Mamba2's third rate (3e-4: not learning at step 11,500) last."""
    jobs = [j for j in device22() if j[1] != "mamba2"]
    return jobs + [j for j in device22() if j[1] == "mamba2"]


def device25():
    """The next session's plan (issue 16, MQAR), after the second session of 3 December.  The Update
    reading that GDN-conv is near 0.60 at 16 updates is not reproduced (1.00 under both update orders);
    the generator's other Update choice, ``update_keys`` (``distinct``: every update re-assigns a
    different key), is the next candidate, so that run first, then GDN-conv on Block (Fig. 4c's last
    missing mixer), then :func:`device24`'s remaining runs."""
    jobs = grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_keys": "distinct"})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "block"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device24() if job_name(j) not in names]


def device26():
    """The next session's plan (issue 16, MQAR), after the third session of 3 December.  Twelve Mamba2
    probes on the H200 (results/mqar/probes/2026-12-03-h200-*) showed that Mamba2 does bind at vocabulary
    1,024 (test 1.00), but only after a plateau at chance that ends abruptly (training accuracy 0.1 to 0.9
    in 200-400 steps; 0.5 at step 1,300-2,500 at 3e-3), earlier at smaller vocabularies (600 at 256,
    1,400 at 512; at 2,048 and 1e-2, on a CPU, at 1,200 in Zoology's block and not within 3,989 steps
    in ours), and not at all within 3,000 steps at 3e-4, or at 3e-3 when the cosine schedule is
    only 3,000 steps long; at 1e-2 it ends by step 1,600-1,800.  At the paper's vocabulary of 8,192
    the plateau may outlast our 25,000 steps at the rates of our grid (3e-4, 1e-3, 3e-3), which stop
    below Zoology's (1e-3 to 3.2e-2).  So Mamba2 on Update at 1e-2 first, then in Zoology's own block (``backbone=mixers``) at
    1e-2, then :func:`device25`'s runs (GDN-conv with distinct update keys resumes from step 10,500)."""
    jobs = grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2, "backbone": "mixers"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device25() if job_name(j) not in names]


def device27():
    """The next session's plan (issue 16, MQAR), after the fourth session of 3 December.  Mamba2 on Update
    learned at lr 1e-2 (0.81 at 16 updates; 0.96 in Zoology's block), so the rate grid gained 1e-2.
    First GDN-conv with distinct update keys (the Update generator's last choice; a checkpoint at step
    10,500 exists outside the repository), then GDN-conv in Zoology's block (``backbone=mixers``: its
    own short convolution only, none before it, no MLP; the Mamba2 ablation's counterpart), then
    Mamba2 at 1e-2 on seeds 1 and 2, then the grid's new rate for GDN and BL on Update and Block, then
    :func:`device25`'s remaining runs (GDN-conv on Block first among them)."""
    jobs = grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_keys": "distinct"})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "backbone": "mixers"})
    jobs += grid("mqar", ["mamba2"], [1, 2], {"variant": "update", "lr": 1e-2})
    for model in ("gdn", "bl"):
        for variant in ("update", "block"):
            jobs += grid("mqar", [model], [0], {"variant": variant, "lr": 1e-2})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device25() if job_name(j) not in names]


def device28():
    """The next session's plan (issue 16, MQAR), after the fifth session of 3 December.  GDN-conv's last two
    Update ablations (``update_keys=distinct``, ``backbone=mixers``) finished at 1.000, so no candidate is left
    for the Update reading but Mamba2's seeds: seed 1 at 1e-2 first (it resumes from step 8,500).  Then BL on
    Block with a learned decay (``bl_decay=true``, its rate 3e-3) under the default backbone: it was run only
    under ``mlp``, where BL memorised, and is the one choice of ours not yet tried as a cause of BL's Block
    reading (0.91 against ≈ 0.75).  Then :func:`device27`'s remaining runs (Mamba2 seed 2 first)."""
    jobs = grid("mqar", ["mamba2"], [1], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "bl_decay": True, "lr": 3e-3})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device27() if job_name(j) not in names]


def device29():
    """The plan of the sixth session of 3 December (issue 16, MQAR), after :func:`device28` could not
    run as written: this session's checkout came without ``.resume/`` and the copies outside the
    repository were gone, so Mamba2 seed 1's checkpoint at step 8,500 was lost and that run starts
    again from step 0 (it retraced the lost run's curve exactly: the same training accuracy at
    every logged step to 7,500).  BL on Block with a learned decay (``bl_decay=true``, its rate 3e-3,
    354 s alone on the H200) therefore went first: it was the one choice of ours not yet tried as a
    cause of BL's Block reading (0.931 at 16 pairs: not the cause), and it finishes within one call.
    Then :func:`device28`'s other runs, Mamba2 seed 1 first."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "block", "bl_decay": True, "lr": 3e-3})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device28() if job_name(j) not in names]


def device30():
    """The plan of the seventh session of 3 December (issue 16, MQAR): Mamba2 on Update at 1e-2, seeds 1
    and 2 together (``--workers-per-device 2``; Mamba2 runs share an H200 at little cost a step: 30-41 ms
    a step each at three a GPU), and nothing after them, so that the last call ends when they do and
    the session's remaining GPU time goes to the kernel benchmark (issue 19).  Is seed 0's 0.81 at 16
    updates its own, or Mamba2's at this rate?"""
    return grid("mqar", ["mamba2"], [1, 2], {"variant": "update", "lr": 1e-2})


def device31():
    """The next session's plan (issue 16, MQAR), after the seventh session of 3 December: Mamba2's seeds
    1 and 2 at 1e-2 finished (0.988 and 0.851 at 16 updates; seed 0 0.807), so the Update reading
    stays not reproduced on three seeds.  Validation picks each model's rate from the grid, which now
    ends at 1e-2, so that rate is run for BL and GDN: BL on Update and Block, GDN on Block, then GDN on
    Update (three at a time, ``--workers-per-device 3``: BL took 611 and 363 s alone, GDN about 800 s),
    then :func:`device27`'s remaining runs (GDN-conv on Block first among them)."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "update", "lr": 1e-2})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device27() if job_name(j) not in names]


def device32():
    """The next session's plan (issue 16, MQAR), after the eighth session of 3 December: BL at lr 1e-2
    finished on Update and Block, and validation picks 1e-2 for both (0.962 at 16 updates, 0.940 at 16
    pairs).  GDN at 1e-2 ran 5,500 steps on each and its checkpoints were lost, so it starts again:
    GDN on Block, then on Update, one or two at a time (four at once it ran at 84 ms a step, against
    about 25 alone and 31-33 two at a time), then BL's seeds 1 and 2 at the chosen 1e-2, then :func:`device27`'s rest."""
    jobs = grid("mqar", ["gdn"], [0], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "update", "lr": 1e-2})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device27() if job_name(j) not in names]



def device33():
    """The next session's plan (issue 16, MQAR), after the first session of 4 December: GDN at lr 1e-2
    finished on Block and Update.  Validation keeps 1e-3 for Block (mean 0.9993 against 0.9887) and picks
    1e-2 for Update (0.9958 against 0.9907; 0.995 at 16 updates).  So GDN's Update seeds 1 and 2 run at
    1e-2, its Block seeds at the default rate; first BL's seeds 1 and 2 at the chosen 1e-2 (Block, then
    Update), then GDN-conv on Block and the rest of :func:`device27`'s runs."""
    jobs = grid("mqar", ["bl"], [1, 2], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [1, 2], {"variant": "update", "lr": 1e-2})
    names = {job_name(j) for j in jobs}
    superseded = {job_name(j) for j in grid("mqar", ["gdn"], [1, 2], {"variant": "update"})}
    return jobs + [j for j in device27() if job_name(j) not in names | superseded]


def device34():
    """The plan of the second session of 4 December (issue 16, MQAR Base, Fig. 4a): the width sweep the
    spec asks for.  Only BL at width 128 had run on Base (0.83 at 64 pairs, 877 s alone on the H200, about
    56 ms a step), so the issue's priority order (Base before Update and Block, BL and GDN first) puts
    Base's other widths ahead of more seeds of Update and Block.  BL at 256 and 64, GDN at 128 first (three
    at a time: BL runs share an H200 at little cost a step, GDN runs less well), then GDN at 256 and 64.
    The rates: BL's Base pick at width 128 (3e-3), GDN's default (1e-3, its Block pick); no Base pilot per
    width (docs/tasks.md says so)."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 256})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base"})
    jobs += grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "d_model": 256})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "d_model": 64})
    return jobs


def device35():
    """The plan of the first session of 4 December's afternoon (issue 16, MQAR Base, Fig. 4a): BL's width
    sweep first.  :func:`device34`'s first call (three at a time, 505 s) left BL at width 256 at step 4,500
    (training accuracy 0.96, where width 128 had 0.89) with a checkpoint too large to come back, BL at 64 at
    step 6,000 (0.19; its checkpoint came back) and GDN at 128 at step 2,000 (its 29 MB checkpoint does not
    fit what a call carries beside BL's).  So BL at 256 restarts and BL at 64 resumes, two at a time, and
    GDN's Base runs wait for the next session."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 256})
    jobs += grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 64})
    return jobs


def device35b():
    """:func:`device35`'s last call: BL at width 64 alone, resumed from its step-13,000 checkpoint.  Its
    second call found a fresh machine (the first's had been released), so both runs started again from
    step 0 there; width 256's 80 MB checkpoint never comes back, so it cannot finish in what is left."""
    return grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 64})


def device36():
    """The plan of the second session of 4 December's afternoon (issue 16, MQAR Base, Fig. 4a): BL at width
    256 from step 0 (:func:`device35`'s first call took it to step 6,000, training accuracy 0.97; the second
    call found a fresh machine, so its checkpoint was lost) beside GDN at width 128 (the width BL's Base ran
    at first; :func:`device34` took it to step 2,000 only), two at a time.  BL's checkpoint (about 55 MB)
    comes back only when it is the one unfinished run, so the calls are chained while the machine is warm;
    GDN's (29 MB) comes back whenever BL has finished."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 256})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base"})
    return jobs


def device37():
    """The plan of the session of 4 December's evening (issue 16, MQAR Base, Fig. 4a), three at a time: BL at width 64 from its step-6,000 checkpoint (about 6 minutes alone), which completes BL's
    width row; GDN at width 128 at the grid's two larger rates (3e-3, 1e-2; :func:`device36` ran 1e-3 to
    0.40, still learning), so that validation picks GDN's Base rate as it picked the others' before its
    number is read.  Then GDN at widths 64 and 256 at the default rate, which a call may leave out
    (``--limit 3``) while the first three share the GPU."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 3e-3})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "d_model": 256})
    return jobs


def device38():
    """The plan of the session of 5 December (issue 16, MQAR Base, Fig. 4a), two at a time: GDN at width 128
    and lr 3e-3 (the rate pilot :func:`device37` started: 0.03-0.06 ahead of 1e-3 to step 5,000), then BL at
    width 64 (completes BL's width row).  Both from step 0: the checkpoints of :func:`device37` stayed
    outside git and did not survive.  GDN at 1e-2 (still at chance at step 5,000) waits: a third run slows
    both (about 97 ms a step three at a time against about 38 alone) past what one session's device time
    holds.  With ``--workers-per-device 1`` (what a short session's budget allows) GDN runs first and alone,
    about 15 minutes with fla's start-up, and BL takes what is left."""
    jobs = grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 3e-3})
    jobs += grid("mqar", ["bl"], [0], {"variant": "base", "lr": 3e-3, "d_model": 64})
    return jobs


def device39():
    """The next plan for issue 16 (MQAR Base, Fig. 4a), one run at a time: GDN at widths 64 and 256 at its
    picked Base rate (3e-3, :func:`device38`; at 1e-3 it had not finished learning), which completes GDN's
    width row beside BL's (0.15 / 0.83 / 0.93 at 64 / 128 / 256); then GDN-conv and Mamba2 on Base at width
    128 and the same rate (pilots: their Base rate is not picked yet).  GDN at width 128 took about
    15 minutes on one H100 (54 ms a step), so width 64 fits one call of a warm machine and width 256
    needs two (its checkpoint stays in the machine's stash between them)."""
    jobs = grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 3e-3, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 3e-3, "d_model": 256})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "base", "lr": 3e-3})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "base", "lr": 3e-3})
    return jobs


def device40():
    """The next plan for issue 16 after :func:`device39` (6 December, third session), the disputed readings'
    candidate causes first (the runs of Base have no published number to compare):

    - panels b/c's width, which the paper does not give (ours 128): BL on Block at width 64 (its Base
      accuracy fell from 0.83 at 128 to 0.15 at 64, so a narrower model may bring its 16-pair reading from
      0.94 toward the notes' 0.75) and GDN beside it (the reading asks GDN ≈ 1.00 there), each at its picked
      Block rate (1e-2, 1e-3);
    - Update's training range (``update_train_frac=0.5``: the test's 10-16 updates beyond training) for
      GDN-conv and Mamba2 at their picked Update rates (1e-3, 1e-2), the 16-update reading (≈ 0.60 both);
    - the same two at width 64;
    - then GDN at width 256 on Base at 1e-3 (at 3e-3 it finished at chance: training accuracy 0.013, below
      1/64), Mamba2 on Base at 1e-2 (its Update pick; its 3e-3 run was stopped before its first
      checkpoint), then :func:`device33`'s seeds."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "block", "d_model": 64})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "update_train_frac": 0.5})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2, "update_train_frac": 0.5})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", "d_model": 64})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 1e-3, "d_model": 256})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "base", "lr": 1e-2})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device33() if job_name(j) not in names]


def device41():
    """The next plan for issue 16 after :func:`device40` (6 December, fourth session), whose runs measured that
    panel c's width explains the Block reading on one seed (BL 0.705 at 16 pairs at width 64, GDN 0.996) and
    that Update's training range does not explain the Update one (GDN-conv 1.000, Mamba2 0.803).  Width 64 is
    one hypothesis for both panels, so first what it says of Update:

    - GDN-conv and Mamba2 on Update at width 64 (their checkpoints at steps 21,000 and 14,000 in
      ``.resume/``, about 2 and 5 minutes), the disputed Update reading at that width;
    - BL and GDN on Update at width 64 at their picked Update rates (1e-2 both), the two Update readings the
      default reproduces (BL ≈ 0.88, GDN ≈ 0.98): a width that flips Block but breaks these is not the
      paper's protocol (``task.mqar`` names it so);
    - BL on Block at width 64, seeds 1 and 2 (at width 128 its seeds read 0.88-1.00: one seed's 0.705 is
      not yet a finding), GDN beside it on seed 1;
    - then the rest of :func:`device40` (GDN at width 256 on Base at 1e-3, Mamba2 on Base, ``device33``'s
      seeds)."""
    jobs = grid("mqar", ["gdn-conv"], [0], {"variant": "update", "d_model": 64})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2, "d_model": 64})
    jobs += grid("mqar", ["bl"], [0], {"variant": "update", "lr": 1e-2, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "update", "lr": 1e-2, "d_model": 64})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "block", "lr": 1e-2, "d_model": 64})
    jobs += grid("mqar", ["gdn"], [1], {"variant": "block", "d_model": 64})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device40() if job_name(j) not in names]


def device42():
    """The next plan for issue 16 after :func:`device41` (6 December, fifth session), whose runs measured that
    width 64 is not the paper's width for panels b/c: on Update it leaves GDN-conv and Mamba2 at 1.000 and
    0.996 (not 0.60) and takes BL and GDN off the readings width 128 reproduces (0.643, 0.729), and BL's
    Block flip holds on seed 0 only (0.705 / 0.628 / 0.539).  Two at a time:

    - the next candidate cause of the Block reading, BL's head split (``bl_heads=8``: eight heads of 22
      instead of four of 32; one head of 64 read 0.988, further from 0.75), on Block and on Update at BL's
      picked rate (1e-2): both BL readings of ours lie above the notes' (0.94 / 0.96 against 0.75 / 0.88)
      while GDN's match, so less capacity per head may move both, and the Update run tests that it keeps
      BL's Update reading;
    - then the default protocol's seeds at the picked rates: panel c, BL's Block seeds 1 and 2 at its pick
      (1e-2; its 3e-3 seeds read 0.88-1.00) and GDN's at its pick (1e-3), so the disputed Block reading is
      read on three seeds;
    - panel b: BL's and GDN's Update seeds 1 and 2 at their pick (1e-2 both), which confirm (or not) the two
      Update readings seed 0 reproduces;
    - then the rest of :func:`device41` (GDN at width 256 on Base at 1e-3, Mamba2 on Base at 1e-2, GDN's Block
      seed 1 at width 64, ...)."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2, "bl_heads": 8})
    jobs += grid("mqar", ["bl"], [0], {"variant": "update", "lr": 1e-2, "bl_heads": 8})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [1, 2], {"variant": "block"})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [1, 2], {"variant": "update", "lr": 1e-2})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "base", "lr": 1e-3, "d_model": 256})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "base", "lr": 1e-2})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device41() if job_name(j) not in names]


def device43():
    """The next plan for issue 16 after :func:`device42` (6 December, seventh session), whose runs measured that
    BL's head split is not the Block reading's cause (eight heads of 22: 0.890 at 16 pairs, inside four heads'
    seed spread 0.844-0.940) and read the default Block reading on three of BL's seeds.  Two at a time:

    - the generator's filler, one candidate for both disputed readings: Zoology's harness, which the paper
      modified, fills the positions between queries with ids uniform over the vocabulary (its
      ``random_non_queries``); ours with one PAD token.  The short convolution before every mixer sees those
      tokens beside each query, so they may cost the models that lean on it (GDN-conv and Mamba2 read 0.60 in
      the notes, ours 1.00 and 0.81) and BL on Block: BL's Block run first (at its picked rate, 1e-2), then
      GDN-conv's and Mamba2's Update runs, GDN's Block run (a reading over two models needs both), and BL's and
      GDN's Update runs (whether it keeps the two reproduced readings);
    - the query order, a candidate for Block: each query slot asking a random key instead of Zoology's
      "i-th slot asks the i-th key" (``query_order=shuffled``), BL and then GDN;
    - beside the first, GDN's Block seed 2 from its checkpoint at step 6,000 (carried in ``.resume/``);
    - then what :func:`device42` left (the Update seeds at the picked rates, Base, ...) but the width-64 runs:
      width 64 is ruled out for panels b/c, so GDN's unfinished width-64 Block seed 1 is dropped."""
    fill = {"filler": "random"}
    jobs = grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2, **fill})
    jobs += grid("mqar", ["gdn"], [2], {"variant": "block"})
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "update", **fill})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2, **fill})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "block", **fill})
    jobs += grid("mqar", ["bl", "gdn"], [0], {"variant": "update", "lr": 1e-2, **fill})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2, "query_order": "shuffled"})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "block", "query_order": "shuffled"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device42() if job_name(j) not in names and "d_model-64" not in job_name(j)]


def device44():
    """The next plan for issue 16 after :func:`device43` (6 December, eighth session), whose runs measured that the
    filler is not the cause of either disputed reading: under Zoology's random filler BL reads 0.902 at 16 pairs
    (0.940 under PAD, not 0.75), and GDN-conv and Mamba2 do not learn Update at all in 25,000 steps (0.000 at 16
    updates, not 0.60).  Those runs showed an asymmetry of ours: BL's write mask (only key and value tokens
    write) is knowledge the baselines do not get, fla's layers writing every token.  Two at a time:

    - BL without its write mask (``queries_write=true``: query and filler tokens write too), the next candidate
      for the Block reading, on Block and beside it on Update (whether it keeps BL's Update reading, 0.88), so
      that one session decides it;
    - the query order (``query_order=shuffled``), BL's Block run and then GDN's, as :func:`device43` listed;
    - GDN's Block run under random filler, from its checkpoint at step 9,500 (carried in ``.resume/``);
    - then what :func:`device42` left (the Update seeds at the picked rates, Base, ...), and last the Update
      runs under random filler of BL and GDN (the filler is ruled out; they say only whether it keeps the two
      readings the default reproduces)."""
    jobs = grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2, "queries_write": True})
    jobs += grid("mqar", ["bl"], [0], {"variant": "update", "lr": 1e-2, "queries_write": True})
    jobs += grid("mqar", ["bl"], [0], {"variant": "block", "lr": 1e-2, "query_order": "shuffled"})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "block", "filler": "random"})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "block", "query_order": "shuffled"})
    names = {job_name(j) for j in jobs}
    rest = [j for j in device43() if job_name(j) not in names]
    filler = [j for j in rest if "filler-random" in job_name(j)]
    return jobs + [j for j in rest if j not in filler] + filler


def device45():
    """The next plan for issue 16 after :func:`device44` (6 December, ninth session), whose runs measured that BL's
    write mask is not the cause of the Block reading (without it BL reads 0.979 at 16 pairs, and 0.767 at 16
    updates where the notes read 0.88) and that the query order flips it on seed 0: with each query slot asking a
    random key instead of Zoology's i-th slot asking the i-th key, BL reads 0.765 at 16 pairs (0.940 in Zoology's
    order).  Before the order is named the measured cause, two at a time:

    - GDN's Block run under the shuffled order, from its checkpoint at step 8,500 (carried in ``.resume/``): the
      reading needs GDN ≈ 1.00 under the same order;
    - BL's and GDN's Update runs under it, each at its picked rate (a cause of the Block reading must keep the
      two Update readings the default reproduces): before the seeds, because one broken Update reading rules
      the order out whatever the seeds say, and BL's beside GDN's short resumed run fits the first call;
    - BL's Block run under it on seeds 1 and 2 (seed 0 alone decided the flip);
    - then what :func:`device44` left, in its order."""
    jobs = grid("mqar", ["gdn"], [0], {"variant": "block", "query_order": "shuffled"})
    jobs += grid("mqar", ["bl"], [0], {"variant": "update", "lr": 1e-2, "query_order": "shuffled"})
    jobs += grid("mqar", ["gdn"], [0], {"variant": "update", "lr": 1e-2, "query_order": "shuffled"})
    jobs += grid("mqar", ["bl"], [1, 2], {"variant": "block", "lr": 1e-2, "query_order": "shuffled"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device44() if job_name(j) not in names]


def device46():
    """:func:`device45`'s runs with GDN's shuffled Update run moved up beside GDN's resumed Block run (6 December,
    tenth session): four refused starts left about 1,350 of the session's 1,800 GPU seconds, two calls of
    about 480 s of training. GDN's Update run is the longest (25,000 steps at about 32 ms two at a time); started
    second it ends after the two calls, started first all three decisive runs (GDN Block, GDN Update, BL Update)
    end inside them by the rates of 6 December. BL's Block seeds 1 and 2 follow, then :func:`device44`'s rest."""
    gdn_block, bl_update, gdn_update, *rest = device45()
    return [gdn_block, gdn_update, bl_update, *rest]


def device47():
    """The next plan after :func:`device46` (6 December, eleventh session), which read the shuffled query order
    as the Block reading's cause on seed 0 and found it keeps both Update readings.  Two at a time:

    - BL's Block run under the shuffled order on seed 1, from its checkpoint at step 16,000 (carried in
      ``.resume/``): the cause is still one seed's;
    - AM Fig. 7's Transformers (8, 4, 2, 1 layers) under the input and output changes that let round2 and linear
      learn reachability (one factored token per edge, the per-node read-out; the write query is the
      DeltaFormer's own and does not apply): the DeltaFormers' ≈ 1 under them is today compared with
      Transformers run under the default input and output, so "ends above every Transformer" mixes protocols;
      the deepest first, because the 1- and 2-layer runs can also run on a CPU (both did, this session);
    - BL's seed 2 after them: the session's refused starts had left under 450 GPU seconds, and its 18,750 steps
      from scratch do not fit one such call, while the others do;
    - then :func:`device46`'s rest, in its order."""
    jobs = grid("mqar", ["bl"], [1], {"variant": "block", "lr": 1e-2, "query_order": "shuffled"})
    jobs += grid("dag_reachability", [f"transformer-{n}" for n in (8, 4, 2, 1)], [0],
                 {"edge_tokens": "single", "edge_embedding": "factored", "output": "per_node"})
    jobs += grid("mqar", ["bl"], [2], {"variant": "block", "lr": 1e-2, "query_order": "shuffled"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device46() if job_name(j) not in names]


def device48():
    """The next plan after :func:`device47` (7 December, twelfth session), which ran BL's shuffled Block seeds and
    the deep Transformers under the DAG's inputs, while this machine's CPU found that a signed write strength
    (``deltaformer_beta=signed``, β in (−2, 2)) lets the ReLU DeltaFormer learn reachability (≥ 0.95 by step
    2,000 on seed 0) where β in (0, 2) does not.  Two at a time:

    - the exp and softmax DeltaFormers under the same protocol (all three changes and the signed β): they are
      non-negative kernels too, so the signed β may lift them as it lifted ReLU, which would break the reading
      that they end a little lower (reproduced today); a cause that breaks a reproduced reading is not counted;
    - ReLU, round2 and linear under it on seed 1: "by 2,000 steps" is ReLU's by 0.005 on seed 0;
    - round2 on seed 0 (it may already have run on a CPU; then skipped);
    - GDN's Block run under the shuffled query order on seeds 2 and 1: the flip's seed 2 is undecided until GDN
      has run it (BL's seeds are in);
    - then :func:`device47`'s rest, in its order."""
    three = {"edge_tokens": "single", "edge_embedding": "factored", "output": "per_node",
             "deltaformer_write": "query", "deltaformer_beta": "signed"}
    jobs = grid("dag_reachability", ["deltaformer-exp", "deltaformer-softmax"], [0], three)
    jobs += grid("dag_reachability", [f"deltaformer-{k}" for k in ("relu", "round2", "linear")], [1], three)
    jobs += grid("dag_reachability", ["deltaformer-round2"], [0], three)
    jobs += grid("mqar", ["gdn"], [2, 1], {"variant": "block", "query_order": "shuffled"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device47() if job_name(j) not in names]


def device49():
    """The next plan after :func:`device48` (7 December, thirteenth session), which found on seed 0 (CPU) that the
    head count splits the fast arms under the signed write strength: ReLU is at 0.955 / 0.953 at step 2,000 with
    four / two heads and 0.74 with one, linear at 0.91 with four heads and 0.99 with one (>= 0.95 from step
    1,125).  Two heads may hold both; two at a time:

    - round2 and linear under all three changes, the signed β and two heads on seed 0, which decide "by 2,000
      steps" under one protocol on seed 0 with ReLU's finished CPU run;
    - the three fast arms under it on seed 1;

    (those five ran to their end on a CPU in the fourteenth session, 7 December, and are committed, so the
    campaign skips them: a call runs what follows)
    - ReLU with one head under the signed β to its end (the CPU run stopped at step 2,000);
    - then :func:`device48`'s rest, in its order (BL's Update seeds at lr 1e-2, ...).

    The fifteenth session's three calls (7 December, an H100) finished that ReLU run and BL's and GDN's Update
    seeds at lr 1e-2; a call now starts at GDN's width-256 Base run."""
    two = {"edge_tokens": "single", "edge_embedding": "factored", "output": "per_node",
           "deltaformer_write": "query", "deltaformer_beta": "signed", "n_heads": 2}
    jobs = grid("dag_reachability", ["deltaformer-round2", "deltaformer-linear"], [0], two)
    jobs += grid("dag_reachability", [f"deltaformer-{k}" for k in ("relu", "round2", "linear")], [1], two)
    jobs += grid("dag_reachability", ["deltaformer-relu"], [0], {**two, "n_heads": 1})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device48() if job_name(j) not in names]


def device50():
    """The next plan after :func:`device49` (7 December, sixteenth session).  The shuffled query order
    (``query_order=shuffled``) is named as the Block reading's cause on two seeds of three, and it keeps BL's and
    GDN's Update readings; one generator has to serve every panel, so the order must also be read on the two
    baselines of the other disputed reading (GDN-conv and Mamba2 ≈ 0.60 at 16 updates), which have not run under
    it.  Two at a time:

    - GDN-conv (its pick, the default rate) and Mamba2 (its pick, lr 1e-2) on Update under the shuffled order,
      seed 0: either the order also moves them toward 0.60 (one cause for both disputed readings) or it is read
      as not that reading's cause;
    - GDN-conv's Update run in the default protocol on seeds 1 and 2 (it has run seed 0 alone: 1.000);
    - then :func:`device49`'s rest, in its order.

    The sixteenth session's two calls (an H200) finished the two shuffled runs (GDN-conv 1.000, Mamba2 0.815 at 16
    updates).  The seventeenth session's three calls (an H100) finished GDN-conv's seeds 1 and 2 (1.000 and 0.995
    at 16 updates); GDN at width 256 and Mamba2 at 1e-2 on Base stopped at steps 8,500 and 8,000, so a call now
    starts there (Mamba2 from its carried checkpoint, GDN from the start) and then runs the rest of device49.
    The eighteenth session's three calls (an H100) finished Mamba2's (test 0.000: it did not learn) and took GDN
    to step 14,000 and GDN-conv's Block run to step 12,000; :func:`device51` follows."""
    jobs = grid("mqar", ["gdn-conv"], [0], {"variant": "update", "query_order": "shuffled"})
    jobs += grid("mqar", ["mamba2"], [0], {"variant": "update", "lr": 1e-2, "query_order": "shuffled"})
    jobs += grid("mqar", ["gdn-conv"], [1, 2], {"variant": "update"})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device49() if job_name(j) not in names]


def device51():
    """The next plan after :func:`device50` (7 December, eighteenth session, whose three calls on an H100 finished
    Mamba2's Base run at lr 1e-2: test 0.000, training accuracy 0.005, below 1/P: it did not learn).  Two at a
    time:

    - GDN-conv's Block run, seed 0, from its carried checkpoint (step 12,000 of 18,750, training accuracy 1.00);
    - Mamba2 on Base at lr 3e-3, seed 0: the grid's next rate for the one model whose only Base run did not
      learn (on Update it learned at 1e-2, not at 1e-3; the fresh-data probes bind at 3e-3 with 8,000 steps);
    - the DAG task's default protocol on seeds 1 and 2 (the five DeltaFormers, then the four Transformers, seed 1
      first): its four readings are decided on seed 0 alone ("1 seed(s) per trend"; the one reproduced, exp and
      softmax a little below the fast arms, says "3 needed to confirm"), and a DeltaFormer run takes about 100 s
      in a pair on the GPU against 39 minutes on this machine's CPU (seed 1's linear and round2 runs, which ran
      there in the eighteenth session, and its ReLU, exp and softmax runs, which ran there in the nineteenth, when
      no device was lent, are committed, so a call skips them);
    - then :func:`device50`'s rest, in its order, without GDN's width-256 Base run at the default rate: it
      stopped at step 14,000 of 15,625 with training accuracy 0.006 (below 1/P, the cosine near its end), and
      its checkpoint (4.87 M parameters with two AdamW moments, 58 MB before compression) is more than a call
      returned beside the results and Triton's cache (three times this session) and more than a call carries
      beside the tree and the wheels (about 37 MB), so it can only finish within one session's calls from step 0 (about
      1,450 s of a pair's time): the report lists it as stopped (:func:`assocmem.claims.tasks._mqar_base_stopped`)."""
    from .names import DAG_MODELS

    jobs = grid("mqar", ["gdn-conv"], [0], {"variant": "block"})
    jobs += grid("mqar", ["mamba2"], [0], {"lr": 3e-3})
    jobs += grid("dag_reachability", DAG_MODELS, [1]) + grid("dag_reachability", DAG_MODELS, [2])
    names = {job_name(j) for j in jobs} | {job_name(j) for j in grid("mqar", ["gdn"], [0], {"d_model": 256})}
    return jobs + [j for j in device50() if job_name(j) not in names]


def device52():
    """The next plan after :func:`device51` (7-8 December, twentieth session, which got no device at first and ran
    seed 1's 1-layer Transformer on a CPU).  The DAG task's default protocol decides two of its four readings
    ("Transformers ≈ 0.8 at 5,000 steps", "the fast DeltaFormers end above every Transformer") on seed 0 alone;
    seed 1 has its five DeltaFormers, so its four Transformers are what those two readings wait for.  Neither MQAR
    run at the head of :func:`device51` decides a reading (GDN-conv's Block run and Mamba2's Base run draw Fig. 4c
    and 4a), so they follow.  Two at a time:

    - seed 1's Transformers, the longest first (8, 4, 2, 1 layers: a pair then ends close together; those run on
      a CPU and committed are skipped);
    - GDN-conv's Block run, seed 0, from its carried checkpoint (step 12,000 of 18,750);
    - seed 2's nine DAG models (the DeltaFormers first: with them "exp and softmax a little below" has its third
      seed);
    - then :func:`device51`'s rest, in its order (Mamba2 on Base at 3e-3, then device50's rest)."""
    from .names import DAG_MODELS

    jobs = grid("dag_reachability", [f"transformer-{n}" for n in (8, 4, 2, 1)], [1])
    jobs += grid("mqar", ["gdn-conv"], [0], {"variant": "block"})
    jobs += grid("dag_reachability", DAG_MODELS, [2])
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device51() if job_name(j) not in names]


def device53():
    """The next plan after :func:`device52` (8 December, twentieth session, whose three calls on an H100 finished
    seed 1's 2/4/8-layer DAG Transformers, seed 2's linear / round2 / ReLU DeltaFormers and GDN-conv's Block run,
    and took seed 2's exp and softmax DeltaFormers to steps 4,500 and 4,000, which a CPU then finished).  With
    them every DAG reading has seed 0 and 1 for all nine models and "exp and softmax a little below" its three
    seeds; what seed 2's Transformers would add is a third seed to readings seed 0 already decides false.  Fig. 4c
    (Block) has BL, GDN and GDN-conv but no Mamba2: it never ran on Block.  Two at a time:

    - Mamba2 on Block, seed 0, at lr 1e-2 (its pick on Update, the variant closest to Block: the same lengths;
      at 1e-3 it did not learn Update), for Fig. 4c's fourth model;
    - Mamba2 on Base at lr 3e-3 (its only Base run, at 1e-2, did not learn);
    - then :func:`device52`'s rest, in its order (seed 2's Transformers, ...)."""
    jobs = grid("mqar", ["mamba2"], [0], {"variant": "block", "lr": 1e-2})
    jobs += grid("mqar", ["mamba2"], [0], {"lr": 3e-3})
    names = {job_name(j) for j in jobs}
    return jobs + [j for j in device52() if job_name(j) not in names]


def dag():
    """AM Fig. 7 (issue 16): the four Transformers and the five DeltaFormers, root first then root last."""
    from .names import DAG_MODELS

    return grid("dag_reachability", DAG_MODELS, [0]) + grid("dag_reachability", DAG_MODELS, [0],
                                                            {"root_position": "last"})


def mqar_lr():
    """MQAR (issue 16): a short learning-rate pilot per variant (4 epochs), BL first; the full 40-epoch
    runs then take the lr with the best validation accuracy (``--protocol lr=...``)."""
    jobs = []
    for variant in ("base", "update", "block"):
        for lr in MQAR_LR_GRID:
            jobs += grid("mqar", ["bl"], [0], {"variant": variant, "lr": lr, "epochs": 4})
    return jobs


PLANS = {"paper": priority, "issue14": issue14, "issue14_seeds": issue14_seeds, "issue14_width": issue14_width,
         "issue14_causes": issue14_causes, "dag": dag, "mqar_lr": mqar_lr, "device4": device4, "device4b": device4b, "device4c": device4c, "device5": device5, "device6": device6, "device7": device7, "device8": device8, "device9": device9, "device10": device10, "device11": device11, "device12": device12, "device12b": device12b, "device13": device13, "device14": device14, "device15": device15, "device16": device16, "device17": device17, "device17b": device17b, "device18": device18, "device19": device19, "device20": device20, "device21": device21, "device22": device22, "device23": device23, "device24": device24, "device25": device25, "device26": device26, "device27": device27, "device28": device28, "device29": device29, "device30": device30, "device31": device31, "device32": device32, "device33": device33, "device34": device34, "device35": device35, "device35b": device35b, "device36": device36, "device37": device37, "device38": device38, "device39": device39,
         "device40": device40, "device41": device41, "device42": device42,
         "device43": device43, "device44": device44, "device45": device45,
         "device46": device46, "device47": device47,
         "device48": device48, "device49": device49,
         "device50": device50, "device51": device51, "device52": device52,
         "device53": device53}


def cost(job) -> float:
    """Rough relative device time of one run (a learned-collision run = 1).

    The BL-task runs are launch-bound (about a minute alone on an H200);
    the swap models at length 16 are lighter.  The heavy ones are the
    curriculum arms (5,000 steps, sequences up to 256; the direct arm trains
    at 256 throughout) and the stress test (batch 64 of ``3n`` tokens, a
    ``3n × 3n`` triangular solve per sequence).
    """
    from .train import CURRICULUM_STEPS

    task, model = job[0], job[1]
    if model.startswith("direct-"):
        return 4.0 * CURRICULUM_STEPS / 5000
    if model.startswith("curriculum-"):
        return 3.0 * CURRICULUM_STEPS / 5000
    if model.startswith("stress-"):
        return {128: 1.2, 256: 1.6, 512: 2.5}.get(int(model.rsplit("-", 1)[1]), 2.5)
    if task == "swap_tracking":
        return 0.5
    if task == "random_keys" and len(job) > 3:
        n_max = max(dict(job[3]).get("train_n", (64,)))
        return max(1.0, 0.5 + n_max / 128)          # the sequences grow with the densest training n
    if task == "dag_reachability":
        # measured at 12 runs per H200 (1 December): a DeltaFormer ≈ 220 s, Transformer-8 ≈ 530 s
        return 1.7 if model.startswith("deltaformer-") else 1.0 + int(model.split("-")[1]) / 2.7
    if task == "mqar":
        # measured: a 4-epoch BL Base run made 500 of 1,562 steps in 220 s at 12 per H200
        pr = dict(job[3]) if len(job) > 3 else {}
        per_epoch = {"base": 1.25, "update": 1.0, "block": 0.75}[pr.get("variant", "base")]
        return per_epoch * pr.get("epochs", 40)
    return 1.0


def longest_first(jobs):
    """``jobs`` sorted by decreasing :func:`cost` (stable: equal costs keep their order)."""
    return sorted(jobs, key=lambda j: -cost(j))


def write_partials(jobs, out) -> list[Path]:
    """For every job without a result JSON but with a checkpoint: ``NAME.partial.json`` from the checkpoint
    (loaded with ``weights_only=True``: a file that is not one of ours is refused, never run)."""
    from .train import load_checkpoint

    paths = []
    for job in jobs:
        task, model, seed = job[:3]
        d = Path(out) / task
        name = job_name(job)
        ck_path = d / f"{name}.ckpt.pt"
        if (d / f"{name}.json").exists() or not ck_path.exists():
            continue
        ck = load_checkpoint(ck_path)
        rec = {"task": task, "model": model, "seed": seed, "status": "stopped at the campaign's time limit",
               "step": ck["step"], "wall_s": round(ck.get("wall_s", 0.0), 1), "curve": ck["curve"]}
        if ck.get("curriculum") is not None:
            rec["curriculum"] = ck["curriculum"]
        if ck.get("protocol") is not None:       # the run's choices (checkpoints since 6 December carry them)
            rec["protocol"] = ck["protocol"]
        p = d / f"{name}.partial.json"
        p.write_text(json.dumps(rec, indent=1), encoding="utf-8")
        paths.append(p)
    return paths


def is_heavy(job) -> bool:
    """The runs that ``--heavy-gpus`` keeps apart: ``cost > 1`` (curriculum, direct, stress)."""
    return cost(job) > 1.0


def plan_state(jobs, out) -> list[dict]:
    """Where each run of ``jobs`` stands in the folder ``out`` (read only, nothing is run or written), in the
    plan's order: ``{"run": TASK/NAME, "state": "done" | "partial" | "checkpoint" | "to run", "step", "steps",
    "cost"}``.  ``partial``: a ``NAME.partial.json`` (a call's limit stopped it; ``step`` its last logged step of
    ``steps``, the run's schedule); ``checkpoint``: a checkpoint without either JSON (a call that resumes the
    run starts there); ``cost`` is :func:`cost`, the rough relative device time of the whole run."""
    from .sweep import job_protocol
    from .train import default_steps

    rows = []
    for job in jobs:
        task, model = job[0], job[1]
        d, name = Path(out) / task, job_name(job)
        row = {"run": f"{task}/{name}", "state": "to run", "step": None, "steps": None, "cost": cost(job)}
        if (d / f"{name}.json").exists():
            row["state"] = "done"
        elif (d / f"{name}.partial.json").exists():
            rec = json.loads((d / f"{name}.partial.json").read_text(encoding="utf-8"))
            row.update(state="partial", step=rec.get("step"),
                       steps=default_steps(task, model, job_protocol(job) or None))
        elif (d / f"{name}.ckpt.pt").exists():
            row["state"] = "checkpoint"
        rows.append(row)
    return rows


def print_plan_state(rows, plan: str, out) -> None:
    """:func:`plan_state`'s rows as a table, then one line of counts and of the cost left."""
    for r in rows:
        where = (f"step {r['step']:,} of {r['steps']:,}" if r["state"] == "partial" and r["step"] is not None
                 else "")
        print(f"{r['state']:<10} {r['run']}  {where}".rstrip())
    n = {k: sum(r["state"] == k for r in rows) for k in ("done", "partial", "checkpoint", "to run")}
    left = sum(r["cost"] for r in rows if r["state"] != "done")
    print(f"plan {plan} in {out}: {len(rows)} run(s): {n['done']} done, {n['partial']} stopped part-way, "
          f"{n['checkpoint']} with a checkpoint only, {n['to run']} not started; {left:.1f} cost units left "
          f"(a learned-collision run = 1)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m assocmem.gpu.tasks.campaign",
                                 description="A time-boxed sweep over a named plan, on the same Dask engine as "
                                             "`assocmem gpu sweep` (a local cluster, or --scheduler).")
    ap.add_argument("--out", default="runs", help="output folder (default runs/; the committed results live in "
                                                  "results/)")
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--reserve-s", type=float, default=90.0, help="no new run starts in the last RESERVE_S")
    ap.add_argument("--workers-per-device", type=int, default=6,
                    help="runs at a time per GPU (default 6; on a CPU machine: single-run workers)")
    ap.add_argument("--plan", default="paper", choices=sorted(PLANS),
                    help="which runs: paper (the papers' grids, default protocol) or issue14 (the protocol "
                         "ablations of issue 14)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N runs of the priority list")
    ap.add_argument("--steps", type=int, default=None, help="override every run's steps (tests)")
    ap.add_argument("--batch-size", type=int, default=None, help="override every run's batch size (tests)")
    ap.add_argument("--longest-first", action="store_true",
                    help="start the heaviest runs first (see cost()); the default is the priority order")
    ap.add_argument("--heavy-gpus", type=int, default=0,
                    help="run the heavy runs (curriculum, stress) on the last N GPUs only, the light ones on the "
                         "others (default 0: all runs share every GPU); the heavy GPUs' workers offer GPU_HEAVY "
                         "units instead of GPU")
    ap.add_argument("--heavy-workers-per-device", type=int, default=None,
                    help="runs at a time per heavy GPU (default: --workers-per-device)")
    ap.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="join this Dask cluster (address or scheduler file) instead of starting a local one")
    ap.add_argument("--retries", type=int, default=0, help="try a failed run again K times (default 0)")
    ap.add_argument("--order-file", default=None, metavar="PATH",
                    help="write the runs' TASK/NAME in priority order to PATH, one a line (the device script keeps "
                         "the checkpoints of earlier runs first when not all come back)")
    ap.add_argument("--list", action="store_true",
                    help="print where each run of the plan stands in --out (done, stopped part-way at step N, "
                         "not started) and the cost left, then exit: nothing is run or written")
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.limit is not None and args.limit < 0:
        raise ValueError(f"--limit must be >= 0 (got {args.limit})")
    if args.list:
        if args.order_file:
            raise ValueError("--order-file: --list writes nothing; give one or the other")
        if not Path(args.out).is_dir():
            raise ValueError(f"--out {args.out}: no such folder (the committed results are in results/)")
        print_plan_state(plan_state(PLANS[args.plan]()[: args.limit], args.out), args.plan, args.out)
        return 0
    if args.budget_s <= 0 or args.reserve_s < 0:
        raise ValueError(f"--budget-s must be > 0 and --reserve-s >= 0 (got {args.budget_s:g}, {args.reserve_s:g})")
    if args.reserve_s >= args.budget_s:
        # no run may start in the last RESERVE_S of the budget: nothing would ever start (a device call
        # whose script clamps --budget-s to what the call has left can land here)
        raise ValueError(f"--reserve-s {args.reserve_s:g} leaves no time to start a run in --budget-s "
                         f"{args.budget_s:g}: make it smaller than the budget")
    jobs = PLANS[args.plan]()[: args.limit]
    if args.order_file:
        # the plan's order, before --longest-first reorders the starts: it is the priority
        Path(args.order_file).write_text("".join(f"{j[0]}/{job_name(j)}\n" for j in jobs), encoding="utf-8")
    if args.longest_first:
        jobs = longest_first(jobs)
    log = lambda m: print(f"[{time.time() - t0:6.1f}s] {m}", flush=True)      # noqa: E731
    recs = run_jobs(jobs, out=args.out, steps=args.steps, batch_size=args.batch_size,
                    workers_per_device=args.workers_per_device, heavy_gpus=args.heavy_gpus,
                    heavy_workers_per_device=args.heavy_workers_per_device,
                    heavy=is_heavy if args.heavy_gpus else None, scheduler=args.scheduler, retries=args.retries,
                    deadline=t0 + args.budget_s - args.reserve_s, kill_at=t0 + args.budget_s, log=log)
    ok = sum(r["status"] == "done" for r in recs)
    print(f"campaign: {ok}/{len(jobs)} runs finished in {time.time() - t0:.0f}s", flush=True)
    for p in write_partials(jobs, args.out):
        print(f"partial (stopped at the limit): {p}", flush=True)
    return 0


def _cli() -> int:
    import sys
    try:
        return main()
    except ValueError as exc:          # bad input: one line, exit 2 (as the other entry points)
        print(f"campaign: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(_cli())
