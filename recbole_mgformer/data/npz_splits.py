"""The sparse-matrix side of the importer's ``npz`` format: reading a split saved by ``scipy.sparse.save_npz``,
its entries as (user, item) tokens, and the validation set carved from a training matrix. Users x items CSR
matrices throughout; the importer writes the atomic files."""

import numpy as np
import scipy.sparse as sp


def carve_validation(train, share, seed):
    """``(train, valid)``: of each user's ``n`` training items, ``round(share * n)`` drawn at random with
    ``seed`` move to ``valid``, at least 1 where ``n >= 2`` and never the user's last one, so every user keeps
    a training item and a user with one keeps it (and has no validation item). Both CSR, users x items."""
    if not 0 < share < 1:
        raise ValueError(f"valid share {share!r} must lie strictly between 0 and 1 (e.g. 0.1)")
    train = sp.csr_matrix(train, copy=True)
    train.sum_duplicates()
    train.sort_indices()  # a fixed order of each user's items before the draw: reproducible from the seed
    counts = np.diff(train.indptr)
    take = np.where(counts >= 2, np.maximum(1, np.floor(share * counts + 0.5)), 0).astype(np.int64)
    take = np.minimum(take, np.maximum(counts - 1, 0))
    rows = np.repeat(np.arange(train.shape[0]), counts)  # (nnz,) user of each entry, ascending
    order = np.lexsort((np.random.default_rng(seed).random(train.nnz), rows))  # by user, random within
    rank = np.empty(train.nnz, dtype=np.int64)
    rank[order] = np.arange(train.nnz) - np.repeat(train.indptr[:-1], counts)  # position in the user's draw
    in_valid = rank < take[rows]

    def part(mask):
        return sp.csr_matrix((train.data[mask], (rows[mask], train.indices[mask])), shape=train.shape)

    return part(~in_valid), part(in_valid)


def pairs_of(matrix):
    """``(user, item)`` tokens of a sparse matrix's entries, by user then item."""
    matrix = sp.csr_matrix(matrix)
    matrix.sort_indices()
    coo = matrix.tocoo()
    return list(zip(coo.row.tolist(), coo.col.tolist()))


def load_npz(path):
    try:
        return sp.load_npz(path)
    except (OSError, ValueError, KeyError) as error:  # load_npz reads arrays only, never pickles (allow_pickle=False)
        raise ValueError(
            f"{path}: not a scipy sparse .npz matrix ({error}); give the split as saved by "
            "scipy.sparse.save_npz (users x items)"
        ) from None
