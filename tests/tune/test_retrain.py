"""The best configuration as a standalone config (``recbole_mgformer.tune.retrain``)."""

import pytest

from recbole_mgformer.tune.retrain import best_settings


@pytest.mark.parametrize("given, written", [("dataset", "dataset"), (None, None), (True, "/machine/dataset")])
def test_the_best_yaml_keeps_the_data_path_as_given_not_this_machines(given, written):
    # a committed search page must not name the folder of the machine that searched; True: records before the fix
    request = {
        "config_files": [],
        "overrides": {"epochs": 5},
        "data_path": "/machine/dataset",
        "data_path_given": given,
    }
    settings = best_settings(request, {"learning_rate": 0.01})
    assert settings.get("data_path") == written and settings["learning_rate"] == 0.01 and settings["epochs"] == 5


def test_the_best_configuration_retrains_on_the_searchs_data_when_its_data_path_was_relative(
    tiny_data, tmp_path, monkeypatch
):
    """``tune --data_path data``: the retrain runs in the search's folder, where ``data`` is no folder (it failed
    with "dataset folder 'data/tiny' does not exist" after every trial had run)."""
    from conftest import TINY_RUN_CONFIG

    from recbole_mgformer.tune import retrain as retrain_module
    from recbole_mgformer.tune.retrain import retrain

    monkeypatch.chdir(tiny_data.parent)
    monkeypatch.setattr(retrain_module, "_ray_gpu_ids", lambda: "")  # it runs as a Ray task: no Ray started here
    request = {
        "model": "BPR",
        "dataset": "tiny",
        "config_files": [],
        "overrides": {"epochs": 1, **TINY_RUN_CONFIG},
        "data_path": str(tiny_data.resolve()),
        "data_path_given": tiny_data.name,
    }
    settings = best_settings(request, {"learning_rate": 0.01})
    assert settings["data_path"] == tiny_data.name
    result = retrain(request, settings, tmp_path / "search" / "best")
    assert result["best_epoch"] == 0 and "ndcg@20" in result["test_result"]
