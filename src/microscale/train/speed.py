"""Training speed: regional compilation, the step's CUDA graph, and model-FLOPs utilisation.

* :func:`compile_blocks` compiles each transformer block in place. Identical blocks share one
  graph, so compile time does not grow with depth; every quantized layer is a custom op inside
  the graph (:mod:`microscale.ops`), so nothing breaks it.
* :class:`StepGraph` replays a step's forward + backward from one CUDA graph: small models are
  launch-bound (thousands of kernels a step), and a replay costs the host one call.
* :func:`compiled_grad_check` (``--check-compile``) compares one step's gradients from the
  compiled blocks with eager's, so a compiler fault cannot train silently on wrong gradients
  (session 10: switched blocks compiled to all-zero gradients on CUDA).
* :func:`peak_flops` gives the dense bf16 peak of known GPUs, which MFU is reported against.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .trainer import Trainer

__all__ = ["COMPILE_MODES", "StepGraph", "compile_blocks", "compiled_grad_check", "peak_flops",
           "device_name", "warmup_stream"]

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


_WARMUP_STREAMS: dict = {}        # device index -> the side stream of every capture's warm-up


def warmup_stream(device: torch.device) -> torch.cuda.Stream:
    """The side stream that the warm-up before a CUDA graph capture runs on, one per device
    for the process. PyTorch keeps a cuBLAS workspace for each stream that has run a GEMM until
    the process ends (32 MiB each, H100, torch 2.11), so a new stream per capture leaked one or
    two per capture (session 28: each later run of ``benchmarks/bench_train.py`` peaked ~67 MB
    higher; ``benchmarks/results/h100_20261127_session28/call5/``)."""
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    if index not in _WARMUP_STREAMS:
        _WARMUP_STREAMS[index] = torch.cuda.Stream(index)
    return _WARMUP_STREAMS[index]


class StepGraph:
    """Forward, backward and clipping of a step replayed from one CUDA graph (``cuda_graph``).

    The optimizer step and the NaN check stay outside (the LR changes per step, and no update
    may follow a non-finite loss). A graph is captured once the layers' precision has been the
    same for two eager steps (the warm-up: kernels compiled, plans cached), and again after a
    precision switch. Capturing allocates the gradients in the graph's pool; each replay
    overwrites them, so they are never set to None in between. SR draws its seeds inside the
    graph (CUDA graphs advance the Philox offset per replay), so the random stream differs from
    an eager run's, as between any two seeds.
    """

    def __init__(self, trainer: "Trainer"):
        self.trainer, self.graph, self.key, self.seen = trainer, None, None, 0
        self.static = None

    def _precision_key(self) -> tuple:
        return tuple(getattr(m, "precision", None) for m in self.trainer.model.modules()
                     if hasattr(m, "hp_fprop"))

    def get(self, x: torch.Tensor, y: torch.Tensor):
        key = self._precision_key()
        if key != self.key:                            # new precision state: warm up again
            if self.graph is not None:                 # the eager steps must not accumulate
                self.trainer.optimizer.zero_grad(set_to_none=True)   # into the replay's grads
            self.graph, self.static, self.key, self.seen = None, None, key, 0
        if self.graph is None:
            self.seen += 1
            if self.seen <= 2:
                return None                            # eager warm-up steps
            self._capture(x, y)
        sx, sy, loss, norm = self.static
        sx.copy_(x)
        sy.copy_(y)
        self.graph.replay()
        return loss, norm

    def reset(self) -> None:
        """Release the captured graph (a later step warms up and captures again)."""
        if self.graph is not None:
            torch.cuda.synchronize()
            self.graph.reset()
        self.graph, self.static, self.key, self.seen = None, None, None, 0

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> None:
        trainer = self.trainer
        sx, sy = x.clone(), y.clone()
        side = warmup_stream(sx.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):                  # library state settles off the capture
            trainer._forward_backward(sx, sy)
        torch.cuda.current_stream().wait_stream(side)
        trainer.optimizer.zero_grad(set_to_none=True)  # the graph allocates the grads it writes
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            loss, norm = trainer._forward_backward(sx, sy)
        self.static = (sx, sy, loss, norm)


def compile_blocks(model: torch.nn.Module, mode: str = "default", backend: str = "inductor") -> None:
    """Compile each transformer block in place ("regional" compilation).

    Identical blocks share one compiled graph (parameters are graph inputs), so compile time
    does not grow with depth; a model whose FP4 recipe keeps its last blocks in bf16 compiles
    two. Every block traces as one graph: the quantized layers are custom ops, not breaks.
    ``backend``: ``torch.compile``'s (``"aot_eager"`` traces and checks the graphs without
    Inductor's code generation, e.g. to debug a fault or test the tracing).
    """
    for block in model.blocks:
        block.compile(mode=None if mode == "default" else mode, fullgraph=True, backend=backend)


def compiled_grad_check(model: torch.nn.Module, loss_backward, x, y) -> tuple[list[str], float]:
    """One forward + backward of ``(x, y)`` through the compiled blocks and one eager
    (``torch.compiler.set_stance("force_eager")``): the parameters whose compiled gradient is
    missing or all zero while eager's is not, and the cosine of the compiled blocks' gradients
    together (all gradients when the model has no ``blocks``: the head's and the embedding's,
    often the largest, are not compiled and would hide a block's fault).

    Quantized recipes round differently compiled and eager (README, numerics), so single
    gradients may disagree at noise level; a fault shows as zeros or a low overall cosine.
    Holds two sets of gradients for a moment; leaves every ``.grad`` cleared. Host syncs: run
    it outside the timed steps."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    loss_backward(x, y)
    compiled = [p.grad for _, p in params]
    model.zero_grad(set_to_none=True)
    with torch.compiler.set_stance("force_eager"):
        loss_backward(x, y)
    faults, dot, sq_c, sq_e = [], 0.0, 0.0, 0.0
    blocks = any(name.startswith("blocks.") for name, _ in params)
    for (name, p), g_c in zip(params, compiled):
        g_e = p.grad
        if g_e is None:
            continue
        if g_c is None or (bool(g_e.count_nonzero()) and not bool(g_c.count_nonzero())):
            faults.append(name)
            continue
        if blocks and not name.startswith("blocks."):
            continue
        g_c, g_e = g_c.double(), g_e.double()
        dot, sq_c, sq_e = dot + (g_c * g_e).sum(), sq_c + g_c.square().sum(), \
            sq_e + g_e.square().sum()
    model.zero_grad(set_to_none=True)
    cosine = float(dot / (sq_c.sqrt() * sq_e.sqrt())) if torch.is_tensor(sq_e) and sq_e > 0 \
        else 1.0
    return faults, cosine


# dense bf16 tensor-core peak (vendor datasheets) by device-name fragment: for MFU only
_PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "H800": 989e12, "GH200": 989e12,
              "B200": 2250e12, "A100": 312e12, "L40S": 362e12}


def peak_flops(device: torch.device) -> float | None:
    """Dense bf16 peak FLOP/s of ``device`` when known (MFU is reported against it), else None."""
    name = device_name(device)
    return next((v for k, v in _PEAK_BF16.items() if k in name), None)


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
