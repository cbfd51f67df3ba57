"""Benchmarks: train models on datasets over seeds, one JSON record per run, then render every table.

    python -m recbole_mgformer.benchmark --models MGFormer,DirectAU,SimGCL,XSimGCL,SGL,LightGCN,BPR \\
        --datasets amazon-beauty --seeds 0,1,2
    python -m recbole_mgformer.benchmark --models MGFormer-ablations --datasets amazon-beauty --seeds 0
    python -m recbole_mgformer.benchmark --models EAGPS,SASRec,GRU4Rec --datasets ml-100k-seq,amazon-beauty-seq
    python -m recbole_mgformer.benchmark --models CSA,LR,FM,DeepFM,AutoInt --datasets ml-100k-ctx-0.2,ml-100k-ctx-0.8
    python -m recbole_mgformer.benchmark --render-only

A model entry is a name, a name with overrides in brackets (``MGFormer[degree_mask=none; feature_map=elu]``),
or ``MGFormer-ablations`` for the paper's Table 3 ablations and ``attention: False``. A dataset's config in
``properties/dataset/`` gives its protocol and its table (``benchmark_table``: general, sequential or context)
and the page that shows it (``benchmark_page``). Each run writes
``results/runs/<dataset>/<variant>-seed<seed>.json``; a run whose record exists is skipped, so a long benchmark
survives a stopped or replaced machine, and an interrupted run resumes from its checkpoint. Several processes may
share the folders (e.g. one per core, or per machine on a shared disk): each run and search is claimed by the one
process working on it, and the others skip it. Every page, ``results/<page>/leaderboard.md``, is rendered from all
records.
"""

from recbole_mgformer.benchmark.cli import main
from recbole_mgformer.benchmark.entries import ABLATIONS, parse_entry, slug, split_models, variant_name

__all__ = ["ABLATIONS", "main", "parse_entry", "slug", "split_models", "variant_name"]
