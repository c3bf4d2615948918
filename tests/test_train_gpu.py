"""A converted model's training step on CUDA: no host syncs, CUDA-graph capture, full-graph
compile with Inductor. GPU only (``-m gpu``); the CPU twins of the compile tests are in
``test_linear.py`` (every preset, aot_eager) and ``test_train.py`` (Inductor on CPU)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import torch._inductor.config  # noqa: F401  (the config.patch decorator below)
import torch.nn.functional as F

import microscale as ms
from microscale.train.model import build_model

pytestmark = pytest.mark.gpu
TRAIN_RECIPES = ["fp8_tensorwise", "fp8_delayed", "fp8_blockwise", "mxfp8", "mxfp4", "nvfp4",
                 "nvfp4_no_sr", "nvfp4_no_2d"]


def _model(recipe: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model("micro", max_seq_len=256)
    ms.convert(model, recipe, keep_high_precision=[])
    return model.cuda()


def _batch(seed: int = 1, batch: int = 4, seq: int = 256):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randint(0, 256, (batch, seq), device="cuda", generator=g)
    return x, torch.roll(x, -1, 1)


def _loss(model, x, y) -> torch.Tensor:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(x)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def _step(model, opt, x, y) -> torch.Tensor:
    loss = _loss(model, x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=False)
    return loss.detach()


@pytest.mark.parametrize("recipe,compiled", [(r, False) for r in TRAIN_RECIPES] + [
    (r, True) for r in ("fp8_tensorwise", "fp8_delayed", "fp8_blockwise", "nvfp4")])
def test_training_step_has_no_host_sync(recipe, compiled):
    """Forward, backward, clip and a fused AdamW step with no device->host synchronisation:
    amaxes, scales, SR seeds and delayed histories all stay on the GPU."""
    torch._dynamo.reset()
    model = _model(recipe)
    run = torch.compile(model, fullgraph=True) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x, y = _batch()
    _step(run, opt, x, y)                                # warm-up: compiles, plans, caches
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            loss = _step(run, opt, x, y)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(loss).item()


@pytest.mark.parametrize("recipe", ["nvfp4_no_sr", "fp8_blockwise", "fp8_tensorwise", "mxfp8"])
def test_cuda_graph_replays_the_training_step(recipe):
    """The whole step (fwd, bwd, capturable AdamW) captured in one CUDA graph; replays give the
    eager losses bit for bit (SR off) and leave the same weights."""
    eager, graphed = _model(recipe), _model(recipe)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, capturable=True) for m in (eager, graphed)]
    batches = [_batch(seed) for seed in range(4)]
    static_x, static_y = (t.clone() for t in batches[0])
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):                      # warm up off the capture stream
        for m, opt in zip((eager, graphed), opts):
            _step(m, opt, *batches[0])
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = _step(graphed, opts[1], static_x, static_y)
    for x, y in batches[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        expected = _step(eager, opts[0], x, y)
        assert torch.equal(static_loss, expected)
    for a, b in zip(eager.parameters(), graphed.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("recipe,compiled", [("fp8_blockwise", False), ("fp8_blockwise", True),
                                             ("nvfp4_no_sr", False)])
def test_grouped_weight_step_no_sync_and_graphed(recipe, compiled):
    """fp8_blockwise with all 128x128 weights quantized in one launch per step, nvfp4_no_sr with
    all 16x16 weights in two (ms.weight_cache, as the harness runs it): no host sync after the
    first step (the weight table is cached),
    and the step captured in a CUDA graph replays the uncached losses, bit for bit in eager
    mode. Compiled, within float rounding only: Inductor's scatter for the embedding's
    gradient adds atomically, in no fixed order, so two compiled runs differ in the last bits
    whatever the weights (the grouping's bits are the eager case's and test_weight_cache's)."""
    torch._dynamo.reset()
    _grouped_step_test(compiled, recipe)
    many = "fp8_block|fp8_block" if recipe == "fp8_blockwise" else "nvfp4|none"
    assert ms.explain()[("quantize_rowcol_many", many)].startswith("triton")


def _grouped_step_test(compiled: bool, recipe: str = "fp8_blockwise") -> None:
    eager, grouped = _model(recipe), _model(recipe)
    run = torch.compile(grouped, fullgraph=True) if compiled else grouped
    plain = torch.compile(eager, fullgraph=True) if compiled else eager   # the same Inductor
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, capturable=True) for m in (eager, grouped)]
    batches = [_batch(seed) for seed in range(4)]
    static_x, static_y = (t.clone() for t in batches[0])

    def grouped_step(x, y):
        with ms.weight_cache(grouped):
            loss = _loss(run, x, y)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(grouped.parameters(), 1.0, foreach=True)
        opts[1].step()
        opts[1].zero_grad(set_to_none=False)
        return loss.detach()

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):                      # warm up off the capture stream
        _step(plain, opts[0], *batches[0])
        grouped_step(*batches[0])
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            _step(plain, opts[0], *batches[0])
            grouped_step(*batches[0])
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = grouped_step(static_x, static_y)
    for x, y in batches[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        expected = _step(plain, opts[0], x, y)
        if compiled:
            assert static_loss.item() == pytest.approx(expected.item(), rel=1e-3)
        else:
            assert torch.equal(static_loss, expected)
    if not compiled:
        for a, b in zip(eager.parameters(), grouped.parameters()):
            assert torch.equal(a, b)


@pytest.mark.parametrize("recipe", ["nvfp4_no_sr", "fp8_blockwise", "fp8_tensorwise", "mxfp8"])
@torch._inductor.config.patch(emulate_precision_casts=True)
def test_inductor_layer_bit_exact_and_model_close(recipe):
    """Inductor around a single layer computes the eager bits (custom ops run the same
    kernels; ``emulate_precision_casts`` keeps the bias's bf16 rounding, which Inductor's
    fused add would otherwise skip); around the model, only the fused high-precision ops
    (norms, RoPE) may move the loss, by float rounding."""
    torch._dynamo.reset()
    layer = ms.Linear(256, 384, recipe=recipe, device="cuda")
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    outs = []
    for run in (layer, torch.compile(layer, fullgraph=True)):
        xg = x.clone().requires_grad_(True)
        y = run(xg)
        y.backward(torch.ones_like(y))
        outs.append((y.detach(), xg.grad, layer.weight.grad.clone()))
        layer.zero_grad()
    for a, b in zip(*outs):
        assert torch.equal(a, b)
    model = _model(recipe)
    twin = copy.deepcopy(model)
    x, y = _batch()
    losses = [_loss(m, x, y).item() for m in (model, torch.compile(twin, fullgraph=True))]
    assert losses[1] == pytest.approx(losses[0], rel=2e-3)


def _graph_tree_losses(model, mode: str, steps: int = 6) -> list[float]:
    """``steps`` training steps of the compiled ``model`` on one batch, the loop a user of
    Inductor's CUDA-graph trees writes: the step marked, grads set to None (torch's default)."""
    torch._dynamo.reset()
    run = torch.compile(model, mode=mode, fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
    x, y = _batch()
    losses = []
    for _ in range(steps):
        torch.compiler.cudagraph_mark_step_begin()     # outputs of the last replay are done
        loss = _loss(run, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4_no_sr", "fp8_blockwise"])
def test_reduce_overhead_mode_trains(recipe):
    """``torch.compile(mode="reduce-overhead")`` (CUDA graphs through Inductor) of a whole
    converted model trains, and without SR every step's loss is the default mode's (same
    kernels, replayed; a replay on stale or overwritten buffers would drift far off). With
    ``zero_grad(set_to_none=False)`` the graph trees refuse the step for bf16 models too
    ("accessing tensor output of CUDAGraphs that has been overwritten", at tok_emb's gradient
    addition; H200, torch 2.11, ``benchmarks/diag_reduce_overhead_gpu.py``, session 51; kept
    grads presumably alias graph-owned memory a later replay reuses, not investigated further)."""
    model = _model(recipe)
    twin = copy.deepcopy(model)
    graphed = _graph_tree_losses(model, "reduce-overhead")
    assert graphed[-1] < graphed[0]
    if recipe != "nvfp4":
        assert graphed == pytest.approx(_graph_tree_losses(twin, "default"), rel=1e-3)


def test_trainer_cuda_graph_matches_eager(tmp_path):
    """``Trainer(cuda_graph=True)``: forward + backward replayed from a CUDA graph give the
    eager losses bit for bit (SR off), across a precision switch (which recaptures)."""
    from microscale.train.data import stdlib_corpus
    from microscale.train.trainer import TrainConfig, Trainer
    data = stdlib_corpus(tmp_path / "corpus", max_bytes=200_000)
    losses = {}
    for graph in (False, True):
        cfg = TrainConfig(recipe="nvfp4_no_sr", model="micro", steps=8, batch_size=4, seq_len=128,
                          keep_hp="none", switch_step=4, compile="off", cuda_graph=graph,
                          eval_every=100, ckpt_every=0, out=str(tmp_path / str(graph)),
                          device="cuda", max_bytes=200_000, progress=False)
        trainer = Trainer(cfg, data=data)
        trainer.fit()
        losses[graph] = [json.loads(l)["loss"] for l in (tmp_path / str(graph) / "metrics.jsonl")
                         .read_text().splitlines()]
        if graph:
            assert trainer._step_graph.graph is not None       # captured (after the switch too)
    assert losses[True] == losses[False]


@pytest.mark.parametrize("mode", ["all", "fprop"])
def test_trainer_compiled_switch_trains_like_eager(tmp_path, mode):
    """A compiled model switched to bf16 GEMMs mid-run (``--switch-step``, mode "all"), with and
    without the CUDA graph, trains like the eager model: session 9's 125m nvfp4_bf16_decay run
    (``--compile on --cuda-graph``) lost ~0.1 in loss after the switch, while the same switch
    eager on CPU did not (``benchmarks/results/h100_20261125_session9/``). Graph and no graph
    must agree bit for bit; compiled and eager within 2% (the bad run was ~10% off)."""
    from microscale.train.data import stdlib_corpus
    from microscale.train.trainer import TrainConfig, Trainer
    data = stdlib_corpus(tmp_path / "corpus", max_bytes=200_000)
    losses = {}
    for compile_, graph in (("off", False), ("on", False), ("on", True)):
        out = tmp_path / f"{compile_}_{graph}"
        cfg = TrainConfig(recipe="nvfp4_no_sr", model="micro", steps=14, batch_size=4,
                          seq_len=128, keep_hp="none", switch_step=5, switch_mode=mode,
                          compile=compile_, cuda_graph=graph, eval_every=100, ckpt_every=0,
                          out=str(out), device="cuda", max_bytes=200_000, progress=False,
                          log_every=1)
        trainer = Trainer(cfg, data=data)
        trainer.fit()
        losses[(compile_, graph)] = [json.loads(line)["loss"] for line in
                                     (out / "metrics.jsonl").read_text().splitlines()]
        if compile_ == "on":     # the switched compiled blocks' gradients, against eager's
            _assert_grads_match_eager(trainer)
    assert losses[("on", True)] == losses[("on", False)]
    torch.testing.assert_close(torch.tensor(losses[("on", False)]),
                               torch.tensor(losses[("off", False)]), rtol=2e-2, atol=0)


def _assert_grads_match_eager(trainer):
    """One more forward + backward of the trained model, compiled and eager (``force_eager``):
    every parameter's gradient agrees (call 1 of session 10 found a switched compiled block's
    gradients all zero)."""
    x, y = (t.to(trainer.device) for t in trainer._batch(0))
    grads = {}
    for eager in (False, True):
        trainer.optimizer.zero_grad(set_to_none=True)
        with torch.compiler.set_stance("force_eager" if eager else "default"):
            trainer._loss_backward(x, y)
        grads[eager] = [p.grad.float().flatten() for p in trainer.model.parameters()]
    trainer.optimizer.zero_grad(set_to_none=True)
    for got, ref in zip(grads[False], grads[True]):
        assert got.norm() > 0.5 * ref.norm()
    got, ref = torch.cat(grads[False]), torch.cat(grads[True])
    assert F.cosine_similarity(got, ref, dim=0) > 0.98


def _one_rank_env(monkeypatch):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(k, v)


def _dist_cfg(tmp_path, recipe, all_gather, graph):
    from microscale.train.trainer import TrainConfig
    return TrainConfig(recipe=recipe, model="micro", steps=6, batch_size=4, seq_len=128,
                       keep_hp="none", compile="off", cuda_graph=graph, dist="fsdp",
                       all_gather=all_gather, eval_every=100, ckpt_every=0,
                       out=str(tmp_path / f"{recipe}_{all_gather}_{graph}"), device="cuda",
                       max_bytes=200_000, progress=False)


@pytest.mark.parametrize("recipe,all_gather", [("fp8_blockwise", "fp32"), ("nvfp4_no_sr", "fp32")])
def test_fsdp2_cuda_graph_matches_eager(tmp_path, monkeypatch, recipe, all_gather):
    """``--dist fsdp --cuda-graph`` on one NCCL rank: FSDP2's all-gathers and reduce-scatters
    are captured with forward + backward, and the replayed steps give the eager FSDP2 losses
    bit for bit (SR off); the graph is released before the process group goes. (One rank cannot
    use the quantized all-gather; with two ranks it ran on two H200s, docs/distributed.md.)"""
    import torch.distributed as dist

    from microscale.train.data import stdlib_corpus
    from microscale.train.distributed import DistTrainer, init_process_group
    _one_rank_env(monkeypatch)
    data = stdlib_corpus(tmp_path / "corpus", max_bytes=200_000)
    losses = {}
    try:
        for graph in (False, True):
            cfg = _dist_cfg(tmp_path, recipe, all_gather, graph)
            init_process_group(cfg)
            trainer = DistTrainer(cfg, data=data)
            assert trainer.quantized_all_gather == (all_gather == "quantized")
            trainer.fit()
            if graph:
                assert trainer._step_graph.graph is not None
            trainer.release()
            losses[graph] = [json.loads(line)["loss"] for line in
                             (Path(cfg.out) / "metrics.jsonl").read_text().splitlines()]
        with pytest.raises(ValueError, match="NVFP4 quantized all-gather inside a CUDA graph"):
            DistTrainer(_dist_cfg(tmp_path, "nvfp4", "quantized", True), data=data)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert len(losses[True]) >= 6 and losses[True] == losses[False]


def test_capture_warmup_runs_on_one_stream_per_device():
    """Every capture's warm-up runs on one side stream per device (``speed.warmup_stream``):
    PyTorch keeps a cuBLAS workspace for each stream that ran a GEMM, so a fresh stream per
    capture left one workspace allocated per capture (bench_train's later runs peaked ~67 MB
    higher each, session 28). Repeated captures now leave the allocated memory where it was."""
    from microscale.train.speed import warmup_stream
    dev = torch.device("cuda")
    assert warmup_stream(dev) is warmup_stream(dev)
    a = torch.randn(512, 512, device=dev, dtype=torch.bfloat16)

    def capture():
        side = warmup_stream(dev)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            a @ a
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            a @ a
        g.replay()
        torch.cuda.synchronize()

    capture()
    before = torch.cuda.memory_allocated(dev)
    for _ in range(3):
        capture()
    assert torch.cuda.memory_allocated(dev) - before < (1 << 20)
