"""benchmark/hybrid.py: the residual filter's settings experiments/hybrid_grid.sh passes are the filter's on the
dataset's board (its tuned file there, else its paper's YAML), and MGFormer accepts them as they are printed."""

import json
import subprocess
import sys

import pytest
from conftest import REPOSITORY as ROOT

from recbole_mgformer.benchmark.hybrid import board_overrides, filter_settings_source, residual_arguments
from recbole_mgformer.benchmark.tuning import read_settings
from recbole_mgformer.config.command_line import parse_overrides
from recbole_mgformer.model.filter_residual import FILTERS, filter_defaults


def test_a_tuned_filter_gives_its_tuned_low_rank_part():
    source = filter_settings_source("amazon-beauty", "gfcf")
    assert source.endswith("properties/benchmark/amazon-beauty/GFCF.yaml")
    tuned = read_settings(source)
    assert residual_arguments("amazon-beauty", "gfcf") == [
        f"--filter_residual_k={tuned['k']}",
        f"--filter_residual_alpha={tuned['alpha']}",
    ]


def test_without_a_tuned_file_the_papers_settings_and_nothing_more():
    assert filter_settings_source("gowalla-full", "chebycf").endswith("properties/model/ChebyCF.yaml")
    assert residual_arguments("gowalla-full", "chebycf") == ["--filter_residual_k=512", "--filter_residual_alpha=0.2"]


@pytest.mark.parametrize("dataset", ["amazon-beauty", "ml-100k"])
@pytest.mark.parametrize("kind", sorted(FILTERS))
def test_the_arguments_give_the_filter_exactly_its_settings_on_the_board(dataset, kind):
    filter_class, rank_key, share_key = FILTERS[kind]
    tuned = read_settings(filter_settings_source(dataset, kind))
    overrides = parse_overrides(residual_arguments(dataset, kind))  # as run.py and the benchmark read them
    given = {
        **filter_defaults(filter_class.__name__),
        **overrides.get("filter_residual_settings", {}),
        rank_key: overrides["filter_residual_k"],
        share_key: overrides["filter_residual_alpha"],
    }
    assert {key: given[key] for key in tuned} == tuned
    assert not set(overrides.get("filter_residual_settings", {})) & {rank_key, share_key, "filter_batch_size"}


def test_the_command_prints_the_arguments_on_one_line_and_refuses_an_unknown_filter():
    command = [sys.executable, "-m", "recbole_mgformer.benchmark.hybrid"]
    done = subprocess.run([*command, "ml-100k", "bspm"], capture_output=True, text=True, check=True)
    assert done.stdout.split() == residual_arguments("ml-100k", "bspm")
    assert "properties/benchmark/ml-100k/BSPM.yaml" in done.stderr
    refused = subprocess.run([*command, "ml-100k", "ease"], capture_output=True, text=True)
    assert refused.returncode != 0 and "unknown filter 'ease'; choose one of gfcf, chebycf, bspm" in refused.stderr


def test_validation_chooses_the_best_entry_of_a_grid_and_the_first_of_equal_scores(tmp_path, capsys):
    import json

    from recbole_mgformer.benchmark.entries import parse_entry, variant_name
    from recbole_mgformer.benchmark.hybrid import best_on_validation, main
    from recbole_mgformer.benchmark.runs import record_path

    entries = [f"MGFormer[attention=False; filter_residual=gfcf; filter_residual_weight={w}]" for w in (0.5, 1, 2)]
    for entry, score in zip(entries, (0.30, 0.32, 0.32)):
        path = record_path(tmp_path, "tiny", variant_name(*parse_entry(entry)), 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"valid": {"ndcg@20": score}}))
    assert best_on_validation(tmp_path, "tiny", entries) == entries[1]
    assert best_on_validation(tmp_path, "tiny", entries[::-1]) == entries[2]
    with pytest.raises(FileNotFoundError, match="run the grid before choosing"):
        best_on_validation(tmp_path, "tiny", [*entries, entries[0].replace("0.5", "4")])
    main(["--best-on-validation", str(tmp_path), "tiny", *entries])
    assert capsys.readouterr().out == entries[1] + "\n"
    # the script's second process, done with its share while the other still trains, stops with the reason
    with pytest.raises(SystemExit, match=r"^error: .* has no record at seed 0 .*: run the grid before choosing$"):
        main(["--best-on-validation", str(tmp_path), "tiny", entries[0].replace("0.5", "4")])


@pytest.mark.parametrize(
    "argv", [[], ["ml-100k"], ["ml-100k", "bspm", "runs", "gfcf"], ["--promote"], ["--help", "x"], ["--help", "x", "y"]]
)
def test_the_command_given_the_wrong_arguments_prints_its_usage(argv):
    from recbole_mgformer.benchmark.hybrid import main

    with pytest.raises(SystemExit, match="^usage: "):
        main(argv)


def test_the_chosen_grid_run_goes_on_the_board_once_as_chosen_on_validation(tmp_path, capsys, monkeypatch):
    import json

    from recbole_mgformer.benchmark.entries import parse_entry, variant_name
    from recbole_mgformer.benchmark.hybrid import main, promote_chosen
    from recbole_mgformer.benchmark.runs import record_path
    from recbole_mgformer.benchmark.stats import per_user_path

    entry = (
        "MGFormer[attention=False; filter_residual=gfcf; filter_residual_weight=0.5; filter_residual_in_training=True]"
    )
    grid, board = tmp_path / "results" / "exploration" / "grid" / "runs", tmp_path / "results" / "runs"
    source = record_path(grid, "tiny", variant_name(*parse_entry(entry)), 0)
    source.parent.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="run the grid before promoting"):
        promote_chosen(grid, board, "tiny", entry)
    source.write_text(json.dumps({"choice_made_on": "none", "test": {"ndcg@20": 0.3}}))
    per_user_path(source).write_bytes(b"per-user values")
    target = promote_chosen(grid, board, "tiny", entry)
    promoted = json.loads(target.read_text())
    assert promoted == {
        "choice_made_on": "validation",
        "test": {"ndcg@20": 0.3},
        "promoted_from": f"results/exploration/grid/runs/tiny/{source.name}",
    }
    # where the board's folder holds the search that chose the tuned file, the record names it as a run there would
    searched = {"search": "tuning/tiny/MGFormer.md"}
    monkeypatch.setattr(
        "recbole_mgformer.benchmark.hybrid.search_info", lambda file, results: {**searched, "in": str(results)}
    )
    target.unlink()
    assert json.loads(promote_chosen(grid, board, "tiny", entry).read_text())["tuning"] == {
        **searched,
        "in": str(tmp_path / "results"),
    }
    monkeypatch.undo()
    target.unlink()
    promote_chosen(grid, board, "tiny", entry)
    assert per_user_path(target).read_bytes() == b"per-user values"
    assert json.loads(source.read_text())["choice_made_on"] == "none"  # the grid keeps its own
    main(["--promote", str(grid), str(board), "tiny", entry])  # the board has it: left as it is
    assert "on the board already" in capsys.readouterr().err and json.loads(target.read_text()) == promoted
    # a scored record names its trained entry's paths in the grid; a chosen record came from no grid
    for refused, match in (
        ({"choice_made_on": "none", "scored_from": {"variant": "x"}}, "score it on the board"),
        ({"choice_made_on": "validation"}, "not a grid's run"),
    ):
        target.unlink(missing_ok=True)
        source.write_text(json.dumps(refused))
        with pytest.raises(ValueError, match=match):
            promote_chosen(grid, board, "tiny", entry)


def test_the_filters_row_on_the_board_gives_its_settings_over_the_file(tmp_path):
    # yelp2018's BSPM row runs at its README's Yelp2018 settings, given on the entry; the grid's residual had the
    # YAML's (k 448, alpha 0.2), another filter than the page's row
    board = tmp_path / "runs"
    (board / "toy").mkdir(parents=True)
    settings = {"T_s": 1.2, "factor_dim": 384, "idl_beta": 0.3, "solver_sharpen": "euler", "t_point_combination": True}
    row = board / "toy" / "bspm-solver-sharpen-euler-seed0.json"
    row.write_text(json.dumps({"model": "BSPM", "overrides": settings}))
    (board / "toy" / "gfcf-seed0.json").write_text(json.dumps({"model": "GFCF", "overrides": {}}))
    assert board_overrides(board, "toy", "bspm") == (settings, row)
    assert residual_arguments("toy", "bspm", board_overrides(board, "toy", "bspm")[0]) == [
        "--filter_residual_k=384",
        "--filter_residual_alpha=0.3",
        "--filter_residual_settings={'T_s':1.2,'solver_sharpen':'euler','t_point_combination':True}",
    ]
    assert board_overrides(board, "toy", "gfcf") == ({}, board / "toy" / "gfcf-seed0.json")  # its row has none
    assert board_overrides(board, "other", "bspm") == ({}, None)  # no row: the file's settings
    # two rows at two settings: the hybrid's filter is a choice the command does not make
    (board / "toy" / "bspm-seed0.json").write_text(json.dumps({"model": "BSPM", "overrides": {}}))
    with pytest.raises(ValueError, match=r"BSPM has rows at 2 settings on toy's board .*give it as FILTER_ARGS"):
        board_overrides(board, "toy", "bspm")
    command = [sys.executable, "-m", "recbole_mgformer.benchmark.hybrid", "toy", "bspm", str(board)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("error: BSPM has rows at 2 settings") and not done.stdout


def test_the_committed_yelp2018_board_gives_bspm_its_readmes_settings():
    overrides, _ = board_overrides(ROOT / "results" / "runs", "yelp2018", "bspm")
    assert residual_arguments("yelp2018", "bspm", overrides) == [
        "--filter_residual_k=384",
        "--filter_residual_alpha=0.3",
        "--filter_residual_settings={'T_s':1.2,'solver_sharpen':'euler','t_point_combination':True}",
    ]
