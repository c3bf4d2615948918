"""Diagnose a precision switch under compiled blocks and the step's CUDA graph (GPU only).

Session 9's 125m nvfp4 run switched to bf16 GEMMs (``--switch-step decay --switch-mode all``,
``--compile on --cuda-graph``) trained worse after the switch and ran faster than bf16. This
script trains a few steps across a switch in several settings and, at every step, compares the
gradients the step produced (before the optimizer applies them) with the gradients an eager
forward + backward of the same weights and batch gives (``torch.compiler.set_stance
("force_eager")``): per parameter, cosine similarity and norm ratio. It prints the parameters
whose gradient disagrees, the step times and the losses, and ends with one JSON line.

    python benchmarks/diag_switch_gpu.py --model 125m --steps 9 --switch 4
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def _grads(params):
    return [None if p.grad is None else p.grad.detach().float().clone() for p in params]


def _compare(names, got, ref):
    bad, worst = [], 1.0
    for name, g, r in zip(names, got, ref):
        if (g is None) != (r is None):
            bad.append((name, "grad missing" if g is None else "grad unexpected", None))
            continue
        if g is None:
            continue
        cos = torch.nn.functional.cosine_similarity(g.flatten(), r.flatten(), dim=0).item()
        ratio = (g.norm() / r.norm().clamp_min(1e-30)).item()
        worst = min(worst, cos)
        if cos < 0.99:
            bad.append((name, round(cos, 4), round(ratio, 4)))
    return worst, bad


def run(setting: str, args, data) -> dict:
    from microscale.train.trainer import TrainConfig, Trainer

    compile_, graph = {"eager": ("off", False), "compiled": ("on", False),
                       "compiled_graph": ("on", True), "eager_graph": ("off", True)}[setting]
    cfg = TrainConfig(recipe=args.recipe, model=args.model, steps=args.steps,
                      batch_size=args.batch, seq_len=args.seq, switch_step=args.switch,
                      switch_mode=args.mode, compile=compile_, cuda_graph=graph,
                      eval_every=10_000, ckpt_every=0, out=f"/tmp/diag_{setting}",
                      device=args.device, progress=False, log_every=1, max_bytes=args.max_bytes,
                      grad_clip=0.0)
    tr = Trainer(cfg, data=data)
    tr._start()
    tr.model.train()
    named = list(tr.model.named_parameters())
    names, params = [n for n, _ in named], [p for _, p in named]
    rows, current = [], {}
    sync = torch.cuda.synchronize if tr.device.type == "cuda" else (lambda: None)
    step_fn = tr.optimizer.step

    def checked_step(*a, **k):
        s = current["s"]
        got = _grads(params)
        held = [p.grad for p in params]
        for p in params:
            p.grad = None
        x, y = (t.to(tr.device) for t in tr._batch(s))
        with torch.compiler.set_stance("force_eager"):
            tr._loss_backward(x, y)
        ref = _grads(params)
        for p, g in zip(params, held):
            p.grad = g
        current["worst"], current["bad"] = _compare(names, got, ref)
        return step_fn(*a, **k)

    tr.optimizer.step = checked_step
    for s in range(cfg.steps):
        current["s"] = s
        sync()
        t0 = time.perf_counter()
        loss, norm, _ = tr._train_step(s)
        sync()
        dt = time.perf_counter() - t0
        prec = sorted({getattr(m, "precision", None) for m in tr.model.modules()
                       if hasattr(m, "hp_fprop")})
        rows.append({"step": s, "loss": round(loss, 5), "grad_norm": round(norm, 5),
                     "worst_cos": round(current["worst"], 5), "n_bad": len(current["bad"]),
                     "bad": current["bad"][:6], "precision": prec, "ms": round(dt * 1e3, 1)})
        print(setting, json.dumps(rows[-1]), flush=True)
    if tr._step_graph is not None:
        tr._step_graph.reset()
    return {"setting": setting, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="125m")
    ap.add_argument("--recipe", default="nvfp4_no_sr")
    ap.add_argument("--mode", default="all", choices=("all", "fprop"))
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--switch", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--max-bytes", type=int, default=2_000_000)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--settings", default="compiled_graph,compiled,eager_graph")
    args = ap.parse_args()
    from microscale.train.data import load_data

    data = load_data("stdlib", "/tmp/diag_cache", args.max_bytes)
    results = [run(s, args, data) for s in args.settings.split(",")]
    summary = {r["setting"]: {"worst_cos_after_switch": min(
        (row["worst_cos"] for row in r["rows"] if row["step"] >= args.switch), default=None),
        "losses": [row["loss"] for row in r["rows"]]} for r in results}
    print(json.dumps({"diag_switch": summary, "args": vars(args)}))


if __name__ == "__main__":
    main()
