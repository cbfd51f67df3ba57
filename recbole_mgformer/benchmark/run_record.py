"""A benchmark run's record: the fields a trained and a scored run share, the measurements beside its results (per-user
values, popularity groups, the epoch cap), where it lives, how its settings compare, and moving it aside."""

import contextlib
import time
from pathlib import Path

import numpy
import scipy.sparse
import torch

from recbole_mgformer.benchmark.datasets import same_for_every_seed
from recbole_mgformer.benchmark.entries import slug
from recbole_mgformer.benchmark.names import is_hybrid
from recbole_mgformer.benchmark.popularity import GROUP_RULE, popularity_metrics
from recbole_mgformer.benchmark.stats import PER_USER_METRIC, per_user_path, write_per_row, write_per_user
from recbole_mgformer.config.input_checks import claim
from recbole_mgformer.evaluation import (
    TopItemsRecorder,
    ndcg_by_user,
    ranking_width,
    same_evaluation,
    scores_by_row,
)
from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.records import machine, package_versions, shown_path
from recbole_mgformer.training.checkpoint_files import plain_value
from recbole_mgformer.training.trainer import RUNTIME_KEYS

# Settings that change where and how a run computes, not its result: the resume's runtime keys (less ``epochs``,
# which a benchmark run's result depends on), the GPU flag a device implies, evaluation batching, and RecBole's
# saved-data paths.
UNCOMPARED_KEYS = (RUNTIME_KEYS - {"epochs"}) | {
    "use_gpu",
    "eval_batch_size",
    "save_dataset",
    "dataset_save_path",
    "save_dataloaders",
    "dataloaders_save_path",
}

# The per-user metric of each kind of table's paired test (a context table pairs its test rows instead).
PER_USER_METRICS = {"general": (PER_USER_METRIC, 20), "sequential": ("ndcg@10", 10)}


def hit_cap(best_epoch, epochs, cap, stopping_step, eval_step=1):
    """Did the epoch cap, not early stopping, end a run whose validation might still have improved? True when the
    run trained all ``cap`` epochs and its best epoch was recent enough that RecBole's early stopping (stop after
    ``stopping_step`` + 1 evaluations, every ``eval_step`` epochs, without a better valid score) had not yet
    fired; such a row's cap was too low for it."""
    if best_epoch is None or epochs < cap:
        return False
    return best_epoch + (stopping_step + 1) * eval_step > cap - 1


def matmul_precision(model):
    """``"bf16"`` or ``"fp32"``: what a model with a ``precision`` option multiplies in (``auto`` resolved on this
    machine); None for models without one."""
    dtype = model_contract(model).matmul_dtype
    return None if dtype is None else {torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]


def record_path(runs_dir, dataset, variant, seed):
    return Path(runs_dir) / dataset / f"{slug(variant)}-seed{seed}.json"


def record_config(config):
    """A run's settings as its record keeps them (``config``), RecBole's private keys left out."""
    return plain_value({key: value for key, value in config.final_config_dict.items() if not key.startswith("_")})


def settings_changes(recorded, current):
    """``{key: (recorded, current)}`` of the settings that differ between a record's ``config`` and a run's, the
    :data:`UNCOMPARED_KEYS` aside. A key only one side has is not compared: a setting added to a model or to
    RecBole after a record was written is not a change of the record's run."""
    keys = (set(recorded) & set(current)) - UNCOMPARED_KEYS
    return {key: (recorded[key], current[key]) for key in sorted(keys) if recorded[key] != current[key]}


def move_record(path, folder):
    """Move a record and its per-user values into ``folder``; returns the record's new path. Never overwrites: the
    record's new name is claimed in one step (a record there already, or one another process moves there at the
    same time, stays, and nothing moves), then its per-user values follow it."""
    target = Path(folder) / Path(path).name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        claim(path, target, "moving a record", overwrite=False)
    except FileExistsError:
        raise FileExistsError(
            f"cannot move {path} to {target}: a record is there already; rename one of them"
        ) from None
    if per_user_path(path).exists():
        per_user_path(path).replace(per_user_path(target))  # the record's own: its name came with the record's claim
    return target


def stored_values(model):
    """The numbers a fitted closed-form model keeps to score (dense entries, sparse nonzeros; the interaction
    matrix it scores from included): its "parameters", which its one dummy trainable parameter is not."""

    def size(value):
        if isinstance(value, torch.Tensor):
            return value._nnz() if value.layout != torch.strided else value.numel()
        if scipy.sparse.issparse(value):
            return value.nnz
        return numpy.size(value) if isinstance(value, numpy.ndarray) else 0

    values = {id(value): value for value in model.buffers()}
    for name in getattr(model, "other_parameter_name", None) or []:
        value = getattr(model, name, None)
        values.setdefault(id(value), value)
    return sum(size(value) for value in values.values())


def record_head(run, config, tuning, valid_result, test_result, trainer, train_data, test_data, top_items):
    """The fields that open a run's record, trained or scored: what ran, its results, the per-user values (from
    ``top_items``, the test pass's :class:`~recbole_mgformer.evaluation.TopItems`, None where the test does not rank
    every item)."""
    return {
        "dataset": run.dataset,
        "model": run.model,
        "variant": run.variant,
        "overrides": run.overrides,
        "seed": run.seed,
        "deterministic": same_for_every_seed(run.model, config),
        "tuned_config": shown_path(run.tuned_file, run.results),
        "tuning": tuning,
        "valid": dict(valid_result),
        "test": dict(test_result),
        **run.best_epoch_fields(trainer, train_data, test_data, top_items),
        **(run.choice if is_hybrid({"overrides": run.overrides}) else {}),
    }


def record_tail(run, config, model, commit):
    """The fields that close a run's record, trained or scored: where and with what it ran."""
    return {
        "device": str(config["device"]),
        "machine": machine(),
        "matmul_precision": matmul_precision(model),
        "commit": commit,
        "versions": package_versions(),
        "command": run.command,
        "settings": run.extra,
        "config": record_config(config),
    }


def per_user_fields(run, trainer, test_data, top_items):
    """What the paired tests at render time need, beside the record: each test user's NDCG@20 (general) or
    NDCG@10 (sequential), from the test pass's ranking, or each test row's label and predicted probability
    (context)."""
    if run.kind == "context":
        labels, scores = scores_by_row(trainer, test_data)
        path = write_per_row(run.record_path, labels, scores)
        return {"per_row": {"file": path.name, "rows": len(labels)}}
    metric, k = PER_USER_METRICS[run.kind]
    path = write_per_user(run.record_path, ndcg_by_user(top_items, test_data._dataset, k=k), metric=metric)
    return {"per_user": {"file": path.name, "metric": metric}}


def cap_fields(config, timer):
    """The epoch cap the run had and whether it ended a run still improving (:func:`hit_cap`)."""
    summary = timer.summary(config["valid_metric_bigger"])
    return {
        "epoch_cap": config["epochs"],
        "stopping_step": config["stopping_step"],
        "best_epoch_at_cap": hit_cap(
            summary["best_epoch"], summary["epochs"], config["epochs"], config["stopping_step"], config["eval_step"]
        ),
    }


def popularity_fields(run, train_data, top_items):
    """Test metrics by item popularity group (Fig. 2), from the test pass's ranking: a general table's runs only."""
    if run.kind != "general":
        return {}
    return {"test_popularity": popularity_metrics(top_items, train_data), "popularity_rule": GROUP_RULE}


def run_ranking_width(run, config):
    """How many top items a run's test ranking keeps: enough for RecBole's metrics and the run's per-user metric."""
    return ranking_width(config, PER_USER_METRICS.get(run.kind, (None, 20))[1])


class OneTestPass:
    """A run's test, scored once: the pass that gives RecBole's test metrics keeps the ranking the popularity groups
    and the per-user values are read from, and where the validation loader evaluates exactly what the test loader
    does (:func:`~recbole_mgformer.evaluation.same_evaluation`), the best validation pass is the test.

    Wrap the validations in :meth:`validations` (a context manager: it records only where they may serve as the
    test, so other runs' epochs pay nothing), then :meth:`measure`."""

    def __init__(self, run, trainer, config, valid_data, test_data):
        self.recorder = TopItemsRecorder(trainer, run_ranking_width(run, config))
        self.trainer, self.test_data = trainer, test_data
        self.validation_is_test = valid_data is not None and same_evaluation(valid_data, test_data)

    def validations(self):
        return self.recorder if self.validation_is_test else contextlib.nullcontext()

    def measure(self, valid_result, **evaluate_kwargs):
        """``(test result, TopItems, seconds, reused)``: the validation pass that returned ``valid_result`` where it
        is the test (``reused``, nothing scored), else a test pass."""
        top_items = self.recorder.top_items_of(valid_result) if self.validation_is_test else None
        if top_items is not None:
            return valid_result, top_items, 0.0, True
        started = time.perf_counter()
        with self.recorder:
            test_result = self.trainer.evaluate(self.test_data, **evaluate_kwargs)
        return test_result, self.recorder.top_items_of(test_result), time.perf_counter() - started, False
