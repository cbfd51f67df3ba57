"""Every table from its records: each dataset's runs (``<results>/runs/<dataset>/*.json``) go into the table
of their kind on the dataset's page, ``<results>/<page>/leaderboard.md``: the page's hand-written reading
(``reading.md``, at most :data:`READING_WORDS` words) first, then the tables, then the hand-written ``notes.md``;
general tables also get ``popularity.md`` and a chart per dataset, and a picture of accuracy against the time to
fit per dataset (``cost.png``). Rows are shown by their short names (:mod:`~recbole_mgformer.benchmark.names`,
``<results>/names.yaml``). A folder inside ``<results>`` with a ``runs/`` of its own (``results/exploration``) is
rendered the same way. Last, the summary at the top of ``<results>/README.md`` is rendered from the records of the
four general datasets (:mod:`~recbole_mgformer.benchmark.summary`)."""

import json
import os
import sys
from pathlib import Path

import yaml

from recbole_mgformer.benchmark import context, general, sequential
from recbole_mgformer.benchmark.datasets import page_of, table_kind
from recbole_mgformer.benchmark.names import load_names, name_records
from recbole_mgformer.benchmark.popularity import render_popularity
from recbole_mgformer.benchmark.summary import render_readme_summary, render_summary
from recbole_mgformer.records import notes_lines, shown_path

TABLES = {"general": general, "sequential": sequential, "context": context}
READING_WORDS = 150


def required_metrics(kind):
    """``(test, valid)``: the metrics each record of a table of ``kind`` must have for its row."""
    return {
        "general": (general.METRICS, ("ndcg@20",)),
        "sequential": (sequential.METRICS, ("ndcg@10",)),
        "context": (tuple(key for key, _, _ in context.METRICS), ()),
    }[kind]


def missing_metrics(record, kind):
    """The metrics of a table of ``kind`` that ``record`` lacks (``valid ndcg@20``), empty when it has them all."""
    test, valid = required_metrics(kind)
    return [f"test {m}" for m in test if m not in record.get("test", {})] + [
        f"valid {m}" for m in valid if m not in record.get("valid", {})
    ]


def warn(message):
    print(f"warning: {message}", file=sys.stderr, flush=True)


def is_run_record(record):
    """A benchmark run's record, not a timing benchmark's (``results/runs/performance``)."""
    return "valid" in record and "test" in record and "seed" in record


def read_records(folder, warn=warn):
    """The run records of one dataset's folder; records of the retired context script named the variant in
    ``model`` alone, so ``variant`` defaults to it, and an attention probe's variant names its schedule. Each record
    knows its file (``_path``), where the per-user values beside it are found."""
    records = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (ValueError, OSError) as error:  # a damaged file must not take every page down with it
            warn(f"{path}: not a readable JSON record ({error}); left out of the tables: repair or delete it")
            continue
        if isinstance(record, dict) and is_run_record(record):
            records.append({**record, "_path": str(path)})
    for record in records:
        record.setdefault("variant", record["model"])
        schedule = record.get("probe_schedule")
        if schedule:  # a short-schedule probe (experiments/attention_probes.py) is a row of its own
            record["variant"] += f" ({schedule['epochs']}-epoch probe)"
    return records


def records_by_dataset(runs_dir):
    """Run records (:func:`read_records`) by dataset, the name of their folder."""
    folders = sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()) if Path(runs_dir).is_dir() else []
    by_dataset = {folder.name: read_records(folder) for folder in folders}
    return {dataset: records for dataset, records in by_dataset.items() if records}


def pages(by_dataset, warn=warn):
    """``{page: (kind, {dataset: records})}``; the datasets of one page must share their kind of table. A record
    without its table's metrics (a run of a dataset with no config of its own computes RecBole's default metrics)
    and a dataset whose config is unreadable are left out, each with a warning naming it."""
    result = {}
    for dataset, records in by_dataset.items():
        try:
            kind, page = table_kind(dataset), page_of(dataset)
        except (ValueError, OSError, AttributeError, yaml.YAMLError) as error:  # its properties/dataset file
            warn(f"runs of {dataset} left out of the tables: its config cannot be read ({error})")
            continue
        usable = []
        for record in records:
            missing = missing_metrics(record, kind)
            if missing:
                warn(
                    f"{record['_path']}: left out of the {kind} table of {page!r}, it lacks {', '.join(missing)}; "
                    f"rerun it with the table's metrics (properties/dataset/{dataset}.yaml sets them) or delete it"
                )
            else:
                usable.append(record)
        if records and not usable:
            continue
        if result.setdefault(page, (kind, {}))[0] != kind:
            raise ValueError(
                f"page {page!r} mixes a {result[page][0]} and a {kind} table: give {dataset} "
                "another benchmark_page in its config"
            )
        result[page][1][dataset] = usable
    return result


def reading_lines(path):
    """The hand-written reading that opens a page (``<page>/reading.md``), as lines; none when absent. A reading
    is read in a minute: more than :data:`READING_WORDS` words is an error naming the file."""
    path = Path(path)
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8").strip()
    words = len(text.split())
    if words > READING_WORDS:
        raise ValueError(
            f"{path}: {words} words; a page's reading is at most {READING_WORDS}: move the detail to notes.md"
        )
    return [text, ""]


def with_reading(text, reading):
    """The page ``text`` with the ``reading`` lines right under its title."""
    if not reading:
        return text
    title, _, rest = text.partition("\n")
    return "\n".join([title, "", *reading, rest.lstrip("\n")])


def folder_key(folder, top):
    """A folder of records as the names table keys it: relative to the results folder, ``runs/gowalla-full``."""
    try:
        return Path(folder).resolve().relative_to(Path(top).resolve()).as_posix()
    except ValueError:
        return Path(folder).as_posix()


def named_records(runs_dir, top, names, warn=warn):
    """:func:`records_by_dataset`, each record shown by its short name (``names``)."""
    by_dataset = records_by_dataset(runs_dir)
    for dataset, records in by_dataset.items():
        name_records(records, names, folder_key(Path(runs_dir) / dataset, top), warn)
    return by_dataset


def link_records(by_dataset, folder):
    """Give each record the relative link from ``folder`` (its page's) to its file: the row's full settings."""
    for records in by_dataset.values():
        for record in records:
            link = os.path.relpath(Path(record["_path"]).resolve(), Path(folder).resolve())
            record["_record_link"] = Path(link).as_posix()


def render_results(results, top=None, names=None):
    """Write every page of ``results`` (and of its folders with their own ``runs/``) and, for the top folder, the
    summary of its README; returns the paths written. ``top``: the results folder the pages name their records'
    folders from (default ``results``), whose ``names.yaml`` names the rows."""
    results = Path(results)
    top = top or results
    names = load_names(top) if names is None else names
    written, general_records = [], {}
    for page, (kind, by_dataset) in sorted(pages(named_records(results / "runs", top, names)).items()):
        folder = results / page
        folder.mkdir(parents=True, exist_ok=True)
        link_records(by_dataset, folder)
        text = TABLES[kind].render_page(by_dataset, shown_path(results / "runs", top))
        leaderboard = folder / "leaderboard.md"
        page_text = with_reading(text, reading_lines(folder / "reading.md"))
        leaderboard.write_text("\n".join([page_text] + notes_lines(folder / "notes.md")))
        written.append(leaderboard)
        if kind == "general":
            general_records.update(by_dataset)
            written.append(render_popularity(by_dataset, folder))
            written += general.render_costs(by_dataset, folder)
    for nested in sorted(p.parent for p in results.glob("*/runs") if p.is_dir()):
        written += render_results(nested, top, names)
    if results == top:
        written.append(render_summary(top, general_records))
        written.append(render_readme_summary(top, general_records))
    return [path for path in written if path is not None]
