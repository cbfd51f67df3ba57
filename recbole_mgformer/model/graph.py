"""LightGCN propagation (He et al., SIGIR 2020) on ``torch.sparse``: one adjacency builder and one
propagation, shared by SimGCL, XSimGCL and DirectAU's LightGCN encoder; the edge lists behind
MGFormer's adjacency mask; and the one scipy-to-torch sparse conversion (``to_torch_csr``) every model uses.

Shapes: ``n = n_users + n_items`` nodes, ``d`` embedding size.
"""

import warnings
import weakref
from typing import NamedTuple, Sequence

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F


def bipartite_graph(interactions):
    """``A = [[0, R], [R^T, 0]]`` with 0/1 entries, a scipy CSR (n, n) float32 matrix; ``interactions`` is the
    (n_users, n_items) training matrix, and repeated pairs count once."""
    binary = sp.csr_matrix(interactions, dtype=np.float32)
    binary.sum_duplicates()
    binary.data[:] = 1.0
    return sp.bmat([[None, binary], [binary.T, None]], format="csr", dtype=np.float32)


def to_torch_csr(matrix, dtype=torch.float32):
    """A scipy sparse matrix as a torch sparse CSR tensor in ``dtype``, repeated entries summed: ``A @ x`` with a
    contiguous dense ``x`` runs several times faster with CSR than with COO on the CPU, and works on the GPU too."""
    matrix = sp.csr_matrix(matrix)
    matrix.sum_duplicates()  # also sorts each row's columns, as CSR tensors expect
    with warnings.catch_warnings():  # CSR is "beta" in torch
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(
            torch.from_numpy(matrix.indptr.astype(np.int64)),
            torch.from_numpy(matrix.indices.astype(np.int64)),
            torch.from_numpy(matrix.data).to(dtype),
            size=matrix.shape,
            check_invariants=False,
        )


def normalized_adjacency(interactions):
    """``D^-1/2 A D^-1/2`` of the bipartite graph ``A = [[0, R], [R^T, 0]]``, a sparse CSR (n, n) float32 tensor.

    ``interactions`` is the (n_users, n_items) training matrix; repeated pairs count once, and a node
    without interactions gets an all-zero row and column instead of a division by zero.
    """
    adjacency = bipartite_graph(interactions).tocoo()
    degrees = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse_sqrt = np.zeros_like(degrees)
    np.power(degrees, -0.5, out=inverse_sqrt, where=degrees > 0)
    values = inverse_sqrt[adjacency.row] * adjacency.data * inverse_sqrt[adjacency.col]
    return to_torch_csr(sp.coo_matrix((values, (adjacency.row, adjacency.col)), shape=adjacency.shape))


def graph_with_self_loops(interactions):
    """The bipartite training graph plus a self-loop on every node, in CSR form: ``(row_pointers (n+1,),
    columns (E,))`` int64 tensors, each row's columns sorted. Repeated pairs make one edge."""
    adjacency = bipartite_graph(interactions)
    graph = adjacency + sp.identity(adjacency.shape[0], format="csr", dtype=np.float32)
    graph.sort_indices()
    return torch.from_numpy(graph.indptr.astype(np.int64)), torch.from_numpy(graph.indices.astype(np.int64))


def edges_leaving(row_pointers, columns, nodes):
    """The edges of a CSR graph that leave ``nodes`` (b,): ``(positions (e,), neighbours (e,))``, where
    ``positions`` indexes ``nodes``, so a node listed twice gets its edges twice. O(e), not O(E)."""
    starts = row_pointers[nodes]
    counts = row_pointers[nodes + 1] - starts
    positions = torch.repeat_interleave(torch.arange(len(nodes), device=nodes.device), counts)
    block_starts = counts.cumsum(0) - counts  # where each node's edges begin in the output
    offsets = torch.arange(len(positions), device=nodes.device) - block_starts[positions]
    return positions, columns[starts[positions] + offsets]


class CSRParts(NamedTuple):
    """A sparse CSR (n, n) matrix as its dense parts: ``torch.compile`` refuses sparse tensors (as inputs and as
    module attributes alike), so a model whose loss compiles whole propagates over these."""

    crow_indices: torch.Tensor  # (n + 1,)
    col_indices: torch.Tensor  # (nnz,)
    values: torch.Tensor  # (nnz,)


def csr_parts(matrix):
    """The :class:`CSRParts` of a sparse CSR tensor, sharing its memory."""
    return CSRParts(matrix.crow_indices(), matrix.col_indices(), matrix.values())


def csr_tensor(parts, n_columns):
    """The sparse CSR tensor of :class:`CSRParts` (it holds them, no copy), (n, n_columns)."""
    with warnings.catch_warnings():  # CSR is "beta" in torch
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(*parts, size=(len(parts.crow_indices) - 1, n_columns), check_invariants=False)


@torch.library.custom_op("recbole_mgformer::symmetric_csr_matmul", mutates_args=())
def symmetric_csr_matmul(
    crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor, x: torch.Tensor
) -> torch.Tensor:
    """``A @ x`` (n, d) for the symmetric CSR matrix ``A`` given by its parts; one opaque op to ``torch.compile``."""
    return csr_tensor(CSRParts(crow_indices, col_indices, values), len(x)) @ x


@symmetric_csr_matmul.register_fake
def _symmetric_csr_matmul_shape(crow_indices, col_indices, values, x):
    return x.new_empty((crow_indices.shape[0] - 1, x.shape[1]))


def _keep_matrix(ctx, inputs, output):
    ctx.parts = inputs[:3]


def _symmetric_csr_matmul_backward(ctx, grad):
    # A is symmetric: the gradient of A @ x is A @ grad, a product as fast on CPU as the forward (torch.sparse.mm's
    # own backward transposes A first)
    return None, None, None, symmetric_csr_matmul(*ctx.parts, grad)


symmetric_csr_matmul.register_autograd(_symmetric_csr_matmul_backward, setup_context=_keep_matrix)


class _SymmetricSparseMatmul(torch.autograd.Function):
    """``A @ x`` for a symmetric sparse ``A``: the backward reuses ``A`` as its own transpose, which
    makes forward plus backward faster on CPU than ``torch.sparse.mm``'s transposing backward."""

    @staticmethod
    def forward(ctx, adjacency, x):
        ctx.adjacency = adjacency
        return adjacency @ x

    @staticmethod
    def backward(ctx, grad):
        return None, ctx.adjacency @ grad


def symmetric_sparse_matmul(adjacency, x):
    """``adjacency @ x`` (n, d), differentiable in ``x``; ``adjacency`` must be symmetric: a sparse CSR tensor (eager,
    the fastest on a CPU: a custom op's dispatch costs more than a small product), or its :class:`CSRParts`
    (one custom op, which ``torch.compile`` takes whole)."""
    if isinstance(adjacency, CSRParts):
        return symmetric_csr_matmul(*adjacency, x)
    return _SymmetricSparseMatmul.apply(adjacency, x)


def lightgcn_layers(adjacency, embeddings, n_layers, perturb=None, first=None):
    """``[E_1, ..., E_L]`` with ``E_l = A_hat E_{l-1}`` from ``E_0 = embeddings`` (n, d); ``A_hat`` symmetric.

    ``perturb(x, layer)``, when given, maps layer ``layer``'s output (0-based) before the next layer sees it
    (SimGCL's noise). ``first``, when given, is ``A_hat E_0`` already computed (shared by several propagations
    from the same embeddings; ``embeddings`` may then be None).
    """
    layers, x = [], embeddings
    for layer in range(n_layers):
        x = symmetric_sparse_matmul(adjacency, x) if layer or first is None else first
        if perturb is not None:
            x = perturb(x, layer)
        layers.append(x)
    return layers


def lightgcn_propagate(adjacency, embeddings, n_layers):
    """LightGCN's output: the mean of ``E_0, E_1, ..., E_L``, (n, d)."""
    return torch.stack([embeddings, *lightgcn_layers(adjacency, embeddings, n_layers)]).mean(dim=0)


# A torch.Generator passes neither through torch.compile nor through a custom op's schema: a compiled draw names
# its generator by its index here (weakly held: a model's generator goes with the model).
_GENERATORS = []


@torch.compiler.assume_constant_result  # dynamo runs it at trace time, so the registration happens then, not deferred
def _generator_index(generator):
    for index, held in enumerate(_GENERATORS):
        if held() is generator:
            return index
    _GENERATORS.append(weakref.ref(generator))
    return len(_GENERATORS) - 1


@torch.library.custom_op("recbole_mgformer::generator_rand", mutates_args=())
def _generator_rand(shape: Sequence[int], dtype: torch.dtype, device: torch.device, generator: int) -> torch.Tensor:
    """``torch.rand(shape)`` from generator number ``generator``."""
    return torch.rand(shape, generator=_GENERATORS[generator](), dtype=dtype, device=device)


@_generator_rand.register_fake
def _generator_rand_shape(shape, dtype, device, generator):
    return torch.empty(shape, dtype=dtype, device=device)


def generator_rand(shape, generator, like):
    """U(0, 1) numbers of ``shape`` in ``like``'s dtype and on its device, drawn from ``generator``: eagerly
    ``torch.rand``, under ``torch.compile`` the same draw as one opaque op (dynamo breaks the graph at a
    generator). Call it once per compiled step: the op declares no state, so a compiler may merge equal calls."""
    if not torch.compiler.is_compiling():
        return torch.rand(shape, generator=generator, dtype=like.dtype, device=like.device)
    return _generator_rand(list(shape), like.dtype, like.device, _generator_index(generator))


def sign_preserving_noise(x, eps, uniform):
    """SimGCL's perturbation ``x + eps * sign(x) * normalize(u)`` of x (n, d), with ``uniform`` (n, d) the draws
    ``u ~ U(0, 1)^d`` per row.

    The noise points into ``x``'s own orthant, so every coordinate keeps its sign and each row moves by
    exactly ``eps``: a small rotation of the representation rather than a random jump. ``sign`` has no gradient,
    so the noise is a constant to autograd: formed outside it, in place, the gradient is the same and the step
    keeps none of its (n, d) temporaries.
    """
    with torch.no_grad():
        noise = F.normalize(uniform, dim=-1).mul_(torch.sign(x)).mul_(eps)
    return x + noise
