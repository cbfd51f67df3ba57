import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.fit_time import main, table_lines, verdict  # noqa: E402


def test_each_model_fits_in_a_one_thread_process_of_its_own_and_the_table_is_written(tiny_data, tmp_path):
    assert (
        main(
            [
                "--models",
                "EASE,ItemKNN",
                "--datasets",
                "tiny",
                "--data_path",
                str(tiny_data),
                "--results",
                str(tmp_path),
            ]
        )
        == 0
    )
    table = (tmp_path / "fit_time.md").read_text()
    assert "| dataset | model | users x items | settings | fit s | CPU s | peak RSS MB |" in table
    assert "| tiny | EASE | 41 x 61 | reg_weight 250.0 |" in table  # RecBole counts the padding id 0
    assert "| tiny | ItemKNN | 41 x 61 | k 100, knn_method item, shrink 0.0 |" in table
    assert table.count("| - | - |") == 2  # no target for the toy dataset
    assert "Commit " in table and "scikit-learn " in table
    record = json.loads(next((tmp_path / "runs" / "performance").glob("fit-time-*.json")).read_text())
    assert [(r["model"], r["dataset"]) for r in record["records"]] == [("EASE", "tiny"), ("ItemKNN", "tiny")]
    for r in record["records"]:
        assert r["seconds"] >= 0 and r["cpu_seconds"] >= 0 and r["peak_rss_mb"] > 0 and r["torch_threads"] == 1
        assert r["blas_threads"] in (None, [1])  # OMP/MKL/OpenBLAS set to one thread before numpy loaded


@pytest.mark.parametrize(
    "args, message",
    [
        (["--models", "NoSuchModel"], "unknown model 'NoSuchModel'"),
        (["--models", "LightGCN"], "LightGCN is not a closed-form model"),
        (["--datasets", "no-such-set"], "dataset 'no-such-set' is not available"),
        (["--models", ","], "--models and --datasets each need at least one name"),
        (["--timeout", "0"], "--timeout must be positive"),
    ],
)
def test_bad_arguments_are_refused_before_any_fit(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "--models",
                "EASE",
                "--datasets",
                "tiny",
                "--data_path",
                str(tmp_path / "empty"),
                "--results",
                str(tmp_path),
                *args,
            ]
        )
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "fit_time.md").exists()


def test_a_fit_passes_under_its_datasets_target_and_fails_over_it_or_when_it_did_not_finish():
    assert verdict({"dataset": "amazon-beauty", "seconds": 119.0}) == "pass"
    assert verdict({"dataset": "amazon-beauty", "seconds": 121.0}) == "fail"
    assert verdict({"dataset": "gowalla", "seconds": None, "error": "not done after 900 s"}) == "fail"
    assert verdict({"dataset": "ml-100k", "seconds": 1.0}) == "-"
    row = table_lines([{"model": "EASE", "dataset": "gowalla", "seconds": None, "error": "killed by signal 9"}])[-1]
    assert row == "| gowalla | EASE |  |  | killed by signal 9 |  |  |  | 600 | fail |"


def test_a_fit_over_its_time_is_stopped_and_reported_with_its_memory(tiny_data, tmp_path):
    from experiments.fit_time import run_child

    record = run_child("EASE", "tiny", tiny_data, timeout=0.5)  # stopped while it still imports
    assert record["error"] == "not done after 0.5 s" and record["seconds"] is None and record["peak_rss_mb"] > 0
    assert verdict({**record, "dataset": "gowalla"}) == "fail"


def test_a_run_of_a_few_models_adds_to_the_table_and_replaces_only_its_own_rows():
    from experiments.fit_time import latest_records

    first = {
        "provenance": "Commit a.",
        "records": [
            {"model": "EASE", "dataset": "gowalla", "seconds": 9.0},
            {"model": "GFCF", "dataset": "gowalla", "seconds": 80.0},
        ],
    }
    second = {
        "provenance": "Commit b.",
        "records": [
            {"model": "GFCF", "dataset": "gowalla", "seconds": 70.0},
            {"model": "GFCF", "dataset": "amazon-beauty", "seconds": 5.0},
        ],
    }
    records, provenances = latest_records([first, second])
    assert [(r["dataset"], r["model"], r["seconds"]) for r in records] == [
        ("amazon-beauty", "GFCF", 5.0),
        ("gowalla", "EASE", 9.0),
        ("gowalla", "GFCF", 70.0),
    ]
    assert provenances == ["Commit b.", "Commit a."]


def test_the_default_timeout_is_half_again_the_datasets_target():
    from experiments.fit_time import default_timeout

    assert default_timeout("amazon-beauty") == 180 and default_timeout("gowalla") == 900
    assert default_timeout("ml-100k") == 3600
