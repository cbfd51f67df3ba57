import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.robustness_sweep import (  # noqa: E402
    GROUPS,
    Outcome,
    Result,
    classify,
    drop_option,
    main,
    render,
    selected,
)


@pytest.mark.parametrize(
    "outcome, verdict",
    [
        (Outcome(2, "", "error: --dataset '../x' is not a dataset name\n"), "clear error"),
        (Outcome(1, "", "Traceback (most recent call last):\n  File ...\nKeyError: 'user_id'\n"), "traceback"),
        (Outcome(1, "", "", "Traceback (most recent call last):\nValueError\n"), "traceback"),
        (Outcome(1, "", ""), "traceback"),  # a failure without a word is no clear error
        (Outcome(None, "half", ""), "hang"),
        (Outcome(0, "BPR on tiny\n", "a warning\n"), "accepted"),
    ],
)
def test_commands_are_classified_by_outcome_not_by_their_words(outcome, verdict):
    assert classify(outcome) == verdict


def test_the_wrong_value_replaces_the_option_in_either_spelling():
    assert drop_option(["--k", "3", "--users=u1", "--flag"], "--k") == ["--users=u1", "--flag"]
    assert drop_option(["--k=3", "--users", "u1"], "--users") == ["--k=3"]
    assert selected(GROUPS, "kill,atom") == ["atomic", "kill"] and selected(GROUPS, "") == list(GROUPS)


def test_the_page_counts_every_outcome_and_lists_the_bad_ones():
    results = [
        Result("g", "a", "clear error"),
        Result("g", "b", "traceback", "KeyError: 'x'"),
        Result("h", "c", "recovery"),
    ]
    page = render(results, ["# Robustness sweep"])
    assert "3 cases: 1 clear error, 1 recovery, 0 accepted, 1 traceback" in page
    assert "- g, b: **traceback** (KeyError: 'x')" in page and "| h | 1 |  | 1 |" in page


def test_a_quick_sweep_of_names_and_outputs_writes_its_page_with_no_bad_outcome(tmp_path):
    output = tmp_path / "robustness.md"
    results = main(
        ["--quick", "--cases", "dataset,output", "--output", str(output), "--workdir", str(tmp_path / "work")]
    )
    page = output.read_text()
    assert "`python experiments/robustness_sweep.py --quick --seed 0 --cases dataset,output` at commit" in page
    assert "torch " in page and "CPUs" in page  # versions and machine
    assert {r.group for r in results} == {"dataset name", "existing output"} and len(results) >= 6
    assert [r for r in results if r.outcome not in ("clear error", "recovery", "accepted")] == []
    assert f"{len(results)} cases: {len(results)} clear error" in page
