"""A search's own records: plain JSON, from which ``--resume`` rebuilds the search. Ray's state (its pickles) is
never read back: a folder someone sends runs no code.

The records folder (``--records``; by default the experiment folder ``<storage>/<name>/``, the benchmark's
``<results>/tuning/<dataset>/<stem>.records/``) holds ``recbole_mgformer_tune.json`` (the request: model, data,
space, the searcher's kind and seed, sample count, scheduler; created exclusively by the search that starts) and
``trials/<index>.json``, one per finished trial (its values, status, scores and the results ASHA saw), each written
whole (a temporary file, then renamed) and never replaced. Those alone continue the search on another machine: a
random or grid search's remaining trials are drawn again from the seed in the request, a hyperopt search's TPE is
told the finished trials. Ray's own folders go to ``<storage>/<name>/ray-<n>/``, one per run of the command, scratch
that may be lost. ``<records>.tune-lock`` (and ``<storage>/<name>.tune-lock`` where Ray's folder is elsewhere) is
held (``flock``) while a command runs the search, so a second command on it stops at once."""

import hashlib
import json
import math
import numbers
import os
import socket
from contextlib import contextmanager
from pathlib import Path

from recbole_mgformer.config.input_checks import write_new_text
from recbole_mgformer.locks import lock_file
from recbole_mgformer.safety import UnsafeSettingError, check_literal_strings
from recbole_mgformer.training.checkpoint_files import plain_value
from recbole_mgformer.tune.space import TuneSetupError

REQUEST_FILE = "recbole_mgformer_tune.json"  # the search's request, inside its records folder
TRIALS_DIR = "trials"  # <records>/trials/<index>.json: one finished trial each
RAY_RUN_PREFIX = "ray-"  # <experiment>/ray-<n>/: Ray's folders of the command's n-th run, never read back
RECORDS_VERSION = 1  # requests without it come from searches whose progress lived only in Ray's pickles
STATUSES = ("completed", "stopped early", "failed")

# What makes two searches the same search: each trial record carries a digest of these, so a record copied from
# another search (or a request edited since) is refused. Paths are left out: a search moves between machines.
SEARCH_FIELDS = (
    "model",
    "dataset",
    "space",
    "search",
    "samples",
    "scheduler",
    "grace_period",
    "max_t",
    "search_seed",
    "overrides",
    "metric",
    "mode",
    "defaults_first",
    "first_trial",
)


def records_folder(request):
    """The folder of the search's request and trial records: ``records_dir``, else (a request from before it was
    kept) the experiment folder, where they were."""
    return request.get("records_dir") or request["experiment"]


def as_json(value):
    """``value`` as a JSON file holds it (tuples as lists, numpy numbers as Python's)."""
    return json.loads(json.dumps(plain_value(value)))


def search_digest(request):
    """A short hash of the fields that define the search (:data:`SEARCH_FIELDS`), order kept (the space's order
    is the order of its draws)."""
    fields = as_json({field: request.get(field) for field in SEARCH_FIELDS})
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ reading


def _refuse_constant(name):
    raise ValueError(f"{name} is not a number JSON holds")


def read_json_object(path, what):
    """The JSON object in ``path``; a TuneSetupError naming the file where it is not one (NaN and Infinity too)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise TuneSetupError(f"{path}: cannot read {what} ({error}); {_FIX}") from None
    if not isinstance(value, dict):
        raise TuneSetupError(f"{path}: {what} must be a JSON object, not {type(value).__name__}; {_FIX}")
    return value


_FIX = "the folder was edited or comes from elsewhere: restore it, or start a new search with another --name"


def record_name(index):
    return f"{index:04d}.json"


def read_trial_records(records, request):
    """``{index: record}`` of the finished trials under ``<records>/trials/``, each checked as plain data of
    this search (:func:`check_trial_record`); a TuneSetupError names the first that is not."""
    folder = Path(records) / TRIALS_DIR
    if not folder.is_dir():
        return {}
    digest, keys = search_digest(request), list(request["space"])
    records = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):  # a record being written (temporary_beside): not one yet
            continue
        record = read_json_object(path, "a trial record")
        check_trial_record(path, record, digest, keys)
        records[record["index"]] = record
    return records


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_score(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _record_problem(path, record, digest, keys):
    """Why ``record`` (read from ``path``) is not a finished trial of the search with ``digest``; None if it is."""
    index = record.get("index")
    if record.get("search") != digest:
        return "it belongs to another search (its search digest differs from this request's)"
    if not _is_int(index) or index < 0 or path.name != record_name(index):
        return f"its index {index!r} does not match its file name (trial 3 is {record_name(3)})"
    if record.get("status") not in STATUSES:
        return f"status {record.get('status')!r} is none of {', '.join(STATUSES)}"
    params = record.get("params")
    if not isinstance(params, dict) or list(params) != keys:
        return f"its values {params!r} are not one value for each searched key ({', '.join(keys)})"
    score = record.get("score")
    if not (score is None and record["status"] == "failed") and not _is_score(score):
        return f"score {score!r} is not a finite number"
    if not _is_int(record.get("epochs")) or not isinstance(record.get("trial"), str):
        return "epochs must be a whole number and trial a name"
    valid = record.get("valid")
    if not isinstance(valid, dict) or not all(_is_score(v) for v in valid.values()):
        return "valid must map metric names to finite numbers"
    if not (record.get("error") is None or isinstance(record.get("error"), str)):
        return "error must be text or null"
    results = record.get("results")
    if not isinstance(results, list) or not all(
        isinstance(r, list) and len(r) == 2 and _is_int(r[0]) and _is_score(r[1]) for r in results
    ):
        return "results must be [evaluations, score] pairs"
    if not isinstance(record.get("defaults", False), bool):
        return "defaults must be true or false"
    return None


def check_trial_record(path, record, digest, keys):
    """A trial record is the plain data this command writes, for this search, and its string values are settings,
    never code (:func:`recbole_mgformer.safety.check_literal_strings`); else a TuneSetupError naming the file."""
    problem = _record_problem(path, record, digest, keys)
    if problem is None:
        try:
            check_literal_strings(record["params"], str(path))
        except UnsafeSettingError as error:
            raise TuneSetupError(f"{error}; {_RECORD_FIX}") from None
        return
    raise TuneSetupError(f"{path}: {problem}; {_RECORD_FIX}")


_RECORD_FIX = (
    "a trial record is written by the search itself: move the file away to run that trial again, or start a new "
    "search with another --name"
)


# ------------------------------------------------------------------------------------------------ writing


def claim_request(request):
    """Create the search's request file in its records folder; only one search can: a folder that holds one
    already is refused."""
    path = Path(records_folder(request)) / REQUEST_FILE
    try:
        write_new_text(path, json.dumps(as_json(request), indent=2) + "\n", "the search's request")
    except FileExistsError:
        raise TuneSetupError(already_holds_a_search(records_folder(request))) from None


def already_holds_a_search(records):
    return (
        f"{records} already holds a search; --resume continues it, --name (or --records) starts another beside it "
        "(or delete that folder to start over)"
    )


def write_trial_record(records, record):
    """``<records>/trials/<index>.json``, written whole (a temporary file, then renamed); never replaced."""
    path = Path(records) / TRIALS_DIR / record_name(record["index"])
    write_new_text(path, json.dumps(as_json(record), indent=2) + "\n", "a trial record")
    return path


def next_ray_run(experiment):
    """``<experiment>/ray-<n>``, the first n not taken: Ray's folders of this run, apart from any earlier run's."""
    n = 1
    while (Path(experiment) / f"{RAY_RUN_PREFIX}{n}").exists():
        n += 1
    return f"{RAY_RUN_PREFIX}{n}"


# ------------------------------------------------------------------------------------------------ the lock


def lock_path(experiment):
    experiment = Path(experiment)
    return experiment.with_name(f"{experiment.name}.tune-lock")


@contextmanager
def search_locks(request):
    """:func:`search_lock` of the search's records folder, and of its Ray folder where that is another one."""
    with search_lock(records_folder(request)):
        if Path(records_folder(request)) == Path(request["experiment"]):
            yield
        else:
            with search_lock(request["experiment"]):
                yield


def search_lock(experiment):
    """Hold ``<storage>/<name>.tune-lock`` while the block runs (a context manager): a second command on the same
    search (started together, or while this one runs) stops with a TuneSetupError naming the holder. The system
    drops the lock when its process ends, however it ends; a copied folder carries no lock. Without ``flock``
    (Windows) nothing is locked, so run one command per search there."""

    def busy(holder):
        return TuneSetupError(
            f"another tune command ({holder or 'another process'}) is running the search at {experiment}; wait for "
            "it to end, or give this one another --name"
        )

    return lock_file(lock_path(experiment), f"pid {os.getpid()} on {socket.gethostname()}", busy)
