import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY_RUN_CONFIG

from recbole_mgformer import run_recommender
from recbole_mgformer.quick_start import build_config

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
    assert set(result) == {"best_valid_score", "valid_score_bigger", "best_valid_result", "test_result"}
    assert result["valid_score_bigger"] is True
    assert result["best_valid_score"] == result["best_valid_result"]["ndcg@20"]


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
    from recbole_mgformer import defaults

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
