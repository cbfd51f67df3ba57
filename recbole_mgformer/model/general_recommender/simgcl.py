"""SimGCL (Yu et al., SIGIR 2022): LightGCN with contrastive views made by uniform noise.

Each view adds ``eps * sign(e) * normalize(u)`` to every layer's output (Eq. 7 of the SimGCL paper); the
InfoNCE loss between two views of the batch's users and items, weighted by ``lambda``, joins the BPR loss.
As in the authors' code the representation averages layers 1..L, leaving out the ego embeddings.
"""

import torch
import torch.nn as nn
from recbole.model.init import xavier_uniform_initialization
from recbole.model.loss import EmbLoss
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import BPRWithEgoL2, GraphRecommender
from recbole_mgformer.model.graph import generator_rand, lightgcn_layers, sign_preserving_noise, symmetric_sparse_matmul
from recbole_mgformer.model.loss import distinct_ids, info_nce_loss
from recbole_mgformer.model.options import non_negative_float, positive_float, positive_int


class SimGCL(BPRWithEgoL2, GraphRecommender):
    r"""SimGCL; see ``properties/model/SimGCL.yaml`` for its options."""

    input_type = InputType.PAIRWISE
    # Static shapes (the contrastive loss masks repeated ids) and device-side noise
    # (recbole_mgformer/training/cuda_graph.py).
    CUDA_GRAPH_SAFE = True

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        name = type(self).__name__
        self.embedding_size = positive_int(config, "embedding_size", name)
        self.n_layers = positive_int(config, "n_layers", name)
        self.eps = non_negative_float(config, "eps", name)
        self.tau = positive_float(config, "tau", name)
        self.cl_weight = non_negative_float(config, "lambda", name)
        self.reg_weight = non_negative_float(config, "reg_weight", name)
        self.require_pow = True  # the authors' L2: squared norms
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        self.reg_loss = EmbLoss()
        self.noise_generator = torch.Generator(device=self.device).manual_seed(int(config["seed"]))
        self.apply(xavier_uniform_initialization)

    def cuda_graph_generators(self):
        """The noise's generator: a graph registers it, so each replay draws new noise."""
        return [self.noise_generator]

    def ego_embeddings(self):
        return torch.cat([self.user_embedding.weight, self.item_embedding.weight])

    def noise_draws(self, views):
        """The uniform draws behind ``views`` perturbed propagations, (views, L, n, d), in one draw: layer by layer,
        view by view, the numbers separate draws per layer would give on a CPU."""
        ego = self.user_embedding.weight
        return generator_rand(
            (views, self.n_layers, self.n_users + self.n_items, ego.shape[1]), self.noise_generator, ego
        )

    def layer_outputs(self, uniform=None, first=None):
        """``[E_1, ..., E_L]``, each (n, d); with ``uniform`` (L, n, d) draws, noise after every layer; ``first``:
        ``A_hat E_0``, computed once for the clean propagation and the views (:func:`lightgcn_layers`)."""
        perturb = None if uniform is None else lambda x, layer: sign_preserving_noise(x, self.eps, uniform[layer])
        ego = self.ego_embeddings() if first is None else None  # given A_hat E_0, E_0 itself is not needed
        return lightgcn_layers(self.propagation_adjacency, ego, self.n_layers, perturb, first)

    def forward(self, uniform=None, first=None):
        """users (n_users, d), items (n_items, d): the clean propagation, or the view ``uniform`` (L, n, d) perturbs."""
        return self.split_nodes(torch.stack(self.layer_outputs(uniform, first)).mean(dim=0))

    def contrastive_loss(self, users, items, view1, view2):
        """InfoNCE on the batch's distinct users and items; views are (users, items) pairs. Repeated ids are masked
        out, not dropped: the shapes stay the batch's, and nothing is read on the host."""
        (users, user_repeats), (items, item_repeats) = distinct_ids(users), distinct_ids(items)
        return info_nce_loss(view1[0][users], view2[0][users], self.tau, user_repeats) + info_nce_loss(
            view1[1][items], view2[1][items], self.tau, item_repeats
        )

    def calculate_loss(self, interaction):
        self.forget_representations()
        if not self.cl_weight:
            return self.recommendation_loss(interaction, *self.forward())
        # the clean propagation and both views start from the same A_hat E_0: one sparse product forward and one
        # backward (autograd sums the three gradients first) instead of three each, of the step's six of each
        first = symmetric_sparse_matmul(self.propagation_adjacency, self.ego_embeddings())
        loss = self.recommendation_loss(interaction, *self.forward(first=first))
        users, items = interaction[self.USER_ID], interaction[self.ITEM_ID]
        uniform = self.noise_draws(2)  # one call: a compiler may merge two equal ones
        views = self.forward(uniform[0], first), self.forward(uniform[1], first)
        return loss + self.cl_weight * self.contrastive_loss(users, items, *views)
