"""Every table from its records: each dataset's runs (``<results>/runs/<dataset>/*.json``) go into the table
of their kind on the dataset's page, ``<results>/<page>/leaderboard.md``, followed by the page's hand-written
``notes.md``; general tables also get ``popularity.md`` and a chart per dataset, and a picture of accuracy against
the time to fit per dataset (``cost.png``). A folder inside ``<results>``
with a ``runs/`` of its own (``results/exploration``) is rendered the same way."""

import json
from pathlib import Path

from recbole_mgformer.benchmark import context, general, sequential
from recbole_mgformer.benchmark.datasets import page_of, table_kind
from recbole_mgformer.benchmark.popularity import render_popularity
from recbole_mgformer.records import display_path, notes_lines

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"general": general, "sequential": sequential, "context": context}


def is_run_record(record):
    """A benchmark run's record, not a timing benchmark's (``results/runs/performance``)."""
    return "valid" in record and "test" in record and "seed" in record


def read_records(folder):
    """The run records of one dataset's folder; records of the retired context script named the variant in
    ``model`` alone, so ``variant`` defaults to it, and an attention probe's variant names its schedule. Each record
    knows its file (``_path``), where the per-user values beside it are found."""
    records = []
    for path in sorted(Path(folder).glob("*.json")):
        record = json.loads(path.read_text())
        if is_run_record(record):
            records.append({**record, "_path": str(path)})
    for record in records:
        record.setdefault("variant", record["model"])
        schedule = record.get("probe_schedule")
        if schedule:  # a short-schedule probe (benchmarks/attention_probes.py) is a row of its own
            record["variant"] += f" ({schedule['epochs']}-epoch probe)"
    return records


def records_by_dataset(runs_dir):
    """Run records (:func:`read_records`) by dataset, the name of their folder."""
    folders = sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()) if Path(runs_dir).is_dir() else []
    by_dataset = {folder.name: read_records(folder) for folder in folders}
    return {dataset: records for dataset, records in by_dataset.items() if records}


def pages(by_dataset):
    """``{page: (kind, {dataset: records})}``; the datasets of one page must share their kind of table."""
    result = {}
    for dataset, records in by_dataset.items():
        kind, page = table_kind(dataset), page_of(dataset)
        if result.setdefault(page, (kind, {}))[0] != kind:
            raise ValueError(f"page {page!r} mixes a {result[page][0]} and a {kind} table: give {dataset} "
                             "another benchmark_page in its config")
        result[page][1][dataset] = records
    return result


def render_results(results):
    """Write every page of ``results`` (and of its folders with their own ``runs/``); returns the paths written."""
    results = Path(results)
    written = []
    for page, (kind, by_dataset) in sorted(pages(records_by_dataset(results / "runs")).items()):
        folder = results / page
        folder.mkdir(parents=True, exist_ok=True)
        text = TABLES[kind].render_page(by_dataset, display_path(results / "runs", ROOT))
        leaderboard = folder / "leaderboard.md"
        leaderboard.write_text("\n".join([text] + notes_lines(folder / "notes.md")))
        written.append(leaderboard)
        if kind == "general":
            written.append(render_popularity(by_dataset, folder))
            written += general.render_costs(by_dataset, folder)
    for nested in sorted(p.parent for p in results.glob("*/runs") if p.is_dir()):
        written += render_results(nested)
    return [path for path in written if path is not None]
