"""What a run does with repeated (user, item) interactions, counted by the atomic checks before RecBole
loads the dataset.

A repeated pair can land in training and in test. RecBole's full-ranking evaluator masks a user's training
items except those that are also test items, so the model is rewarded for recalling a training item: on a
small file with 500 repeated lines, test Recall@10 rose 12 times. Hence, unless the user chose
``rm_dup_inter`` (RecBole's option), a run removes them (``first``: the first of each pair is kept) and logs
how many. Sequential models are the exception: there a repeat is a re-consumption, part of the sequence
RecBole's leave-one-out split and repeatable evaluation are built for, so they are kept, and logged.
``benchmark_filename`` datasets (pre-split files) cannot drop rows: RecBole splits them by each file's
length, so repeats there are an error that says how to choose.
"""

from logging import getLogger

from recbole.utils import ModelType

KEEP_SEQUENTIAL = "kept: sequential models read a repeated (user, item) as a re-consumption"


def apply_duplicate_policy(config, repeated):
    """Set ``rm_dup_inter`` for ``repeated`` repeated (user, item) interactions and log the decision;
    returns the log line (None without repeats)."""
    if not repeated:
        return None
    chosen = "rm_dup_inter" in config.external_config_dict
    keep = config["rm_dup_inter"]
    what = f"{config['dataset']}: {repeated} repeated (user, item) interactions"
    if config["benchmark_filename"]:
        if keep is None and chosen:
            return _log(
                f"{what} kept (rm_dup_inter: ~); a pair in the training file and in the test file is "
                "not masked by the evaluator, so test metrics are inflated",
                warning=True,
            )
        raise ValueError(
            f"{what} in its benchmark_filename files: RecBole splits those by each file's length, so it cannot "
            "remove rows (rm_dup_inter); remove the repeated lines from the files (the importer reports them), "
            "or set rm_dup_inter: ~ to keep them knowingly (a pair in train and test inflates the test metrics)"
        )
    if not chosen and config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        return _log(f"{what} {KEEP_SEQUENTIAL} (rm_dup_inter: first removes them)")
    if not chosen:
        config["rm_dup_inter"] = keep = "first"
    if keep is None:
        return _log(
            f"{what} kept, as rm_dup_inter: ~ asks; a pair in training and test is not masked by the "
            "evaluator, so test metrics are inflated (rm_dup_inter: first removes them)",
            warning=True,
        )
    return _log(
        f"{what}: removed, keeping the {keep} of each (rm_dup_inter: {keep}"
        + ("" if chosen else ", the default for repeated interactions; rm_dup_inter: ~ keeps them")
        + ")"
    )


def _log(message, warning=False):
    logger = getLogger()
    (logger.warning if warning else logger.info)(message)
    return message
