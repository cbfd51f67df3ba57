"""``python -m recbole_mgformer.tune --render``: a page rewritten from its search record, without searching."""

import json
import shutil
from pathlib import Path

from recbole_mgformer.tune.cli import main

RECORD = Path(__file__).resolve().parents[2] / "results" / "tuning" / "ml-100k" / "BPR.json"


def test_render_rewrites_the_page_beside_the_record_and_names_the_searched_values(tmp_path):
    record = tmp_path / "BPR.json"
    shutil.copy(RECORD, record)
    assert main(["--render", str(record)]) == 0
    page = (tmp_path / "BPR.md").read_text()
    assert "Space: `embedding_size` choice [32, 64, 128], `learning_rate` choice [0.0005, 0.001, 0.005]" in page
    best = json.loads(record.read_text())["best"]
    assert f"Best: trial {best['trial']}" in page


def test_render_of_a_file_that_is_not_a_search_record_is_an_error(tmp_path, capsys):
    record = tmp_path / "other.json"
    record.write_text(json.dumps({"dataset": "ml-100k"}))
    assert main(["--render", str(record)]) == 2
    assert "is not a search record" in capsys.readouterr().err
    assert not (tmp_path / "other.md").exists()
