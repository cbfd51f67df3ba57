"""MGFormer's options (``properties/model/MGFormer.yaml``), read from a config once and checked: bad values fail at
construction with the key, what was given and the fix. ``auto`` values are resolved here, for the graph's size and
the config's device, so the model and its layers read plain values."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recbole_mgformer.model.mgformer.attention_options import AttentionOptions
from recbole_mgformer.model.mgformer.structural import SVD_SOLVERS
from recbole_mgformer.model.options import (
    choice,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from recbole_mgformer.model.precision import PRECISIONS, resolve_precision
from recbole_mgformer.model.sizing import block_size, uniformity_block_rows

MODEL = "MGFormer"
# directau: Eq. (13); softmax: a full softmax over the items, DirectAU's uniformity kept (model/filter_residual.py)
LOSSES = ("directau", "softmax")

# From this many nodes on, ``compile: auto`` compiles: the key side's elementwise work over all n nodes then
# outweighs compilation's one-off cost within a few epochs (results/performance/performance.md has the figures);
# on smaller graphs the step is the loss's, and compiling would only add the wait.
COMPILE_MIN_NODES = 10_000


def compile_choice(value, n_nodes):
    """The ``compile`` option: True, False, or ``auto`` (True from ``COMPILE_MIN_NODES`` nodes on)."""
    if not (isinstance(value, bool) or value == "auto"):
        raise ValueError(
            f"MGFormer: unknown compile {value!r}; choose one of False, True, auto "
            f"(set it in a config file or with --compile=...)"
        )
    return n_nodes >= COMPILE_MIN_NODES if value == "auto" else value


# ``key_chunk_size: auto`` on a CPU: 2048 rows, whose (h, r, g m) temporaries a core's L2 or L3 cache holds
# (results/performance/step_time-amazon-beauty.md); on a GPU one chunk while it fits (model/sizing.py).
CPU_KEY_CHUNK_SIZE = 2048


def chunk_bytes_per_row(width, features_width, sin_mask):
    """Memory of one key row of a chunk, forward and backward together, in fp32 (for ``key_chunk_size: auto``):
    tokens and keys (w each), features and their gradients (h m each), the gated features and their gradients
    (g h m each, g = 2 with the sin mask); twice that as headroom for the allocator."""
    branches = 2 if sin_mask else 1
    return 2 * 4 * (3 * width + (2 + 2 * branches) * features_width)


# ``key_features: auto`` keeps the fused key side's keys and features for backward while all layers' take at most
# this much memory: keeping spares backward two matmuls and the exponentials per chunk (the gain and its memory:
# results/performance/performance.md); at 10^6 nodes (about 1 GB of them) backward recomputes them instead.
KEEP_KEY_FEATURES_MAX_BYTES = 512 * 2**20


def key_features_kept(value, kept_bytes):
    """The ``key_features`` option (recompute, keep, or ``auto``: keep up to ``KEEP_KEY_FEATURES_MAX_BYTES``)
    -> True to keep them."""
    return kept_bytes <= KEEP_KEY_FEATURES_MAX_BYTES if value == "auto" else value == "keep"


@dataclass(frozen=True)
class MGFormerOptions(AttentionOptions):
    """Every MGFormer option, checked, ``auto`` resolved. ``structural_size``: q, the rank of the SVD encodings
    (0 with ``structural_encoding: none``); ``attention``: False trains the tokens alone; ``compile``,
    ``key_chunk_size``, ``keep_key_features``, ``uniformity_block_rows`` and ``matmul_dtype``: the resolved
    ``compile``, ``key_chunk_size``, ``key_features``, ``uniformity_block_size`` and ``precision``."""

    embedding_size: int
    structural_encoding: str
    structural_size: int
    structural_scale: float | None
    svd_solver: str
    attention: bool
    degree_mask: str
    score: str
    qk_init: str
    n_layers: int
    n_heads: int
    n_features: int | None
    focusing_factor: float
    attention_weight: float
    layer_norm: bool
    uniformity_weight: float
    loss: str
    softmax_temperature: float
    feature_redraw_interval: int
    key_sample_size: int
    max_exact_degree: int
    degree_embedding_size: int
    seed: int
    compile: bool
    precision: str
    matmul_dtype: torch.dtype
    key_chunk_size: int
    keep_key_features: bool
    uniformity_block_rows: int

    @property
    def width(self):
        """w, the token width of Eq. (4): ``d + q``."""
        return self.embedding_size + self.structural_size

    @property
    def features_width(self):
        """h m, the random features of all heads of one node."""
        return self.n_heads * (self.n_features or self.width // self.n_heads)

    @classmethod
    def from_config(cls, config, n_nodes):
        """The options of ``config`` for a graph of ``n_nodes`` users and items."""
        fields = AttentionOptions.read(config, MODEL)
        embedding_size = positive_int(config, "embedding_size", MODEL)
        structural_encoding = choice(config, "structural_encoding", ("svd", "none"), MODEL)
        svd = structural_encoding == "svd"
        # q, the SVD rank: Eq. (3) has q = d; q < d is the PureSVD recommender's own knob on dense data.
        structural_size = 0
        if svd:
            structural_size = positive_int(config, "structural_size", MODEL, optional=True) or embedding_size
        degree_mask = choice(config, "degree_mask", ("sin", "none", "adjacency"), MODEL)
        key_sample_size = non_negative_int(config, "key_sample_size", MODEL)
        if key_sample_size and degree_mask == "adjacency":
            raise ValueError(
                "MGFormer: key_sample_size applies to degree_mask sin or none; the adjacency mask is "
                "already sparse (set key_sample_size: 0)"
            )
        n_heads = positive_int(config, "n_heads", MODEL)
        width = embedding_size + structural_size
        if width % n_heads:
            raise ValueError(f"MGFormer: n_heads={n_heads} must divide the token width {width}")
        n_layers = positive_int(config, "n_layers", MODEL)
        n_features = positive_int(config, "n_features", MODEL, optional=True)
        features_width = n_heads * (n_features or width // n_heads)
        precision = choice(config, "precision", PRECISIONS, MODEL)
        redraw_interval = config["feature_redraw_interval"]
        fields.update(
            embedding_size=embedding_size,
            structural_encoding=structural_encoding,
            structural_size=structural_size,
            structural_scale=positive_float(config, "structural_scale", MODEL) if svd else None,
            svd_solver=choice(config, "svd_solver", SVD_SOLVERS, MODEL),
            attention=choice(config, "attention", (True, False), MODEL),
            degree_mask=degree_mask,
            score=choice(config, "score", ("dot", "cosine"), MODEL),
            qk_init=choice(config, "qk_init", ("xavier", "identity"), MODEL),
            n_layers=n_layers,
            n_heads=n_heads,
            n_features=n_features,
            focusing_factor=positive_float(config, "focusing_factor", MODEL),
            attention_weight=non_negative_float(config, "attention_weight", MODEL),
            layer_norm=choice(config, "layer_norm", (False, True), MODEL),
            uniformity_weight=non_negative_float(config, "uniformity_weight", MODEL),
            loss=choice(config, "loss", LOSSES, MODEL),
            softmax_temperature=positive_float(config, "softmax_temperature", MODEL),
            feature_redraw_interval=(
                0 if redraw_interval is None else non_negative_int(config, "feature_redraw_interval", MODEL)
            ),
            key_sample_size=key_sample_size,
            max_exact_degree=positive_int(config, "max_exact_degree", MODEL),
            degree_embedding_size=positive_int(config, "degree_embedding_size", MODEL),
            seed=non_negative_int(config, "seed", MODEL),
            compile=compile_choice(config["compile"], n_nodes),
            precision=precision,
            matmul_dtype=resolve_precision(precision, config["device"]),
            # all n keys: evaluation attends to every node, with or without a training key sample
            key_chunk_size=block_size(
                config,
                "key_chunk_size",
                MODEL,
                n_nodes,
                chunk_bytes_per_row(width, features_width, degree_mask == "sin"),
                CPU_KEY_CHUNK_SIZE,
                zero_means="the unfused autograd form",
            ),
            uniformity_block_rows=uniformity_block_rows(config, MODEL),
            # keys (n, w) and features (n, h m) of every layer, in fp32
            keep_key_features=key_features_kept(
                choice(config, "key_features", ("recompute", "keep", "auto"), MODEL),
                4 * n_layers * n_nodes * (width + features_width),
            ),
        )
        return cls(**fields)
