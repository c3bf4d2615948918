"""Bisect: gradients of a compiled converted model whose layers run in high precision (GPU).

``benchmarks/diag_switch_gpu.py`` found (session 10, H100) that after a switch to bf16 GEMMs
(mode "all") the compiled blocks' gradients are zero while eager is right. Each case here
builds a small model, sets the layers' precision, and compares the compiled gradients with
``torch.compiler.set_stance("force_eager")`` ones per parameter (cosine, norm ratio).

    python benchmarks/diag_hp_compile_gpu.py --device cuda
"""

from __future__ import annotations

import argparse
import contextlib
import json

import torch
import torch.nn.functional as F


def _grads(model, run, eager: bool):
    model.zero_grad(set_to_none=True)
    stance = torch.compiler.set_stance("force_eager") if eager else contextlib.nullcontext()
    with stance:
        run().backward()
    return {n: None if p.grad is None else p.grad.float().clone()
            for n, p in model.named_parameters()}


def _compare(got, ref) -> dict:
    bad, zero = [], 0
    for n in ref:
        g, r = got[n], ref[n]
        if g is None or r is None:
            if (g is None) != (r is None):
                bad.append((n, "missing" if g is None else "unexpected"))
            continue
        zero += int(g.abs().max().item() == 0 and r.abs().max().item() > 0)
        cos = F.cosine_similarity(g.flatten(), r.flatten(), dim=0).item()
        if cos < 0.99:
            bad.append((n, round(cos, 4), round((g.norm() / r.norm()).item(), 4)))
    return {"n_params": len(ref), "n_bad": len(bad), "n_zero": zero, "bad": bad[:4]}


def model_case(device, mode, prime_quantized: bool, model_name: str = "50m"):
    import microscale as ms
    from microscale.train.model import build_model
    from microscale.train.speed import compile_blocks

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build_model(model_name, 256, max_seq_len=256)
    ms.convert(model, ms.Recipe.from_name("nvfp4_no_sr"))
    model = model.to(device)
    compile_blocks(model)
    x = torch.randint(0, 256, (2, 256), device=device)
    y = torch.randint(0, 256, (2, 256), device=device)

    def run():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(x)
        return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())

    if prime_quantized:                      # compile the quantized graph first (as training does)
        _grads(model, run, eager=False)
    ms.PrecisionSchedule(0, mode).apply(model, 0)
    return _compare(_grads(model, run, False), _grads(model, run, True))


def layer_case(device, autocast: bool, mode: str):
    import microscale as ms

    torch._dynamo.reset()
    torch.manual_seed(0)
    layer = ms.Linear(256, 512, recipe="nvfp4_no_sr").to(device)
    ms.PrecisionSchedule(0, mode).apply(layer, 0)
    fn = torch.compile(lambda t: layer(t), fullgraph=True)
    x = torch.randn(64, 256, device=device, requires_grad=False)

    def run():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            out = fn(x * 1.0)
        return (out.float() ** 2).mean()

    return _compare(_grads(layer, run, False), _grads(layer, run, True))


@contextlib.contextmanager
def function_path():
    """Route all-high-precision layers through ``QuantizedLinearFn`` again (the path before
    ``nn.function._hp_linear``), to show the difference. Since then the Function's
    high-precision GEMM is the opaque op ``microscale::hp_mm`` as well, so this variant now
    shows that fix; session 10's call 2 (zero gradients here) ran the plain matmul."""
    import microscale.nn.linear as linear_mod
    from microscale.nn import function

    keep = linear_mod.linear

    def linear(x2d, weight, bias, plan, state, seeds, needs_grad):
        if plan.fprop_hp and plan.grads_hp and needs_grad:
            with torch.autocast(x2d.device.type, enabled=False):
                return function.QuantizedLinearFn.apply(x2d, weight, bias, plan, state, seeds)
        return keep(x2d, weight, bias, plan, state, seeds, needs_grad)

    linear_mod.linear = linear
    try:
        yield
    finally:
        linear_mod.linear = keep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="50m")
    args = ap.parse_args()
    device = torch.device(args.device)
    results = {}
    cases = {
        "layer_all_autocast": lambda: layer_case(device, True, "all"),
        "layer_all_fp32": lambda: layer_case(device, False, "all"),
        "layer_fprop_autocast": lambda: layer_case(device, True, "fprop"),
        "model_all": lambda: model_case(device, "all", False, args.model),
        "model_fprop": lambda: model_case(device, "fprop", False, args.model),
        "model_all_after_quantized": lambda: model_case(device, "all", True, args.model),
    }
    for name in ("layer_all_autocast", "model_all"):
        def old(case=cases[name]):
            with function_path():
                return case()
        cases[name + "_via_function"] = old
    for name, case in cases.items():
        try:
            results[name] = case()
        except Exception as e:                       # one broken case must not hide the rest
            results[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
        print(name, json.dumps(results[name]), flush=True)
    print(json.dumps({"diag_hp_compile": results, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
