"""``run_recommender``: RecBole's ``run_recbole`` for every model the registry knows.

Mirrors ``recbole.quick_start.run_recbole`` (which imports Ray at module level, so it is not
imported here) with three changes: names resolve through :mod:`recbole_mgformer.registry`, the
project's YAML defaults are loaded under the user's config, and checkpoints are weights-only.
"""

import contextlib
import sys
from logging import getLogger

from recbole.config import Config
from recbole.data import create_dataset, data_preparation
from recbole.utils import init_logger, init_seed, set_color

from recbole_mgformer.data import validate_dataset_files
from recbole_mgformer.defaults import dataset_config_file, model_config_file
from recbole_mgformer.registry import get_model, get_trainer


@contextlib.contextmanager
def _argv_hidden():
    """RecBole's Config parses ``sys.argv``; a library call takes its settings from arguments only."""
    saved = sys.argv
    sys.argv = saved[:1]
    try:
        yield
    finally:
        sys.argv = saved


def build_config(model, dataset, config_file_list=None, config_dict=None):
    """A RecBole Config: RecBole's defaults < project model YAML < project dataset YAML
    < ``config_file_list`` < ``config_dict``."""
    model_class = get_model(model)
    defaults = [model_config_file(model_class.__name__), dataset_config_file(dataset)]
    files = [f for f in defaults if f] + list(config_file_list or [])
    with _argv_hidden():
        config = Config(model=model_class, dataset=dataset, config_file_list=files, config_dict=config_dict)
    return config, model_class


def prepare(config):
    """Dataset, splits, model and trainer for ``config``, the way ``run_recbole`` makes them."""
    model_class = get_model(config["model"])
    init_seed(config["seed"], config["reproducibility"])
    validate_dataset_files(config)
    dataset = create_dataset(config)
    getLogger().info(dataset)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    init_seed(config["seed"] + config["local_rank"], config["reproducibility"])
    model = model_class(config, train_data._dataset).to(config["device"])
    getLogger().info(model)
    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    return model, trainer, (train_data, valid_data, test_data)


def run_recommender(model, dataset, config_file_list=None, config_dict=None, saved=True, resume_file=None):
    """Train ``model`` (a name) on ``dataset`` and evaluate it; returns the dict of ``run_recbole``:
    ``best_valid_score``, ``valid_score_bigger``, ``best_valid_result``, ``test_result``.

    ``resume_file`` continues training from a checkpoint this project wrote.
    """
    config, _ = build_config(model, dataset, config_file_list, config_dict)
    init_seed(config["seed"], config["reproducibility"])
    init_logger(config)
    logger = getLogger()
    logger.info(config)
    _, trainer, (train_data, valid_data, test_data) = prepare(config)
    if resume_file:
        trainer.resume_checkpoint(resume_file)
    best_valid_score, best_valid_result = trainer.fit(
        train_data, valid_data, saved=saved, show_progress=config["show_progress"]
    )
    test_result = trainer.evaluate(test_data, load_best_model=saved, show_progress=config["show_progress"])
    logger.info(set_color("best valid ", "yellow") + f": {best_valid_result}")
    logger.info(set_color("test result", "yellow") + f": {test_result}")
    return {
        "best_valid_score": best_valid_score,
        "valid_score_bigger": config["valid_metric_bigger"],
        "best_valid_result": best_valid_result,
        "test_result": test_result,
    }
