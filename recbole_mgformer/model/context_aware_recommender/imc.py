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
from recbole.utils import FeatureSource, FeatureType

from recbole_mgformer.model.context_aware_recommender.csa import FieldTokens
from recbole_mgformer.model.options import non_negative_float, positive_int

_BASE_TABLES = ["token_embedding_table", "float_embedding_table", "token_seq_embedding_table",
                "float_seq_embedding_table", "first_order_linear"]


def drop_base_tables(model):
    """The base class's pooled field tables and first-order term are not part of these models."""
    for name in _BASE_TABLES:
        if hasattr(model, name):
            delattr(model, name)


def side_tokens(model, dataset, sources, d, side, name):
    """One side's feature tokens (``FieldTokens``), as CSA builds them; a clear error if the side has none."""
    fields, kinds, sizes = [], [], []
    for field in dataset.fields(source=sources):
        ftype = dataset.field2type[field]
        if field == model.LABEL or ftype not in FieldTokens.KINDS:
            continue
        if ftype in (FeatureType.FLOAT, FeatureType.FLOAT_SEQ) and field not in model.numerical_features:
            continue  # RecBole's rule: a float is a feature only when declared numerical
        fields.append(field)
        kinds.append(FieldTokens.KINDS[ftype])
        sizes.append(dataset.num(field))
    if not fields:
        raise ValueError(f"{name}: the dataset has no {side} feature fields (check load_col)")
    return FieldTokens(fields, kinds, sizes, d)


def user_and_item_tokens(model, config, dataset, d, name):
    users = side_tokens(model, dataset, [FeatureSource.USER_ID, FeatureSource.USER], d, "user", name)
    items = side_tokens(model, dataset, [FeatureSource.ITEM_ID, FeatureSource.ITEM], d, "item", name)
    return users, items


def pooled(tokens, interaction):
    """``X U``: the sum of a side's value-weighted feature rows (absent features are zero rows). -> (b, d)"""
    rows, _ = tokens(interaction)  # (b, n, d)
    return rows.sum(dim=1)


def l2_loss(model, logits, interaction):
    """The logistic loss + reg_weight / 2 * squared L2 norm of all parameters (CSA's Eq. 6)."""
    loss = nn.functional.binary_cross_entropy_with_logits(logits, interaction[model.LABEL])
    if model.reg_weight:
        loss = loss + model.reg_weight / 2 * sum(p.pow(2).sum() for p in model.parameters())
    return loss


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
            raise ValueError(f"IMC: bias must be True or False, got {config['bias']!r} "
                             "(set it in a config file or with --bias=...)")
        self.user_tokens, self.item_tokens = user_and_item_tokens(self, config, dataset, d, "IMC")  # U, V
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
