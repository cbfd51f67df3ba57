"""Unknown keys, non-finite numbers and a missing GPU are stopped when the config is built."""

import glob
import importlib.util
import logging
import re
from pathlib import Path

import pytest
import torch
from recbole.utils import InputType, ModelType

from recbole_mgformer import cli, run_recommender
from recbole_mgformer import tune as tuning
from recbole_mgformer.benchmark import main as benchmark_main
from recbole_mgformer.benchmark.entries import stem_model
from recbole_mgformer.config.config_check import BOUNDS, ConfigKeyError
from recbole_mgformer.config.defaults import properties_dir
from recbole_mgformer.integration.registry import available_models, get_model
from recbole_mgformer.quick_start import build_config
from recbole_mgformer.tune import space as tuning_space

ROOT = Path(__file__).resolve().parents[2]
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
        # a pairwise sequential model (FPMC) trains on sampled negatives, which the sequential protocol leaves out
        pairwise = getattr(get_model(model), "input_type", None) == InputType.PAIRWISE
        build_config(
            model, dataset, files, {"train_neg_sample_args": {"distribution": "uniform"}} if pairwise else None
        )


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
        {"worker": -1},
        {"worker": 1.5},
        {"loss_decimal_place": -1},
    ],
)
def test_impossible_counts_and_sizes_are_rejected_with_their_key(setting):
    # --epochs=0 "trained" and reported the untrained model's metrics; embedding_size=0 trained a zero-width model
    ((key, value),) = setting.items()
    *_, allowed, example = BOUNDS[key]
    assert allowed.startswith("a whole number of at least")
    with pytest.raises(
        ValueError, match=re.escape(f"{key} is {value!r}: it must be {allowed} (e.g. --{key}={example}")
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


# ------------------------------------------------------------------------------------------------ impossible settings


def tiny_config(tiny_data, model="BPR", **settings):
    from conftest import TINY_CONFIG

    return build_config(model, "tiny", config_dict={**TINY_CONFIG, "data_path": str(tiny_data), **settings})[0]


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"valid_metric": "Recall@50", "topk": [20]},
            r"Recall@50 is not among .*topk \[20\].*add 50 to topk \(e\.g\. --topk=\[20,50\]\)",
        ),
        (
            {"valid_metric": "MRR@20"},
            r"valid_metric MRR@20 .*metrics \['Recall', 'NDCG'\]"
            r".*add MRR to metrics \(e\.g\. --metrics=\[Recall,NDCG,MRR\]\)",
        ),
        ({"valid_metric": "ndcg@5", "topk": [20]}, r"ndcg@5 is not among .*recall@20|Recall@20, NDCG@20"),
    ],
)
def test_a_validation_metric_the_run_does_not_compute_is_an_error_naming_both_settings(tiny_data, settings, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tiny_data, **settings)


def test_a_validation_metric_of_any_case_among_the_results_passes(tiny_data):
    assert tiny_config(tiny_data, valid_metric="recall@5")["valid_metric"] == "recall@5"


def test_run_py_rejects_a_validation_metric_it_does_not_compute_before_training(tiny_data, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(
            ["--model=BPR", "--dataset=tiny", f"--data_path={tiny_data}", "--topk=[20]", "--valid_metric=Recall@50"]
        )
    assert stop.value.code == 2 and "valid_metric Recall@50 is not among" in capsys.readouterr().err


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"valid_metric": "Recall"}, r"valid_metric is 'Recall': Recall is reported at a cut-off, so write Recall@K"),
        ({"valid_metric": "AUC@10"}, r"valid_metric is 'AUC@10': AUC is reported once"),
        ({"valid_metric": "Recal@10"}, r"valid_metric names 'Recal'"),
        ({"valid_metric": "Recall@020"}, r"valid_metric is 'Recall@020'"),
        ({"valid_metric": None}, r"valid_metric must be set"),
        ({"valid_metric": 20}, r"valid_metric takes the name of one of the run's metrics"),
        ({"metrics": []}, r"metrics takes a list of RecBole's metric names"),
        ({"metrics": ["Recall", "AUC"]}, r"metrics mixes ranking metrics \(Recall\) and value metrics \(AUC\)"),
        ({"topk": None}, r"topk must be set"),
        ({"topk": ((10,), 20)}, r"topk takes whole numbers above 0"),  # a tuple reads as a list: [[10], 20]
    ],
)
def test_evaluation_settings_of_a_shape_recbole_cannot_use_are_named(tiny_data, setting, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tiny_data, **setting)


def test_a_single_value_is_accepted_where_recbole_takes_one(tiny_data):
    """RecBole wraps a single metric or top-k in a list, and reads a config_dict string as a literal."""
    config = tiny_config(tiny_data, metrics="Recall", topk="20", valid_metric="Recall@20", seed="7")
    assert config["metrics"] == ["Recall"] and config["topk"] == [20] and config["seed"] == 7
    assert tiny_config(tiny_data, topk="[5, 20]")["topk"] == [5, 20]


def split(value, **more):
    return {"eval_args": {"split": value, "order": "RO", "group_by": "user", "mode": "full", **more}}


@pytest.mark.parametrize(
    "settings, message",
    [
        (split({"RS": [0, 0, 1]}), r"split RS \[0, 0, 1\] gives training no share"),
        (split({"RS": [0.8, 0, 0]}), r"split RS \[0.8, 0, 0\] leaves nothing to validate or test on"),
        (split({"RS": [0.8, -0.1, 0.3]}), r"split RS \[0.8, -0.1, 0.3\]: each share must be a number of at least 0"),
        (split({"RS": [0.8, 0.2]}), r"split RS takes three numbers \[train, valid, test\]"),
        (split({"RS": "0.8,0.1,0.1"}), r"split RS takes three numbers"),
        (split({"RS": [0.8, "0.1", 0.1]}), r"split RS takes three numbers"),
        (split({"LS": "valid"}), r"split LS takes one of valid_and_test, valid_only, test_only"),
        (split({"RS": [0.8, 0.1, 0.1], "LS": "valid_and_test"}), r"split takes one of"),
        (split({"XS": [0.8, 0.1, 0.1]}), r"split 'XS' is no RecBole split"),
        (split(None), r"split takes one of"),
        (split({"RS": [0.8, 0.1, 0.1]}, order="XO"), r"order takes RO \(at random\) or TO"),
        (split({"RS": [0.8, 0.1, 0.1]}, group_by="item"), r"group_by takes user or none"),
        (split({"RS": [0.8, 0.1, 0.1]}, mode="uni0"), r"mode 'uni0' is not one of full, labeled"),
        (
            split({"RS": [0.8, 0.1, 0.1]}, mode={"valid": "full", "tset": "full"}),
            r"mode takes .*the key 'tset'",
        ),
        ({"eval_args": {"spilt": {"RS": [0.8, 0.1, 0.1]}}}, r"has no setting 'spilt'"),
    ],
)
def test_a_split_recbole_cannot_make_is_named_before_any_data_is_read(tiny_data, settings, message):
    with pytest.raises(ValueError, match=rf"setting eval_args {message}"):
        tiny_config(tiny_data, **settings)


@pytest.mark.parametrize("seed", [1.5, -1, 2**32, "abc", True])
def test_a_seed_numpy_cannot_take_is_named(tiny_data, seed):
    with pytest.raises(ValueError, match=r"setting seed takes a whole number from 0 to 4294967295"):
        tiny_config(tiny_data, seed=seed)


@pytest.mark.parametrize("seed", [0, 2**32 - 1])
def test_seeds_at_the_ends_of_the_range_pass(tiny_data, seed):
    assert tiny_config(tiny_data, seed=seed)["seed"] == seed


def test_a_time_order_without_a_loaded_time_field_is_named(tiny_data):
    with pytest.raises(ValueError, match=r"orders interactions by time .*load_col does not load the TIME_FIELD"):
        tiny_config(tiny_data, **split({"RS": [0.8, 0.1, 0.1]}, order="TO"))
    with pytest.raises(ValueError, match=r"TIME_FIELD is not set"):
        tiny_config(tiny_data, TIME_FIELD=None, **split({"TS": [0.8, 0.1, 0.1]}))


def test_value_metrics_under_full_ranking_are_named_before_recbole_builds_its_config(tiny_data):
    with pytest.raises(ValueError, match=r"setting metrics \['AUC'\] are value metrics.*set eval_args mode: labeled"):
        tiny_config(tiny_data, metrics=["AUC"], valid_metric="AUC", **split({"RS": [0.8, 0.1, 0.1]}))


def test_what_recboles_config_refuses_becomes_a_message_naming_the_setting(tiny_data):
    """The mode may come from a dataset's YAML, past the check of the user's own settings: RecBole's refusal is
    then named."""
    from recbole.config import Config

    from recbole_mgformer.config.config_check import recbole_config_errors

    settings = {"data_path": str(tiny_data), "metrics": ["AUC"], "valid_metric": "AUC"}
    with pytest.raises(ValueError, match=r"setting metrics \['AUC'\] are value metrics .*eval_args mode: labeled"):
        with recbole_config_errors(settings):
            Config(model=get_model("BPR"), dataset="tiny", config_dict=settings)
    with pytest.raises(KeyError), recbole_config_errors(settings):  # not RecBole's: left as it is
        raise KeyError("mine")


# ------------------------------------------------------------------------------------------------ against the data


def built(tiny_data, model="BPR", **settings):
    from recbole_mgformer.safety import create_dataset

    config = tiny_config(tiny_data, model, **settings)
    return config, create_dataset(config)


def test_topk_above_the_item_count_is_an_error(tiny_data):
    from recbole_mgformer.config.config_check import check_against_dataset

    config, dataset = built(tiny_data, topk=[5, 61], valid_metric="NDCG@5")
    with pytest.raises(ValueError, match=r"topk \[5, 61\] goes above the 60 items of tiny .*at most 60"):
        check_against_dataset(config, dataset)
    check_against_dataset(*built(tiny_data, topk=[5, 60], valid_metric="NDCG@5"))


@pytest.mark.parametrize(
    "per_user, eval_split, message",
    [
        (2, {"RS": [0.8, 0.1, 0.1]}, r"leaves the valid set of tiny empty: its users have at most 2 interactions"),
        (1, {"RS": [0.8, 0.1, 0.1]}, r"leaves the valid set"),
        (2, {"LS": "valid_and_test"}, r"leaves the valid set"),
        (1, {"LS": "test_only"}, r"leaves the test set"),
    ],
)
def test_a_split_that_leaves_a_set_it_gives_a_share_empty_is_an_error(tmp_path, per_user, eval_split, message):
    from conftest import write_interactions

    from recbole_mgformer.config.config_check import check_against_dataset

    data = write_interactions(tmp_path / "few", per_user=per_user)
    with pytest.raises(ValueError, match=message):
        check_against_dataset(*built(data, **split(eval_split)))


@pytest.mark.parametrize("eval_split", [{"RS": [0.8, 0.1, 0.1]}, {"RS": [0.8, 0, 0.2]}, {"LS": "valid_and_test"}])
def test_the_split_sizes_are_recboles_own(tiny_data, eval_split):
    from recbole.data import data_preparation

    from recbole_mgformer.config.config_check import _split_sizes, check_against_dataset

    config, dataset = built(tiny_data, **split(eval_split))
    check_against_dataset(config, dataset)
    expected = _split_sizes(config, dataset)
    train, valid, test = data_preparation(config, dataset)
    assert expected == tuple(len(part.dataset) for part in (train, valid, test))


def test_a_time_field_declared_a_token_is_an_error(tmp_path):
    from recbole_mgformer.config.config_check import check_time_field

    folder = tmp_path / "data" / "timed"
    folder.mkdir(parents=True)
    rows = [f"u{u}\ti{(u + k) % 9}\t{k}" for u in range(6) for k in range(6)]
    (folder / "timed.inter").write_text("user_id:token\titem_id:token\ttimestamp:token\n" + "\n".join(rows) + "\n")
    from recbole_mgformer.safety import create_dataset

    settings = {"data_path": str(tmp_path / "data"), "load_col": {"inter": ["user_id", "item_id", "timestamp"]}}
    config = build_config("BPR", "timed", config_dict={**settings, **split({"LS": "valid_and_test"}, order="TO")})[0]
    with pytest.raises(ValueError, match=r"time field 'timestamp' of timed is a token column.*'timestamp:float'"):
        check_time_field(config, create_dataset(config))


def test_filters_that_leave_no_interaction_are_named(tiny_data):
    from recbole_mgformer.config.config_check import dataset_build_errors
    from recbole_mgformer.safety import create_dataset

    config = tiny_config(tiny_data, user_inter_num_interval="[100,inf)")
    with pytest.raises(ValueError, match=r"leaves no interaction .*user_inter_num_interval: \[100,inf\).*widen"):
        with dataset_build_errors(config):
            create_dataset(config)


@pytest.mark.parametrize(
    "settings, message",
    [
        (split({"RS": [0.8, 0.1, 0.1]}, mode="labeled"), r"metrics \['Recall', 'NDCG'\] rank items, but .* labeled"),
        (
            {"topk": [5, 20], **split({"RS": [0.8, 0.1, 0.1]}, mode="uni10")},
            r"topk \[5, 20\] reaches the 11 candidates eval_args mode uni10 ranks .*at most 10, or sample more",
        ),
    ],
)
def test_an_evaluation_mode_the_metrics_cannot_use_is_named(tiny_data, settings, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tiny_data, **settings)


def test_sampled_candidates_above_topk_pass(tiny_data):
    config = tiny_config(tiny_data, **split({"RS": [0.8, 0.1, 0.1]}, mode="uni20"))
    assert config["eval_args"]["mode"] == {"valid": "uni20", "test": "uni20"}


def test_a_labeled_evaluation_without_labels_is_an_error(tiny_data):
    from recbole_mgformer.config.config_check import check_against_dataset

    settings = {"metrics": ["AUC"], "valid_metric": "AUC", **split({"RS": [0.8, 0.1, 0.1]}, mode="labeled")}
    with pytest.raises(ValueError, match=r"mode labeled scores each pair against its label, but .* no 'label' column"):
        check_against_dataset(*built(tiny_data, **settings))


class _Config(dict):
    def __getitem__(self, key):  # as RecBole's Config: None for a key it does not hold
        return self.get(key)


MGFORMER_SIZES = _Config(model="MGFormer", dataset="ml-100k", embedding_size=64, structural_size=100000, n_layers=1)


@pytest.mark.parametrize(
    "raised",
    [
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
            "allocate 40102465536 bytes. Error code 12 (Cannot allocate memory)"
        ),
        MemoryError(),
    ],
)
def test_a_model_too_large_to_build_names_its_sizes(raised):
    from recbole_mgformer.config.config_check import model_build_errors

    with pytest.raises(MemoryError) as caught:
        with model_build_errors(MGFORMER_SIZES):
            raise raised
    message = str(caught.value)
    assert message.startswith("building MGFormer on ml-100k needs more memory than this machine can give")
    assert "embedding_size=64, structural_size=100000, n_layers=1; lower those sizes" in message
    assert ("37.3 GiB" in message) == isinstance(raised, RuntimeError)


def test_cuda_out_of_memory_building_a_model_names_its_sizes():
    from recbole_mgformer.config.config_check import model_build_errors

    with pytest.raises(MemoryError, match=r"\(one tensor of 20\.0 GiB\), at embedding_size=64"):
        with model_build_errors(MGFORMER_SIZES):
            raise torch.cuda.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 79.15 GiB total capacity)"
            )


@pytest.mark.parametrize(
    "text", ["shapes cannot be multiplied", "cannot reallocate a tensor that is shared", "failed to allocate a stream"]
)
def test_other_errors_building_a_model_pass_through(text):
    from recbole_mgformer.config.config_check import model_build_errors

    with pytest.raises(RuntimeError, match=text):
        with model_build_errors(MGFORMER_SIZES):
            raise RuntimeError(text)


# ------------------------------------------------------------------------------------------------ a model's protocol
# the importer's YAML (and RecBole's defaults) give a general protocol; other kinds of model stopped in tracebacks


def test_a_sequential_model_on_a_general_protocol_is_told_the_sequential_one(tiny_data):
    """RecBole's sequential data stopped with "The ordering args for sequential recommendation has to be 'TO'"."""
    from recbole_mgformer.quick_start import build_config

    general = {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "group_by": "user", "mode": "full"}
    settings = {"data_path": str(tiny_data), "eval_args": general, "train_neg_sample_args": None}
    with pytest.raises(ValueError, match=r"^GRU4Rec is a sequential model: .*order RO .*split: \{LS: valid_and_test\}"):
        build_config("GRU4Rec", "tiny", config_dict=settings)
    build_config("MGFormer", "tiny", config_dict=settings)  # a general model's protocol


def test_a_cross_entropy_model_with_sampled_negatives_is_told_to_unset_them(tiny_data):
    from recbole_mgformer.quick_start import build_config

    with pytest.raises(ValueError, match=r"setting train_neg_sample_args must be ~ \(none\) for a model trained"):
        build_config("SASRec", "tiny", config_dict={"data_path": str(tiny_data)})


def test_a_context_aware_model_without_labels_is_named_before_training(tiny_data, tmp_path):
    """FM and CSA stopped in their loss with KeyError: 'label' on the importer's data."""
    from recbole_mgformer.quick_start import run_recommender

    settings = {"data_path": str(tiny_data), "epochs": 1, "checkpoint_dir": str(tmp_path / "saved")}
    with pytest.raises(ValueError, match=r"^FM is a context-aware model: .*no 'label' column .*threshold"):
        run_recommender("FM", "tiny", config_dict=settings)
    assert not (tmp_path / "saved").exists()


@pytest.mark.parametrize(
    "model, sampling, message",
    [
        ("BPR", None, r"train_neg_sample_args leaves BPR without negatives: a pairwise model"),
        ("BPR", {"distribution": "uniform", "sample_num": 0}, r"sample_num takes a whole number .* not 0"),
        ("LightGCN", {"distribution": "popularity", "sample_num": 1.5}, r"sample_num takes a whole number .* not 1.5"),
        ("BPR", {"sample_num": 1, "bogus": 1}, r"has no setting 'bogus'; its settings are distribution, sample_num"),
        ("BPR", {"sample_nm": 2}, r"has no setting 'sample_nm'; .*\(did you mean sample_num\?\)"),
        ("BPR", {"distribution": "unifrom"}, r"distribution takes one of uniform, popularity, none, not 'unifrom'"),
        ("BPR", "uniform", r"takes a mapping like \{distribution: uniform, sample_num: 1\}"),
    ],
)
def test_negative_sampling_a_model_cannot_train_with_is_named(tiny_data, model, sampling, message):
    """BPR without negatives stopped with KeyError: 'neg_item_id'; sample_num 0 with a ZeroDivisionError."""
    from recbole_mgformer.quick_start import build_config

    with pytest.raises(ValueError, match=message):
        build_config(model, "tiny", config_dict={"data_path": str(tiny_data), "train_neg_sample_args": sampling})


def test_a_pointwise_model_trains_without_negatives(tiny_data):
    from recbole_mgformer.quick_start import build_config

    config, _ = build_config("MGFormer", "tiny", config_dict={"data_path": str(tiny_data)})
    assert config["train_neg_sample_args"]["distribution"] == "none"


def test_normalizing_every_field_and_some_fields_at_once_is_named(tiny_data):
    from recbole_mgformer.quick_start import build_config

    settings = {"data_path": str(tiny_data), "normalize_all": True, "normalize_field": ["rating"]}
    with pytest.raises(ValueError, match=r"setting normalize_field \['rating'\] and normalize_all: True cannot both"):
        build_config("BPR", "tiny", config_dict=settings)


def test_wandb_logging_without_wandb_is_named_before_the_data_is_read(tiny_data, monkeypatch):
    finds = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "wandb" else finds(name, *rest)
    )
    settings = {"data_path": str(tiny_data), "log_wandb": True}
    with pytest.raises(ValueError, match=r"setting log_wandb is True, but the wandb package is not installed"):
        build_config("BPR", "tiny", config_dict=settings)
    build_config("BPR", "tiny", config_dict={**settings, "log_wandb": False})


def test_negatives_sampled_for_a_model_that_trains_on_positives_only_are_warned_about(tiny_data, caplog):
    sampling = {"distribution": "uniform", "sample_num": 5}
    with caplog.at_level(logging.WARNING):
        build_config("DirectAU", "tiny", config_dict={"data_path": str(tiny_data), "train_neg_sample_args": sampling})
    assert "DirectAU trains on positive pairs only, so the sampled negatives are drawn and never read" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        build_config("DirectAU", "tiny", config_dict={"data_path": str(tiny_data)})
        build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data), "train_neg_sample_args": sampling})
    assert "never read" not in caplog.text
