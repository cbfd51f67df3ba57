"""The summary that opens results/README.md (benchmark/summary.py): rendered from the records by --render-only,
between its markers, every cell from a record, and a rerun changes nothing."""

import json
import re
import statistics
from pathlib import Path

import pytest

from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.names import load_names
from recbole_mgformer.benchmark.render import named_records
from recbole_mgformer.benchmark.stats import write_per_user
from recbole_mgformer.benchmark.summary import END, LEVEL, START, duration, summary_row, with_summary

ROOT = Path(__file__).resolve().parents[2]
USERS = 60


def write_row(results, dataset, variant, model, ndcg, *, seeds=(0,), overrides=None, shift=0.0, fit=(2.0, 4), **extra):
    """A row's records (one per seed) and their per-user values: user u scores (u % 7) / 7 * ndcg-ish + shift."""
    folder = results / "runs" / dataset
    folder.mkdir(parents=True, exist_ok=True)
    per_epoch, best = fit
    for seed in seeds:
        record = {
            "variant": variant,
            "model": model,
            "seed": seed,
            "overrides": overrides or {},
            "test": {"recall@20": 2 * ndcg, "ndcg@20": ndcg},
            "valid": {"ndcg@20": ndcg},
            "best_epoch": best,
            "epochs": best + 1,
            "train_seconds_per_epoch": per_epoch,
            "machine": "cpu",
            "commit": "abc",
            "per_user": {"file": "x", "metric": "ndcg@20"},
            **extra,
        }
        path = folder / f"{re.sub(r'[^a-z0-9]+', '-', variant.lower())}-seed{seed}.json"
        path.write_text(json.dumps(record))
        write_per_user(path, {f"u{u}": (u % 7) / 7 + shift + 0.001 * ((u * 31 + seed) % 5) for u in range(USERS)})


TUNED = {"tuning": {"text": "random search of 16 trials", "search": "s.md", "budget": 16}}


def tiny_results(tmp_path, readme="# Results\n\nHand-written text.\n"):
    results = tmp_path / "results"
    write_row(results, "ml-100k", "SLIMElastic", "SLIMElastic", 0.35, seeds=(0, 1), fit=(30.0, 0), **TUNED)
    write_row(results, "ml-100k", "EASE", "EASE", 0.3499, seeds=(0, 1), fit=(1.0, 0), **TUNED)  # level: same users
    write_row(results, "ml-100k", "ChebyCF", "ChebyCF", 0.30, seeds=(0, 1), shift=-0.2, fit=(0.5, 0), **TUNED)
    write_row(
        results, "ml-100k", "MGFormer attention=False", "MGFormer", 0.31, seeds=(0, 1), shift=-0.1,
        overrides={"attention": False}, **TUNED,
    )  # fmt: skip
    write_row(
        results,
        "ml-100k",
        "MGFormer degree_mask=none",
        "MGFormer",
        0.36,
        seeds=(0, 1),
        overrides={"degree_mask": "none"},
        **TUNED,
    )  # fmt: skip  (an ablation: on the page, not in the summary)
    hybrid = {"attention": False, "filter_residual": "chebycf", "filter_residual_weight": 0.5}
    write_row(results, "gowalla-full", "ChebyCF", "ChebyCF", 0.16, fit=(150.0, 0), test_from_valid_pass=True)
    write_row(
        results, "gowalla-full", "MGFormer attention=False filter_residual=chebycf filter_residual_weight=0.5",
        "MGFormer", 0.17, shift=0.1, overrides=hybrid, fit=(100.0, 29), epoch_cap=30, test_from_valid_pass=True,
        choice_made_on="test",
    )  # fmt: skip
    (results / "names.yaml").write_text(
        "names:\n  MGFormer attention=False: MGFormer tokens\n"
        "folders:\n  runs/gowalla-full:\n"
        '    "MGFormer attention=False filter_residual=chebycf filter_residual_weight=0.5": '
        "MGFormer tokens + ChebyCF (test-picked)\n"
    )
    (results / "data_properties.json").write_text(
        json.dumps(
            {
                "datasets": {
                    "ml-100k": {"interactions_per_item": 59.45, "density": 0.063047},
                    "gowalla": {"interactions_per_item": 25.07, "density": 0.00084},
                }
            }
        )
    )
    if readme is not None:
        (results / "README.md").write_text(readme)
    return results


def summary_of(readme):
    text = readme.read_text()
    return text[text.index(START) : text.index(END) + len(END)]


def table_rows(block):
    """The rows of the summary's table (its first), header included, the rule line left out."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [line for line in lines[start:end] if line.startswith("| ")]


def test_the_summary_opens_the_readme_with_its_table_rule_and_the_rest_kept(tmp_path):
    results = tiny_results(tmp_path)
    assert main(["--render-only", "--results", str(results)]) == 0
    text = (results / "README.md").read_text()
    assert text.startswith("# Results\n\n" + START) and text.endswith(END + "\n\nHand-written text.\n")
    block = summary_of(results / "README.md")
    rows = {cells_of(row)[1]: cells_of(row) for row in table_rows(block)[1:]}
    header = table_rows(block)[0]
    assert "[ml-100k](ml-100k/leaderboard.md)" in header and "[Gowalla](gowalla/leaderboard.md)" in header
    assert "Amazon Beauty" not in header  # a dataset without records has no column
    assert rows["SLIMElastic"][2] == "**0.3500** / **0.7000** · 30 s"
    assert rows["EASE"][:3] == ["item-item", "EASE", "0.3499 ≈ / 0.6998 · 1 s"]  # level with the best: paired test
    assert rows["ChebyCF"][2] == "0.3000 / 0.6000 · <1 s"  # behind: no mark
    assert rows["MGFormer tokens"][:4] == ["MGFormer family", "MGFormer tokens", "0.3100 / 0.6200 · 10 s", "–"]
    assert rows["MGFormer tokens + filter"][2:] == ["–", "**0.1700** / **0.3400** · 50 min (ChebyCF 0.5, test-picked)"]
    assert "0.3600" not in block  # an ablation stays on its page
    assert "BPR" not in rows  # a model with no run on any column has no row
    protocol = " | ".join(rows[""])
    assert "equal-budget search, 16 trials a model, 2 seeds" in protocol
    assert "fixed settings (the papers' where given), 1 seed, capped at 30 epochs; epochs chosen on test" in protocol
    assert "| *data* | interactions per item | 59.5 | 25.1 |" in block
    assert "| *data* | density | 6.3% | 0.084% |" in block
    assert "take **EASE**, level with the best row" in block  # as good by the paired test, 30 times as fast
    assert "take **MGFormer tokens + filter**, the best row: Gowalla 0.1700 in 50 min (weight test-picked)" in block
    assert "**Within 10 minutes to fit**, the best row: Gowalla ChebyCF, 0.1600 (-5.9% against the best)" in block


@pytest.mark.parametrize("carried_ndcg", [0.165, 0.175])
def test_a_hybrid_chosen_on_validation_takes_the_cell_over_a_test_picked_one(tmp_path, carried_ndcg):
    """Whatever their scores: the test-picked weight was chosen on the items the row is scored on."""
    results = tiny_results(tmp_path)
    carried = {"attention": False, "filter_residual": "bspm", "filter_residual_weight": 1}
    write_row(
        results, "gowalla-full", "MGFormer attention=False filter_residual=bspm filter_residual_weight=1",
        "MGFormer", carried_ndcg, shift=0.1, overrides=carried, fit=(100.0, 29), epoch_cap=30,
        test_from_valid_pass=True, choice_made_on="validation", choice_dataset="gowalla",
    )  # fmt: skip
    assert main(["--render-only", "--results", str(results)]) == 0
    block = summary_of(results / "README.md")
    rows = {cells_of(row)[1]: cells_of(row) for row in table_rows(block)[1:]}
    cell = rows["MGFormer tokens + filter"][3]
    assert cell.endswith(" · 50 min (BSPM 1, picked on gowalla's validation)"), cell
    assert cell.startswith(f"**{carried_ndcg:.4f}**"), cell  # the best row left: the test-picked one is not shown
    assert "test-picked" not in cell and "(weight test-picked)" not in block


def test_a_rerun_changes_nothing_and_a_stale_block_is_replaced(tmp_path):
    results = tiny_results(tmp_path)
    assert main(["--render-only", "--results", str(results)]) == 0
    first = {p: p.read_bytes() for p in sorted(results.rglob("*")) if p.is_file()}
    readme = results / "README.md"
    readme.write_text(readme.read_text().replace("0.3499", "0.9999"))
    assert main(["--render-only", "--results", str(results)]) == 0
    assert {p: p.read_bytes() for p in sorted(results.rglob("*")) if p.is_file()} == first  # pictures included


def test_without_a_readme_or_records_of_the_four_datasets_no_summary_is_written(tmp_path):
    results = tiny_results(tmp_path, readme=None)
    assert main(["--render-only", "--results", str(results)]) == 0
    assert not (results / "README.md").exists()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("# Results\n\nBody.\n", "# Results\n\nBLOCK\n\nBody.\n"),
        ("Preamble\n# Results\nBody.\n", "Preamble\n# Results\n\nBLOCK\n\nBody.\n"),
        ("No title.\n", "BLOCK\n\nNo title.\n"),
        (f"# Results\n\n{START}\nold\n{END}\n\nBody.\n", "# Results\n\nBLOCK\n\nBody.\n"),
    ],
)
def test_the_block_goes_under_the_title_or_between_its_markers(text, expected):
    assert with_summary(text, "BLOCK") == expected


def test_durations_read_at_a_glance():
    shown = [duration(s) for s in (None, 0.4, 19.2, 150, 3000, 17858)]
    assert shown == ["–", "<1 s", "19 s", "2.5 min", "50 min", "5.0 h"]


def test_summary_rows_group_models_and_leave_ablations_and_probes_out():
    assert summary_row({"model": "GFCF"}) == "GF-CF" and summary_row({"model": "Pop"}) is None
    assert summary_row({"model": "MGFormer", "overrides": {"epochs": 10}}) == "MGFormer"
    assert summary_row({"model": "MGFormer", "overrides": {"degree_mask": "none"}}) is None
    probe = {"model": "MGFormer", "overrides": {"attention": False}, "probe_schedule": {"epochs": 30}}
    assert summary_row(probe) is None
    tokens = {"attention": False, "filter_residual": "bspm", "filter_residual_weight": 0.5}
    assert summary_row({"model": "MGFormer", "overrides": tokens}) == "MGFormer tokens + filter"


# --- the committed summary --------------------------------------------------------------------------------------


MODEL_OF = {"GF-CF": "GFCF", "Turbo-CF": "TurboCF"}  # a summary row's model class, where not its first word


def committed_summary():
    return summary_of(ROOT / "results" / "README.md")


def cells_of(row):
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_the_committed_summary_and_its_rule_open_the_readme():
    lines = (ROOT / "results" / "README.md").read_text().splitlines()
    start = lines.index(START)
    rule_end = next(i for i in range(start, len(lines)) if lines[i].startswith("- The "))  # the rule's last line
    assert start < 5 and rule_end < 40, (start, rule_end)


def test_every_cell_of_the_committed_summary_comes_from_a_record():
    """Recomputes each cell from the records of its column: some row (a section's variant) of that dataset of the
    cell's model has those mean test NDCG@20 and Recall@20 and that time to fit; the data rows are the measured
    properties; the bold cell is the column's highest."""
    from recbole_mgformer.benchmark.cost import mean_time_to_fit
    from recbole_mgformer.benchmark.general import rows_of
    from recbole_mgformer.benchmark.general_verdicts import paired_row_verdict
    from recbole_mgformer.benchmark.sections import sections
    from recbole_mgformer.benchmark.summary import COLUMNS
    from recbole_mgformer.records import by_variant

    block = committed_summary()
    rows = table_rows(block)
    headings = cells_of(rows[0])[2:]
    columns = [next(c for c in COLUMNS if f"[{c.heading}]" in heading) for heading in headings]
    top = ROOT / "results"
    by_dataset = named_records(top / "runs", top, load_names(top))
    properties = json.loads((top / "data_properties.json").read_text())["datasets"]
    checked, found_groups = 0, {}
    for row in rows[1:]:
        cells = cells_of(row)
        if cells[0] == "*data*":
            key = {"interactions per item": "interactions_per_item", "density": "density"}[cells[1]]
            for column, cell in zip(columns, cells[2:]):
                value = properties[column.data][key]
                assert cell == (f"{value:.1f}" if key == "interactions_per_item" else f"{100 * value:.2g}%")
            continue
        if cells[0] == "*protocol*":
            continue
        for column, cell in zip(columns, cells[2:]):
            if cell == "–":
                continue
            found = re.fullmatch(r"\**([0-9.]+)\**(?: ≈)? / \**([0-9.]+)\**(?: · (\S+ \S+))?(?: \((.+)\))?", cell)
            assert found, cell
            ndcg, recall, fit = found.group(1), found.group(2), found.group(3)
            groups = [g for _, part in sections(by_dataset[column.dataset]) for g in by_variant(part).values()]
            matches = [
                group
                for group in groups
                if f"{statistics.mean(r['test']['ndcg@20'] for r in group):.4f}" == ndcg
                and f"{statistics.mean(r['test']['recall@20'] for r in group):.4f}" == recall
                and group[0]["model"] == MODEL_OF.get(cells[1], cells[1].split()[0])
            ]
            assert matches, (cells[1], column.heading, cell)
            assert any(duration(mean_time_to_fit(group)) == fit for group in matches), (cells[1], cell)
            found_groups[column, cell] = matches[0]
            checked += 1
    assert checked >= 40
    for index, column in enumerate(columns):
        values = [cells_of(row)[2 + index] for row in rows[4:]]
        bold = [v for v in values if v.startswith("**")]
        best = max(float(re.match(r"\**([0-9.]+)", v).group(1)) for v in values if v != "–")
        assert len(bold) == 1 and float(bold[0].strip("*").split("*")[0]) == best, column
        # the level mark: the pages' paired test of each cell's row against the column's best
        best_row = rows_of(found_groups[column, bold[0]])[0]
        for value in values:
            if value in ("–", bold[0]):
                continue
            verdict = paired_row_verdict(rows_of(found_groups[column, value])[0], best_row)
            assert (LEVEL in value) == (verdict["word"] == "level"), (column.heading, value, verdict)


def test_the_project_readme_gets_a_copy_of_the_table_and_rule_with_links_from_its_root(tmp_path):
    from recbole_mgformer.benchmark.summary import README_END, README_START

    results = tiny_results(tmp_path)
    project_readme = tmp_path / "README.md"
    project_readme.write_text(f"# Project\n\n## Results\n\n{README_START}\n{README_END}\n\nHand-written.\n")
    main(["--render-only", "--results", str(results)])
    text = project_readme.read_text()
    block = text[text.index(README_START) : text.index(README_END)]
    assert "[ml-100k](results/ml-100k/leaderboard.md)" in block and "**Choosing a model**" in block
    assert table_rows(block) == [
        row.replace("](ml-100k/", "](results/ml-100k/").replace("](gowalla/", "](results/gowalla/")
        for row in table_rows(summary_of(results / "README.md"))
    ]
    assert "cost.png" not in block and text.endswith("Hand-written.\n")
    main(["--render-only", "--results", str(results)])
    assert project_readme.read_text() == text


def test_a_readme_without_the_markers_beside_the_results_is_left_alone(tmp_path):
    results = tiny_results(tmp_path)
    (tmp_path / "README.md").write_text("# Someone else's README\n")
    main(["--render-only", "--results", str(results)])
    assert (tmp_path / "README.md").read_text() == "# Someone else's README\n"


def test_the_committed_readme_shows_the_summary_table_and_rule():
    from recbole_mgformer.benchmark.summary import README_END, README_START

    text = (ROOT / "README.md").read_text()
    block = text[text.index(README_START) : text.index(README_END)]
    committed = table_rows(committed_summary())
    assert [row.replace("](results/", "](") for row in table_rows(block)] == committed
    assert "**Choosing a model**" in block
