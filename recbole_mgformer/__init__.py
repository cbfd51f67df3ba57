"""MGFormer and its baselines as RecBole models, with one runner for all of them.

Importing the package imports neither torch nor RecBole, so rendering the boards needs neither. The runner
(:func:`run_recommender`, :func:`recommend`, the command lines, tuning and the benchmark's runs) repairs RecBole 1.2.1
for today's numpy, scipy, pandas and torch (:mod:`recbole_mgformer.integration.compat`) and registers the models with
RecBole's own entry points as :mod:`recbole_mgformer.integration.registry` is imported; before calling RecBole's own
functions, call :func:`register` (see :mod:`recbole_mgformer.integration.plugin`).
"""

__version__ = "0.1.0"


def run_recommender(*args, **kwargs):
    """See :func:`recbole_mgformer.quick_start.run_recommender` (imported on first use)."""
    from recbole_mgformer.quick_start import run_recommender as run

    return run(*args, **kwargs)


def register():
    """See :func:`recbole_mgformer.integration.plugin.register`: RecBole's ``get_model``, ``run_recbole``,
    ``load_data_and_model`` and ``HyperTuning`` find this project's models. Idempotent."""
    from recbole_mgformer.integration.plugin import register as register_with_recbole

    register_with_recbole()


def recommend(*args, **kwargs):
    """See :func:`recbole_mgformer.recommend.recommend` (imported on first use)."""
    from recbole_mgformer.recommend import recommend as top_k

    return top_k(*args, **kwargs)


__all__ = ["recommend", "register", "run_recommender", "__version__"]
