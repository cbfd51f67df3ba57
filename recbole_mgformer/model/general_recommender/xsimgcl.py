"""XSimGCL (Yu et al., TKDE 2023): SimGCL with one propagation per step instead of three.

The perturbed propagation serves both losses: its layer mean feeds BPR, and its output at layer
``layer_cl`` is the second view that the InfoNCE loss contrasts with the final one. Evaluation uses the
clean propagation.
"""

import torch
from recbole.utils import InputType

from recbole_mgformer.model.general_recommender.simgcl import SimGCL
from recbole_mgformer.model.options import positive_int


class XSimGCL(SimGCL):
    r"""XSimGCL; see ``properties/model/XSimGCL.yaml`` for its options."""

    input_type = InputType.PAIRWISE

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.layer_cl = positive_int(config, "layer_cl", "XSimGCL")
        if self.layer_cl > self.n_layers:
            raise ValueError(f"XSimGCL: layer_cl={self.layer_cl} must be at most n_layers={self.n_layers}")

    def calculate_loss(self, interaction):
        self.forget_representations()
        layers = self.layer_outputs(self.noise_draws(1)[0])
        final = self.split_nodes(torch.stack(layers).mean(dim=0))
        loss = self.recommendation_loss(interaction, *final)
        if self.cl_weight:
            users, items = interaction[self.USER_ID], interaction[self.ITEM_ID]
            cl_view = self.split_nodes(layers[self.layer_cl - 1])
            loss = loss + self.cl_weight * self.contrastive_loss(users, items, final, cl_view)
        return loss
