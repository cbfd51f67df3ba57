"""Why recbole_mgformer.distributed gathers evaluation data: the metrics RecBole's own DDP evaluation would report.

Trains LightGCN for 2 epochs with 2 gloo processes on a generated dataset of 41 users, once through RecBole's
evaluation path (each rank's padded share of the users, the ranks' metrics averaged with weights that count
batches) and once through this project's (disjoint shares, per-user data gathered once), and prints both beside
one process evaluating the same checkpoint.

    python benchmarks/distributed_metrics.py
"""

import glob
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recbole_mgformer.distributed import free_port, launch  # noqa: E402
from recbole_mgformer.quick_start import _run_rank, build_config, prepare  # noqa: E402

SETTINGS = {"epochs": 2, "state": "WARNING", "show_progress": False, "topk": [10], "valid_metric": "NDCG@10",
            "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "group_by": "user", "mode": "full"}}


def write_dataset(folder, n_users=41, n_items=60, per_user=12, seed=0):
    rng = np.random.default_rng(seed)
    (folder / "tiny").mkdir(parents=True)
    lines = ["user_id:token\titem_id:token"]
    for user in range(n_users):
        items = rng.choice([i for i in range(n_items) if i % 3 == user % 3], size=per_user, replace=False)
        lines += [f"u{user}\ti{item}" for item in items]
    (folder / "tiny" / "tiny.inter").write_text("\n".join(lines) + "\n")


def recbole_evaluation_rank(local_rank, *args):
    """One rank with RecBole's evaluation: padded sampler, per-rank metrics, batch-weighted mean."""
    from recbole.evaluator import Collector
    from recbole.trainer import Trainer

    import recbole_mgformer.distributed as distributed
    import recbole_mgformer.quick_start as quick_start

    quick_start.shard_evaluation = lambda loader: loader
    distributed.DistributedTrainerMixin._map_reduce = Trainer._map_reduce
    distributed.GatheringCollector.get_data_struct = Collector.get_data_struct
    return _run_rank(local_rank, *args)



def main():
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        write_dataset(work / "data")
        for label, worker in (("RecBole's DDP evaluation", recbole_evaluation_rank), ("this project's", _run_rank)):
            config = {**SETTINGS, "data_path": str(work / "data"), "checkpoint_dir": str(work / label[:4]),
                      "nproc": 2, "world_size": 2, "ip": "localhost", "port": free_port(), "offset": 0}
            result = launch(worker, 2, ("LightGCN", "tiny", None, config, True, None))
            single, _ = build_config("LightGCN", "tiny", config_dict={**SETTINGS, "data_path": str(work / "data")})
            _, trainer, (train_data, _, test_data) = prepare(single)
            trainer.eval_collector.data_collect(train_data)
            checkpoint = glob.glob(str(work / label[:4] / "*.pth"))[0]
            print(f"{label}, 2 processes: test {dict(result['test_result'])}")
            print(f"  one process on the same checkpoint: {dict(trainer.evaluate(test_data, model_file=checkpoint))}")


if __name__ == "__main__":
    main()
