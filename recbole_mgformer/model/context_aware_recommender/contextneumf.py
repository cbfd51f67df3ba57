"""ContextNeuMF: NeuMF (He et al., 2017) over user and item features, CSA's second baseline.

The CSA paper calls NeuMF "a representative deep IMC model" that "feeds representations of users/items into
multilayer perceptron", with the same setting as CSA. Its users and items are therefore IMC's feature
representations ``X_u U`` and ``Y_i V``, not bare ids. RecBole's ``NeuMF`` is a general model that embeds
``user_id`` and ``item_id`` only, so on the context datasets it would ignore every feature; it cannot be
reused. This model keeps NeuMF's architecture and swaps its id embeddings for pooled feature tokens
(``FieldTokens``, the features CSA reads; ids are among them):

  GMF tower ``p_u ⊙ q_i`` over one pair of feature tables, MLP tower over ``[p'_u; q'_i]`` from a second
  pair (NeuMF keeps the two towers' embeddings apart), and ``h^T [GMF; MLP] + b`` as the logit,
  trained with the logistic loss on the label (+ ``reg_weight / 2`` squared L2) as CSA.

It is named ContextNeuMF, not NeuMF, because the registry resolves this project's models first and would
otherwise shadow RecBole's general NeuMF. Shapes: ``b`` batch, ``d`` embedding size.
"""

import torch
import torch.nn as nn
from recbole.model.abstract_recommender import ContextRecommender
from recbole.model.layers import MLPLayers

from recbole_mgformer.model.context_aware_recommender.csa import drop_base_tables, l2_loss, user_and_item_tokens
from recbole_mgformer.model.context_aware_recommender.imc import pooled
from recbole_mgformer.model.options import non_negative_float, positive_int


def hidden_sizes(config, name):
    sizes = config["mlp_hidden_size"]
    if (
        not isinstance(sizes, (list, tuple))
        or not sizes
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes)
    ):
        raise ValueError(
            f"{name}: mlp_hidden_size must be a non-empty list of positive integers, got {sizes!r} "
            "(set it in a config file or with --mlp_hidden_size='[64,32]')"
        )
    return list(sizes)


class ContextNeuMF(ContextRecommender):
    r"""ContextNeuMF; see ``properties/model/ContextNeuMF.yaml`` for its options."""

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        drop_base_tables(self)
        d = positive_int(config, "embedding_size", "ContextNeuMF")
        sizes = hidden_sizes(config, "ContextNeuMF")
        dropout = non_negative_float(config, "dropout_prob", "ContextNeuMF")
        if dropout >= 1:
            raise ValueError(f"ContextNeuMF: dropout_prob must be in [0, 1), got {dropout!r}")
        self.reg_weight = non_negative_float(config, "reg_weight", "ContextNeuMF")
        self.gmf_user, self.gmf_item = user_and_item_tokens(self, dataset, d, "ContextNeuMF")
        self.mlp_user, self.mlp_item = user_and_item_tokens(self, dataset, d, "ContextNeuMF")
        self.mlp = MLPLayers([2 * d] + sizes, dropout)
        self.predict_layer = nn.Linear(d + sizes[-1], 1)
        for module in self.modules():
            if isinstance(module, (nn.Embedding, nn.Linear)):
                nn.init.normal_(module.weight, std=0.01)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, interaction):
        """-> logits (b,)"""
        gmf = pooled(self.gmf_user, interaction) * pooled(self.gmf_item, interaction)  # (b, d)
        mlp = self.mlp(torch.cat([pooled(self.mlp_user, interaction), pooled(self.mlp_item, interaction)], -1))
        return self.predict_layer(torch.cat([gmf, mlp], -1)).squeeze(-1)

    def calculate_loss(self, interaction):
        return l2_loss(self, self.forward(interaction), interaction)

    def predict(self, interaction):
        return torch.sigmoid(self.forward(interaction))
