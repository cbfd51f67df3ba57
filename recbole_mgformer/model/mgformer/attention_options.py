"""MGFormer's attention beyond the paper, each an option whose default is the paper's form:
a query temperature, a value projection ``W_V``, a per-node degree gate on the residual and a learned residual
scale. They wrap the attention layer from outside, so the layer's own (fast) internals stay as they are.

Shapes: ``n`` nodes, ``b`` query nodes, ``w`` token width, ``h`` heads of size ``k = w / h``.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn.utils import parametrize

from recbole_mgformer.model.mgformer.feature_maps import FEATURE_MAPS, RANDOM_FEATURE_MAPS
from recbole_mgformer.model.options import choice, non_negative_int, positive_float

RESIDUAL_SCALES = ("fixed", "learned")


class QueryTemperature(nn.Module):
    """``W_Q / tau`` as a parametrization of the query weight: queries ``q / tau``, so the random feature maps
    estimate the kernel ``exp(q^T k / (tau sqrt(k)))`` (tau < 1 sharpens the attention). Scaling the queries
    alone gives the same kernel as ``phi(x / sqrt(tau))`` on both sides; the per-query factor ``exp(-|q|^2/2)`` it
    changes cancels in the ratio of Eq. (8). ``learned``: ``log tau`` is a parameter, else a fixed buffer."""

    def __init__(self, temperature, learned):
        super().__init__()
        log_temperature = torch.tensor(math.log(temperature))
        if learned:
            self.log_temperature = nn.Parameter(log_temperature)
        else:
            self.register_buffer("log_temperature", log_temperature)

    @property
    def temperature(self):
        return self.log_temperature.exp()

    def forward(self, weight):
        return weight * torch.exp(-self.log_temperature)


def set_query_temperature(layer, temperature, learned):
    """Give an attention layer's ``query`` linear the temperature of :class:`QueryTemperature`, after its
    weight is initialised (``nn.init`` on a parametrized weight would write the computed tensor)."""
    parametrize.register_parametrization(layer.query, "weight", QueryTemperature(temperature, learned))


def query_temperature(layer):
    """The layer's temperature, or None where it has none."""
    if not parametrize.is_parametrized(layer.query, "weight"):
        return None
    return layer.query.parametrizations.weight[0].temperature


def degree_gate(log_degree, slope, bias):
    """``g = sigmoid(a log(1 + deg) + b)`` per node: log_degree (n,) = ``log(1 + deg)``, slope ``a`` and bias ``b``
    scalars -> (n,) in (0, 1). A negative slope lets cold nodes lean on the attention, warm ones on their token."""
    return torch.sigmoid(slope * log_degree + bias)


def project_values(mixed, value_weight):
    """``Attn(X) W_V`` per head, W_V block-diagonal (h, k, k): mixed (b, w) -> (b, w).

    The attention's weights sum to one per query, so ``Attn(X W_V) = Attn(X) W_V`` head by head: the value
    projection applies after the attention, and the fused key side keeps ``V = X``."""
    heads, head_size = value_weight.shape[0], value_weight.shape[-1]
    per_head = mixed.view(mixed.shape[0], heads, head_size)
    return torch.einsum("bhk,hkv->bhv", per_head, value_weight).reshape(mixed.shape)


class AttentionBlock(nn.Module):
    """``h = norm(x + s * g * Attn(X) W_V)`` around an attention layer built with ``residual=False`` and
    ``layer_norm=False`` (which then returns ``Attn(X)`` alone).

    ``s``: the residual scale, fixed at ``attention_weight`` or a learned scalar initialised there; ``g``: the
    degree gate of :func:`degree_gate` (``log_degree`` (n,) given) or 1; ``W_V`` per head, initialised to the
    identity, or none. Same call as the layer: learned, fixed, z, query_index, edges, key_index -> (b, w).
    """

    def __init__(
        self,
        attention,
        width,
        n_heads,
        residual=True,
        attention_weight=1.0,
        residual_scale="fixed",
        value_projection=False,
        log_degree=None,
        layer_norm=False,
    ):
        super().__init__()
        if residual_scale not in RESIDUAL_SCALES:
            raise ValueError(f"unknown residual_scale {residual_scale!r}; choose one of {', '.join(RESIDUAL_SCALES)}")
        if not residual and (residual_scale == "learned" or log_degree is not None):
            raise ValueError(
                "MGFormer: residual_scale: learned and degree_gate: True weigh the attention against "
                "the residual branch; set residual: True (or leave them at fixed and False)"
            )
        self.attention, self.residual = attention, residual
        scale = torch.tensor(float(attention_weight))
        if residual_scale == "learned":
            self.residual_scale = nn.Parameter(scale)
        else:
            self.register_buffer("residual_scale", scale, persistent=False)
        head_size = width // n_heads
        self.value_weight = nn.Parameter(torch.eye(head_size).repeat(n_heads, 1, 1)) if value_projection else None
        if log_degree is not None:
            self.register_buffer("log_degree", log_degree, persistent=False)  # from the data, not saved
            self.gate_slope, self.gate_bias = nn.Parameter(torch.zeros(())), nn.Parameter(torch.zeros(()))
        else:
            self.log_degree = None
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()

    def gate(self, query_index=None):
        """g for the queries (b,) or all nodes, or None without a degree gate."""
        if self.log_degree is None:
            return None
        log_degree = self.log_degree if query_index is None else self.log_degree[query_index]
        return degree_gate(log_degree, self.gate_slope, self.gate_bias)

    def reset_qk(self, temperature=None, learn_temperature=False):
        self.attention.reset_qk(temperature, learn_temperature)

    def redraw_features(self, generator):
        self.attention.redraw_features(generator)

    def forward(self, learned, fixed=None, z=None, query_index=None, edges=None, key_index=None):
        mixed = self.attention(learned, fixed, z, query_index, edges, key_index)
        if self.value_weight is not None:
            mixed = project_values(mixed, self.value_weight.to(mixed.dtype))
        if not self.residual:
            return self.norm(mixed)
        rows = learned if query_index is None else learned[query_index]
        if fixed is not None:
            rows = torch.cat([rows, fixed if query_index is None else fixed[query_index]], dim=1)
        weight = self.residual_scale
        gate = self.gate(query_index)
        if gate is not None:
            weight = weight * gate.unsqueeze(-1)
        return self.norm(rows + weight * mixed)


@dataclass(frozen=True)
class AttentionOptions:
    """The attention's options, read from a config once (:meth:`read`) and checked, alone and together: bad values
    fail with the key and the fix. ``token_propagation``: K of the LightGCN smoothing before the attention (0:
    none); ``temperature`` and ``learn_temperature``: :class:`QueryTemperature`; ``value_projection``,
    ``degree_gate``, ``residual_scale`` and ``residual``: :class:`AttentionBlock`."""

    feature_map: str
    token_propagation: int
    temperature: float
    learn_temperature: bool
    value_projection: bool
    degree_gate: bool
    residual_scale: str
    residual: bool

    @staticmethod
    def read(config, model="MGFormer"):
        """``{field: value}`` of this class's fields from ``config``, each checked (a subclass adds its own)."""
        return {
            "feature_map": choice(config, "feature_map", FEATURE_MAPS, model),
            "token_propagation": non_negative_int(config, "token_propagation", model),
            "temperature": positive_float(config, "attention_temperature", model),
            "learn_temperature": choice(config, "learn_temperature", (False, True), model),
            "value_projection": choice(config, "value_projection", (False, True), model),
            "degree_gate": choice(config, "degree_gate", (False, True), model),
            "residual_scale": choice(config, "residual_scale", RESIDUAL_SCALES, model),
            "residual": choice(config, "residual", (True, False), model),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**AttentionOptions.read(config))

    def __post_init__(self):
        if self.has_temperature and self.feature_map not in RANDOM_FEATURE_MAPS:
            raise ValueError(
                f"MGFormer: attention_temperature and learn_temperature apply to the random feature maps "
                f"({', '.join(RANDOM_FEATURE_MAPS)}); feature_map {self.feature_map} has no temperature "
                "(relu and focused ignore a scale of the queries): leave attention_temperature: 1.0 "
                "and learn_temperature: False, or pick a random feature map"
            )
        if not self.residual and (self.residual_scale == "learned" or self.degree_gate):
            raise ValueError(
                "MGFormer: residual_scale: learned and degree_gate: True weigh the attention against the "
                "residual branch; set residual: True (or residual_scale: fixed, degree_gate: False)"
            )

    @property
    def has_temperature(self):
        return self.temperature != 1.0 or self.learn_temperature

    @property
    def needs_block(self):
        """Whether the layers need an :class:`AttentionBlock` around them (the temperature does not)."""
        return self.value_projection or self.degree_gate or self.residual_scale == "learned"
