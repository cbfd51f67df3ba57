"""The best configuration, as one standalone config, trained once more for its test metrics."""

import logging
import os
from pathlib import Path

from recbole_mgformer.quick_start import run_recommender
from recbole_mgformer.safety import load_yaml
from recbole_mgformer.training.checkpoint_files import plain_value
from recbole_mgformer.tune.trials import _ray_gpu_ids, error_line


def best_settings(request, params):
    """The best configuration as one standalone config: the config files' settings, the fixed settings and the
    searched values, later ones winning, as RecBole merges them; a ``data_path`` only where the search was given
    one, as it was given (a relative path stays relative to where ``run.py`` runs)."""
    settings = {}
    for path in request["config_files"]:
        settings.update(load_yaml(Path(path).read_text()) or {})
    settings.update(request["overrides"])
    given = request["data_path_given"]  # the path as the user gave it; True in records before 2026-11-27
    if given:
        settings["data_path"] = request["data_path"] if given is True else given
    settings.update(params)
    return plain_value(settings)


def retrain(request, settings, workdir):
    """Train ``settings`` (the best YAML's content) the way ``run.py --config_files=best.yaml`` does where the
    search ran, in ``workdir``: the data from the search's own folder (the YAML's ``data_path``, as the user gave it,
    may be relative to where the search ran, not to ``workdir``)."""
    previous = os.getcwd()
    Path(workdir).mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    try:
        logging.getLogger().handlers.clear()
        config_dict = {
            **settings,
            "data_path": request["data_path"],
            "show_progress": False,
            "checkpoint_dir": str(workdir),
            "gpu_id": _ray_gpu_ids(),
        }
        return plain_value(run_recommender(request["model"], request["dataset"], config_dict=config_dict))
    finally:
        os.chdir(previous)


def retrain_on_ray(request, row, cpus_per_trial, gpus_per_trial):
    """The best configuration retrained once as a Ray task with a trial's resources: (result, error line)."""
    import ray

    task = ray.remote(num_cpus=cpus_per_trial, num_gpus=gpus_per_trial)(retrain)
    workdir = str(Path(request["experiment"]) / "best")
    try:
        return ray.get(task.remote(request, best_settings(request, row["params"]), workdir)), None
    except Exception as error:  # the trials' results stay worth writing
        return None, error_line(error)
