"""Config files, dataset names and output paths checked before RecBole or the filesystem meets them."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import write_interactions
from hypothesis import given
from hypothesis import strategies as st

from recbole_mgformer.config.input_checks import (
    ConfigFileError,
    check_dataset_name,
    check_writable_folder,
    checked_run_inputs,
    close_names,
    did_you_mean,
    main_file_hidden_when_unreadable,
    read_config_file,
    refuse_existing,
    refuse_nonempty_folder,
    user_errors,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"- epochs: 1\n", r"list.yaml: a config file must be a mapping of settings .* not a YAML list"),
        (b"epochs: 1\n\tembedding_size: 8\n", r"list.yaml:2:1: not valid YAML .*indent with spaces"),
        (b"hello\n", r"not a YAML str"),
        (b"epochs: 1\nlearning_rate: 0.1\nepochs: 2\n", r"list.yaml:3:1: key 'epochs' is set twice \(also on line 1\)"),
        (b"epochs: 1\nname: caf\xe9\n", r"list.yaml:2: byte b'\\xe9' is not UTF-8"),
        (b"eval_args: {split: [\n", r"list.yaml:2:1: not valid YAML"),
        (  # a nested key too: YAML kept the second split without a word
            b"eval_args:\n  split: {RS: [0.8, 0.1, 0.1]}\n  split: {LS: valid_and_test}\n",
            r"list.yaml:3:3: key 'split' \(in eval_args\) is set twice \(also on line 2\)",
        ),
        (b"a:\n  - {x: 1, x: 2}\n", r"list.yaml:2:12: key 'x' \(in a\) is set twice"),
    ],
)
def test_a_config_file_that_is_no_mapping_of_settings_is_named_with_its_line(tmp_path, content, message):
    path = tmp_path / "list.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigFileError, match=message):
        read_config_file(path)


def test_a_byte_order_mark_and_an_empty_file_are_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfepochs: 3\nlearning_rate: 1e-3\n")
    assert read_config_file(path) == {"epochs": 3, "learning_rate": 0.001}  # RecBole's loader: 1e-3 is a float
    path.write_text("# nothing set\n")
    assert read_config_file(path) == {}


def test_a_missing_file_or_a_folder_is_named(tmp_path):
    with pytest.raises(ConfigFileError, match="config file '.*nowhere.yaml' does not exist"):
        read_config_file(tmp_path / "nowhere.yaml")
    with pytest.raises(ConfigFileError, match="is not a file"):
        read_config_file(tmp_path)


@pytest.mark.parametrize("name", ["../x", "/abs/x", "a/b", "a\\b", "..", ".", "", " tiny", "tiny "])
def test_a_dataset_name_with_a_path_in_it_is_refused(name):
    with pytest.raises(ValueError, match="is not a dataset name: it must be the name of a folder under data_path"):
        check_dataset_name(name)


def test_plain_dataset_names_pass():
    for name in ("ml-100k", "amazon-beauty", "ml-100k-ctx-0.8", "tiny_2"):
        assert check_dataset_name(name) == name


def test_a_dataset_name_too_long_for_its_files_is_refused():
    """Its files, logs and runs are named after it: RecBole's log stopped the run with "File name too long"."""
    assert check_dataset_name("d" * 128) == "d" * 128
    with pytest.raises(ValueError, match=r"dataset d{40}\.\.\.: its name is 129 bytes; .* keep it to 128 bytes"):
        check_dataset_name("d" * 129)
    with pytest.raises(ValueError, match="its name is 130 bytes"):  # bytes, as the file system counts them
        check_dataset_name("é" * 65)


def test_outputs_never_replace_a_file_or_fill_a_non_empty_folder_unasked(tmp_path):
    existing = tmp_path / "top.csv"
    existing.write_text("kept\n")
    with pytest.raises(FileExistsError, match="top.csv: the file exists; .*--overwrite"):
        refuse_existing(existing, "--output")
    assert refuse_existing(existing, "--output", overwrite=True) == existing
    with pytest.raises(FileExistsError, match="a folder is there"):
        refuse_existing(tmp_path, "--output", overwrite=True)
    refuse_existing(tmp_path / "new.csv", "--output")
    with pytest.raises(FileExistsError, match="the folder is not empty; .*--overwrite to replace users.txt"):
        refuse_nonempty_folder(tmp_path, "--export-embeddings", replaced=("users.txt",))
    with pytest.raises(FileExistsError, match="a file is there, not a folder"):
        refuse_nonempty_folder(existing, "--export-embeddings", overwrite=True)
    for refuse in (refuse_existing, refuse_nonempty_folder):
        with pytest.raises(FileExistsError, match="top.csv is a file, not a folder"):
            refuse(existing / "sub" / "x", "--output", overwrite=True)
    (tmp_path / "empty").mkdir()
    refuse_nonempty_folder(tmp_path / "empty", "--export-embeddings")
    refuse_nonempty_folder(tmp_path / "new", "--export-embeddings")


def test_user_errors_print_this_packages_messages_and_keep_other_tracebacks(capsys):
    with pytest.raises(SystemExit) as stop, user_errors():
        check_dataset_name("../x")
    assert stop.value.code == 2 and capsys.readouterr().err.startswith("error: dataset '../x' is not a dataset name")
    with pytest.raises(ValueError, match="invalid literal"), user_errors():
        int("x")  # raised outside the package: a bug's traceback stays


def test_a_spawned_child_needs_no_main_file(monkeypatch):
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "__file__", "<stdin>", raising=False)
    with main_file_hidden_when_unreadable():
        assert not hasattr(main, "__file__")
    assert main.__file__ == "<stdin>"
    monkeypatch.setattr(main, "__file__", __file__)
    with main_file_hidden_when_unreadable():
        assert main.__file__ == __file__  # a real script is re-imported as multiprocessing expects


def test_a_data_parallel_launch_works_from_a_script_read_on_standard_input(tmp_path):
    script = (
        "import operator\nfrom recbole_mgformer.training.distributed import launch\n"
        "print('sum', launch(operator.add, 2, (10,)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "sum 10" in completed.stdout  # rank 0's result: 0 + 10


def test_a_file_error_on_a_users_path_is_a_message(tmp_path, capsys):
    from recbole_mgformer.records import write_record

    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit), user_errors():
        write_record(tmp_path / "a-file" / "sub" / "r.json", {})  # pathlib's mkdir raises, called from the package
    assert "error: [Errno 20] Not a directory:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"learning_rate": "abc"}, "learning_rate (takes a number \\(default 0.001\\), not|is) 'abc'"),
        # torch's optimizers: "Invalid weight_decay value: -0.1" at their start
        ({"weight_decay": -0.1}, r"config value weight_decay is -0.1: it must be a number of at least 0"),
        ({"weight_decay": "none"}, r"weight_decay (takes a number|is 'none')"),
        ({"epochs": [3]}, "(setting epochs takes a number|config value epochs is \\[3\\])"),
        ({"embedding_size": [8]}, "embedding_size (takes a number \\(default 64\\), not|is) \\[8\\]"),
        ({"topk": "abc"}, "setting topk takes whole numbers above 0"),
        ({"topk": [10, 0]}, "setting topk takes whole numbers above 0"),
        (
            {"topk": [10, 20, 10]},
            r"setting topk lists 10 twice in \[10, 20, 10\]; list each cutoff once \(e.g. \[10, 20\]\)",
        ),
        ({"metrics": ["Recall", "Recal"]}, "setting metrics names 'Recal', not among RecBole's metrics"),
        ({"gpu_id": "abc"}, r"setting gpu_id takes GPU numbers separated by commas \(e.g. 0 or 0,1"),
        ({"gpu_id": -1}, r"setting gpu_id takes GPU numbers"),
        ({"gpu_id": [0, 1]}, r"setting gpu_id takes GPU numbers .* not \[0, 1\]"),  # RecBole would set "[0, 1]"
        ({"eval_args": "abc"}, "setting eval_args takes a mapping"),
        # RecBole would train with Adam and no weight decay, with one log line
        ({"learner": "sgdx"}, r"setting learner takes one of adam, .*not 'sgdx' \(did you mean sgd\?\)"),
        ({"learner": 3}, r"setting learner takes one of adam, .*not 3"),
        # RecBole would read any text as True
        ({"shuffle": "maybe"}, r"setting shuffle takes True or False \(default True\), not 'maybe'"),
        ({"repeatable": [True]}, r"setting repeatable takes True or False \(default False\)"),
        # torch's clip_grad_norm_ would fail at the first step, or (max_norm 0) zero every gradient
        ({"clip_grad_norm": 5}, r"setting clip_grad_norm takes a mapping like \{max_norm: 5.0\}"),
        ({"clip_grad_norm": {"max_norm": "x"}}, r"clip_grad_norm max_norm takes a number above 0 .*not 'x'"),
        ({"clip_grad_norm": {"max_norm": 0}}, r"clip_grad_norm max_norm takes a number above 0 \(0 would zero"),
        ({"clip_grad_norm": {"max_norm": float("nan")}}, r"clip_grad_norm max_norm takes a number above 0"),
        ({"clip_grad_norm": {"max_norm": 1, "norm": 2}}, r"clip_grad_norm has no setting 'norm'; its settings are"),
        ({"clip_grad_norm": {"max_norm": 1, "norm_type": -1}}, r"clip_grad_norm norm_type takes a number above 0"),
        ({"clip_grad_norm": {"max_norm": 1, "foreach": "y"}}, r"clip_grad_norm foreach takes True or False"),
        # an empty number (--epochs=, learning_rate: ~) failed deep in the run: "'<' not supported ... NoneType"
        ({"epochs": None}, r"setting epochs takes a number \(default 300\), not an empty value"),
        ({"learning_rate": None}, r"setting learning_rate takes a number \(default 0.001\), not an empty value"),
        ({"train_batch_size": None}, r"setting train_batch_size takes a number \(default 2048\)"),
        ({"embedding_size": None}, r"setting embedding_size takes a number \(default 64\), not an empty value"),
        # torch's SparseAdam: "does not support dense gradients", at the first step of every model here
        ({"learner": "sparse_adam"}, r"setting learner sparse_adam needs sparse gradients, .*; use adam"),
    ],
)
def test_a_setting_recbole_cannot_use_is_named_before_the_run(tiny_data, setting, message):
    from recbole_mgformer.quick_start import build_config

    with pytest.raises(ValueError, match=message):
        build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data), **setting})


@pytest.mark.parametrize(
    "setting",
    [
        {"learner": "AdamW"},  # RecBole reads it case aside
        {"shuffle": False},
        {"shuffle": 0},  # RecBole reads a flag by its truth
        {"clip_grad_norm": None},
        {"clip_grad_norm": {}},
        {"clip_grad_norm": {"max_norm": 5.0, "norm_type": "inf", "error_if_nonfinite": True}},
        {"gpu_id": "0,1"},  # read as (0, 1), which RecBole joins again
        {"gpu_id": "1"},
        {"gpu_id": ""},  # RecBole's way to say no GPU
    ],
)
def test_a_setting_recbole_reads_as_meant_is_accepted(tiny_data, setting):
    from recbole_mgformer.quick_start import build_config

    config, _ = build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data), **setting})
    key, value = next(iter(setting.items()))
    assert config[key] == value


def test_a_models_own_option_may_take_a_word_where_its_default_is_a_number(tiny_data):
    from recbole_mgformer.quick_start import build_config

    config, _ = build_config(
        "MGFormer",
        "tiny",
        config_dict={
            "data_path": str(tiny_data),
            "residual_scale": "learned",
            "topk": 20,
            "metrics": "Recall",
            "valid_metric": "Recall@20",
        },
    )
    assert config["residual_scale"] == "learned"
    with pytest.raises(ValueError, match=r"n_heads (takes a number|is \[2\])"):  # the project's MGFormer.yaml default
        build_config("MGFormer", "tiny", config_dict={"data_path": str(tiny_data), "n_heads": [2]})


# ------------------------------------------------------------------------------------------------ YAML bombs


def laughs(levels=9):
    """A "billion laughs": each level an anchor of nine aliases to the one before, 9**levels values from a few
    hundred bytes."""
    lines = ["l0: &l0 [ha, ha, ha, ha, ha, ha, ha, ha, ha]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMBS = {
    "billion laughs": (laughs(), r"expands to more than 100,000 values through its aliases"),
    "an alias inside its anchor": ("a: &a [1, *a]\n", r"refers to a value it is inside"),
    "a mapping inside itself": ("a: &a {b: *a}\n", r"refers to a value it is inside"),
    "deep nesting": ("a: " + "[" * 3000 + "]" * 3000 + "\n", r"nested more than 100 levels deep"),
    "deep through aliases": (
        "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 150)),
        r"nest more than 100 levels deep through aliases",
    ),
}


@pytest.mark.parametrize("text, message", BOMBS.values(), ids=BOMBS)
def test_a_config_that_expands_without_bound_is_refused_at_once(tmp_path, text, message):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    started = time.perf_counter()
    with pytest.raises(ConfigFileError, match=rf"bomb.yaml:\d+:\d+: .*{message}.*never needs that"):
        read_config_file(path)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("text, message", BOMBS.values(), ids=BOMBS)
def test_every_loader_of_a_users_yaml_is_bounded(text, message):
    """``load_yaml`` reads command-line values, search spaces and retrain files, SafeLoader is RecBole's Config's, and
    ``load_plain_yaml`` is ``yaml.safe_load`` bounded."""
    import yaml

    from recbole_mgformer.safety import SafeLoader, load_yaml
    from recbole_mgformer.safety.settings import load_plain_yaml

    for load in (load_yaml, load_plain_yaml, lambda text: yaml.load(text, Loader=SafeLoader)):
        with pytest.raises(yaml.YAMLError, match=message):
            load(text)


def test_aliases_within_the_bound_still_read():
    from recbole_mgformer.safety import load_yaml

    assert load_yaml(laughs(5))["l4"][0][0][0][0] == ["ha"] * 9  # 9**5 = 59,049 values
    assert load_yaml("base: &b {lr: 1e-3}\nrun: {<<: *b, epochs: 2}\n")["run"] == {"lr": 0.001, "epochs": 2}


def test_the_runner_refuses_a_bomb_config_before_any_check_walks_it(tmp_path, capsys):
    from recbole_mgformer import cli

    path = tmp_path / "bomb.yaml"
    path.write_text("extra_config_keys: [l8]\n" + laughs())
    started = time.perf_counter()
    with pytest.raises(SystemExit) as stop:
        cli.main(["--model=BPR", "--dataset=ml-100k", f"--config_files={path}"])
    assert stop.value.code == 2 and "expands to more than 100,000 values" in capsys.readouterr().err
    assert time.perf_counter() - started < 30


# ------------------------------------------------------------------------------------------------ settings as read


@pytest.mark.parametrize(
    "config_dict",
    [
        {"topk": "20"},
        {"topk": "[10, 20]"},
        {"metrics": "Recall"},
        {"seed": "7"},
        {"valid_metric": "NDCG@20"},
        {"state": "warning"},
        {"state": "INFO"},
    ],
)
def test_a_python_api_value_recbole_reads_is_accepted(config_dict):
    from recbole_mgformer.config.input_checks import check_user_settings, user_setting_sources

    check_user_settings(user_setting_sources(None, config_dict))


@pytest.mark.parametrize(
    "config_dict, message",
    [
        ({"topk": "twenty"}, r"setting topk takes whole numbers above 0 .*'twenty'"),
        ({"metrics": {"Recall": 1}}, r"setting metrics takes a list of RecBole's metric names"),
        ({"seed": "1.5"}, r"setting seed takes a whole number"),
        ({"state": "LOUD"}, r"setting state takes one of INFO, DEBUG, WARNING, ERROR, CRITICAL .*'LOUD'"),
        ({"state": 3}, r"setting state takes one of INFO, .*not 3"),
        ({"eval_args": "RS"}, r"setting eval_args takes a mapping"),
        ({"topk": None}, r"setting topk must be set \(e\.g\. topk: \[10\]\)"),
        ({"seed": None}, r"setting seed must be set \(e\.g\. seed: 2020\)"),
        (
            {"metrics": ["RMSE"], "eval_args": {"mode": "full"}},
            r"setting metrics \['RMSE'\] are value metrics, .*mode is full",
        ),
    ],
)
def test_a_python_api_value_of_the_wrong_shape_is_named(config_dict, message):
    from recbole_mgformer.config.input_checks import check_user_settings, user_setting_sources

    with pytest.raises(ValueError, match=message):
        check_user_settings(user_setting_sources(None, config_dict))


def test_a_config_files_string_is_not_read_as_a_number(tmp_path):
    """RecBole reads a config file's values as YAML only: ``topk: "20"`` stays text, which its Config refuses."""
    from recbole_mgformer.config.input_checks import check_user_settings, user_setting_sources

    path = tmp_path / "mine.yaml"
    path.write_text('topk: "20"\n')
    with pytest.raises(ValueError, match=r"setting topk takes whole numbers above 0 \(e.g. \[10, 20\]\), not '20'"):
        check_user_settings(user_setting_sources([str(path)]))


@pytest.mark.parametrize("reader", ["published", "names", "dataset settings", "dataset source"])
def test_every_project_yaml_reader_is_bounded(tmp_path, monkeypatch, reader):
    """The tables the benchmark reads (published numbers, short names, a dataset's settings and its source) go through
    the bounded loader, as configs do: a bomb in any of them stops at once."""
    import recbole_mgformer.benchmark.datasets as datasets
    import recbole_mgformer.data.sources as sources
    from recbole_mgformer.benchmark.names import load_names
    from recbole_mgformer.benchmark.published import published_numbers

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs())
    calls = {
        "published": lambda: published_numbers("bomb", folder=tmp_path),
        "names": lambda: load_names(tmp_path),
        "dataset settings": lambda: datasets.dataset_settings("bomb"),
        "dataset source": lambda: sources.dataset_source("bomb"),
    }
    if reader == "names":
        bomb.rename(tmp_path / "names.yaml")
    monkeypatch.setattr(datasets, "dataset_config_file", lambda name: str(bomb))
    monkeypatch.setattr(sources, "dataset_config_file", lambda name: str(bomb))
    started = time.perf_counter()
    with pytest.raises((yaml.YAMLError, ValueError), match="100,000 values"):
        calls[reader]()
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize(
    "name, known, hint",
    [
        ("lightgnc", ["BPR", "LightGCN", "SGL"], "did you mean LightGCN?"),
        ("ML-100K", ["ml-100k", "ml-1m"], "did you mean ml-100k?"),  # case aside, spelled as known spells it
        ("embeding_size", ["embedding_size", "hidden_size"], "did you mean embedding_size?"),
        ("mgformer", ["MGFormer", "mgformer"], "did you mean MGFormer?"),  # one suggestion per spelling
        ("zzz", ["BPR", "LightGCN"], ""),
        ("ml-1m", [], ""),
    ],
)
def test_did_you_mean_names_close_known_names(name, known, hint):
    assert did_you_mean(name, known) == hint


@given(st.text(max_size=12), st.lists(st.text(max_size=12), max_size=8))
def test_close_names_are_known_names(name, known):
    close = close_names(name, known)
    assert len(close) <= 3 and len(set(close)) == len(close)
    assert set(close) <= set(known)
    if name in known:
        assert close_names(name, known)[0].lower() == name.lower()  # a known name is its own closest match
    assert did_you_mean(name, known) == (f"did you mean {' or '.join(close)}?" if close else "")


def test_a_writable_folder_may_exist_or_be_made_later(tmp_path):
    assert check_writable_folder(tmp_path, "--out") == tmp_path
    assert check_writable_folder(tmp_path / "new" / "deeper", "--out") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checked, not made


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes in a read-only folder")
def test_a_folder_that_cannot_take_a_file_is_named_with_the_option(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(PermissionError, match=rf"--out {locked / 'x'}: cannot write in {locked}"):
        check_writable_folder(locked / "x", "--out")


def test_a_folder_that_is_a_file_is_named_with_the_option(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(FileExistsError, match=r"--out .*f: .*f is a file, not a folder"):
        check_writable_folder(tmp_path / "f", "--out")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no one can make a file")
def test_a_folder_no_one_can_write_in_is_named_even_for_root():
    with pytest.raises(PermissionError, match=r"checkpoint_dir /proc/recbole-x: cannot write in /proc \("):
        check_writable_folder("/proc/recbole-x", "checkpoint_dir")


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_subnormal=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@given(_ANY, _ANY)
def test_any_python_arguments_are_lists_and_mappings_or_a_named_error(files, settings):
    try:
        checked_files, checked_settings = checked_run_inputs(files, settings)
    except ValueError as error:
        assert str(error).startswith(("config_file_list takes", "config_dict takes"))
        return
    assert checked_files is None or all(isinstance(f, (str, os.PathLike)) for f in checked_files)
    assert checked_settings is None or isinstance(checked_settings, dict)
    if isinstance(files, str):
        assert checked_files == [files]  # one file, not a list of its characters


def test_numpy_values_and_tuples_in_config_dict_become_what_yaml_gives(tiny_data):
    """A setting computed with numpy (np.int64(8)) failed the size check as 'embedding_size is 8'."""
    import numpy as np

    from recbole_mgformer.quick_start import build_config

    given = {
        "embedding_size": np.int64(8),
        "learning_rate": np.float32(0.01),
        "shuffle": np.bool_(False),
        "topk": np.array([10, 20]),
        "metrics": ("Recall", "NDCG"),
        "eval_args": {"split": {"RS": (np.float64(0.8), 0.1, 0.1)}},
    }
    _, settings = checked_run_inputs(None, given)
    assert settings == {
        "embedding_size": 8,
        "learning_rate": 0.01,  # as written, not float32's 0.009999999776
        "shuffle": False,
        "topk": [10, 20],
        "metrics": ["Recall", "NDCG"],
        "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}},
    }
    assert [type(settings[key]) for key in ("embedding_size", "learning_rate", "shuffle")] == [int, float, bool]
    assert type(settings["eval_args"]["split"]["RS"][0]) is float
    config, _ = build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data), **given})
    assert config["embedding_size"] == 8 and config["topk"] == [10, 20] and config["learning_rate"] == 0.01


# ------------------------------------------------------------------------------------------------ RecBole's filters
# RecBole skips a malformed interval with a warning; the empty list left then keeps nothing (user_inter_num_interval)
# or, through ~True == -2, drops one arbitrary row (val_interval: {rating: '>=4'} lost one of 480 interactions)


@pytest.mark.parametrize(
    "config_dict",
    [
        {"val_interval": {"rating": "[4,inf)"}},
        {"val_interval": {"rating": "(0,1];[3,4)", "class": ["a", "b"]}},
        {"val_interval": {"timestamp": "[-inf, 1600000000]"}},
        {"val_interval": None},
        {"user_inter_num_interval": "[5,inf)"},
        {"user_inter_num_interval": [5, 10]},  # YAML's list [5, 10] is RecBole's closed interval as text
        {"item_inter_num_interval": "(0, 3]; [5,inf)"},
        {"item_inter_num_interval": None},
    ],
)
def test_recboles_intervals_are_accepted(config_dict):
    from recbole_mgformer.config.input_checks import check_user_settings, user_setting_sources

    check_user_settings(user_setting_sources(None, config_dict))


@pytest.mark.parametrize(
    "config_dict, message",
    [
        ({"val_interval": {"rating": ">=4"}}, r"val_interval for field 'rating' takes intervals like '\[4,inf\)'"),
        ({"val_interval": {"rating": ""}}, r"val_interval for field 'rating' takes intervals like"),
        ({"val_interval": {"rating": 4}}, r"val_interval takes, for field 'rating', intervals .* not 4"),
        ({"val_interval": [4, 5]}, r"val_interval takes a mapping of fields"),
        ({"val_interval": {"rating": "[5,4]"}}, r"left end is at most their right end"),
        ({"val_interval": {"rating": "[a,4]"}}, r"ends are numbers or inf"),
        ({"val_interval": {"rating": "[4,inf);"}}, r"takes intervals like"),
        ({"user_inter_num_interval": ">=11"}, r"setting user_inter_num_interval takes intervals like '\[5,inf\)'"),
        ({"item_inter_num_interval": "[5,inf"}, r"setting item_inter_num_interval takes intervals like"),
        ({"item_inter_num_interval": "[nan,5]"}, r"left end is at most their right end"),
        ({"user_inter_num_interval": 5}, r"setting user_inter_num_interval takes intervals like"),
    ],
)
def test_a_malformed_interval_is_named_not_skipped(config_dict, message):
    from recbole_mgformer.config.input_checks import check_user_settings, user_setting_sources

    with pytest.raises(ValueError, match=message):
        check_user_settings(user_setting_sources(None, config_dict))


@given(
    low=st.floats(allow_nan=False, allow_subnormal=False) | st.sampled_from(["-inf", "inf"]),
    high=st.floats(allow_nan=False, allow_subnormal=False) | st.sampled_from(["-inf", "inf"]),
    left=st.sampled_from("(["),
    right=st.sampled_from(")]"),
)
def test_an_interval_is_accepted_exactly_when_recbole_parses_it_in_order(low, high, left, right):
    from recbole_mgformer.config.input_checks import check_user_settings, user_setting_sources

    text = f"{left}{low},{high}{right}"
    if float(low) <= float(high):
        check_user_settings(user_setting_sources(None, {"user_inter_num_interval": text}))
    else:
        with pytest.raises(ValueError, match="left end is at most their right end"):
            check_user_settings(user_setting_sources(None, {"user_inter_num_interval": text}))


@pytest.mark.parametrize(
    "files, config_dict, message",
    [
        (["model: LightGCN\n"], None, r"config file .*0\.yaml sets model: 'LightGCN', but this run's model is 'BPR'"),
        ([], {"model": "LightGCN"}, r"config_dict sets model: 'LightGCN', but this run's model is 'BPR': .*remove"),
        ([], {"dataset": "ml-100k"}, r"config_dict sets dataset: 'ml-100k', but this run's dataset is 'tiny'"),
        (["epochs: 1\n", "dataset: other\n"], None, r"config file .*1\.yaml sets dataset: 'other'"),
    ],
)
def test_a_setting_naming_another_model_or_dataset_is_refused(tiny_data, tmp_path, files, config_dict, message):
    """RecBole takes the run's own model and dataset over these without a word."""
    from recbole_mgformer.quick_start import build_config

    paths = []
    for index, text in enumerate(files):
        paths.append(tmp_path / f"{index}.yaml")
        paths[-1].write_text(text)
    with pytest.raises(ValueError, match=message):
        build_config("BPR", "tiny", paths, {"data_path": str(tiny_data), **(config_dict or {})})


def test_a_setting_naming_the_runs_own_model_and_dataset_is_accepted(tiny_data):
    from recbole_mgformer.quick_start import build_config

    config, _ = build_config(
        "BPR", "tiny", config_dict={"data_path": str(tiny_data), "model": "bpr", "dataset": "tiny"}
    )
    assert config["model"] == "BPR"


@pytest.mark.parametrize("text, octal, meant", [("embedding_size: 016\n", 14, 16), ("seed: -0755\n", -493, -755)])
def test_a_number_with_a_leading_zero_is_named_not_read_as_octal(tmp_path, text, octal, meant):
    """YAML 1.1 (PyYAML, RecBole's loader) reads 016 as 14: the run would have trained another width than written."""
    path = tmp_path / "octal.yaml"
    path.write_text(text)
    with pytest.raises(
        ConfigFileError, match=rf"octal number to YAML \({octal}\); write {meant} without the leading 0"
    ):
        read_config_file(path)


def test_zero_hexadecimal_and_quoted_leading_zeros_still_read():
    from recbole_mgformer.safety.settings import load_yaml

    assert load_yaml("a: 0\nb: -0\nc: 0x1f\nd: '016'\ne: 1_000\nf: 0.5\n") == {
        "a": 0,
        "b": 0,
        "c": 31,
        "d": "016",
        "e": 1000,
        "f": 0.5,
    }


def test_a_folder_setting_or_config_file_under_home_is_read_there(tmp_path, monkeypatch):
    """``--checkpoint_dir=~/saved`` reaches the runner unexpanded (a shell expands ~ only at a word's start): it is
    the home folder's, never a folder named ~ in the working folder."""
    from recbole_mgformer.cli import main as run_py
    from recbole_mgformer.quick_start import build_config

    home, work = tmp_path / "home", tmp_path / "work"
    write_interactions(home / "data")
    (home / "conf").mkdir()
    (home / "conf" / "my.yaml").write_text("data_path: ~/data\n")
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    config, _ = build_config("BPR", "tiny", ["~/conf/my.yaml"], {"checkpoint_dir": "~/saved"})
    assert config["data_path"] == os.path.join(home, "data", "tiny") and config["checkpoint_dir"] == f"{home}/saved"
    run_py(["--model=BPR", "--dataset=tiny", "--config_files=~/conf/my.yaml", "--checkpoint_dir=~/saved", "--epochs=1"])
    assert list((home / "saved").glob("BPR-*.pth")) and not (work / "~").exists()


@pytest.mark.parametrize(
    "config_dict, message",
    [
        ({"data_path": None}, r"setting data_path is empty; give a folder, e.g. --data_path=dataset/"),
        ({"data_path": ""}, r"setting data_path is empty"),
        ({"checkpoint_dir": "  "}, r"setting checkpoint_dir is empty; give a folder, e.g. --checkpoint_dir=saved/"),
        ({"data_path": b"/tmp"}, r"setting data_path is b'/tmp', not a folder's path"),
        ({"checkpoint_dir": 5}, r"setting checkpoint_dir is 5, not a folder's path"),
    ],
)
def test_an_empty_folder_setting_is_named_before_recbole_reads_it(config_dict, message):
    from recbole_mgformer.quick_start import build_config

    with pytest.raises(ValueError, match=message):
        build_config("BPR", "ml-100k", config_dict=config_dict)


@pytest.mark.parametrize(
    ("given", "read"), [({"reproducibility": 0}, False), ({"reproducibility": 1}, True), ({"shuffle": 0.0}, False)]
)
def test_a_flag_given_as_a_number_is_read_and_logged_as_true_or_false(tiny_data, given, read):
    # a tuning draw of a flag (choice [0, 1]) or --reproducibility=0: the logged config said "reproducibility = 0"
    from recbole_mgformer.quick_start import build_config

    config, _ = build_config("BPR", "tiny", config_dict={"data_path": str(tiny_data), **given})
    (key,) = given
    assert config[key] is read
    assert f"{key} = {read}" in re.sub(r"\x1b\[[0-9;]*m", "", str(config))  # RecBole colours its log
