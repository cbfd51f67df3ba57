"""Nothing RecBole loads runs code (``recbole_mgformer.safety``): literal settings, safe YAML, no unpickling.

The payloads are real: a string RecBole's ``eval`` would run, and pickles whose loading opens a marker file for
writing (``open(path, "w")`` as their ``__reduce__``). Each test asserts the marker is absent."""

import pytest
import yaml
from conftest import TINY_CONFIG, eval_payload, write_context_dataset, write_payload
from recbole.config import Config
from recbole.data import create_dataset, data_preparation

from recbole_mgformer import safety
from recbole_mgformer.quick_start import build_config, prepare
from recbole_mgformer.safety import UnsafeSettingError, literal_setting


@pytest.mark.parametrize(
    "text, value",
    [
        ("0.01", 0.01),
        ("1e-3", 0.001),
        ("-1e-3", -0.001),
        ("64", 64),
        ("[64, 64]", [64, 64]),
        ("8,2", (8, 2)),
        ("{'RS': [0.8, 0.1, 0.1]}", {"RS": [0.8, 0.1, 0.1]}),
        ("None", None),
        ("True", True),
        ("true", True),
        ("FALSE", False),
        ("none", "none"),
        ("elu", "elu"),
        ("amazon-beauty", "amazon-beauty"),
        ("saved/BPR.pth", "saved/BPR.pth"),
        ("NDCG@20", "NDCG@20"),
        ("[RO,UO]", "[RO,UO]"),
        ("[3,inf)", "[3,inf)"),
        ("cuda:0", "cuda:0"),
        ("max", "max"),
        ("", ""),
        ("{1, 2}", "{1, 2}"),
    ],
)
def test_settings_read_as_recboles_eval_read_legitimate_values(text, value):
    assert literal_setting("key", text) == value and type(literal_setting("key", text)) is type(value)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('id') or 0.01",
        "open('f', 'w')",
        "[open('f')]",
        "lambda: 1",
        "[x for x in 'ab']",
        "f'{x}'",
        "1/3",
        "2**10",
    ],
)
def test_code_and_computed_settings_are_refused_with_the_key(text):
    with pytest.raises(UnsafeSettingError, match=r"setting learning_rate: .*never run as Python"):
        literal_setting("learning_rate", text)


def test_a_config_dict_string_is_never_evaluated(tiny_data, tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(UnsafeSettingError, match="setting learning_rate"):
        build_config(
            "BPR",
            "tiny",
            config_dict={**TINY_CONFIG, "data_path": str(tiny_data), "learning_rate": eval_payload(marker)},
        )
    assert not marker.exists()


def test_recboles_own_config_reads_its_command_line_without_eval(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setattr("sys.argv", ["run_recbole.py", f"--learning_rate={eval_payload(marker)}"])
    with pytest.raises(UnsafeSettingError, match="setting learning_rate"):
        Config(model="BPR", dataset="ml-100k")
    assert not marker.exists()
    monkeypatch.setattr("sys.argv", ["run_recbole.py", "--topk=[5,10]", "--valid_metric=NDCG@10", "--epochs=3"])
    config = Config(model="BPR", dataset="ml-100k")
    assert config["topk"] == [5, 10] and config["valid_metric"] == "NDCG@10" and config["epochs"] == 3


def test_a_code_string_in_a_config_file_is_refused_naming_the_file(tiny_data, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "mine.yaml"
    path.write_text(f"learning_rate: {eval_payload(marker)!r}\n".replace("\\'", "''"))
    assert "__import__" in yaml.safe_load(path.read_text())["learning_rate"]
    with pytest.raises(UnsafeSettingError, match=rf"config file {path}: setting learning_rate"):
        build_config(
            "BPR", "tiny", config_file_list=[str(path)], config_dict={**TINY_CONFIG, "data_path": str(tiny_data)}
        )
    assert not marker.exists()


def test_config_files_load_with_a_safe_loader_that_keeps_recboles_floats(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("learning_rate: 1e-3\nx: !!python/name:builtins.print\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="python/name:builtins.print"):
        Config(model="BPR", dataset="ml-100k", config_file_list=[str(path)])
    path.write_text("learning_rate: 1e-3\ntopk: [5]\n")
    config = Config(model="BPR", dataset="ml-100k", config_file_list=[str(path)])
    assert config["learning_rate"] == 0.001 and config["topk"] == [5]
    assert Config._build_yaml_loader(None) is safety.SafeLoader


def tiny_config(tiny_data, tmp_path, **settings):
    config, _ = build_config(
        "BPR",
        "tiny",
        config_dict={**TINY_CONFIG, "data_path": str(tiny_data), "checkpoint_dir": str(tmp_path / "saved"), **settings},
    )
    return config


def test_a_pickle_at_recboles_default_dataset_path_is_never_opened(tiny_data, tmp_path):
    marker = tmp_path / "pwned"
    config = tiny_config(tiny_data, tmp_path)
    write_payload(tmp_path / "saved" / "tiny-Dataset.pth", marker)
    write_payload(tmp_path / "saved" / "tiny-for-BPR-dataloader.pth", marker)
    dataset = create_dataset(config)  # RecBole's name, as run_recbole and the project call it
    train, valid, test = data_preparation(config, dataset)
    assert not marker.exists()
    assert dataset.inter_num == train.dataset.inter_num + valid.dataset.inter_num + test.dataset.inter_num
    prepare(config)  # the project's path
    assert not marker.exists()
    import recbole.quick_start.quick_start as recbole_quick_start

    assert recbole_quick_start.create_dataset is safety.create_dataset  # run_recbole's, and load_data_and_model's


@pytest.mark.parametrize(
    "key, value",
    [
        ("dataset_save_path", "PAYLOAD"),
        ("dataloaders_save_path", "PAYLOAD"),
        ("save_dataset", True),
        ("save_dataloaders", True),
    ],
)
def test_settings_that_load_or_write_pickles_are_refused(tiny_data, tmp_path, key, value):
    marker = tmp_path / "pwned"
    payload = str(write_payload(tmp_path / "data.pth", marker))
    refusal = rf"{key}=.*loading a pickle runs whatever code it holds.*Remove {key}"
    with pytest.raises(UnsafeSettingError, match=refusal):
        tiny_config(tiny_data, tmp_path, **{key: payload if value == "PAYLOAD" else value})
    assert not marker.exists()


def test_recboles_create_dataset_refuses_a_save_path_of_a_config_the_project_did_not_check(tiny_data, tmp_path):
    marker = tmp_path / "pwned"
    config = tiny_config(tiny_data, tmp_path)
    config["dataset_save_path"] = str(write_payload(tmp_path / "data.pth", marker))
    with pytest.raises(UnsafeSettingError, match="dataset_save_path"):
        create_dataset(config)
    assert not marker.exists()


def test_recboles_hyper_tuning_reads_its_parameter_file_as_literals(tmp_path):
    from recbole.trainer.hyper_tuning import HyperTuning

    marker = tmp_path / "pwned"
    path = tmp_path / "params"
    path.write_text("learning_rate choice [0.01,0.001]\nembedding_size choice [32,64]\n")
    space = HyperTuning._build_space_from_file(str(path))
    assert set(space) == {"learning_rate", "embedding_size"}
    path.write_text(f"learning_rate choice [__import__('builtins').open({str(marker)!r},'w')]\n")
    with pytest.raises(UnsafeSettingError, match="not a list of values"):
        HyperTuning._build_space_from_file(str(path))
    assert not marker.exists()


def test_kd_dagfm_builds_only_its_teacher_networks(tmp_path):
    """KD_DAGFM evals its ``teacher`` setting; a recorded config (a checkpoint's) reaches it unconverted."""
    from recbole.model.context_aware_recommender.kd_dagfm import KD_DAGFM

    marker = tmp_path / "pwned"
    write_context_dataset(tmp_path / "data")
    config, _ = build_config(
        "KD_DAGFM",
        "toyctx",
        config_dict={
            "data_path": str(tmp_path / "data"),
            "state": "WARNING",
            "phase": "teacher_training",
            "load_col": {"inter": ["user_id", "item_id", "rating"]},
            "threshold": {"rating": 4},  # labeled evaluation needs labels (config_check.check_labels)
            "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "mode": "labeled"},
        },
    )
    _, _, (train, _, _) = prepare(config)
    config["teacher"] = f"{eval_payload(marker)} and CrossNet"
    with pytest.raises(UnsafeSettingError, match="teacher: .* is not one of KD_DAGFM's teacher networks"):
        KD_DAGFM(config, train._dataset)
    assert not marker.exists()
    config["teacher"] = "CIN"
    assert type(KD_DAGFM(config, train._dataset).teacher_network).__name__ == "CIN"


def test_ldiffrec_refuses_pickled_item_embeddings(tiny_data, tmp_path):
    import numpy as np
    from conftest import Payload

    marker = tmp_path / "pwned"
    embeddings = tiny_data / "tiny" / "item_emb.npy"
    np.save(embeddings, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    config, _ = build_config("LDiffRec", "tiny", config_dict={**TINY_CONFIG, "data_path": str(tiny_data), "n_cate": 2})
    with pytest.raises(UnsafeSettingError, match=rf"{embeddings} holds pickled objects"):
        prepare(config)
    assert not marker.exists()


def test_a_pretrained_file_a_recbole_model_loads_is_weights_only(tiny_data, tmp_path, monkeypatch):
    """NeuMF (like ConvNCF, NAIS, RaCT, S3Rec, KD_DAGFM) torch.loads its pretrained file without weights_only:
    torch before 2.6, or this variable on any torch, unpickles it."""
    import pickle

    from recbole.model.general_recommender.neumf import NeuMF

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "pwned"
    payload = write_payload(tmp_path / "mf.pth", marker)
    config, _ = build_config(
        "NeuMF",
        "tiny",
        config_dict={
            **TINY_CONFIG,
            "data_path": str(tiny_data),
            "use_pretrain": True,
            "mf_pretrain_path": str(payload),
            "mlp_pretrain_path": str(payload),
        },
    )
    dataset = create_dataset(config)
    train, _, _ = data_preparation(config, dataset)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        NeuMF(config, train._dataset)
    assert not marker.exists()


@pytest.mark.slow
def test_data_parallel_ranks_never_open_a_pickle_at_the_default_paths(tiny_data, tmp_path):
    from recbole_mgformer import run_recommender
    from recbole_mgformer.training.distributed import free_port

    marker = tmp_path / "pwned"
    write_payload(tmp_path / "saved" / "tiny-Dataset.pth", marker)
    write_payload(tmp_path / "saved" / "tiny-for-BPR-dataloader.pth", marker)
    result = run_recommender(
        "BPR",
        "tiny",
        config_dict={
            **TINY_CONFIG,
            "epochs": 1,
            "data_path": str(tiny_data),
            "checkpoint_dir": str(tmp_path / "saved"),
            "use_gpu": False,
        },
        nproc=2,
        port=free_port(),
    )
    assert not marker.exists() and result["test_result"]
