"""MGFormer and its baselines as RecBole models, with one runner for all of them."""

__version__ = "0.1.0"


def run_recommender(*args, **kwargs):
    """See :func:`recbole_mgformer.quick_start.run_recommender` (imported on first use)."""
    from recbole_mgformer.quick_start import run_recommender as run

    return run(*args, **kwargs)


__all__ = ["run_recommender", "__version__"]
