"""Input validation and small helpers shared by the reference quantizers.

Every quantizer works on ``x`` viewed as ``[rows, cols]``: the last dimension is the
quantization (GEMM reduction) dimension and all leading dimensions are flattened into rows.
Bad input fails here with an error that names the problem, before any arithmetic runs.
"""

from __future__ import annotations

import torch

__all__ = ["SUPPORTED_DTYPES", "check_input", "as_rows", "random_bytes", "rand_bits_like",
           "draw_seed", "exp2_int", "floor_log2"]

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_input(x: torch.Tensor, fmt: str, block_cols: int, block_rows: int = 1,
                check_finite: bool = True) -> torch.Tensor:
    """Validate dtype, shape and values; return ``x`` detached.

    Quantization is not differentiable: codes, scales and amax must never hold autograd
    history (a saved QuantizedTensor would otherwise keep the whole graph alive).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fmt}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{fmt}: input dtype must be float32, bfloat16 or float16, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError(f"{fmt}: cannot quantize a 0-dim tensor (need at least [cols])")
    if x.numel() == 0:
        raise ValueError(f"{fmt}: cannot quantize an empty tensor of shape {tuple(x.shape)}")
    cols = x.shape[-1]
    if cols % block_cols:
        raise ValueError(f"{fmt}: last dimension {cols} is not divisible by the block size "
                         f"{block_cols}; pad it to a multiple of {block_cols}")
    rows = x.numel() // cols
    if rows % block_rows:
        raise ValueError(f"{fmt}: {block_rows}x{block_cols} tiles need the row count "
                         f"(leading dims flattened: {rows}) divisible by {block_rows}")
    if check_finite and not bool(torch.isfinite(x).all()):
        bad = "NaN" if bool(torch.isnan(x).any()) else "Inf"
        raise ValueError(f"{fmt}: input contains {bad}; {fmt} cannot represent it "
                         "(pass check_finite=False to skip this check at your own risk)")
    return x.detach()


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """View ``x`` as ``[rows, cols]`` (contiguous)."""
    return x.reshape(-1, x.shape[-1]).contiguous()


def random_bytes(shape, generator: torch.Generator | None, device,
                 seed: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform uint8 random bytes from a torch (Philox on CUDA) generator.

    With ``seed`` (an integer tensor, see :func:`draw_seed`) the bytes come from a fresh
    generator on ``device`` seeded with it, so a seed drawn once reproduces them; reading the
    seed is a host sync on CUDA, which only this reference path pays (the kernels load it).
    """
    if seed is not None:
        generator = torch.Generator(device=device)
        generator.manual_seed(int(seed.reshape(-1)[0]))
    elif generator is not None and generator.device.type != torch.device(device).type:
        raise ValueError(f"generator is on {generator.device} but the tensor is on {device}")
    return torch.randint(0, 256, tuple(shape), generator=generator, device=device,
                         dtype=torch.uint8)


def draw_seed(generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """A stochastic-rounding seed: int64 ``[1]`` on ``device``, drawn from ``generator``
    (or torch's default generator for ``device``, so ``torch.manual_seed`` controls it).

    It stays on the device: the kernels load it (in-kernel Philox, no host sync) and the
    reference seeds a generator with it, so one seed gives the same codes on one backend.
    """
    if generator is not None and generator.device.type != torch.device(device).type:
        raise ValueError(f"generator is on {generator.device} but the tensor is on {device}")
    gen_device = generator.device if generator is not None else device
    seed = torch.randint(0, 2**31 - 1, (1,), generator=generator, device=gen_device,
                         dtype=torch.int64)
    return seed.to(device)


def rand_bits_like(rand_bits, y: torch.Tensor) -> torch.Tensor:
    """Caller-given SR bytes, checked (uint8, one per element of x, same device) and shaped like y."""
    if (not isinstance(rand_bits, torch.Tensor) or rand_bits.dtype != torch.uint8
            or rand_bits.numel() != y.numel() or rand_bits.device != y.device):
        got = (f"{rand_bits.dtype} {tuple(rand_bits.shape)} on {rand_bits.device}"
               if isinstance(rand_bits, torch.Tensor) else type(rand_bits).__name__)
        raise ValueError(f"rand_bits must be a uint8 tensor with one byte per element of x "
                         f"({y.numel()} on {y.device}), got {got}")
    return rand_bits.reshape(y.shape)


def floor_log2(v: torch.Tensor) -> torch.Tensor:
    """Exact ``floor(log2 v)`` for positive finite fp32 ``v`` (subnormals included), as int32."""
    _, e = torch.frexp(v.float())  # v = m * 2^e with m in [0.5, 1)
    return (e - 1).to(torch.int32)


def exp2_int(k: torch.Tensor) -> torch.Tensor:
    """Exact fp32 ``2^k`` for integer ``k`` in [-149, 127]."""
    return torch.ldexp(torch.ones_like(k, dtype=torch.float32), k.to(torch.int32))
