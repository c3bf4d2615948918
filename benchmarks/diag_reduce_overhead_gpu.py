"""Where ``torch.compile(mode="reduce-overhead")`` of a whole model fails, and what avoids it.

Issue 11's strict xfail (``tests/test_train_gpu.py::test_reduce_overhead_mode_trains``, H200,
torch 2.11): Inductor's CUDA-graph trees report "accessing tensor output of CUDAGraphs that has
been overwritten by a subsequent run" at a gradient addition of tok_emb's output. This runs the
test's loop (the zoo's micro model, 8 steps on one batch, fused AdamW, clip, zero_grad) under a
few variants, each in its own try, and prints one row per variant: whether it trained (the
last loss below the first), the losses, and the error's first line. Variants: bf16 (not
converted) and nvfp4 / fp8_blockwise converted; ``zero_grad(set_to_none=True)``; tied or untied
embedding and head; the step marked or not; the loss cloned out of the graph. GPU only.

    python benchmarks/diag_reduce_overhead_gpu.py [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import traceback

import torch
import torch.nn.functional as F

import microscale as ms
from microscale.train.model import build_model


def _model(recipe: str, tie: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model("micro", max_seq_len=256, tie_head=tie)
    if recipe != "bf16":
        ms.convert(model, recipe, keep_high_precision=[])
    return model.cuda()


def _run(recipe: str, tie: bool = True, none: bool = False, mark: bool = True,
         clone: bool = False, steps: int = 8) -> dict:
    torch._dynamo.reset()
    model = _model(recipe, tie)
    run = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randint(0, 256, (4, 256), device="cuda", generator=g)
    y = torch.roll(x, -1, 1)
    losses = []
    for _ in range(steps):
        if mark:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = run(x)
        if clone:
            logits = logits.clone()
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=none)
        losses.append(loss.item())
    return {"trained": losses[-1] < losses[0], "losses": [round(v, 4) for v in losses]}


VARIANTS = [
    ("bf16", {}), ("bf16", {"none": True}), ("bf16", {"tie": False}),
    ("nvfp4", {}), ("nvfp4", {"none": True}), ("nvfp4", {"tie": False}),
    ("nvfp4", {"tie": False, "none": True}), ("nvfp4", {"clone": True}),
    ("fp8_blockwise", {"none": True}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for recipe, kw in VARIANTS:
        row = {"recipe": recipe, **{k: kw.get(k, d) for k, d in
                                    (("tie", True), ("none", False), ("clone", False))}}
        try:
            row.update(_run(recipe, **kw))
            row["error"] = ""
        except Exception as e:      # noqa: BLE001 -- a diagnostic: every variant's outcome
            row.update(trained=False, losses=[],
                       error=(str(e).strip().splitlines() or [type(e).__name__])[0][:160])
            row["where"] = "".join(traceback.format_exc().splitlines(True)[-6:])[:600]
        rows.append(row)
        print(f"{recipe:14} tie={row['tie']!s:5} none={row['none']!s:5} clone={row['clone']!s:5}"
              f" trained={row['trained']!s:5} {row['losses'][-1:] or ''} {row['error']}",
              flush=True)
    out = {"bench": "diag_reduce_overhead", "torch": torch.__version__, "rows": rows}
    if args.out:
        from microscale.train.checkpoint import atomic_write_text
        atomic_write_text(args.out, json.dumps(out, indent=1))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
