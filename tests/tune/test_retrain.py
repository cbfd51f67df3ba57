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
