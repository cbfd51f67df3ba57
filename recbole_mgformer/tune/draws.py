"""The trials a search runs, fixed by its request, so that a resumed search runs the ones an uninterrupted search
would: the random and grid searches' draws come from the seed alone (the request's space, ``--samples`` and
``--search-seed``, through Ray's own generator), so the request and the finished trials' records are all a new
machine needs to draw the same remaining trials; each record is checked against the draw of its index. Hyperopt's
values are checked against the space."""

from dataclasses import dataclass, field
from pathlib import Path

from recbole_mgformer.tune.records import TRIALS_DIR, as_json, record_name, records_folder
from recbole_mgformer.tune.space import TuneSetupError, in_space, parse_space, ray_space


def _search_rng(seed):
    """The random generator Ray's ``BasicVariantGenerator(random_state=seed)`` draws from."""
    try:
        from ray.tune.search.sample import _BackwardsCompatibleNumpyRng

        return _BackwardsCompatibleNumpyRng(seed)
    except ImportError:  # a Ray without the wrapper: numpy's generator, as the wrapper makes for a seed
        import numpy as np

        return np.random.default_rng(seed)


def drawn_trials(request):
    """The values of every trial of a random or grid search, in the order an uninterrupted search creates them:
    Ray's ``BasicVariantGenerator`` with the search's seed (the model's defaults first where the search starts
    from them; that point draws nothing), each sample over every grid value."""
    from ray.tune.search.variant_generator import generate_variants

    parsed = parse_space(request["space"])
    space = {"config": ray_space(parsed, request["search"])}
    rng = _search_rng(request["search_seed"])
    samples, trials = request["samples"], []
    if request.get("first_trial") is not None:
        trials.append(as_json(request["first_trial"]))
        samples -= 1
    for _ in range(samples):
        for _, spec in generate_variants(space, random_state=rng):
            trials.append(as_json({key: _item(spec["config"][key]) for key in parsed}))
    return trials


def _item(value):
    return value.item() if hasattr(value, "item") else value  # numpy scalars from the samplers


@dataclass
class Plan:
    """What a run of the command does: ``records`` (index -> the finished trials' records, kept), ``drawn`` (every
    trial's values, random and grid search; None for hyperopt), ``remaining`` (indices still to run; hyperopt:
    None) and ``to_run`` (how many trials this run starts), of ``total``."""

    records: dict
    total: int
    to_run: int
    drawn: list = None
    remaining: list = field(default=None)
    first_pending: dict = None  # hyperopt: the model's defaults, when their trial has not finished


def plan_trials(request, records):
    """The trials left to run, after checking each finished trial's record against the search: a random or grid
    search's record must hold the draw of its index, a hyperopt record values inside the space (or the defaults
    the search started from). A TuneSetupError names a record that does not."""
    if request["search"] == "hyperopt":
        return _hyperopt_plan(request, records)
    drawn = drawn_trials(request)
    for index, record in records.items():
        if index >= len(drawn) or record["params"] != drawn[index]:
            expected = f"its draw is {drawn[index]}" if index < len(drawn) else f"it draws {len(drawn)} trials"
            raise TuneSetupError(
                f"trial record {record_name_of(request, index)} holds {record['params']}, not a trial of this "
                f"search ({expected}); the record was edited or comes from another search: move it away to run "
                "that trial again, or start a new search with another --name"
            )
    remaining = [index for index in range(len(drawn)) if index not in records]
    return Plan(records, len(drawn), len(remaining), drawn=drawn, remaining=remaining)


def _hyperopt_plan(request, records):
    parsed = parse_space(request["space"])
    first = request.get("first_trial")
    for index, record in records.items():
        outside = [key for key, (name, args) in parsed.items() if not in_space(record["params"][key], name, args)]
        if index >= request["samples"] or (outside and not (record.get("defaults") and record["params"] == first)):
            raise TuneSetupError(
                f"trial record {record_name_of(request, index)} is not a trial of this search ("
                + (f"{', '.join(outside)} outside the space" if outside else f"it draws {request['samples']}")
                + "); the record was edited or comes from another search: move it away to run that trial again, "
                "or start a new search with another --name"
            )
    pending = first if first is not None and not any(r.get("defaults") for r in records.values()) else None
    to_run = request["samples"] - len(records)
    return Plan(records, request["samples"], to_run, first_pending=pending)


def record_name_of(request, index):
    return str(Path(records_folder(request)) / TRIALS_DIR / record_name(index))
