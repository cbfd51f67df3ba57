"""Each repair of recbole_mgformer.integration.compat: RecBole's own behaviour with it, and the breakage without it on
the stack that has the breakage (skipped elsewhere: there RecBole's code runs unrepaired)."""

import sys

import numpy as np
import pytest
import scipy.sparse
import torch
from conftest import CONTEXT_PROTOCOL, TINY_CONFIG, dense_normalized_adjacency, write_context_dataset

from recbole_mgformer.integration import compat

needs = {
    name: pytest.mark.skipif(not needed, reason=f"this stack has no {name} breakage to repair")
    for name, needed in compat.NEEDED.items()
}


def recbole_config(model, dataset, **settings):
    from recbole.config import Config

    saved, sys.argv = sys.argv, sys.argv[:1]
    try:
        return Config(model=model, dataset=dataset, config_dict=settings)
    finally:
        sys.argv = saved


def write_features(folder, name="feat"):
    """The context toy dataset with a float missing (u4) where pandas' fillna must act."""
    return write_context_dataset(folder, name, score=lambda user: "" if user == 4 else f"{user / 10}")


FEATURES = {**CONTEXT_PROTOCOL, "metrics": ["AUC"], "state": "WARNING"}


def feature_dataset(tmp_path):
    from recbole.data import create_dataset

    return create_dataset(recbole_config("FM", "feat", data_path=str(write_features(tmp_path)), **FEATURES))


def user_scores(dataset):
    """The float feature by user id (RecBole keeps a numerical feature as [value, 1.0] before ``build``)."""
    return np.array([np.ravel(value)[0] for value in dataset.user_feat["score"]], dtype=float)


def genres_by_item(dataset):
    tokens = dataset.field2id_token["genres"]
    return {
        dataset.id2token("item_id", i): sorted(tokens[g] for g in row[row > 0].tolist())
        for i, row in enumerate(dataset.item_feat["genres"])
        if i > 0
    }


def test_recbole_reads_missing_features_as_it_did_on_pandas_2(tmp_path):
    dataset = feature_dataset(tmp_path)
    assert genres_by_item(dataset) == {
        "i0": ["a"],
        "i1": ["a", "b"],
        "i2": ["b", "c", "d"],
        "i3": ["c"],
        "i4": ["a", "d"],
        "i5": [],
        "i6": ["b"],
    }
    scores = user_scores(dataset)
    assert not np.isnan(scores).any()  # u4's missing score is the mean of the others
    assert scores[dataset.token2id("user_id", "u4")] == pytest.approx(np.mean([u / 10 for u in range(7) if u != 4]))


@needs["pandas3_fillna"]
def test_without_the_fillna_repair_a_missing_sequence_cell_fails_and_floats_stay_nan(tmp_path, monkeypatch):
    from recbole.data.dataset import Dataset

    monkeypatch.setattr(Dataset, "_load_feat", compat.ORIGINALS["Dataset._load_feat"])
    with pytest.raises(AttributeError, match="split"):
        feature_dataset(tmp_path / "a")
    monkeypatch.undo()
    monkeypatch.setattr(Dataset, "_fill_nan", compat.ORIGINALS["Dataset._fill_nan"])
    assert np.isnan(user_scores(feature_dataset(tmp_path / "b"))).any()


@needs["pandas3_agg_len"]
def test_without_the_agg_repair_token_sequences_fail_to_remap(tmp_path, monkeypatch):
    from recbole.data.dataset import Dataset

    monkeypatch.setattr(Dataset, "_remap", compat.ORIGINALS["Dataset._remap"])
    with pytest.raises(Exception):  # noqa: B017 (the type varies with the pandas release; any failure shows the repair is needed)
        feature_dataset(tmp_path)


def test_pandas_agg_keeps_its_own_meaning_outside_recbole():
    import pandas

    lengths = pandas.Series([np.array([1, 2]), np.array([3])]).agg(len)
    if compat.NEEDED["pandas3_agg_len"]:
        assert lengths == 2  # pandas 3's meaning, untouched outside RecBole's dataset methods
    else:
        assert lengths.tolist() == [2, 1]


def test_recbole_config_builds(tiny_data):
    config = recbole_config("BPR", "tiny", data_path=str(tiny_data))
    assert config["model"] == "BPR" and np.float is np.float64  # RecBole's alias, read by its metrics


@needs["numpy2_aliases"]
def test_without_the_numpy_repair_every_config_fails():
    from recbole.config import Config

    with pytest.raises(AttributeError, match="float_"):
        compat.ORIGINALS["Config.compatibility_settings"](Config.__new__(Config))


def lightgcn_adjacency(tiny_data):
    from recbole.data import create_dataset, data_preparation
    from recbole.model.general_recommender import LightGCN

    config = recbole_config(
        "LightGCN", "tiny", data_path=str(tiny_data), **{k: v for k, v in TINY_CONFIG.items() if k not in ("state",)}
    )
    train, _, _ = data_preparation(config, create_dataset(config))
    return LightGCN(config, train._dataset), train


def test_recboles_lightgcn_builds_its_normalised_adjacency(tiny_data):
    model, train = lightgcn_adjacency(tiny_data)
    expected = dense_normalized_adjacency(train._dataset.inter_matrix(form="coo"))
    np.testing.assert_allclose(model.norm_adj_matrix.to_dense().numpy(), expected, rtol=1e-5, atol=1e-7)


@needs["scipy_dok_update"]
def test_without_the_scipy_repair_lightgcn_fails(tiny_data, monkeypatch):
    monkeypatch.delattr(scipy.sparse.dok_matrix, "_update")
    with pytest.raises(AttributeError, match="_update"):
        lightgcn_adjacency(tiny_data)


def recbole_trainer(tiny_data, tmp_path):
    from recbole.data import create_dataset, data_preparation
    from recbole.model.general_recommender import BPR
    from recbole.utils import get_trainer

    config = recbole_config(
        "BPR",
        "tiny",
        data_path=str(tiny_data),
        checkpoint_dir=str(tmp_path / "saved"),
        **{k: v for k, v in TINY_CONFIG.items()},
    )
    train, valid, test = data_preparation(config, create_dataset(config))
    return get_trainer(config["MODEL_TYPE"], "BPR")(config, BPR(config, train._dataset)), (train, valid, test)


def test_recboles_trainer_writes_weights_only_checkpoints_and_tests_its_best(tiny_data, tmp_path):
    trainer, (train, valid, test) = recbole_trainer(tiny_data, tmp_path)
    trainer.fit(train, valid, saved=True)
    assert trainer.evaluate(test, load_best_model=True)  # RecBole's torch.load of its checkpoint, now weights-only
    checkpoint = torch.load(trainer.saved_model_file, weights_only=True)
    assert checkpoint["config"]["model"] == "BPR" and "user_embedding.weight" in checkpoint["state_dict"]


@needs["torch_weights_only_checkpoints"]
def test_without_the_torch_repair_recboles_checkpoint_does_not_load(tiny_data, tmp_path, monkeypatch):
    from recbole.trainer import Trainer

    monkeypatch.setattr(Trainer, "_save_checkpoint", compat.ORIGINALS["Trainer._save_checkpoint"])
    trainer, (train, valid, _) = recbole_trainer(tiny_data, tmp_path)
    trainer.fit(train, valid, saved=True)
    with pytest.raises(Exception, match="weights_only"):
        torch.load(trainer.saved_model_file, weights_only=True)


def exhaustive_search_over_two_values(tmp_path):
    from recbole.trainer import HyperTuning

    seen = []

    def objective(config_dict, config_file_list):
        seen.append(config_dict["x"])
        return {
            "model": "none",
            "best_valid_score": config_dict["x"],
            "valid_score_bigger": True,
            "best_valid_result": {},
            "test_result": {},
        }

    tuner = HyperTuning(objective, params_dict={"choice": {"x": [1, 2]}}, algo="exhaustive")
    tuner.run()
    return sorted(seen)


def test_recboles_exhaustive_search_draws_every_value(tmp_path):
    pytest.importorskip("hyperopt")
    assert exhaustive_search_over_two_values(tmp_path) == [1, 2]


@needs["hyperopt_generator"]
def test_without_the_hyperopt_repair_the_exhaustive_search_fails(tmp_path, monkeypatch):
    from recbole.trainer import hyper_tuning

    monkeypatch.setattr(hyper_tuning, "exhaustive_search", compat.ORIGINALS["hyper_tuning.exhaustive_search"])
    with pytest.raises(AttributeError, match="integers"):
        exhaustive_search_over_two_values(tmp_path)


def test_the_log_folder_exists_before_recboles_check_so_runs_started_together_cannot_race(tiny_data, monkeypatch):
    # RecBole checks for ./log/<model> and then creates it: two runs started at once can both see it missing and
    # the second makedirs raises FileExistsError. compat.init_logger creates it first, so RecBole's check finds it.
    import logging
    import os

    import recbole.utils.logger as recbole_logger

    seen = {}
    real_ensure_dir = recbole_logger.ensure_dir

    def ensure_dir(path):
        seen[os.path.normpath(path)] = os.path.isdir(path)
        real_ensure_dir(path)

    monkeypatch.setattr(recbole_logger, "ensure_dir", ensure_dir)
    config = recbole_config("BPR", "tiny", data_path=str(tiny_data))
    compat.init_logger(config)
    logging.getLogger().handlers.clear()
    assert seen[os.path.join("log", "BPR")] is True
    assert any(name.startswith("BPR-tiny-") for name in os.listdir(os.path.join("log", "BPR")))


def test_a_working_folder_that_cannot_hold_the_log_is_named(tiny_data, monkeypatch):
    import os

    def refused(path, *args, **kwargs):
        raise PermissionError(1, "Operation not permitted", path)

    config = recbole_config("BPR", "tiny", data_path=str(tiny_data))
    monkeypatch.setattr(os, "makedirs", refused)
    with pytest.raises(
        PermissionError, match=r"cannot create the run's log folder .*log/BPR \(Operation not permitted\)"
    ):
        compat.init_logger(config)


def test_two_runs_of_one_config_started_in_the_same_second_log_to_two_files(tiny_data, monkeypatch):
    # RecBole names the log <model>-<dataset>-<time>-<config hash>.log: the second run appended to the first's.
    import logging
    import os

    import recbole.utils.logger as recbole_logger

    monkeypatch.setattr(recbole_logger, "get_local_time", lambda: "Nov-28-2026_04-00-00")
    config = recbole_config("BPR", "tiny", data_path=str(tiny_data))
    for _ in range(2):
        compat.init_logger(config)
        logging.getLogger().handlers.clear()
    assert len(os.listdir(os.path.join("log", "BPR"))) == 2


@pytest.mark.parametrize("name", ["EASE", "ItemKNN", "SLIMElastic"])
def test_recboles_closed_form_models_fit_and_score_with_no_deprecation_from_their_code(tiny_data, name):
    """No repair is needed for them: on numpy 2.4, scipy 1.17, pandas 3.1 and scikit-learn 1.9 (Python 3.11) they
    fit and score as on the pinned stack. They lean on ``numpy.matrix`` (EASE's ``G.todense()``, SLIMElastic's
    ``getA1()``) and on ElasticNet's keyword API; this fails on the first stack that deprecates either, naming the
    line, before it breaks. Their scores of (user, item) pairs agree with their full ranking."""
    import warnings

    from recbole_mgformer.quick_start import build_config, prepare

    config, _ = build_config(name, "tiny", config_dict={**TINY_CONFIG, "data_path": str(tiny_data)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _, (train, _, test) = prepare(config)
        users, scores = [], []
        for batch in test:
            users.append(batch[0][model.USER_ID])
            scores.append(model.full_sort_predict(batch[0]).reshape(len(users[-1]), -1))
    own = [
        f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}"
        for w in caught
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))
        and ("recbole/model/" in w.filename or "sklearn" in w.filename)
    ]
    assert not own, "\n".join(own)
    users, scores = torch.cat(users), torch.cat(scores).double()
    items = torch.arange(1, scores.shape[1]).repeat(len(users))
    pairs = {model.USER_ID: users.repeat_interleave(scores.shape[1] - 1), model.ITEM_ID: items}
    from recbole.data.interaction import Interaction

    pointwise = model.predict(Interaction(pairs)).double().reshape(len(users), -1)
    torch.testing.assert_close(pointwise, scores[:, 1:], rtol=1e-5, atol=1e-6)
