"""Published numbers shown beside ours: ``properties/published/<name>.yaml`` holds one table's Recall@20 / NDCG@20
by our rows' names (``GFCF`` for the published GF-CF, ``MGFormer degree_mask=none`` for the MGFormer paper's
"w/o mask"), each with its source, for the datasets it lists (``datasets``, default the file's name), with the
column label (``label``, default ``published``) and a note on how they were selected (``note``). A row of ours at
other settings names the paper's entry instead of copying it: ``"SimGCL epochs=20": {<<: *SimGCL, name: SimGCL}``."""

import dataclasses
import math
from pathlib import Path

from recbole_mgformer.config.defaults import properties_dir
from recbole_mgformer.safety.settings import load_plain_yaml

METRICS = ("recall@20", "ndcg@20")


@dataclasses.dataclass(frozen=True)
class Published:
    label: str
    note: str
    models: dict  # our row's name -> {"recall@20": float, "ndcg@20": float, "source": str, "name": str}
    path: str

    def numbers(self, variant):
        """(Recall@20, NDCG@20) published for ``variant``, or None."""
        entry = self.models.get(variant)
        return None if entry is None else tuple(entry[m] for m in METRICS)

    def gap(self, variant, ours):
        """``{metric: ours / published - 1}`` for ``variant``, ``ours`` ``{metric: mean}``; None without a number."""
        numbers = self.numbers(variant)
        return None if numbers is None else {m: ours[m] / p - 1 for m, p in zip(METRICS, numbers)}

    def source_text(self, variant, shown=None):
        """``ours (published as theirs): source`` of the published entry keyed ``variant``, our row named as the
        table shows it (``shown``, default ``variant``)."""
        entry = self.models[variant]
        shown = shown or variant
        published_as = f" (published as {entry['name']})" if entry.get("name", variant) != shown else ""
        return f"{shown}{published_as}: {entry['source']}"


NONE = Published(label="published", note="", models={}, path="")


def published_dir():
    return properties_dir() / "published"


def _fail(path, what):
    raise ValueError(f"{path}: {what}")


def _checked(path, text):
    """A :class:`Published` from one file's YAML text, with the file and the model named on any bad entry."""
    data = load_plain_yaml(text) or {}
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        _fail(
            path, "expected a mapping with `models: {<our model's name>: {recall@20: ..., ndcg@20: ..., source: ...}}`"
        )
    unknown = set(data) - {"datasets", "label", "note", "models"}
    if unknown:
        _fail(
            path, f"unknown key(s) {', '.join(sorted(map(str, unknown)))}; the keys are datasets, label, note, models"
        )
    models = {}
    for variant, entry in data["models"].items():
        if not isinstance(entry, dict):
            _fail(path, f"model {variant!r}: expected {{recall@20: ..., ndcg@20: ..., source: ...}}, got {entry!r}")
        extra = set(entry) - {*METRICS, "source", "name"}
        missing = {*METRICS, "source"} - set(entry)
        if extra or missing:
            problems = [f"missing {', '.join(sorted(missing))}"] if missing else []
            if extra:
                unknown_keys = ", ".join(sorted(map(str, extra)))
                problems.append(f"unknown {unknown_keys} (the keys are recall@20, ndcg@20, source, name)")
            _fail(path, f"model {variant!r}: " + "; ".join(problems))
        for metric in METRICS:
            value = entry[metric]
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value <= 1
                or not math.isfinite(value)
            ):
                _fail(path, f"model {variant!r}: {metric} must be a number in (0, 1], got {value!r}")
        models[str(variant)] = {**entry, "name": str(entry.get("name", variant)), "source": str(entry["source"])}
    return data, Published(
        label=str(data.get("label", "published")), note=str(data.get("note", "")).strip(), models=models, path=str(path)
    )


def published_numbers(dataset, folder=None):
    """The published numbers for ``dataset`` (:class:`Published`; an empty one where no file lists it). A dataset
    listed by two files is an error naming both."""
    folder = Path(folder) if folder is not None else published_dir()
    found = []
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        data, published = _checked(path, path.read_text())
        datasets = data.get("datasets", [path.stem])
        if not isinstance(datasets, list):
            _fail(path, f"datasets must be a list of dataset names, got {datasets!r}")
        if dataset in map(str, datasets):
            found.append(published)
    if len(found) > 1:
        raise ValueError(f"{dataset} is listed by {found[0].path} and {found[1].path}; keep it in one of them")
    return found[0] if found else NONE
