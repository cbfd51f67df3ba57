"""A weights-only checkpoint back to the Config, data and model that wrote it."""

import pytest
import torch
from conftest import TINY_CONFIG, write_payload

from recbole_mgformer import run_recommender
from recbole_mgformer.integration.checkpoints import config_from_checkpoint, load_data_and_model
from recbole_mgformer.training.checkpoint_files import plain_value


def test_the_rebuilt_config_equals_the_recorded_one(tiny_setup):
    config, *_ = tiny_setup("MGFormer", uniformity_weight=0.7, topk=[3, 7], valid_metric="NDCG@7")
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
    from recbole_mgformer.integration.registry import get_trainer

    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    assert trainer.evaluate(test, load_best_model=False) == pytest.approx(result["test_result"])
    assert dataset.inter_num == train.dataset.inter_num + valid.dataset.inter_num + test.dataset.inter_num
    assert torch.equal(
        model.user_embedding.weight, torch.load(checkpoint, weights_only=True)["state_dict"]["user_embedding.weight"]
    )


@pytest.fixture
def bpr_checkpoint(tiny_data, tmp_path):
    settings = {**TINY_CONFIG, "epochs": 1, "data_path": str(tiny_data), "checkpoint_dir": str(tmp_path / "saved")}
    run_recommender("BPR", "tiny", config_dict=settings)
    (checkpoint,) = (tmp_path / "saved").glob("BPR-*.pth")
    return checkpoint


def test_a_checkpoint_whose_config_names_another_model_is_refused(bpr_checkpoint, tmp_path):
    # BPR's parameters have LightGCN's names and shapes: the old code loaded them into LightGCN silently.
    state = torch.load(bpr_checkpoint, weights_only=True)
    state["config"]["model"] = "LightGCN"
    edited = tmp_path / "edited.pth"
    torch.save(state, edited)
    with pytest.raises(ValueError, match="holds the weights of a BPR model, but its config names LightGCN"):
        load_data_and_model(str(edited), log=False)


def test_weights_of_other_names_or_shapes_are_refused_with_the_difference(bpr_checkpoint, tmp_path):
    state = torch.load(bpr_checkpoint, weights_only=True)
    for key in ("model_class", "vocabulary"):  # as an old checkpoint: names and shapes decide
        del state[key]
    state["state_dict"]["item_embedding.weight"] = state["state_dict"]["item_embedding.weight"][:, :4]
    state["state_dict"]["bias"] = torch.zeros(1)
    edited = tmp_path / "edited.pth"
    torch.save(state, edited)
    with (
        pytest.warns(UserWarning, match="no user and item vocabularies"),
        pytest.raises(
            ValueError,
            match=r"does not hold BPR's parameters \(unexpected bias; other shapes: item_embedding.weight "
            r"\(\d+, 4\) there, \(\d+, 8\) here\)",
        ),
    ):
        load_data_and_model(str(edited), log=False)


def test_resuming_another_models_weights_is_refused(bpr_checkpoint, tiny_setup):
    state = torch.load(bpr_checkpoint, weights_only=True)
    _, _, trainer, _ = tiny_setup("BPR", epochs=1)
    state["model_class"] = "LightGCN"
    with pytest.raises(ValueError, match="holds the weights of a LightGCN model, not of BPR"):
        trainer._load_model_state(state, "edited.pth")


def test_checkpoints_keep_vocabularies_and_model_class_as_plain_values(bpr_checkpoint):
    state = torch.load(bpr_checkpoint, weights_only=True)
    vocabulary = state["vocabulary"]
    assert state["model_class"] == "BPR" and vocabulary["users"][:3] == ["[PAD]", "u0", "u1"]
    assert all(isinstance(token, str) for token in vocabulary["users"] + vocabulary["items"])
    assert vocabulary["train"]["interactions"] > 0 and len(vocabulary["train"]["sha256"]) == 64


def trained_checkpoint(tiny_data, tmp_path, **recorded):
    """A BPR checkpoint of one epoch, whose recorded config then also holds ``recorded``: what a received file can
    carry (it still loads with ``torch.load(weights_only=True)``)."""
    settings = {**TINY_CONFIG, "epochs": 1, "data_path": str(tiny_data), "checkpoint_dir": str(tmp_path / "saved")}
    run_recommender("BPR", "tiny", config_dict=settings)
    (checkpoint,) = (tmp_path / "saved").glob("BPR-*.pth")
    state = torch.load(checkpoint, weights_only=True)
    state["config"].update(recorded)
    torch.save(state, checkpoint)
    return checkpoint


@pytest.mark.parametrize("key", ["dataset_save_path", "dataloaders_save_path"])
def test_a_checkpoints_recorded_pickle_path_is_dropped_never_unpickled(tiny_data, tmp_path, caplog, key):
    marker = tmp_path / "pwned"
    payload = write_payload(tmp_path / "bundle" / "data.pth", marker)
    checkpoint = trained_checkpoint(tiny_data, tmp_path, **{key: str(payload), "save_dataset": True})
    config, model, dataset, *_ = load_data_and_model(str(checkpoint), log=False)
    assert not marker.exists()
    assert config[key] is None and not config["save_dataset"]
    assert f"{checkpoint}: ignored the recorded {key}=" in caplog.text and "save_dataset=True" in caplog.text
    assert dataset.inter_num > 0 and model.user_embedding.weight.shape[0] == dataset.user_num


def test_a_pickle_at_the_default_dataset_path_beside_a_checkpoint_is_never_opened(tiny_data, tmp_path):
    """RecBole loads ``<checkpoint_dir>/<dataset>-<DatasetClass>.pth`` whenever it exists; a model bundle can ship
    one."""
    from recbole_mgformer.recommend import recommend

    marker = tmp_path / "pwned"
    checkpoint = trained_checkpoint(tiny_data, tmp_path)
    write_payload(tmp_path / "saved" / "tiny-Dataset.pth", marker)
    write_payload(tmp_path / "saved" / "tiny-for-BPR-dataloader.pth", marker)
    assert len(recommend(str(checkpoint), ["u1"], k=3)["u1"]) == 3
    assert not marker.exists()


def test_a_pickle_path_the_user_passes_on_loading_is_refused(tiny_data, tmp_path):
    from recbole_mgformer.safety import UnsafeSettingError

    marker = tmp_path / "pwned"
    payload = write_payload(tmp_path / "data.pth", marker)
    checkpoint = trained_checkpoint(tiny_data, tmp_path)
    with pytest.raises(UnsafeSettingError, match="dataset_save_path=.*Remove dataset_save_path"):
        load_data_and_model(str(checkpoint), {"dataset_save_path": str(payload)}, log=False)
    assert not marker.exists()
