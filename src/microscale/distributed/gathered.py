"""The weight FSDP2 hands a layer after a quantized all-gather (:mod:`.allgather`).

:class:`GatheredWeight` has the shape and dtype of the full fp32 weight ``[out, in]`` as
metadata and holds no fp32 values: inside are the gathered codes, scales and amax of the two
views the layer reads, W for fprop and Wᵀ for dgrad. ``ms.Linear`` takes them through
:func:`gathered_views` instead of quantizing W again.

It is a traceable wrapper subclass (``__tensor_flatten__`` / ``__tensor_unflatten__``: the six
inner tensors, with each view's format, shape, block and options as the metadata), so a block
compiled with ``torch.compile(fullgraph=True)`` reads the current step's gather as graph inputs
and returns the weight gradient to FSDP2. FSDP2 refreshes the same parameter's tensors in place
on later steps (:meth:`GatheredWeight.refresh_`).
"""

from __future__ import annotations

import torch

from ..tensor import QuantizedTensor

__all__ = ["GatheredWeight", "gathered_views", "is_gathered"]

aten = torch.ops.aten


class GatheredWeight(torch.Tensor):
    """The unsharded weight FSDP2 hands the layer: shape ``[out, in]`` fp32 as metadata, the
    gathered quantized views inside. ``ms.Linear`` reads them through :func:`gathered_views`;
    any other op on it is an error (it holds no fp32 values).

    A traceable wrapper subclass (``__tensor_flatten__``): under ``torch.compile`` Dynamo and
    AOTAutograd see its six inner tensors (codes, scales and amax of both views) as graph
    inputs, so a compiled block reads this step's gather and the layer's weight gradient flows
    back to FSDP2 (without it, Dynamo bakes the first gather in and the weight gets no
    gradient)."""

    _INNER = ("row_data", "row_scale", "row_amax", "col_data", "col_scale", "col_amax")

    @staticmethod
    def __new__(cls, q_row: QuantizedTensor, q_col: QuantizedTensor, requires_grad=False):
        return torch.Tensor._make_wrapper_subclass(cls, q_row.shape, dtype=torch.float32,
                                                   device=q_row.device,
                                                   requires_grad=requires_grad)

    def __init__(self, q_row: QuantizedTensor, q_col: QuantizedTensor, requires_grad=False):
        self.row_data, self.row_scale, self.row_amax = q_row.data, q_row.scale, q_row.amax
        self.col_data, self.col_scale, self.col_amax = q_col.data, q_col.scale, q_col.amax
        self.views_meta = (_qt_meta(q_row), _qt_meta(q_col))

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        src = args[0]
        same_shape = func in (aten.as_strided.default, aten.view.default) and \
            tuple(args[1]) == tuple(src.shape)
        if func in (aten.detach.default, aten.alias.default) or same_shape:
            return GatheredWeight(*gathered_views(src))
        raise NotImplementedError(
            f"GatheredWeight holds the quantized codes FSDP2 all-gathered, not fp32 values; "
            f"{func} is not defined on it (only ms.Linear's GEMMs read it)")

    def __tensor_flatten__(self):
        return list(self._INNER), (self.views_meta, self.requires_grad)

    @staticmethod
    def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
        (row_meta, col_meta), requires_grad = ctx
        q_row = _qt_from(row_meta, inner["row_data"], inner["row_scale"], inner["row_amax"])
        q_col = _qt_from(col_meta, inner["col_data"], inner["col_scale"], inner["col_amax"])
        return GatheredWeight(q_row, q_col, requires_grad)

    def _tensors(self) -> list[torch.Tensor]:
        return [getattr(self, name) for name in self._INNER]

    def owned_tensors(self, outputs) -> tuple[torch.Tensor, ...]:
        """Tensors not backed by FSDP2's all-gather buffers (FSDP2 frees and re-allocates
        them with the buffers between forward and backward)."""
        shared = {o.untyped_storage().data_ptr() for o in outputs}
        seen, owned = set(), []
        for t in self._tensors()[:2] + self._tensors()[3:5]:
            ptr = t.untyped_storage().data_ptr()
            if t.dim() and ptr not in shared and ptr not in seen and t.is_contiguous():
                seen.add(ptr)
                owned.append(t)
        return tuple(owned)

    def refresh_(self, q_row: QuantizedTensor, q_col: QuantizedTensor) -> None:
        """Copy a new gather's values into this parameter's tensors (saved for backward by
        reference, so their version counters must not move)."""
        new = [q_row.data, q_row.scale, q_row.amax, q_col.data, q_col.scale, q_col.amax]
        for old, fresh in zip(self._tensors(), new):
            if old.data_ptr() != fresh.data_ptr():
                with torch.autograd._unsafe_preserve_version_counter(old):
                    old.copy_(fresh)

    def __repr__(self):
        return f"GatheredWeight{tuple(self.shape)}({self.views_meta[0][0]})"


def is_gathered(weight) -> bool:
    """``weight`` is a quantized FSDP2 gather (a plain isinstance: Dynamo traces it)."""
    return isinstance(weight, GatheredWeight)


def gathered_views(weight: GatheredWeight) -> tuple[QuantizedTensor, QuantizedTensor]:
    """The gathered W view (fprop) and Wᵀ view (dgrad) as QuantizedTensors."""
    row_meta, col_meta = weight.views_meta
    return (_qt_from(row_meta, weight.row_data, weight.row_scale, weight.row_amax),
            _qt_from(col_meta, weight.col_data, weight.col_scale, weight.col_amax))


def _qt_meta(q: QuantizedTensor) -> tuple:
    return (q.fmt, tuple(q.shape), q.orig_dtype, tuple(q.block), q.rht_d,
            tuple(sorted(q.extra.items())))


def _qt_from(meta: tuple, data, scale, amax) -> QuantizedTensor:
    fmt, shape, orig_dtype, block, rht_d, extra = meta
    return QuantizedTensor(fmt=fmt, data=data, scale=scale, amax=amax, shape=torch.Size(shape),
                           orig_dtype=orig_dtype, block=block, rht_d=rht_d, extra=dict(extra))
