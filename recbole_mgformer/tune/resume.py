"""``--resume``: the search rebuilt from its own request file (plain JSON in its records folder,
:mod:`recbole_mgformer.tune.records`), checked as a new search's settings are, on this machine's paths (its Ray
folder and records folder those of this command); never from Ray's pickles, which a new machine does not have."""

from pathlib import Path

from recbole_mgformer.safety import UnsafeSettingError, check_literal_strings
from recbole_mgformer.tune.records import (
    RECORDS_VERSION,
    REQUEST_FILE,
    SEARCH_FIELDS,
    TRIALS_DIR,
    already_holds_a_search,
    as_json,
    read_json_object,
    records_folder,
)
from recbole_mgformer.tune.space import TuneSetupError, parse_space

# What a resumed search keeps from its start: request field -> the option that sets it. The finished trials were
# drawn from these, so a resumed search cannot take another value of any of them.
RESUMED_FIELDS = {
    "model": "--model",
    "dataset": "--dataset",
    "space": "--space",
    "search": "--search",
    "samples": "--samples",
    "scheduler": "--scheduler",
    "grace_period": "--grace-period",
    "search_seed": "--search-seed",
    "overrides": "--key=value settings",
    "config_files": "--config_files",
    "data_path": "--data_path",
    "defaults_first": "--defaults-first",
}
ALWAYS_COMPARED = ("model", "dataset")  # they name the search (its default --name)


def resume_changes(stored, request, given):
    """``[(option, started with, now)]`` for each field of ``request`` that differs from the ``stored`` one the
    search started with; ``given`` holds the fields the user set for this run (the others take the stored ones)."""
    changes = []
    for field, option in RESUMED_FIELDS.items():
        if field not in ALWAYS_COMPARED and field not in given:
            continue
        now = as_json(request[field])  # as the stored request holds it
        if now != stored.get(field, now):
            changes.append((option, stored.get(field), now))
    return changes


def prepare_experiment(request, resume, given=()):
    """The request the command runs: ``request`` for a new search (refused where the folder holds a search), or
    on resume the stored one rebuilt (:func:`rebuild_request`), a setting ``given`` for this run that differs
    from it refused."""
    records = Path(records_folder(request))
    stored_file = records / REQUEST_FILE
    if not resume:
        if stored_file.exists():
            raise TuneSetupError(already_holds_a_search(records))
        trials = records / TRIALS_DIR
        if trials.is_dir() and any(trials.iterdir()):  # its trials would clash with this search's records
            raise TuneSetupError(
                f"{trials} holds the trial records of a search whose {REQUEST_FILE} is gone; delete that folder to "
                "start over, or give this search another --name (or --records)"
            )
        return request
    if not stored_file.is_file():
        raise TuneSetupError(
            f"nothing to resume at {records}: it has no {REQUEST_FILE}, which a search writes when it starts; "
            "start the search without --resume (or give the --records folder the search started with)"
        )
    stored = read_json_object(stored_file, "the search's request")
    if stored.get("records") != RECORDS_VERSION:
        raise TuneSetupError(
            f"{stored_file}: this search was started by an earlier version of the command, which kept its progress "
            "only in Ray's pickles; --resume never loads them (a pickle runs code). Start it again with another "
            "--name, or delete that folder"
        )
    started = rebuild_request(stored, request, stored_file)
    changes = resume_changes(started, request, given)
    if changes:
        listed = "; ".join(f"{option}: started with {before!r}, now {now!r}" for option, before, now in changes)
        raise TuneSetupError(
            f"the search at {records} cannot change on --resume ({listed}): a resumed search continues the "
            f"trials it started. Drop {', '.join(option for option, _, _ in changes)} to resume it as it "
            "started, or start a new search with another --name"
        )
    return started


def _field(stored, name, kind, source):
    value = stored.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise TuneSetupError(f"{source}: {name} is {value!r}, not what the command writes there; {_STALE}")
    return value


_STALE = "the file was edited or is damaged: restore it, or start a new search with another --name"


def local_path(stored, given):
    """A path the search recorded, on this machine: where it was, else its form as given (a relative path, e.g.
    ``dataset``) read from the current folder: a search copied to another machine runs from its checkout."""
    if Path(stored).exists() or not given or Path(given).is_absolute():
        return stored
    return str(Path(given).resolve())


def rebuild_request(stored, current, source):
    """The stored request made again by :func:`~recbole_mgformer.tune.request.make_request` from its settings:
    every check of a new search runs again (the space, its strings, the fixed settings, the data), with this
    machine's paths, this folder's name and this command's records folder. A search whose settings now give
    another search (the model's defaults, the dataset's metric or a config file changed since it started) is
    refused, naming the field."""
    from recbole_mgformer.tune.request import make_request

    space = _field(stored, "space", dict, source)
    parse_space(space, str(source))  # named after the file, before make_request checks it again
    overrides = _field(stored, "overrides", dict, source)
    first = stored.get("first_trial")
    if not (first is None or isinstance(first, dict)):
        raise TuneSetupError(f"{source}: first_trial is {first!r}, not a mapping or null; {_STALE}")
    try:
        check_literal_strings(overrides, str(source))
        check_literal_strings(first or {}, str(source))
    except UnsafeSettingError as error:
        raise TuneSetupError(str(error)) from None
    stored_files, given_files = _field(stored, "config_files", list, source), stored.get("config_files_given")
    if not _texts(stored_files) or not _texts(given_files) or len(given_files) != len(stored_files):
        raise TuneSetupError(f"{source}: config_files and config_files_given are not the command's lists; {_STALE}")
    config_files = [local_path(path, given) for path, given in zip(stored_files, given_files, strict=True)]
    missing = [path for path in config_files if not Path(path).is_file()]
    if missing:
        raise TuneSetupError(
            f"{source}: the search's config file {missing[0]} is not here; put it there (or run from the folder "
            "where its relative path leads), or start a new search with another --name"
        )
    data_path_given = stored.get("data_path_given")
    if not (data_path_given is None or isinstance(data_path_given, str)):
        raise TuneSetupError(f"{source}: data_path_given is {data_path_given!r}, not a path or null; {_STALE}")
    data_path = local_path(_field(stored, "data_path", str, source), data_path_given or "dataset")
    settings = {
        "search": _field(stored, "search", str, source),
        "samples": _field(stored, "samples", int, source),
        "scheduler": _field(stored, "scheduler", str, source),
        "grace_period": _field(stored, "grace_asked", int, source),
        "search_seed": _field(stored, "search_seed", int, source),
        "name": current["name"],
        "storage_dir": current["storage"],
        "records_dir": records_folder(current),
        "defaults_first": _field(stored, "defaults_first", bool, source),
    }
    model, dataset = _field(stored, "model", str, source), _field(stored, "dataset", str, source)
    try:
        rebuilt = make_request(model, dataset, space, config_files, overrides, data_path, **settings)
    except TuneSetupError as error:  # a check of a new search: named after the file it read
        raise TuneSetupError(f"{source}: {error}") from None
    rebuilt.update(
        space_source=stored.get("space_source", rebuilt["space_source"]),
        data_path_given=data_path_given,
        config_files_given=given_files,
    )
    check_unchanged(stored, rebuilt, source)
    return rebuilt


def _texts(value):
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def check_unchanged(stored, rebuilt, source):
    """The search the stored settings give today must be the one that started: same fields, same config files."""
    for field in SEARCH_FIELDS:
        if as_json(stored.get(field)) != as_json(rebuilt.get(field)):
            raise TuneSetupError(
                f"{source}: the search started with {field} {stored.get(field)!r}, but its settings now give "
                f"{rebuilt.get(field)!r} (a model's or dataset's YAML, or the project, changed since); its finished "
                "trials would not be this search's: start a new search with another --name"
            )
    if stored.get("config_files_sha256") != rebuilt["config_files_sha256"]:
        changed = [
            path
            for path, before, now in zip(
                rebuilt["config_files"],
                stored.get("config_files_sha256") or [],
                rebuilt["config_files_sha256"],
                strict=False,
            )
            if before != now
        ]
        raise TuneSetupError(
            f"{source}: config file {changed[0] if changed else rebuilt['config_files']} changed since the search "
            "started (its finished trials ran with the old one); restore it, or start a new search with another "
            "--name"
        )
