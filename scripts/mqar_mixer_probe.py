"""Can a mixer bind keys to values in context?  A small MQAR probe on fresh data (no fixed pool).

The 40-epoch MQAR runs train on a fixed pool (120k Block sequences), which a model can
partly memorise: BL's Block run ended at training accuracy 0.64 and test accuracy about
1/P (0.49 at 2 pairs, 0.09 at 8), i.e. it picked one of the sequence's values without
knowing which.  This probe trains each mixer of the MQAR backbone on a fresh batch every
step, so memorising cannot help, with a small shared vocabulary (default 256) so that a
CPU run of a few thousand steps says something, and reports the query accuracy on a
held-out test set per number of pairs.  It isolates the mixer's capacity to bind in
context from the pool and the 8,192-token vocabulary; it is not the paper's protocol.

    python scripts/mqar_mixer_probe.py --variant block --steps 3000 --out probe.json \\
        bl bl:decay gdn

``--backbone`` is the ``backbone`` protocol option: ``zoology`` (the default), Zoology's
gated short convolution (width 3) before each mixer; ``mlp``, ours before 2 December, an
MLP after it (the probes in results/mqar/probes/ from before then record ``mlp``).
A spec is ``bl``, ``bl:decay`` (the ``bl_decay`` protocol option: ``A_t = α_t I``),
``gdn``, ``gdn-conv`` or ``mamba2`` (the last three need flash-linear-attention).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch


def build(spec: str, n_tokens: int, n_classes: int, d_model: int, backbone: str, mamba2_chunk: int = 0,
          init: str = "torch"):
    from assocmem.gpu.tasks.mqar_models import MQARModel

    name, _, opt = spec.partition(":")                  # validated by main()
    kw = {"decay": opt == "decay"} if name == "bl" else {}
    if name == "mamba2" and mamba2_chunk:
        # the SSD scan's chunk: the same model and numbers, but fla's torch scan on a CPU pads every
        # sequence to a whole chunk and is quadratic in it (0.53 s a step at 16 against 2.2 at 64, T = 24)
        kw["chunk_size"] = mamba2_chunk
    return MQARModel(n_tokens, n_classes, d_model=d_model, n_layers=2, mixer=name, backbone=backbone, init=init,
                     **kw)


@torch.no_grad()
def evaluate(net, cfgs, n: int, seed: int, device) -> list[dict]:
    from assocmem.gpu.tasks import mqar as Mq

    rows = []
    net.eval()
    for i, cfg in enumerate(cfgs):
        b = Mq.mqar_batch(cfg, n, generator=torch.Generator().manual_seed(seed + i))
        logits = net(b.tokens.to(device), b.is_write.to(device))
        mask = b.labels != Mq.IGNORE
        acc = float((logits.argmax(-1).cpu()[mask] == b.labels[mask]).float().mean())
        rows.append({"n_pairs": cfg.n_pairs, "n_updates": cfg.n_updates, "seq_len": cfg.seq_len, "acc": acc,
                     "chance_one_of_values": 1.0 / cfg.n_pairs})
    net.train()
    return rows


def run(spec: str, a, device) -> dict:
    from assocmem.gpu.tasks import mqar as Mq

    torch.manual_seed(a.seed)
    if a.config:                           # one configuration, trained and tested on (a small-scale probe)
        T, P, b = (int(x) for x in a.config.split(","))
        cfgs, w = [Mq.MQARConfig(T, P, block_size=b, vocab_size=a.vocab)], [1.0]
        test = cfgs
    else:
        cfgs, w = Mq.train_configs(a.variant, vocab_size=a.vocab)
        test = Mq.testset_configs(a.variant, vocab_size=a.vocab)
    net = build(spec, cfgs[0].n_tokens, a.vocab, a.d_model, a.backbone, a.mamba2_chunk, a.init).to(device)
    from assocmem.gpu.tasks.train import lr_factor, optimizer_settings
    st = optimizer_settings("mqar", {"lr": a.lr, "warmup_steps": a.warmup})    # MQAR's AdamW (App. F)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, betas=tuple(st["betas"]), weight_decay=st["weight_decay"])
    gen = torch.Generator().manual_seed(a.seed)
    pick = torch.tensor(w, dtype=torch.float64)
    curve, t0 = [], time.perf_counter()
    from assocmem.gpu.tasks.mqar_models import mqar_loss
    done = 0
    for step in range(a.steps):
        if a.max_s and time.perf_counter() - t0 > a.max_s:
            print(f"{spec}: stopped at --max-s {a.max_s} after {step} steps", file=sys.stderr, flush=True)
            break
        for g in opt.param_groups:
            g["lr"] = a.lr * lr_factor(step, a.steps, a.warmup)      # the training loop's own schedule
        cfg = cfgs[int(torch.multinomial(pick, 1, generator=gen))]
        b = Mq.mqar_batch(cfg.replace(pad_to=None), a.batch_size, generator=gen)
        logits = net(b.tokens.to(device), b.is_write.to(device))
        loss, acc = mqar_loss(logits, b.labels.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), st["clip"])
        opt.step()
        done = step + 1
        if (step + 1) % a.log_every == 0 or step + 1 == a.steps:
            curve.append({"step": step + 1, "loss": float(loss), "acc": float(acc)})
            print(f"{spec} step {step + 1}/{a.steps} loss {float(loss):.3f} acc {float(acc):.3f} "
                  f"({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    import dataclasses
    return {"spec": spec, "optimizer": st, "batches": "one configuration per step, drawn by the variant's weights",
            "train_configs": [dataclasses.asdict(c) for c in cfgs], "train_weights": list(w),
            "test_configs": [dataclasses.asdict(c) for c in test], "steps_done": done, "wall_s": time.perf_counter() - t0, "curve": curve,
            "test": evaluate(net, test, a.n_test, 10_000 + a.seed, device)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="+")
    p.add_argument("--variant", default="block", choices=("update", "block"))
    from assocmem.gpu.tasks.mqar_models import BACKBONES
    from assocmem.gpu.tasks.train import PROTOCOL
    p.add_argument("--backbone", default=PROTOCOL["mqar"]["backbone"][0], choices=BACKBONES,
                   help="the MQAR backbone (the backbone protocol option; default: the protocol's)")
    from assocmem.gpu.tasks.mqar_models import MQAR_INITS
    p.add_argument("--init", default=PROTOCOL["mqar"]["init"][0], choices=MQAR_INITS,
                   help="the model's initialisation (the init protocol option; default: the protocol's)")
    p.add_argument("--config", default="", help="T,P,b: train and test on this one configuration instead")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-test", type=int, default=256)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--max-s", type=float, default=0.0, help="stop a run's training after this many seconds")
    p.add_argument("--mamba2-chunk", type=int, default=0,
                   help="Mamba2's SSD chunk size (0: the model's default, 64); smaller is faster on a CPU, same math")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    out = Path(a.out)
    if out.exists() or out.with_suffix(".tmp").exists():
        p.error(f"--out {out}: exists; this probe never overwrites a result")
    from assocmem.gpu.tasks.names import MQAR_MODELS
    for spec in a.specs:
        name, _, opt = spec.partition(":")
        if name not in MQAR_MODELS or (opt and (name, opt) != ("bl", "decay")):
            p.error(f"spec {spec!r}: expected one of {', '.join(MQAR_MODELS)}, or bl:decay")
    if a.mamba2_chunk < 0:
        p.error(f"--mamba2-chunk {a.mamba2_chunk}: must be >= 0")
    if a.config:
        try:
            T, P, b = (int(x) for x in a.config.split(","))
            from assocmem.gpu.tasks import mqar as Mq
            Mq.MQARConfig(T, P, block_size=b, vocab_size=a.vocab)
        except ValueError as e:
            p.error(f"--config {a.config}: {e if ',' in a.config else 'expected T,P,b'}")
    device = torch.device(a.device)
    torch.set_num_threads(a.threads) if a.threads else None
    import os

    from assocmem.provenance import git_commit
    res = {"probe": "mqar_mixer_probe", "settings": {k: v for k, v in vars(a).items() if k != "specs"},
           # the checkout's commit, or on a device's copy (no git) the ASSOCMEM_COMMIT it was made from
           "commit": os.environ.get("ASSOCMEM_COMMIT") or git_commit(), "torch": torch.__version__,
           "device_name": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "runs": []}
    out.parent.mkdir(parents=True, exist_ok=True)
    for s in a.specs:                     # written after every run: a run cut by the call's limit keeps the others
        res["runs"].append(run(s, a, device))
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1))
        tmp.replace(out)
    for r in res["runs"]:
        print(r["spec"], " ".join(f"P{t['n_pairs']}U{t['n_updates']}:{t['acc']:.2f}" for t in r["test"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
