import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.names import MAX_LENGTH
from recbole_mgformer.benchmark.render import READING_WORDS, pages, records_by_dataset
from recbole_mgformer.benchmark.summary import END, START

ROOT = Path(__file__).resolve().parents[2]


def assert_committed_tables_render(tmp_path, leave_out=()):
    """A rerun of --render-only over a copy of results/ (without the ``leave_out`` paths, globs under it, and
    their pages) changes no committed page, the README's summary included."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results)
    for pattern in leave_out:
        for path in results.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    tables = sorted(results.rglob("leaderboard.md")) + sorted(results.rglob("popularity.md"))
    for table in tables:
        table.write_text("stale\n")
    readme = results / "README.md"
    stale = f"{START}\nstale\n{END}"
    readme.write_text(re.sub(f"{re.escape(START)}.*?{re.escape(END)}", stale, readme.read_text(), flags=re.DOTALL))
    assert main(["--render-only", "--results", str(results)]) == 0
    for table in [*tables, readme]:
        committed = ROOT / "results" / table.relative_to(results)
        # the pages name their records' folder from the results folder's own name: the same outside the checkout
        assert table.read_text() == committed.read_text(), table


# The context page's paired bootstraps (1,000 resamples of every comparison) are most of a render's time.
CONTEXT = ("runs/ml-100k-ctx-*", "context")


def test_the_committed_tables_but_the_context_page_are_what_their_records_render(tmp_path):
    assert_committed_tables_render(tmp_path, leave_out=CONTEXT)


@pytest.mark.slow
def test_the_committed_tables_are_what_their_records_render(tmp_path):
    assert_committed_tables_render(tmp_path)


def markdown_tables(text):
    """The tables of a page, each a list of its rows' first cells (the row names), header and rule left out."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            elif not line.startswith("|---"):
                current.append(line.strip("|").split("|")[0].strip())
        else:
            current = None
    return tables


def committed_pages():
    return sorted((ROOT / "results").rglob("leaderboard.md")) + sorted((ROOT / "results").rglob("popularity.md"))


@pytest.mark.parametrize("page", committed_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_row_of_every_committed_table_has_a_short_name_unique_in_its_table(page):
    text = page.read_text()
    notes = page.parent / "notes.md"
    if notes.is_file():  # the hand-written notes appended under the tables are no rendered table
        text = text.replace(notes.read_text().strip(), "")
    for rows in markdown_tables(text):
        names = [row.replace("**", "") for row in rows]
        assert all(len(name) <= MAX_LENGTH for name in names), [n for n in names if len(n) > MAX_LENGTH]
        assert len(names) == len(set(names)), names


def test_pictures_label_their_points_with_the_short_names(tmp_path, monkeypatch):
    from recbole_mgformer.benchmark import general

    folder = tmp_path / "results" / "runs" / "ml-100k"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "runs" / "ml-100k" / "gfcf-seed0.json", folder)
    (tmp_path / "results" / "names.yaml").write_text("names: {GFCF: GF-CF}\n")
    seen = {}
    monkeypatch.setattr(general, "cost_chart", lambda dataset, points, path, families: seen.update(families))
    assert main(["--render-only", "--results", str(tmp_path / "results")]) == 0
    assert seen == {"GF-CF": "training-free filters"}
    page = (tmp_path / "results" / "ml-100k" / "leaderboard.md").read_text()
    assert "| GF-CF | 1 |" in page and '[record](../runs/ml-100k/gfcf-seed0.json "GFCF")' in page


def test_a_page_opens_with_its_reading_and_a_long_reading_is_refused(tmp_path):
    folder = tmp_path / "results" / "runs" / "ml-100k"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "runs" / "ml-100k" / "bpr-seed0.json", folder)
    (tmp_path / "results" / "ml-100k").mkdir()
    (tmp_path / "results" / "ml-100k" / "reading.md").write_text("**Reading.** BPR leads.\n")
    (tmp_path / "results" / "ml-100k" / "notes.md").write_text("The notes.\n")
    assert main(["--render-only", "--results", str(tmp_path / "results")]) == 0
    page = (tmp_path / "results" / "ml-100k" / "leaderboard.md").read_text()
    assert page.startswith("# Leaderboard\n\n**Reading.** BPR leads.\n\nRendered by")
    assert page.index("| BPR |") < page.index("The notes.")
    (tmp_path / "results" / "ml-100k" / "reading.md").write_text("word " * (READING_WORDS + 1))
    with pytest.raises(SystemExit):
        main(["--render-only", "--results", str(tmp_path / "results")])


def test_every_committed_page_opens_with_a_short_reading():
    for page in sorted((ROOT / "results").rglob("leaderboard.md")):
        reading = page.parent / "reading.md"
        assert reading.is_file(), f"{page.parent} has no reading.md"
        words = len(reading.read_text().split())
        assert words <= READING_WORDS, (reading, words)
        lines = page.read_text().splitlines()
        assert lines[2] == reading.read_text().splitlines()[0], page


def test_rendering_imports_neither_torch_nor_recbole(tmp_path):
    # a fresh process: this one has imported both long ago; a record of each kind of table, per-user values beside
    records = {
        "ml-100k": ["bpr-seed0.json", "bpr-seed0.users.json.gz"],
        "ml-100k-seq-whole": ["sasrec-seed0.json", "sasrec-seed0.users.json.gz"],
        "ml-100k-ctx-0.8": ["autoint-seed0.json", "autoint-seed0.users.json.gz"],
    }
    for dataset, files in records.items():
        (tmp_path / "results" / "runs" / dataset).mkdir(parents=True)
        for name in files:
            shutil.copy(ROOT / "results" / "runs" / dataset / name, tmp_path / "results" / "runs" / dataset)
    code = (
        "import sys; from recbole_mgformer.benchmark import main; "
        "assert main(['--render-only', '--results', sys.argv[1]]) == 0; "
        "print(sorted(m for m in ('torch', 'recbole', 'recbole.model') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "results")], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
    for page, row in (("ml-100k", "| BPR |"), ("sequential", "| SASRec |"), ("context", "| AutoInt |")):
        assert row in (tmp_path / "results" / page / "leaderboard.md").read_text(), page


def test_records_of_the_retired_scripts_read_with_their_variant(tmp_path):
    folder = tmp_path / "runs" / "ml-100k-ctx-0.8"
    folder.mkdir(parents=True)
    (folder / "csa-seed1.json").write_text(
        json.dumps(
            {"model": "CSA first_order=True", "seed": 1, "valid": {}, "test": {"auc": 0.7, "logloss": 0.6}, "rho": 0.8}
        )
    )
    (tmp_path / "runs" / "performance").mkdir()
    (tmp_path / "runs" / "performance" / "epoch-time.json").write_text(json.dumps({"records": [], "provenance": ""}))
    by_dataset = records_by_dataset(tmp_path / "runs")
    assert list(by_dataset) == ["ml-100k-ctx-0.8"]  # timing records are no runs
    assert by_dataset["ml-100k-ctx-0.8"][0]["variant"] == "CSA first_order=True"
    assert pages(by_dataset) == {"context": ("context", by_dataset)}


def test_a_page_cannot_mix_kinds_of_table(dataset_configs):
    dataset_configs("mixed", "benchmark_page: sequential\n")
    with pytest.raises(ValueError, match="page 'sequential' mixes a sequential and a general table"):
        pages({"ml-100k-seq": [], "mixed": []})


def test_a_damaged_or_incomplete_record_is_left_out_with_a_warning_naming_it(tmp_path, capsys):
    folder = tmp_path / "results" / "runs" / "ml-100k"
    folder.mkdir(parents=True)
    good = json.loads((ROOT / "results" / "runs" / "ml-100k" / "bpr-seed0.json").read_text())
    good.pop("per_user", None)
    (folder / "bpr-seed0.json").write_text(json.dumps(good))
    # a run of RecBole's default metrics (a dataset without properties/dataset/<name>.yaml), and a cut-off file
    (folder / "lightgcn-seed0.json").write_text(
        json.dumps(
            {**good, "model": "LightGCN", "variant": "LightGCN", "valid": {"ndcg@10": 0.2}, "test": {"recall@10": 0.3}}
        )
    )
    (folder / "sgl-seed0.json").write_text('{"model": "SGL", "se')
    assert main(["--render-only", "--results", str(tmp_path / "results")]) == 0
    err = capsys.readouterr().err
    assert "lightgcn-seed0.json: left out of the general table of 'ml-100k', it lacks test recall@20" in err
    assert "sgl-seed0.json: not a readable JSON record" in err
    page = (tmp_path / "results" / "ml-100k" / "leaderboard.md").read_text()
    assert "| BPR | 1 |" in page and "LightGCN" not in page


def test_results_default_to_the_working_directory_and_pages_name_them_from_there(scratch_cwd):
    folder = scratch_cwd / "results" / "runs" / "ml-100k"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "runs" / "ml-100k" / "bpr-seed0.json", folder)
    assert main(["--render-only"]) == 0  # no --results: ./results, wherever the package is installed
    page = (scratch_cwd / "results" / "ml-100k" / "leaderboard.md").read_text()
    assert "| BPR | 1 |" in page and "from `results/runs/<dataset>/*.json`" in page
