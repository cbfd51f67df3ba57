import re
import subprocess
import sys
from pathlib import Path

import pytest

from recbole_mgformer.cli import format_summary, main
from recbole_mgformer.config.command_line import parse_overrides

ROOT = Path(__file__).resolve().parents[1]


def test_overrides_are_typed_like_recbole_config_files():
    parsed = parse_overrides(
        [
            "--learning_rate=1e-3",
            "--n_heads=2",
            "--attention=False",
            "--feature_map=elu",
            "--topk=[10,20]",
            "--eval_args={split: {RS: [0.8, 0.1, 0.1]}}",
            "--n_features=",
        ]
    )
    assert parsed == {
        "learning_rate": 0.001,
        "n_heads": 2,
        "attention": False,
        "feature_map": "elu",
        "topk": [10, 20],
        "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}},
        "n_features": None,
    }


@pytest.mark.parametrize(
    "argument, message",
    [
        ("embedding_size=3", "write config overrides as --key=value"),
        ("--embedding_size", "write config overrides as --key=value"),
        ("--topk=[10,", r"--topk=\[10, is not a YAML list or mapping \(.*\); write a list as \[a, b\]"),
        ("--eval_args={split:", r"--eval_args=\{split: is not a YAML list or mapping"),
    ],
)
def test_malformed_arguments_are_rejected(argument, message):
    with pytest.raises(SystemExit, match=message):
        parse_overrides([argument])


@pytest.mark.parametrize("value", ["[5,inf)", "(0,1];[3,4)", "( 0 , 3 ]", "(1,2)"])
def test_recboles_half_open_intervals_are_kept_as_text(value):
    """RecBole's own way to write ``--user_inter_num_interval=[5,inf)``: no YAML, and not a list written wrong."""
    assert parse_overrides([f"--user_inter_num_interval={value}"]) == {"user_inter_num_interval": value}


@pytest.mark.parametrize("value", [",", "@home", "`x`", "a: b: c"])
def test_text_yaml_cannot_read_plain_is_kept_as_written_as_recbole_keeps_it(value):
    """``--field_separator=,`` is how a comma-separated atomic file is read; RecBole keeps what it cannot eval."""
    assert parse_overrides([f"--field_separator={value}"]) == {"field_separator": value}


def test_main_trains_with_config_files_and_overrides(tiny_data, tmp_path, capsys):
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(
        f"data_path: {tiny_data}\nshow_progress: False\nstate: WARNING\n"
        "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\n"
    )
    result = main(
        ["--model=MGFormer", "--dataset=tiny", f"--config_files={config_file}", "--epochs=1", "--embedding_size=8"]
    )
    out = capsys.readouterr().out
    assert "MGFormer on tiny: best epoch" in out and "test  recall@20" in out
    assert result["test_result"]["ndcg@20"] >= 0
    assert f"checkpoint {result['checkpoint']}\n" in out and Path(result["checkpoint"]).is_file()


def test_run_py_reports_an_unknown_model(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "--model=NoSuchNet"], capture_output=True, text=True, cwd=tmp_path
    )
    assert completed.returncode != 0
    assert "unknown model 'NoSuchNet'; available models:" in completed.stderr


def test_summary_shows_top_k_metrics_or_every_metric_the_run_computed():
    top_k = {
        "best_valid_result": {"recall@10": 0.1, "recall@20": 0.2, "ndcg@20": 0.15},
        "test_result": {"recall@20": 0.25, "ndcg@20": 0.125},
    }
    assert format_summary("MGFormer", "ml-100k", top_k).splitlines() == [
        "MGFormer on ml-100k",
        "  valid recall@20 0.2000  ndcg@20 0.1500",
        "  test  recall@20 0.2500  ndcg@20 0.1250",
    ]
    labelled = {
        "best_valid_result": {"auc": 0.77231, "logloss": 0.5868},
        "test_result": {"auc": 0.7721, "logloss": 0.59},
    }
    assert format_summary("CSA", "ml-100k", labelled).splitlines()[1:] == [
        "  valid auc 0.7723  logloss 0.5868",
        "  test  auc 0.7721  logloss 0.5900",
    ]


def test_summary_names_the_best_epoch_with_its_reason_and_where_the_output_went():
    result = {
        "best_valid_result": {"recall@20": 0.2, "ndcg@20": 0.15},
        "test_result": {"recall@20": 0.25, "ndcg@20": 0.125},
        "checkpoint": "/runs/saved/MGFormer-1.pth",
        "log_file": "/runs/log/MGFormer/MGFormer-ml-100k-1.log",
        "epochs": 12,
        "best_epoch": 0,
    }
    head, *_, checkpoint, log = format_summary("MGFormer", "ml-100k", result).splitlines()
    assert head == (
        "MGFormer on ml-100k: best epoch 0 of 12 (its first: the SVD encodings carry MGFormer to its best at once; "
        "results/notes/attention.md)"
    )
    assert checkpoint == "checkpoint /runs/saved/MGFormer-1.pth"
    assert log == "log /runs/log/MGFormer/MGFormer-ml-100k-1.log"
    later = format_summary("BPR", "ml-100k", {**result, "best_epoch": 7}).splitlines()[0]
    assert later == "BPR on ml-100k: best epoch 7 of 12"
    first = format_summary("BPR", "ml-100k", {**result, "best_epoch": 0}).splitlines()[0]
    assert first == "BPR on ml-100k: best epoch 0 of 12 (its first: no later epoch scored better)"
    unsaved = format_summary("Pop", "ml-100k", {**result, "checkpoint": None, "epochs": None, "best_epoch": None})
    assert unsaved.splitlines()[0] == "Pop on ml-100k" and "checkpoint" not in unsaved
    unvalidated = format_summary("BPR", "ml-100k", {**result, "best_epoch": None}).splitlines()[0]  # eval_step: 0
    assert unvalidated == "BPR on ml-100k: 12 epochs, none validated, the last tested"


def test_an_override_that_is_code_is_refused_and_never_run(tmp_path, capsys):
    """RecBole's Config evals string settings; ``--learning_rate=<code>`` ran it and trained with its value."""
    from conftest import eval_payload

    marker = tmp_path / "pwned"
    refusal = r"error: --learning_rate=\.\.\.: setting learning_rate: .*never run as Python"
    with pytest.raises(SystemExit, match=refusal):
        parse_overrides([f"--learning_rate={eval_payload(marker)}"])
    with pytest.raises(SystemExit):
        main(["--model=BPR", "--dataset=ml-100k", "--epochs=1", f"--learning_rate={eval_payload(marker)}"])
    assert not marker.exists()


def test_run_py_refuses_code_in_an_override_before_training(tmp_path):
    from conftest import eval_payload

    marker = tmp_path / "pwned"
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "--model=BPR",
            "--dataset=ml-100k",
            "--epochs=1",
            f"--learning_rate={eval_payload(marker)}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert completed.returncode != 0 and "never run as Python" in completed.stderr
    assert "Traceback" not in completed.stderr and not marker.exists()


@pytest.mark.parametrize(
    "config_text, arguments, message",
    [
        ("epochs: 1\n\tembedding_size: 8\n", [], r"error: .*bad.yaml:2:1: not valid YAML .*indent with spaces"),
        ("- epochs: 1\n", [], r"error: .*bad.yaml: a config file must be a mapping of settings"),
        ("epochs: 1\n", ["--dataset=../tiny"], r"error: dataset '../tiny' is not a dataset name"),
        ("epochs: 1\n", ["--embeding_size=8"], r"error: unknown config key 'embeding_size'"),
    ],
)
def test_bad_input_ends_run_py_with_its_message_and_no_traceback(
    tiny_data, tmp_path, capsys, config_text, arguments, message
):
    config_file = tmp_path / "bad.yaml"
    config_file.write_text(config_text)
    with pytest.raises(SystemExit) as stop:
        dataset = [] if any(a.startswith("--dataset=") for a in arguments) else ["--dataset=tiny"]
        main(["--model=BPR", *dataset, f"--data_path={tiny_data}", f"--config_files={config_file}", *arguments])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err
    assert not (tmp_path / "saved").exists()


@pytest.mark.parametrize("arguments", [["--epochs=1", "--epochs=2"], ["--learning_rate=0.01", "--learning_rate=0.1"]])
def test_a_setting_given_twice_is_refused_not_silently_replaced(arguments):
    with pytest.raises(SystemExit) as stopped:
        parse_overrides(arguments)
    key = arguments[0][2:].partition("=")[0]
    assert f"--{key} is given twice" in str(stopped.value.code)


@pytest.mark.parametrize(
    "arguments, option",
    [
        (["--model=BPR", "--model=LightGCN"], "--model"),
        (["-m", "BPR", "--model=LightGCN"], "--model"),
        (["--dataset=tiny", "-d", "ml-100k"], "-d"),
        (["--config_files=a.yaml", "--config_files=b.yaml"], "--config_files"),
    ],
)
def test_run_py_refuses_an_option_given_twice(capsys, arguments, option):
    """argparse kept the last (--model=BPR --model=LightGCN trained LightGCN), where a setting given twice is named."""
    with pytest.raises(SystemExit) as stop:
        main(arguments)
    assert stop.value.code == 2
    assert f"error: {option} is given twice; keep one" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, files",
    [
        ("a.yaml  b.yaml", ["a.yaml", "b.yaml"]),
        ("'my settings.yaml' b.yaml", ["my settings.yaml", "b.yaml"]),
        ('"my settings.yaml"', ["my settings.yaml"]),
        (r"C:\conf\a.yaml", [r"C:\conf\a.yaml"]),  # no quotes: a backslash stays
    ],
)
def test_config_files_are_space_separated_and_a_quoted_path_may_hold_spaces(text, files):
    from recbole_mgformer.config.command_line import split_config_files

    assert split_config_files(text) == files


def test_an_unclosed_quote_in_config_files_is_named():
    from recbole_mgformer.config.command_line import split_config_files

    with pytest.raises(SystemExit, match=r"--config_files \"'a.yaml\": No closing quotation; close each quoted path"):
        split_config_files("'a.yaml")
