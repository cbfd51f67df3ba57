"""Ray started here or joined, and the Ray Tune ``Tuner`` of a request built and run."""

import logging
import signal
import socket
import tempfile
import threading
from pathlib import Path

from recbole_mgformer.tune.records import next_ray_run
from recbole_mgformer.tune.request import require_hyperopt
from recbole_mgformer.tune.space import TuneSetupError, parse_space, ray_space
from recbole_mgformer.tune.trials import INDEX, METRIC, PROGRESS, train_trial


def default_temp_dir(storage):
    """Ray's temporary folder: ``<storage>/ray-tmp`` when short enough, else ``/tmp/ray-recbole-mgformer``.

    Ray puts unix sockets at ``<temp>/session_<date>_<pid>/sockets/...``, which must stay under 107 characters."""
    candidate = Path(storage) / "ray-tmp"
    return candidate if len(str(candidate)) <= 40 else Path(tempfile.gettempdir()) / "ray-recbole-mgformer"


def check_reachable(address, timeout=5.0):
    """A ``host:port`` (or ``ray://host:port``) where nothing listens is a TuneSetupError within ``timeout``
    seconds: Ray retries such a head for minutes (printing a warning every few seconds, or a traceback per retry for
    a host that does not answer). ``auto`` and ``local`` are left to Ray, which answers them at once."""
    host, colon, port = str(address).removeprefix("ray://").rpartition(":")
    if not colon:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise TuneSetupError(
            f"--address {address}: nothing answers at {host}:{port} ({error.strerror or error}); start Ray there with "
            "`ray start --head` (its output names the address), check the host and port, or leave --address out to "
            "start Ray here"
        ) from None


def init_ray(address, num_cpus, num_gpus, temp_dir):
    """Start Ray (or join the cluster at ``address``) unless this process already did; True if started here."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        check_reachable(address)
        try:
            ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
        except ConnectionError as error:
            raise TuneSetupError(
                f"--address {address}: no Ray cluster answered there ({error}); start one with `ray start --head` "
                "(its output names the address), check the host and port, or leave --address out to start Ray here"
            ) from None
    else:
        Path(temp_dir).mkdir(parents=True, exist_ok=True)
        ray.init(
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            include_dashboard=False,
            _temp_dir=str(temp_dir),
            logging_level=logging.WARNING,
        )
    return True


def check_resources(cpus_per_trial, gpus_per_trial):
    import ray

    available = ray.cluster_resources()
    for kind, wanted in (("CPU", cpus_per_trial), ("GPU", gpus_per_trial)):
        if wanted > available.get(kind, 0):
            flag = f"--{kind.lower()}s-per-trial"
            raise TuneSetupError(
                f"{flag} {wanted} asks for more than the Ray cluster has ({available.get(kind, 0)} "
                f"{kind}s); lower {flag}" + (" (the benchmark's --tune-gpus) or set it to 0" if kind == "GPU" else "")
            )


def build_tuner(request, plan, recorder, cpus_per_trial, gpus_per_trial, verbose):
    """A fresh Ray Tune ``Tuner`` of the trials ``plan`` leaves to run (never one restored from Ray's pickles):
    a random or grid search's remaining draws by their index, or hyperopt's remaining samples from a searcher
    that knows the finished trials; ASHA's rungs hold the finished trials' results. Ray writes to a new
    ``<experiment>/ray-<n>/``."""
    from ray import tune
    from ray.air import FailureConfig, RunConfig
    from ray.tune.schedulers import FIFOScheduler

    from recbole_mgformer.tune.asha import ResumableASHA

    trainable = tune.with_resources(
        tune.with_parameters(train_trial, request=request, drawn=plan.drawn),
        {"cpu": cpus_per_trial, "gpu": gpus_per_trial},
    )
    history = {index: record["results"] for index, record in plan.records.items()}
    scheduler = (
        ResumableASHA(time_attr=PROGRESS, max_t=request["max_t"], grace_period=request["grace_period"], history=history)
        if request["scheduler"] == "asha"
        else FIFOScheduler()
    )
    if plan.drawn is not None:
        param_space, samples, search_alg = {INDEX: tune.grid_search(plan.remaining)}, 1, None
    else:
        param_space = ray_space(parse_space(request["space"]), "hyperopt")
        samples, search_alg = plan.to_run, hyperopt_search(request, plan)
    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=METRIC, mode=request["mode"], num_samples=samples, scheduler=scheduler, search_alg=search_alg
        ),
        run_config=RunConfig(
            name=next_ray_run(request["experiment"]),
            storage_path=request["experiment"],
            verbose=verbose,
            failure_config=FailureConfig(max_failures=0),
            callbacks=[recorder],
        ),
    )


def hyperopt_search(request, plan):
    """Ray's HyperOptSearch with the search's seed, told the finished trials' values and scores as TPE's
    completed trials (their failed ones are left out, as TPE leaves failed trials out), and starting from the
    model's defaults where the search does and their trial has not finished.

    Not identical to an uninterrupted search: TPE's later suggestions depend on its random draws, which start
    again from the seed, and on the trials that were running, which are not known; the finished trials and their
    scores are."""
    require_hyperopt()
    from ray.tune.search.hyperopt import HyperOptSearch

    class RecordedHyperOptSearch(HyperOptSearch):
        def _setup_hyperopt(self):
            super()._setup_hyperopt()
            add_finished_trials(self, finished)

    finished = [(record["params"], record["score"]) for record in plan.records.values() if record["status"] != "failed"]
    first = [dict(plan.first_pending)] if plan.first_pending is not None else None
    return RecordedHyperOptSearch(random_state_seed=request["search_seed"], points_to_evaluate=first)


def add_finished_trials(searcher, finished):
    """Insert ``finished`` ``(values, score)`` pairs into ``searcher``'s hyperopt trials as completed ones, after
    its points to evaluate (which it takes from the front of its list)."""
    import copy

    import hyperopt
    from hyperopt.fmin import generate_trial

    trials = searcher._hpopt_trials
    for params, score in finished:
        point = copy.deepcopy(params)
        searcher._convert_categories_to_indices(point)  # a choice's value -> its index, as hyperopt keeps it
        (tid,) = trials.new_trial_ids(1)
        doc = generate_trial(tid, point)
        doc["state"] = hyperopt.JOB_STATE_DONE
        doc["result"] = {"loss": searcher.metric_op * score, "status": hyperopt.STATUS_OK}
        trials.insert_trial_docs([doc])
    trials.refresh()


def fit_tuner(tuner):
    """``tuner.fit()``, then Ctrl-C back to interrupting this process (Ray Tune leaves its own handler behind)."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return tuner.fit()
    finally:
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)
