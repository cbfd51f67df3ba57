"""The verdicts under a general table (benchmark/general_verdicts.py): a hybrid whose filter weight was chosen on
the items it is scored on says so in every verdict line about it."""

import json

import pytest

from recbole_mgformer.benchmark.general import rows_of
from recbole_mgformer.benchmark.general_verdicts import TEST_PICKED_NOTE, verdict_lines
from recbole_mgformer.benchmark.stats import write_per_user


def rows(tmp_path, choice, test_from_valid_pass):
    hybrid = {"attention": False, "filter_residual": "bspm", "filter_residual_weight": 0.5}
    specs = [
        ("MGFormer tokens + BSPM", "MGFormer", hybrid, 0.2, {"choice_made_on": choice}),
        ("MGFormer tokens", "MGFormer", {"attention": False}, 0.0, {}),
        ("BSPM", "BSPM", {}, 0.1, {}),
        ("EASE", "EASE", {}, 0.05, {}),
    ]
    records = []
    for variant, model, overrides, shift, extra in specs:
        path = tmp_path / f"{model}-{len(records)}-seed0.json"
        record = {
            "variant": variant,
            "model": model,
            "seed": 0,
            "overrides": overrides,
            "test": {"recall@20": 0.2 + shift, "ndcg@20": 0.1 + shift},
            "valid": {"ndcg@20": 0.1 + shift},
            "test_from_valid_pass": test_from_valid_pass,
            "per_user": {"file": "x", "metric": "ndcg@20"},
            "_path": str(path),
            **extra,
        }
        path.write_text(json.dumps(record))
        write_per_user(path, {f"u{u}": (u % 5) / 5 + shift + 0.001 * u for u in range(40)})
        records.append(record)
    return rows_of(records)


@pytest.mark.parametrize(
    "choice, on_test_items, said", [("test", True, True), ("validation", True, True), ("validation", False, False)]
)
def test_every_verdict_on_a_hybrid_chosen_on_its_scored_items_says_so(tmp_path, choice, on_test_items, said):
    lines = verdict_lines(rows(tmp_path, choice, on_test_items), same_size=False)
    about_hybrid = [line for line in lines if "MGFormer tokens + BSPM is" in line]
    assert {line.split(":")[0] for line in about_hybrid} == {"Verdict", "Against each model", "Filter"}
    assert all(line.endswith(TEST_PICKED_NOTE) == said for line in about_hybrid)
    others = [line for line in lines if line not in about_hybrid]
    assert others and not any(TEST_PICKED_NOTE in line for line in others)


def test_at_fixed_settings_the_leading_mgformer_row_is_set_against_every_other_model(tmp_path):
    lines = verdict_lines(rows(tmp_path, "validation", False), same_size=True)
    every = [line for line in lines if line.startswith("Against each model:")]
    assert len(every) == 1  # the lead only: the tokens alone (behind it) get no such line
    assert every[0].startswith("Against each model: MGFormer tokens + BSPM is **ahead** of BSPM (")
    assert "**ahead** of EASE (" in every[0] and "MGFormer tokens (" not in every[0]


def test_a_fixed_section_with_one_other_model_needs_no_line_beside_its_verdict(tmp_path):
    section = [row for row in rows(tmp_path, "validation", False) if row["variant"] != "EASE"]
    lines = verdict_lines(section, same_size=True)
    assert not [line for line in lines if line.startswith("Against each model:")]
    assert [line for line in lines if line.startswith("Verdict: MGFormer tokens + BSPM is **ahead** of BSPM")]
