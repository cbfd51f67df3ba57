import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.sgl_step import main  # noqa: E402


def test_main_times_both_sgls_from_the_same_start_and_writes_their_table(tiny_data, tmp_path):
    main(["--dataset", "tiny", "--batch_size", "32", "--repeats", "1", "--steps", "1", "--results", str(tmp_path),
          f"--data_path={tiny_data}"])
    table = (tmp_path / "sgl_step-tiny.md").read_text()
    assert "| RecBole's SGL |" in table and "| this project's SGL |" in table
    record = json.loads(next((tmp_path / "runs" / "performance").glob("sgl-step-tiny-*.json")).read_text())
    recbole, project = record["records"]
    assert recbole["ratio_to_recbole"] == 1.0 and project["steps_timed"] == 1
    assert abs(recbole["first_loss"] - project["first_loss"]) <= 1e-5 * abs(recbole["first_loss"])
