import dataclasses

import pytest
import torch
import yaml

from recbole_mgformer.config.defaults import model_config_file
from recbole_mgformer.model.mgformer.options import (
    COMPILE_MIN_NODES,
    CPU_KEY_CHUNK_SIZE,
    KEEP_KEY_FEATURES_MAX_BYTES,
    MGFormerOptions,
    compile_choice,
    key_features_kept,
)


def config(**overrides):
    """MGFormer's YAML defaults with what RecBole adds (device, seed, batch), then ``overrides``."""
    with open(model_config_file("MGFormer")) as file:
        values = yaml.safe_load(file)
    return {**values, "device": "cpu", "seed": 2020, **overrides}


def test_the_defaults_parse_to_the_papers_model_with_auto_resolved_for_a_cpu():
    options = MGFormerOptions.from_config(config(precision="fp32"), n_nodes=500)
    assert options.width == 2 * 64 and options.structural_size == 64 and options.features_width == 128
    assert options.feature_map == "simrf" and options.degree_mask == "sin" and options.n_layers == 1
    assert options.compile is False and options.key_chunk_size == CPU_KEY_CHUNK_SIZE
    assert options.keep_key_features is True and options.matmul_dtype == torch.float32
    assert options.focusing_factor == 3.0 and isinstance(options.focusing_factor, float)
    assert not options.needs_block and not options.has_temperature
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.n_layers = 2


def test_without_structural_encodings_the_token_is_the_embedding_and_svd_options_are_not_read():
    options = MGFormerOptions.from_config(config(structural_encoding="none", structural_size=-3), n_nodes=500)
    assert options.width == 64 and options.structural_size == 0 and options.structural_scale is None


def test_compile_auto_compiles_large_graphs_only():
    assert compile_choice("auto", COMPILE_MIN_NODES) is True
    assert compile_choice("auto", COMPILE_MIN_NODES - 1) is False
    assert compile_choice(True, 10) is True and compile_choice(False, 10**6) is False
    assert MGFormerOptions.from_config(config(), n_nodes=COMPILE_MIN_NODES).compile is True


def test_key_features_auto_keeps_them_while_they_are_small():
    assert key_features_kept("auto", KEEP_KEY_FEATURES_MAX_BYTES) is True
    assert key_features_kept("auto", KEEP_KEY_FEATURES_MAX_BYTES + 1) is False
    assert key_features_kept("keep", 10**12) is True and key_features_kept("recompute", 1) is False


@pytest.mark.parametrize(
    "overrides, message",
    [
        # read with float() / bool() before: these were taken silently
        ({"focusing_factor": 0}, "focusing_factor must be a number > 0, got 0"),
        ({"focusing_factor": "3"}, "focusing_factor must be a number > 0, got '3'"),
        ({"attention_weight": -0.5}, "attention_weight must be a number >= 0"),
        ({"uniformity_weight": "0.3"}, "uniformity_weight must be a number >= 0, got '0.3'"),
        ({"residual": "no"}, "unknown residual 'no'; choose one of True, False"),
        ({"layer_norm": 1}, "unknown layer_norm 1; choose one of False, True"),
        ({"feature_redraw_interval": -1}, "feature_redraw_interval must be a non-negative integer"),
        ({"feature_redraw_interval": 2.5}, "feature_redraw_interval must be a non-negative integer"),
        ({"seed": "x"}, "seed must be a non-negative integer"),
        # checked before any SVD is taken
        ({"n_heads": 3}, "n_heads=3 must divide the token width 128"),
        ({"attention_temperature": 0.5, "feature_map": "relu"}, "attention_temperature and learn_temperature apply"),
        ({"residual": False, "degree_gate": True}, "set residual: True"),
    ],
)
def test_each_option_is_checked_with_its_key_and_the_fix(overrides, message):
    with pytest.raises(ValueError, match=message) as error:
        MGFormerOptions.from_config(config(**overrides), n_nodes=500)
    assert str(error.value).startswith("MGFormer: ")


def test_a_missing_redraw_interval_means_drawn_once():
    assert MGFormerOptions.from_config(config(feature_redraw_interval=None), n_nodes=500).feature_redraw_interval == 0
