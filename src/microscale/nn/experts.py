"""Quantized expert layers: ``ms.GroupedLinear`` and the fused-experts module ``convert`` swaps in.

Mixture-of-experts models keep their experts as 3-D parameters and run them with grouped
GEMMs (:mod:`microscale.nn.grouped`). Two modules here:

* :class:`GroupedLinear` -- ``E`` linears ``y_e = x_e W_eᵀ`` over tokens sorted by expert:
  ``forward(x [T, in], offs [E]) -> [T, out]``, weight ``[E, out, in]``.
* :class:`QuantizedExperts` -- a drop-in for Hugging Face's fused experts (Mixtral, Qwen2/3-MoE,
  DeepSeek-V3, OLMoE in transformers 5; and the zoo's MoE decoder) with the same parameters
  ``gate_up_proj [E, 2I, H]`` and ``down_proj [E, H, I]`` (so state dicts load unchanged) and
  the same ``forward(hidden_states [S, H], top_k_index [S, k], top_k_weights [S, k])``::

      sort the S·k (token, expert) pairs by expert       (device ops; offs by scatter-add)
      h  = grouped_mm(x_sorted, gate_up_proj, offs)      [S·k, 2I]   quantized, per expert
      a  = act(h[:, :I]) · h[:, I:]                      high precision
      o  = grouped_mm(a, down_proj, offs)                [S·k, H]    quantized, per expert
      y  = Σ_k weight · o, back in token order           high precision (fp32 sum)

Both keep fp32 master weights (kept fp32 through ``model.to(dtype)``, as ``ms.Linear``), the
recipe, the precision switches ``high_precision`` / ``hp_fprop`` and, for delayed FP8 scaling,
one amax history per expert and operand role (non-persistent buffers ``[E, L]`` and ``[E]``).
Expert weights are ordinary parameters with the experts on dim 0, so FSDP2 shards them on
dim 0 like any dense weight; nothing here assumes all experts live on one rank beyond the
weight tensor a forward receives (expert parallelism is not implemented).
"""

from __future__ import annotations

import json
import math

import torch
from torch import nn

from ..recipe import Recipe
from .plan import Plan
from .grouped import check_grouped_args, delayed_roles, draw_seeds, grouped_linear

__all__ = ["GroupedLinear", "QuantizedExperts", "decode_grouped_header", "expert_layout",
           "is_grouped_state", "route_tokens"]

_MAGIC = b"MSG1"


class _GroupedBase(nn.Module):
    """Recipe, switches, delayed state and serialization shared by the grouped modules."""

    _weights: tuple[str, ...] = ()

    def _init_grouped(self, recipe, generator, name) -> None:
        self.name, self.generator = name, generator
        self.high_precision = False
        self.hp_fprop = False
        self.recipe = recipe

    @property
    def num_experts(self) -> int:
        return getattr(self, self._weights[0]).shape[0]

    @property
    def recipe(self) -> Recipe:
        return self._recipe

    @recipe.setter
    def recipe(self, recipe) -> None:
        recipe = Recipe.parse(recipe)
        for key in [k for k in self._buffers if k.startswith("delayed_")]:
            del self._buffers[key]
        p = getattr(self, self._weights[0])
        for pname in self._weights:
            for role, op in delayed_roles(recipe).items():
                self.register_buffer(_buf(pname, role, "history"), torch.zeros(
                    self.num_experts, op.history_len, device=p.device), persistent=False)
                self.register_buffer(_buf(pname, role, "scale"), torch.ones(
                    self.num_experts, device=p.device), persistent=False)
        self._recipe = recipe

    def delayed_state(self, pname: str) -> dict:
        return {f"{role}/{w}": self._buffers[_buf(pname, role, w)]
                for role in delayed_roles(self._recipe) for w in ("history", "scale")}

    @property
    def precision(self) -> str:
        if self.high_precision or not self._recipe.quantized:
            return "high_precision"
        return "hp_fprop" if self.hp_fprop else "quantized"

    def _plan(self) -> Plan:
        p = self.precision
        return Plan(self._recipe, fprop_hp=p != "quantized", grads_hp=p == "high_precision")

    def _seeds(self, plan: Plan, device) -> torch.Tensor | None:
        if not plan.stochastic_roles():
            return None
        return draw_seeds(self.num_experts, device, self.generator)

    def _run(self, x, pname: str, offs) -> torch.Tensor:
        """One grouped GEMM with the weight ``pname`` (its own delayed state and seeds)."""
        w = getattr(self, pname)
        if torch.is_autocast_enabled(x.device.type):
            x = x.to(torch.get_autocast_dtype(x.device.type))
        # compiled: the class name only; reading self.name would guard every block's graph on
        # its own name and recompile per block (moe-1b hit the recompile limit on an H200)
        check_grouped_args(x, w, offs, type(self).__name__ if torch.compiler.is_compiling()
                           else self._label())
        plan = self._plan()
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
        return grouped_linear(x, w, offs, plan, self.delayed_state(pname),
                              self._seeds(plan, x.device), needs_grad)

    def op_keys(self) -> set:
        """The ``(op, key)`` pairs a step dispatches (``ms.explain(model)`` filters by them)."""
        keys = set(self._recipe.op_keys())     # the per-expert weight quantization
        keys |= {("quantize_grouped", k) for op, k in keys if op == "quantize_rowcol"}
        return keys | {("grouped_scaled_mm", k) for op, k in keys if op == "scaled_mm"}

    def _apply(self, fn, recurse=True):
        """A dtype cast moves the fp32 masters without casting them (as ``ms.Linear``)."""
        def keep_dtype(t):
            out = fn(t)
            return t.to(device=out.device) if t.is_floating_point() and out.dtype != t.dtype \
                else out
        return super()._apply(keep_dtype, recurse)

    def get_extra_state(self) -> torch.Tensor:
        header = {"recipe": self._recipe.to_json(), "high_precision": self.high_precision,
                  "hp_fprop": self.hp_fprop}
        head = json.dumps(header, sort_keys=True).encode()
        body = [b.detach().float().reshape(-1).cpu() for k, b in sorted(self._buffers.items())
                if k.startswith("delayed_")]
        raw = _MAGIC + len(head).to_bytes(4, "little") + head
        prefix = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        return torch.cat([prefix] + [t.view(torch.uint8) for t in body])

    def set_extra_state(self, state) -> None:
        header, n = decode_grouped_header(state, self._label())
        self.recipe = Recipe.from_json(header["recipe"])
        self.high_precision, self.hp_fprop = header["high_precision"], header["hp_fprop"]
        body, offset = state[8 + n:].clone().view(torch.float32), 0
        for k in sorted(self._buffers):
            if k.startswith("delayed_"):
                b = self._buffers[k]
                b.copy_(body[offset:offset + b.numel()].reshape(b.shape))
                offset += b.numel()

    def _label(self) -> str:
        return f"{type(self).__name__} {self.name!r}" if self.name else type(self).__name__


def is_grouped_state(state) -> bool:
    """Whether ``state`` is a grouped layer's ``_extra_state`` (uint8, magic ``MSG1``)."""
    return isinstance(state, torch.Tensor) and state.dtype == torch.uint8 \
        and bytes(state[:4].tolist()) == _MAGIC


def decode_grouped_header(state, label: str) -> tuple[dict, int]:
    """``(header, header length)`` of a grouped layer's ``_extra_state``; the fp32 delayed
    state follows the header."""
    if not is_grouped_state(state):
        raise ValueError(f"{label}: _extra_state is not a microscale grouped-layer state")
    n = int.from_bytes(bytes(state[4:8].tolist()), "little")
    return json.loads(bytes(state[8:8 + n].tolist()).decode()), n


def _buf(pname: str, role: str, what: str) -> str:
    return f"delayed_{pname}_{role.replace('.', '_')}_{what}"


class GroupedLinear(_GroupedBase):
    """``E`` quantized linears over tokens sorted by expert: ``forward(x [T, in], offs [E])``."""

    _weights = ("weight",)

    def __init__(self, num_experts: int, in_features: int, out_features: int,
                 recipe: str | Recipe = "nvfp4", device=None, *,
                 generator: torch.Generator | None = None, name: str | None = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features,
                                               device=device, dtype=torch.float32))
        bound = 1 / math.sqrt(in_features) if in_features else 0.0
        nn.init.uniform_(self.weight, -bound, bound)
        self._init_grouped(recipe, generator, name)

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return self._run(x, "weight", offs)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, in_features={self.in_features}, "
                f"out_features={self.out_features}, recipe={self._recipe.name}")


def expert_layout(mod: nn.Module) -> str | None:
    """None when ``mod`` is a fused-experts module :class:`QuantizedExperts` can replace, else
    the reason it cannot (the layout: biases, transposed or interleaved weights, a custom gate)."""
    gu, down = getattr(mod, "gate_up_proj", None), getattr(mod, "down_proj", None)
    if not (isinstance(gu, torch.Tensor) and isinstance(down, torch.Tensor)
            and gu.dim() == 3 and down.dim() == 3):
        return "no 3-D gate_up_proj / down_proj parameters"
    for flag, bad in (("has_bias", True), ("is_transposed", True), ("is_concatenated", False),
                      ("has_post_expert_norm", True), ("has_gate", False)):
        if getattr(mod, flag, not bad) == bad:
            return f"unsupported expert layout ({flag}={bad})"
    gate = getattr(type(mod), "_apply_gate", None)
    if gate is not None and getattr(gate, "__name__", "") != "_default_apply_gate":
        return "unsupported expert layout (a custom gate function)"
    E, two_i, H = gu.shape
    if down.shape != (E, H, two_i // 2) or not isinstance(getattr(mod, "act_fn", None),
                                                           nn.Module):
        return f"unexpected shapes gate_up_proj {tuple(gu.shape)}, down_proj {tuple(down.shape)}"
    return None


def route_tokens(top_k_index: torch.Tensor, num_experts: int):
    """``(perm, offs)``: the (token, slot) pairs sorted by expert, and int32 group ends (device
    ops only; ``scatter_add`` rather than ``bincount``, which sizes its output on the host)."""
    ids = top_k_index.reshape(-1)
    _, perm = torch.sort(ids, stable=True)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=ids.device)
    counts.scatter_add_(0, ids.clamp(0, num_experts - 1), torch.ones_like(ids))
    return perm, torch.cumsum(counts, 0).to(torch.int32)


class QuantizedExperts(_GroupedBase):
    """Fused experts (``gate_up_proj [E, 2I, H]``, ``down_proj [E, H, I]``) with quantized
    grouped GEMMs; see the module docstring."""

    _weights = ("gate_up_proj", "down_proj")

    def __init__(self, gate_up_proj: torch.Tensor, down_proj: torch.Tensor, act_fn: nn.Module,
                 recipe: str | Recipe = "nvfp4", *, generator=None, name: str | None = None):
        super().__init__()
        self.gate_up_proj = nn.Parameter(gate_up_proj.detach().float().clone())
        self.down_proj = nn.Parameter(down_proj.detach().float().clone())
        self.act_fn = act_fn
        self._init_grouped(recipe, generator, name)

    @classmethod
    def from_experts(cls, mod: nn.Module, recipe="nvfp4", **kwargs) -> QuantizedExperts:
        why = expert_layout(mod)
        if why is not None:
            raise ValueError(f"QuantizedExperts.from_experts: {why}")
        new = cls(mod.gate_up_proj, mod.down_proj, mod.act_fn, recipe, **kwargs)
        new.train(mod.training)
        return new

    def forward(self, hidden_states, top_k_index, top_k_weights):
        S, k = top_k_index.shape
        perm, offs = route_tokens(top_k_index, self.num_experts)
        x = hidden_states[perm // k]
        h = self._run(x, "gate_up_proj", offs)
        gate, up = h.chunk(2, dim=-1)
        o = self._run(self.act_fn(gate) * up, "down_proj", offs)
        weighted = o * top_k_weights.reshape(-1)[perm].unsqueeze(-1)
        out = torch.empty_like(weighted).index_copy(0, perm, weighted)   # back in token order
        return out.view(S, k, -1).sum(dim=1).to(hidden_states.dtype)

    def extra_repr(self) -> str:
        E, two_i, H = self.gate_up_proj.shape
        return f"num_experts={E}, hidden={H}, intermediate={two_i // 2}, recipe={self._recipe.name}"

