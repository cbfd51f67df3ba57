"""Data-parallel training (recbole_mgformer.training.distributed): two CPU processes with gloo, against one process."""

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import TINY_CONFIG, write_interactions
from recbole.data.interaction import Interaction
from recbole.utils import init_seed

from recbole_mgformer import run_recommender
from recbole_mgformer.quick_start import build_config, prepare
from recbole_mgformer.training.distributed import (
    UnpaddedShard,
    check_sizes,
    choose_backend,
    free_port,
    launch,
    make_shared_folders,
)

ROOT = Path(__file__).resolve().parents[2]
# 41 users: the 2 ranks' shares of the evaluation users differ in size, and RecBole's padded sampler would
# count one user twice.
# use_gpu False: gloo on CPUs wherever the tests run; with one GPU visible, two ranks would each ask for a GPU of
# their own (the nccl test sets use_gpu itself).
DDP_CONFIG = {**TINY_CONFIG, "topk": [10], "valid_metric": "NDCG@10", "epochs": 2, "use_gpu": False}


@pytest.fixture
def odd_data(tmp_path):
    return write_interactions(tmp_path / "data", n_users=41)


def rank_settings(local_rank, port, world_size=2):
    return {
        "local_rank": local_rank,
        "nproc": world_size,
        "world_size": world_size,
        "ip": "localhost",
        "port": port,
        "offset": 0,
        "dist_timeout": 60,
    }


# ---- sizes and options -------------------------------------------------------------------------------------------


def test_world_size_defaults_to_nproc_and_impossible_sizes_are_refused():
    assert check_sizes(2, -1, 0) == 2
    assert check_sizes(2, 4, 2) == 4
    with pytest.raises(ValueError, match="offset \\+ nproc must not exceed"):
        check_sizes(2, 3, 2)
    with pytest.raises(ValueError, match="nproc must be at least 1"):
        check_sizes(0, -1, 0)


def test_backend_is_gloo_on_cpus_nccl_on_gpus_and_checked():
    assert choose_backend(None, "cpu") == "gloo"
    assert choose_backend("auto", "cuda") == "nccl"
    assert choose_backend("gloo", "cuda") == "gloo"
    with pytest.raises(ValueError, match="needs GPUs"):
        choose_backend("nccl", "cpu")
    with pytest.raises(ValueError, match="unknown dist_backend 'mpi'"):
        choose_backend("mpi", "cpu")


@pytest.mark.parametrize("size", [0, 1, 40, 41])
def test_evaluation_shares_cover_every_user_once(size):
    shares = [list(UnpaddedShard(size, rank, 2)) for rank in range(2)]
    assert sorted(shares[0] + shares[1]) == list(range(size))
    assert [len(UnpaddedShard(size, rank, 2)) for rank in range(2)] == [len(s) for s in shares]


# ---- a failing rank ----------------------------------------------------------------------------------------------


def _rank_one_fails(local_rank):
    if local_rank == 1:
        raise ValueError("rank one is broken")
    time.sleep(120)  # rank 0 would wait for it in a collective


def test_a_failing_rank_stops_the_others_with_its_error():
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="(?s)local rank 1.*rank one is broken"):
        launch(_rank_one_fails, 2, ())
    assert time.perf_counter() - started < 100  # rank 0 would sleep 120 s


def _rank_one_stalls(local_rank, data_path, port):
    build_config(
        "BPR",
        "tiny",
        config_dict={**DDP_CONFIG, "data_path": data_path, **rank_settings(local_rank, port), "dist_timeout": 5},
    )
    if local_rank == 1:
        time.sleep(120)  # alive, but never joins the next collective
    dist.barrier()


def test_a_stalled_rank_times_the_collective_out(odd_data):
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="(?s)local rank 0.*[Tt]imed out"):
        launch(_rank_one_stalls, 2, (str(odd_data), free_port()))
    assert time.perf_counter() - started < 100  # rank 1 sleeps 120 s


# ---- one step ----------------------------------------------------------------------------------------------------


class OneBatch(list):
    """What RecBole's training loop reads from a loader, for one fixed batch."""

    shuffle = False


GLOBAL_BATCH = Interaction(
    {
        "user_id": torch.tensor([1, 2, 3, 4, 5, 6, 7, 8]),
        "item_id": torch.tensor([3, 5, 7, 9, 11, 13, 15, 17]),
        "neg_item_id": torch.tensor([20, 21, 22, 23, 24, 25, 26, 27]),
    }
)
STEP_CONFIG = {**DDP_CONFIG, "learner": "sgd", "learning_rate": 0.5, "require_pow": True}


def halves():
    return GLOBAL_BATCH[torch.arange(0, 4)], GLOBAL_BATCH[torch.arange(4, 8)]


def _ddp_step(local_rank, model_name, data_path, port, out_dir):
    config, _ = build_config(
        model_name, "tiny", config_dict={**STEP_CONFIG, "data_path": data_path, **rank_settings(local_rank, port)}
    )
    make_shared_folders(config)
    model, trainer, (train_data, _, _) = prepare(config)
    # What each rank builds on its own, before DDP copies rank 0's parameters and buffers to it.
    init_seed(config["seed"] + local_rank, config["reproducibility"])
    # (a sparse graph is compared through its dense parts, buffers of their own)
    own = {
        name: value
        for name, value in type(model)(config, train_data._dataset).named_buffers()
        if value.layout == torch.strided
    }
    trainer._train_epoch(OneBatch([halves()[local_rank]]), 0)
    torch.save({"params": model.state_dict(), "own_buffers": own}, Path(out_dir) / f"rank{local_rank}.pt")
    del trainer  # its DDP model's gradient reducer goes before the process group it holds (gloo's teardown waits)
    dist.destroy_process_group()


def single_process_step(model_name, data_path, average_halves):
    config, _ = build_config(model_name, "tiny", config_dict={**STEP_CONFIG, "data_path": data_path})
    model, trainer, _ = prepare(config)
    if average_halves:  # each rank's loss on its half, the gradients averaged: what DDP computes
        loss = lambda _: sum(model.calculate_loss(half) for half in halves()) / 2  # noqa: E731
        trainer._train_epoch(OneBatch([GLOBAL_BATCH]), 0, loss_func=loss)
    else:
        trainer._train_epoch(OneBatch([GLOBAL_BATCH]), 0)
    return model.state_dict()


@pytest.mark.slow
@pytest.mark.parametrize(
    "model_name, average_halves",
    [
        ("BPR", False),
        ("LightGCN", False),  # a graph model: its sparse graph stays out of DDP's broadcast
        # DirectAU's uniformity term pairs the rows of a batch, so each rank's term covers its own half,
        # as in any data-parallel contrastive loss.
        ("DirectAU", True),
        ("MGFormer", True),
    ],
)
def test_one_ddp_step_equals_one_single_process_step(model_name, average_halves, odd_data, tmp_path):
    launch(_ddp_step, 2, (model_name, str(odd_data), free_port(), str(tmp_path)))
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    reference = single_process_step(model_name, str(odd_data), average_halves)
    for name, value in reference.items():
        assert torch.equal(ranks[0]["params"][name], ranks[1]["params"][name]), name
        torch.testing.assert_close(ranks[0]["params"][name], value, rtol=1e-5, atol=1e-6, msg=name)
    # The ranks drew the same random features and computed the same SVD encodings on their own.
    for name, value in ranks[0]["own_buffers"].items():
        assert torch.equal(value, ranks[1]["own_buffers"][name]), name
    if model_name == "MGFormer":
        assert {"structural", "layers.0.projection"} <= set(ranks[0]["own_buffers"])
        # The test tells the two readings apart: one process on the whole batch ends elsewhere.
        whole_batch = single_process_step(model_name, str(odd_data), average_halves=False)
        assert any(
            not torch.allclose(value, ranks[0]["params"][name], atol=1e-6)
            for name, value in whole_batch.items()
            if value.is_floating_point()
        )


# ---- training to completion --------------------------------------------------------------------------------------

two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")


@pytest.mark.slow
@pytest.mark.parametrize(
    "model_name, use_gpu",
    [
        ("LightGCN", False),
        ("MGFormer", False),
        pytest.param("MGFormer", True, marks=two_gpus),  # nccl
    ],
)
def test_two_processes_report_the_metrics_of_one_process_on_the_checkpoint(model_name, use_gpu, odd_data, tmp_path):
    checkpoints = tmp_path / "saved"
    result = run_recommender(
        model_name,
        "tiny",
        config_dict={
            **DDP_CONFIG,
            "data_path": str(odd_data),
            "checkpoint_dir": str(checkpoints),
            "use_gpu": use_gpu,
            "gpu_id": "0,1",
        },
        nproc=2,
        port=free_port(),
    )
    (checkpoint,) = glob.glob(str(checkpoints / "*.pth"))  # rank 0 alone wrote it
    config, _ = build_config(model_name, "tiny", config_dict={**DDP_CONFIG, "data_path": str(odd_data)})
    _, trainer, (train_data, valid_data, test_data) = prepare(config)
    trainer.eval_collector.data_collect(train_data)
    assert trainer.evaluate(test_data, model_file=checkpoint) == pytest.approx(dict(result["test_result"]), abs=1e-4)
    assert trainer.evaluate(valid_data, model_file=checkpoint) == pytest.approx(
        dict(result["best_valid_result"]), abs=1e-4
    )
    assert result["test_result"]["ndcg@10"] > 0


def run_py(data_path, port, offset, extra=()):
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "--model=BPR",
            "--dataset=tiny",
            f"--data_path={data_path}",
            "--nproc=1",
            "--world_size=2",
            f"--offset={offset}",
            "--ip=localhost",
            f"--port={port}",
            "--epochs=2",
            "--state=WARNING",
            "--dist_timeout=20",
            "--topk=[10]",
            "--valid_metric=NDCG@10",
            "--use_gpu=False",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize("shared_disk", [False, True])
def test_two_machines_through_run_py_agree(odd_data, tmp_path, shared_disk):
    port = free_port()
    folders = [tmp_path / ("saved" if shared_disk else str(offset)) for offset in (0, 1)]
    machines = [
        run_py(odd_data, port, offset, [f"--checkpoint_dir={folder}"]) for offset, folder in zip((0, 1), folders)
    ]
    outputs = [machine.communicate(timeout=300)[0] for machine in machines]
    assert [machine.returncode for machine in machines] == [0, 0], [out[-3000:] for out in outputs]
    # the scores agree; each machine names its own checkpoint and log file
    summaries = [
        [
            line
            for line in out[out.index("BPR on tiny") :].splitlines()
            if not line.lstrip().startswith(("checkpoint", "log"))
        ]
        for out in outputs
    ]
    assert summaries[0] == summaries[1] and any("ndcg@10" in line for line in summaries[0])
    # Each machine keeps its copy under rank 0's name; on a shared disk the copies replace each other whole.
    names = [sorted(os.listdir(folder)) for folder in folders]
    assert names[0] == names[1] and len(names[0]) == 1 and names[0][0].endswith(".pth"), names


@pytest.mark.slow
def test_a_machine_whose_rank_fails_does_not_hang_the_other(odd_data, tmp_path):
    port = free_port()
    started = time.perf_counter()
    healthy = run_py(odd_data, port, 0)
    broken = run_py(tmp_path / "no-such-folder", port, 1)
    broken_output = broken.communicate(timeout=300)[0]
    healthy_output = healthy.communicate(timeout=300)[0]
    assert broken.returncode != 0 and "no-such-folder" in broken_output
    assert healthy.returncode != 0
    assert "rank 0 of 2: a collective operation failed or timed out" in healthy_output
    assert time.perf_counter() - started < 240
