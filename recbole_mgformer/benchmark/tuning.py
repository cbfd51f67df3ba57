"""The benchmark's equal-budget search (``--tune-budget N``): every model entry is searched with the same number of
trials, ASHA grace period, epoch cap, search seed and validation metric (the dataset's), over
``properties/hyper/<Model>.yaml`` (``properties/hyper/<dataset>/<Model>.yaml`` where a dataset has its own),
through :func:`recbole_mgformer.tune.tune_recommender`; the best trial's values
become ``properties/benchmark/<dataset>/<stem>.yaml`` (see :func:`recbole_mgformer.benchmark.entries.tuned_stem`),
which the seed runs, ``run.py`` and ``run_recommender`` apply. With ``--tune-defaults-first`` the first of every
search's N trials is the model's own defaults, and the budget's text (a page's section) says so.

The search's page and record go to ``<results>/tuning/<dataset>/<stem>.md`` / ``.json``, and its own records (the
request and one plain-JSON file per finished trial, written as each trial ends) to ``<stem>.records/`` beside them,
committed with the results; Ray's folders go to ``<storage>/benchmark-<dataset>-<stem>-<budget signature>/``
(``--tune-storage``, scratch). A search whose record says it finished is not run again; an interrupted one is
rebuilt from its records, never from Ray's pickles: the same command on a new machine (``saved/`` empty, the results
checked out) keeps the finished trials and draws the same remaining ones. Records of another search there (another
budget or space) stop the command, naming them.
"""

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml
from recbole.config import Config

from recbole_mgformer.benchmark.claims import claim
from recbole_mgformer.benchmark.entries import bounded_name, tuned_stem, variant_name
from recbole_mgformer.config.defaults import benchmark_config_file, tuned_dir
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.records import shown_path


@dataclass(frozen=True)
class TuneBudget:
    """What every model's search gets alike: ``trials`` (N), at most ``epochs`` epochs a trial, ASHA's
    ``grace`` evaluations before it may stop one, the random search's ``seed``, and with ``defaults_first`` a
    first trial that is each model's own defaults (one of the ``trials``); and where things run and go (resources
    are not part of the budget: a search on a GPU or a cluster is the same search)."""

    trials: int
    epochs: int = 30
    grace: int = 5
    seed: int = 0
    cpus: int = None  # num_cpus of the local Ray (None: all); each trial takes one
    gpus: float = 0  # GPUs a trial takes; fractions share one (0.25: four trials a GPU)
    address: str = None  # an existing Ray cluster ("auto": a local `ray start`) instead of a Ray started here
    storage: str = "saved/tune"
    defaults_first: bool = False

    def signature(self):
        return f"n{self.trials}-e{self.epochs}-g{self.grace}-s{self.seed}" + ("-d" if self.defaults_first else "")

    def matches(self, request):
        """Was ``request`` (a search record's) made with this budget? (The search caps the grace at its evaluations.)"""
        grace = min(self.grace, request.get("max_t", self.grace))
        return (
            request["samples"],
            request["overrides"].get("epochs"),
            request["grace_period"],
            request["search_seed"],
            request["search"],
            bool(request.get("defaults_first")),
        ) == (self.trials, self.epochs, grace, self.seed, "random", self.defaults_first)


def search_paths(results, dataset, stem):
    """The search's page and record (``md``, ``json``) and the folder of its own records (``records``)."""
    folder = Path(results) / "tuning" / dataset
    return {suffix: folder / f"{stem}.{suffix}" for suffix in ("md", "json", "records")}


def read_settings(path):
    return yaml.load(Path(path).read_text(), Loader=Config._build_yaml_loader(None)) or {}


def search_space(model, fixed, dataset=None):
    """The model's shipped space (the dataset's own where it has one) without the keys an entry fixes
    (``MGFormer[embedding_size=128]`` searches the rest)."""
    from recbole_mgformer.tune.space import TuneSetupError, load_space

    raw, source = load_space(None, model, dataset)
    space = {key: spec for key, spec in raw.items() if key not in fixed}
    if not space:
        raise TuneSetupError(f"{variant_name(model, fixed)} fixes every key of {source}; nothing is left to search")
    return space


def chosen_yaml(record, variant, page):
    """The text of ``properties/benchmark/<dataset>/<stem>.yaml``: a header naming the search, then its best values."""
    request, best = record["request"], record["best"]
    header = [
        f"# {variant} on {request['dataset']}: the best of the benchmark's equal-budget search",
        f"# ({budget_text(request)}): valid {request['metric']} {best['score']:.4f}, trial {best['trial']};",
        f"# page {page}, commit {record['provenance']['commit']}. Applied under your own config files and settings",
        "# by the benchmark, run.py and run_recommender (--no-tuned / tuned=False leave it out).",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(best["params"], sort_keys=False)


def budget_text(request):
    """The budget a search had, the same for every model searched with it: the grace asked for, before the search
    capped it at its evaluations (a closed-form model's one fit), so EASE's rows share the others' section."""
    grace = request.get("grace_asked", request["grace_period"])  # older records have only the capped one
    return (
        f"random search of {request['samples']} trials, search seed {request['search_seed']}, "
        f"ASHA grace {grace} of at most {request['overrides'].get('epochs')} epochs"
        + (f", {DEFAULTS_FIRST}" if request.get("defaults_first") else "")
    )


DEFAULTS_FIRST = "first trial: each model's own defaults"  # in the budget text of a search that started from them


def search_info(tuned_file, results):
    """The record's ``tuning`` field: which search chose ``tuned_file``, when its record lies in
    ``<results>/tuning/<dataset>/`` and its best values are the file's; None for hand-written or older files."""
    if not tuned_file:
        return None
    tuned_file = Path(tuned_file)
    paths = search_paths(results, tuned_file.parent.name, tuned_file.stem)
    if not paths["json"].is_file():
        return None
    record = json.loads(paths["json"].read_text())
    best = record.get("best")
    if record.get("interrupted") or not best or read_settings(tuned_file) != best["params"]:
        return None
    request = record["request"]
    info = {
        "search": shown_path(paths["md"], results),
        "file": shown_path(tuned_file, results),
        "budget": request["samples"],
        "epochs": request["overrides"].get("epochs"),
        "grace_period": request["grace_period"],
        "search_seed": request["search_seed"],
        "metric": request["metric"],
        "best_valid": best["score"],
        "commit": record["provenance"]["commit"],
        "text": budget_text(request),
    }
    if request.get("defaults_first"):  # only then: a run's stored field must stay equal to an older search's
        info["defaults_first"] = True
    return info


def settings_hash(path):
    """A short hash of a tuned file's contents: a checkpoint trained with other settings is never resumed."""
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:8]


def ensure_search(model, overrides, dataset, budget, **settings):
    """Search (model, overrides) on ``dataset`` unless a finished search of this budget is recorded, resume it when
    interrupted, and write the chosen file from its record; returns the chosen file's path.

    The search starts from RecBole's defaults, the model's and the dataset's YAML, ``config_files`` and ``extra``
    (the command's ``--key=value``), never from an earlier tuned file; a key the entry or ``extra`` fixes is not
    searched, as it wins over the chosen file in the runs too. Raises TuneSetupError when a recorded search
    used another budget or another space, and KeyboardInterrupt when the search was interrupted;
    :class:`~recbole_mgformer.benchmark.claims.Busy` when another process is running this search."""
    experiment = experiment_path(model, overrides, dataset, budget)
    with claim(experiment.with_name(f"{experiment.name}.lock")):
        return _search_once(model, overrides, dataset, budget, experiment, **settings)


def experiment_path(model, overrides, dataset, budget):
    """Ray's folder of the search of (model, overrides) on ``dataset`` with ``budget``."""
    name = f"benchmark-{dataset}-{tuned_stem(model, overrides)}-{budget.signature()}"
    return Path(budget.storage).resolve() / bounded_name(name, 240)  # and its claim's ".lock"


def _search_once(
    model,
    overrides,
    dataset,
    budget,
    experiment,
    *,
    results,
    data_path,
    config_files=(),
    extra=None,
    folder=None,
    log=print,
):
    from recbole_mgformer.tune.search import REQUEST_FILE, tune_recommender
    from recbole_mgformer.tune.space import TuneSetupError

    stem = tuned_stem(model, overrides)
    paths = search_paths(results, dataset, stem)
    label = f"search of {variant_name(model, overrides)} on {dataset}"
    space = search_space(model, {**(extra or {}), **overrides}, dataset)
    stored_space = json.loads(json.dumps(space))  # as a record or Ray's stored request holds it
    record = json.loads(paths["json"].read_text()) if paths["json"].is_file() else None
    if record is not None and not record.get("interrupted"):
        if not budget.matches(record["request"]):
            raise TuneSetupError(
                f"{paths['json']} holds a finished {label} with another budget "
                f"({budget_text(record['request'])}); rerun with that budget, or move its "
                f"page and record away to search again"
            )
        recorded_space = record["request"].get("space")
        if recorded_space is not None and recorded_space != stored_space:
            raise TuneSetupError(
                f"{paths['json']} holds a finished {label} over another space "
                f"({recorded_space}; the space is now {space}); move its page and record away "
                f"to search again"
            )
        log(f"{label}: record exists ({paths['md'].name}), not searched again")
    else:
        records = paths["records"].resolve()
        adopt_older_records(experiment, records, log)
        resume = (records / REQUEST_FILE).is_file()  # the search's own record, not Ray's pickles
        if resume:  # a resumed search keeps the budget and space it started with: they must still be these
            check_started(records / REQUEST_FILE, budget, stored_space, space, label)
        log(
            f"{label}: {'resuming' if resume else 'starting'} ({budget.trials} trials"
            + (", the first the model's defaults" if budget.defaults_first else "")
            + f", at most {budget.epochs} epochs each; records {records}, Ray storage {experiment})"
        )
        summary = tune_recommender(
            model,
            dataset,
            space,
            config_files=list(config_files),
            config_dict={**(extra or {}), **overrides, "epochs": budget.epochs},
            data_path=data_path,
            search="random",
            samples=budget.trials,
            scheduler="asha",
            grace_period=budget.grace,
            gpus_per_trial=budget.gpus,
            address=budget.address,
            num_cpus=budget.cpus,
            results_dir=paths["json"].parent,
            storage_dir=budget.storage,
            records_dir=records,
            name=experiment.name,
            resume=resume,
            search_seed=budget.seed,
            retrain_best=False,
            verbose=0,
            stem=stem,
            defaults_first=budget.defaults_first,
        )
        if summary["interrupted"]:
            raise KeyboardInterrupt(f"the {label} was interrupted; rerun the same command to resume it")
        record = json.loads(paths["json"].read_text())
    if record.get("best") is None:
        raise TuneSetupError(f"no trial of the {label} finished; see the errors on {paths['md']}")
    chosen = Path(folder or tuned_dir()) / dataset / f"{stem}.yaml"
    chosen.parent.mkdir(parents=True, exist_ok=True)
    chosen.write_text(chosen_yaml(record, variant_name(model, overrides), shown_path(paths["md"], results)))
    return str(chosen)


def check_started(request_file, budget, stored_space, space, label):
    """The interrupted search whose request is ``request_file`` is this budget's, over this ``space``; else a
    TuneSetupError naming its folder: records of another search are never continued, nor mixed with this one's."""
    from recbole_mgformer.tune.records import read_json_object
    from recbole_mgformer.tune.space import TuneSetupError

    started = read_json_object(request_file, "the search's request")
    folder = request_file.parent
    try:
        same_budget = budget.matches(started)
    except (KeyError, TypeError, AttributeError):
        same_budget = False
    if not same_budget:
        raise TuneSetupError(
            f"{folder} holds the records of an interrupted {label} with another budget or search seed "
            f"({_started_budget(started)}; this command's: {budget.trials} trials, search seed {budget.seed}, "
            f"ASHA grace {budget.grace} of at most {budget.epochs} epochs"
            + (f", {DEFAULTS_FIRST}" if budget.defaults_first else "")
            + "); rerun with that budget to finish it, or move that folder away to search again"
        )
    started_space = started.get("space")
    if started_space is not None and started_space != stored_space:
        raise TuneSetupError(
            f"the interrupted {label} at {folder} started over another space "
            f"({started_space}; the space is now {space}); delete that folder to search "
            f"the new space, or restore the old one to resume it"
        )


def _started_budget(request):
    try:
        return budget_text(request)
    except (KeyError, TypeError, AttributeError):
        return "a request this command did not write"


def adopt_older_records(experiment, records, log):
    """An interrupted search that kept its records in Ray's folder (before they went beside the results): its
    request and trial records copied, as they are, into ``records`` (where they are checked when read), so the
    search continues there; nothing is copied where ``records`` holds a search or trial records already."""
    from recbole_mgformer.tune.records import REQUEST_FILE, TRIALS_DIR

    older = experiment / REQUEST_FILE
    if not older.is_file() or (records / REQUEST_FILE).exists() or (records / TRIALS_DIR).exists():
        return
    (records / TRIALS_DIR).mkdir(parents=True)
    for path in sorted((experiment / TRIALS_DIR).glob("*.json")):
        if not path.name.startswith("."):
            shutil.copyfile(path, records / TRIALS_DIR / path.name)
    shutil.copyfile(older, records / REQUEST_FILE)  # last: a copy cut short leaves no request, and is refused
    log(f"copied the records of the search in {experiment} to {records}, where it continues")


def trained_overrides(model, overrides):
    """An entry's overrides less those that act only on its scores after training (the model class's
    ``SCORING_OPTIONS``: MGFormer's filter residual), which leave it training as the entry without them."""
    scoring = model_contract(get_model(model)).scoring_options_of(overrides)
    return {key: value for key, value in overrides.items() if key not in scoring}


def tuned_file_for(model, overrides, dataset, folder=None):
    """The tuned file a run of (model, overrides) applies: the entry's own (a variant searched as itself), else that
    of the entry it trains as (:func:`trained_overrides`: ``MGFormer[attention=False; filter_residual=gfcf]`` takes
    ``mgformer-attention-false.yaml``), else that of the entry the model says it is tuned as (``tuned_as``:
    MGFormer's hybrid trained as one model takes its tokens' file, so the two hybrids train at equal settings), else
    the model's (the ablations of the tuned MGFormer, and any other variant), else None."""
    if not overrides:
        return benchmark_config_file(model, dataset, folder)
    own = benchmark_config_file(tuned_stem(model, overrides), dataset, folder)
    for settled in (trained_overrides(model, overrides), model_contract(get_model(model)).tuned_as(overrides)):
        if own is None and settled and settled != overrides:
            own = benchmark_config_file(tuned_stem(model, settled), dataset, folder)
    return own or benchmark_config_file(model, dataset, folder)
