import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.paired import main, per_user_by_seed  # noqa: E402
from recbole_mgformer.benchmark.stats import write_per_user  # noqa: E402

TUNED = {"tuning": {"text": "random search of 8 trials"}}


def write_record(path, seed, extra):
    """A run record as the benchmark writes it, as far as the leaderboard's grouping reads it."""
    path.write_text(
        json.dumps(
            {
                "model": "M",
                "seed": seed,
                "valid": {"ndcg@20": 0.1},
                "test": {"ndcg@20": 0.1},
                "per_user": {"file": "x", "metric": "ndcg@20"},
                **extra,
            }
        )
    )


def write_row(folder, stem, seeds, values_of, record=TUNED):
    for seed in seeds:
        path = folder / f"{stem}-seed{seed}.json"
        write_record(path, seed, record)
        write_per_user(path, {f"u{user}": values_of(seed, user) for user in range(40)})


def test_a_row_better_for_every_user_is_ahead_and_an_equal_one_level(tmp_path):
    runs = tmp_path / "toy"
    runs.mkdir()
    write_row(runs, "model-a", [0, 1], lambda seed, user: 0.5 + 0.01 * (user % 7))
    write_row(runs, "model-b", [0, 1], lambda seed, user: 0.4 + 0.01 * (user % 5))
    write_row(runs, "model-c", [1, 2], lambda seed, user: 0.5 + 0.01 * (user % 7))
    lines = main(["toy", "model-a", "model-b", "model-c", "--runs", str(tmp_path)])
    assert lines[0].startswith("model-a is **ahead** of model-b") and "80 (seed, user) pairs from 2 seed(s)" in lines[0]
    # model-c shares only seed 1 and equals model-a there
    assert lines[1].startswith("model-a is **level** with model-c") and "from 1 seed(s)" in lines[1]


def test_only_the_rows_own_seed_records_count(tmp_path):
    write_row(tmp_path, "mgformer", [0], lambda seed, user: 0.1)
    write_row(tmp_path, "mgformer-x", [1], lambda seed, user: 0.2)
    write_record(tmp_path / "mgformer-seed2-copy.json", 2, TUNED)  # matches the glob, not a seed record
    write_per_user(tmp_path / "mgformer-seed2-copy.json", {"u0": 0.3})
    assert list(per_user_by_seed(tmp_path, "mgformer")[0]) == [0]


def test_a_row_is_one_sections_records_as_on_the_leaderboard(tmp_path):
    # a tuned seed 0 beside an older run's seed 2 of the same stem, not yet retired: two rows, never pooled
    write_row(tmp_path, "simgcl", [0], lambda seed, user: 0.3)
    write_row(tmp_path, "simgcl", [2], lambda seed, user: 0.1, record={})
    assert list(per_user_by_seed(tmp_path, "simgcl")[0]) == [0]
    assert list(per_user_by_seed(tmp_path, "simgcl", tuned=False)[0]) == [2]


def test_an_unknown_row_names_what_to_pass(tmp_path):
    with pytest.raises(SystemExit, match="record stem"):
        per_user_by_seed(tmp_path, "nope")
    write_row(tmp_path, "bpr", [0], lambda seed, user: 0.3, record={})
    with pytest.raises(SystemExit, match="--older"):
        per_user_by_seed(tmp_path, "bpr")


def test_a_stem_searched_under_two_budgets_is_two_rows(tmp_path):
    write_row(tmp_path, "sgl", [0], lambda seed, user: 0.3)
    write_row(tmp_path, "sgl", [1], lambda seed, user: 0.3, record={"tuning": {"text": "random search of 16 trials"}})
    with pytest.raises(SystemExit, match="different budgets"):
        per_user_by_seed(tmp_path, "sgl")


def test_the_verdict_names_the_stored_metric_and_rows_of_different_metrics_are_not_paired(tmp_path):
    runs = tmp_path / "toy"
    runs.mkdir()
    sequential = {**TUNED, "per_user": {"file": "x", "metric": "ndcg@10"}}
    write_row(runs, "seq-a", [0], lambda seed, user: 0.5 + 0.01 * (user % 7), sequential)
    write_row(runs, "seq-b", [0], lambda seed, user: 0.4, sequential)
    write_row(runs, "general", [0], lambda seed, user: 0.4)
    (line,) = main(["toy", "seq-a", "seq-b", "--runs", str(tmp_path)])
    assert "test ndcg@10 over 40 (seed, user) pairs" in line
    with pytest.raises(SystemExit, match="seq-a stores per-user ndcg@10, general ndcg@20"):
        main(["toy", "seq-a", "general", "--runs", str(tmp_path)])


def test_a_row_named_with_its_folder_is_read_there_in_that_folders_one_section(tmp_path):
    # the board's row from an equal-budget search, a grid's control beside it without one (same tuned file)
    board, grid = tmp_path / "runs", tmp_path / "grid" / "runs"
    (board / "toy").mkdir(parents=True)
    (grid / "toy").mkdir(parents=True)
    write_row(board / "toy", "hybrid", [0, 1], lambda seed, user: 0.5 + 0.01 * (user % 7))
    write_row(grid / "toy", "control", [0, 1], lambda seed, user: 0.4, record={})
    (line,) = main(["toy", "hybrid", f"{grid}/control", "--runs", str(board)])
    assert line.startswith(f"hybrid is **ahead** of {grid}/control") and "from 2 seed(s)" in line
    with pytest.raises(SystemExit, match="no records from an equal-budget search"):
        main(["toy", "hybrid", "control", "--runs", str(board)])  # not on the board
    # where the folder holds both sections, the equal-budget one, or the older with --older
    write_row(grid / "toy", "control", [2], lambda seed, user: 0.6)
    assert list(per_user_by_seed(grid / "toy", "control", tuned=None)[0]) == [2]
    (line,) = main(["toy", f"{grid}/control", f"{grid}/control", "--older", "--runs", str(board)])
    assert "from 2 seed(s)" in line
