"""The summary that opens ``results/README.md``: one table of the models by family against the four general
datasets, a rule for choosing a model stated from it, and the four pictures of accuracy against the time to fit.

Everything in it comes from the records (``results/runs/<dataset>/``) and from ``results/data_properties.json``
(:mod:`~recbole_mgformer.benchmark.data_properties`); ``--render-only`` rewrites it between :data:`START` and
:data:`END` (inserted under the README's title where the markers are missing) and leaves the rest of the README,
written by hand, as it is.

A summary row is a model class, or one of MGFormer's forms (with or without attention, with or without a filter's
scores added); MGFormer's ablations and attention designs stay on the pages. Where a dataset has several rows of one
summary row, the cell takes the one from the equal-budget search where there is one, else one whose choices were
made on a validation set over a test-picked one, then the one with the best validation NDCG@20 (on the ``-full``
protocols the validation set is the test set, and the protocol line says so).
A cell is marked level with its column's best where the pages' paired test (Wilcoxon signed-rank over users' test
NDCG@20, p >= 0.05) finds no difference."""

import dataclasses
import re
from pathlib import Path

from recbole_mgformer.benchmark.cost import chart_name, mean_time_to_fit
from recbole_mgformer.benchmark.data_properties import COMMAND as PROPERTIES_COMMAND
from recbole_mgformer.benchmark.data_properties import read_properties
from recbole_mgformer.benchmark.datasets import page_of
from recbole_mgformer.benchmark.general import rows_of
from recbole_mgformer.benchmark.general_verdicts import paired_row_verdict
from recbole_mgformer.benchmark.names import (
    FAMILIES,
    SUMMARY_MGFORMER_OPTIONS,
    TEST_PICKED,
    chosen_on_scored_items,
    filter_note,
    is_hybrid,
)
from recbole_mgformer.benchmark.sections import sections
from recbole_mgformer.config.input_checks import write_new_text

README_START = (
    "<!-- results-summary:start: rendered by `python -m recbole_mgformer.benchmark --render-only` from "
    "results/README.md's summary; edits here are lost -->"
)
README_END = "<!-- results-summary:end -->"
START = "<!-- summary:start: rendered by `python -m recbole_mgformer.benchmark --render-only`; edits here are lost -->"
END = "<!-- summary:end -->"
PROPERTIES_FILE = "data_properties.json"
DENSE_AT = 0.01  # density (interactions / (users x items)) from which the rule calls a dataset dense
SLOW = 600  # seconds to fit above which the rule also names the best row that fits within them
FASTER = 2  # the rule takes a row level with the best instead of the best where it fits this many times as fast
LEVEL = "≈"


@dataclasses.dataclass(frozen=True)
class Column:
    heading: str
    dataset: str  # whose records fill the column
    data: str  # whose files data_properties.json measured


COLUMNS = (
    Column("ml-100k", "ml-100k", "ml-100k"),
    Column("Amazon Beauty", "amazon-beauty", "amazon-beauty"),
    Column("Gowalla", "gowalla-full", "gowalla"),
    Column("Yelp2018", "yelp2018-full", "yelp2018"),
)

MGFORMER_ROWS = ("MGFormer", "MGFormer tokens", "MGFormer tokens + filter", "MGFormer + filter")
SHOWN_MODELS = {"GFCF": "GF-CF", "TurboCF": "Turbo-CF"}  # a model class's summary row, where not its class name
ROWS = tuple(
    (family, MGFORMER_ROWS if models == ("MGFormer",) else tuple(SHOWN_MODELS.get(m, m) for m in models))
    for family, models in FAMILIES.items()
)


def summary_row(record):
    """The summary row a record's run belongs to, or None (an MGFormer ablation or design, a probe, a model of no
    family)."""
    model, overrides = record["model"], record.get("overrides")
    if record.get("probe_schedule"):
        return None
    if model != "MGFormer":
        return next((SHOWN_MODELS.get(model, model) for _, models in FAMILIES.items() if model in models), None)
    if overrides is None or set(overrides) - SUMMARY_MGFORMER_OPTIONS:
        return None
    name = "MGFormer tokens" if overrides.get("attention") is False else "MGFormer"
    return name + (" + filter" if is_hybrid(record) else "")


@dataclasses.dataclass
class Cell:
    row: dict  # as general.rows_of builds it
    budget: str  # the equal-budget search's text, None for runs at fixed settings

    @property
    def records(self):
        return self.row["records"]

    @property
    def ndcg(self):
        return self.row["stats"]["ndcg@20"][0]

    @property
    def recall(self):
        return self.row["stats"]["recall@20"][0]

    @property
    def fit(self):
        return mean_time_to_fit(self.records)


def column_cells(records):
    """``{summary row: Cell}`` of one dataset's records: per summary row, the equal-budget search's row where
    there is one, else a row whose choices were made on a validation set over one scored on the items that chose
    its weight (``chosen_on_scored_items``: a ``-full`` hybrid's test-picked weight), then the best validation
    NDCG@20."""
    chosen = {}
    for budget, group in sections(records):
        for row in rows_of(group):
            key = summary_row(row["records"][0])
            if key is None:
                continue
            honest = not any(chosen_on_scored_items(record) for record in row["records"])
            rank = (budget is not None, honest, row["valid"], row["variant"])
            if key not in chosen or rank > chosen[key][0]:
                chosen[key] = (rank, Cell(row, budget))
    return {key: cell for key, (_, cell) in chosen.items()}


def best_cell(cells):
    return max(cells.values(), key=lambda cell: cell.ndcg) if cells else None


def level_with_best(cells):
    """The summary rows level with their column's best by the paired test (the best itself not among them)."""
    best = best_cell(cells)
    level = set()
    for key, cell in cells.items():
        if cell is not best:
            verdict = paired_row_verdict(cell.row, best.row)
            if verdict is not None and verdict["word"] == "level":
                level.add(key)
    return level


def duration(seconds):
    """``19 s``, ``2.5 min``, ``52 min``, ``1.4 h``; ``–`` where unknown."""
    if seconds is None:
        return "–"
    if seconds < 1:
        return "<1 s"
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 600:
        return f"{seconds / 60:.1f} min"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def percent(share):
    """A density as a percentage with two significant digits: ``6.3%``, ``0.073%``."""
    return f"{100 * share:.2g}%"


def cell_text(cell, cells, level):
    """``NDCG@20 / Recall@20 · fit`` of one cell, each metric's best of the column in bold, the mark where the
    cell is level with the best, and a hybrid's filter, weight and where the weight was chosen."""
    ndcg = f"{cell.ndcg:.4f}"
    ndcg = f"**{ndcg}**" if cell.ndcg == best_cell(cells).ndcg else ndcg + (f" {LEVEL}" if level else "")
    recall = f"{cell.recall:.4f}"
    recall = f"**{recall}**" if cell.recall == max(other.recall for other in cells.values()) else recall
    note = filter_note(cell.records[0])
    return f"{ndcg} / {recall} · {duration(cell.fit)}" + (f" ({note})" if note else "")


def _seeds_text(cells):
    counts = sorted({len(cell.records) for cell in cells})
    text = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"{text} seed" + ("" if counts == [1] else "s")


def _trials(cells):
    budgets = sorted({cell.records[0]["tuning"].get("budget") for cell in cells if cell.records[0].get("tuning")})
    return "/".join(str(b) for b in budgets if b is not None)


def _caps_text(cells):
    caps = sorted(
        {
            r.get("epoch_cap") or (r.get("overrides") or {}).get("epochs")
            for cell in cells
            for r in cell.records
            if (r.get("epochs") or 0) > 1
        }
        - {None}
    )
    if not caps:
        return ""
    return f", capped at {caps[0]} epochs" if len(caps) == 1 else f", capped at {caps[0]}–{caps[-1]} epochs"


def _group_text(cells, tuned):
    if tuned:
        return f"equal-budget search, {_trials(cells)} trials a model, {_seeds_text(cells)}"
    return f"fixed settings (the papers' where given), {_seeds_text(cells)}{_caps_text(cells)}"


def _minor_text(keys, cells, tuned):
    return f"{', '.join(keys)}: " + (f"{_trials(cells)}-trial search" if tuned else "fixed settings")


def protocol_text(cells):
    """One line on how a column's cells were made: the search or the fixed settings of most of them, the others
    by name, and where the epoch was chosen on test."""
    tuned = [key for key, cell in cells.items() if cell.budget is not None]
    fixed = [key for key, cell in cells.items() if cell.budget is None]
    main, minor = (tuned, fixed) if len(tuned) >= len(fixed) else (fixed, tuned)
    text = _group_text([cells[k] for k in main], main is tuned)
    if minor:
        text += "; " + _minor_text(minor, [cells[k] for k in minor], minor is tuned)
    if any(r.get("test_from_valid_pass") for cell in cells.values() for r in cell.records):
        text += "; epochs chosen on test"
    return text


def summary_data(by_dataset):
    """``{column: (cells, level)}`` of the columns with records."""
    data = {}
    for column in COLUMNS:
        cells = column_cells(by_dataset.get(column.dataset, []))
        if cells:
            data[column] = (cells, level_with_best(cells))
    return data


def _link(column, prefix=""):
    return f"[{column.heading}]({prefix}{page_of(column.dataset)}/leaderboard.md)"


def table_lines(data, properties, prefix=""):
    """The summary table; ``prefix``: the path from where it is shown to the results folder (its links)."""
    columns = list(data)
    lines = [
        "| family | model | " + " | ".join(_link(c, prefix) for c in columns) + " |",
        "|---|---|" + "---|" * len(columns),
        "| *protocol* | | " + " | ".join(protocol_text(data[c][0]) for c in columns) + " |",
    ]
    measured = [properties.get(c.data) for c in columns]
    if all(measured):
        lines += [
            "| *data* | interactions per item | "
            + " | ".join(f"{m['interactions_per_item']:.1f}" for m in measured)
            + " |",
            "| *data* | density | " + " | ".join(percent(m["density"]) for m in measured) + " |",
        ]
    for family, keys in ROWS:
        first = True
        for key in keys:
            if not any(key in data[c][0] for c in columns):
                continue
            cells = []
            for column in columns:
                of_column, level = data[column]
                cell = of_column.get(key)
                cells.append("–" if cell is None else cell_text(cell, of_column, key in level))
            lines.append(f"| {family if first else ''} | {key} | " + " | ".join(cells) + " |")
            first = False
    return lines


def _pick(cells, level):
    """``(key, Cell)``: the column's best, or the fastest row level with it where that fits at least
    :data:`FASTER` times as fast (a few minutes' difference is no reason to take a row the test cannot tell
    apart)."""
    best = best_cell(cells)
    best_key = _key_of(cells, best)
    level_rows = [(k, cells[k]) for k in sorted(level) if cells[k].fit is not None]
    if best.fit is None or not level_rows:
        return best_key, best
    key, fastest = min(level_rows, key=lambda kc: (kc[1].fit, kc[0]))
    return (key, fastest) if fastest.fit * FASTER <= best.fit else (best_key, best)


def _key_of(cells, cell):
    return next(key for key, other in cells.items() if other is cell)


def _figures(cell):
    return f"{cell.ndcg:.4f} in {duration(cell.fit)}"


def _column_detail(column, cells, level, key, cell):
    """``Gowalla 0.1644 in 53 min (weight test-picked)``: the picked row's figures on one column, against the best
    where it is not the best, with the rows level with it."""
    best = best_cell(cells)
    text = f"{column.heading} {_figures(cell)}"
    if cell is not best:
        text += f" against {_key_of(cells, best)}'s {_figures(best)}"
    notes = [f"weight {TEST_PICKED}"] if chosen_on_scored_items(cell.records[0]) else []
    others = [k for k in sorted(level) if k != key]
    if others:
        notes.append(", ".join(f"{k} {cells[k].ndcg:.4f}" for k in others) + " level too")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _class_line(word, columns, data, properties):
    """One line of the rule: which model to take on the datasets of one density class, with its numbers."""
    where = "; ".join(
        f"{c.heading} {percent(properties[c.data]['density'])}, "
        f"{properties[c.data]['interactions_per_item']:.0f} interactions per item"
        for c in columns
    )
    picks = {c: _pick(*data[c]) for c in columns}
    is_best = [cell is best_cell(data[c][0]) for c, (_, cell) in picks.items()]
    if all(is_best):
        role = "the best row" + (" on each" if len(columns) > 1 else "")
    elif not any(is_best):
        role = f"level with the best row by the paired test and at least {FASTER} times as fast"
    else:
        role = "the best row, or one level with it and faster"
    details = [_column_detail(c, *data[c], *picks[c]) for c in columns]
    chosen = " or ".join(f"**{k}**" for k in sorted({key for key, _ in picks.values()}))
    threshold = f"{'≥' if word == 'Dense' else '<'} {percent(DENSE_AT)}"
    return f"- **{word} data** (density {threshold}: {where}): take {chosen}, {role}: {'; '.join(details)}."


def _quick_line(data):
    """The best row that fits within :data:`SLOW` seconds, on each column whose pick takes longer."""
    parts = []
    for column, (cells, level) in data.items():
        _, pick = _pick(cells, level)
        if pick.fit is None or pick.fit <= SLOW:
            continue
        best = best_cell(cells)
        fast = [(k, c) for k, c in cells.items() if c.fit is not None and c.fit <= SLOW]
        if not fast:
            parts.append(f"{column.heading}: no row")
            continue
        key, cell = max(fast, key=lambda kc: (kc[1].ndcg, kc[0]))
        gap = 100 * (cell.ndcg / best.ndcg - 1)
        parts.append(f"{column.heading} {key}, {cell.ndcg:.4f} ({gap:+.1f}% against the best) in {duration(cell.fit)}")
    if not parts:
        return None
    return f"- **Within {SLOW // 60} minutes to fit**, the best row: " + "; ".join(parts) + "."


def _caveat_line(data, properties):
    dense = sum(1 for c in data if is_dense(c, properties))
    on_test = [
        c.heading
        for c, (cells, _) in data.items()
        if any(r.get("test_from_valid_pass") for cell in cells.values() for r in cell.records)
    ]
    text = (
        f"- The {percent(DENSE_AT)} line is drawn between {dense} dense and {len(data) - dense} sparse datasets, "
        "not measured."
    )
    if on_test:
        text += (
            f" On {' and '.join(on_test)} every trained row chose its epoch on the test set (the `-full` split has no "
            f"other held-out set) and the {TEST_PICKED} hybrids their weight too: their margins are upper bounds."
        )
    return text


def rule_lines(data, properties):
    """Three to five lines for choosing a model, each stated from the table's numbers."""
    if not all(properties.get(c.data) for c in data):
        return []
    lines = ["**Choosing a model**, from the table (generated with it):", ""]
    for word, dense in (("Dense", True), ("Sparse", False)):
        columns = [c for c in data if is_dense(c, properties) == dense]
        if columns:
            lines.append(_class_line(word, columns, data, properties))
    quick = _quick_line(data)
    return lines + ([quick] if quick else []) + [_caveat_line(data, properties)]


def is_dense(column, properties):
    return properties[column.data]["density"] >= DENSE_AT


def picture_lines(top, data):
    """The columns' pictures of accuracy against the time to fit, two to a row."""
    shown = []
    for column in data:
        page = page_of(column.dataset)
        path = f"{page}/{chart_name(column.dataset, page)}"
        if (Path(top) / path).is_file():
            shown.append((column.heading, path))
    if not shown:
        return []
    lines = ["Accuracy against the time to fit, every row of each page (click for the full size):", ""]
    for start in range(0, len(shown), 2):
        pair = shown[start : start + 2]
        lines.append("| " + " | ".join(heading for heading, _ in pair) + " |")
        if start == 0:
            lines.append("|" + "---|" * len(pair))
        lines.append("| " + " | ".join(f"[![{h}]({p})]({p})" for h, p in pair) + " |")
    return lines


def summary_lines(top, by_dataset):
    """The summary block (its markers included), or None without records of the four datasets."""
    data = summary_data(by_dataset)
    if not data:
        return None
    properties = read_properties(Path(top) / PROPERTIES_FILE)
    legend = (
        "Test NDCG@20 / Recall@20 (mean over seeds) · time to fit (construction and training to the best epoch, "
        f"on CPUs). **Bold**: the column's best; {LEVEL}: level with its best NDCG@20 by the pages' paired test "
        "(Wilcoxon signed-rank over users, p ≥ 0.05); –: no run. Density: interactions / (users × items), over "
        f"all of a dataset's interactions (`{PROPERTIES_FILE}`, `{PROPERTIES_COMMAND}`)."
    )
    lines = [START, "## Summary: which model for which data, how good, how long", "", legend, ""]
    lines += table_lines(data, properties) + [""]
    rule = rule_lines(data, properties)
    lines += rule + ([""] if rule else [])
    pictures = picture_lines(top, data)
    lines += pictures + ([""] if pictures else [])
    return lines + [END]


def readme_lines(top, by_dataset):
    """The project README's copy of the summary (its markers included): the table and the rule, without the
    pictures, its links made from the repository's root; None without records of the four datasets."""
    data = summary_data(by_dataset)
    if not data:
        return None
    properties = read_properties(Path(top) / PROPERTIES_FILE)
    prefix = f"{Path(top).name}/"
    legend = (
        f"Test NDCG@20 / Recall@20 · time to fit on CPUs; **bold** the best of a column, {LEVEL} level with it by "
        f"the paired test. Copied from [{prefix}README.md]({prefix}README.md), where the legend, the protocols and "
        "the pictures are."
    )
    rule = rule_lines(data, properties)
    return [README_START, legend, ""] + table_lines(data, properties, prefix) + [""] + rule + [README_END]


def with_summary(text, block, start=START, end=END):
    """``text`` (a README) with ``block`` between the markers, or under its title where it has none."""
    pattern = re.compile(re.escape(start.split(":", 1)[0]) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    lines = text.split("\n")
    title = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
    if title is None:
        return block + "\n\n" + text
    after = lines[title + 1 :]
    while after and not after[0].strip():  # one blank line on either side of the block
        after.pop(0)
    return "\n".join(lines[: title + 1] + ["", block, ""] + after)


def render_summary(top, by_dataset):
    """Rewrite the summary of ``<top>/README.md`` from the records; returns the README's path, or None where it
    has none or there are no records of the four datasets."""
    readme = Path(top) / "README.md"
    lines = summary_lines(top, by_dataset)
    if lines is None or not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8")
    updated = with_summary(text, "\n".join(lines))
    if updated != text:
        write_new_text(readme, updated, option="results/README.md", overwrite=True)
    return readme


def render_readme_summary(top, by_dataset):
    """Rewrite the copy of the summary in the README beside the results folder (the project's), only where that
    README holds the markers; returns its path, or None."""
    readme = Path(top).resolve().parent / "README.md"
    if not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8")
    lines = readme_lines(top, by_dataset)
    if README_START not in text or lines is None:
        return None
    updated = with_summary(text, "\n".join(lines), README_START, README_END)
    if updated != text:
        write_new_text(readme, updated, option="README.md", overwrite=True)
    return readme
