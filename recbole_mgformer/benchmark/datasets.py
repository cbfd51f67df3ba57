"""What the benchmark reads from a dataset's config, ``properties/dataset/<name>.yaml``: the table its runs go
into (``benchmark_table``: general, sequential or context, each with its metrics) and the results page that
holds it (``benchmark_page``, default the dataset's name: ``results/<page>/leaderboard.md``), and the heading over
its runs not from an equal-budget search (``benchmark_untuned_heading``)."""

from pathlib import Path

from recbole_mgformer.config.defaults import dataset_config_file
from recbole_mgformer.safety.settings import load_plain_yaml

TABLES = ("general", "sequential", "context")
OLDER_RUNS_HEADING = "Older runs, not from an equal-budget search"


def dataset_settings(dataset):
    """The dataset's config as a mapping; empty for a dataset without one (a general table of its own)."""
    path = dataset_config_file(dataset)
    return (load_plain_yaml(Path(path).read_text()) or {}) if path else {}


def table_kind(dataset):
    kind = dataset_settings(dataset).get("benchmark_table", "general")
    if kind not in TABLES:
        raise ValueError(f"{dataset_config_file(dataset)}: benchmark_table {kind!r} is not one of {', '.join(TABLES)}")
    return kind


def page_of(dataset):
    return str(dataset_settings(dataset).get("benchmark_page", dataset))


def untuned_heading(dataset):
    """The heading over a page's runs that no equal-budget search chose (``benchmark_untuned_heading``): older runs,
    unless the dataset says what they are instead (on a published split: each model at its paper's settings)."""
    heading = dataset_settings(dataset).get("benchmark_untuned_heading", OLDER_RUNS_HEADING)
    if not isinstance(heading, str) or not heading.strip() or "\n" in heading.strip():
        raise ValueError(
            f"{dataset_config_file(dataset)}: benchmark_untuned_heading must be one line of text, not {heading!r}"
        )
    return heading.strip()


def training_share(dataset):
    """rho of the CSA paper: the share of interactions in train + valid, from the dataset's RS split."""
    split = dataset_settings(dataset).get("eval_args", {}).get("split", {}).get("RS")
    return round(sum(split[:2]), 4) if split else None


def check_model_fits(model, dataset):
    """A model runs where its kind's table is: EAGPS on ml-100k-seq, CSA on ml-100k-ctx-0.8, BPR on ml-100k."""
    from recbole.utils import ModelType  # here, not above: rendering a page imports neither RecBole nor torch

    from recbole_mgformer.integration.registry import get_model

    kind = table_kind(dataset)
    model_kind = {ModelType.SEQUENTIAL: "sequential", ModelType.CONTEXT: "context"}.get(
        get_model(model).type, "general"
    )
    if model_kind != kind:
        raise ValueError(
            f"{model} is a {model_kind} model, but the runs of {dataset} go into a {kind} table "
            f"(benchmark_table in {dataset_config_file(dataset) or 'its config'}); run it on a "
            f"dataset with a {model_kind} table"
        )


def split_draws_on_seed(config):
    """Does a run's seed draw its train/valid/test split? It does under ``order: RO`` (RecBole shuffles the
    interactions with the seeded torch stream before splitting: ml-100k's and Amazon-Beauty's protocol), unless
    the split comes from files (``benchmark_filename``)."""
    return not config["benchmark_filename"] and (config["eval_args"] or {}).get("order") == "RO"


def same_for_every_seed(model, config):
    """Does every seed give the same result for a run of ``model`` with ``config``? For a deterministic model
    (:func:`recbole_mgformer.integration.registry.is_deterministic`: EASE, ItemKNN, ...) on a split the seed does not
    draw; on a seeded split each seed is another split, and even a closed-form model runs every seed."""
    from recbole_mgformer.integration.registry import is_deterministic

    return is_deterministic(model) and not split_draws_on_seed(config)
