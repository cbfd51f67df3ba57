"""Unknown keys, non-finite numbers and a missing GPU are stopped when the config is built."""

import glob
import logging
import re
from pathlib import Path

import pytest
import torch
from recbole.utils import ModelType

from recbole_mgformer import cli, run_recommender
from recbole_mgformer import tune as tuning
from recbole_mgformer.benchmark import main as benchmark_main
from recbole_mgformer.benchmark.entries import stem_model
from recbole_mgformer.config_check import ConfigKeyError
from recbole_mgformer.defaults import properties_dir
from recbole_mgformer.quick_start import build_config
from recbole_mgformer.registry import available_models, get_model
from recbole_mgformer.tune import space as tuning_space

ROOT = Path(__file__).resolve().parents[1]
# A model's type picks the dataset config that holds its protocol (properties/dataset/).
PROTOCOL_DATASETS = {ModelType.SEQUENTIAL: "ml-100k-seq", ModelType.CONTEXT: "ml-100k-ctx-0.8"}


def test_a_misspelled_key_is_an_error_with_a_close_match():
    with pytest.raises(
        ConfigKeyError,
        match=r"unknown config key 'embeding_size' \(from --embeding_size.*did you "
        r"mean embedding_size.*extra_config_keys",
    ):
        build_config("MGFormer", "ml-100k", config_dict={"embeding_size": 32})


def test_run_py_rejects_a_misspelled_key_before_training(capsys):
    with pytest.raises(SystemExit) as stop:  # the message, exit status 2, no traceback
        cli.main(["--model=MGFormer", "--dataset=ml-100k", "--embeding_size=32"])
    assert stop.value.code == 2 and "did you mean embedding_size" in capsys.readouterr().err


def test_an_unknown_key_in_a_config_file_names_the_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("learning_rat: 0.01\n")
    with pytest.raises(
        ConfigKeyError, match=rf"'learning_rat' \(from config file {path}\): did you mean learning_rate"
    ):
        run_recommender("BPR", "ml-100k", config_file_list=[str(path)])


def test_a_key_of_another_model_is_unknown_to_this_one():
    with pytest.raises(ConfigKeyError, match="'uniformity_weight'"):
        build_config("BPR", "ml-100k", config_dict={"uniformity_weight": 0.5})


def test_extra_config_keys_lets_a_users_own_key_through(tmp_path):
    config, _ = build_config("BPR", "ml-100k", config_dict={"extra_config_keys": ["my_key"], "my_key": 3})
    assert config["my_key"] == 3
    path = tmp_path / "mine.yaml"
    path.write_text("extra_config_keys: [my_key]\nmy_key: 4\n")
    assert build_config("BPR", "ml-100k", [str(path)])[0]["my_key"] == 4
    with pytest.raises(ConfigKeyError, match="extra_config_keys must be a list of key names"):
        build_config("BPR", "ml-100k", config_dict={"extra_config_keys": 3})


def test_keys_recbole_reads_without_a_yaml_default_are_known():
    config, _ = build_config("BPR", "ml-100k", config_dict={"encoding": "latin-1", "nproc": 1})
    assert config["encoding"] == "latin-1"


def _shipped_runs():
    """(model, dataset, config files) of every model of the runner with its type's protocol, and of every
    configuration file this project ships, with the models it is meant for."""
    runs = []
    for name in available_models():
        runs.append((name, PROTOCOL_DATASETS.get(get_model(name).type, "ml-100k"), []))
    for dataset in ("amazon-beauty", "amazon-beauty-loo"):
        runs += [(m, dataset, []) for m in ("MGFormer", "SimGCL", "XSimGCL", "DirectAU", "BPR", "LightGCN", "SGL")]
    for path in map(Path, glob.glob(str(properties_dir() / "benchmark/*/*.yaml"))):  # <model or variant slug>.yaml
        runs.append((get_model(stem_model(path.stem)).__name__, path.parent.name, [str(path)]))
    for dataset in ("ml-100k-seq", "amazon-beauty-seq"):
        runs += [(m, dataset, []) for m in ("EAGPS", "SASRec", "GRU4Rec")]
    for path in sorted(glob.glob(str(properties_dir() / "dataset/ml-100k-ctx-*.yaml"))):
        runs += [(m, Path(path).stem, []) for m in ("CSA", "LR", "FM", "DeepFM", "AutoInt")]
    for path in sorted(glob.glob(str(ROOT / "results/tuning/**/*.yaml"), recursive=True)):
        path = Path(path)
        if path.parent.parent == ROOT / "results/tuning":  # the benchmark's <dataset>/<model or variant slug>.yaml
            model, dataset = get_model(stem_model(path.stem)).__name__, path.parent.name
        else:  # the tuning command's <Model>-<dataset>.yaml
            model, dataset = path.stem.split("-", 1)
        runs.append((model, dataset, [str(path)]))
    return runs


def test_every_model_and_every_shipped_config_passes_the_key_check():
    runs = _shipped_runs()
    assert len(runs) > 100 and {"MGFormer", "EAGPS", "CSA", "SASRec", "LightGCN", "SGL"} <= {r[0] for r in runs}
    for model, dataset, files in runs:
        build_config(model, dataset, files)  # raises on an unknown key


@pytest.mark.parametrize(
    "space",
    sorted(glob.glob(str(properties_dir() / "hyper/*.yaml")) + glob.glob(str(properties_dir() / "hyper/*/*.yaml"))),
)
def test_every_shipped_search_space_passes_the_key_check(space):  # the common ones, and datasets' own
    model = Path(space).stem
    config, _ = build_config(model, PROTOCOL_DATASETS.get(get_model(model).type, "ml-100k"))
    raw, source = tuning_space.load_space(space, model)
    tuning_space.check_keys(tuning_space.parse_space(raw, source), config, model, source)


def test_the_tuning_command_rejects_a_misspelled_fixed_setting(tiny_data, tmp_path):
    with pytest.raises(tuning.TuneSetupError, match="unknown config key 'learning_rat'.*did you mean learning_rate"):
        tuning.make_request(
            "BPR",
            "tiny",
            {"embedding_size": {"choice": [8]}},
            config_dict={"learning_rat": 0.1},
            data_path=str(tiny_data),
            storage_dir=tmp_path / "tune",
        )


@pytest.mark.parametrize("setting", [{"save_dataset": True}, {"dataset_save_path": "bundle/ml-100k-Dataset.pth"}])
def test_the_tuning_command_refuses_recboles_pickle_settings_before_any_trial(tiny_data, tmp_path, setting):
    (key,) = setting
    with pytest.raises(tuning.TuneSetupError, match=rf"{key}=.*loading a pickle runs whatever code it holds"):
        tuning.make_request(
            "BPR",
            "tiny",
            {"embedding_size": {"choice": [8]}},
            config_dict=setting,
            data_path=str(tiny_data),
            storage_dir=tmp_path / "tune",
        )


def test_a_search_space_may_use_extra_config_keys(tiny_data, tmp_path):
    request = tuning.make_request(
        "BPR",
        "tiny",
        {"my_key": {"choice": [1, 2]}},
        config_dict={"extra_config_keys": ["my_key"]},
        data_path=str(tiny_data),
        storage_dir=tmp_path / "tune",
    )
    assert request["space"] == {"my_key": {"choice": [1, 2]}}


def test_the_benchmark_rejects_a_misspelled_key_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:  # the command's usage error, with the key check's message
        benchmark_main(
            [
                "--models",
                "BPR,LightGCN[n_layer=2]",
                "--datasets",
                "ml-100k",
                "--seeds",
                "0",
                "--results",
                str(tmp_path),
                "--data_path",
                str(tmp_path),
            ]
        )
    error = capsys.readouterr().err
    assert stopped.value.code == 2
    assert "unknown config key 'n_layer'" in error and "did you mean n_layers" in error
    assert not (tmp_path / "runs").exists()  # BPR, first in line, did not run


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "nan", "-inf"])
def test_non_finite_numbers_are_rejected_with_their_key(value):
    with pytest.raises(ValueError, match=r"uniformity_weight is .*not a finite number"):
        build_config("MGFormer", "ml-100k", config_dict={"uniformity_weight": value})


def test_non_finite_numbers_inside_a_setting_are_found():
    with pytest.raises(ValueError, match=r"eval_args\['split'\]\['RS'\]\[1\]"):
        build_config("BPR", "ml-100k", config_dict={"eval_args": {"split": {"RS": [0.8, float("nan"), 0.1]}}})


def test_run_py_rejects_nan_before_training(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--model=MGFormer", "--dataset=ml-100k", "--uniformity_weight=nan"])
    assert stop.value.code == 2 and "uniformity_weight is 'nan'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "setting",
    [
        {"epochs": 0},
        {"epochs": -1},
        {"embedding_size": 0},
        {"train_batch_size": -64},
        {"eval_batch_size": 0},
        {"stopping_step": 0},
        {"epochs": 2.5},
        {"epochs": True},
    ],
)
def test_impossible_counts_and_sizes_are_rejected_with_their_key(setting):
    # --epochs=0 "trained" and reported the untrained model's metrics; embedding_size=0 trained a zero-width model
    ((key, value),) = setting.items()
    with pytest.raises(
        ValueError,
        match=rf"{key} is {re.escape(repr(value))}: it must be a whole number of at "
        rf"least 1 \(e.g. --{key}=10",
    ):
        build_config("MGFormer", "ml-100k", config_dict=setting)


@pytest.mark.parametrize("value", [0, -0.001])
def test_a_learning_rate_of_zero_or_below_is_rejected(value):
    with pytest.raises(ValueError, match=rf"learning_rate is {value!r}: it must be a number above 0"):
        build_config("BPR", "ml-100k", config_dict={"learning_rate": value})


def test_run_py_rejects_zero_epochs_before_training(capsys):
    with pytest.raises(SystemExit) as stop:  # the message, exit status 2, no traceback
        cli.main(["--model=BPR", "--dataset=ml-100k", "--epochs=0"])
    assert stop.value.code == 2 and "epochs is 0" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_device_cuda_without_a_gpu_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"device: cuda asks for a GPU, but torch.cuda.is_available\(\) is False.*"
        r"--device=cpu",
    ):
        build_config("BPR", "ml-100k", config_dict={"device": "cuda"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_use_gpu_without_a_gpu_warns_and_logs_the_cpu(caplog):
    with caplog.at_level(logging.WARNING):
        config, _ = build_config("BPR", "ml-100k", config_dict={"use_gpu": True})
    assert "use_gpu: True, but torch.cuda.is_available() is False" in caplog.text
    assert "training on device: cpu" in caplog.text
    assert config["device"].type == "cpu" and config["use_gpu"] is False
    logged = re.sub(r"\x1b\[[0-9;]*m", "", str(config))  # the config as RecBole logs it, without colours
    assert "use_gpu = False" in logged and "device = cpu" in logged


def test_device_cpu_is_honoured_where_a_gpu_is_visible(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # RecBole would then pick cuda
    assert build_config("BPR", "ml-100k")[0]["device"].type == "cuda"
    config, _ = build_config("BPR", "ml-100k", config_dict={"device": "cpu"})
    assert config["device"].type == "cpu" and config["use_gpu"] is False


def test_a_device_that_is_no_device_is_rejected():
    with pytest.raises(ValueError, match="device 'gpu0' is not a device"):
        build_config("BPR", "ml-100k", config_dict={"device": "gpu0"})
