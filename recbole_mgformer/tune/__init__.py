"""Hyperparameter search with Ray Tune for any model of the runner, on CPUs or GPUs, locally or on a Ray cluster.

    python -m recbole_mgformer.tune --model MGFormer --dataset amazon-beauty \\
        --space properties/hyper/MGFormer.yaml --samples 24 --cpus-per-trial 1 --gpus-per-trial 0.25
    python -m recbole_mgformer.tune --model MGFormer --dataset amazon-beauty --resume   # after Ctrl-C
    python -m recbole_mgformer.tune --model LightGCN --dataset ml-100k --search grid --epochs=50

A space is a YAML mapping of config keys to one distribution each (by default ``properties/hyper/<Model>.yaml``, or
``properties/hyper/<dataset>/<Model>.yaml`` where the dataset has its own)::

    embedding_size: {choice: [32, 64, 128]}      # one of the values, drawn at random
    n_layers: {grid: [1, 2, 3]}                  # every value (ray.tune.grid_search), times --samples
    uniformity_weight: {loguniform: [0.1, 5.0]}  # low < high, both > 0
    attention_weight: {uniform: [0.5, 1.0]}      # low < high
    n_heads: {randint: [1, 5]}                   # integers low <= x < high, as ray.tune.randint

Each trial trains through :func:`recbole_mgformer.quick_start.prepare` and the trainer's ``fit``, the path of
``run_recommender``, reports the validation metric after every evaluation, and ASHA stops poor trials early.
``--defaults-first`` makes the first of the ``--samples`` trials the model's own defaults for the searched keys
(``properties/model/<Model>.yaml`` over RecBole's, merged as a plain run merges them), the page marking its row.
Any other ``--key=value`` is a fixed config setting for every trial. The command writes ``./tuning/<name>.md``
(``--results`` names another folder: all trials, best first, failed ones with their error, and the test metrics of
the best configuration retrained once), ``.json`` beside it, and ``<name>.yaml``: the best trial's searched values
(never the search's epoch cap), for ``run.py --config_files``; ``<name>`` is the search's ``--name``
(``<Model>-<dataset>`` by default), and a report of another search is never replaced.

The search's records, plain JSON (the request and one file per finished trial), go to ``--records DIR``, by
default its folder ``saved/tune/<name>/`` beside Ray's own folders (``ray-<n>/``, scratch, never read back).
``--resume`` rebuilds the search from the records alone (never from Ray's pickles, which it does not read), on this
machine or another the records were copied or committed to, Ray's folders gone: finished trials are kept, the
others run from their first epoch, the same draws as an uninterrupted search (drawn again from the request's seed);
a space, ``--samples`` or setting that differs from the search's is refused, naming it. A second command on the same
search stops with an error while one runs it::

    python -m recbole_mgformer.tune --model BPR --dataset ml-100k --samples 8 --records results/tuning/BPR.records
    python -m recbole_mgformer.tune --model BPR --dataset ml-100k --resume --records results/tuning/BPR.records
"""

from recbole_mgformer.tune.cli import main
from recbole_mgformer.tune.search import make_request, tune_recommender
from recbole_mgformer.tune.space import TuneSetupError, parse_space, ray_space

__all__ = ["TuneSetupError", "main", "make_request", "parse_space", "ray_space", "tune_recommender"]
