"""Input validation and small helpers shared by the reference quantizers.

Every quantizer works on ``x`` viewed as ``[rows, cols]``: the last dimension is the
quantization (GEMM reduction) dimension and all leading dimensions are flattened into rows.
Bad input fails here with an error that names the problem, before any arithmetic runs: the
metadata checks are :func:`microscale.validate.check_input_meta` (the same function the public
boundary calls), the value checks (NaN/Inf in x, the value of a given amax or scale) are here,
and ``check_finite=False`` skips them.

With ``check_finite=False`` non-finite input has one specified result (docs/SPEC.md, "Notes:
non-finite input"), implemented by :func:`split_nan` and :func:`mark_nan`: quantize as if every
NaN were +0, then store the NaN where the format can hold it (an FP8 element, or the scale of
an E2M1 block). ±Inf needs no helper: it is the largest value of every max it enters.
"""

from __future__ import annotations

import torch

from ..validate import SUPPORTED_DTYPES, check_generator, check_input_meta, check_rand_bits

__all__ = ["SUPPORTED_DTYPES", "check_input", "check_given_scalar", "as_rows", "random_bytes",
           "rand_bits_like", "draw_seed", "exp2_int", "floor_log2", "split_nan", "mark_nan",
           "NAN_BYTE_FP8", "NAN_BYTE_E8M0"]

NAN_BYTE_FP8 = 0x7F     # the NaN stored for E4M3/E5M2 elements and E4M3 scales (torch's +NaN)
NAN_BYTE_E8M0 = 0xFF    # the UE8M0 NaN scale


def check_input(x: torch.Tensor, fmt: str, block_cols: int, block_rows: int = 1,
                check_finite: bool = True) -> torch.Tensor:
    """Validate dtype, shape and values; return ``x`` detached.

    Quantization is not differentiable: codes, scales and amax must never hold autograd
    history (a saved QuantizedTensor would otherwise keep the whole graph alive).
    """
    check_input_meta(x, fmt, block_cols, block_rows)
    if check_finite and not bool(torch.isfinite(x).all()):
        bad = "NaN" if bool(torch.isnan(x).any()) else "Inf"
        raise ValueError(f"{fmt}: input contains {bad}; {fmt} cannot represent it "
                         "(pass check_finite=False to skip this check at your own risk)")
    return x.detach()


def check_given_scalar(value: torch.Tensor | None, name: str, fmt: str,
                       check_finite: bool = True) -> None:
    """A caller-given ``amax`` or ``scale`` must be finite and > 0 (0 would turn every code into
    ±max, NaN every scale into NaN, a negative value flips signs). Reads one value (a host
    sync on CUDA), so ``check_finite=False`` skips it like the check on x."""
    if value is None or not check_finite:
        return
    v = float(value.detach().reshape(-1)[0])
    if not (v > 0 and v != float("inf")):
        raise ValueError(f"{fmt}: the given {name} must be finite and > 0, got {v}")


def split_nan(x_hp: torch.Tensor, check_finite: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(x with every NaN replaced by +0, NaN mask)``; ``(x, None)`` when x was checked finite.

    Quantizing the zeroed tensor gives the codes, scales and amax of everything else exactly
    as if the NaN were 0 (max|x| ignores NaN); :func:`mark_nan` then stores the NaN.
    """
    if check_finite:
        return x_hp, None
    nan = torch.isnan(x_hp)
    return torch.where(nan, torch.zeros_like(x_hp), x_hp), nan


def mark_nan(stored: torch.Tensor, mask: torch.Tensor | None, nan_byte: int) -> torch.Tensor:
    """``stored`` (any 1-byte dtype) with ``nan_byte`` wherever ``mask`` is set."""
    if mask is None:
        return stored
    raw = stored.view(torch.uint8)
    return torch.where(mask, torch.full_like(raw, nan_byte), raw).view(stored.dtype)


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
    else:
        check_generator(generator, torch.device(device))
    return torch.randint(0, 256, tuple(shape), generator=generator, device=device,
                         dtype=torch.uint8)


def draw_seed(generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """A stochastic-rounding seed: int64 ``[1]`` on ``device``, drawn from ``generator``
    (or torch's default generator for ``device``, so ``torch.manual_seed`` controls it).

    It stays on the device: the kernels load it (in-kernel Philox, no host sync) and the
    reference seeds a generator with it, so one seed gives the same codes on one backend.
    """
    check_generator(generator, torch.device(device))
    gen_device = generator.device if generator is not None else device
    seed = torch.randint(0, 2**31 - 1, (1,), generator=generator, device=gen_device,
                         dtype=torch.int64)
    return seed.to(device)


def rand_bits_like(rand_bits, y: torch.Tensor) -> torch.Tensor:
    """Caller-given SR bytes, checked (uint8, one per element of x, same device) and shaped like y."""
    return check_rand_bits(rand_bits, y.numel(), y.device).reshape(y.shape)


def floor_log2(v: torch.Tensor) -> torch.Tensor:
    """Exact ``floor(log2 v)`` for positive finite fp32 ``v`` (subnormals included), as int32."""
    _, e = torch.frexp(v.float())  # v = m * 2^e with m in [0.5, 1)
    return (e - 1).to(torch.int32)


def exp2_int(k: torch.Tensor) -> torch.Tensor:
    """Exact fp32 ``2^k`` for integer ``k`` in [-149, 127]."""
    return torch.ldexp(torch.ones_like(k, dtype=torch.float32), k.to(torch.int32))
