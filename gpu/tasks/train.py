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
from . import data as Dt
from . import models as Mo

from . import curriculum as Cu
from .names import CURRICULUM_MODELS, STRESS_MODELS, STRESS_NS, TASKS, is_curriculum_model  # noqa: F401
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
}


def task_def(task: str) -> TaskDef:
    V.choice("task", task, TASKS)
    return TASK_DEFS[task]


def build_model(task: str, model: str) -> torch.nn.Module:
    td = task_def(task)
    if model not in td.models:
        raise ValueError(f"model for {task} must be one of {', '.join(td.models)} (got {model!r})")
    if task == "collision_recall":
        return Mo.AddressBackbone(Dt.COLLISION_FEATURES, 2 * Dt.COLLISION_PAIRS, model)
    if task == "random_keys":
        return Mo.AddressBackbone(Dt.RK_FEATURES, Dt.RK_LABELS, model)
    if model.startswith("stress-"):
        _, kappa, n = model.split("-")
        return Mo.FixedKeySwapModel(int(n), 128, kappa1=kappa)
    if is_curriculum_model(model):
        # a 1-layer DeltaFormer (κ2 softmax); "nope": no position encoding anywhere; unit keys in κ1
        # (lengths up to 256: with raw keys the u-recursion overflows at init) and β ∈ (0, 2)
        # (with unit keys β < 1 cannot learn the swaps); see AttentionLayer
        _, kappa, pos = model.split("-")
        return Mo.swap_model(f"deltaformer-{kappa}", pos=pos, key_norm=True, beta_max=CURRICULUM_BETA_MAX)
    return Mo.swap_model(model)


# ---------------------------------------------------------------------------
# batches and losses
# ---------------------------------------------------------------------------
def _to(batch, device):
    return type(batch)(*(x.to(device, non_blocking=True) for x in batch))


def sample_train(task: str, model: str, batch_size: int, gen: torch.Generator, length: Optional[int] = None):
    """One training batch; ``length`` overrides the swap-tracking length (the curriculum's current stage)."""
    td = TASK_DEFS[task]
    if task == "collision_recall":
        nfs = td.train_settings["n_f"]
        n_f = nfs[int(torch.randint(0, len(nfs), (1,), generator=gen))]
        return Dt.collision_batch(batch_size, n_f=n_f, n_b=td.train_settings["n_b"],
                                  rho_range=tuple(td.train_settings["rho_range"]), generator=gen)
    if task == "random_keys":
        ns = td.train_settings["n"]
        n = ns[int(torch.randint(0, len(ns), (1,), generator=gen))]
        return Dt.random_keys_batch(batch_size, n=n, generator=gen)
    if model.startswith("stress-"):
        return Dt.swap_stress_batch(batch_size, n=int(model.split("-")[2]), generator=gen)
    return Dt.swap_batch(batch_size, n_elems=td.train_settings["n_elems"],
                         length=td.train_settings["length"] if length is None else length, generator=gen)


def forward(net, task: str, batch):
    """Logits ``[B, T, C]`` and labels ``[B, T]`` for any task batch."""
    if task in ("collision_recall", "random_keys"):
        return net(batch.x, batch.keys), batch.labels
    if isinstance(batch, Dt.SwapStressBatch):
        return net(batch.pos_a, batch.pos_b, batch.elem), batch.labels
    return net(batch.tokens), batch.labels


def loss_and_acc(logits, labels):
    """Cross-entropy over labelled tokens (``labels != -100``) and their accuracy."""
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
def _batched(net, task, make, n_seqs: int, chunk: int, device):
    """Run ``make(b, gen)`` batches (fixed test generator) and concatenate per-token outputs."""
    gen = torch.Generator().manual_seed(EVAL_SEED)
    outs = []
    done = 0
    while done < n_seqs:
        b = min(chunk, n_seqs - done)
        batch = make(b, gen)
        logits, _ = forward(net, task, _to(batch, device))
        outs.append((batch, logits.float().cpu()))
        done += b
    return outs


def evaluate(net, task: str, model: str, settings: dict, device, chunk: int = 64) -> dict:
    net.eval()
    try:
        if task == "collision_recall":
            return _eval_collision(net, settings, device, chunk)
        if task == "random_keys":
            return _eval_random_keys(net, settings, device, chunk)
        return _eval_swap(net, model, settings, device, chunk)
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


def _eval_collision(net, s, device, chunk):
    res = {"writes": [], "overlap": []}
    n = s["n_seqs"]

    def run(n_f, rho):
        outs = _batched(net, "collision_recall",
                        lambda b, g: Dt.collision_batch(b, n_f=n_f, rho=rho, generator=g), n, chunk, device)
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


def _eval_random_keys(net, s, device, chunk):
    res = []
    for n in s["n"]:
        outs = _batched(net, "random_keys", lambda b, g: Dt.random_keys_batch(b, n=n, generator=g),
                        s["n_seqs"], chunk, device)
        logits = torch.cat([o[1] for o in outs])
        labels = torch.cat([o[0].labels for o in outs])
        mask = labels != Dt.IGNORE
        ce = F.cross_entropy(logits[mask].double(), labels[mask], reduction="none")
        acc = (logits[mask].argmax(-1) == labels[mask]).double()
        res.append({"n": n, "n_over_D": n / Dt.RK_D, "ce": float(ce.mean()),
                    "ce_se": float(ce.std() / math.sqrt(ce.numel())), "acc": float(acc.mean()),
                    "acc_se": float(acc.std() / math.sqrt(acc.numel()))})
    return {"crowding": res}


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


def _eval_swap(net, model, s, device, chunk):
    if is_curriculum_model(model):
        return _eval_swap_lengths(net, s, device, chunk)
    if model.startswith("stress-"):
        n = int(model.split("-")[2])
        make = lambda b, g: Dt.swap_stress_batch(b, n=n, generator=g)   # noqa: E731
    else:
        make = lambda b, g: Dt.swap_batch(b, generator=g)              # noqa: E731
    n_seqs = min(s["n_seqs"], 256) if model.startswith("stress-") else s["n_seqs"]
    outs = _batched(net, "swap_tracking", make, n_seqs, min(chunk, 64) if model.startswith("stress-") else chunk,
                    device)
    logits = torch.cat([o[1] for o in outs])
    labels = torch.cat([o[0].labels for o in outs])
    mask = labels != Dt.IGNORE
    acc = (logits.argmax(-1)[mask] == labels[mask]).double()
    per_pos = []
    if not model.startswith("stress-"):
        per_pos = ((logits.argmax(-1) == labels).double().mean(0)).tolist()
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


def run_name(model: str, seed: int) -> str:
    return f"{model}_s{seed}"


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


def train_length(task: str, model: str, length: Optional[int] = None) -> int:
    """Tokens of the longest training sequence (``length``: the curriculum's last stage)."""
    td = task_def(task)
    if task == "collision_recall":
        return Dt.collision_length(max(td.train_settings["n_f"]), td.train_settings["n_b"])
    if task == "random_keys":
        return max(td.train_settings["n"]) + Dt.RK_QUERIES
    if model.startswith("stress-"):
        return 3 * int(model.split("-")[2])
    if is_curriculum_model(model):
        return int(length if length is not None else Cu.DEFAULT_LENGTHS[-1])
    return td.train_settings["length"]


def train_memory(task: str, model: str, batch_size: Optional[int] = None, length: Optional[int] = None) -> float:
    """Rough peak bytes of one training step: ``B T (120 kB + 200 B T)``.

    Measured on CPU (forward + backward + AdamW, one step): 14-108 kB per token
    for the models here at their training lengths, softmax attention growing
    with ``T``; the constants bound those with room.
    """
    td = task_def(task)
    if batch_size is None:
        batch_size = 64 if model.startswith("stress-") else td.batch_size
    T = train_length(task, model, length)
    return float(batch_size) * T * (120e3 + 200.0 * T)


def memory_limit(device: str) -> float:
    """The limit a run's estimate must stay under: the GPU's memory, or the CPU budget."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return 0.9 * torch.cuda.mem_get_info(torch.device(device))[1]
    from assocmem.budget import memory_limit as cpu_limit
    return cpu_limit()


def check_memory(task: str, model: str, batch_size: Optional[int], length: Optional[int], device: str) -> None:
    from assocmem.budget import fmt_bytes

    need, lim = train_memory(task, model, batch_size, length), memory_limit(device)
    if need > lim:
        # blame the curriculum length when the batch alone would fit
        if length is not None and train_memory(task, model, batch_size, None) <= lim:
            name, val = "curriculum lengths", length
        else:
            name, val = "batch_size", batch_size if batch_size is not None else "(default)"
        raise V.ParamError(name, f"{name} {val}: a training step would need about {fmt_bytes(need)} of memory, "
                                 f"over the limit of {fmt_bytes(lim)} on {device}")


# One CPU core, forward + backward + AdamW: measured 1-20 us per token for these models (more on a
# loaded machine), plus a per-step overhead; the fast end, so a refusal is never a close call.
CPU_SECONDS_PER_TOKEN, CPU_SECONDS_PER_STEP = 2e-5, 0.02


def check_time(task: str, model: str, steps: Optional[int], batch_size: Optional[int], length: Optional[int],
               device: str) -> None:
    """On a CPU, refuse a run estimated past the time limit (``ASSOCMEM_MAX_SECONDS``); GPU runs are not limited."""
    if device.startswith("cuda"):
        return
    from assocmem.budget import fmt_seconds, time_limit

    td = task_def(task)
    n = steps if steps is not None else (CURRICULUM_STEPS if is_curriculum_model(model) else td.steps)
    B = batch_size if batch_size is not None else (64 if model.startswith("stress-") else td.batch_size)
    T = train_length(task, model, length)
    need, lim = n * (CPU_SECONDS_PER_STEP + CPU_SECONDS_PER_TOKEN * B * T), time_limit()
    if need > lim:
        shown = f"--steps {n}{'' if steps is not None else ' (default)'}, --batch-size {B}" \
                f"{'' if batch_size is not None else ' (default)'}"
        raise V.ParamError("steps", f"{shown}: training on the CPU would take about {fmt_seconds(need)} "
                                    f"({T} tokens a sequence), over the limit of {fmt_seconds(lim)} "
                                    f"(ASSOCMEM_MAX_SECONDS raises it; give fewer --steps or a smaller --batch-size)")


def preflight(task: str, model: str, *, seed: int = 0, steps: Optional[int] = None,
              batch_size: Optional[int] = None, device: str = "cpu", out="runs", resume: bool = False,
              force: bool = False, length: Optional[int] = None) -> None:
    """Everything a run can be refused for, before it starts: model, device,
    memory, the output folder, an existing result (``force`` overwrites), the
    checkpoint of ``resume`` (ours, and not past ``steps``)."""
    from assocmem.outputs import output_dir

    td = task_def(task)
    if model not in td.models:
        raise V.ParamError("model", f"model for {task} must be one of {', '.join(td.models)} (got {model!r})")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise V.ParamError("device", "device: cuda requested but torch sees no GPU (use --device cpu or auto)")
    check_memory(task, model, batch_size, length, device)
    check_time(task, model, steps, batch_size, length, device)
    output_dir("--out", out)
    res = Path(out) / task / f"{run_name(model, seed)}.json"
    if res.exists() and not force:
        raise V.ParamError("force", f"--out: the result {res} exists; use --force to overwrite it "
                                    f"(or choose another --out or --seed)")
    if resume:
        ck = load_checkpoint(Path(out) / task / f"{run_name(model, seed)}.ckpt.pt")
        total = steps if steps is not None else (CURRICULUM_STEPS if is_curriculum_model(model) else td.steps)
        if int(ck["step"]) > total:
            raise V.ParamError("steps", f"steps {total} is below the checkpoint's step {int(ck['step'])} "
                                        f"(give --steps >= {int(ck['step'])})")


def train(task: str, model: str, *, seed: int = 0, steps: Optional[int] = None, batch_size: Optional[int] = None,
          device: str = "cuda", out: str | Path = "runs", resume: bool = False, eval_mode: str = "auto",
          ckpt_every: int = 500, log_every: int = 25, progress: bool = True,
          eval_chunk: Optional[int] = None, curriculum: Optional[Cu.CurriculumSchedule] = None) -> dict:
    """Train one model on one task and write its JSON result; returns the result dict.

    ``curriculum``: the length schedule of a ``curriculum-*``/``direct-*`` swap
    model (default :func:`curriculum.schedule_for`, the paper's 32 → 256).
    """
    td = task_def(task)
    if model not in td.models:
        raise ValueError(f"model for {task} must be one of {', '.join(td.models)} (got {model!r})")
    seed = V.count("seed", seed, 0)
    is_cur = is_curriculum_model(model)
    if curriculum is not None and not is_cur:
        raise ValueError(f"curriculum: only the curriculum-*/direct-* swap models take a schedule (got {model!r})")
    sched = (curriculum if curriculum is not None else Cu.schedule_for(model)) if is_cur else None
    if steps is None:
        steps = CURRICULUM_STEPS if is_cur else td.steps
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
    name = run_name(model, seed)
    ckpt_path = out_dir / f"{name}.ckpt.pt"

    torch.manual_seed(seed)
    net = build_model(task, model).to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(seed)
    step0, curve, wall_before = 0, [], 0.0
    win_sum0, win_n0 = 0.0, 0
    if resume:
        ck = load_checkpoint(ckpt_path, dev)
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        gen.set_state(ck["gen"])
        step0, curve, wall_before = ck["step"], ck["curve"], ck.get("wall_s", 0.0)
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

    def save_ckpt(step):
        tmp = ckpt_path.with_suffix(".tmp")
        extra = {}
        if sched is not None:
            extra = {"curriculum": sched.state_dict(), "curriculum_window": (float(win_sum), win_n)}
        torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(), "step": step,
                    "curve": curve, "wall_s": wall_before + time.perf_counter() - t0, **extra}, tmp)
        os.replace(tmp, ckpt_path)

    for step in range(step0, steps):
        length = sched.length if sched is not None else None
        batch = _to(sample_train(task, model, batch_size, gen, length=length), dev)
        logits, labels = forward(net, task, batch)
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
        ev = evaluate(net, task, model, settings, dev, chunk=eval_chunk)
    eval_s = time.perf_counter() - t1

    from assocmem.provenance import provenance
    extra = {"device": device_name(dev), "seed": seed, "wall_s": round(train_s + eval_s, 3),
             "train_s": round(train_s, 3), "eval_s": round(eval_s, 3)}
    if os.environ.get("ASSOCMEM_COMMIT"):
        # a copy of the tree without .git (the GPU machine): the commit it was sent from
        extra["source_commit"] = os.environ["ASSOCMEM_COMMIT"]
    if task in ("collision_recall", "random_keys") and model == "bl":
        extra["bl_op"] = Mo.resolve_bl_op()[1] + (" (triton)" if dev.type == "cuda" or
                                                   os.environ.get("TRITON_INTERPRET") == "1" else "")
    result = {
        "task": task, "model": model, "seed": seed, "steps": steps, "batch_size": batch_size,
        "source": td.source, "optimizer": {"name": "AdamW", "lr": 3e-4, "weight_decay": 1e-4, "clip": 1.0},
        "train_settings": td.train_settings if sched is None else
        {"n_elems": td.train_settings["n_elems"], "curriculum": sched.config(), "switches": sched.switches,
         "final_stage": sched.stage, "final_length": sched.length,
         "deltaformer": {"key_norm": True, "beta_max": CURRICULUM_BETA_MAX}},
        "eval_mode": eval_mode,
        "n_params": sum(p.numel() for p in net.parameters() if p.requires_grad),
        "curve": curve, "eval": ev, "provenance": provenance(extra),
    }
    path = out_dir / f"{name}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return result
