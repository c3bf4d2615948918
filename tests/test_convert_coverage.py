"""convert accounts for every GEMM: HF Conv1D, small routers/gates, module_filter_fn, layers it
cannot swap (fused 3-D experts), the high-precision-share warning, and dtype casts."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.nn.coverage import UNPLANNED_WARN_SHARE

D = 32

pytestmark = pytest.mark.usefixtures("single_thread")


class Experts(nn.Module):
    """A fused MoE: one 3-D parameter for all experts, applied with bmm (like transformers 5)."""

    def __init__(self, n: int = 4, d: int = D):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(n, 4 * d, d) * 0.02)

    def forward(self, x):
        return torch.einsum("btd,efd->btf", x, self.gate_up_proj)[..., :D]


class MoEBlock(nn.Module):
    def __init__(self, with_gate: bool = True):
        super().__init__()
        self.attn = nn.Linear(D, D)
        self.router = nn.Linear(D, 4, bias=False)       # out 4 < one NVFP4 block (16)
        self.experts = Experts()
        self.shared_gate = nn.Linear(D, 1) if with_gate else None

    def forward(self, x):
        x = x + self.attn(x) + self.router(x).sum(-1, keepdim=True) + self.experts(x)
        return x if self.shared_gate is None else x * torch.sigmoid(self.shared_gate(x))


class MoELM(nn.Module):
    def __init__(self, n_blocks: int = 2):
        super().__init__()
        self.tok = nn.Embedding(64, D)
        self.blocks = nn.ModuleList(MoEBlock() for _ in range(n_blocks))
        self.lm_head = nn.Linear(D, 64, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for b in self.blocks:
            x = b(x)
        return self.lm_head(x)


def test_small_layers_kept_experts_reported_and_share_warned():
    model = MoELM()
    with pytest.warns(UserWarning, match=r"\d+% of the GEMM weights in the model's blocks stay"):
        report = ms.convert(model, "nvfp4", keep_high_precision=[])
    assert report.converted == ["blocks.0.attn", "blocks.1.attn"]
    assert "smaller than one nvfp4 block" in report.kept["blocks.0.router"]
    assert "out=1" in report.kept["blocks.1.shared_gate"]
    why = report.kept["blocks.0.experts.gate_up_proj"]
    assert "unsupported type Experts" in why and "[4, 128, 32]" in why and "grouped GEMM" in why
    share = report.gemm_share
    attn = 2 * D * D
    other = 2 * (4 * D + D + 4 * 4 * D * D)
    assert (share.quantized, share.kept_by_choice, share.kept_other) == (attn, 0, other)
    assert share.unplanned_share > UNPLANNED_WARN_SHARE and report.warning is not None
    assert f"{share.high_precision_share:.0%}" in report.warning
    assert "block GEMM weights: " in str(report)
    assert report.to_dict()["gemm_params"]["quantized"] == attn
    model(torch.randint(0, 64, (2, 8))).sum().backward()          # still trains


def test_no_warning_when_high_precision_was_asked_for():
    model = nn.Sequential(*[nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))
                            for _ in range(4)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = ms.convert(model, "nvfp4", keep_high_precision=["*.2", "last:1"])
    assert report.converted == ["0.0", "1.0", "2.0"]
    share = report.gemm_share
    assert (share.quantized, share.kept_by_choice, share.kept_other) == (3 * D * D, 5 * D * D, 0)
    assert share.high_precision_share == 5 / 8 and report.warning is None


def test_module_filter_fn_beside_patterns():
    seen = []

    def only_first_block(mod, fqn):
        seen.append((type(mod), fqn))
        return fqn.startswith("blocks.0.")

    model = MoELM()
    with pytest.warns(UserWarning):
        report = ms.convert(model, "mxfp8", module_filter_fn=only_first_block)
    assert report.converted == ["blocks.0.attn"]
    assert report.kept["blocks.1.attn"] == "module_filter_fn returned False"
    assert (nn.Linear, "blocks.1.attn") in seen and all(t is nn.Linear for t, _ in seen)
    with pytest.raises(TypeError, match="module_filter_fn"):
        ms.convert(MoELM(), "nvfp4", module_filter_fn="blocks.0")


def test_cast_keeps_fp32_masters():
    model = MoELM()
    with pytest.warns(UserWarning):
        ms.convert(model, "fp8_delayed", keep_high_precision=[])
    layer = model.blocks[0].attn
    before = layer.weight.detach().clone()
    model.to(torch.bfloat16)
    assert model.tok.weight.dtype == torch.bfloat16 and model.lm_head.weight.dtype == torch.bfloat16
    assert layer.weight.dtype == torch.float32 and layer.bias.dtype == torch.float32
    assert torch.equal(layer.weight, before)                    # not rounded through bf16
    assert all(t.dtype == torch.float32 for t in layer.delayed_state().values())
    model.half()
    assert layer.weight.dtype == torch.float32
    out = model(torch.randint(0, 64, (2, 8)))
    assert out.dtype == torch.float16                            # the rest runs in the cast dtype
    out.float().sum().backward()
    assert layer.weight.grad.dtype == torch.float32


# ---------------------------------------------------------------------------- Hugging Face Conv1D
def test_conv1d_same_numerics_as_linear():
    pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    conv = Conv1D(48, 32)                                        # nf = out 48, nx = in 32
    nn.init.normal_(conv.weight)
    nn.init.normal_(conv.bias)
    lin = nn.Linear(32, 48)
    with torch.no_grad():
        lin.weight.copy_(conv.weight.t())
        lin.bias.copy_(conv.bias)
    recipe = ms.Recipe.from_name("nvfp4")                        # SR on dy: seeds drawn per call
    a, b = ms.TransposedLinear.from_conv1d(conv, recipe), ms.Linear.from_linear(lin, recipe)
    assert a.weight.shape == (32, 48) and list(a.state_dict()) == ["weight", "bias", "_extra_state"]
    x = torch.randn(3, 8, 32, dtype=torch.bfloat16)
    grads = []
    for layer in (a, b):
        xi = x.clone().requires_grad_()
        torch.manual_seed(1)
        y = layer(xi)
        y.backward(torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.dtype))
        grads.append((y, xi.grad, layer.weight.grad, layer.bias.grad))
    (ya, dxa, dwa, dba), (yb, dxb, dwb, dbb) = grads
    assert torch.equal(ya, yb) and torch.equal(dxa, dxb) and torch.equal(dba, dbb)
    assert torch.equal(dwa.t(), dwb)                             # same matrix, master's layout
    assert not torch.allclose(ya.float(), conv(x.float()), atol=1e-3)    # it did quantize


def test_gpt2_all_conv1d_converted_and_checkpoint_shapes_kept():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=96, n_embd=64, n_layer=2, n_head=4, n_positions=32,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    report = ms.convert(model, "mxfp8")
    assert len(report.converted) == 8 and report.gemm_share.kept_other == 0
    assert all(isinstance(model.get_submodule(n), ms.TransposedLinear) for n in report.converted)
    assert report.kept["lm_head"].startswith("output head")
    after = {k: v.shape for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    assert after == shapes                                       # Conv1D layout kept
    out = model(torch.randint(0, 96, (2, 16)), labels=torch.randint(0, 96, (2, 16)))
    out.loss.backward()
    assert model.transformer.h[0].attn.c_attn.weight.grad.shape == (64, 192)
