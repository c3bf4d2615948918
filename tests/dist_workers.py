"""Worker side of the multi-process tests (tests/test_distributed.py): gloo on CPU.

The test module spawns ``world`` processes once per world size (process start-up and
``import microscale`` dominate the cost), each runs every check below and saves what it saw to
``<tmp>/rank<r>.pt``; the tests then compare ranks with each other and with a single-process
run computed in the pytest process (:func:`train_reference`).

The model is two ``ms.Linear`` layers (128 -> 256 -> 128) with a ReLU, trained for ``STEPS``
SGD steps on a fixed global batch of ``GLOBAL_ROWS`` rows; rank r of N takes the r-th of N
equal row slices, so DDP and FSDP2 see the same global batch as the single process. SGD rather
than AdamW: Adam's first update is ~lr·sign(g), which turns an ulp-level difference in a
near-zero gradient into a full ±lr step and would hide everything else the comparison shows.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings

import torch
import torch.distributed as dist
from torch import nn

import microscale as ms

PRESETS = ("bf16", "fp8_tensorwise", "fp8_delayed", "fp8_blockwise", "mxfp8", "mxfp4", "nvfp4",
           "nvfp4_no_sr", "nvfp4_no_rht", "nvfp4_no_2d", "nvfp4_base")
STEPS = 2
GLOBAL_ROWS = 768           # per rank 384 (2 ranks) or 256 (3): whole 128-token wgrad blocks
LR = 0.5


def tiny_model(recipe: str) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(ms.Linear(128, 256, recipe=recipe, name="0"), nn.ReLU(),
                         ms.Linear(256, 128, recipe=recipe, name="2"))


def global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(GLOBAL_ROWS, 128, generator=g), torch.randn(GLOBAL_ROWS, 128, generator=g)


def rank_slice(t: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    n = t.shape[0] // world
    return t[rank * n:(rank + 1) * n]


def _steps(model: nn.Module, x: torch.Tensor, t: torch.Tensor, world: int) -> list[float]:
    """STEPS SGD steps; returns the global loss of each (the mean of the ranks' means)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    torch.manual_seed(2)                          # the same SR draws on every run
    losses = []
    for _ in range(STEPS):
        loss = (model(x) - t).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.detach().clone()
        if world > 1:
            dist.all_reduce(value)
            value /= world
        losses.append(float(value))
    return losses


def train_reference(recipe: str) -> tuple[list[float], dict]:
    """The single-process run on the whole global batch: (losses, final state_dict)."""
    model = tiny_model(recipe)
    x, t = global_batch()
    losses = _steps(model, x, t, 1)
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


# ------------------------------------------------------------------ the checks
def presets_for(world: int) -> tuple[str, ...]:
    """Every preset on 2 ranks; on 3 (uneven FSDP2 shards) one of each scaling kind."""
    return PRESETS if world == 2 else ("bf16", "fp8_tensorwise", "fp8_delayed", "mxfp8", "nvfp4")


def check_ddp(rank: int, world: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP
    out = {}
    x, t = (rank_slice(a, rank, world) for a in global_batch())
    for recipe in PRESETS:
        model = DDP(tiny_model(recipe))
        losses = _steps(model, x, t, world)
        out[recipe] = {"losses": losses,
                       "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()])}
    return out


def _fsdp(recipe: str) -> nn.Module:
    from torch.distributed.fsdp import fully_shard
    model = tiny_model(recipe)
    for layer in (model[0], model[2]):
        fully_shard(layer)
    return fully_shard(model)


def _full_state(model: nn.Module) -> dict:
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
    )
    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return {k: v.detach().clone() for k, v in sd.items()}


def check_fsdp(rank: int, world: int) -> dict:
    """Every preset under FSDP2; for two presets also a full-state-dict round trip (the
    layer's ``_extra_state`` with it) into a freshly sharded model."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
    )
    out = {}
    x, t = (rank_slice(a, rank, world) for a in global_batch())
    for recipe in presets_for(world):
        model = _fsdp(recipe)
        losses = _steps(model, x, t, world)
        state = _full_state(model)
        entry = {"losses": losses, "state": state if rank == 0 else None}
        if recipe in ("fp8_delayed", "nvfp4"):
            twin = _fsdp(recipe)
            set_model_state_dict(twin, dict(state),        # (it replaces the dict's values)
                                 options=StateDictOptions(full_state_dict=True))
            again = _full_state(twin)
            entry["roundtrip_equal"] = all(torch.equal(state[k], again[k]) for k in state)
            entry["delayed_equal"] = all(
                torch.equal(a, b) for a, b in zip(model[0].delayed_state().values(),
                                                  twin[0].delayed_state().values()))
        out[recipe] = entry
    return out


def check_amax(rank: int, world: int) -> dict:
    """Different inputs per rank: the scales each rank quantized x with, agreement on and off,
    and the delayed-scaling history after one step."""
    from microscale.distributed.reduce import amax_group_name
    from microscale.nn.function import Plan, _views
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(10 + rank)) * (rank + 1)
    out = {"x": x}
    recipe = ms.Recipe.from_name("fp8_tensorwise")
    for name, group in (("on", amax_group_name()), ("off", "")):
        plan = Plan(recipe, amax_group=group)
        q_row, q_col = _views(x, plan, {}, "fprop.a", "wgrad.b", None, per_rank=True)
        out[name] = (q_row.scale.clone(), q_col.scale.clone(), q_row.data.view(torch.uint8))
    layer = ms.Linear(128, 128, recipe="fp8_delayed")
    layer(x).square().mean().backward()
    out["delayed"] = {k: v.clone() for k, v in layer.delayed_state().items()}
    return out


def check_compile(rank: int, world: int) -> dict:
    """The amax all-reduce traces: ``torch.compile(fullgraph=True)`` of an fp8_tensorwise layer
    (current scaling: x in forward, dy in backward) gives the eager result on every rank."""
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(20 + rank)) * (rank + 1)
    out = {}
    for name in ("eager", "compiled"):
        torch.manual_seed(0)
        layer = ms.Linear(128, 128, recipe="fp8_tensorwise")
        run = torch.compile(layer, fullgraph=True, backend="aot_eager") if name == "compiled" \
            else layer
        xi = x.clone().requires_grad_()
        y = run(xi)
        y.square().mean().backward()
        out[name] = (y.detach(), xi.grad, layer.weight.grad)
    return out


AG_RECIPES = ("nvfp4", "nvfp4_no_2d", "fp8_blockwise", "mxfp8", "mxfp4", "fp8_tensorwise")
AG_OUT = 768                # a multiple of N x 128 for N = 2 and 3: whole FP8 tiles per shard


def _views_equal(a, b) -> bool:
    return all(torch.equal(x.view(torch.uint8) if x.dtype.itemsize == 1 else x,
                           y.view(torch.uint8) if y.dtype.itemsize == 1 else y)
               for x, y in ((a.data, b.data), (a.scale, b.scale), (a.amax, b.amax))) and \
        a.shape == b.shape and a.block == b.block


def check_allgather(rank: int, world: int) -> dict:
    """The gathered W / Wᵀ views equal one process's quantization of the full W, bit for bit;
    a shard that would split a tile raises."""
    from microscale.distributed import quantized_all_gather
    from microscale.ops import quantize_views
    g = torch.Generator().manual_seed(3)
    w = torch.randn(AG_OUT, 128, generator=g) * torch.logspace(-3, 1, AG_OUT)[:, None]
    shard = w[rank * AG_OUT // world:(rank + 1) * AG_OUT // world]
    out = {}
    for name in AG_RECIPES:
        recipe = ms.Recipe.from_name(name)
        q_row, q_col = quantized_all_gather(shard, recipe)
        views = [(op.format, op.quantize_kwargs() | {"check_finite": False})
                 for op in (recipe.fprop.b, recipe.dgrad.b)]
        ref_row, ref_col = quantize_views(w, *views, recipe.backend)
        out[name] = (_views_equal(q_row, ref_row), _views_equal(q_col, ref_col))
    try:
        quantized_all_gather(shard[:AG_OUT // world - 16], ms.Recipe.from_name("fp8_blockwise"))
        out["error"] = None
    except ValueError as err:
        out["error"] = str(err)
    return out


def _ag_model(recipe: str, quantized_ag: bool) -> nn.Module:
    """One [768, 128] layer, fully sharded; x requires grad, so dgrad reads the gathered Wᵀ."""
    from torch.distributed.fsdp import fully_shard

    from microscale.distributed import enable_quantized_all_gather
    torch.manual_seed(0)
    model = nn.Sequential(ms.Linear(128, AG_OUT, recipe=recipe))
    if quantized_ag:
        enable_quantized_all_gather(model, dist.get_world_size())
    fully_shard(model[0])
    return fully_shard(model)


def check_fsdp_quantized_allgather(rank: int, world: int) -> dict:
    """FSDP2 with the quantized all-gather gives the losses, weights and input gradients of
    FSDP2's fp32 all-gather exactly (the layer quantizes the same full W either way), and the
    layer sees a GatheredWeight. With 2 ranks also under ``torch.compile(fullgraph=True)`` of
    the sharded layer (Dynamo + AOTAutograd, ``aot_eager``: the harness's per-block compile;
    before GatheredWeight was traceable, Dynamo baked in the first gather and the weight got
    no gradient)."""
    from microscale.distributed import GatheredWeight
    x = torch.randn(GLOBAL_ROWS, 128, generator=torch.Generator().manual_seed(4))
    t = torch.randn(GLOBAL_ROWS, AG_OUT, generator=torch.Generator().manual_seed(5))
    x, t = rank_slice(x, rank, world), rank_slice(t, rank, world)
    out = {}
    names = ("nvfp4", "mxfp8", "fp8_tensorwise") if world == 2 else ("nvfp4", "fp8_blockwise")
    for name in names:
        runs = {}
        variants = (False, True, "compiled") if world == 2 and name != "mxfp8" else (False, True)
        for variant in variants:
            model = _ag_model(name, bool(variant))
            seen = []
            model[0].register_forward_pre_hook(lambda m, a, seen=seen: seen.append(type(m.weight)))
            if variant == "compiled":
                model[0].compile(backend="aot_eager", fullgraph=True)
            xi = x.clone().requires_grad_()
            losses = _steps(model, xi, t, world)
            runs[variant] = (losses, _full_state(model), seen, xi.grad)
        fp32_ag = runs[False]
        for variant in variants[1:]:
            quant_ag = runs[variant]
            key = name if variant is True else f"{name}/compiled"
            out[key] = {"losses": (fp32_ag[0], quant_ag[0]),
                        "state_equal": all(torch.equal(fp32_ag[1][k], quant_ag[1][k])
                                           for k in fp32_ag[1]),
                        "dx_equal": torch.equal(fp32_ag[3], quant_ag[3]),
                        "gathered": quant_ag[2] == [GatheredWeight] * STEPS}
    return out


def check_sr(rank: int, world: int) -> dict:
    layer = ms.Linear(128, 128, recipe="nvfp4")
    plan = Plan_for(layer)
    torch.manual_seed(5)
    first = layer._seeds(plan, torch.device("cpu"))
    torch.manual_seed(5)
    again = layer._seeds(plan, torch.device("cpu"))
    own = ms.Linear(128, 128, recipe="nvfp4", generator=torch.Generator().manual_seed(5))
    return {"seeds": first, "again": again, "own": own._seeds(plan, torch.device("cpu"))}


def Plan_for(layer):
    from microscale.nn.function import Plan
    return Plan(layer.recipe)


# ------------------------------------------------------------------ the harness (cli.main)
HARNESS = ["train", "--recipe", "nvfp4", "--model", "micro", "--steps", "6", "--batch-size", "6",
           "--seq-len", "64", "--max-bytes", "200000", "--eval-every", "3", "--eval-batches", "1",
           "--ckpt-every", "2", "--device", "cpu", "--no-progress", "--threads", "1"]


def _cli(rank: int, world: int, port: int, argv: list[str]) -> tuple[int, str]:
    """``microscale train`` as torchrun would start it on this rank: (exit code, stderr)."""
    import contextlib
    import io

    from microscale.train import cli
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, err.getvalue()


def check_harness_train(rank: int, world: int) -> dict:
    """The 2-rank FSDP2 run (6 steps, checkpoints at 4 and 6). Ends the process group."""
    run = os.path.join(os.environ["MS_DIST_TMP"], "run2")
    return {"code": _cli(rank, world, 0, [*HARNESS, "--dist", "fsdp", "--out", run])[0]}


def check_harness_resume(rank: int, world: int) -> dict:
    """Resume the 2-rank run's step-4 checkpoint on this world size, then a DDP run where rank
    1 alone gets a NaN loss at step 2. Ends the process group."""
    import shutil

    from microscale.train.distributed import DistTrainer
    base = os.environ["MS_DIST_TMP"]
    run = os.path.join(base, f"resumed{world}")
    if rank == 0:
        shutil.copytree(os.path.join(base, "run2"), run)
        os.unlink(os.path.join(run, "checkpoints", "step_000006.json"))   # stopped after 4
        shutil.rmtree(os.path.join(run, "checkpoints", "step_000006.dcp"))
    dist.barrier()
    resumed = _cli(rank, world, 0, [*HARNESS, "--dist", "fsdp", "--out", run, "--resume"])
    original = DistTrainer._forward_backward

    def nan_on_rank_1(self, x, y):
        loss, norm = original(self, x, y)
        nan = self.rank == 1 and self.sampler.index == 1
        return (loss * float("nan") if nan else loss), norm

    DistTrainer._forward_backward = nan_on_rank_1
    port = int(os.environ["MS_DIST_PORT2"])
    diverged = _cli(rank, world, port, [*HARNESS, "--dist", "ddp", "--out", run + "_nan"])
    return {"resume": resumed, "nan": diverged, "run": run}


CHECKS = {"ddp": check_ddp, "fsdp": check_fsdp, "amax": check_amax, "sr": check_sr,
          "compile": check_compile, "allgather": check_allgather,
          "fsdp_qag": check_fsdp_quantized_allgather, "harness_train": check_harness_train,
          "harness_resume": check_harness_resume}


def run(rank: int, world: int, port: int, out_dir: str, names: tuple[str, ...]) -> None:
    """Entry point for ``torch.multiprocessing.spawn``: run the named checks, save results."""
    torch.set_num_threads(1)
    # a layer that is itself an FSDP unit returns a view ([:tokens] of the padded GEMM): FSDP2
    # warns that an in-place op on it would skip its hook; the tests do none
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    results = {}
    try:
        for name in names:
            start = time.perf_counter()
            results[name] = CHECKS[name](rank, world)
            results.setdefault("seconds", {})[name] = time.perf_counter() - start
    except Exception:                                   # report, then fail the spawn
        results["error"] = traceback.format_exc()
        raise
    finally:
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
        if dist.is_initialized():                       # the harness checks end it themselves
            dist.destroy_process_group()
