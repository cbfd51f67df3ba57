"""SGL (Wu et al., SIGIR 2021) as RecBole 1.2.1 implements it (edge, node or random-walk dropout views, BPR plus
an InfoNCE whose negatives are all users or all items), made faster on CPUs and whole under ``torch.compile`` and
CUDA graphs, without changing what it computes.

RecBole's ``SGL`` is the parent: its views (drawn from numpy's global generator at each ``train()``, as there), its
options (``properties/model/SGL.yaml`` in RecBole) and its losses. Every graph, the training graph and each view,
is ``D^-1/2 (A + A^T) D^-1/2`` of some of the training interactions, hence symmetric, with its entries among the
training graph's: a view is the training graph's CSR structure with its own values, the dropped interactions' at
zero, written in place at each draw. The step then holds no sparse tensor (``torch.compile`` refuses them): the
propagation runs through ``symmetric_sparse_matmul`` (a CSR tensor over the parts eagerly, one custom op compiled),
and a captured step reads each epoch's views where it read the last. The InfoNCE runs through
``info_nce_over_all_nodes``, which keeps one (b, n) buffer instead of four.
"""

import numpy as np
import torch
from recbole.model.general_recommender.sgl import SGL as RecBoleSGL

from recbole_mgformer.model.abstract_recommender import ModelContract
from recbole_mgformer.model.graph import CSRParts, csr_parts, csr_tensor, symmetric_sparse_matmul, to_torch_csr
from recbole_mgformer.model.loss import info_nce_over_all_nodes

VIEW_TYPES = ("ED", "ND", "RW")


def entry_positions(crow_indices, col_indices, rows, columns):
    """Where the entries (rows[k], columns[k]) (k,) sit among a CSR structure's (each row's columns sorted); all
    must be entries of it."""
    n = len(crow_indices) - 1
    keys = np.repeat(np.arange(n), np.diff(crow_indices)) * n + col_indices  # sorted: by row, then column
    return np.searchsorted(keys, rows * n + columns)


def normalized_values(entry_rows, col_indices, weights, n):
    """``D^-1/2 W D^-1/2`` over a fixed structure, (nnz,) float32, from the symmetric weights ``W`` (nnz,) of its
    entries, whose rows are ``entry_rows`` (nnz,); ``D = rowsum(W) + 1e-7``, as RecBole's ``create_adjust_matrix``
    makes it (a node without a kept edge keeps an all-zero row)."""
    scale = (np.bincount(entry_rows, weights, minlength=n) + 1e-7) ** -0.5
    return (scale[entry_rows] * weights * scale[col_indices]).astype(np.float32)


class SGL(ModelContract, RecBoleSGL):
    r"""SGL; RecBole's options (``type`` ED/ND/RW, ``drop_ratio``, ``ssl_tau``, ``ssl_weight``, ``reg_weight``)."""

    # Static shapes; the views are drawn in train(), outside any step, into fixed buffers (see cuda_graph.py)
    CUDA_GRAPH_SAFE = True

    def __init__(self, config, dataset):
        if config["type"] not in VIEW_TYPES:
            raise ValueError(
                f"SGL: type={config['type']!r} must be one of {', '.join(VIEW_TYPES)} (edge dropout, "
                "node dropout, random walk)"
            )
        super().__init__(config, dataset)  # RecBole's: sets train_graph, the structure every view shares
        crow, col = self.graph_crow_indices.cpu().numpy(), self.graph_col_indices.cpu().numpy()
        users, items = np.asarray(self._user), np.asarray(self._item) + self.n_users
        # the structure on the host, where the views are drawn: each entry's row and column, (nnz,) each
        self.entry_rows, self.entry_columns = np.repeat(np.arange(len(crow) - 1), np.diff(crow)), col
        # each interaction's two entries, (u, i) and (i, u): (2, interactions)
        self.interaction_entries = np.stack(
            [entry_positions(crow, col, users, items), entry_positions(crow, col, items, users)]
        )
        views = 2 * (self.n_layers if self.type == "RW" else 1)  # two views, RW's a graph per layer
        self.register_buffer("view_values", self.graph_values.new_zeros(views, len(col)), persistent=False)

    def csr2tensor(self, matrix):
        """A scipy matrix -> :class:`CSRParts` of a CSR float32 matrix on the model's device."""
        return CSRParts(*(part.clone() for part in csr_parts(to_torch_csr(matrix).to(self.device))))

    @property
    def train_graph(self):
        """The normalised training graph (n, n), as :meth:`graph` gives it."""
        return self.graph(self.graph_values)

    @train_graph.setter
    def train_graph(self, parts):  # RecBole's __init__ sets it once, from csr2tensor: buffers, moved with the model
        for name, part in zip(CSRParts._fields, parts):
            self.register_buffer(f"graph_{name}", part, persistent=False)

    def graph(self, values):
        """The training graph's structure with ``values`` (nnz,): :class:`CSRParts` under ``torch.compile`` (it
        refuses sparse tensors), else a sparse CSR tensor over them (the faster product eagerly)."""
        parts = CSRParts(self.graph_crow_indices, self.graph_col_indices, values)
        return parts if torch.compiler.is_compiling() else csr_tensor(parts, self.n_users + self.n_items)

    def views(self):
        """The two views: one graph each (ED, ND), or RW's list of one per layer."""
        graphs = [self.graph(values) for values in self.view_values]
        return (graphs[: self.n_layers], graphs[self.n_layers :]) if self.type == "RW" else tuple(graphs)

    def interaction_weights(self):
        """Each training interaction's weight (interactions,) in one view: 1 kept, 0 dropped, drawn as RecBole's
        ``create_adjust_matrix(is_sub=True)`` draws (the same calls to numpy's generator, in its order)."""
        n_interactions = len(self._user)
        if self.type == "ND":
            kept = []
            for nodes in (self.n_users, self.n_items):
                dropped = self.rand_sample(nodes, size=int(nodes * self.drop_ratio), replace=False)
                kept.append(np.ones(nodes))
                kept[-1][dropped] = 0.0
            return kept[0][np.asarray(self._user)] * kept[1][np.asarray(self._item)]
        kept = self.rand_sample(n_interactions, size=int(n_interactions * (1 - self.drop_ratio)), replace=False)
        return np.bincount(kept, minlength=n_interactions).astype(np.float64)

    def view_values_of(self, interaction_weights):
        """A view's values over the training graph's structure (nnz,), from its interactions' weights: a pair
        interacted with twice weighs 2, as in RecBole's matrices."""
        nnz = len(self.entry_rows)
        weights = sum(np.bincount(entries, interaction_weights, minlength=nnz) for entries in self.interaction_entries)
        return normalized_values(self.entry_rows, self.entry_columns, weights, self.n_users + self.n_items)

    def graph_construction(self):
        """Draws the two views (RecBole calls it at each ``train()``) and writes them into ``view_values`` in place,
        where a captured step reads them."""
        values = np.stack([self.view_values_of(self.interaction_weights()) for _ in range(len(self.view_values))])
        self.view_values.copy_(torch.from_numpy(values))

    def train(self, mode=True):
        # RecBole drops the scoring cache in calculate_loss, which a replayed CUDA graph does not run: drop it here
        self.restore_user_e, self.restore_item_e = None, None
        return super().train(mode)

    def forward(self, graph):
        """Mean of ``E_0 .. E_L`` over ``graph`` (one matrix used L times, or RW's list of L): (users, items)."""
        layers = [torch.cat([self.user_embedding.weight, self.item_embedding.weight])]
        for layer_graph in graph if isinstance(graph, list) else [graph] * self.n_layers:
            layers.append(symmetric_sparse_matmul(layer_graph, layers[-1]))
        return torch.split(torch.stack(layers).mean(dim=0), [self.n_users, self.n_items])

    def calculate_loss(self, interaction):
        """RecBole's: BPR with L2 on the training graph, plus the InfoNCE between the two views."""
        users, positives = interaction[self.USER_ID], interaction[self.ITEM_ID]
        view1, view2 = self.views()
        user_sub1, item_sub1 = self.forward(view1)
        user_sub2, item_sub2 = self.forward(view2)
        return self.calc_bpr_loss(
            *self.forward(self.train_graph), users, positives, interaction[self.NEG_ITEM_ID]
        ) + self.calc_ssl_loss(users, positives, user_sub1, user_sub2, item_sub1, item_sub2)

    def calc_ssl_loss(self, user_list, pos_item_list, user_sub1, user_sub2, item_sub1, item_sub2):
        """``ssl_weight`` times the InfoNCE of the batch's users (against all users) and items (all items)."""
        ssl_user = info_nce_over_all_nodes(user_sub1[user_list], user_sub2[user_list], user_sub2, self.ssl_tau)
        ssl_item = info_nce_over_all_nodes(item_sub1[pos_item_list], item_sub2[pos_item_list], item_sub2, self.ssl_tau)
        return (ssl_item + ssl_user) * self.ssl_weight
