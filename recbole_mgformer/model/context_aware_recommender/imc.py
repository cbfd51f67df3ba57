"""IMC, factorized inductive matrix completion (Jain and Dhillon; Eq. 1 of the CSA paper), CSA's first baseline.

A pair's score is ``x_u^T U V^T y_i = (X_u U) . (Y_i V)``: each side's feature vector projected by its own
mapping matrix, then a dot product. ``X_u U = sum_t X_ut U_t`` is the sum of CSA's feature tokens (Eq. 1 of
CSA without its encoders), so IMC reads exactly the features CSA reads (``FieldTokens``: ids, token,
token-seq and declared float fields of the ``.user`` / ``.item`` files) and is trained "with the same
setting as CSA": the logistic loss on the label plus ``reg_weight / 2`` times the squared L2 norm.

Shapes: ``b`` batch, ``n`` a side's token count, ``d`` embedding size.
"""

import torch
import torch.nn as nn
from recbole.model.abstract_recommender import ContextRecommender

from recbole_mgformer.model.context_aware_recommender.csa import drop_base_tables, l2_loss, user_and_item_tokens
from recbole_mgformer.model.options import non_negative_float, positive_int


def pooled(tokens, interaction):
    """``X U``: the sum of a side's value-weighted feature rows (absent features are zero rows). -> (b, d)"""
    rows, _ = tokens(interaction)  # (b, n, d)
    return rows.sum(dim=1)


class IMC(ContextRecommender):
    r"""IMC; see ``properties/model/IMC.yaml`` for its options.

    ``bias`` (not in Eq. 1) adds one learned scalar to every logit, as CSA's ``theta`` has a bias: with the
    logistic loss it lets the model match the label rate without bending the factors.
    """

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        drop_base_tables(self)
        d = positive_int(config, "embedding_size", "IMC")
        self.reg_weight = non_negative_float(config, "reg_weight", "IMC")
        if not isinstance(config["bias"], bool):
            raise ValueError(
                f"IMC: bias must be True or False, got {config['bias']!r} (set it in a config file or with --bias=...)"
            )
        self.user_tokens, self.item_tokens = user_and_item_tokens(self, dataset, d, "IMC")  # U, V
        self.bias = nn.Parameter(torch.zeros(())) if config["bias"] else None
        for tokens in (self.user_tokens, self.item_tokens):
            nn.init.xavier_normal_(tokens.table.weight)

    def forward(self, interaction):
        """Logits ``(X_u U) . (Y_i V) [+ bias]``. -> (b,)"""
        logits = (pooled(self.user_tokens, interaction) * pooled(self.item_tokens, interaction)).sum(-1)
        return logits + self.bias if self.bias is not None else logits

    def calculate_loss(self, interaction):
        return l2_loss(self, self.forward(interaction), interaction)

    def predict(self, interaction):
        return torch.sigmoid(self.forward(interaction))
