"""GRU4Rec (Hidasi et al., ICLR 2016) as RecBole 1.2.1 implements it, trained faster on CPUs.

RecBole's ``GRU4Rec`` is the parent: its options (``recbole/properties/model/GRU4Rec.yaml``), parameters, their
initialisation, state-dict keys, losses and predictions. The forward pass computes the same function with less work:

- **Dropout** through :func:`recbole_mgformer.model.dropout.dropout`: a uniform draw against ``p``, the same
  independent keep probability ``1 - p`` and scale ``1 / (1 - p)`` as ``nn.Dropout``, not its ``bernoulli_`` path.
- **The output projection on one row** per sequence (its last item), not on every step before picking one.

``precision: bf16`` (or ``auto``) runs the embedding-to-output path under bf16 autocast (the GRU's matmuls in
bf16); the scores and the loss stay float32. Off by default (``fp32``, RecBole's arithmetic), as it changes the
numbers and its accuracy has not been shown equal to fp32's.

Most of the step is the GRU's own arithmetic (its recurrent matmuls, step by step), which is RecBole's here.
Skipping the steps past each sequence's end (``pack_padded_sequence``, exact: the GRU is causal) was tried and
made the step about 3 times slower on CPUs, torch running a packed GRU step by step over shrinking batches.
"""

from recbole_mgformer.model.dropout import dropout
from recbole_mgformer.model.recbole_sequential import encoder_autocast, encoder_precision, recbole_sequential_model

RecBoleGRU4Rec = recbole_sequential_model("GRU4Rec")


class GRU4Rec(RecBoleGRU4Rec):
    r"""GRU4Rec; RecBole's options (``embedding_size``, ``hidden_size``, ``num_layers``, ``dropout_prob``,
    ``loss_type``), and ``precision`` (fp32 | bf16 | auto) for the encoder."""

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.encoder_dtype = encoder_precision(config["precision"], config["device"], "GRU4Rec")

    def forward(self, item_seq, item_seq_len):
        """The output at each sequence's last item: item_seq (B, L), item_seq_len (B,) -> (B, embedding_size)."""
        with encoder_autocast(self.encoder_dtype, item_seq.device):
            items = dropout(self.item_embedding(item_seq), self.emb_dropout.p, self.training)  # (B, L, E)
            outputs, _ = self.gru_layers(items)  # (B, L, H)
            return self.dense(self.gather_indexes(outputs, item_seq_len - 1)).float()
