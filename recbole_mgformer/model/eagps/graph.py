"""EA-GPS's graph (Eq. 2-4) and its propagation (Eq. 3-4, 17-18); ``m`` items (RecBole's padding item 0
included), ``n`` users, ``N = m + n`` nodes, items first as in Eq. 2, ``d`` embedding size."""

import numpy as np
import scipy.sparse as sp
import torch


def sequential_adjacency(user_item, transitions, n_items, n_users):
    """``D^-1/2 (M + I) D^-1/2`` (Eq. 2, 4) as a scipy CSR (N, N) float32 matrix, items first then users.

    ``user_item`` is the (n_users, n_items) training matrix: each pair gives ``M[i, u] = M[u, i] = 1``
    (A_U->I and A_I->U). ``transitions`` is a (2, t) array of (previous item, next item) pairs from the
    training sequences: each gives ``M[next, previous] = 1`` (A_I->I; row = receiver, so the next item
    hears from the previous one and not the reverse). Repeated pairs count once. ``D`` is the row sum
    of ``M + I``: the self-loop keeps every degree >= 1.
    """
    binary = sp.coo_matrix(user_item, dtype=np.float32).tocsr()
    binary.sum_duplicates()
    binary.data[:] = 1.0
    previous, following = np.asarray(transitions, dtype=np.int64)
    item_item = sp.csr_matrix(
        (np.ones(len(previous), dtype=np.float32), (following, previous)), shape=(n_items, n_items)
    )
    item_item.sum_duplicates()
    item_item.data[:] = 1.0
    m = sp.bmat([[item_item, binary.T], [binary, None]], format="csr", dtype=np.float32)
    m = m + sp.identity(n_items + n_users, dtype=np.float32, format="csr")
    inverse_sqrt = sp.diags(np.power(np.asarray(m.sum(axis=1)).ravel(), -0.5).astype(np.float32))
    return (inverse_sqrt @ m @ inverse_sqrt).tocsr().astype(np.float32)


class _SparseMatmul(torch.autograd.Function):
    """``A @ x`` with the backward ``A^T @ grad`` from a stored CSR transpose: A_hat is not symmetric (the
    item -> next-item edges run one way), and torch's own sparse backward is several times slower on CPU."""

    @staticmethod
    def forward(ctx, adjacency, adjacency_t, x):
        ctx.adjacency_t = adjacency_t
        return adjacency @ x

    @staticmethod
    def backward(ctx, grad):
        return None, None, ctx.adjacency_t @ grad


def sparse_matmul(adjacency, adjacency_t, x):
    """``adjacency @ x`` (N, d), differentiable in ``x``; ``adjacency_t`` is ``adjacency``'s transpose."""
    return _SparseMatmul.apply(adjacency, adjacency_t, x)


def training_transitions(dataset, item_seq_field, item_seq_len_field, item_field):
    """(2, t) array of (previous, next) item ids in the training sequences of a RecBole SequentialDataset.

    Every augmented training row is ``(prefix, target)``; the prefix's last item precedes the target, so
    the rows together hold each consecutive training pair once (the valid and test targets never appear).
    """
    sequences = dataset.inter_feat[item_seq_field]
    lengths = dataset.inter_feat[item_seq_len_field]
    previous = sequences.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    keep = lengths > 0
    return np.vstack([previous[keep].numpy(), dataset.inter_feat[item_field][keep].numpy()])


def external_attentive_propagation(adjacency, adjacency_t, items, users, n_layers, external):
    # ``external=None`` is the paper's GPS_OEA ablation: E_S^(l) = Ê_S^(l)
    """Eq. 3-4, 17-18: mean over layers ``0..eta`` of ``[E_S^(l); E_U^(l)]``, split into (items, users).

    ``Ê^(l) = A_hat Ê^(l-1)`` from ``Ê^(0) = [items; users]``; the external encoder runs beside the
    propagation (its output does not feed the next step): ``E_S^(l) = external(Ê_S^(l))`` for l >= 1,
    ``E_U^(l) = Ê_U^(l)``; layer 0 is the embeddings themselves. No step's encoding feeds another, so the
    encoder takes every step's items at once, (eta, m, d): one pass of its small ops instead of eta.
    """
    m = items.shape[0]
    x = torch.cat([items, users])  # (N, d)
    item_layers, user_layers = [items], [users]
    for _ in range(n_layers):
        x = sparse_matmul(adjacency, adjacency_t, x)
        item_layers.append(x[:m])
        user_layers.append(x[m:])
    if external is not None and n_layers > 0:
        item_layers[1:] = external(torch.stack(item_layers[1:]))  # (eta, m, d)
    return torch.stack(item_layers).mean(dim=0), torch.stack(user_layers).mean(dim=0)
