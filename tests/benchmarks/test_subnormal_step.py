import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.subnormal_step import main  # noqa: E402


def test_main_times_the_three_cases_and_writes_their_table(tiny_data, tmp_path):
    main(["--dataset", "tiny", "--model", "MGFormer[embedding_size=8; degree_mask=adjacency; compile=False]",
          "--batch_size", "32", "--repeats", "1", "--steps", "1", "--results", str(tmp_path),
          f"--data_path={tiny_data}"])
    table = (tmp_path / "subnormal_step-tiny.md").read_text()
    assert "| healthy keys, subnormals flushed |" in table
    assert "| keys x 1e-37, subnormals kept |" in table and "| keys x 1e-37, subnormals flushed |" in table
    record = json.loads(next((tmp_path / "runs" / "performance").glob("subnormal-step-tiny-*.json")).read_text())
    assert [r["flush_subnormals"] for r in record["records"]] == [True, False, True]
    assert record["records"][0]["ratio_to_healthy"] == 1.0
