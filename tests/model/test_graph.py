import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import dense_normalized_adjacency

from recbole_mgformer.model.graph import (
    CSRParts,
    csr_parts,
    edges_leaving,
    generator_rand,
    graph_with_self_loops,
    lightgcn_layers,
    lightgcn_propagate,
    normalized_adjacency,
    sign_preserving_noise,
    symmetric_sparse_matmul,
    to_torch_csr,
)


@pytest.fixture
def small_graph():
    """4 users, 5 items; user 3 and item 4 have no interactions; (0, 1) appears twice."""
    users = np.array([0, 0, 0, 1, 1, 2, 2, 0])
    items = np.array([0, 1, 2, 1, 3, 0, 3, 1])
    return sp.coo_matrix((np.ones(len(users), dtype=np.float32), (users, items)), shape=(4, 5))


def test_normalized_adjacency_equals_the_dense_formula(small_graph):
    adjacency = normalized_adjacency(small_graph)
    assert adjacency.layout == torch.sparse_csr and adjacency.shape == (9, 9)
    np.testing.assert_allclose(adjacency.to_dense().numpy(), dense_normalized_adjacency(small_graph), rtol=1e-6)


@pytest.mark.parametrize("form", ["coo", "csr", "csc"])
def test_to_torch_csr_sums_repeated_entries_in_the_asked_format(small_graph, form):
    matrix = small_graph.asformat(form) if form != "coo" else small_graph.astype(np.float64)
    tensor = to_torch_csr(matrix)
    assert tensor.layout == torch.sparse_csr and tensor.dtype == torch.float32 and tensor.shape == (4, 5)
    assert tensor.to_dense()[0, 1] == 2.0  # (0, 1) appears twice
    np.testing.assert_array_equal(tensor.to_dense().numpy(), small_graph.toarray())
    assert to_torch_csr(matrix, torch.float64).dtype == torch.float64


def test_isolated_nodes_get_zero_rows_not_nan(small_graph):
    dense = normalized_adjacency(small_graph).to_dense()
    assert torch.isfinite(dense).all()
    assert dense[3].abs().sum() == 0 and dense[4 + 4].abs().sum() == 0


def dense_graph_with_self_loops(interactions):
    binary = (interactions.toarray() > 0).astype(np.int64)
    users, items = binary.shape
    graph = np.zeros((users + items, users + items), dtype=np.int64)
    graph[:users, users:], graph[users:, :users] = binary, binary.T
    return graph + np.eye(users + items, dtype=np.int64)


def test_graph_with_self_loops_is_the_binary_bipartite_graph_plus_identity(small_graph):
    row_pointers, columns = graph_with_self_loops(small_graph)
    rebuilt = sp.csr_matrix((np.ones(len(columns)), columns.numpy(), row_pointers.numpy()), shape=(9, 9))
    np.testing.assert_array_equal(rebuilt.toarray(), dense_graph_with_self_loops(small_graph))  # (0, 1) once
    assert row_pointers.dtype == columns.dtype == torch.int64


def test_edges_leaving_lists_each_queried_row_in_order_and_repeats_repeated_nodes(small_graph):
    dense = dense_graph_with_self_loops(small_graph)
    nodes = torch.tensor([5, 0, 3, 5, 8])  # item 1, user 0, user 3 (self-loop only), item 1 again, item 4
    positions, neighbours = edges_leaving(*graph_with_self_loops(small_graph), nodes)
    expected = [(p, j) for p, node in enumerate(nodes.tolist()) for j in np.flatnonzero(dense[node])]
    assert list(zip(positions.tolist(), neighbours.tolist())) == expected
    empty = edges_leaving(*graph_with_self_loops(small_graph), torch.tensor([], dtype=torch.long))
    assert empty[0].numel() == empty[1].numel() == 0


def test_lightgcn_propagation_equals_dense_powers_of_the_adjacency(small_graph):
    embeddings = torch.randn(9, 3, generator=torch.Generator().manual_seed(0))
    adjacency = normalized_adjacency(small_graph)
    a = torch.from_numpy(dense_normalized_adjacency(small_graph)).float()
    powers = [embeddings, a @ embeddings, a @ a @ embeddings, a @ a @ a @ embeddings]
    torch.testing.assert_close(lightgcn_layers(adjacency, embeddings, 3), powers[1:])
    torch.testing.assert_close(lightgcn_propagate(adjacency, embeddings, 3), torch.stack(powers).mean(dim=0))


def test_propagation_gradient_equals_the_dense_gradient(small_graph):
    embeddings = torch.randn(9, 3, requires_grad=True)
    weights = torch.randn(9, 3)
    (lightgcn_propagate(normalized_adjacency(small_graph), embeddings, 2) * weights).sum().backward()
    a = torch.from_numpy(dense_normalized_adjacency(small_graph)).float()
    dense = embeddings.detach().clone().requires_grad_()
    (torch.stack([dense, a @ dense, a @ a @ dense]).mean(dim=0) * weights).sum().backward()
    torch.testing.assert_close(embeddings.grad, dense.grad)


def test_symmetric_matmul_passes_gradcheck(small_graph):
    adjacency = torch.from_numpy(dense_normalized_adjacency(small_graph)).to_sparse_csr()
    x = torch.randn(9, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: symmetric_sparse_matmul(adjacency, v), (x,))


def test_the_dense_parts_custom_op_equals_the_sparse_product_and_passes_gradcheck(small_graph):
    """What a compiled propagation runs (one custom op over the CSR parts) is the eager product, gradients too."""
    adjacency = torch.from_numpy(dense_normalized_adjacency(small_graph)).to_sparse_csr()
    x = torch.randn(9, 2, dtype=torch.float64, requires_grad=True)
    parts = CSRParts(*(part.clone() for part in csr_parts(adjacency)))  # as models hold them: not the matrix's views
    torch.testing.assert_close(lightgcn_propagate(parts, x, 2), lightgcn_propagate(adjacency, x, 2), rtol=0, atol=0)
    assert torch.autograd.gradcheck(lambda v: symmetric_sparse_matmul(parts, v), (x,))
    torch.library.opcheck(torch.ops.recbole_mgformer.symmetric_csr_matmul.default, (*parts, x))


def test_simgcl_noise_keeps_every_sign_and_has_norm_eps():
    x = torch.randn(50, 8, generator=torch.Generator().manual_seed(1))
    perturbed = sign_preserving_noise(x, 0.1, torch.rand(50, 8, generator=torch.Generator().manual_seed(2)))
    noise = perturbed - x
    assert torch.equal(torch.sign(perturbed), torch.sign(x))
    assert torch.equal(torch.sign(noise), torch.sign(x))
    torch.testing.assert_close(noise.norm(dim=1), torch.full((50,), 0.1))


def test_simgcl_noise_has_the_gradient_of_its_formula_through_autograd():
    """Formed outside autograd, the noise passes the gradient as ``x + eps sign(x) normalize(u)`` does (sign's
    gradient is zero): the identity."""
    x = torch.randn(20, 6, dtype=torch.float64, requires_grad=True)
    uniform, upstream = torch.rand(20, 6, dtype=torch.float64), torch.randn(20, 6, dtype=torch.float64)
    ours = torch.autograd.grad(sign_preserving_noise(x, 0.3, uniform), x, upstream)[0]
    formula = x + 0.3 * torch.sign(x) * torch.nn.functional.normalize(uniform, dim=-1)
    torch.testing.assert_close(sign_preserving_noise(x, 0.3, uniform), formula)
    torch.testing.assert_close(ours, torch.autograd.grad(formula, x, upstream)[0], rtol=0, atol=0)


def test_generator_rand_draws_from_its_generator_eagerly_and_compiled_without_a_graph_break():
    """Compiled, the draw is one custom op (dynamo breaks at a generator) over the same generator: the numbers
    eager torch.rand gives, and the generator moves on as it does."""
    like = torch.zeros(1, dtype=torch.float64)
    generator = torch.Generator().manual_seed(7)
    eager = generator_rand((3, 4), generator, like)
    assert eager.dtype == torch.float64
    torch.testing.assert_close(
        eager, torch.rand(3, 4, generator=torch.Generator().manual_seed(7), dtype=torch.float64), rtol=0, atol=0
    )

    def draw(x):
        return x + generator_rand((3, 4), generator, x)

    generator.manual_seed(7)
    explained = torch._dynamo.explain(draw)(like)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    generator.manual_seed(7)
    compiled = torch.compile(draw, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(like), eager, rtol=0, atol=0)
    assert not torch.equal(compiled(like), eager)  # the generator moved on
    torch._dynamo.reset()
