"""ms.export(format="compressed-tensors"): compressed-tensors' own decompressor gives back
q.dequantize() exactly for every format, transformers loads the export and its logits match the
weight-only dequantized forward within bf16 rounding, unexpressible cases raise, writes are atomic.
"""

from __future__ import annotations

import errno
import json

import pytest
import torch

import microscale as ms

transformers = pytest.importorskip("transformers")
ct = pytest.importorskip("compressed_tensors")

from compressed_tensors.compressors.base import BaseCompressor  # noqa: E402
from compressed_tensors.compressors.format import infer_module_format  # noqa: E402
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme  # noqa: E402

from microscale.integrations.compressed_tensors import pack_weight  # noqa: E402

WEIGHT_OPERANDS = {                       # preset -> which operand's config to export
    "nvfp4 16x16": ("nvfp4", "fprop", "b"),
    "nvfp4 1x16": ("nvfp4_no_2d", "fprop", "b"),
    "mxfp4": ("mxfp4", "fprop", "b"),
    "mxfp8": ("mxfp8", "fprop", "b"),
    "fp8 128x128": ("fp8_blockwise", "fprop", "b"),
    "fp8 1x128": ("fp8_blockwise", "fprop", "a"),
    "fp8 tensorwise": ("fp8_tensorwise", "fprop", "b"),
}

pytestmark = pytest.mark.usefixtures("single_thread")


def _operand(key):
    preset, gemm, operand = WEIGHT_OPERANDS[key]
    return getattr(getattr(ms.Recipe.from_name(preset), gemm), operand)


@pytest.mark.parametrize("key", list(WEIGHT_OPERANDS))
def test_decompressor_gives_back_dequantize_exactly(key):
    torch.manual_seed(0)
    w = torch.randn(256, 384) * 0.02
    w[7, 11], w[200, 300] = 3.0, -1e-6                     # an outlier and a tiny value
    packed = pack_weight(w, _operand(key))
    scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**packed.args))
    assert infer_module_format(torch.nn.Linear, scheme).value == packed.format   # CT's choice
    compressor = BaseCompressor.get_value_from_registry(packed.format)
    out = compressor.decompress(dict(packed.tensors), scheme)["weight"]
    assert out.shape == w.shape
    assert torch.equal(out, packed.q.dequantize(out.dtype))
    if packed.format == "nvfp4-pack-quantized":            # the encode scale, not its inverse
        assert torch.equal(packed.tensors["weight_global_scale"],
                           (torch.tensor(2688.0) / packed.q.amax).reshape(1))


@pytest.mark.parametrize("op, match", [
    (ms.Recipe.from_name("mxfp8").fprop.b.__class__(ms.QFormat.MXFP8_E5M2), "E5M2"),
    (ms.Recipe.from_name("nvfp4").wgrad.b, "RHT"),
    (ms.Recipe.from_name("bf16").fprop.b, "not quantized"),
])
def test_unexpressible_weights_raise(op, match):
    with pytest.raises(ValueError, match=match):
        pack_weight(torch.randn(32, 64), op)


def llama(hidden=64, inter=128, kv=2):
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=hidden, intermediate_size=inter,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=kv, max_position_embeddings=64,
                                   tie_word_embeddings=True)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


def _weight_only_reference(model, tmp_path):
    """The converted model with each quantized layer's weight replaced by its dequantized fprop
    operand, saved dense and loaded back the way the export is (bf16)."""
    ref = llama(model.config.hidden_size, model.config.intermediate_size,
                model.config.num_key_value_heads)
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    for name, mod in model.named_modules():
        if isinstance(mod, ms.Linear):
            q = pack_weight(mod.gemm_weight(), mod.recipe.fprop.b).q
            state[f"{name}.weight"] = q.dequantize(torch.bfloat16).float()
    ref.load_state_dict(state)
    ref.save_pretrained(tmp_path / "ref")
    return transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ref",
                                                             dtype=torch.bfloat16)


@pytest.mark.parametrize("recipe, dims", [("nvfp4", (64, 128, 2)), ("mxfp4", (64, 128, 2)),
                                          ("fp8_blockwise", (128, 256, 4))])
def test_export_loads_in_transformers_and_matches_weight_only_forward(tmp_path, recipe, dims):
    model = llama(*dims)
    report = ms.convert(model, recipe, keep_high_precision=["*.down_proj"])
    out = ms.export(model, tmp_path / "export")
    config = json.loads((out / "config.json").read_text())
    qc = config["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and config["dtype"] == "bfloat16"
    assert set(qc["ignore"]) == {"lm_head"} | {n for n in report.kept if n.endswith("down_proj")}
    assert config["microscale"]["export"]["layers"].keys() == set(report.converted)

    served = transformers.AutoModelForCausalLM.from_pretrained(out)
    reference = _weight_only_reference(model, tmp_path)
    x = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, want = served(input_ids=x).logits.float(), reference(input_ids=x).logits.float()
    assert got.dtype == want.dtype and torch.isfinite(got).all()
    bf16_ulp = 2.0 ** -7 * want.abs().max()                  # one bf16 rounding of the logits
    assert (got - want).abs().max() <= bf16_ulp
    assert not list(tmp_path.glob(".export.*"))              # no temp directory left


def test_export_refusals(tmp_path):
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_embd=64, n_layer=2, n_head=4, n_positions=32, bos_token_id=0,
        eos_token_id=0))
    ms.convert(gpt2, "nvfp4")
    with pytest.raises(ValueError, match="Conv1D"):
        ms.export(gpt2, tmp_path / "g")
    with pytest.raises(ValueError, match="no microscale layers"):
        ms.export(llama(), tmp_path / "plain")
    model = llama()
    ms.convert(model, "nvfp4")
    with pytest.raises(ValueError, match="unknown format 'gguf'"):
        ms.export(model, tmp_path / "x", format="gguf")
    with pytest.raises(TypeError, match="Hugging Face model"):
        ms.export(torch.nn.Sequential(ms.Linear(32, 32)), tmp_path / "seq")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        ms.export(model, tmp_path / "file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]     # nothing half-written


def test_export_is_atomic_on_a_full_disk(tmp_path, monkeypatch):
    import microscale.integrations.compressed_tensors as ct_export

    model = llama()
    ms.convert(model, "nvfp4")
    first = ms.export(model, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    with pytest.raises(ValueError, match="already exists"):
        ms.export(model, first)

    real = ct_export.write_compressed_tensors

    def full_disk(model, out, dtype):
        real(model, out, dtype)                            # everything written, then ENOSPC
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ct_export, "write_compressed_tensors", full_disk)
    with pytest.raises(OSError, match="No space"):
        ms.export(model, first, overwrite=True)
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    monkeypatch.setattr(ct_export, "write_compressed_tensors", real)
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(2)
    ms.export(model, first, overwrite=True)                  # replaced as a whole
    assert (first / "model.safetensors").read_bytes() != before["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
