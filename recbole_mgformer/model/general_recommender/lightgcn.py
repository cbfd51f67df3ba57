"""LightGCN (He et al., SIGIR 2020): RecBole's model, propagated over a sparse CSR graph.

The parameters, their initialisation and the loss are RecBole's (``recbole.model.general_recommender.LightGCN``):
the mean of layers ``0..L`` of ``D^-1/2 A D^-1/2`` propagation, BPR on the batch's triples and ``reg_weight`` times
the L2 norm of the ego embeddings they touch, so a state dict of either loads into the other and gives the same
scores. RecBole multiplies by a COO tensor, whose backward transposes and sorts the graph at every layer of every
step; here the graph is CSR and its own transpose (``symmetric_sparse_matmul``): a training step on Yelp2018 is about
five times faster on two CPU cores (``python experiments/recbole_step.py --model LightGCN --dataset yelp2018-full``).
"""

import torch
import torch.nn as nn
from recbole.model.init import xavier_uniform_initialization
from recbole.model.loss import EmbLoss
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import BPRWithEgoL2, GraphRecommender
from recbole_mgformer.model.graph import lightgcn_propagate
from recbole_mgformer.model.options import non_negative_float, non_negative_int, positive_int


class LightGCN(BPRWithEgoL2, GraphRecommender):
    r"""LightGCN; its options are RecBole's (``recbole/properties/model/LightGCN.yaml``): ``embedding_size``,
    ``n_layers``, ``reg_weight``, ``require_pow``."""

    input_type = InputType.PAIRWISE
    # RecBole's model computed faster: RecBole's own entry points keep theirs, quietly
    # (recbole_mgformer/integration/plugin.py)
    REFINES_RECBOLE = True

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.embedding_size = positive_int(config, "embedding_size", "LightGCN")
        self.n_layers = non_negative_int(config, "n_layers", "LightGCN")
        self.reg_weight = non_negative_float(config, "reg_weight", "LightGCN")
        self.require_pow = bool(config["require_pow"])
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        self.reg_loss = EmbLoss()
        self.apply(xavier_uniform_initialization)

    def forward(self):
        """users (n_users, d), items (n_items, d): the mean of ``E_0 .. E_L``."""
        embeddings = torch.cat([self.user_embedding.weight, self.item_embedding.weight])
        return self.split_nodes(lightgcn_propagate(self.propagation_adjacency, embeddings, self.n_layers))

    def calculate_loss(self, interaction):
        self.forget_representations()
        return self.recommendation_loss(interaction, *self.forward())
