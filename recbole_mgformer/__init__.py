"""MGFormer and its baselines as RecBole models, with one runner for all of them.

Importing the package, or any of its modules, imports neither torch nor RecBole here and patches nothing, so
rendering the boards needs neither. :func:`register` registers the models with RecBole, repairs RecBole 1.2.1 for
today's numpy, scipy, pandas and torch, and makes it safe (every patch is listed in
:mod:`recbole_mgformer.integration.patches`); every entry point calls it (:func:`run_recommender`, :func:`recommend`,
the command lines, tuning and the benchmark's runs). Call it yourself before using RecBole's own functions
(``run_recbole``, ``load_data_and_model``, ``HyperTuning``) on this project's models.
"""

__version__ = "0.1.0"


def run_recommender(*args, **kwargs):
    """See :func:`recbole_mgformer.quick_start.run_recommender` (imported on first use)."""
    from recbole_mgformer.quick_start import run_recommender as run

    return run(*args, **kwargs)


def register():
    """Register the models with RecBole: its ``get_model``, ``run_recbole``, ``load_data_and_model`` and
    ``HyperTuning`` find this project's models, and RecBole is repaired and safe
    (:func:`recbole_mgformer.integration.patches.register`). Idempotent; returns the patches applied."""
    from recbole_mgformer.integration.patches import register as apply_patches

    return apply_patches()


def recommend(*args, **kwargs):
    """See :func:`recbole_mgformer.recommend.recommend` (imported on first use)."""
    from recbole_mgformer.recommend import recommend as top_k

    return top_k(*args, **kwargs)


__all__ = ["recommend", "register", "run_recommender", "__version__"]
