"""GRU4Rec (Hidasi et al., ICLR 2016) as RecBole 1.2.1 implements it, trained faster on CPUs.

RecBole's ``GRU4Rec`` is the parent: its options (``recbole/properties/model/GRU4Rec.yaml``), parameters, their
initialisation, state-dict keys, losses and predictions. The forward pass computes the same function with less work:

- **No steps past a sequence's end.** RecBole runs the GRU over all ``MAX_ITEM_LIST_LENGTH`` steps of every row,
  padding included, then reads the output at the last item; the GRU is causal, so that output is the hidden state
  after the last item. Here the rows are sorted by length and step ``t`` runs only over the rows longer than ``t``
  (ml-100k-seq's prefixes average 39 of 50 items), with torch's GRU cell arithmetic op for op (no bias, as
  RecBole's GRU has none): the hidden states came out bitwise equal to ``nn.GRU``'s in a check here.
- **Dropout** through :func:`recbole_mgformer.model.dropout.dropout`: a uniform draw against ``p``, the same
  independent keep probability ``1 - p`` and scale ``1 / (1 - p)`` as ``nn.Dropout``, not its ``bernoulli_`` path.
- **The output projection on one row** per sequence (its last item), not on every step before picking one.

``precision: bf16`` (or ``auto``) runs the embedding-to-output path under bf16 autocast (the GRU's matmuls in
bf16); the scores and the loss stay float32. Off by default (``fp32``, RecBole's arithmetic), as it changes the
numbers and its accuracy has not been shown equal to fp32's.

``train_protocol: sequence`` (:mod:`recbole_mgformer.data.sequence_windows`) trains on whole windows instead of
RecBole's prefix rows, with a cross-entropy at every step's output: a protocol, off by default (``prefix``), its
accuracy compared with RecBole's protocol on the sequential page.

Most of the step is the GRU's own arithmetic (its recurrent matmuls, step by step). ``pack_padded_sequence`` with
``nn.GRU`` skips the padding too, but made the step about 3 times slower on CPUs; ``torch.compile`` was not tried
here (it made SASRec's step 2 times slower).
"""

import torch

from recbole_mgformer.model.abstract_recommender import ModelContract
from recbole_mgformer.model.dropout import dropout
from recbole_mgformer.model.recbole_sequential import (
    WholeSequenceLoss,
    encoder_autocast,
    encoder_precision,
    recbole_sequential_model,
    whole_sequence_stride,
)

RecBoleGRU4Rec = recbole_sequential_model("GRU4Rec")


class GRU4Rec(WholeSequenceLoss, ModelContract, RecBoleGRU4Rec):
    r"""GRU4Rec; RecBole's options (``embedding_size``, ``hidden_size``, ``num_layers``, ``dropout_prob``,
    ``loss_type``), ``precision`` (fp32 | bf16 | auto) for the encoder, and ``train_protocol`` (prefix |
    sequence)."""

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.encoder_dtype = encoder_precision(config["precision"], config["device"], "GRU4Rec")
        self.window_stride = whole_sequence_stride(config, "GRU4Rec")  # None: RecBole's prefix rows

    def every_position(self, item_seq, item_seq_len, targets):
        """The output at every real step, step by step (N, E), and the targets (B, L) there in that order (N,)."""
        items = dropout(self.item_embedding(item_seq), self.emb_dropout.p, self.training)  # (B, L, E)
        outputs, order = gru_every_output(self.gru_layers, items, item_seq_len)  # (N, H), (B,)
        real = torch.arange(item_seq.size(1), device=item_seq.device)[:, None] < item_seq_len[order][None, :]
        return self.dense(outputs), targets[order].t()[real]

    def forward(self, item_seq, item_seq_len):
        """The output at each sequence's last item: item_seq (B, L), item_seq_len (B,) -> (B, embedding_size)."""
        with encoder_autocast(self.encoder_dtype, item_seq.device):
            items = dropout(self.item_embedding(item_seq), self.emb_dropout.p, self.training)  # (B, L, E)
            return self.dense(gru_last_hidden(self.gru_layers, items, item_seq_len)).float()


def gru_layer(w_ih, w_hh, steps, active):
    """One bias-free GRU layer over rows sorted longest first: ``steps[t]`` (active[t], E) are the inputs of the
    rows still going at step ``t`` -> their outputs, [(active[t], H)], and every row's last hidden state (B, H)
    in the sorted order. The cell is torch's (``GRUCell`` without bias): r, z = sigmoid(x W_ir,z + h W_hr,z),
    n = tanh(x W_in + r * h W_hn), h' = (h - n) * z + n."""
    hidden_size = w_hh.size(1)
    gates_in = torch.matmul(torch.cat(steps), w_ih.t()).split(active)  # the inputs' share, all steps at once
    h = steps[0].new_zeros(active[0], hidden_size)
    outputs, finished = [], []
    for x_gates, n in zip(gates_in, active):
        if n < h.size(0):  # rows whose sequence ended at the last step keep their hidden state
            finished.append(h[n:])
            h = h[:n]
        h_gates = torch.matmul(h, w_hh.t())  # (n, 3H)
        r, z = torch.sigmoid(x_gates[:, : 2 * hidden_size] + h_gates[:, : 2 * hidden_size]).chunk(2, 1)
        candidate = torch.tanh(x_gates[:, 2 * hidden_size :] + r * h_gates[:, 2 * hidden_size :])
        h = (h - candidate) * z + candidate
        outputs.append(h)
    finished.append(h)
    return outputs, torch.cat(finished[::-1])  # the longest rows ended last


def gru_layers(gru, items, lengths):
    """RecBole's ``nn.GRU`` (batch first, no bias) over the real steps only: items (B, L, E), lengths (B,) -> the
    last layer's outputs of each step ``t`` for the rows longer than ``t``, [(active[t], H)], its hidden state after
    each row's last item (B, H), both in the order ``order`` (B,) of the rows sorted longest first."""
    order = torch.argsort(lengths, descending=True, stable=True)
    sorted_lengths = lengths[order]
    steps_run = torch.arange(int(sorted_lengths[0]), device=lengths.device)
    active = (sorted_lengths[None, :] > steps_run[:, None]).sum(1).tolist()  # rows still going at each step
    steps = [x[:n] for x, n in zip(items[order].unbind(1), active)]  # unbind: one backward copy, not one per step
    for layer in range(gru.num_layers):
        steps, last = gru_layer(getattr(gru, f"weight_ih_l{layer}"), getattr(gru, f"weight_hh_l{layer}"), steps, active)
    return steps, last, order


def gru_last_hidden(gru, items, lengths):
    """The last layer's hidden state after each row's item ``lengths - 1``: items (B, L, E), lengths (B,) ->
    (B, H), without the steps after it."""
    _, last, order = gru_layers(gru, items, lengths)
    return torch.empty_like(last).index_copy_(0, order, last)  # back to the batch's order


def gru_every_output(gru, items, lengths):
    """The last layer's output at every real step: items (B, L, E), lengths (B,) -> (N, H) step by step (step 0's
    rows, then step 1's, ..., each in the order ``order``), and ``order`` (B,), the rows sorted longest first."""
    steps, _, order = gru_layers(gru, items, lengths)
    return torch.cat(steps), order
