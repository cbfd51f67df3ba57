import math

import pytest
import torch

from recbole_mgformer.model.mgformer.attention import key_summary, query_readout
from recbole_mgformer.model.mgformer.feature_maps import apply_feature_map, draw_projection
from recbole_mgformer.model.mgformer.key_summary import ChunkFunctions, chunked_key_summary


def make_inputs(n=600, d=8, heads=1, m=None, dtype=torch.float64, seed=0, structural=True):
    g = torch.Generator().manual_seed(seed)
    width = 2 * d if structural else d
    m = m or width // heads
    embeddings = (0.5 * torch.randn(n, d, generator=g, dtype=dtype)).requires_grad_()
    fixed = 0.7 * torch.randn(n, d, generator=g, dtype=dtype) if structural else None
    weight = (torch.randn(width, width, generator=g, dtype=dtype) / math.sqrt(width)).requires_grad_()
    projection = torch.stack([draw_projection("simrf", m, width // heads, g, dtype=dtype) for _ in range(heads)])
    z_logits = torch.randn(n, generator=g, dtype=dtype).requires_grad_()
    return embeddings, fixed, weight, projection, z_logits


def split_heads(x, heads):
    return x.view(x.shape[0], heads, -1).transpose(0, 1)


def unfused_summary(embeddings, fixed, weight, projection, z):
    """The autograd form the fused one replaces: key features, then key_summary (model/mgformer/attention.py)."""
    x = embeddings if fixed is None else torch.cat([embeddings, fixed], dim=1)
    heads = projection.shape[0]
    phi_k = apply_feature_map("simrf", split_heads(x @ weight.T, heads), projection, is_query=False)
    return key_summary(phi_k, split_heads(x, heads), z)


def gradients(summary_fn, inputs, mask, upstream):
    embeddings, fixed, weight, projection, z_logits = inputs
    z = torch.sigmoid(z_logits) if mask else None
    out = summary_fn(embeddings, fixed, weight, projection, z)
    wrt = (embeddings, weight, z_logits) if mask else (embeddings, weight)
    return out, torch.autograd.grad((out * upstream).sum(), wrt)


@pytest.mark.parametrize("keep", [False, True], ids=["recompute", "keep"])
@pytest.mark.parametrize(
    "heads, mask, structural, chunk",
    [
        (1, True, True, 128),
        (2, True, True, 1000),
        (1, False, True, 77),
        (2, False, False, 250),
        (4, True, True, 300),
        (3, True, True, 200),  # learned columns span two heads; the second one in part (d = 6)
    ],
)
def test_fused_sums_and_gradients_equal_the_unfused_form(heads, mask, structural, chunk, keep):
    inputs = make_inputs(heads=heads, structural=structural, d=6 if heads == 3 else 8)
    _, _, _, projection, _ = inputs
    upstream = torch.randn(
        heads, (2 if mask else 1) * projection.shape[1], projection.shape[2] + 1, dtype=torch.float64
    )
    expected, expected_grads = gradients(unfused_summary, inputs, mask, upstream)
    functions = ChunkFunctions(keep=keep)
    fused = lambda *args: chunked_key_summary(*args, chunk_size=chunk, functions=functions)  # noqa: E731
    got, got_grads = gradients(fused, inputs, mask, upstream)
    torch.testing.assert_close(got, expected)
    for a, b in zip(got_grads, expected_grads):
        torch.testing.assert_close(a, b)


def test_large_logits_do_not_overflow_and_chunks_rescale_exactly():
    embeddings, fixed, weight, projection, z_logits = make_inputs(n=300)
    with torch.no_grad():
        weight.mul_(40)  # logits of several hundred: exp overflows without the shift
        z = torch.sigmoid(z_logits)
        one_pass = chunked_key_summary(embeddings, fixed, weight, projection, z, chunk_size=300)
        chunked = chunked_key_summary(embeddings, fixed, weight, projection, z, chunk_size=7)
    assert torch.isfinite(one_pass).all()
    torch.testing.assert_close(chunked, one_pass)


def test_structural_columns_get_no_gradient():
    embeddings, fixed, weight, projection, _ = make_inputs()
    with pytest.raises(ValueError, match="fixed and get no gradient"):
        chunked_key_summary(embeddings, fixed.requires_grad_(), weight, projection)


def explicit_attention(x_query, x_key, query_weight, key_weight, projection, z_query, z_key):
    """Eq. (8) with the sin mask of Eq. (10) as an explicit (b, n) matrix, O(b n), in float64."""
    phi_q = apply_feature_map("simrf", x_query @ query_weight.T, projection[0], is_query=True)
    phi_k = apply_feature_map("simrf", x_key @ key_weight.T, projection[0], is_query=False)
    mask = torch.sin(math.pi / 2 * (z_query[:, None] + z_key[None, :]) / 2)
    weights = mask * (phi_q @ phi_k.T)
    return weights @ x_key / weights.sum(-1, keepdim=True)


# bf16 keeps 8 significant bits of each matmul input and output; the attention output averages those roundings
# over the keys. Stated tolerance: 2% relative (Frobenius) error of Eq. (12)'s output.
BF16_TOLERANCE = 2e-2


def test_bf16_eq_12_is_within_its_stated_tolerance_of_fp32_and_of_the_explicit_mask():
    embeddings, fixed, key_weight, projection, z_logits = make_inputs(n=3000, d=16, dtype=torch.float32)
    query_weight = torch.randn_like(key_weight) / math.sqrt(key_weight.shape[0])
    z = torch.sigmoid(z_logits).detach()
    x = torch.cat([embeddings, fixed], dim=1).detach()
    queries = torch.arange(0, 3000, 7)
    phi_q = apply_feature_map("simrf", (x[queries] @ query_weight.T)[None], projection, is_query=True)
    outputs = {}
    with torch.no_grad():
        for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
            summary = chunked_key_summary(embeddings, fixed, key_weight, projection, z, dtype, chunk_size=512)
            outputs[name] = query_readout(phi_q, summary, z[queries])[0]
        explicit = explicit_attention(
            x[queries].double(),
            x.double(),
            query_weight.double(),
            key_weight.double(),
            projection.double(),
            z[queries].double(),
            z.double(),
        )
    relative = lambda a, b: float((a.double() - b).norm() / b.norm())  # noqa: E731
    assert relative(outputs["fp32"], explicit) < 1e-5
    assert relative(outputs["bf16"], outputs["fp32"].double()) < BF16_TOLERANCE
    assert relative(outputs["bf16"], explicit) < BF16_TOLERANCE
    assert relative(outputs["bf16"], outputs["fp32"].double()) > 0  # it really ran in bf16


def test_bf16_gradients_point_where_the_fp32_ones_do():
    inputs = make_inputs(n=2000, d=16, dtype=torch.float32)
    _, _, _, projection, _ = inputs
    upstream = torch.randn(1, 2 * projection.shape[1], projection.shape[2] + 1)
    exact = lambda *args: chunked_key_summary(*args, chunk_size=512)  # noqa: E731
    rounded = lambda *args: chunked_key_summary(*args, dtype=torch.bfloat16, chunk_size=512)  # noqa: E731
    _, expected = gradients(exact, inputs, True, upstream)
    _, got = gradients(rounded, inputs, True, upstream)
    for a, b in zip(got, expected):
        assert float(torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0)) > 0.999


@pytest.mark.slow
def test_compiled_chunk_functions_equal_eager():
    inputs = make_inputs(n=700, d=8, dtype=torch.float32)
    _, _, _, projection, _ = inputs
    upstream = torch.randn(1, 2 * projection.shape[1], projection.shape[2] + 1)
    compiled_functions = ChunkFunctions(compile=True)
    eager = lambda *args: chunked_key_summary(*args, chunk_size=256)  # noqa: E731
    compiled = lambda *args: chunked_key_summary(*args, chunk_size=256, functions=compiled_functions)  # noqa: E731
    expected, expected_grads = gradients(eager, inputs, True, upstream)
    got, got_grads = gradients(compiled, inputs, True, upstream)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    for a, b in zip(got_grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert compiled_functions.summary.active and compiled_functions.gradients.active  # no eager fallback
