"""bf16 GEMMs on CPU computed as fp32 GEMMs of the same values (train/cpu_gemm.py)."""

import json

import pytest
import torch

from microscale.train import cpu_gemm
from microscale.train.cpu_gemm import Bf16GemmsInFp32, cpu_bf16_gemm
from microscale.train.data import stdlib_corpus
from microscale.train.trainer import TrainConfig, Trainer


def _bf16(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16)


@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_gemms_equal_the_fp32_gemm_of_the_bf16_values_rounded_once(layout):
    """Every layout of mm, and addmm and bmm: the fp32 op of the bf16 values, rounded to bf16
    (what a GPU's bf16 GEMM computes, up to the order of its fp32 sums), bit for bit."""
    a = _bf16(48, 40) if layout[0] == "n" else _bf16(40, 48).t()
    b = _bf16(40, 24, seed=1) if layout[1] == "n" else _bf16(24, 40, seed=1).t()
    bias, batch = _bf16(24, seed=2), (_bf16(3, 16, 8, seed=3), _bf16(3, 8, 5, seed=4))
    with Bf16GemmsInFp32():
        got = (a @ b, torch.addmm(bias, a, b), torch.bmm(*batch),
               torch.nn.functional.linear(a, b.t().contiguous(), bias))
    want = ((a.float() @ b.float()).bfloat16(),
            torch.addmm(bias.float(), a.float(), b.float()).bfloat16(),
            torch.bmm(*(t.float() for t in batch)).bfloat16(),
            torch.addmm(bias.float(), a.float(), b.float()).bfloat16())
    for g, w in zip(got, want):
        assert g.dtype == torch.bfloat16 and torch.equal(g, w)
    x32 = torch.randn(4, 6)
    with Bf16GemmsInFp32():                                  # fp32 untouched
        assert torch.equal(x32 @ x32.t(), torch.mm(x32, x32.t()))


def test_backward_gemms_go_through_it_and_autocast_sees_bf16():
    """Under autocast the layer's output is bf16 as before; the gradients' GEMMs (run inside the
    block) are the fp32 GEMMs of the bf16 values too."""
    w = torch.randn(24, 40, requires_grad=True)
    x = torch.randn(48, 40, requires_grad=True)
    dy = _bf16(48, 24, seed=5)
    with Bf16GemmsInFp32(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    with Bf16GemmsInFp32():
        y.backward(dy)
    assert y.dtype == torch.bfloat16
    xb, wb = x.detach().bfloat16().float(), w.detach().bfloat16().float()
    assert torch.equal(y, (xb @ wb.t()).bfloat16())
    assert torch.equal(x.grad, (dy.float() @ wb).bfloat16().float())
    assert torch.equal(w.grad, (dy.float().t() @ xb).bfloat16().float())


def test_the_choice(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(cpu_gemm, "native_bf16_cpu", lambda: False)
    assert cpu_bf16_gemm(cpu, compiled=False) == "fp32"
    assert cpu_bf16_gemm(cpu, compiled=True) == "native"        # Inductor's own GEMMs
    assert cpu_bf16_gemm(cuda, compiled=False) == "native"
    monkeypatch.setattr(cpu_gemm, "native_bf16_cpu", lambda: True)
    assert cpu_bf16_gemm(cpu, compiled=False) == "native"       # AVX512-BF16 / AMX
    monkeypatch.setenv("MICROSCALE_CPU_BF16_GEMM", "fp32")
    assert cpu_bf16_gemm(cpu, compiled=False) == "fp32"
    monkeypatch.setenv("MICROSCALE_CPU_BF16_GEMM", "native")
    monkeypatch.setattr(cpu_gemm, "native_bf16_cpu", lambda: False)
    assert cpu_bf16_gemm(cpu, compiled=False) == "native"
    monkeypatch.setenv("MICROSCALE_CPU_BF16_GEMM", "fast")
    with pytest.raises(ValueError, match="MICROSCALE_CPU_BF16_GEMM"):
        cpu_bf16_gemm(cpu, compiled=False)


def test_trainer_runs_its_gemms_through_it_and_records_it(tmp_path, monkeypatch):
    """A bf16 CPU run's GEMMs (forward, backward, evaluation) go through the mode, and its run
    config says so; with MICROSCALE_CPU_BF16_GEMM=native none do."""
    monkeypatch.setattr(cpu_gemm, "native_bf16_cpu", lambda: False)
    seen = []
    real = Bf16GemmsInFp32.__torch_dispatch__
    monkeypatch.setattr(Bf16GemmsInFp32, "__torch_dispatch__",
                        lambda self, func, types, args=(), kwargs=None:
                        seen.append(func) or real(self, func, types, args, kwargs))
    data = stdlib_corpus(tmp_path / "corpus", max_bytes=200_000)
    for env, want in (("auto", "fp32"), ("native", "native")):
        monkeypatch.setenv("MICROSCALE_CPU_BF16_GEMM", env)
        seen.clear()
        out = tmp_path / env
        cfg = TrainConfig(model="micro", steps=2, batch_size=2, seq_len=32, eval_every=1,
                          eval_batches=1, ckpt_every=0, out=str(out), device="cpu",
                          max_bytes=200_000, progress=False)
        trainer = Trainer(cfg, data=data)
        assert trainer.bf16_gemm == want
        trainer.fit()
        config = json.loads((out / "config.json").read_text())
        assert config["cpu_bf16_gemm"] == want
        gemms = sum(f in cpu_gemm._GEMMS for f in seen)
        assert (gemms > 0) if want == "fp32" else (gemms == 0)
