"""The tiny sequential data set beside RecBole's models."""

import pytest
from sequence_data import ML100K_SEQUENTIAL, TINY, write_sequences

from recbole_mgformer.quick_start import build_config, prepare


@pytest.fixture
def sequential_setup(tmp_path):
    """``make(model, **overrides) -> (config, model, (train, valid, test))`` on the tiny sequences."""
    data = write_sequences(tmp_path / "data")

    def make(model, **overrides):
        config, _ = build_config(model, "tinyseq", [ML100K_SEQUENTIAL], {**TINY, "data_path": str(data), **overrides})
        built, _, splits = prepare(config)
        return config, built, splits

    return make
