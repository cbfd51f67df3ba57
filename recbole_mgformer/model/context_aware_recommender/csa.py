"""CSA, Collaborative Self-Attention (Yao and Li): inductive matrix completion with side features.

Each user's (item's) non-zero features become tokens ``X_it U_t`` (Eq. 1); a user and an item
within-encoder (Eq. 2-3) make them context-aware within their own side, a cross-encoder (Eq. 4) over
the concatenated tokens makes them aware of the other side, and the sum-pooled sides meet in a
Hadamard product read out by ``theta`` (Eq. 5), trained with the logistic loss plus L2 (Eq. 6).

Shapes: ``b`` batch, ``n`` / ``m`` query / key tokens, ``h`` heads, ``d`` embedding size.
A feature is absent when its value is 0: a padding or missing token (id 0, RecBole's ``[PAD]``),
the padding of a token sequence, or a float of 0. Absent features are zero rows (Eq. 1 with
``X_it = 0``) and are masked out of every softmax and of the pooling, so they change nothing.
A side with no feature at all pools to zero: its attention rows are zero (never NaN) and the pair
scores ``theta``'s bias.
"""

import math

import torch
import torch.nn as nn
from recbole.model.abstract_recommender import ContextRecommender
from recbole.utils import FeatureSource, FeatureType

from recbole_mgformer.model.options import choice, non_negative_float, positive_int

ATTENTION_SCALES = ("d", "head")  # 1/sqrt(d) as the paper writes Eq. 2, or the usual 1/sqrt(d/h)


def masked_attention(query, key, value, mask, scale):
    """``softmax(scale * Q K^T) V`` over the keys where ``mask`` is True (the masked softmax of Eq. 2).

    query (b, h, n, k), key (b, h, m, k), value (b, h, m, v), mask (b, m) bool -> (b, h, n, v).
    A row with no key left gets zero weights, so its output is 0 rather than NaN.
    """
    scores = (query @ key.transpose(-2, -1)) * scale  # (b, h, n, m)
    keep = mask[:, None, None, :]
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    # exp(min - max) is exactly 0 beside any kept key; the product only matters for all-masked rows.
    weights = torch.softmax(scores, dim=-1) * keep
    return weights @ value


class TransformerBlock(nn.Module):
    """One post-LayerNorm encoder layer, ``SelfAttention(.)`` of the paper.

    Eq. (2): multi-head self-attention, ``W^Q, W^K, W^P`` (h heads of width d/h, side by side) and
    ``W^(attn)``, no biases; Eq. (3): ``ReLU(x W1 + b1) W2 + b2``. Each sub-layer adds its input back
    and applies LayerNorm. Dropout acts on each sub-layer's input ("applied to all layers' inputs").
    """

    def __init__(self, d, n_heads, d_ff, dropout, attention_scale="d"):
        super().__init__()
        if d % n_heads:
            raise ValueError(f"embedding size {d} is not divisible by {n_heads} heads")
        if attention_scale not in ATTENTION_SCALES:
            raise ValueError(
                f"unknown attention_scale {attention_scale!r}; choose one of {', '.join(ATTENTION_SCALES)}"
            )
        self.n_heads, self.head_size = n_heads, d // n_heads
        self.scale = 1 / math.sqrt(d if attention_scale == "d" else self.head_size)
        self.query = nn.Linear(d, d, bias=False)
        self.key = nn.Linear(d, d, bias=False)
        self.value = nn.Linear(d, d, bias=False)  # W^P
        self.out = nn.Linear(d, d, bias=False)  # W^(attn)
        self.ffn = nn.Sequential(nn.Linear(d, d_ff), nn.ReLU(), nn.Linear(d_ff, d))
        self.attention_norm = nn.LayerNorm(d)
        self.ffn_norm = nn.LayerNorm(d)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.head_size).transpose(1, 2)  # (b, h, n, d/h)

    def forward(self, x, mask):
        """x (b, n, d), mask (b, n) bool -> (b, n, d)."""
        x = self.dropout(x)
        heads = masked_attention(
            self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x)), mask, self.scale
        )
        attended = heads.transpose(1, 2).reshape(x.shape)  # Concat(U_1, ..., U_h)
        x = self.attention_norm(x + self.out(attended))  # Eq. (2) + residual
        x = self.dropout(x)
        return self.ffn_norm(x + self.ffn(x))  # Eq. (3)


def encode(blocks, tokens, mask):
    """Repeated ``SelfAttention(.)``; absent tokens leave as zero rows. tokens (b, n, d), mask (b, n)."""
    for block in blocks:
        tokens = block(tokens, mask)
    return tokens * mask.unsqueeze(-1)


def value_weighted_tokens(table, index, value):
    """Eq. (1): ``X_t U_t`` per feature, and which are present. index (b, n) long, value (b, n)
    -> tokens (b, n, d), mask (b, n) bool."""
    return value.unsqueeze(-1) * table(index), value != 0


class FieldTokens(nn.Module):
    """One side's features as tokens: one per token or float field, one per element of a token-seq
    or float-seq field (each genre of a movie is its own feature). All fields share one table,
    each at its own offset."""

    KINDS = {
        FeatureType.TOKEN: "token",
        FeatureType.TOKEN_SEQ: "token_seq",
        FeatureType.FLOAT: "float",
        FeatureType.FLOAT_SEQ: "float_seq",
    }

    def __init__(self, fields, kinds, sizes, d):
        super().__init__()
        self.fields, self.kinds = list(fields), list(kinds)
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        self.table = nn.Embedding(sum(sizes), d)

    def forward(self, interaction):
        """-> tokens (b, n, d), mask (b, n) bool, n the side's token count."""
        indices, values = [], []
        for field, kind, offset in zip(self.fields, self.kinds, self.offsets):
            x = interaction[field]
            if kind == "token":
                index = x.unsqueeze(1)
            elif kind == "token_seq":
                index = x
            else:  # RecBole stores a numerical float as (value, bucket): (b, 2), or (b, L, 2) for a sequence
                pair = x.unsqueeze(1) if kind == "float" else x
                index, value = pair[..., 1].long(), pair[..., 0]
            if kind.startswith("token"):
                value = (index != 0).to(self.table.weight.dtype)  # id 0 is [PAD]: missing or padding
            indices.append(index + offset)
            values.append(value)
        return value_weighted_tokens(self.table, torch.cat(indices, dim=1), torch.cat(values, dim=1))


_BASE_TABLES = (
    "token_embedding_table",
    "float_embedding_table",
    "token_seq_embedding_table",
    "float_seq_embedding_table",
)


def drop_base_tables(model, keep_first_order=False):
    """The base class's pooled field tables (and, unless kept, its first-order term) are not part of these
    models: each feature is its own token (Eq. 1)."""
    for name in _BASE_TABLES + (() if keep_first_order else ("first_order_linear",)):
        if hasattr(model, name):
            delattr(model, name)


def side_tokens(model, dataset, sources, d, side, name):
    """One side's feature tokens (``FieldTokens``); a clear error naming the model ``name`` if the side has none."""
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


def user_and_item_tokens(model, dataset, d, name):
    """The user side (``user_id`` and the ``.user`` file's fields), then the item side, as tokens."""
    users = side_tokens(model, dataset, [FeatureSource.USER_ID, FeatureSource.USER], d, "user", name)
    items = side_tokens(model, dataset, [FeatureSource.ITEM_ID, FeatureSource.ITEM], d, "item", name)
    return users, items


def l2_loss(model, logits, interaction):
    """Eq. (6): the mean logistic loss over the batch + reg_weight / 2 * squared L2 norm of all parameters."""
    loss = nn.functional.binary_cross_entropy_with_logits(logits, interaction[model.LABEL])
    if model.reg_weight:
        loss = loss + model.reg_weight / 2 * sum(p.pow(2).sum() for p in model.parameters())
    return loss


class CSA(ContextRecommender):
    r"""CSA; see ``properties/model/CSA.yaml`` for its options.

    The user side holds the fields of the ``.user`` file and ``user_id``, the item side those of the
    ``.item`` file and ``item_id``; fields of the ``.inter`` file are not features of CSA. Float fields
    take part when listed in ``numerical_features``, as in RecBole's other context-aware models.
    """

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        # CSA embeds every feature as its own token (Eq. 1); the base class's pooled field tables are not
        # part of the model, nor its first-order term unless ``first_order`` asks for it.
        self.first_order = bool(config["first_order"])
        drop_base_tables(self, keep_first_order=self.first_order)

        d = positive_int(config, "embedding_size", "CSA")
        n_heads = positive_int(config, "n_heads", "CSA")
        if d % n_heads:
            raise ValueError(
                f"CSA: embedding_size ({d}) must be divisible by n_heads ({n_heads}) "
                "(set them in a config file or with --embedding_size=... --n_heads=...)"
            )
        d_ff = positive_int(config, "d_ff", "CSA")
        n_layers = positive_int(config, "n_layers", "CSA")
        dropout = non_negative_float(config, "dropout_prob", "CSA")
        if dropout >= 1:
            raise ValueError(f"CSA: dropout_prob must be in [0, 1), got {dropout!r}")
        scale = choice(config, "attention_scale", ATTENTION_SCALES, "CSA")
        self.reg_weight = non_negative_float(config, "reg_weight", "CSA")

        self.user_tokens, self.item_tokens = user_and_item_tokens(self, dataset, d, "CSA")

        def encoder():
            return nn.ModuleList(TransformerBlock(d, n_heads, d_ff, dropout, scale) for _ in range(n_layers))

        self.user_encoder, self.item_encoder, self.cross_encoder = encoder(), encoder(), encoder()
        self.dropout = nn.Dropout(dropout)
        self.theta = nn.Linear(d, 1)  # Eq. (5); its bias, not in the paper, is the score of an empty pair
        self.apply(self._init_weights)
        # The pooled sides are sums of LayerNorm outputs, so their product is large: a zero theta starts
        # every logit at 0 instead of saturating the sigmoid.
        nn.init.zeros_(self.theta.weight)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Embedding, nn.Linear)):
            nn.init.xavier_normal_(module.weight)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, interaction):
        """Logits of the pairs: Eq. (1)-(5). -> (b,)"""
        user, user_mask = self.user_tokens(interaction)  # (b, nu, d), (b, nu)
        item, item_mask = self.item_tokens(interaction)  # (b, nv, d), (b, nv)
        user = encode(self.user_encoder, user, user_mask)  # U^(enc)
        item = encode(self.item_encoder, item, item_mask)  # V^(enc)
        mask = torch.cat([user_mask, item_mask], dim=1)
        both = encode(self.cross_encoder, torch.cat([user, item], dim=1), mask)  # Eq. (4): O^(final)
        user, item = both.split([user.shape[1], item.shape[1]], dim=1)
        pooled = user.sum(dim=1) * item.sum(dim=1)  # 1^T U^(final) ⊙ 1^T V^(final); absent rows are 0
        logits = self.theta(self.dropout(pooled)).squeeze(-1)
        if self.first_order:  # not in the paper: a learned weight per feature value, as FM and AutoInt add
            logits = logits + self.first_order_linear(interaction).squeeze(-1)
        return logits

    def calculate_loss(self, interaction):
        return l2_loss(self, self.forward(interaction), interaction)

    def predict(self, interaction):
        return torch.sigmoid(self.forward(interaction))
