"""The committed pages hold together: every relative link resolves, and every exploration record is cited by a page
outside it (a record nobody cites is clutter and should be removed, or cited where its finding is stated)."""

import re
from pathlib import Path

import pytest

from recbole_mgformer.benchmark.datasets import page_of

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # [text](target) or [text](target#anchor)


def pages():
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found += [p for p in sorted(RESULTS.rglob("*.md")) if "runs" not in p.relative_to(RESULTS).parts]
    return [p for p in found if p.exists()]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_a_page_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        if not (page.parent / target).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


def test_every_exploration_record_is_cited_by_a_page_outside_it():
    exploration = RESULTS / "exploration"
    if not exploration.exists():
        pytest.skip("no exploration records")
    texts = {p: p.read_text() for p in pages()}
    uncited = []
    for entry in sorted(exploration.iterdir()):
        if entry.name == "runs":  # raw records, rendered into exploration/<the dataset's page>/: each needs its page
            unrendered = [d for d in entry.iterdir() if not (exploration / page_of(d.name)).is_dir()]
            uncited += [f"exploration/runs/{d.name}" for d in unrendered]
            continue
        name = f"exploration/{entry.name}"
        if not any(name in text and not p.is_relative_to(entry) for p, text in texts.items()):
            uncited.append(name)
    assert not uncited, (
        f"exploration records no page cites (cite each where its finding is stated, or remove it): {uncited}"
    )


def table_rows(page):
    """Each markdown table row of ``page`` as a dict from its table's header to its cell."""
    rows, header = [], None
    for line in page.read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if header is None:
            header = cells
        elif not set("".join(cells)) <= set("-: "):
            rows.append(dict(zip(header, cells)))
    return rows


def test_every_row_of_the_sequential_board_has_three_seeds_or_more():
    """One-seed runs are exploration, not board rows: the board's verdicts are over seeds (issue: every row 3 seeds)."""
    page = RESULTS / "sequential" / "leaderboard.md"
    if not page.exists():
        pytest.skip("no sequential board")
    rows = [row for row in table_rows(page) if "seeds" in row]
    assert rows, "the sequential board has no table with a seeds column"
    short = [row["variant"] for row in rows if int(row["seeds"]) < 3]
    assert not short, f"rows of fewer than 3 seeds on the sequential board (move them to results/exploration/): {short}"
