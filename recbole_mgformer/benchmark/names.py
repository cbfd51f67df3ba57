"""Short display names of leaderboard rows, and where a hybrid's filter weight was chosen.

A record names its row by its entry's full settings (``variant``: ``MGFormer attention=False embedding_size=128
... filter_residual=chebycf filter_residual_weight=0.5``). Tables and pictures show a short name instead, at most
:data:`MAX_LENGTH` characters, from one table beside the records, ``<results>/names.yaml``:

    names:                         # rows of every folder of records
      MGFormer attention=False: MGFormer tokens
    folders:                       # rows of one folder of records (relative to <results>), over `names`
      runs/gowalla-full:
        "MGFormer attention=False ... filter_residual_weight=0.5": MGFormer tokens + ChebyCF (test-picked)

A row not listed keeps its record's name when that fits; a longer one is cut to fit, with a warning naming the
table to add it to. The full settings stay one click away: each leaderboard row links its record.

A hybrid (a model with a filter's scores added, ``filter_residual``) says where its weight was chosen in its records,
``choice_made_on``: ``validation``, ``test``, or ``none`` (a point of a grid that shows every weight). A weight
chosen on the items the row is scored on (``test``; or ``validation`` where the validation pass is the test pass,
the ``-full`` protocols) makes the row's lead no result, so the renderer refuses such a row unless its name says
:data:`TEST_PICKED`. A weight chosen on another split's validation set and carried unchanged (``choice_dataset``:
``gowalla`` for a ``gowalla-full`` row) was not chosen on the items the row is scored on. The benchmark writes both
fields (``--choice-made-on``, ``--choice-dataset``)."""

import dataclasses
import hashlib
from pathlib import Path

import yaml

from recbole_mgformer.model.mgformer.option_names import FILTER_RESIDUAL_OPTIONS
from recbole_mgformer.safety.settings import load_plain_yaml

MAX_LENGTH = 40
NAMES_FILE = "names.yaml"
TEST_PICKED = "test-picked"
CHOICES = ("validation", "test", "none")
CHOICE_FIELDS = ("choice_made_on", "choice_dataset")  # the record fields that say where a hybrid's weight was chosen

# the summary's families, by model class; a model not listed is in none of them
FAMILIES = {
    "MGFormer family": ("MGFormer",),
    "graph CF / MF": ("LightGCN", "SGL", "SimGCL", "XSimGCL", "DirectAU", "BPR"),
    "training-free filters": ("GFCF", "BSPM", "ChebyCF", "TurboCF"),
    "item-item": ("EASE", "SLIMElastic", "ItemKNN"),
}


def family_of(model):
    """The family of a model class (:data:`FAMILIES`), or None."""
    return next((family for family, models in FAMILIES.items() if model in models), None)


@dataclasses.dataclass(frozen=True)
class Names:
    common: dict  # variant -> short name
    folders: dict  # folder of records, relative to the results folder -> {variant: short name}
    path: str = ""

    def listed(self, folder, variant):
        """The short name the table gives ``variant`` in ``folder``, or None."""
        return self.folders.get(folder, {}).get(variant, self.common.get(variant))


NONE = Names(common={}, folders={})


def _names_mapping(path, where, mapping):
    if not isinstance(mapping, dict):
        raise ValueError(f"{path}: {where} must map a row's record name to its short name, got {mapping!r}")
    checked = {}
    for variant, short in mapping.items():
        if not isinstance(short, str) or not short.strip():
            raise ValueError(f"{path}: {where}: {variant!r} must have a short name (text), got {short!r}")
        if len(short) > MAX_LENGTH:
            raise ValueError(
                f"{path}: {where}: the short name {short!r} of {variant!r} has {len(short)} characters; "
                f"keep it to {MAX_LENGTH}"
            )
        checked[str(variant)] = short.strip()
    return checked


def load_names(results):
    """The names table of a results folder (:class:`Names`; an empty one where it has none)."""
    path = Path(results) / NAMES_FILE
    if not path.is_file():
        return NONE
    try:
        data = load_plain_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not readable YAML ({error})") from None
    if not isinstance(data, dict) or set(data) - {"names", "folders"}:
        raise ValueError(f"{path}: expected the keys `names` and `folders`, got {sorted(map(str, data))}")
    folders = data.get("folders") or {}
    if not isinstance(folders, dict):
        raise ValueError(f"{path}: folders must map a folder of records (runs/<dataset>) to its names")
    return Names(
        common=_names_mapping(path, "names", data.get("names") or {}),
        folders={str(f): _names_mapping(path, f"folders: {f}", m) for f, m in folders.items()},
        path=str(path),
    )


def cut_to_fit(variant):
    """A name of at most :data:`MAX_LENGTH` characters for an unlisted long ``variant``: its start and a short hash
    of the whole, so two long names that start alike stay apart."""
    tag = hashlib.sha256(variant.encode()).hexdigest()[:4]
    return variant[: MAX_LENGTH - 6].rstrip() + "… " + tag


def short_name(names, folder, variant, warn=None):
    """``variant``'s display name in ``folder`` (see the module's doc)."""
    listed = names.listed(folder, variant)
    if listed is not None:
        return listed
    if len(variant) <= MAX_LENGTH:
        return variant
    if warn is not None:
        warn(
            f"{variant!r} ({folder}) has no short name; it is cut to fit the tables: give it one in "
            f"{names.path or NAMES_FILE} (at most {MAX_LENGTH} characters)"
        )
    return cut_to_fit(variant)


def is_hybrid(record):
    """A run with a filter's scores added to the model's (``filter_residual``)."""
    return (record.get("overrides") or {}).get("filter_residual") not in (None, False, "none", "None")


def recorded_choice(record):
    """The :data:`CHOICE_FIELDS` a record (or the benchmark's options) states, as {field: value}."""
    return {key: record[key] for key in CHOICE_FIELDS if record.get(key) is not None}


def choice_made_on(record):
    """Where a hybrid's weight was chosen (``choice_made_on``), checked; None where its record does not say."""
    choice = record.get("choice_made_on")
    if choice is not None and choice not in CHOICES:
        raise ValueError(
            f"{record.get('_path', 'a record')}: choice_made_on is {choice!r}; it is one of {', '.join(CHOICES)}"
        )
    return choice


def carried_from(record):
    """The dataset whose validation set chose a hybrid's weight when that is not the record's own (a choice carried
    from ``gowalla`` to ``gowalla-full``), else None."""
    chosen_on = record.get("choice_dataset")
    if chosen_on is None or chosen_on == record.get("dataset"):
        return None
    if record.get("choice_made_on") != "validation":
        raise ValueError(
            f"{record.get('_path', 'a record')}: choice_dataset {chosen_on!r} names another dataset, so its choice "
            f"was made on that dataset's validation set: choice_made_on must be 'validation', not "
            f"{record.get('choice_made_on')!r}"
        )
    return str(chosen_on)


def chosen_on_scored_items(record):
    """Was a hybrid's weight chosen on the items its test scores come from? On ``test``, or on a validation pass
    that is the test pass (``test_from_valid_pass``: the ``-full`` protocols), where an unstated choice could only
    have been made too; not where it was carried from another split's validation set (:func:`carried_from`)."""
    if not is_hybrid(record) or carried_from(record):
        return False
    choice = choice_made_on(record)
    on_test_items = bool(record.get("test_from_valid_pass"))
    return choice == "test" or (choice in ("validation", None) and on_test_items)


def check_choice_named(record, name):
    """Refuse a hybrid row whose weight was chosen on the items it is scored on unless its name says so, and one
    whose name says so when it was not (a weight carried from another split's validation set has the test-picked
    row's name: its short name in names.yaml must change with it)."""
    if is_hybrid(record) and not chosen_on_scored_items(record) and TEST_PICKED in name.lower():
        raise ValueError(
            f"{record.get('_path', record['variant'])}: the filter weight of {record['variant']!r} was not chosen "
            f"on the items it is scored on ({filter_note(record)}), but its name {name!r} says {TEST_PICKED!r}: "
            f"give it a short name without it in {NAMES_FILE}"
        )
    if chosen_on_scored_items(record) and TEST_PICKED not in name.lower():
        choice = record.get("choice_made_on")
        where = "on the test items" if choice == "test" else "on a validation pass that is its test pass"
        raise ValueError(
            f"{record.get('_path', record['variant'])}: the filter weight of {record['variant']!r} was chosen "
            f"{where} (choice_made_on: {choice}), so its row is scored on the items that chose it; its name "
            f"{name!r} must say so: give it a short name with {TEST_PICKED!r} in {NAMES_FILE} "
            "(or choose the weight on a validation set and record choice_made_on: validation)"
        )


def name_records(records, names, folder, warn=None):
    """Give each record of one folder its short name (``variant``), keeping the record's own in ``full_variant``
    (and the entry a scored record came from its short name, ``scored_from["shown"]``); two rows of one folder may
    not share a short name, and a hybrid chosen on its scored items must say so."""
    shown = {}
    for record in records:
        full = record.setdefault("full_variant", record["variant"])
        name = short_name(names, folder, full, warn)
        check_choice_named(record, name)
        other = shown.setdefault(name, full)
        if other != full:
            raise ValueError(
                f"{names.path or NAMES_FILE}: {other!r} and {full!r} ({folder}) would both be shown as {name!r}; "
                "give them names that tell them apart"
            )
        record["variant"] = name
        if record.get("scored_from"):  # the trained entry, named as its row would be where it is not on the page
            source = record["scored_from"]
            record["scored_from"] = {**source, "shown": short_name(names, folder, source["variant"])}
    return records


def filter_note(record):
    """``ChebyCF 0.5, test-picked`` for a hybrid (its filter, weight and where the weight was chosen), else None."""
    if not is_hybrid(record):
        return None
    overrides = record["overrides"]
    shown = {"gfcf": "GF-CF", "bspm": "BSPM", "chebycf": "ChebyCF", "turbocf": "Turbo-CF"}
    kind = str(overrides["filter_residual"])
    weight = overrides.get("filter_residual_weight")
    carried = carried_from(record)
    if chosen_on_scored_items(record):
        picked = TEST_PICKED
    elif carried:
        picked = f"picked on {carried}'s validation"
    else:
        picked = {"validation": "picked on validation"}.get(record.get("choice_made_on"), "weight fixed")
    return f"{shown.get(kind.lower(), kind)} {weight:g}, {picked}" if weight is not None else picked


# MGFormer's options that the summary's MGFormer rows may set (sizes, optimiser, epoch cap, the filter residual);
# a row with any other (an ablation, an attention design) is a page's detail, not a summary row
SUMMARY_MGFORMER_OPTIONS = frozenset(
    {"attention", "embedding_size", "structural_size", "learning_rate", "uniformity_weight", "epochs"}
    | FILTER_RESIDUAL_OPTIONS
    | {"train_batch_size"}
)
