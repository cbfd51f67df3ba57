"""A search's request kept in its experiment folder, so ``--resume`` continues it as it started."""

import json
from pathlib import Path

from recbole_mgformer.checkpoint_files import plain_value
from recbole_mgformer.safety import UnsafeSettingError, check_literal_strings
from recbole_mgformer.tune.space import TuneSetupError, parse_space

REQUEST_FILE = "recbole_mgformer_tune.json"  # the search's settings, inside Ray's experiment folder, for --resume


# What a resumed search keeps from its start: request field -> the option that sets it. Ray restores the trials,
# space and sample count it started with, so a resumed search cannot take another value of any of them.
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
        now = json.loads(json.dumps(plain_value(request[field])))  # as the stored request holds it
        if now != stored.get(field, now):
            changes.append((option, stored.get(field), now))
    return changes


def prepare_experiment(request, resume, given=()):
    """Check the experiment folder against ``resume``; on resume, the stored request wins over the new one, and
    a setting ``given`` for this run that differs from the stored one is refused (Ray would silently keep the old)."""
    from ray import tune

    experiment = Path(request["experiment"])
    stored = experiment / REQUEST_FILE
    if resume:
        if not (tune.Tuner.can_restore(experiment) and stored.is_file()):
            raise TuneSetupError(f"nothing to resume at {experiment}; start the search without --resume")
        started = json.loads(stored.read_text())
        parse_space(started["space"], str(stored))  # what the trials will be given is checked as a new search's is
        try:
            check_literal_strings(started["overrides"], str(stored))
        except UnsafeSettingError as error:
            raise TuneSetupError(str(error)) from None
        changes = resume_changes(started, request, given)
        if changes:
            listed = "; ".join(f"{option}: started with {before!r}, now {now!r}" for option, before, now in changes)
            raise TuneSetupError(
                f"the search at {experiment} cannot change on --resume ({listed}): a resumed search continues the "
                f"trials it started. Drop {', '.join(option for option, _, _ in changes)} to resume it as it "
                "started, or start a new search with another --name"
            )
        return started
    if tune.Tuner.can_restore(experiment):
        raise TuneSetupError(
            f"{experiment} already holds a search; --resume continues it, --name starts "
            "another beside it (or delete that folder to start over)"
        )
    return request


def store_request(request):
    stored = Path(request["experiment"]) / REQUEST_FILE
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(request, indent=2) + "\n")  # unsorted: the space keeps its order
