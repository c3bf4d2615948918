"""Random Hadamard transform (SPEC §4): the matrix, orthogonality, rounding, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import microscale as ms
from microscale.hadamard import RHT_SIGNS_16, hadamard_matrix, rht_matrix, rht_signs

SPEC_SIGNS_16 = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]
SIZES = [2, 4, 8, 16, 32, 64, 128]


def sylvester(d: int) -> np.ndarray:
    """H_d by the Kronecker recursion H_2n = [[H, H], [H, -H]] (independent of popcount)."""
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def test_d16_matrix_is_spec():
    m = rht_matrix(16).double().numpy()
    want = np.diag(SPEC_SIGNS_16) @ sylvester(16) / 4.0
    np.testing.assert_array_equal(m, want)
    assert list(RHT_SIGNS_16) == SPEC_SIGNS_16 and list(rht_signs(16)) == SPEC_SIGNS_16


@pytest.mark.parametrize("d", SIZES)
def test_every_size_orthogonal_and_deterministic(d):
    np.testing.assert_array_equal(hadamard_matrix(d).numpy(), sylvester(d))
    m = rht_matrix(d).double()
    torch.testing.assert_close(m @ m.t(), torch.eye(d, dtype=torch.float64), rtol=0, atol=1e-6)
    signs = rht_signs(d)
    assert len(signs) == d and set(signs) <= {1, -1}
    np.testing.assert_allclose(m.numpy(), np.diag(signs) @ sylvester(d) / np.sqrt(d), rtol=1e-7)
    torch.manual_seed(d)                            # torch's global RNG must not matter
    assert rht_signs(d) == signs and torch.equal(rht_matrix(d), rht_matrix(d))
    if d >= 8:                                      # a fixed *random* vector, not all ones
        assert 0 < signs.count(-1) < d


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_rht_rounds_fp32_product_to_input_dtype(dtype, gen):
    x = torch.randn(3, 5, 64, generator=gen).to(dtype)
    y = ms.rht(x)
    assert y.dtype == dtype and y.shape == x.shape
    m = torch.from_numpy(np.diag(SPEC_SIGNS_16) @ sylvester(16) / 4.0)
    want = (x.double().reshape(-1, 16) @ m).reshape(x.shape)
    if dtype == torch.float32:
        torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
    else:  # fp32 accumulation, then one rounding: within half an ulp of the input dtype (+fp32)
        ulp_half = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dtype]
        assert torch.all((y.double() - want).abs() <= want.abs() * ulp_half * 1.001 + 2.0 ** -25)
        # and it is not rounded coarser (or in steps) than the dtype: most values are exact-ish
        assert (y.double() - want).abs().median() < want.abs().median() * ulp_half


@pytest.mark.parametrize("d", [16, 32, 128])
def test_inverse_and_gemm_invariance(d, gen):
    a = torch.randn(8, 256, generator=gen)
    b = torch.randn(6, 256, generator=gen)
    torch.testing.assert_close(ms.rht_inverse(ms.rht(a, d), d), a, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ms.rht(a, d) @ ms.rht(b, d).t(), a @ b.t(), rtol=1e-4, atol=1e-4)
    # an outlier is spread over its d-chunk: the rotated max is ~ outlier / sqrt(d)
    spike = torch.zeros(1, 256)
    spike[0, 3] = 100.0
    assert ms.rht(spike, d).abs().max().item() == pytest.approx(100.0 / d ** 0.5, rel=1e-6)
    # bf16 in, bf16 out; the round trip loses at most bf16 rounding
    a16 = a.to(torch.bfloat16)
    back = ms.rht_inverse(ms.rht(a16, d), d)
    assert back.dtype == torch.bfloat16
    torch.testing.assert_close(back.float(), a16.float(), rtol=2 ** -7, atol=2 ** -7)


def test_rht_matrix_cache_is_not_shared(gen):
    x = torch.randn(2, 32, generator=gen)
    before = ms.rht(x)
    rht_matrix(16).mul_(2.0)          # a caller scribbling on its copy
    assert torch.equal(ms.rht(x), before)


def test_rht_acts_on_each_chunk_independently(gen):
    x = torch.randn(2, 48, generator=gen)
    y = ms.rht(x)
    for c in range(3):
        torch.testing.assert_close(y[:, 16 * c:16 * (c + 1)], ms.rht(x[:, 16 * c:16 * (c + 1)]))


def test_rht_errors():
    with pytest.raises(ValueError, match="power of two"):
        ms.rht(torch.ones(2, 48), 24)
    with pytest.raises(ValueError, match="power of two"):
        ms.rht(torch.ones(2, 512), 256)
    with pytest.raises(ValueError, match="multiple"):
        ms.rht(torch.ones(2, 24), 16)
    with pytest.raises(ValueError, match="multiple"):
        ms.rht(torch.tensor(1.0), 16)
    with pytest.raises(TypeError, match="floating"):
        ms.rht(torch.ones(2, 16, dtype=torch.int32))
