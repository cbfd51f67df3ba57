"""Names of MGFormer's options that the benchmark's tables reason about, without importing torch or the model:
rendering a table needs the names, not the model."""

# Options that act only inside the attention layers: with ``attention: False`` none changes the model, so the
# control of a variant (what its attention adds: the leaderboards' "Attention:" lines) drops them. Not
# ``precision``: the DirectAU loss's Gram matrices run in it too.
ATTENTION_OPTIONS = frozenset(
    {
        "n_layers",
        "n_heads",
        "feature_map",
        "n_features",
        "feature_redraw_interval",
        "focusing_factor",
        "degree_mask",
        "degree_embedding_size",
        "max_exact_degree",
        "residual",
        "attention_weight",
        "layer_norm",
        "qk_init",
        "key_sample_size",
        "attention_temperature",
        "learn_temperature",
        "value_projection",
        "degree_gate",
        "residual_scale",
        "compile",
        "key_chunk_size",
        "key_features",
    }
)

# Options that act only on the scores after training (``model/filter_residual.py``): a run with them trains as the
# same entry without them, so the leaderboards' "Filter:" lines set such a row against that entry.
FILTER_RESIDUAL_OPTIONS = frozenset(
    {
        "filter_residual",
        "filter_residual_weight",
        "filter_residual_k",
        "filter_residual_alpha",
        "filter_residual_batch_size",
        "filter_residual_settings",
        "filter_residual_cache",
    }
)

# Options of the training loss beyond Eq. (13) (the hybrid trained as one model, ``model/filter_residual.py``) and of
# its batches (``train_protocol: user``, ``data/user_batches.py``): they change training, but such an entry takes its
# tokens' tuned settings (``MGFormer.tuned_as``).
TRAINING_LOSS_OPTIONS = frozenset(
    {"loss", "softmax_temperature", "filter_residual_in_training", "train_protocol", "train_user_chunk"}
)
