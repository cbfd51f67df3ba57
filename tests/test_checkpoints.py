"""A weights-only checkpoint back to the Config, data and model that wrote it."""

import pytest
import torch

from recbole_mgformer import run_recommender
from recbole_mgformer.checkpoints import config_from_checkpoint, load_data_and_model
from recbole_mgformer.trainer import plain_value
from conftest import TINY_CONFIG


def test_the_rebuilt_config_equals_the_recorded_one(tiny_setup):
    config, *_ = tiny_setup("MGFormer", uniformity_weight=0.7, topk=[3, 7])
    recorded = plain_value(config.final_config_dict)
    rebuilt = config_from_checkpoint(recorded)
    assert plain_value(rebuilt.final_config_dict) == recorded
    assert rebuilt["MODEL_TYPE"] == config["MODEL_TYPE"] and rebuilt["device"] == config["device"]


def test_recorded_strings_are_data_never_evaluated(tiny_setup):
    config, *_ = tiny_setup("MGFormer")
    recorded = {**plain_value(config.final_config_dict), "note": "__import__('os').getpid()", "flag": "[1, 2]"}
    rebuilt = config_from_checkpoint(recorded)
    assert rebuilt["note"] == "__import__('os').getpid()" and rebuilt["flag"] == "[1, 2]"


def test_a_config_that_is_not_a_recorded_dict_is_refused():
    with pytest.raises(ValueError, match="'model' and 'dataset'"):
        config_from_checkpoint({"epochs": 3})


def test_the_runner_checkpoint_reloads_with_its_test_result(tiny_data, tmp_path):
    settings = {**TINY_CONFIG, "data_path": str(tiny_data), "checkpoint_dir": str(tmp_path / "saved")}
    result = run_recommender("SimGCL", "tiny", config_dict=settings)
    (checkpoint,) = (tmp_path / "saved").glob("SimGCL-*.pth")
    config, model, dataset, train, valid, test = load_data_and_model(str(checkpoint), log=False)
    from recbole_mgformer.registry import get_trainer

    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    assert trainer.evaluate(test, load_best_model=False) == pytest.approx(result["test_result"])
    assert dataset.inter_num == train.dataset.inter_num + valid.dataset.inter_num + test.dataset.inter_num
    assert torch.equal(model.user_embedding.weight,
                       torch.load(checkpoint, weights_only=True)["state_dict"]["user_embedding.weight"])
