"""experiments/user_chunk_rows.py: the rows of logits an epoch makes under each chunk size, as a share of the pairs."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.user_chunk_rows import row_shares  # noqa: E402


def test_a_user_is_a_row_for_each_chunk_of_its_pairs():
    shares = row_shares([0, 1, 3, 4], chunks=(1, 2, 4, None))  # 8 pairs of 3 users; a user with none is no row
    assert shares == {1: 1.0, 2: pytest.approx(5 / 8), 4: pytest.approx(3 / 8), None: pytest.approx(3 / 8)}
