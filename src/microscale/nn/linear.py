"""``ms.Linear``: a drop-in ``nn.Linear`` whose three GEMMs run in a block-scaled format.

The math (which operand of which GEMM is quantized how, what is saved for backward) lives in
:mod:`microscale.nn.function`; this module is the ``nn.Module`` around it: fp32 master
parameters, the recipe, the precision switches, the mutable quantization state and its
serialization.

Precision switches
==================
``layer.high_precision = True`` runs all three GEMMs in ``compute_dtype`` with no quantization
(evaluation; the paper's "switch everything to bf16"). ``layer.hp_fprop = True`` runs only fprop
in ``compute_dtype`` and keeps dgrad/wgrad quantized (the paper's Appendix D switch near the
end of training). Both are plain attributes; :class:`~microscale.PrecisionSchedule` and
:func:`~microscale.high_precision` set them for a whole model. Under ``torch.compile`` a switch
costs one recompile.

Memory switch
=============
``layer.recompute_input`` (``None``, the default: on where xᵀ's wgrad view is FP8 tensorwise,
blockwise or MXFP8 and ``out_features >= 2048``, or NVFP4; ``True``/``False`` force it;
:func:`microscale.nn.set_recompute_input`): called
through :func:`microscale.nn.linear_from` (the zoo's MLP down projection), backward recomputes
the input's wgrad view from the activation's sources instead of keeping it: the same bits, less
memory, a little more time (:mod:`microscale.nn.recompute`).

Dtypes
======
Master ``weight``/``bias`` are fp32 parameters and stay fp32 when the model is cast
(``model.to(torch.bfloat16)`` casts everything around the layer, not the masters).
The output and dx have x's dtype (fp32, bf16 or fp16; under ``torch.autocast`` x is first
cast to the autocast dtype, as ``nn.Linear`` would be, and autocast is off inside the layer so the GEMM emulation stays exact); dW and db are fp32.
Activations are quantized from x in its own dtype, the weight from the fp32 master.

State
=====
Stochastic rounding draws one seed tensor per call from torch's default generator
(``torch.manual_seed`` reproduces it) unless the layer owns a ``generator`` (eager only: under
``torch.compile`` a layer-owned generator is a graph break). Under ``torch.distributed`` the
rank is mixed into the seeds (:func:`microscale.distributed.rank_seeds`; rank 0 unchanged), so
data-parallel ranks round with distinct, reproducible streams; tensorwise FP8 agrees on the
amaxes of x and dy across ranks (:mod:`microscale.distributed.reduce`). Delayed FP8 scaling keeps one amax
history and scale per GEMM operand role (``"fprop.a"``, ``"wgrad.b"``, ...) as non-persistent
buffers (they follow ``.to()``), updated in place on the device.

``state_dict()`` holds tensors only: the parameters and ``_extra_state``, a uint8 tensor
``b"MSQ1" + len(header) (4 bytes LE) + header JSON + fp32 payload`` where the header has the
recipe, the switches and the delayed roles, and the payload each role's history then scale. So
``safetensors`` and Hugging Face ``save_pretrained`` can write it; no pickle is ever needed to
read it back. The older dict form still loads. A plain ``nn.Linear`` state dict (``weight`` and
``bias`` only, e.g. pretrained weights loaded into a converted model) loads strictly too: the
layer keeps its recipe, switches and delayed state.

The helpers behind this section (delayed roles and buffer names, seeds from a layer-owned
generator, the ``_extra_state`` codec, the recipe's size check) are in
:mod:`microscale.nn.linear_state`.

Degenerate sizes behave like ``nn.Linear``: with ``in_features = 0`` the output is the bias
broadcast (zeros without bias), with ``out_features = 0`` it is empty; nothing is quantized. On
``device="meta"`` (no values) forward gives the output's shape and dtype, as ``nn.Linear`` does.
"""

from __future__ import annotations

import json
import logging
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..distributed.reduce import SEED_MODULUS, amax_group_name, rank_seeds
from ..quant.common import SUPPORTED_DTYPES
from ..recipe import Recipe
from ..validate import check_bool, check_generator, check_int
from .function import linear, weight_views
from .plan import N_SEEDS, ROLES, Plan, weight_pair_views
# the state helpers (private names re-exported too: integrations.transformers imports here)
from .linear_state import (  # noqa: F401
    _MAGIC,
    _buffer_name,
    _check_dims,
    _decode_state,
    _delayed_roles,
    _parse_state,
    _seeds_from,
)
from .recompute import RecomputedInputLinearFn, recompute_applies
from .saved import saved_activation_bytes

__all__ = ["Linear", "saved_activation_bytes"]

log = logging.getLogger(__name__)


# ============================================================================ the module
class Linear(nn.Module):
    """``nn.Linear`` with quantized GEMMs; see :mod:`microscale.nn.function` for the math.

    Args:
        in_features, out_features, bias: as ``nn.Linear``.
        recipe: a preset name (``"nvfp4"``, ``"mxfp8"``, ...) or a :class:`Recipe`.
        device: where the fp32 master parameters live.
        generator: optional ``torch.Generator`` for stochastic rounding (default: global RNG).
        name: the module path, used in error messages (``convert`` sets it).

    Attributes ``high_precision`` and ``hp_fprop`` are the precision switches.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 recipe: str | Recipe = "nvfp4", device=None, *,
                 generator: torch.Generator | None = None, name: str | None = None):
        super().__init__()
        self.in_features = check_int(in_features, "in_features", 0)
        self.out_features = check_int(out_features, "out_features", 0)
        check_bool(bias, "bias")
        check_generator(generator)
        self.name = name
        self.generator = generator
        self._weight_cache = None          # (plan, W view, Wᵀ view) inside ms.weight_cache
        self.high_precision = False
        self.hp_fprop = False
        self.recompute_input = None        # forward's recompute=(op, sources); None: auto
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device,
                                               dtype=torch.float32))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=torch.float32)) \
            if bias else None
        self.recipe = recipe
        self.reset_parameters()

    # ------------------------------------------------------------------ recipe and state
    @property
    def recipe(self) -> Recipe:
        return self._recipe

    @recipe.setter
    def recipe(self, recipe: str | Recipe) -> None:
        recipe = Recipe.parse(recipe)
        _check_dims(recipe, self.in_features, self.out_features, self.name)
        for role in ROLES:                       # drop the old recipe's delayed state
            for what in ("history", "scale"):
                self._buffers.pop(_buffer_name(role, what), None)
        device = self.weight.device
        for role, op in _delayed_roles(recipe).items():
            self.register_buffer(_buffer_name(role, "history"),
                                 torch.zeros(op.history_len, device=device), persistent=False)
            self.register_buffer(_buffer_name(role, "scale"),
                                 torch.ones((), device=device), persistent=False)
        self._recipe = recipe

    def delayed_state(self) -> dict[str, torch.Tensor]:
        """The delayed-scaling tensors by ``"<role>/history"`` / ``"<role>/scale"`` (live)."""
        return {f"{role}/{what}": self._buffers[_buffer_name(role, what)]
                for role in _delayed_roles(self._recipe) for what in ("history", "scale")}

    @property
    def precision(self) -> str:
        """``"high_precision"``, ``"hp_fprop"`` or ``"quantized"`` (what the next call runs)."""
        if self.high_precision or not self._recipe.quantized or \
                0 in (self.in_features, self.out_features):     # nothing to quantize
            return "high_precision"
        return "hp_fprop" if self.hp_fprop else "quantized"

    def reset_parameters(self) -> None:
        # the same initialisation as nn.Linear, so a converted model trains the same way
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: str | Recipe = "nvfp4", **kwargs) -> "Linear":
        """A ``ms.Linear`` with a copy of ``linear``'s parameters (as fp32 masters)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_linear expects an nn.Linear, got {type(linear).__name__}")
        new = cls(linear.in_features, linear.out_features, linear.bias is not None, recipe,
                  device=linear.weight.device, **kwargs)
        with torch.no_grad():
            new.weight.copy_(linear.weight.float())
            if linear.bias is not None:
                new.bias.copy_(linear.bias.float())
        new.train(linear.training)
        return new

    # ------------------------------------------------------------------ serialization
    def get_extra_state(self) -> torch.Tensor:
        roles = list(_delayed_roles(self._recipe))
        header = {"recipe": self._recipe.to_json(), "high_precision": self.high_precision,
                  "hp_fprop": self.hp_fprop, "delayed": roles}
        payload = [self._buffers[_buffer_name(r, w)].detach().float().reshape(-1).cpu()
                   for r in roles for w in ("history", "scale")]
        head = json.dumps(header, sort_keys=True).encode()
        body = torch.cat(payload).view(torch.uint8) if payload else torch.empty(0, dtype=torch.uint8)
        prefix = torch.frombuffer(bytearray(_MAGIC + len(head).to_bytes(4, "little") + head),
                                  dtype=torch.uint8)
        return torch.cat([prefix, body])

    def check_extra_state(self, state) -> tuple[dict, dict, Recipe]:
        """Decode and validate ``state`` for this layer without applying it (a checkpoint loader
        calls this for every layer before it touches any): ``(header, values, recipe)``."""
        label = self._label()
        header, values = _decode_state(state, label)
        try:
            recipe = Recipe.from_json(header["recipe"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{label}: _extra_state holds no valid recipe: {err}") from None
        _check_dims(recipe, self.in_features, self.out_features, self.name)
        wanted = {r: op.history_len for r, op in _delayed_roles(recipe).items()}
        for role, (history, _) in values.items():
            if role in wanted and history.numel() != wanted[role]:
                raise ValueError(f"{label}: delayed history of {role} has {history.numel()} "
                                 f"entries, the recipe wants {wanted[role]}")
        return header, values, recipe

    def set_extra_state(self, state) -> None:
        header, values, recipe = self.check_extra_state(state)
        if recipe != self._recipe:
            log.info("%s: loading recipe %r from the state_dict (was %r)",
                     self.name or "Linear", recipe.name, self._recipe.name)
            self.recipe = recipe
        self.high_precision = bool(header.get("high_precision", False))
        self.hp_fprop = bool(header.get("hp_fprop", False))
        live = self.delayed_state()
        for role, (history, scale) in values.items():
            if f"{role}/history" not in live:
                continue
            live[f"{role}/history"].copy_(history)
            live[f"{role}/scale"].copy_(scale.reshape(()))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """As ``nn.Module``'s, but a state dict without ``_extra_state`` (a plain ``nn.Linear``
        one) is complete: the layer keeps its own recipe and quantization state."""
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if prefix + "_extra_state" in missing_keys:
            missing_keys.remove(prefix + "_extra_state")

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor, recompute: tuple | None = None) -> torch.Tensor:
        """``y = x Wᵀ + b``. ``recompute=(op, sources)`` says ``x == op(*sources)`` (use
        :func:`microscale.nn.linear_from`, which builds both): with ``self.recompute_input``
        on (the default ``None``: FP8 tensor/blockwise xᵀ, 2048+ wide), backward
        recomputes x's wgrad view from the sources instead of keeping it (less memory, a little
        more time: :mod:`microscale.nn.recompute`); off, it is ignored."""
        self._check_input(x)
        if x.device.type == "meta":                     # no values: shapes only, as nn.Linear
            return F.linear(x, self.weight.to(x.dtype),
                            None if self.bias is None else self.bias.to(x.dtype))
        x, x2d, needs_grad = self._input(x)
        plan, state, seeds = self.gemm_args(x.device)
        if recompute is not None and recompute_applies(self, x, recompute, plan, needs_grad):
            with torch.autocast(x.device.type, enabled=False):   # exact fp32 GEMM emulation
                y2d = RecomputedInputLinearFn.apply(x2d.detach(), self.gemm_weight(), self.bias,
                                                    plan, state, seeds, recompute[0], *recompute[1])
        else:
            y2d = linear(x2d, self.gemm_weight(), self.bias, plan, state, seeds, needs_grad)
        return y2d.reshape(*x.shape[:-1], self.out_features)

    def _check_input(self, x) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{self._label()}: expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{self._label()}: input dtype must be float32, bfloat16 or "
                            f"float16, got {x.dtype}")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"{self._label()}: expected input [..., {self.in_features}], "
                             f"got {tuple(x.shape)}")
        if x.device != self.weight.device:
            raise ValueError(f"{self._label()}: input is on {x.device}, the weights on "
                             f"{self.weight.device}")

    def _input(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """``(x, x2d, needs_grad)``: x in the autocast dtype where autocast is on (as
        ``nn.Linear`` would be), as a token matrix, and whether backward will run."""
        if torch.is_autocast_enabled(x.device.type):     # behave like nn.Linear under autocast
            x = x.to(torch.get_autocast_dtype(x.device.type))
        x2d = x.reshape(math.prod(x.shape[:-1]), self.in_features)   # (-1 fails for in = 0)
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in self.parameters()))
        return x, x2d, needs_grad

    def gemm_args(self, device: torch.device) -> tuple:
        """``(plan, state, seeds)`` of one call (:func:`~microscale.nn.function.linear`): the
        precision switches' plan, the delayed-scaling state (with this layer's cached weight
        views, ``ms.weight_cache``) and this call's SR seeds (drawn here, one draw a call)."""
        plan = self._plan()
        state = self.delayed_state()
        cache = self._weight_cache
        if cache is not None and cache[0] == plan:
            state = {**state, "weight/cache": cache[1:]}
        return plan, state, self._seeds(plan, device)

    def _plan(self) -> Plan:
        precision = self.precision
        return Plan(self._recipe, fprop_hp=precision != "quantized",
                    grads_hp=precision == "high_precision", amax_group=amax_group_name())

    def fill_weight_cache(self) -> int:
        """Quantize W and Wᵀ now, for this layer's forwards until :meth:`clear_weight_cache`
        (``ms.weight_cache``); returns the weight's version counter at this moment."""
        plan = self._plan()
        weight = self.gemm_weight()
        w_sr = {"fprop.b", "dgrad.b"} & set(plan.stochastic_roles())
        seeds = self._seeds(plan, weight.device) if w_sr else None   # no draw when W is RNE
        with torch.no_grad():
            q_w, q_wt = weight_views(weight, plan, self.delayed_state(),
                                     plan.quantized("fprop"), plan.quantized("dgrad"),
                                     None if seeds is None else seeds[1:2])
        return self.set_weight_cache(plan, q_w, q_wt)

    def weight_cache_views(self):
        """``(plan, row view, column view)`` of this layer's W / Wᵀ pair when many layers' pairs
        may be quantized in one call (:func:`~microscale.nn.plan.weight_pair_views`), else
        None; :meth:`set_weight_cache` takes the result."""
        plan = self._plan()
        views = weight_pair_views(plan)
        return None if views is None else (plan, *views)

    def set_weight_cache(self, plan: Plan, q_w, q_wt) -> int:
        """Use these views of W and Wᵀ (quantized by the caller as :meth:`weight_cache_views`
        says) until :meth:`clear_weight_cache`; returns the weight's version counter."""
        self._weight_cache = (plan, q_w, q_wt)
        return self.gemm_weight()._version

    def clear_weight_cache(self) -> None:
        self._weight_cache = None

    def gemm_weight(self) -> torch.Tensor:
        """The fp32 master as ``[out, in]``, the layout every GEMM reads (a subclass may store
        it transposed, as Hugging Face's ``Conv1D`` does: :mod:`microscale.nn.transposed`)."""
        return self.weight

    def _apply(self, fn, recurse=True):
        """``model.to(torch.bfloat16)``, ``.half()``: move this layer, keep its fp32 masters.

        The masters (and the fp32 delayed-scaling state) are what the optimizer updates; a cast
        would silently end fp32-master training. Device moves pass through unchanged.
        """
        def keep_dtype(t):
            out = fn(t)
            if t.is_floating_point() and out.dtype != t.dtype:     # a cast: move only
                return t.to(device=out.device)
            return out
        return super()._apply(keep_dtype, recurse)

    def _seeds(self, plan: Plan, device: torch.device) -> torch.Tensor | None:
        if not plan.stochastic_roles():
            return None
        if self.generator is not None:
            seeds = _seeds_from(self.generator, device)
        else:
            # int32, what the kernels load: no conversion per quantize call (the same values as
            # an int64 draw from the same generator state: the range is below 2^32)
            seeds = torch.randint(0, SEED_MODULUS, (N_SEEDS,), device=device, dtype=torch.int32)
        return rank_seeds(seeds)          # each data-parallel rank its own stream

    def _label(self) -> str:
        return f"ms.Linear {self.name!r}" if self.name else \
            f"ms.Linear({self.in_features}, {self.out_features})"

    def extra_repr(self) -> str:
        extra = "" if self.precision == "quantized" else f", precision={self.precision}"
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, recipe={self._recipe.name}{extra}")
