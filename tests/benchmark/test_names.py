"""Short display names of leaderboard rows and the hybrid's choice (benchmark/names.py): one table beside the
records names the rows, a long unlisted name is cut to fit with a warning, two rows never share a name, and a hybrid
whose weight was chosen on the items it is scored on is refused unless its name says so."""

import json
import shutil
from pathlib import Path

import pytest

from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.general import scored_lines
from recbole_mgformer.benchmark.names import (
    MAX_LENGTH,
    Names,
    check_choice_named,
    chosen_on_scored_items,
    cut_to_fit,
    filter_note,
    load_names,
    name_records,
    short_name,
)

ROOT = Path(__file__).resolve().parents[2]
HYBRID = "MGFormer attention=False epochs=30 filter_residual=chebycf filter_residual_weight=0.5"


def hybrid(choice=None, test_from_valid_pass=False, **extra):
    record = {
        "variant": HYBRID,
        "model": "MGFormer",
        "overrides": {"attention": False, "epochs": 30, "filter_residual": "chebycf", "filter_residual_weight": 0.5},
        "test_from_valid_pass": test_from_valid_pass,
        **extra,
    }
    if choice is not None:
        record["choice_made_on"] = choice
    return record


def test_a_row_takes_its_folders_name_else_the_common_one_else_its_own():
    names = Names(common={"GFCF": "GF-CF", HYBRID: "tokens + ChebyCF (0.5)"}, folders={"runs/g": {HYBRID: "x"}})
    assert short_name(names, "runs/g", HYBRID) == "x"
    assert short_name(names, "runs/other", HYBRID) == "tokens + ChebyCF (0.5)"
    assert short_name(names, "runs/g", "GFCF") == "GF-CF"
    assert short_name(names, "runs/g", "SimGCL epochs=20") == "SimGCL epochs=20"


@pytest.mark.parametrize("length", [MAX_LENGTH + 1, 60, 200])
def test_an_unlisted_long_name_is_cut_to_fit_with_a_warning_and_two_stay_apart(length):
    warned = []
    long_a, long_b = "a" * length, "a" * (length - 1) + "b"
    shown_a = short_name(Names({}, {}), "runs/x", long_a, warned.append)
    shown_b = short_name(Names({}, {}), "runs/x", long_b, warned.append)
    assert len(shown_a) <= MAX_LENGTH and len(shown_b) <= MAX_LENGTH and shown_a != shown_b
    assert shown_a == cut_to_fit(long_a) and len(warned) == 2 and "names.yaml" in warned[0]


def test_two_rows_of_one_folder_may_not_share_a_name():
    records = [{"variant": "A x=1"}, {"variant": "A x=2"}]
    with pytest.raises(ValueError, match="would both be shown as 'A'"):
        name_records(records, Names({"A x=1": "A", "A x=2": "A"}, {}), "runs/d")
    records = [{"variant": "A x=1"}, {"variant": "A"}]  # a short name may not take another row's own name either
    with pytest.raises(ValueError, match="would both be shown as 'A'"):
        name_records(records, Names({"A x=1": "A"}, {}), "runs/d")


def test_naming_keeps_the_records_own_name():
    records = name_records([{"variant": "GFCF"}, {"variant": "GFCF"}], Names({"GFCF": "GF-CF"}, {}), "runs/d")
    assert [(r["variant"], r["full_variant"]) for r in records] == [("GF-CF", "GFCF")] * 2


def test_the_entry_a_row_was_scored_from_takes_its_short_name_off_the_page_too():
    # a grid's control is not on the board: the note under the table names it by its short name, not its settings
    records = [{"variant": "M w=1", "scored_from": {"variant": "M epochs=6 loss=softmax"}}]
    names = Names({"M w=1": "M + F (1)", "M epochs=6 loss=softmax": "M softmax e6"}, {})
    note = scored_lines(name_records(records, names, "runs/d"))[1]
    assert "M + F (1) from M softmax e6." in note
    records = [{"variant": "M w=1", "scored_from": {"variant": "M"}}, {"variant": "M"}]  # on the page: as its row
    named = name_records(records, Names({"M": "M-row"}, {}), "runs/d")
    assert named[1]["variant"] == "M-row" and "from M-row." in scored_lines(named)[1]


@pytest.mark.parametrize(
    "text, message",
    [
        ("names: {A: " + "x" * (MAX_LENGTH + 1) + "}", "has 41 characters"),
        ("names: {A: ''}", "must have a short name"),
        ("names: [A]", "must map"),
        ("other: {}", "expected the keys"),
        ("folders: {runs/x: [A]}", "folders: runs/x must map"),
        ("names: {A: [", "not readable YAML"),
    ],
)
def test_a_bad_names_table_is_an_error_naming_the_file(tmp_path, text, message):
    (tmp_path / "names.yaml").write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        load_names(tmp_path)
    assert "names.yaml" in str(error.value)


def test_the_committed_names_table_reads_and_every_name_fits():
    names = load_names(ROOT / "results")
    every = list(names.common.values()) + [n for folder in names.folders.values() for n in folder.values()]
    assert every and all(len(name) <= MAX_LENGTH for name in every)


@pytest.mark.parametrize(
    "choice, on_test_items, refused",
    [
        ("test", False, True),  # chosen on the test items outright
        ("test", True, True),
        ("validation", True, True),  # a validation pass that is the test pass (the -full protocols)
        (None, True, True),  # unstated, where the only held-out set is the test set
        ("validation", False, False),  # a validation set of its own (Amazon Beauty, ml-100k)
        (None, False, False),
        ("none", True, False),  # a grid point: every weight is shown, none chosen
    ],
)
def test_a_hybrid_chosen_on_its_scored_items_must_say_so_in_its_name(choice, on_test_items, refused):
    """And only such a hybrid: a name that says test-picked of a weight chosen elsewhere is refused too."""
    record = hybrid(choice, on_test_items)
    assert chosen_on_scored_items(record) is refused
    if refused:
        check_choice_named(record, "MGFormer tokens + ChebyCF (test-picked)")
        with pytest.raises(ValueError, match="must say so: give it a short name with 'test-picked'"):
            check_choice_named(record, "MGFormer tokens + ChebyCF (0.5)")
    else:
        check_choice_named(record, "MGFormer tokens + ChebyCF (0.5)")
        with pytest.raises(ValueError, match="was not chosen on the items it is scored on .*without it in names.yaml"):
            check_choice_named(record, "MGFormer tokens + ChebyCF (test-picked)")


def test_a_weight_carried_from_another_splits_validation_is_not_chosen_on_the_scored_items():
    carried = hybrid("validation", True, dataset="gowalla-full", choice_dataset="gowalla")
    assert not chosen_on_scored_items(carried)
    check_choice_named(carried, "MGFormer tokens + ChebyCF (0.5)")
    with pytest.raises(ValueError, match="picked on gowalla's validation"):
        check_choice_named(carried, "MGFormer tokens + ChebyCF (test-picked)")
    assert filter_note(carried) == "ChebyCF 0.5, picked on gowalla's validation"
    # its own dataset named: the ordinary rules
    assert chosen_on_scored_items(hybrid("validation", True, dataset="gowalla-full", choice_dataset="gowalla-full"))
    with pytest.raises(ValueError, match="choice_made_on must be 'validation', not 'test'"):
        chosen_on_scored_items(hybrid("test", True, dataset="gowalla-full", choice_dataset="gowalla"))


@pytest.mark.parametrize(
    "argv, fields",
    [
        ([], {}),
        (["--choice-made-on", "none"], {"choice_made_on": "none"}),
        (
            ["--choice-made-on", "validation", "--choice-dataset", "gowalla"],
            {"choice_made_on": "validation", "choice_dataset": "gowalla"},
        ),
    ],
)
def test_the_benchmark_writes_where_a_hybrids_weight_was_chosen_into_its_records(argv, fields):
    from types import SimpleNamespace

    from recbole_mgformer.benchmark.cli import choice_fields
    from recbole_mgformer.benchmark.run_record import record_head

    args = SimpleNamespace(choice_made_on=None, choice_dataset=None)
    for option, value in zip(argv[::2], argv[1::2]):
        setattr(args, option.lstrip("-").replace("-", "_"), value)
    choice = choice_fields(args)
    assert choice == fields

    def head(overrides):
        run = SimpleNamespace(
            dataset="gowalla-full", model="MGFormer", variant="v", overrides=overrides, seed=0, tuned_file=None,
            results=".", choice=choice, best_epoch_fields=lambda *args: {},
        )  # fmt: skip
        return record_head(run, {}, None, {}, {}, None, None, None, None)

    hybrid_head = head(hybrid()["overrides"])
    assert {key: hybrid_head[key] for key in fields} == fields
    assert not set(fields) & set(head({"attention": False}))  # a model without a filter: no choice to state


def test_a_choice_dataset_without_a_validation_choice_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--models", "BPR", "--datasets", "ml-100k", "--choice-dataset", "gowalla", "--choice-made-on", "test"])
    assert "add --choice-made-on validation" in capsys.readouterr().err


def test_a_model_without_a_filter_is_no_hybrid_and_an_unknown_choice_is_an_error():
    record = {**hybrid("test", True), "overrides": {"attention": False}}
    assert not chosen_on_scored_items(record)
    with pytest.raises(ValueError, match="choice_made_on is 'train'"):
        chosen_on_scored_items(hybrid("train"))


def test_the_filter_note_says_filter_weight_and_where_it_was_chosen():
    assert filter_note(hybrid("test")) == "ChebyCF 0.5, test-picked"
    assert filter_note(hybrid("validation")) == "ChebyCF 0.5, picked on validation"
    assert filter_note(hybrid("none")) == "ChebyCF 0.5, weight fixed"
    assert filter_note({"overrides": {}}) is None


def test_the_renderer_refuses_a_test_picked_hybrid_without_the_word_and_renders_it_with_it(tmp_path, capsys):
    folder = tmp_path / "results" / "runs" / "gowalla-full"
    folder.mkdir(parents=True)
    source = ROOT / "results" / "runs" / "gowalla-full"
    stem = (
        "mgformer-attention-false-embedding-size-128-structural-size-128-learning-rate-0-005-uniformity-weight-0-84-"
        "epochs-30-filter-residual-chebycf-filter-residual-weight-0-5-seed0"
    )
    shutil.copy(source / f"{stem}.json", folder)
    shutil.copy(source / f"{stem}.users.json.gz", folder)
    record = json.loads((folder / f"{stem}.json").read_text())
    assert record["choice_made_on"] == "test" and record["test_from_valid_pass"] is True
    (tmp_path / "results" / "names.yaml").write_text(f'names:\n  "{record["variant"]}": MGFormer tokens + ChebyCF\n')
    with pytest.raises(SystemExit) as stop:
        main(["--render-only", "--results", str(tmp_path / "results")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "was chosen on the test items" in err and "test-picked" in err
    (tmp_path / "results" / "names.yaml").write_text(
        f'names:\n  "{record["variant"]}": MGFormer tokens + ChebyCF (test-picked)\n'
    )
    assert main(["--render-only", "--results", str(tmp_path / "results")]) == 0
    page = (tmp_path / "results" / "gowalla" / "leaderboard.md").read_text()
    assert "| MGFormer tokens + ChebyCF (test-picked) | 1 |" in page


def test_every_committed_hybrid_states_where_its_weight_was_chosen():
    for path in sorted((ROOT / "results").rglob("*.json")):
        if "runs" not in path.parts:
            continue
        record = json.loads(path.read_text())
        if isinstance(record, dict) and (record.get("overrides") or {}).get("filter_residual"):
            assert record.get("choice_made_on") in ("validation", "test", "none"), path
