import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.recbole_step import main, thread_counts  # noqa: E402


@pytest.mark.parametrize("model", ["SGL", "LightGCN"])
def test_main_times_recboles_model_and_ours_from_the_same_start_at_each_thread_count_and_writes_their_table(
    tiny_data, tmp_path, model
):
    main(
        [
            "--model",
            model,
            "--dataset",
            "tiny",
            "--batch_size",
            "32",
            "--repeats",
            "1",
            "--steps",
            "1",
            "--threads",
            "1,2",
            "--results",
            str(tmp_path),
            f"--data_path={tiny_data}",
        ]
    )
    table = (tmp_path / f"{model.lower()}_step-tiny.md").read_text()
    for threads in (1, 2):
        assert f"| {threads} | RecBole's {model} |" in table and f"| {threads} | this project's {model} |" in table
    record = json.loads(next((tmp_path / "runs" / "performance").glob(f"{model.lower()}-step-tiny-*.json")).read_text())
    assert [(r["threads"], r["model"]) for r in record["records"]] == [
        (1, f"RecBole's {model}"),
        (1, f"this project's {model}"),
        (2, f"RecBole's {model}"),
        (2, f"this project's {model}"),
    ]
    recbole, project = record["records"][:2]
    assert recbole["ratio_to_recbole"] == 1.0 and project["steps_timed"] == 1
    assert abs(recbole["first_loss"] - project["first_loss"]) <= 1e-5 * abs(recbole["first_loss"])


@pytest.mark.parametrize("text", ["", "0", "1,x", "2,-1"])
def test_thread_counts_refuses_what_is_not_a_list_of_positive_counts(text):
    with pytest.raises(argparse.ArgumentTypeError, match="thread counts"):
        thread_counts(text)


def test_thread_counts_reads_one_or_several_counts():
    assert thread_counts("2") == [2] and thread_counts("1,2") == [1, 2]
