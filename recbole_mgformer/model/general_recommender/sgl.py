"""SGL (Wu et al., SIGIR 2021) as RecBole 1.2.1 implements it (edge, node or random-walk dropout views, BPR plus
an InfoNCE whose negatives are all users or all items), made faster on CPUs without changing what it computes.

RecBole's ``SGL`` is the parent: its graphs, its views (drawn from numpy's global generator, as there), its options
(``properties/model/SGL.yaml`` in RecBole) and its losses. Two hot spots of its training step are replaced by
equal computations: every graph is a CSR tensor propagated by ``symmetric_sparse_matmul`` (each is
``D^-1/2 (A + A^T) D^-1/2``, hence symmetric), and the InfoNCE runs through ``info_nce_over_all_nodes``, which
keeps one (b, n) buffer instead of four.
"""

import torch
from recbole.model.general_recommender.sgl import SGL as RecBoleSGL

from recbole_mgformer.model.abstract_recommender import SharedSparseBuffers
from recbole_mgformer.model.graph import symmetric_sparse_matmul, to_torch_csr
from recbole_mgformer.model.loss import info_nce_over_all_nodes


class SGL(SharedSparseBuffers, RecBoleSGL):
    r"""SGL; RecBole's options (``type`` ED/ND/RW, ``drop_ratio``, ``ssl_tau``, ``ssl_weight``, ``reg_weight``)."""

    def csr2tensor(self, matrix):
        """A scipy matrix -> a sparse CSR float32 tensor on the model's device."""
        return to_torch_csr(matrix).to(self.device)

    def forward(self, graph):
        """Mean of ``E_0 .. E_L`` over ``graph`` (one matrix used L times, or RW's list of L): (users, items)."""
        layers = [torch.cat([self.user_embedding.weight, self.item_embedding.weight])]
        for layer_graph in graph if isinstance(graph, list) else [graph] * self.n_layers:
            layers.append(symmetric_sparse_matmul(layer_graph, layers[-1]))
        return torch.split(torch.stack(layers).mean(dim=0), [self.n_users, self.n_items])

    def calc_ssl_loss(self, user_list, pos_item_list, user_sub1, user_sub2, item_sub1, item_sub2):
        """``ssl_weight`` times the InfoNCE of the batch's users (against all users) and items (all items)."""
        ssl_user = info_nce_over_all_nodes(user_sub1[user_list], user_sub2[user_list], user_sub2, self.ssl_tau)
        ssl_item = info_nce_over_all_nodes(item_sub1[pos_item_list], item_sub2[pos_item_list], item_sub2,
                                           self.ssl_tau)
        return (ssl_item + ssl_user) * self.ssl_weight

