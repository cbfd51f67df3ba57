"""Ray started here or joined, and the Ray Tune ``Tuner`` of a request built and run."""

import logging
import signal
import tempfile
import threading
from pathlib import Path

from recbole_mgformer.tune.request import require_hyperopt
from recbole_mgformer.tune.space import TuneSetupError, parse_space, ray_space
from recbole_mgformer.tune.trials import METRIC, PROGRESS, WholeValue, train_trial


def default_temp_dir(storage):
    """Ray's temporary folder: ``<storage>/ray-tmp`` when short enough, else ``/tmp/ray-recbole-mgformer``.

    Ray puts unix sockets at ``<temp>/session_<date>_<pid>/sockets/...``, which must stay under 107 characters."""
    candidate = Path(storage) / "ray-tmp"
    return candidate if len(str(candidate)) <= 40 else Path(tempfile.gettempdir()) / "ray-recbole-mgformer"


def search_algorithm(search, seed, first_trial=None):
    """Ray's search algorithm; ``first_trial`` (a point of every searched key) replaces the first of its samples,
    the others drawn as without it (the point draws nothing)."""
    if search == "hyperopt":
        require_hyperopt()
        from ray.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=seed, points_to_evaluate=[dict(first_trial)] if first_trial else None)
    from ray.tune.search.basic_variant import BasicVariantGenerator

    points = (
        [{key: WholeValue(value) if isinstance(value, (list, dict)) else value for key, value in first_trial.items()}]
        if first_trial
        else None
    )
    return BasicVariantGenerator(random_state=seed, points_to_evaluate=points)


def init_ray(address, num_cpus, num_gpus, temp_dir):
    """Start Ray (or join the cluster at ``address``) unless this process already did; True if started here."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
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


def build_tuner(request, cpus_per_trial, gpus_per_trial, resume, verbose):
    from ray import tune
    from ray.air import FailureConfig, RunConfig
    from ray.tune.schedulers import FIFOScheduler

    from recbole_mgformer.tune.asha import ResumableASHA

    trainable = tune.with_resources(
        tune.with_parameters(train_trial, request=request), {"cpu": cpus_per_trial, "gpu": gpus_per_trial}
    )
    if resume:
        return tune.Tuner.restore(
            request["experiment"],
            trainable=trainable,
            resume_unfinished=True,
            resume_errored=False,
            restart_errored=False,
        )
    scheduler = (
        ResumableASHA(time_attr=PROGRESS, max_t=request["max_t"], grace_period=request["grace_period"])
        if request["scheduler"] == "asha"
        else FIFOScheduler()
    )
    return tune.Tuner(
        trainable,
        param_space=ray_space(parse_space(request["space"]), request["search"]),
        tune_config=tune.TuneConfig(
            metric=METRIC,
            mode=request["mode"],
            num_samples=request["samples"],
            scheduler=scheduler,
            search_alg=search_algorithm(request["search"], request["search_seed"], request.get("first_trial")),
        ),
        run_config=RunConfig(
            name=request["name"],
            storage_path=request["storage"],
            verbose=verbose,
            failure_config=FailureConfig(max_failures=0),
        ),
    )


def fit_tuner(tuner):
    """``tuner.fit()``, then Ctrl-C back to interrupting this process (Ray Tune leaves its own handler behind)."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return tuner.fit()
    finally:
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)
