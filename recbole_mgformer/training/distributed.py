"""Data-parallel training on ``torch.distributed``: RecBole's DDP path, on CPUs (gloo) as well as GPUs (nccl).

RecBole 1.2.1 already shards the training data (a ``DistributedSampler`` per loader), wraps the model in
``DistributedDataParallel`` and averages the gradients. Everything here is what had to change for it to
run on CPUs and to report exact metrics; nothing else of RecBole's path is touched:

- :class:`DistributedConfig` joins the process group with ``gloo`` or ``nccl`` (RecBole: nccl and CUDA only),
  with a timeout on every collective so that a rank that dies stops the others instead of hanging them.
- :class:`DistributedTrainerMixin` wraps the model for DDP without CUDA-only options, gives every rank
  rank 0's checkpoint name and waits for rank 0 to write the checkpoint before loading it.
- :func:`shard_evaluation` gives each rank a disjoint share of the evaluation users or rows; RecBole's
  sampler pads the shares with repeated users, which counts them twice.
- :class:`GatheringCollector` gathers the per-user (per-row) evaluation data of all ranks once per
  evaluation, so every rank computes the metrics of the whole split, exactly as one process would.
  RecBole instead averages the ranks' metrics weighted by a count of batches.
- :func:`launch` starts the local ranks and turns a failed rank into one clear error.

Settings (config keys): ``nproc``, ``world_size``, ``ip``, ``port``, ``offset`` (the global rank of this
machine's first process), ``dist_backend`` (``auto``: nccl on GPUs, gloo on CPUs) and ``dist_timeout``
(seconds a collective may wait).
"""

import datetime
import os
import socket

import torch
import torch.distributed as dist
from recbole.config import Config

from recbole_mgformer.training.device_evaluation import DeviceCollector

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_TIMEOUT_S = 600
# Collected once per evaluated user (or row); all other entries of a DataStruct are the same on every rank.
PER_SAMPLE_KEYS = ("rec.topk", "rec.meanrank", "rec.score", "rec.items", "data.label")


def is_distributed(config):
    return not config["single_spec"]


def check_sizes(nproc, world_size, offset):
    """``world_size`` (-1: ``nproc``) after checking that the local ranks fit into the world."""
    nproc, offset = int(nproc), int(offset)
    world_size = nproc if world_size in (None, -1) else int(world_size)
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1, got {nproc}")
    if offset < 0 or offset + nproc > world_size:
        raise ValueError(
            f"impossible sizes: this machine runs global ranks {offset}..{offset + nproc - 1} "
            f"(offset {offset}, nproc {nproc}) but world_size is {world_size}; "
            "world_size counts the processes of all machines, and offset + nproc must not exceed it"
        )
    return world_size


def choose_backend(requested, device_type):
    """The process-group backend: the requested one, or nccl on GPUs and gloo on CPUs."""
    requested = str(requested or "auto").lower()
    if requested not in BACKENDS:
        raise ValueError(f"unknown dist_backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    if requested == "auto":
        return "nccl" if device_type == "cuda" else "gloo"
    if requested == "nccl" and device_type != "cuda":
        raise ValueError(
            "dist_backend 'nccl' needs GPUs, and this run uses CPUs: "
            "set dist_backend to gloo (or auto), or use_gpu to True on a machine with GPUs"
        )
    return requested


class DistributedConfig(Config):
    """RecBole's Config; in a distributed run (``local_rank`` set) it joins the process group on any device."""

    def _init_device(self):
        settings = self.final_config_dict
        if "local_rank" not in settings:
            return super()._init_device()
        gpu_id = settings["gpu_id"]
        settings["gpu_id"] = gpu_id = ",".join(map(str, gpu_id)) if isinstance(gpu_id, tuple) else str(gpu_id)
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_id  # as RecBole does, before CUDA starts in this process
        local_rank, nproc = int(settings["local_rank"]), int(settings["nproc"])
        use_gpu = bool(settings.get("use_gpu", True)) and gpu_id != "" and torch.cuda.is_available()
        if use_gpu and torch.cuda.device_count() < nproc:
            raise ValueError(
                f"nproc is {nproc} but gpu_id {gpu_id!r} makes {torch.cuda.device_count()} GPU(s) "
                "visible: list one GPU per process (--gpu_id=0,1), lower nproc, or set use_gpu to "
                "False to train on CPUs"
            )
        device = torch.device("cuda", local_rank) if use_gpu else torch.device("cpu")
        backend = choose_backend(settings.get("dist_backend"), device.type)
        timeout = float(settings.get("dist_timeout") or DEFAULT_TIMEOUT_S)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(
            backend=backend,
            init_method=f"tcp://{settings['ip']}:{settings['port']}",
            rank=local_rank + int(settings["offset"]),
            world_size=int(settings["world_size"]),
            timeout=datetime.timedelta(seconds=timeout),
        )
        settings.update(device=device, dist_backend=backend, single_spec=False)
        if local_rank + int(settings["offset"]) != 0:  # one rank logs; the others report errors only
            settings.update(state="error", show_progress=False, verbose=False)


class UnpaddedShard(torch.utils.data.Sampler):
    """Indices ``rank, rank + world_size, ...`` below ``size``: disjoint shares that cover every index once."""

    def __init__(self, size, rank, world_size):
        self.indices = range(rank, size, world_size)

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def shard_evaluation(loader):
    """Give this rank a disjoint, unpadded share of an evaluation loader (RecBole pads the shares)."""
    if loader is None:
        return loader
    # The DataLoader forbids replacing its sampler; its batch sampler reads the indices from this attribute.
    loader.batch_sampler.sampler = UnpaddedShard(loader.sample_size, dist.get_rank(), dist.get_world_size())
    return loader


class GatheringCollector(DeviceCollector):
    """RecBole's collector (without per-batch syncs), with each evaluation's per-sample data gathered from all
    ranks."""

    def get_data_struct(self):
        struct = super().get_data_struct()
        local = {key: struct[key] for key in PER_SAMPLE_KEYS if key in struct}
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, local)
        for key in local:
            struct.set(key, torch.cat([part[key] for part in gathered], dim=0))
        return struct


def make_shared_folders(config):
    """Create the folders RecBole creates at start-up (its log folder, the checkpoint folder): its
    ``ensure_dir`` checks, then creates, so ranks that start together can fail with FileExistsError."""
    for folder in (os.path.join("log", str(config["model"])), config["checkpoint_dir"]):
        os.makedirs(folder, exist_ok=True)


def free_port(host="localhost"):
    """A TCP port that is free on ``host`` now, for a run whose ranks all live on this machine."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def broadcast_value(value, src=0):
    """``value`` as rank ``src`` has it."""
    box = [value]
    dist.broadcast_object_list(box, src=src)
    return box[0]


class DistributedTrainerMixin:
    """RecBole's trainer with DDP on CPUs or GPUs and metrics over the whole split; one process runs unchanged."""

    def __init__(self, config, model):
        distributed = is_distributed(config)
        # RecBole's trainer would wrap the model with CUDA-only options; build it as single-process, then wrap here.
        config["single_spec"] = True
        try:
            super().__init__(config, model)
        finally:
            config["single_spec"] = not distributed
        if not distributed:
            return
        if self.device.type == "cuda":
            self.model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(self.model)  # SyncBatchNorm is GPU-only
            device_ids = [self.device.index]
        else:
            device_ids = None
        self.distributed_model = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        self.eval_collector = GatheringCollector(config)
        # Names carry each rank's clock: agree on rank 0's name, kept in this machine's own checkpoint_dir.
        directory, name = os.path.split(self.saved_model_file)
        self.saved_model_file = os.path.join(directory, broadcast_value(name))

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if eval_data and load_best_model and is_distributed(self.config):
            dist.barrier()  # rank 0 has finished writing the checkpoint
        return super().evaluate(eval_data, load_best_model, model_file, show_progress)

    def _map_reduce(self, result, num_sample):
        return result  # GatheringCollector made it the metrics of the whole split already


def _spawned(local_rank, worker, args, queue):
    result = worker(local_rank, *args)
    if local_rank == 0:
        queue.put(result)


def launch(worker, nproc, args):
    """Run ``worker(local_rank, *args)`` in ``nproc`` processes; returns local rank 0's result.

    When one rank fails, the others are stopped and its error is raised here.
    """
    import torch.multiprocessing as mp

    from recbole_mgformer.config.input_checks import main_file_hidden_when_unreadable

    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    try:
        with main_file_hidden_when_unreadable():  # a script read from standard input
            mp.spawn(_spawned, args=(worker, args, queue), nprocs=nproc, join=True)
    except mp.ProcessRaisedException as error:
        raise RuntimeError(
            f"distributed training failed on local rank {error.error_index} "
            f"(any other local ranks were stopped):\n{error}"
        ) from None
    except mp.ProcessExitedException as error:
        raise RuntimeError(
            f"distributed training failed: local rank {error.error_index} exited with "
            f"code {error.exit_code} (any other local ranks were stopped)"
        ) from None
    return None if queue.empty() else queue.get()


def is_collective_failure(error):
    """Whether ``error`` came from a collective operation (gloo raises plain RuntimeErrors)."""
    return isinstance(error, dist.DistError) or "gloo" in str(error)


def collective_error(error, settings):
    """A clear error for a failed or timed-out collective operation on this rank."""
    rank = int(settings["local_rank"]) + int(settings["offset"])
    return RuntimeError(
        f"rank {rank} of {settings['world_size']}: a collective operation failed or timed out "
        f"(dist_timeout {settings.get('dist_timeout') or DEFAULT_TIMEOUT_S} s); another rank has probably "
        f"stopped, so read its error first. The cause here: {error}"
    )
