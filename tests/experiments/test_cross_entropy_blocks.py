"""experiments/cross_entropy_blocks.py: times every block size of each shape and dtype, and writes its table."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import experiments.cross_entropy_blocks as blocks  # noqa: E402


def test_the_table_times_each_block_size_of_each_shape_and_dtype(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "SHAPES", {"tiny": (9, 4, 13)})
    monkeypatch.setattr(blocks, "BLOCK_BYTES", (blocks.ONE_BLOCK, 4 * 13 * 2))  # all rows; 2 rows a block
    blocks.main(["--repeats", "2", "--steps", "1", "--results", str(tmp_path)])
    page = (tmp_path / "cross-entropy-blocks.md").read_text()
    assert page.count("| tiny |") == 4 and "| one block |" in page and "| 104 B |" in page
    record = json.loads((tmp_path / "cross-entropy-blocks.json").read_text())
    assert set(record["settings"]) == {"tiny fp32", "tiny bf16"}
    assert all(seconds > 0 for setting in record["settings"].values() for seconds in setting.values())
