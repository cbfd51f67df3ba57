import pytest
from conftest import benchmark_args

from recbole_mgformer.benchmark import main


def test_settings_without_the_tables_metrics_stop_before_any_run(tiny_data, tmp_path, capsys):
    """Settings that compute metrics no table shows (here top 10 only, where the general table needs @20): the
    command says so before training instead of failing when it renders. (A dataset without its own YAML gets the
    general protocol, Recall/NDCG@20, so it no longer trips this.)"""
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1", "--topk=[10]", "--valid_metric=NDCG@10")
    with pytest.raises(SystemExit):
        main(args)
    err = capsys.readouterr().err
    assert "BPR on tiny, seed 0: the general table needs recall@20, ndcg@20" in err and "Traceback" not in err
    assert not (tmp_path / "results").exists() and not (tmp_path / "saved").exists()


@pytest.mark.parametrize("dataset", ["../tiny", "/tmp/tiny"])
def test_a_dataset_outside_data_path_is_refused(tmp_path, capsys, dataset):
    with pytest.raises(SystemExit):
        main(["--models", "BPR", "--datasets", dataset, "--results", str(tmp_path / "results")])
    assert f"dataset {dataset!r} is not a dataset name" in capsys.readouterr().err


@pytest.mark.parametrize("render_only", [True, False])
def test_a_results_folder_that_is_a_file_is_named_before_any_run(tiny_data, tmp_path, capsys, render_only):
    results = tmp_path / "results"
    results.write_text("")
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1")  # its --results is tmp_path / "results"
    with pytest.raises(SystemExit):
        main(["--render-only", "--results", str(results)] if render_only else args)
    assert f"error: --results {results}: {results} is a file, not a folder; name a folder" in capsys.readouterr().err
    assert not (tmp_path / "saved").exists()


def test_a_checkpoint_folder_that_is_a_file_is_named_before_any_run(tiny_data, tmp_path, capsys):
    """It was a bare "[Errno 20] Not a directory" once the first run had trained."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.write_text("")
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1")
    with pytest.raises(SystemExit):
        main([*args, "--checkpoint_dir", str(checkpoints)])
    error = capsys.readouterr().err
    assert f"error: --checkpoint_dir {checkpoints}: {checkpoints} is a file, not a folder; name a folder" in error
    assert not (tmp_path / "results" / "runs").exists()


@pytest.mark.parametrize("option, value", [("--models", ","), ("--models", " "), ("--datasets", ",,")])
def test_an_empty_list_of_models_or_datasets_is_named(tiny_data, tmp_path, capsys, option, value):
    """``--models ,`` rendered empty pages and said "wrote " with no word of what was wrong."""
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1")
    args[args.index(option) + 1] = value
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    assert f"{option} {value!r} names none; give a comma-separated list, e.g. {option} " in capsys.readouterr().err


def test_a_dataset_given_twice_runs_once(tiny_data, tmp_path, capsys):
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1")
    args[args.index("--datasets") + 1] = "tiny,tiny"
    assert main(args) == 0
    assert "[1/1] BPR on tiny, seed 0: running" in capsys.readouterr().out


def test_a_dataset_without_its_folder_is_named_before_any_run(tiny_data, tmp_path, capsys):
    """``--datasets tiny,tiyn`` trained tiny, then stopped at tiyn's turn, leaving empty folders named after it."""
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1")
    args[args.index("--datasets") + 1] = "tiny,tiyn"
    with pytest.raises(SystemExit) as stopped:
        main(args)
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and f"dataset folder {str(tiny_data / 'tiyn')!r} does not exist" in error
    assert "did you mean tiny?" in error
    assert not (tmp_path / "results" / "runs").exists() and not (tmp_path / "saved").exists()
