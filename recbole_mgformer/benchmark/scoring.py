"""Scoring-only variants, scored from their trained entry's checkpoint instead of trained again (issue 55).

An entry that differs from another only in its model's ``SCORING_OPTIONS`` (MGFormer's filter residual:
``MGFormer[attention=False; filter_residual=gfcf; filter_residual_weight=0.5]`` against ``MGFormer[attention=False]``)
trains exactly as that entry, and takes its tuned file (:func:`recbole_mgformer.benchmark.tuning.tuned_file_for`).
So the benchmark trains the entry once a seed and scores every such variant from it:

1. The trained entry's record (in the benchmark's runs, or ``--trained-results``' runs) and its checkpoint
   (``<checkpoint_dir>/<dataset>/<entry>-seed<seed>[-tuned-<hash>].pth``: the best epoch, which a finished run
   keeps; only its ``.latest.pth`` resume state goes) are needed.
   No record: the entry is trained first, as an ordinary run of the benchmark whose record joins its table, so one
   command does all. A record without its checkpoint (trained before, elsewhere, or with another
   ``--checkpoint_dir``): an error naming both, unless ``--retrain-missing-checkpoints``, which moves that record to
   ``<results>/exploration/runs/<dataset>/`` (:meth:`~recbole_mgformer.benchmark.runs.Run.retire`) and trains the
   entry again, so its row and the variants come from the same trained models.
2. The checkpoint loads with ``torch.load(weights_only=True)``
   (:func:`recbole_mgformer.training.checkpoint_files.load_checkpoint`) and must be the record's model
   (:func:`check_trained_checkpoint`): the variant's settings but for the scoring options, the same data and training
   split, the record's best epoch and validation score, the model's parameter names and shapes. The variant is built
   with its own options (the residual's filter is fitted from the training split then) and receives the trained
   weights (:func:`trained_state`); valid and test are evaluated by the trainer's evaluator, as a trained run's are.
3. Its record has every field of a trained run's: its own ``valid``, ``test``, per-user values, popularity groups,
   ``build_seconds`` (its construction, the filter's fit included) and ``scoring_seconds``; the trained entry's
   epochs, timings, ``fit_seconds`` and early-stopping fields (:data:`TRAINED_FIELDS`), so the cost columns count
   the training it needed; ``seconds`` is the trained run's plus its own scoring. ``scored_from`` names the
   checkpoint (with its SHA-256) and the trained record, and ``protocol`` says what differs from training the
   variant end to end: the best epoch was selected on the trained entry's validation score, without the scoring
   options (end to end, each epoch's validation would include them).
"""

import hashlib
import json
import time

from recbole_mgformer.benchmark.claims import claim
from recbole_mgformer.benchmark.run_record import (
    OneTestPass,
    record_config,
    record_head,
    record_tail,
    settings_changes,
)
from recbole_mgformer.benchmark.tuning import trained_overrides
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.records import code_commit, shown_path, write_record
from recbole_mgformer.training.checkpoint_files import check_model_state, load_checkpoint
from recbole_mgformer.training.vocabulary import check_dataset, check_training_split

# A scored run's fields taken from its trained entry's record: what training (and selecting the epoch) took.
TRAINED_FIELDS = (
    "best_epoch",
    "epochs",
    "valid_history",
    "resumed_from_epoch",
    "train_seconds_per_epoch",
    "train_history",
    "valid_seconds_per_evaluation",
    "epoch_cap",
    "stopping_step",
    "best_epoch_at_cap",
    "fit_seconds",
)


class MissingCheckpoint(ValueError):
    """A trained entry's record exists without the checkpoint a scoring-only variant needs."""


def scoring_options(model):
    return model_contract(get_model(model)).SCORING_OPTIONS


def trained_entry(model, overrides):
    """The overrides of the entry a scoring-only variant is scored from, or None when ``overrides`` has no scoring
    option (the entry trains itself)."""
    trained = trained_overrides(model, overrides)
    return trained if trained != dict(overrides) else None


def without_scoring(model, settings):
    """``settings`` less the model's scoring options (its extra settings passed to every run, e.g.
    ``--filter_residual_k=256``, do not change how the trained entry trains)."""
    scoring = scoring_options(model)
    return {key: value for key, value in (settings or {}).items() if key not in scoring}


def protocol_note(valid_metric):
    return (
        f"scored from the trained entry's best-epoch checkpoint: the epoch was selected on its validation "
        f"{valid_metric} without the scoring options, which apply only to this run's valid and test scores"
    )


def missing_checkpoint_message(variant_label, trained_label, record_path, checkpoint):
    return (
        f"{variant_label} is scored from {trained_label}, whose record {record_path} exists but whose "
        f"checkpoint {checkpoint} does not (trained before checkpoints were kept, elsewhere, or with another "
        "--checkpoint_dir). Pass the --checkpoint_dir it was trained with, or add --retrain-missing-checkpoints "
        "to move that record to exploration/runs/ and train it again, keeping its checkpoint"
    )


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_trained_checkpoint(checkpoint, path, trained_record, model, settings, train_dataset, valid_metric):
    """Raise ValueError unless ``checkpoint`` (loaded from ``path``) is the model ``trained_record`` records,
    trainable as the variant whose settings (its record's ``config``) are ``settings``: the same settings but for
    the scoring options and the runtime keys, the same data and training split, the record's best epoch and
    validation score."""
    recorded = checkpoint.get("config")
    if not isinstance(recorded, dict):
        raise ValueError(
            f"{path} records no settings ('config'): it was not written by this benchmark; delete it "
            "and train the entry again"
        )
    changed = settings_changes(without_scoring(model, recorded), without_scoring(model, settings))
    if changed:
        shown = "; ".join(f"{key}: {old!r} there, {new!r} here" for key, (old, new) in list(changed.items())[:5])
        raise ValueError(
            f"{path} was trained with other settings than this variant trains with ({shown}): it "
            "cannot be scored from it. Score it with the settings the checkpoint records, or move "
            "the checkpoint and its record aside and train the entry again"
        )
    check_dataset(checkpoint, train_dataset, path)
    check_training_split(checkpoint, train_dataset, path)
    best_epoch = trained_record.get("best_epoch")
    if best_epoch is not None and checkpoint.get("epoch") != best_epoch:
        raise ValueError(
            f"{path} holds epoch {checkpoint.get('epoch')}, but its record {trained_record['variant']} "
            f"seed {trained_record['seed']} tested epoch {best_epoch}: they come from different "
            "trainings. Move both aside and train the entry again"
        )
    score, recorded_score = checkpoint.get("best_valid_score"), trained_record.get("valid", {}).get(valid_metric)
    if recorded_score is not None and (score is None or abs(float(score) - float(recorded_score)) > 1e-9):
        raise ValueError(
            f"{path} records validation {valid_metric} {score}, but its record "
            f"{trained_record['variant']} seed {trained_record['seed']} has {recorded_score}: they come "
            "from different trainings. Move both aside and train the entry again"
        )


def trained_state(model, checkpoint, path):
    """``checkpoint`` with ``model``'s own state where the trained entry has none: a scoring option's untrained
    state, fitted when the variant was built (the residual's filter). Any other difference (a trained parameter
    missing, a name the variant lacks, another shape, another model) is the error of
    :func:`recbole_mgformer.training.checkpoint_files.check_model_state`."""
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    own = {
        key: value
        for key, value in model.state_dict().items()
        if key not in checkpoint["state_dict"] and key not in trainable
    }
    merged = {**checkpoint, "state_dict": {**checkpoint["state_dict"], **own}}
    check_model_state(model, merged, path)
    return merged


def trained_checkpoint(run, trained, log=print):
    """``(checkpoint, record, SHA-256 of the checkpoint file)`` of the ``trained`` entry the variant ``run`` is scored
    from, loaded while no other process works on that entry; the entry trains first when it
    has no record, and again when its checkpoint is missing and ``retrain_missing`` allows it (else
    :class:`~recbole_mgformer.benchmark.scoring.MissingCheckpoint`)."""
    if not trained.record_path.exists():
        log(f"{run.label}: scored from {trained.variant}, which has no record yet: training it first")
        trained.execute(log)
    checkpoint = trained.checkpoint
    if not checkpoint.exists():
        if not run.retrain_missing:
            raise MissingCheckpoint(
                missing_checkpoint_message(run.label, trained.label, trained.record_path, checkpoint)
            )
        with claim(trained.claim_path):  # another process doing the same may have moved it already
            if trained.record_path.exists() and not checkpoint.exists():
                log(f"moved {trained.retire(log)}: its checkpoint {checkpoint} is missing; training it again")
        trained.execute(log)
    with claim(trained.claim_path):  # not while another process retrains it
        return load_checkpoint(checkpoint), json.loads(trained.record_path.read_text()), file_sha256(checkpoint)


def score_variant(run, trained, log=print, announce=lambda: None):
    """Score the scoring-only variant ``run`` (a :class:`~recbole_mgformer.benchmark.runs.Run`) from ``trained``'s
    best-epoch checkpoint and write its record; returns the record. ``announce()`` once the checkpoint is loaded
    (the trained entry may be another process's: then this raises Busy unannounced)."""
    commit = code_commit()
    state, trained_record, digest = trained_checkpoint(run, trained, log)
    announce()
    checkpoint = trained.checkpoint
    config, model, trainer, (train_data, valid_data, test_data) = run.setup(run.checkpoint)
    valid_metric = config["valid_metric"].lower()
    check_trained_checkpoint(
        state, checkpoint, trained_record, run.model, record_config(config), train_data._dataset, valid_metric
    )
    trainer._load_model_state(trained_state(model, state, checkpoint), str(checkpoint))
    test = OneTestPass(run, trainer, config, valid_data, test_data)
    started = time.perf_counter()
    with test.validations():
        valid_result = trainer.evaluate(valid_data, load_best_model=False, show_progress=config["show_progress"])
    valid_seconds = time.perf_counter() - started
    test_result, top_items, test_seconds, reused = test.measure(
        valid_result, load_best_model=False, show_progress=config["show_progress"]
    )
    build_seconds = getattr(model, "build_seconds", None)
    scoring_seconds = (build_seconds or 0.0) + valid_seconds + test_seconds
    record = {
        **record_head(run, config, run.tuning, valid_result, test_result, trainer, train_data, test_data, top_items),
        **{key: trained_record.get(key) for key in TRAINED_FIELDS},
        "test_seconds": round(test_seconds, 3),
        **({"test_from_valid_pass": True} if reused else {}),
        "scoring_seconds": round(scoring_seconds, 1),
        # the training it needed (the trained entry's, its test included) and its own scoring
        "seconds": round((trained_record.get("seconds") or 0.0) + scoring_seconds, 1),
        "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "build_seconds": build_seconds,  # the SVD and the residual's filter, as a trained run of it records
        "scored_from": {
            "checkpoint": shown_path(checkpoint, run.results),
            "sha256": digest,
            "epoch": state.get("epoch"),
            "record": shown_path(trained.record_path, run.results),
            "variant": trained.variant,
            "commit": trained_record.get("commit"),
            "machine": trained_record.get("machine"),
        },
        "protocol": protocol_note(valid_metric),
        **record_tail(run, config, model, commit),
    }
    write_record(run.record_path, record)
    return record
