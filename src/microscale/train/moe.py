"""The zoo's mixture-of-experts decoder: the dense decoder with every MLP replaced by routed experts.

Per block (pre-norm, as :mod:`microscale.train.model`), the MLP becomes::

    m = RMSNorm(h)                                   [S, d] (S = batch · seq tokens)
    p = softmax(m Rᵀ)                                router R [E, d], fp32: kept high precision
    top-k experts per token, weights p_top / Σ p_top (token choice)
    y = Σ_k w_k · SwiGLU_{e_k}(m)                    fused experts gate_up [E, 2I, d],
                                                     down [E, d, I]: grouped GEMMs
    y += SwiGLU_shared(m)                            optional shared expert (nn.Linear)
    h = h + y

The experts are stored and run as Hugging Face transformers 5 runs Mixtral / Qwen3-MoE
(:class:`Experts`: ``gate_up_proj``, ``down_proj``, ``act_fn``; tokens sorted by expert, one
``torch._grouped_mm`` per projection), so ``ms.convert`` swaps them for
:class:`~microscale.nn.experts.QuantizedExperts` exactly as it does in those models, and keeps
the router in high precision with its reason.

Load balancing (Switch Transformer): ``aux = E · Σ_e f_e · P_e`` with ``f_e`` the share of the
``S·k`` assignments that went to expert e and ``P_e`` the mean router probability of e. It is
added to the training objective without changing what ``forward`` returns: :class:`_AuxLoss`
passes the block's output through and, in backward, gives the aux loss the gradient
``aux_coef`` (so the harness's loss stays the language-model loss, comparable with dense runs,
and nothing outside the model needs to know).

Sizes (``MOE_CONFIGS``; byte vocabulary)::

    moe-tiny  d 128, 2 blocks, 4 experts (top 2) of 128, shared expert   ~0.66M  tests, CPU
    moe-1b    d 1024, 24 blocks, 16 experts (top 2) of 768              ~0.97B  one GPU
              (active per token ~0.18B)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .model import ModelConfig

__all__ = ["MOE_CONFIGS", "Experts", "MoEConfig", "MoEMLP", "Router"]

_TILE = 128


@dataclass(frozen=True)
class MoEConfig(ModelConfig):
    """:class:`ModelConfig` plus the experts (``d_ff`` is unused: experts are ``d_expert`` wide)."""

    n_experts: int = 4
    top_k: int = 2
    d_expert: int = 128
    n_shared: int = 0                # shared experts, as one SwiGLU of width n_shared · d_expert
    aux_coef: float = 0.01

    def __post_init__(self):
        super().__post_init__()
        if not 1 <= self.top_k <= self.n_experts:
            raise ValueError(f"top_k {self.top_k} must be in [1, n_experts={self.n_experts}]")
        if self.d_expert % _TILE:
            raise ValueError(f"d_expert = {self.d_expert} must be a multiple of {_TILE}")

    def _block_params(self, experts: int) -> int:
        d, i = self.d_model, self.d_expert
        attn = 2 * d * d + 2 * d * self.kv_dim
        return attn + 3 * d * i * (experts + self.n_shared) + self.n_experts * d + 2 * d

    def num_params(self) -> int:
        emb = self.vocab_size * self.d_model * (1 if self.tie_head else 2)
        return self.n_layers * self._block_params(self.n_experts) + emb + self.d_model

    def active_params(self) -> int:
        """Parameters one token multiplies: the top-k experts, not all of them."""
        emb = self.vocab_size * self.d_model * (1 if self.tie_head else 2)
        return self.n_layers * self._block_params(self.top_k) + emb + self.d_model


MOE_CONFIGS: dict[str, MoEConfig] = {
    "moe-tiny": MoEConfig(d_model=128, n_layers=2, n_heads=4, n_kv_heads=4, n_experts=4,
                          top_k=2, d_expert=128, n_shared=1),
    "moe-1b": MoEConfig(d_model=1024, n_layers=24, n_heads=16, n_kv_heads=4, n_experts=16,
                        top_k=2, d_expert=768, tie_head=False, max_seq_len=2048),
}


class Router(nn.Module):
    """Token-choice top-k router: fp32 logits ``m Rᵀ`` (never quantized: not an nn.Linear)."""

    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.top_k = cfg.top_k
        self.weight = nn.Parameter(torch.empty(cfg.n_experts, cfg.d_model))

    def forward(self, m: torch.Tensor):
        probs = F.linear(m.float(), self.weight.float()).softmax(dim=-1)
        top_p, top_i = probs.topk(self.top_k, dim=-1)
        return probs, top_p / top_p.sum(dim=-1, keepdim=True), top_i


def _torch_grouped_mm(x: torch.Tensor, w_t: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return torch._grouped_mm(x, w_t, offs=offs)


class Experts(nn.Module):
    """Fused SwiGLU experts in transformers 5's layout, run with ``torch._grouped_mm``.

    ``grouped_mm`` (``(x, w_t, offs) -> y``, default ``torch._grouped_mm``) is the one GEMM
    call; a peer's differentiable drop-in can replace it (``benchmarks/bench_train.py``'s
    ``torchao_moe_rowwise`` puts torchao's FP8 rowwise grouped GEMM there)."""

    def __init__(self, cfg: MoEConfig):
        super().__init__()
        E, d, i = cfg.n_experts, cfg.d_model, cfg.d_expert
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * i, d))
        self.down_proj = nn.Parameter(torch.empty(E, d, i))
        self.act_fn = nn.SiLU()
        self.grouped_mm = _torch_grouped_mm

    def forward(self, hidden_states, top_k_index, top_k_weights):
        from ..nn.experts import route_tokens  # lazily: bf16 runs need no microscale.nn

        S, k = top_k_index.shape
        perm, offs = route_tokens(top_k_index, self.gate_up_proj.shape[0])
        x = hidden_states[perm // k]
        h = self.grouped_mm(x, self.gate_up_proj.to(x.dtype).transpose(1, 2), offs)
        gate, up = h.chunk(2, dim=-1)
        a = self.act_fn(gate) * up
        o = self.grouped_mm(a, self.down_proj.to(a.dtype).transpose(1, 2), offs)
        weighted = o * top_k_weights.reshape(-1)[perm].unsqueeze(-1).to(o.dtype)
        out = torch.empty_like(weighted).index_copy(0, perm, weighted)
        return out.view(S, k, -1).sum(dim=1).to(hidden_states.dtype)


class _SharedMLP(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _AuxLoss(torch.autograd.Function):
    """Identity on ``y``; backward adds ``coef · d(aux)`` (the aux loss joins the objective)."""

    @staticmethod
    def forward(ctx, y, aux, coef: float):
        ctx.coef, ctx.aux_dtype = coef, aux.dtype
        return y.view_as(y)

    @staticmethod
    def backward(ctx, dy):
        return dy, torch.full((), ctx.coef, dtype=ctx.aux_dtype, device=dy.device), None


def load_balancing_loss(probs: torch.Tensor, top_i: torch.Tensor, n_experts: int):
    """Switch Transformer's ``E · Σ_e f_e · P_e`` (1 when perfectly balanced)."""
    counts = torch.zeros(n_experts, device=probs.device, dtype=torch.float32)
    counts.scatter_add_(0, top_i.reshape(-1), torch.ones(top_i.numel(), device=probs.device))
    f = counts / top_i.numel()
    return n_experts * (f * probs.float().mean(dim=0)).sum()


class MoEMLP(nn.Module):
    """Router + fused experts (+ shared expert); input and output ``[B, T, d]``."""

    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.n_experts, self.aux_coef = cfg.n_experts, cfg.aux_coef
        self.router = Router(cfg)
        self.experts = Experts(cfg)
        self.shared = _SharedMLP(cfg.d_model, cfg.d_expert * cfg.n_shared) if cfg.n_shared \
            else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        m = x.reshape(-1, shape[-1])
        probs, top_w, top_i = self.router(m)
        y = self.experts(m, top_i, top_w)
        if self.shared is not None:
            y = y + self.shared(m)
        if self.training and torch.is_grad_enabled() and self.aux_coef > 0:
            y = _AuxLoss.apply(y, load_balancing_loss(probs, top_i, self.n_experts),
                               self.aux_coef)
        return y.view(shape)
