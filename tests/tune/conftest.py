"""Fixtures of the tune tests: a small local Ray, a tiny config, a space file."""

import shutil
import tempfile

import pytest

TINY_YAML = ("eval_args: {split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}\n"
             "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\nstate: WARNING\n"
             "train_batch_size: 64\nepochs: 2\nembedding_size: 8\n")


@pytest.fixture(scope="module")
def ray_session():
    """One small local Ray for the module's searches: 2 CPUs, no dashboard, a short temporary folder."""
    import ray

    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, _temp_dir=temp_dir, logging_level="WARNING")
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def tiny_yaml(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_YAML)
    return path
