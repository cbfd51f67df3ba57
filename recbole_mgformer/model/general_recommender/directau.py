"""DirectAU (Wang et al., KDD 2022): alignment and uniformity of L2-normalised representations.

The encoder is plain embeddings (``MF``) or LightGCN propagation over them (``LightGCN``, the encoder the
MGFormer paper compares with). DirectAU's ``L_uniform`` averages the user and item terms, so its
``gamma`` is the shared loss's weight on their sum halved.
"""

import torch
import torch.nn as nn
from recbole.model.init import xavier_normal_initialization
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import GraphRecommender
from recbole_mgformer.model.graph import lightgcn_propagate
from recbole_mgformer.model.loss import directau_loss
from recbole_mgformer.model.options import choice, non_negative_float, positive_int
from recbole_mgformer.model.precision import PRECISIONS, resolve_precision
from recbole_mgformer.model.sizing import uniformity_block_rows

ENCODERS = ("MF", "LightGCN")


class DirectAU(GraphRecommender):
    r"""DirectAU; see ``properties/model/DirectAU.yaml`` for its options."""

    input_type = InputType.POINTWISE
    CUDA_GRAPH_SAFE = (
        True  # a step of static shapes with no host-side decision (recbole_mgformer/training/cuda_graph.py)
    )

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.encoder = choice(config, "encoder", ENCODERS, "DirectAU")
        self.embedding_size = positive_int(config, "embedding_size", "DirectAU")
        self.n_layers = positive_int(config, "n_layers", "DirectAU")
        self.gamma = non_negative_float(config, "gamma", "DirectAU")
        self.precision = choice(config, "precision", PRECISIONS, "DirectAU")
        self.matmul_dtype = resolve_precision(self.precision, config["device"])
        self.uniformity_block_rows = uniformity_block_rows(config, "DirectAU")
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        self.apply(xavier_normal_initialization)

    def forward(self):
        embeddings = torch.cat([self.user_embedding.weight, self.item_embedding.weight])
        if self.encoder == "LightGCN":
            # compiled, over the graph's dense parts: calculate_loss then compiles without a graph break
            embeddings = lightgcn_propagate(self.propagation_adjacency, embeddings, self.n_layers)
        return self.split_nodes(embeddings)

    def calculate_loss(self, interaction):
        self.forget_representations()
        users, items = interaction[self.USER_ID], interaction[self.ITEM_ID]
        if self.encoder == "MF":  # no propagation: look up the batch rows only
            user_e, item_e = self.user_embedding(users), self.item_embedding(items)
        else:
            user_all, item_all = self.forward()
            user_e, item_e = user_all[users], item_all[items]
        return directau_loss(user_e, item_e, self.gamma / 2, self.matmul_dtype, self.uniformity_block_rows)
