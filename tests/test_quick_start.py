import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY_RUN_CONFIG, faults_per_large_product

from recbole_mgformer import run_recommender
from recbole_mgformer.quick_start import build_config, prepare_data

ML100K_FAST = {"epochs": 6, "stopping_step": 6, "show_progress": False, "state": "WARNING"}


def test_project_yaml_loads_under_user_config(tmp_path):
    user_file = tmp_path / "mine.yaml"
    user_file.write_text("uniformity_weight: 2.5\nn_heads: 2\n")
    config, _ = build_config("MGFormer", "ml-100k", [str(user_file)], {"n_heads": 4})
    assert config["feature_map"] == "simrf"  # properties/model/MGFormer.yaml
    assert config["valid_metric"] == "NDCG@20"  # properties/dataset/ml-100k.yaml
    assert config["uniformity_weight"] == 2.5  # the user's file wins over the defaults
    assert config["n_heads"] == 4  # and config_dict over the file


def test_command_line_arguments_of_the_caller_are_not_read(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["pytest", "--embedding_size=3"])
    config, _ = build_config("MGFormer", "ml-100k")
    assert config["embedding_size"] == 64


def test_runner_returns_run_recbole_dict(tiny_data):
    result = run_recommender(
        "MGFormer",
        "tiny",
        config_dict={"data_path": str(tiny_data), "epochs": 2, **TINY_RUN_CONFIG},
    )
    recbole_keys = {"best_valid_score", "valid_score_bigger", "best_valid_result", "test_result"}
    assert set(result) == recbole_keys | {"checkpoint", "log_file", "epochs", "best_epoch"}
    assert result["valid_score_bigger"] is True
    assert result["best_valid_score"] == result["best_valid_result"]["ndcg@20"]
    assert Path(result["checkpoint"]).is_absolute() and Path(result["checkpoint"]).is_file()
    assert result["epochs"] == 2 and result["best_epoch"] in (0, 1)


def test_a_run_flushes_subnormal_numbers_to_zero_unless_told_not_to(tiny_data):
    # A weight that stops learning can decay below float32's normal range, where the CPU computes many times slower
    code = (
        "import torch; from recbole_mgformer import run_recommender; "
        "assert torch.tensor([1e-39]).mul(1.0).item() != 0; "
        f"run_recommender('MGFormer', 'tiny', config_dict={{'data_path': {str(tiny_data)!r}, 'epochs': 1, "
        "'embedding_size': 8, 'show_progress': False, 'state': 'WARNING'}); "
        "assert torch.tensor([1e-39]).mul(1.0).item() == 0, 'subnormals were kept'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    kept = code.replace("'state': 'WARNING'}", "'state': 'WARNING', 'flush_subnormals': False}").replace(
        "item() == 0, 'subnormals were kept'", "item() != 0, 'flush_subnormals: False flushed them'"
    )
    assert "'flush_subnormals': False" in kept and "!= 0, 'flush_subnormals" in kept
    subprocess.run([sys.executable, "-c", kept], check=True)


@pytest.mark.parametrize("setting", [None, False])
def test_a_run_keeps_freed_memory_for_reuse_unless_told_not_to(tiny_data, setting):
    """After a run, a 41 MB product (above glibc's largest default mmap threshold) reuses freed heap memory instead
    of mapping and faulting in its pages anew: the step's large tensors stop costing page faults."""
    extra = "" if setting is None else f", 'keep_freed_memory': {setting}"
    faults = faults_per_large_product(
        "from recbole_mgformer import run_recommender\n"
        f"run_recommender('MGFormer', 'tiny', config_dict={{'data_path': {str(tiny_data)!r}, 'epochs': 1, "
        f"'embedding_size': 8, 'show_progress': False, 'state': 'WARNING'{extra}}})"
    )
    assert faults < 100 if setting is None else faults > 5000  # ~10,000 4 KiB pages when mapped anew


def test_training_does_not_import_ray(tiny_data):
    code = (
        "import sys; from recbole_mgformer import run_recommender; "
        f"run_recommender('MGFormer', 'tiny', config_dict={{'data_path': {str(tiny_data)!r}, 'epochs': 1, "
        "'embedding_size': 8, 'show_progress': False, 'state': 'WARNING'}); "
        "assert 'ray' not in sys.modules, 'ray was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_mgformer_learns_on_ml_100k_far_above_popularity(ml100k_pop):
    pop = ml100k_pop
    mgformer = run_recommender("MGFormer", "ml-100k", config_dict=ML100K_FAST)
    assert mgformer["test_result"]["ndcg@20"] > 1.3 * pop["test_result"]["ndcg@20"]
    assert mgformer["test_result"]["recall@20"] > 1.3 * pop["test_result"]["recall@20"]


@pytest.mark.parametrize("model", ["BPR", "LightGCN", "SGL"])
def test_recbole_graph_models_run_on_the_pinned_stack(tiny_data, model):
    """LightGCN and SGL build their graphs with scipy's dok_matrix internals, removed in scipy 1.13."""
    result = run_recommender(
        model,
        "tiny",
        config_dict={"data_path": str(tiny_data), "epochs": 2, **TINY_RUN_CONFIG},
    )
    assert 0 < result["test_result"]["ndcg@20"] <= 1
    assert result["best_valid_score"] == result["best_valid_result"]["ndcg@20"]


class Killed(KeyboardInterrupt):
    """A kill at the start of one epoch, after the previous one was checkpointed."""


def test_a_killed_run_resumes_at_the_epoch_after_its_last_one(tiny_data, tmp_path, monkeypatch):
    """Validation scores fall after epoch 0, so the best checkpoint stays at epoch 0: a resume from it alone
    would redo every epoch since. The last-epoch checkpoint makes the run continue at epoch 4 after a kill
    that came once epoch 3 had finished."""
    from recbole.trainer import Trainer

    trained, scores = [], iter([0.5 - 0.01 * step for step in range(100)])
    train_epoch, kill_at = Trainer._train_epoch, [4]

    def fake_train_epoch(self, train_data, epoch_idx, *args, **kwargs):
        if epoch_idx == kill_at[0]:
            raise Killed()
        trained.append(epoch_idx)
        return train_epoch(self, train_data, epoch_idx, *args, **kwargs)

    def falling_valid_epoch(self, valid_data, show_progress=False):
        score = next(scores)
        return score, {"ndcg@20": score}

    monkeypatch.setattr(Trainer, "_train_epoch", fake_train_epoch)
    monkeypatch.setattr(Trainer, "_valid_epoch", falling_valid_epoch)
    settings = {
        "data_path": str(tiny_data),
        "epochs": 7,
        "stopping_step": 100,
        "checkpoint_dir": str(tmp_path / "saved"),
        **TINY_RUN_CONFIG,
    }
    with pytest.raises(Killed):
        run_recommender("BPR", "tiny", config_dict=settings)
    (best,) = (tmp_path / "saved").glob("BPR-*[0-9].pth")
    latest = best.with_name(best.stem + ".latest.pth")
    assert trained == [0, 1, 2, 3] and latest.is_file()

    trained.clear()
    kill_at[0] = None
    result = run_recommender("BPR", "tiny", config_dict=settings, resume_file=str(best))
    assert trained == [4, 5, 6]  # not [1, ..., 6]: the epochs since the best one are not redone
    assert result["best_valid_score"] == 0.5  # the history: epoch 0 stays the best
    assert not latest.exists()  # a finished run keeps only its best checkpoint, as RecBole does


@pytest.mark.parametrize(
    "model, options", [("SGL", {}), ("SimGCL", {}), ("MGFormer", {"feature_redraw_interval": 3, "key_sample_size": 10})]
)
def test_a_resumed_run_trains_exactly_as_the_uninterrupted_one(tiny_data, tmp_path, monkeypatch, model, options):
    """The epochs after a kill see the same shuffles, negatives, views (SGL: numpy's generator), noise (SimGCL: its
    own generator), sampled keys and feature redraws (MGFormer: its generator and step count) as those of the run
    never killed, so their training losses match to the last bit."""
    from recbole.trainer import Trainer

    losses, train_epoch, kill_at = [], Trainer._train_epoch, [None]

    def recorded_train_epoch(self, train_data, epoch_idx, *args, **kwargs):
        if epoch_idx == kill_at[0]:
            raise Killed()
        loss = train_epoch(self, train_data, epoch_idx, *args, **kwargs)
        losses.append((epoch_idx, float(sum(loss) if isinstance(loss, tuple) else loss)))
        return loss

    monkeypatch.setattr(Trainer, "_train_epoch", recorded_train_epoch)
    settings = {
        "data_path": str(tiny_data),
        "epochs": 4,
        "stopping_step": 100,
        **TINY_RUN_CONFIG,
        "train_batch_size": 64,
        **options,
    }
    run_recommender(model, "tiny", config_dict={**settings, "checkpoint_dir": str(tmp_path / "whole")})
    uninterrupted = list(losses)

    losses.clear()
    kill_at[0] = 2
    killed = {**settings, "checkpoint_dir": str(tmp_path / "killed")}
    with pytest.raises(Killed):
        run_recommender(model, "tiny", config_dict=killed)
    kill_at[0] = None
    (best,) = (tmp_path / "killed").glob(f"{model}-*[0-9].pth")
    run_recommender(model, "tiny", config_dict=killed, resume_file=str(best))
    assert [epoch for epoch, _ in losses] == [0, 1, 2, 3]
    assert losses == uninterrupted


def test_a_resume_file_that_does_not_exist_is_named(tiny_data, tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*absent.pth"):
        run_recommender(
            "BPR",
            "tiny",
            config_dict={"data_path": str(tiny_data), "state": "WARNING"},
            resume_file=str(tmp_path / "absent.pth"),
        )


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_checkpoint_dir_that_cannot_be_a_folder_stops_the_run_before_the_dataset_is_built(tiny_data, tmp_path, where):
    afile = tmp_path / "afile"
    afile.write_text("")
    folder = afile if where == "a file" else afile / "checkpoints"
    with pytest.raises(FileExistsError, match=rf"checkpoint_dir {folder}: {afile} is a file, not a folder"):
        run_recommender("BPR", "tiny", config_dict={"data_path": str(tiny_data), "checkpoint_dir": str(folder)})
    assert not (tmp_path / "saved").exists()


def test_a_data_path_that_holds_ml_100k_is_read_as_for_any_other_dataset(tmp_path):
    from recbole_mgformer.data.sources import bundled_ml_100k

    own = tmp_path / "ml-100k"
    own.mkdir()
    lines = (bundled_ml_100k() / "ml-100k.inter").read_text().splitlines()
    (own / "ml-100k.inter").write_text("\n".join(lines[:301]) + "\n")
    config, _ = build_config("BPR", "ml-100k", config_dict={"data_path": str(tmp_path)})
    assert config["data_path"] == str(own)  # RecBole's Config alone would take its own copy
    assert config.dataset_settings.endswith(f"; ml-100k read from {own}")
    train, valid, test = prepare_data(config)
    assert sum(len(part.dataset) for part in (train, valid, test)) == 300  # the 300 rows of the user's file


def test_a_data_path_without_ml_100k_reads_recboles_copy_and_says_so(tmp_path):
    from recbole_mgformer.data.sources import bundled_ml_100k

    config, _ = build_config("BPR", "ml-100k", config_dict={"data_path": str(tmp_path)})
    assert config["data_path"] == str(bundled_ml_100k())
    assert f"{tmp_path / 'ml-100k'} holds no ml-100k.inter, so RecBole's own copy is read" in config.dataset_settings
    plain, _ = build_config("BPR", "ml-100k")
    assert (
        Path(plain["data_path"]).resolve() == bundled_ml_100k().resolve()
        and "RecBole's own" not in plain.dataset_settings
    )


@pytest.mark.parametrize(
    "dataset, options, message",
    [
        (5, {}, r"dataset 5 is not a dataset name: give the name of a folder under data_path as text"),
        ("tiny", {"config_dict": "epochs=1"}, r"config_dict takes a mapping .*not 'epochs=1' \(on the command line"),
        ("tiny", {"config_dict": [("epochs", 1)]}, r"config_dict takes a mapping of settings"),
        ("tiny", {"config_file_list": [3]}, r"config_file_list takes paths of YAML files, e\.g\. \['my.yaml'\], not 3"),
    ],
)
def test_python_arguments_of_the_wrong_kind_are_named(dataset, options, message):
    with pytest.raises(ValueError, match=message):
        run_recommender("BPR", dataset, **options)


def test_one_config_file_may_be_given_alone(tiny_data, tmp_path):
    settings = tmp_path / "mine.yaml"
    settings.write_text("learning_rate: 0.0123\n")
    for given in (str(settings), settings):
        config, _ = build_config("BPR", "tiny", given, {"data_path": str(tiny_data)})
        assert config["learning_rate"] == 0.0123


TINY_RUN = {
    "epochs": 1,
    "show_progress": False,
    "metrics": ["Recall", "NDCG"],
    "topk": [20],
    "valid_metric": "NDCG@20",
    "train_batch_size": 64,
}


@pytest.fixture
def tuned_tiny(dataset_configs, tiny_data):
    """``properties/benchmark/tiny/MGFormer.yaml`` in a copy of properties/, and the tiny data's path."""
    from recbole_mgformer.config import defaults

    folder = defaults.properties_dir() / "benchmark" / "tiny"
    folder.mkdir(parents=True)
    (folder / "MGFormer.yaml").write_text("embedding_size: 12\nuniformity_weight: 2.0\n")
    return folder / "MGFormer.yaml", tiny_data


def _config_of_run(monkeypatch):
    """Make run_recommender return its config and tuned file instead of training."""
    import recbole_mgformer.quick_start as quick_start

    monkeypatch.setattr(quick_start, "train_and_test", lambda config, saved, resume, tuned: (config, tuned))


def test_the_tuned_settings_apply_under_the_users_own(tuned_tiny, tmp_path, monkeypatch):
    tuned, data = tuned_tiny
    _config_of_run(monkeypatch)
    config, applied = run_recommender("MGFormer", "tiny", config_dict={"data_path": str(data)})
    assert applied == str(tuned) and config["embedding_size"] == 12 and config["uniformity_weight"] == 2.0
    mine = tmp_path / "mine.yaml"
    mine.write_text("uniformity_weight: 0.7\n")
    config, _ = run_recommender("MGFormer", "tiny", [str(mine)], {"data_path": str(data), "embedding_size": 16})
    assert config["uniformity_weight"] == 0.7 and config["embedding_size"] == 16  # the user's file and setting win
    config, applied = run_recommender("MGFormer", "tiny", config_dict={"data_path": str(data)}, tuned=False)
    assert applied is None and config["embedding_size"] == 64 and config["uniformity_weight"] == 0.3
    config, applied = run_recommender("BPR", "tiny", config_dict={"data_path": str(data)})
    assert applied is None  # no file for BPR


def test_run_py_logs_the_tuned_file_and_no_tuned_leaves_it_out(tuned_tiny, caplog):
    from recbole_mgformer import cli

    tuned, data = tuned_tiny
    overrides = [f"--{k}={v}".replace("'", "") for k, v in {**TINY_RUN, "data_path": str(data)}.items()]
    with caplog.at_level("INFO"):
        result = cli.main(["--model=MGFormer", "--dataset=tiny", "--checkpoint_dir=tuned", *overrides])
    assert f"tuned settings applied: {tuned} (under your config files and settings" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO"):
        # another checkpoint folder: RecBole names checkpoints by the second, and both runs may share one
        untuned = cli.main(["--model=MGFormer", "--dataset=tiny", "--no-tuned", "--checkpoint_dir=untuned", *overrides])
    assert "tuned settings applied" not in caplog.text and "embedding_size" in caplog.text
    assert result["test_result"] != untuned["test_result"]  # d 12 and lambda 2 against the model's defaults


def test_make_run_picks_up_the_tuned_mgformer_on_ml_100k():
    from recbole_mgformer.quick_start import tuned_config_file

    path = tuned_config_file("MGFormer", "ml-100k")
    assert path is not None and path.endswith("properties/benchmark/ml-100k/MGFormer.yaml")
    config, _ = build_config("MGFormer", "ml-100k", [path])
    tuned = yaml.safe_load(Path(path).read_text())
    assert tuned and all(config[key] == value for key, value in tuned.items())


# ------------------------------------------------------------------------------------------------ dataset settings

GENERAL_PROTOCOL = {  # as RecBole's Config holds it
    "eval_args": {
        "split": {"RS": [0.8, 0.1, 0.1]},
        "order": "RO",
        "group_by": "user",
        "mode": {"valid": "full", "test": "full"},
    },
    "metrics": ["Recall", "NDCG"],
    "topk": [20],
    "valid_metric": "NDCG@20",
}


def protocol_of(config):
    return {key: config[key] for key in GENERAL_PROTOCOL}


@pytest.mark.parametrize("model", ["BPR", "MGFormer", "EASE"])
def test_a_dataset_without_a_yaml_gets_the_general_protocol_and_says_so(tiny_data, model):
    config, _ = build_config(model, "tiny", config_dict={"data_path": str(tiny_data)})
    assert protocol_of(config) == GENERAL_PROTOCOL  # not RecBole's Recall/MRR/NDCG/Hit/Precision@10 by MRR@10
    assert config.dataset_settings.startswith("tiny has no dataset YAML, so the project's general protocol applies")
    assert f"create {tiny_data / 'tiny' / 'tiny.yaml'} to change it" in config.dataset_settings


def test_the_general_protocol_is_under_the_users_files_and_settings(tiny_data, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"data_path: {tiny_data}\ntopk: [5, 10]\nvalid_metric: Recall@10\n")
    config, _ = build_config("BPR", "tiny", [str(mine)], {"metrics": ["Recall"]})
    assert config["topk"] == [5, 10] and config["valid_metric"] == "Recall@10" and config["metrics"] == ["Recall"]
    assert config["eval_args"]["split"] == {"RS": [0.8, 0.1, 0.1]}


def test_a_sequential_model_keeps_recboles_defaults_and_is_told_so(tiny_data):
    settings = {"load_col": {"inter": ["user_id", "item_id", "timestamp"]}, "train_neg_sample_args": None}
    config, _ = build_config("SASRec", "tiny", config_dict={"data_path": str(tiny_data), **settings})
    assert config["valid_metric"] == "MRR@10"  # a time order and its own split: the general protocol does not fit
    assert config["eval_args"]["order"] == "TO"
    assert "tiny has no dataset YAML: RecBole's defaults apply to a sequential model; create" in config.dataset_settings


def test_a_yaml_beside_the_data_is_the_datasets_own(tiny_data, tmp_path):
    beside = tiny_data / "tiny" / "tiny.yaml"
    beside.write_text("metrics: [Recall, NDCG, MRR]\ntopk: [5]\nvalid_metric: MRR@5\n")
    config, _ = build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data)})
    assert (config["metrics"], config["topk"], config["valid_metric"]) == (["Recall", "NDCG", "MRR"], [5], "MRR@5")
    assert config.dataset_settings == f"dataset settings: {beside} (beside the data; the project ships none for tiny)"
    mine = tmp_path / "mine.yaml"  # found where a config file sets data_path too, and under the user's settings
    mine.write_text(f"data_path: {tiny_data}\nvalid_metric: NDCG@5\n")
    config, _ = build_config("BPR", "tiny", [str(mine)], {"topk": [3, 5]})
    assert (config["metrics"], config["topk"], config["valid_metric"]) == (["Recall", "NDCG", "MRR"], [3, 5], "NDCG@5")


@pytest.mark.parametrize(
    "text, error",
    [
        ("topk: [5]\nvalid_metirc: NDCG@5\n", r"unknown config key 'valid_metirc' \(from config file .*tiny.yaml\)"),
        ("topk: [5]\n\tvalid_metric: NDCG@5\n", r"tiny.yaml:2:1: not valid YAML"),
        ("topk: five\n", r"topk"),
    ],
)
def test_a_yaml_beside_the_data_is_checked_as_the_users_config_files_are(tiny_data, text, error):
    (tiny_data / "tiny" / "tiny.yaml").write_text(text)
    with pytest.raises(ValueError, match=error):
        build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data)})


def test_the_projects_dataset_yaml_comes_before_one_beside_the_data(dataset_configs, tiny_data):
    dataset_configs("tiny", "topk: [7]\nvalid_metric: NDCG@7\n")
    beside = tiny_data / "tiny" / "tiny.yaml"
    beside.write_text("topk: [5]\nvalid_metric: NDCG@5\n")
    config, _ = build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data)})
    assert config["topk"] == [7]
    assert config.dataset_settings.endswith(
        f"tiny.yaml ({beside} beside the data is not read; --config_files={beside} applies it)"
    )


def test_a_run_logs_its_dataset_settings_and_ends_with_where_its_output_went(tiny_data, tmp_path, caplog):
    settings = {"data_path": str(tiny_data), "epochs": 1, "checkpoint_dir": str(tmp_path / "saved"), **TINY_RUN_CONFIG}
    with caplog.at_level("INFO"):
        result = run_recommender("BPR", "tiny", config_dict={**settings, "state": "INFO"})
    assert "tiny has no dataset YAML, so the project's general protocol applies" in caplog.text
    assert caplog.records[-1].getMessage() == f"checkpoint: {result['checkpoint']}; log: {result['log_file']}"
    assert Path(result["checkpoint"]).parent == tmp_path / "saved"


def test_run_py_prints_where_its_checkpoint_and_log_went(tiny_data, tmp_path, monkeypatch, capsys):
    import logging

    from recbole_mgformer import cli

    root, level = logging.getLogger(), logging.getLogger().level
    monkeypatch.setattr(root, "handlers", [])  # as in a new process: RecBole's log file is attached
    arguments = [f"--{key}={value}".replace("'", "") for key, value in TINY_RUN.items()]
    try:
        result = cli.main(["--model=BPR", "--dataset=tiny", *arguments, f"--data_path={tiny_data}", "--state=INFO"])
    finally:
        for handler in root.handlers:
            handler.close()
        root.setLevel(level)
    *_, checkpoint_line, log_line = capsys.readouterr().out.strip().splitlines()
    checkpoint, log = Path(result["checkpoint"]), Path(result["log_file"])
    assert checkpoint_line == f"checkpoint {checkpoint}" and log_line == f"log {log}"
    assert checkpoint.parent == tmp_path / "saved" and checkpoint.is_file() and log.parent == tmp_path / "log" / "BPR"
    assert log.read_text().rstrip().endswith(f"checkpoint: {checkpoint}; log: {log}")


def test_a_best_first_epoch_is_named_with_its_reason(tiny_data, tmp_path, monkeypatch, caplog):
    from recbole.trainer import Trainer

    from recbole_mgformer.quick_start import best_epoch_reason

    scores = iter([0.5, 0.4, 0.3])
    monkeypatch.setattr(Trainer, "_valid_epoch", lambda self, *a, **k: (s := next(scores), {"ndcg@20": s}))
    settings = {"data_path": str(tiny_data), "epochs": 3, "checkpoint_dir": str(tmp_path), **TINY_RUN_CONFIG}
    with caplog.at_level("INFO"):
        result = run_recommender("BPR", "tiny", config_dict={**settings, "state": "INFO"})
    assert result["best_epoch"] == 0 and result["epochs"] == 3
    assert "epochs 3, best epoch 0 (its first: no later epoch scored better)" in caplog.text
    assert "results/notes/attention.md" in best_epoch_reason("MGFormer", 0)
    assert best_epoch_reason("MGFormer", 4) == best_epoch_reason("BPR", None) == ""
