"""Did a fla mixer's decay parameters move by their gradient or by the weight decay alone?

An MQAR checkpoint holds the trained ``A_log`` and ``dt_bias`` of each GDN or Mamba2 layer; the same
seed and protocol rebuild the values they started from (``train`` seeds the model's construction).
AdamW's decoupled decay alone would have scaled each by ``prod_t (1 - lr_t wd)``
(``train.decay_only_factor``); this script puts the three side by side, with the per-token retention
``exp(A softplus(dt_bias))`` each implies (``mqar_models.mixer_dynamics``), and the share of the drift
the decay alone accounts for (1: the parameter moved as far as the decay alone moves it, which a zero
gradient gives, or gradients that net to zero).

    python scripts/mqar_decay_drift.py CKPT --model mamba2 --protocol variant=update --protocol lr=3e-4 \\
        --out results/mqar/diagnostics/NAME.json

The checkpoint itself stays out of the repository (27 MB); the JSON records its step and digest.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path

import torch


def drift(ckpt: dict, model: str, seed: int, overrides: dict) -> dict:
    from assocmem.gpu.tasks import mqar_models as Mm
    from assocmem.gpu.tasks import train as T

    pr = T.resolve_protocol("mqar", overrides, model)
    torch.manual_seed(seed)
    net = T.build_model("mqar", model, pr)
    init = Mm.mixer_dynamics(net)
    if init is None:
        raise ValueError(f"model {model!r} has no A_log / dt_bias to follow (gdn, gdn-conv or mamba2)")
    start = copy.deepcopy(net.state_dict())
    net.load_state_dict(ckpt["model"])
    final = Mm.mixer_dynamics(net)
    opt = T.optimizer_settings("mqar", pr)
    step, steps = int(ckpt["step"]), T.default_steps("mqar", model, pr)
    f = T.decay_only_factor(step, steps, opt["lr"], pr["warmup_steps"], opt["weight_decay"])
    _, no_decay = T.optimizer_groups(net, "mqar", pr)
    # the decay-only prediction: the starting values scaled by f (0 decay for the exempt ones)
    for name, p in net.named_parameters():
        if name.endswith(("A_log", "dt_bias")):
            p.data.copy_(start[name] * (1.0 if name in no_decay else f))
    predicted = Mm.mixer_dynamics(net)
    share = {}
    for name in start:
        if name.endswith(("A_log", "dt_bias")):
            s0, s1 = start[name].double(), ckpt["model"][name].double().cpu()
            pred = s0 * (1.0 if name in no_decay else f)
            denom = (pred - s0).abs().sum()
            share[name] = None if float(denom) == 0 else float(((s1 - s0) * (pred - s0).sign()).sum() / denom)
    return {"model": model, "seed": seed, "protocol": pr, "step": step, "steps": steps,
            "optimizer": opt, "no_weight_decay": no_decay, "decay_only_factor": f,
            "init": init, "final": final, "decay_only": predicted,
            "drift_share_of_decay_only": share,
            "read": "share: the drift toward 0 over the drift the weight decay alone gives (1: as far as the "
                    "decay alone, i.e. the gradients net to about 0; 0: it stayed put); retention: what one token "
                    "keeps of the state at the bias (input term 0)"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--model", required=True, choices=("gdn", "gdn-conv", "mamba2"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    overrides = {}
    for kv in a.protocol:
        k, sep, v = kv.partition("=")
        if not sep:
            ap.error(f"--protocol {kv!r}: expected KEY=VALUE")
        overrides[k] = v
    if a.out.exists():
        ap.error(f"--out {a.out}: exists; results are not overwritten")
    if not a.checkpoint.is_file():
        ap.error(f"checkpoint {a.checkpoint}: no such file")
    try:
        ck = torch.load(a.checkpoint, map_location="cpu", weights_only=False)
        rec = drift(ck, a.model, a.seed, overrides)
    except ValueError as e:
        ap.error(str(e))
    rec["checkpoint"] = {"name": a.checkpoint.name,
                         "sha256": hashlib.sha256(a.checkpoint.read_bytes()).hexdigest()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(a.out)
    print(json.dumps({k: rec[k] for k in ("step", "decay_only_factor", "drift_share_of_decay_only")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
