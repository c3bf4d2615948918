"""What a training step keeps for backward, per recipe: bytes and the largest tensors.

Runs one forward of a zoo model under ``torch.autograd.graph.saved_tensors_hooks`` (eager, the
reference backend on CPU or the kernels on CUDA) and sums the distinct storages autograd saves,
parameters excluded (the optimizer's memory is the same for every recipe). The peak memory of a
step is that plus parameters, gradients, optimizer state and backward's temporaries; this is the
part the recipes change, so it says where the saving is and where it is not.

    python benchmarks/bench_saved.py --model 50m --batch 2 --seq 256
    python benchmarks/bench_saved.py --recipes bf16,fp8_tensorwise,torchao_tensorwise

``torchao_tensorwise`` / ``torchao_rowwise``: torchao's float8 training on the same model's
linear layers (an optional benchmark extra), for a tensor-by-tensor comparison with the peer.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import platform

import torch


def saved_bytes(model_name: str, recipe: str, batch: int, seq: int, device: str):
    """(total bytes, {(dtype, shape): bytes}) autograd saves in one forward."""
    import microscale as ms
    from microscale.train.model import build_model

    torch.manual_seed(0)
    model = build_model(model_name, 256, max_seq_len=seq)
    if recipe.startswith("torchao_"):       # the peer (pip install torchao): its float8 linears
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        cfg = Float8LinearConfig.from_recipe_name(recipe.split("_", 1)[1])
        convert_to_float8_training(model, config=cfg, module_filter_fn=lambda m, fqn: isinstance(
            m, torch.nn.Linear) and m.in_features % 16 == 0 and m.out_features % 16 == 0)
    elif recipe != "bf16":
        ms.convert(model, recipe)
    model.to(device)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}
    kinds: collections.Counter = collections.Counter()

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in seen and ptr not in params:
            seen[ptr] = t.untyped_storage().nbytes()
            kinds[(str(t.dtype).replace("torch.", ""), tuple(t.shape))] += seen[ptr]
        return t

    x = torch.randint(0, 256, (batch, seq), device=device)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        model(x)
    return sum(seen.values()), kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="50m")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--recipes", default="bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4")
    ap.add_argument("--top", type=int, default=4)
    args = ap.parse_args()
    rows, base = [], None
    for recipe in args.recipes.split(","):
        total, kinds = saved_bytes(args.model, recipe, args.batch, args.seq, args.device)
        base = base or total
        top = [{"dtype": d, "shape": list(s), "mb": round(b / 1e6, 2)}
               for (d, s), b in kinds.most_common(args.top)]
        rows.append({"recipe": recipe, "saved_mb": round(total / 1e6, 1),
                     "vs_bf16": round(total / base, 3), "largest": top})
    print(f"{'recipe':<16}{'saved MB':>10}{'x bf16':>8}  largest (dtype shape MB)")
    for r in rows:
        top = "; ".join(f"{t['dtype']} {tuple(t['shape'])} {t['mb']}" for t in r["largest"])
        print(f"{r['recipe']:<16}{r['saved_mb']:>10}{r['vs_bf16']:>8}  {top}")
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "torch": torch.__version__, "python": platform.python_version(),
           "device": args.device, "cpu": platform.processor() or platform.machine()}
    print(json.dumps({"bench": "saved", "env": env, "args": vars(args), "rows": rows}))


if __name__ == "__main__":
    main()
