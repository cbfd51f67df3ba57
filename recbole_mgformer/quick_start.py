"""``run_recommender``: RecBole's ``run_recbole`` for every model the registry knows.

Mirrors ``recbole.quick_start.run`` and ``run_recbole`` (which import Ray at module level, so they are
not imported here) with four changes: names resolve through :mod:`recbole_mgformer.integration.registry`, the
project's YAML defaults are loaded under the user's config, checkpoints are weights-only, and
data-parallel runs work on CPUs too (:mod:`recbole_mgformer.training.distributed`).
"""

import contextlib
import gc
import logging
import os
import sys
import time
from logging import getLogger
from pathlib import Path

import torch.distributed as dist
from recbole.data import data_preparation
from recbole.utils import ModelType, init_seed, set_color

from recbole_mgformer.config.config_check import (
    check_against_dataset,
    check_config,
    dataset_build_errors,
    model_build_errors,
    recbole_config_errors,
)
from recbole_mgformer.config.defaults import (
    benchmark_config_file,
    dataset_config_beside_data,
    dataset_config_file,
    general_protocol_file,
    model_config_file,
)
from recbole_mgformer.config.input_checks import (
    check_chosen_names,
    check_dataset_name,
    check_setting_types,
    check_user_settings,
    check_writable_folder,
    checked_run_inputs,
    expand_home_folders,
    read_config_file,
    recbole_defaults,
    settle_flags,
    user_setting_sources,
)
from recbole_mgformer.data import validate_dataset_files
from recbole_mgformer.data.duplicates import apply_duplicate_policy
from recbole_mgformer.data.sources import bundled_ml_100k, ensure_dataset, source_folder
from recbole_mgformer.data.train_protocols import check_train_protocol, training_loader
from recbole_mgformer.integration.compat import init_logger
from recbole_mgformer.integration.patches import register
from recbole_mgformer.integration.registry import get_model, get_trainer
from recbole_mgformer.model.precision import flush_subnormals
from recbole_mgformer.safety import create_dataset
from recbole_mgformer.training.distributed import (
    DistributedConfig,
    check_sizes,
    collective_error,
    is_collective_failure,
    is_distributed,
    launch,
    make_shared_folders,
    shard_evaluation,
)
from recbole_mgformer.training.heap import keep_freed_memory, return_freed_memory
from recbole_mgformer.training.resume import (
    best_and_latest,
    check_resumable,
    fit_resumably,
    forget_resume_state,
    mark_finished,
)


@contextlib.contextmanager
def _argv_hidden():
    """RecBole's Config parses ``sys.argv``; a library call takes its settings from arguments only."""
    saved = sys.argv
    sys.argv = saved[:1]
    try:
        yield
    finally:
        sys.argv = saved


# the models the general protocol suits: a top-k over all items per user (sequential and context-aware models
# need a protocol of their own: a time order, labels)
GENERAL_KINDS = (ModelType.GENERAL, ModelType.TRADITIONAL, ModelType.KNOWLEDGE)


def configured_data_path(config_files, config_dict, default=True):
    """The ``data_path`` a Config of ``config_files`` and ``config_dict`` will read (the last setting wins; RecBole's
    ``dataset/`` without one, or None when ``default`` is False), before RecBole appends the dataset's name to it."""
    if "data_path" in (config_dict or {}):
        return str(config_dict["data_path"])
    for path in reversed(list(config_files)):
        settings = read_config_file(path)
        if "data_path" in settings:
            return str(settings["data_path"])
    return str(recbole_defaults()["data_path"]) if default else None


def ml_100k_data_path(config, user_files, config_dict):
    """RecBole's Config points ml-100k at its own copy whatever ``data_path`` says; a ``data_path`` the user set
    whose ``ml-100k/`` holds ``ml-100k.inter`` is read instead, as it is for every other dataset. Returns the log
    line that says which copy is read where the user set one, else ''."""
    data_path = configured_data_path(user_files, config_dict, default=False)
    if data_path is None:
        return ""
    folder = source_folder("ml-100k", data_path)
    config["data_path"] = str(folder)
    if folder == bundled_ml_100k():
        return f"; {Path(data_path) / 'ml-100k'} holds no ml-100k.inter, so RecBole's own copy is read ({folder})"
    return f"; ml-100k read from {folder}"


def dataset_settings_file(dataset, model_class, config_files, config_dict):
    """``(file, the user's, log line)``: the YAML read as ``dataset``'s, at a dataset YAML's precedence, whether the
    user wrote it, and the line that names it. The project's ``properties/dataset/<name>.yaml``, else the user's
    ``<data_path>/<name>/<name>.yaml`` beside the data, else the general protocol for a general model; None for
    another model, which gets RecBole's defaults."""
    shipped = dataset_config_file(dataset)
    data_path = configured_data_path(config_files, config_dict)
    beside = dataset_config_beside_data(dataset, data_path)
    if shipped:
        unread = f" ({beside} beside the data is not read; --config_files={beside} applies it)" if beside else ""
        return shipped, False, f"dataset settings: {shipped}{unread}"
    if beside:
        return beside, True, f"dataset settings: {beside} (beside the data; the project ships none for {dataset})"
    own = Path(data_path) / dataset / f"{dataset}.yaml"
    if model_class.type in GENERAL_KINDS:
        protocol = general_protocol_file()
        line = (
            f"{dataset} has no dataset YAML, so the project's general protocol applies under your settings "
            f"({protocol}: random 8:1:1 split per user, full ranking, Recall and NDCG@20, best epoch by NDCG@20); "
            f"create {own} to change it"
        )
        return protocol, False, line
    kind = model_class.type.name.lower()
    return None, False, f"{dataset} has no dataset YAML: RecBole's defaults apply to a {kind} model; create {own}"


def build_config(model, dataset, config_file_list=None, config_dict=None):
    """A RecBole Config: RecBole's defaults < project model YAML < the dataset's YAML < ``config_file_list`` <
    ``config_dict``, checked by :func:`recbole_mgformer.config.config_check.check_config` (unknown keys, non-finite
    numbers, a GPU that is not there); a dataset name with a path in it, or a config file that is not a YAML mapping,
    is an error naming it first (:mod:`recbole_mgformer.config.input_checks`). The dataset's YAML is the project's, the
    one beside the data, or the general protocol (:func:`dataset_settings_file`); ``config.dataset_settings`` is the log
    line that names it."""
    register()  # every run builds its Config here: its processes and a search's trials register too
    check_dataset_name(dataset)
    config_file_list, config_dict = checked_run_inputs(config_file_list, config_dict)
    sources = user_setting_sources(config_file_list, config_dict)  # config files named by file and line
    check_user_settings(sources)  # topk, metrics, ...
    check_chosen_names(model, dataset, sources)
    config_dict = expand_home_folders(sources, config_dict)  # ~/data: the home folder's, not ./~/data
    model_class = get_model(model)
    model_file = model_config_file(model_class.__name__)
    user_files = list(config_file_list or [])
    dataset_file, users_own, settings_line = dataset_settings_file(
        dataset, model_class, ([model_file] if model_file else []) + user_files, config_dict
    )
    own_files = [dataset_file, *user_files] if users_own else user_files  # checked and named in errors alike
    if users_own:
        check_user_settings(user_setting_sources(own_files, config_dict))
    files = [f for f in (model_file, dataset_file) if f] + user_files
    with _argv_hidden(), recbole_config_errors(config_dict):  # what RecBole refuses, named as a setting
        config = DistributedConfig(model=model_class, dataset=dataset, config_file_list=files, config_dict=config_dict)
    check_config(config, model_class, get_trainer(config["MODEL_TYPE"], model_class.__name__), own_files)
    check_train_protocol(config, model_class)
    check_setting_types(config, read_config_file(model_file) if model_file else None)
    settle_flags(config)  # --reproducibility=0 logged and read as False
    if dataset == "ml-100k":
        settings_line += ml_100k_data_path(config, user_files, config_dict)
    config.dataset_settings = settings_line
    return config, model_class


def settle_data_settings(config):
    """Checks ``config``'s atomic files (a known dataset is imported on first use) and sets what they decide
    (``rm_dup_inter`` for repeated interactions), so that a config logged after this is the one the run uses."""
    ensure_dataset(config["dataset"], Path(config["data_path"]).parent)
    apply_duplicate_policy(config, validate_dataset_files(config))


def prepare_data(config, settled=False):
    """The (train, valid, test) data of ``config``, the way ``run_recbole`` makes them (the seed draws a shuffled
    split). ``settled``: :func:`settle_data_settings` has run on ``config``."""
    init_seed(config["seed"], config["reproducibility"])
    flush_subnormals(config)
    if not settled:
        settle_data_settings(config)
    with dataset_build_errors(config):  # filters that leave no interaction, named
        dataset = create_dataset(config)
    getLogger().info(dataset)
    check_against_dataset(config, dataset)  # settings the data make impossible (topk above the item count, ...)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    train_data = training_loader(config, train_data)  # train_protocol's rows of the same dataset
    if is_distributed(config):
        valid_data, test_data = shard_evaluation(valid_data), shard_evaluation(test_data)
    return train_data, valid_data, test_data


def prepare(config, settled=False):
    """Dataset, splits, model and trainer for ``config``, the way ``run_recbole`` makes them (``settled`` as in
    :func:`prepare_data`)."""
    model_class = get_model(config["model"])
    return_freed_memory(config)  # the data's and the build's temporaries go back as they are freed (training/heap.py)
    train_data, valid_data, test_data = prepare_data(config, settled)
    init_seed(config["seed"] + config["local_rank"], config["reproducibility"])
    started = time.perf_counter()
    with model_build_errors(config):
        model = model_class(config, train_data._dataset).to(config["device"])
    # part of the time to fit: a closed-form model fits here (RecBole's traditional path), MGFormer takes its SVD
    model.build_seconds = round(time.perf_counter() - started, 3)
    return_freed_memory(config)
    keep_freed_memory(config)  # for the training step's tensors
    getLogger().info(model)
    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    return model, trainer, (train_data, valid_data, test_data)


def tuned_config_file(model, dataset):
    """The settings tuned for ``model`` on ``dataset`` (``properties/benchmark/<dataset>/<Model>.yaml``), or None."""
    return benchmark_config_file(get_model(model).__name__, dataset)


def run_recommender(
    model,
    dataset,
    config_file_list=None,
    config_dict=None,
    saved=True,
    resume_file=None,
    nproc=1,
    world_size=-1,
    ip="localhost",
    port=5678,
    offset=0,
    tuned=True,
):
    """Train ``model`` (a name) on ``dataset`` and evaluate it; returns the dict of ``run_recbole``
    (``best_valid_score``, ``valid_score_bigger``, ``best_valid_result``, ``test_result``) and where the run's output
    went: ``checkpoint`` (the best epoch's .pth, None when nothing was saved) and ``log_file``, with ``epochs`` and
    ``best_epoch`` (None for a model trained without epochs). The log's last line names both.

    ``resume_file`` continues a killed run from a checkpoint this project wrote; a finished run's checkpoint is
    refused (:func:`recbole_mgformer.training.resume.check_resumable`), since it is that run's result. With ``tuned``
    (the default), the settings the benchmark tuned for this model and dataset
    (``properties/benchmark/<dataset>/<Model>.yaml``, where one exists) apply under ``config_file_list`` and
    ``config_dict``, and the log names the file; ``tuned=False`` trains with RecBole's defaults and the model's YAML
    alone.

    Data-parallel training (DDP) starts ``nproc`` processes on this machine; ``world_size`` counts the
    processes of all machines (-1: ``nproc``), ``offset`` is the global rank of this machine's first
    one, and ``ip``:``port`` is where rank 0 listens. Config keys ``dist_backend`` (auto, gloo, nccl)
    and ``dist_timeout`` (seconds) tune it. The result is local rank 0's.
    """
    register()
    check_dataset_name(dataset)
    config_file_list, config_dict = checked_run_inputs(config_file_list, config_dict)
    world_size = check_sizes(nproc, world_size, offset)
    if resume_file:
        resume_file = os.path.expanduser(resume_file)
        check_resumable(resume_file)  # before anything trains: a finished run's result is never replaced
    tuned_file = tuned_config_file(model, dataset) if tuned else None
    config_file_list = ([tuned_file] if tuned_file else []) + list(config_file_list or [])  # the user's win
    if world_size == 1:
        config, _ = build_config(model, dataset, config_file_list, config_dict)
        return train_and_test(config, saved, resume_file, tuned_file)
    settings = {
        **(config_dict or {}),
        "nproc": int(nproc),
        "world_size": world_size,
        "ip": str(ip),
        "port": int(port),
        "offset": int(offset),
    }
    return launch(_run_rank, int(nproc), (model, dataset, config_file_list, settings, saved, resume_file, tuned_file))


def _run_rank(local_rank, model, dataset, config_file_list, config_dict, saved, resume_file, tuned_file=None):
    """One process of a data-parallel run."""
    config_dict = {**config_dict, "local_rank": local_rank}
    try:
        config, _ = build_config(model, dataset, config_file_list, config_dict)
        make_shared_folders(config)
        return train_and_test(config, saved, resume_file, tuned_file)
    except RuntimeError as error:
        if is_collective_failure(error):  # a peer died, or a collective timed out
            raise collective_error(error, config_dict) from error
        raise
    finally:
        if dist.is_initialized():
            # The run's trainer and DDP model can survive in reference cycles; gloo aborts the process ("terminate
            # called without an active exception") when its group is destroyed before their gradient reducer.
            gc.collect()
            dist.destroy_process_group()


def run_checkpoint(trainer, resume_file=None):
    """The best-epoch checkpoint of this run: ``resume_file``'s (given as the best one or as the ``.latest.pth``
    beside it), else the new name RecBole's trainer chose."""
    if not resume_file:
        return Path(trainer.saved_model_file)
    path, latest = best_and_latest(resume_file)
    if not (path.is_file() or latest.is_file()):
        raise FileNotFoundError(f"no checkpoint at {resume_file}; check the file name and checkpoint_dir")
    return path


def best_epoch_reason(model, best_epoch):
    """Why a run's best epoch is its first, in one clause (empty for a later one)."""
    if best_epoch != 0:
        return ""
    if str(model).lower() == "mgformer":
        return " (its first: the SVD encodings carry MGFormer to its best at once; results/notes/attention.md)"
    return " (its first: no later epoch scored better)"


def log_file():
    """The file the root logger writes to (RecBole's ``init_logger`` adds it to the first run of a process; later
    runs of that process log into it too), or None."""
    files = [h.baseFilename for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    return files[-1] if files else None


def saved_checkpoint(trainer, saved):
    """The absolute path of the checkpoint the run saved, or None."""
    path = getattr(trainer, "saved_model_file", None) if saved else None
    return os.path.abspath(path) if path and os.path.isfile(path) else None


def writes_checkpoints(config):
    """The first process of each machine writes the checkpoints (RecBole's rule)."""
    return config["single_spec"] or config["local_rank"] == 0


def train_and_test(config, saved=True, resume_file=None, tuned_file=None):
    """Fit on the training split with early stopping on the validation split, then test (see run_recommender).

    With ``saved``, the last epoch is checkpointed beside the best one (``<best>.latest.pth``, with the
    validation history and timings) by :func:`recbole_mgformer.training.resume.fit_resumably`, the benchmark's fit:
    ``resume_file`` (either file) continues a killed run from its last epoch. Once the run has been tested, the best
    checkpoint records that it finished (:func:`recbole_mgformer.training.resume.mark_finished`: no resume replaces it)
    and the last-epoch file is removed. ``tuned_file``: the tuned settings ``config`` was built with, named in the
    log."""
    init_seed(config["seed"], config["reproducibility"])
    init_logger(config)
    logger = getLogger()
    if getattr(config, "dataset_settings", None):
        logger.info(config.dataset_settings)
    if tuned_file:
        logger.info(
            f"tuned settings applied: {tuned_file} (under your config files and settings; "
            "--no-tuned or tuned=False leaves them out)"
        )
    settle_data_settings(config)  # the logged rm_dup_inter is the one the run applies
    logger.info(config)
    if saved and writes_checkpoints(config):  # before the dataset and model are built, not after
        check_writable_folder(config["checkpoint_dir"], "checkpoint_dir")
    _, trainer, (train_data, valid_data, test_data) = prepare(config, settled=True)
    checkpoint = epochs = best_epoch = None
    if saved and hasattr(trainer, "_train_epoch"):  # every trainer with epochs
        checkpoint = run_checkpoint(trainer, resume_file)
        best_valid_result, timer = fit_resumably(
            trainer,
            train_data,
            valid_data,
            checkpoint,
            f"{config['model']} on {config['dataset']}",
            config["show_progress"],
        )
        best_valid_score = trainer.best_valid_score
        epochs, best_epoch = timer.epochs(), timer.best_epoch(config["valid_metric_bigger"])
        logger.info(
            f"epochs {epochs}, best epoch {best_epoch}{best_epoch_reason(config['model'], best_epoch)}"
            + (f", resumed at epoch {timer.resumed_from}" if timer.resumed_from else "")
        )
    else:
        if resume_file:
            trainer.resume_checkpoint(resume_file)
        best_valid_score, best_valid_result = trainer.fit(
            train_data, valid_data, saved=saved, show_progress=config["show_progress"]
        )
    test_result = trainer.evaluate(test_data, load_best_model=saved, show_progress=config["show_progress"])
    if checkpoint is not None:
        # marked before the last epoch goes, so a kill between the two still leaves the run ended
        if writes_checkpoints(config) and os.path.isfile(trainer.saved_model_file):
            mark_finished(trainer.saved_model_file, epochs, best_epoch)
        forget_resume_state(checkpoint)
    logger.info(set_color("best valid ", "yellow") + f": {best_valid_result}")
    logger.info(set_color("test result", "yellow") + f": {test_result}")
    outputs = {"checkpoint": saved_checkpoint(trainer, saved), "log_file": log_file()}
    logger.info(f"checkpoint: {outputs['checkpoint']}; log: {outputs['log_file']}")
    return {
        "best_valid_score": best_valid_score,
        "valid_score_bigger": config["valid_metric_bigger"],
        "best_valid_result": best_valid_result,
        "test_result": test_result,
        **outputs,
        "epochs": epochs,
        "best_epoch": best_epoch,
    }
