"""A LLaMA / Nemotron-style decoder in plain PyTorch, sized so every recipe tiles it.

Architecture (pre-norm, no biases anywhere)::

    h = tok_emb[ids]                                   embedding, fp32 master, stays high precision
    for block in blocks:                               nn.ModuleList (convert finds it: the largest)
        a = RMSNorm(h)
        q, k, v = a Wqᵀ, a Wkᵀ, a Wvᵀ                  nn.Linear: quantized by ms.convert (fused_qkv:
                                                       one [q; k; v] matrix, as Megatron's linear_qkv)
        q, k = RoPE(q), RoPE(k)                        fp32 rotation, cast back
        o = SDPA(q, k, v, causal, GQA)                 score/value matmuls: high precision
        h = h + o Woᵀ                                  nn.Linear
        m = RMSNorm(h)
        h = h + W2 · act(W1 m)                         relu² (Nemotron) or SwiGLU: W2 · (silu(W1 m) ⊙ W3 m)
    logits = lm_head(RMSNorm(h))                       LMHead, *not* nn.Linear: never quantized

Only the q/k/v/o projections and the MLP matrices are ``nn.Linear``, so a converter that swaps
``nn.Linear`` modules touches exactly the GEMMs the NVFP4 recipe quantizes; embeddings, norms,
attention (``F.scaled_dot_product_attention``) and the head stay in high precision (bf16
compute under autocast, fp32 master weights). The head may share the embedding matrix
(``tie_head``).

Tiling: every linear's in/out features are multiples of 128, the largest block any recipe uses
(FP8 128×128 weight tiles), so all presets apply to every layer without padding. Hence GQA only
where ``n_kv_heads · head_dim`` is still a multiple of 128, and SwiGLU's hidden width rounded
to 128.

Sizes (``MODEL_CONFIGS``; parameter counts with the byte vocabulary of 256)::

    micro   d 128, 2 blocks       ~0.4M   tests
    tiny    d 128, 5 blocks       ~1.0M   CPU default
    small   d 384, 6 blocks       ~9.5M
    50m     d 640, 12 blocks      ~51M
    125m    d 768, 20 blocks      ~126M
    350m    d 1024, 32 blocks     ~353M
    1b      d 2048, 20 blocks     ~0.88B  (fits one 80 GB GPU with AdamW at batch 8 x 2048)
    moe-tiny, moe-1b              mixture-of-experts decoders (train/moe.py)

:func:`flops_per_token` counts the model FLOPs of one training token (forward + backward) for
utilisation figures.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..nn.mlp import relu2_mlp
from ..nn.recompute import linear_from

__all__ = ["ModelConfig", "MODEL_CONFIGS", "Transformer", "RMSNorm", "LMHead", "build_model",
           "flops_per_token"]

_TILE = 128


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the decoder. ``d_ff`` is the relu² hidden width; SwiGLU uses ~2/3 of it (3 matrices)."""

    d_model: int = 128
    n_layers: int = 5
    n_heads: int = 4
    n_kv_heads: int = 4
    d_ff: int = 512
    vocab_size: int = 256
    max_seq_len: int = 1024
    mlp: str = "relu2"
    tie_head: bool = True
    rope_theta: float = 10000.0
    fused_qkv: bool = False     # one q/k/v projection (Megatron's layout); False: three
    norm_eps: float = 1e-5
    init_std: float = 0.02

    def __post_init__(self):
        if self.mlp not in ("relu2", "swiglu"):
            raise ValueError(f"mlp must be 'relu2' or 'swiglu', got {self.mlp!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for RoPE")
        for name, width in (("d_model", self.d_model), ("n_kv_heads*head_dim", self.kv_dim),
                            ("hidden (d_ff)", self.hidden_dim)):
            if width % _TILE:
                raise ValueError(f"{name} = {width} must be a multiple of {_TILE} so every recipe tiles")
        if min(self.n_layers, self.vocab_size, self.max_seq_len) < 1:
            raise ValueError("n_layers, vocab_size and max_seq_len must be positive")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def hidden_dim(self) -> int:
        """MLP hidden width: d_ff for relu², 2/3·d_ff rounded up to 128 for SwiGLU (same params)."""
        if self.mlp == "relu2":
            return self.d_ff
        return _TILE * math.ceil(2 * self.d_ff / 3 / _TILE)

    def active_params(self) -> int:
        """Parameters one token multiplies (all of them for a dense model; see train/moe.py)."""
        return self.num_params()

    def num_params(self) -> int:
        d, L = self.d_model, self.n_layers
        attn = 2 * d * d + 2 * d * self.kv_dim
        mlp = (2 if self.mlp == "relu2" else 3) * d * self.hidden_dim
        emb = self.vocab_size * d * (1 if self.tie_head else 2)
        return L * (attn + mlp + 2 * d) + emb + d


MODEL_CONFIGS: dict[str, ModelConfig] = {
    "micro": ModelConfig(d_model=128, n_layers=2, n_heads=4, n_kv_heads=4, d_ff=512),
    "tiny": ModelConfig(d_model=128, n_layers=5, n_heads=4, n_kv_heads=4, d_ff=512),
    "small": ModelConfig(d_model=384, n_layers=6, n_heads=6, n_kv_heads=2, d_ff=1536),
    "50m": ModelConfig(d_model=640, n_layers=12, n_heads=10, n_kv_heads=2, d_ff=2560),
    "125m": ModelConfig(d_model=768, n_layers=20, n_heads=12, n_kv_heads=4, d_ff=3072, tie_head=False),
    "350m": ModelConfig(d_model=1024, n_layers=32, n_heads=16, n_kv_heads=4, d_ff=4096, tie_head=False),
    "1b": ModelConfig(d_model=2048, n_layers=20, n_heads=16, n_kv_heads=4, d_ff=8192, tie_head=False,
                      max_seq_len=2048),
}


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token: ``6 · (matmul parameters) + 12 · layers · d_model · seq_len``.

    The first term is the forward and backward of every weight matrix (block linears and the
    head; the embedding is a lookup; for MoE the top-k experts a token visits), the second the attention score and value matmuls, counted
    without the causal halving (the PaLM convention, so figures compare with published MFU).
    """
    d, L = cfg.d_model, cfg.n_layers
    matmul = cfg.active_params() - cfg.vocab_size * d * (1 if cfg.tie_head else 2) - L * 2 * d - d
    return 6.0 * (matmul + cfg.vocab_size * d) + 12.0 * L * d * seq_len


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) · g``, computed in fp32.

    The output has the autocast dtype when autocast is on (else x's dtype): the fp32 residual
    stream enters every block's linears as bf16, for ``nn.Linear`` and ``ms.Linear`` alike, so
    the quantized recipes quantize exactly the activations the bf16 baseline multiplies.
    """

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        out_dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
        x_fp32 = x.float()
        x_fp32 = x_fp32 * torch.rsqrt(x_fp32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x_fp32 * self.weight.float()).to(out_dtype)


class LMHead(nn.Module):
    """Output projection ``logits = h Wᵀ``. Deliberately not an ``nn.Linear``: it is never quantized.

    With ``tied`` set, ``weight`` is the embedding's parameter (one tensor, two uses).
    """

    def __init__(self, d_model: int, vocab_size: int, tied: nn.Parameter | None = None):
        super().__init__()
        self.weight = tied if tied is not None else nn.Parameter(torch.empty(vocab_size, d_model))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight)


def _rope_tables(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``[max_seq_len, head_dim/2]`` in fp32: angle(pos, i) = pos · theta^(-2i/head_dim)."""
    inv_freq = cfg.rope_theta ** (-torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    angles = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[2i], x[2i+1]) of ``x [B, H, T, hd]`` by the position angle, in fp32."""
    x_fp32 = x.float().unflatten(-1, (-1, 2))
    x0, x1 = x_fp32[..., 0], x_fp32[..., 1]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return out.flatten(-2).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.fused, self.widths = cfg.fused_qkv, (cfg.d_model, cfg.kv_dim, cfg.kv_dim)
        if self.fused:
            self.qkv_proj = nn.Linear(cfg.d_model, sum(self.widths), bias=False)
        else:
            self.q_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
            self.k_proj = nn.Linear(cfg.d_model, cfg.kv_dim, bias=False)
            self.v_proj = nn.Linear(cfg.d_model, cfg.kv_dim, bias=False)
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.fused:
            q, k, v = self.qkv_proj(x).split(self.widths, dim=-1)
            # attention keeps v for backward: as a view of the fused output it would keep q's
            # and k's pre-RoPE columns alive with it (+1.7 GB at 1b); a copy of v costs one pass
            return q, k, v.contiguous()
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self._qkv(x)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        v = v.to(q.dtype)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=self.n_kv_heads != self.n_heads)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    """relu²: ``down(relu(up x)²)``; SwiGLU: ``down(silu(gate x) ⊙ up x)``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind = cfg.mlp
        self.up_proj = nn.Linear(cfg.d_model, cfg.hidden_dim, bias=False)
        self.gate_proj = nn.Linear(cfg.d_model, cfg.hidden_dim, bias=False) if cfg.mlp == "swiglu" else None
        self.down_proj = nn.Linear(cfg.hidden_dim, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # down_proj(op(*sources)); a converted down_proj with recompute_input on keeps the
        # sources for backward instead of its quantized input (microscale.nn.recompute)
        if self.gate_proj is None:                   # one autograd node where it fuses
            return relu2_mlp(x, self.up_proj, self.down_proj)
        return linear_from(self.down_proj, "mul", F.silu(self.gate_proj(x)), self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        if getattr(cfg, "n_experts", 0):             # an MoE config (train/moe.py)
            from .moe import MoEMLP
            self.mlp = MoEMLP(cfg)
        else:
            self.mlp = MLP(cfg)

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.attn_norm(h), cos, sin)
        return h + self.mlp(self.mlp_norm(h))


class Transformer(nn.Module):
    """Decoder-only LM: ``forward(ids [B, T]) -> logits [B, T, vocab]`` (fp32)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm_f = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = LMHead(cfg.d_model, cfg.vocab_size, self.tok_emb.weight if cfg.tie_head else None)
        cos, sin = _rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """N(0, 0.02) weights; residual-output projections scaled by 1/sqrt(2·n_layers) (GPT-2)."""
        std = self.config.init_std
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or name == "norm_f.weight":
                p.fill_(1.0)
            elif name.endswith(("o_proj.weight", "down_proj.weight", "experts.down_proj")):
                p.normal_(0.0, std / math.sqrt(2 * self.config.n_layers))
            else:
                p.normal_(0.0, std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        if T > self.config.max_seq_len:
            raise ValueError(f"sequence length {T} exceeds max_seq_len {self.config.max_seq_len}")
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        h = self.tok_emb(ids)
        for block in self.blocks:
            h = block(h, cos, sin)
        return self.lm_head(self.norm_f(h)).float()

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(name: str, vocab_size: int = 256, max_seq_len: int | None = None, **overrides) -> Transformer:
    """``MODEL_CONFIGS[name]`` with the data's vocabulary (padded up to 128) and any overrides
    (``moe-*`` names: the MoE decoder of train/moe.py; ``mlp`` does not apply to it)."""
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown model {name!r}; sizes: {', '.join(MODEL_CONFIGS)}")
    if name.startswith("moe-"):
        overrides.pop("mlp", None)
    changes = {"vocab_size": _TILE * math.ceil(vocab_size / _TILE), **overrides}
    if max_seq_len is not None:
        changes["max_seq_len"] = max_seq_len
    return Transformer(dataclasses.replace(MODEL_CONFIGS[name], **changes))


def _register_moe() -> None:
    from .moe import MOE_CONFIGS
    MODEL_CONFIGS.update(MOE_CONFIGS)


_register_moe()
