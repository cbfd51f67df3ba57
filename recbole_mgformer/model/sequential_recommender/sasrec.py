"""SASRec (Kang and McAuley, ICDM 2018) as RecBole 1.2.1 implements it, trained several times faster on CPUs.

RecBole's ``SASRec`` is the parent: its options (``recbole/properties/model/SASRec.yaml``), parameters and their
initialisation, state-dict keys, losses (CE over every item, or BPR) and predictions. Only the forward pass is
rewritten, to compute the same function with less work:

- **Only the scored position.** The output is read at each sequence's last item (``item_seq_len - 1``) and the
  attention is causal, so the last layer needs its query, residual, LayerNorm and feed-forward at that one row
  (keys and values still at every row): (B, 1, H) instead of (B, L, H). The earlier layers still run over all rows.
- **No padding rows.** RecBole's sequences are left-aligned (items at positions ``0 .. len - 1``, then item 0),
  and a padded position is masked as a key, so nothing computed at it reaches the output (its softmax weight is
  exactly 0). The row-wise work (embedding, projections, feed-forward, norms, dropout) runs on the real items only,
  packed (N, H) (N = 39 of every 50 rows on ml-100k-seq); the attention scatters them back to (B, L) with zeros.
- **Dropout** through :func:`recbole_mgformer.model.dropout.dropout`: a uniform draw against ``p`` instead of
  ``bernoulli_``, the same independent keep probability ``1 - p`` and scale ``1 / (1 - p)``; rows that feed nothing
  (the last layer's other queries) get no draw. The masks are therefore not RecBole's draws from the same seed, but
  draws of the same distribution.
- **GELU** as ``F.gelu`` (the exact erf form, one fused kernel forward and backward) instead of RecBole's five
  elementwise ops; the other activations are torch's own kernels of the same functions.
- **One projection** for query, key and value (the three weights side by side, one matmul).

The padding mask is RecBole's: a key at a padded position or after the query gets -10000 before the softmax, whose
exponential is 0 in float32, as a masked key's is there. Cross-entropy over all items stays in float32.

``precision: bf16`` (or ``auto``: bf16 where the CPU multiplies it natively) runs the encoder under bf16 autocast,
its matmuls' inputs rounded to 8 significant bits; the scores and the loss stay float32. It is off by default
(``fp32``, RecBole's arithmetic): it changes the numbers, and its accuracy has not been shown equal to fp32's.
``torch.compile`` of this forward made the training step about 2 times slower on these CPUs (torch 2.13), so it is
not used.

``train_protocol: sequence`` (:mod:`recbole_mgformer.data.sequence_windows`) trains on whole windows instead of
RecBole's prefix rows, with a cross-entropy at every position: the same causal encoder read at every real row (no
last-row shortcut), the same targets, from about 40 times fewer encoder rows on ml-100k-seq. It is a protocol, not
the same computation: it is off by default (``prefix``, RecBole's), and its accuracy is compared with RecBole's
protocol on the sequential page.
"""

import torch
import torch.nn.functional as F

from recbole_mgformer.model.abstract_recommender import ModelContract
from recbole_mgformer.model.dropout import dropout
from recbole_mgformer.model.options import positive_int
from recbole_mgformer.model.recbole_sequential import (
    WholeSequenceLoss,
    encoder_autocast,
    encoder_precision,
    recbole_sequential_model,
    whole_sequence_stride,
)

RecBoleSASRec = recbole_sequential_model("SASRec")

ACTIVATIONS = {
    "gelu": F.gelu,  # RecBole's erf form: x * 0.5 * (1 + erf(x / sqrt(2)))
    "relu": F.relu,
    "swish": F.silu,  # x * sigmoid(x)
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}
MASKED = -10000.0  # RecBole's additive mask value


def causal_mask(item_seq):
    """True where a query may attend a key: the key is a real item at or before the query: (B, 1, L, L)."""
    length = item_seq.size(1)
    causal = torch.ones(length, length, dtype=torch.bool, device=item_seq.device).tril()
    return causal & (item_seq != 0)[:, None, None, :]


def last_row_mask(item_seq, last):
    """The mask of the query at position ``last`` (B,): real items at or before it: (B, 1, 1, L)."""
    positions = torch.arange(item_seq.size(1), device=item_seq.device)
    return ((item_seq != 0) & (positions <= last[:, None]))[:, None, None, :]


def split_heads(x, n_heads):
    """(B, L, H) -> (B, heads, L, H / heads)."""
    return x.view(*x.shape[:2], n_heads, -1).transpose(1, 2)


def attention(attn, queries, keys, values, allowed, training):
    """RecBole's ``MultiHeadAttention`` after its projections: queries (B, Q, H), keys and values (B, L, H),
    allowed (B, 1, Q, L) -> (B, Q, H), before its output projection."""
    heads = attn.num_attention_heads
    scores = torch.matmul(split_heads(queries, heads), split_heads(keys, heads).transpose(-1, -2))
    scores = (scores / attn.sqrt_attention_head_size).masked_fill_(~allowed, MASKED)  # (B, h, Q, L)
    probs = dropout(torch.softmax(scores, dim=-1), attn.attn_dropout.p, training)
    context = torch.matmul(probs, split_heads(values, heads))  # (B, h, Q, H / h)
    return context.transpose(1, 2).reshape(*queries.shape)


def real_rows(item_seq):
    """The real items of left-aligned sequences (B, L): their rows of the flattened (B * L) batch (N,), and the
    packed index of each sequence's last item (B,)."""
    real = item_seq != 0
    return real.flatten().nonzero().squeeze(1), real.sum(1).cumsum(0) - 1


def unpack(packed, rows, batch_shape):
    """(N, C) at ``rows`` -> (B, L, C), zeros at the padding."""
    size = batch_shape[0] * batch_shape[1]
    return packed.new_zeros(size, packed.size(-1)).index_copy_(0, rows, packed).view(*batch_shape, -1)


def attention_block(attn, hidden, allowed, training, rows, batch_shape, last_rows=None):
    """RecBole's ``MultiHeadAttention`` over the real items hidden (N, H) -> (N, H), or, with ``last_rows`` (B,),
    only each sequence's last item -> (B, 1, H)."""
    if last_rows is None:
        weight = torch.cat([attn.query.weight, attn.key.weight, attn.value.weight])  # (3H, H)
        bias = torch.cat([attn.query.bias, attn.key.bias, attn.value.bias])
        queries, keys, values = unpack(F.linear(hidden, weight, bias), rows, batch_shape).chunk(3, dim=-1)
        residual = hidden
    else:
        residual = hidden[last_rows].unsqueeze(1)  # (B, 1, H)
        weight, bias = torch.cat([attn.key.weight, attn.value.weight]), torch.cat([attn.key.bias, attn.value.bias])
        keys, values = unpack(F.linear(hidden, weight, bias), rows, batch_shape).chunk(2, dim=-1)
        queries = attn.query(residual)
    context = attention(attn, queries, keys, values, allowed, training)  # (B, L or 1, H)
    if last_rows is None:
        context = context.reshape(-1, context.size(-1))[rows]  # (N, H)
    out = attn.dense(context)
    return attn.LayerNorm(dropout(out, attn.out_dropout.p, training) + residual)


def feed_forward(ffn, hidden, activation, training):
    """RecBole's ``FeedForward``, row by row: (..., H) -> (..., H)."""
    out = ffn.dense_2(activation(ffn.dense_1(hidden)))
    return ffn.LayerNorm(dropout(out, ffn.dropout.p, training) + hidden)


class SASRec(WholeSequenceLoss, ModelContract, RecBoleSASRec):
    r"""SASRec; RecBole's options (``n_layers``, ``n_heads``, ``hidden_size``, ``inner_size``,
    ``hidden_dropout_prob``, ``attn_dropout_prob``, ``hidden_act``, ``layer_norm_eps``, ``initializer_range``,
    ``loss_type``), ``precision`` (fp32 | bf16 | auto) for the encoder, and ``train_protocol`` (prefix | sequence)."""

    def __init__(self, config, dataset):
        if config["hidden_act"] not in ACTIVATIONS:
            raise ValueError(f"SASRec: hidden_act={config['hidden_act']!r} must be one of {', '.join(ACTIVATIONS)}")
        positive_int(config, "n_layers", "SASRec")  # RecBole's reads the last layer's output
        super().__init__(config, dataset)
        self.activation = ACTIVATIONS[self.hidden_act]
        self.encoder_dtype = encoder_precision(config["precision"], config["device"], "SASRec")
        self.window_stride = whole_sequence_stride(config, "SASRec")  # None: RecBole's prefix rows

    def every_position(self, item_seq, item_seq_len, targets):
        """The last layer's output at every real position (N, H) and the targets (B, L) there (N,)."""
        rows, hidden = self.encode(item_seq, item_seq_len, every_position=True)
        return hidden, targets.flatten()[rows]

    def forward(self, item_seq, item_seq_len):
        """The last layer's output at each sequence's last item: item_seq (B, L), item_seq_len (B,) -> (B, H),
        float32."""
        with encoder_autocast(self.encoder_dtype, item_seq.device):
            return self.encode(item_seq, item_seq_len).float()

    def encode(self, item_seq, item_seq_len, every_position=False):
        """The last layer's output at each sequence's last item (B, H); with ``every_position``, the real rows
        (N,) of the flattened (B * L) batch and the output at each of them (N, H)."""
        rows, last_rows = real_rows(item_seq)  # (N,), (B,)
        items = item_seq.flatten()[rows]
        hidden = self.LayerNorm(self.item_embedding(items) + self.position_embedding(rows % item_seq.size(1)))
        hidden = dropout(hidden, self.dropout.p, self.training)  # (N, H)
        layers = self.trm_encoder.layer
        full_layers = len(layers) if every_position else len(layers) - 1
        allowed = causal_mask(item_seq) if full_layers else None  # the full layers' mask, (B, 1, L, L)
        for index, layer in enumerate(layers):
            final = index == full_layers
            mask = last_row_mask(item_seq, item_seq_len - 1) if final else allowed
            hidden = attention_block(
                layer.multi_head_attention,
                hidden,
                mask,
                self.training,
                rows,
                item_seq.shape,
                last_rows if final else None,
            )
            hidden = feed_forward(layer.feed_forward, hidden, self.activation, self.training)
        return (rows, hidden) if every_position else hidden.squeeze(1)  # (N, H), or the last layer's one row
