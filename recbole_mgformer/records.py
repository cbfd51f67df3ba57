"""Run records: what produced a figure (commit, versions, seed, machine) stored beside the figure."""

import json
import os
import platform
import statistics
import subprocess
from pathlib import Path

from recbole_mgformer.config.input_checks import write_new_text


def notes_lines(path):
    """The hand-written reading of a table (``results/<page>/notes.md``), as lines to append; none when absent."""
    return [Path(path).read_text().strip(), ""] if path is not None and Path(path).exists() else []


PACKAGE_DIR = Path(__file__).resolve().parent


def git_commit(cwd=None):
    """Short HEAD commit of the checkout holding ``cwd``, ``-dirty`` when tracked files outside its top-level
    ``results/`` differ from it (benchmarks rewrite their own tables in results/ while they run)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=cwd, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)results"],
            capture_output=True,
            text=True,
            cwd=cwd,
            check=True,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def code_commit():
    """:func:`git_commit` of the code this process imported: the checkout the package was imported from, or
    "unknown" for an installed copy (a wheel's files belong to no commit, even in a virtualenv inside a checkout)."""
    try:
        tracked = (
            subprocess.run(
                ["git", "ls-files", "--error-unmatch", "--", Path(__file__).name], cwd=PACKAGE_DIR, capture_output=True
            ).returncode
            == 0
        )
    except OSError:
        tracked = False
    return git_commit(PACKAGE_DIR) if tracked else "unknown"


def package_versions():
    import numpy
    import recbole
    import scipy
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "recbole": recbole.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
    }


def machine():
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from recbole_mgformer.model.precision import bf16_is_native

    # CPUs of one model name differ in bf16 support, and with it in what `precision: auto` runs
    native = " with native bf16" if bf16_is_native("cpu") else ""
    return f"{cpu}{native}, {os.cpu_count()} CPUs"


class RecordExists(FileExistsError):
    """A new record's name was taken by another process while this one ran."""


def write_record(path, record, overwrite=True):
    """``record`` as JSON at ``path``, written whole through a temporary of this process's own (a run stopped
    mid-write leaves no half record, and two writers never share a temporary). ``overwrite`` replaces the record
    at ``path`` (the same run updating it, or an experiment's rerun); without it the name is claimed atomically
    and a record already there stays, with :class:`RecordExists` naming it."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    try:
        return write_new_text(path, text, option="record", overwrite=overwrite)
    except FileExistsError:
        raise RecordExists(
            f"{path}: another process wrote this record while this one ran (two runs of the same entry and seed "
            "into one results folder); it is kept and this run's result is not written: compare the two runs, "
            "and give each process its own --results folder, or let one process run each seed"
        ) from None


def read_records(folder):
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]


def display_path(path, base=None):
    """``path`` relative to ``base`` (default: the current directory) when it lies inside it, as given otherwise,
    so records name files the way a reader of the checkout finds them; None stays None."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path(base or Path.cwd()).resolve()))
    except ValueError:
        return str(path)


def shown_path(path, results):
    """``path`` as records and pages name it, wherever the package is installed and ``results`` lies:
    ``properties/...`` inside the package's shipped properties, ``<results folder>/...`` inside ``results``
    (``results/tuning/...``), as given elsewhere; None stays None."""
    from recbole_mgformer.config.defaults import properties_dir

    if path is None:
        return None
    resolved = Path(path).resolve()
    for folder in (properties_dir().resolve(), Path(results).resolve()):
        if resolved.is_relative_to(folder):
            return str(resolved.relative_to(folder.parent))
    return str(path)


def by_variant(records):
    """Records grouped by their variant's name, in the order the variants first appear. A group's records are its
    seeds, so a seed twice in one group is an error (two runs of one seed would count as two seeds)."""
    groups = {}
    for record in records:
        group = groups.setdefault(record["variant"], [])
        twin = next((other for other in group if other["seed"] == record["seed"]), None)
        if twin is not None:
            raise ValueError(
                f"two records of {record['variant']} at seed {record['seed']}: "
                f"{twin.get('_path', 'one')} and {record.get('_path', 'another')}; a row counts each "
                "seed once: move the older record to results/exploration/runs/<dataset>/"
            )
        group.append(record)
    return groups


def provenance(records):
    """``commit c, machine, torch t, recbole r`` of every distinct setup that produced ``records``, joined by ``; ``."""
    setups = sorted({(r["commit"], r["machine"], r["versions"]["torch"], r["versions"]["recbole"]) for r in records})
    return "; ".join(f"commit {c}, {m}, torch {t}, recbole {rb}" for c, m, t, rb in setups)


def mean_std(values):
    """A table cell for a metric over seeds: ``mean ± std``, or the value alone for one seed."""
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"
