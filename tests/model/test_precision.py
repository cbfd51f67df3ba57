import pytest
import torch

from recbole_mgformer.model.precision import bf16_is_native, flush_subnormals, matmul, resolve_precision


def test_explicit_precisions_resolve_to_their_dtype():
    assert resolve_precision("fp32", "cpu") == torch.float32
    assert resolve_precision("bf16", "cpu") == torch.bfloat16


def test_auto_follows_the_hardware(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert not bf16_is_native("cpu")
    assert resolve_precision("auto", "cpu") == torch.float32
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert resolve_precision("auto", torch.device("cpu")) == torch.bfloat16


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="unknown precision 'fp16'; choose one of fp32, bf16, auto"):
        resolve_precision("fp16", "cpu")


def test_matmul_rounds_its_inputs_and_returns_fp32_with_gradients():
    a = torch.randn(5, 7, requires_grad=True)
    b = torch.randn(7, 3)
    out = matmul(a, b, torch.bfloat16)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, a.detach().bfloat16().float() @ b.bfloat16().float(), rtol=1e-2, atol=1e-2)
    out.sum().backward()
    assert a.grad.dtype == torch.float32
    torch.testing.assert_close(matmul(a, b), a @ b)


SUBNORMAL = 1e-39  # below float32's smallest normal, 1.2e-38


def test_flush_subnormals_reads_and_writes_them_as_zero():
    torch.set_flush_denormal(False)
    try:
        assert (torch.full((4,), SUBNORMAL) * 1.0).ne(0).all()  # kept: the test would pass without the flush
        flush_subnormals()
        weights = torch.full((8, 8), SUBNORMAL)
        assert (torch.ones(8, 8) @ weights).eq(0).all()
        assert (torch.full((4,), 1e-20) * 1e-20).eq(0).all()  # 1e-40: a product that would be subnormal
    finally:
        torch.set_flush_denormal(False)
