"""Tests of recbole_mgformer/config/defaults.py: where the YAML defaults are found, and reading a model's."""

from recbole_mgformer.config.defaults import model_config_file, model_defaults
from recbole_mgformer.safety.settings import load_yaml


def test_a_models_defaults_are_its_yaml():
    with open(model_config_file("MGFormer")) as file:
        assert model_defaults("MGFormer") == load_yaml(file)
    assert model_defaults("MGFormer")["filter_residual_weight"] == 1.0


def test_a_model_without_a_yaml_has_no_defaults():
    assert model_config_file("BPR") is None
    assert model_defaults("BPR") == {}


def test_changing_the_returned_defaults_leaves_the_next_read_as_the_file():
    # the file is read once a process; each caller gets its own copy, nested settings included
    first = model_defaults("MGFormer")
    first["filter_residual_weight"] = 7.0
    first["filter_residual_settings"]["T_s"] = 9
    again = model_defaults("MGFormer")
    assert again["filter_residual_weight"] == 1.0
    assert again["filter_residual_settings"] == {}
