import os
import sys
import warnings

import pytest
import torch
from recbole.evaluator import Collector
from torch.utils._python_dispatch import TorchDispatchMode

import recbole_mgformer.training.device_evaluation as device_evaluation
from recbole_mgformer.training.device_evaluation import DeviceCollector, DeviceEvaluationMixin, average_rank
from recbole_mgformer.training.distributed import GatheringCollector
from recbole_mgformer.training.host_sync import HOST_SYNCING_OPS

# every metric RecBole computes from full-sort rankings alone: rec.topk, rec.items and rec.meanrank (GAUC)
METRICS = {"metrics": ["Recall", "NDCG", "MRR", "Hit", "Precision", "MAP", "GAUC", "ShannonEntropy"], "topk": [5, 20]}
CODE = (f"{os.sep}recbole_mgformer{os.sep}", f"{os.sep}recbole{os.sep}")


def recbole_average_rank(scores, config):
    return Collector(config)._average_rank(scores)


def test_average_rank_equals_recbole_s_with_ties_and_masked_items(tiny_setup):
    config, *_ = tiny_setup("MGFormer")
    generator = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (7, 40), generator=generator).float()  # many ties
    scores[:, :3] = -torch.inf  # masked items tie at the bottom
    scores[2] = 1.0  # one run over the whole row
    descending = scores.sort(dim=-1, descending=True).values
    ours, recbole = average_rank(descending), recbole_average_rank(descending, config)
    assert ours.dtype == recbole.dtype
    torch.testing.assert_close(ours, recbole, rtol=0, atol=0)
    assert ours[2].eq(20.5).all()


def collected(collector, trainer, batches):
    for batch in batches:
        interaction, scores, positive_u, positive_i = trainer._full_sort_batch_eval(batch)
        collector.eval_batch_collect(scores, interaction, positive_u, positive_i)
    collector.model_collect(trainer.model)
    return collector.get_data_struct()


@pytest.mark.parametrize("model_name", ["MGFormer", "DirectAU"])
def test_the_device_collector_holds_recbole_s_tensors_and_gives_its_metrics(tiny_setup, model_name):
    config, model, trainer, (train, valid, test) = tiny_setup(model_name, eval_batch_size=120, **METRICS)
    assert isinstance(trainer, DeviceEvaluationMixin) and type(trainer.eval_collector) is DeviceCollector
    trainer.fit(train, valid, saved=False, show_progress=False)
    model.eval()
    trainer.tot_item_num = test._dataset.item_num
    batches = list(test)
    assert len(batches) >= 3
    with torch.no_grad():
        ours, recbole = (
            collected(DeviceCollector(config), trainer, batches),
            collected(Collector(config), trainer, batches),
        )
    for key in ("rec.topk", "rec.items", "rec.meanrank"):
        assert ours[key].device.type == "cpu"
        torch.testing.assert_close(ours[key], recbole[key], rtol=0, atol=0)
    result = trainer.evaluate(test, load_best_model=False)
    trainer.eval_collector = Collector(config)
    assert result == trainer.evaluate(test, load_best_model=False)
    assert result["gauc"] > 0 and result["ndcg@20"] > 0


def test_a_collector_starts_afresh_each_evaluation(tiny_setup):
    _, model, trainer, (_, valid, _) = tiny_setup("MGFormer", eval_batch_size=120, **METRICS)
    first = trainer.evaluate(valid, load_best_model=False)
    assert trainer.evaluate(valid, load_best_model=False) == first
    assert not trainer.eval_collector.data_struct.pending
    assert "rec.topk" not in trainer.eval_collector.data_struct


def test_ddp_s_gathering_collector_builds_on_the_device_collector():
    assert issubclass(GatheringCollector, DeviceCollector)


class SyncCounter(TorchDispatchMode):
    """Counts what reads a tensor's value on the host (a device sync on a GPU) while ``active``: .item(), .tolist(),
    .cpu(), .numpy() and bool() called from RecBole's or this project's code, and ops whose result size or value the
    host needs (nonzero, ...)."""

    def __init__(self, monkeypatch):
        super().__init__()
        self.calls, self.active = [], False
        for name in ("item", "tolist", "cpu", "numpy", "__bool__"):
            monkeypatch.setattr(torch.Tensor, name, self.counting(name, getattr(torch.Tensor, name)))

    def counting(self, name, original):
        def wrapper(tensor, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if self.active and any(folder in caller for folder in CODE):
                self.calls.append(name)
            return original(tensor, *args, **kwargs)

        return wrapper

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if self.active and name in HOST_SYNCING_OPS:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))

    def counted(self, function):
        """``function``, counted while it runs."""

        def wrapper(*args, **kwargs):
            self.active = True
            try:
                return function(*args, **kwargs)
            finally:
                self.active = False

        return wrapper


def syncs_of_an_evaluation(trainer, data, monkeypatch, collector):
    """The syncs of ``trainer.evaluate`` with ``collector`` in what it does with each batch on the device: scoring
    it (``_full_sort_batch_eval``, the model's representations computed at the first batch included) and collecting
    its results; the loader's own work on the host is not counted, nor the evaluator's after the collector has
    copied its results to the host."""
    trainer.eval_collector = collector
    counter = SyncCounter(monkeypatch)
    monkeypatch.setattr(trainer, "_full_sort_batch_eval", counter.counted(trainer._full_sort_batch_eval))
    monkeypatch.setattr(collector, "eval_batch_collect", counter.counted(collector.eval_batch_collect))
    with counter:
        trainer.evaluate(data, load_best_model=False)
    monkeypatch.undo()
    return counter.calls


@pytest.mark.parametrize("model_name", ["MGFormer", "DirectAU"])
def test_an_evaluation_reads_nothing_on_the_host_per_batch(tiny_setup, monkeypatch, model_name):
    config, model, trainer, (_, _, test) = tiny_setup(model_name, eval_batch_size=60, **METRICS)
    assert len(test) >= 6
    assert syncs_of_an_evaluation(trainer, test, monkeypatch, DeviceCollector(config)) == []
    # what the counter sees of RecBole's collector: GAUC's nonzero, each batch
    recbole = syncs_of_an_evaluation(trainer, test, monkeypatch, Collector(config))
    assert recbole.count("nonzero") == len(test)


def test_every_host_tensor_of_a_batch_reaches_the_device_through_the_non_blocking_copy(tiny_setup, monkeypatch):
    """On a GPU ``to_device`` copies from pinned memory without blocking; every tensor a batch brings must pass it
    (a blocking copy, or an index on the host, would sync), so count them: each field of the interaction, the
    history's rows and items, the positives' rows and items."""
    _, _, trainer, (_, _, test) = tiny_setup("MGFormer", eval_batch_size=60, **METRICS)
    moved = []
    copy = device_evaluation.to_device

    def recording(tensor, device):
        assert tensor.device.type == "cpu"
        moved.append(tensor)
        return copy(tensor, device)

    monkeypatch.setattr(device_evaluation, "to_device", recording)
    trainer.evaluate(test, load_best_model=False)
    fields = len(next(iter(test))[0].interaction)
    assert len(moved) == len(test) * (fields + 2 + 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_an_evaluation_syncs_as_often_whatever_its_batches(tiny_setup):
    """CUDA's sync debug mode warns at each synchronising call: a whole evaluation warns as often with one batch as
    with eight (the copies at its end), and its metrics equal RecBole's."""
    counts = []
    for batch_size in (1000, 60):
        config, model, trainer, (_, _, test) = tiny_setup(
            "MGFormer", eval_batch_size=batch_size, use_gpu=True, **METRICS
        )
        assert trainer.device.type == "cuda"
        model.eval()
        with torch.no_grad():  # warm-up: the first CUDA kernels' one-off set-up is no evaluation's
            model.full_sort_predict(next(iter(test))[0].to(trainer.device))
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                result = trainer.evaluate(test, load_best_model=False)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        counts.append(sum("synchroniz" in str(warning.message) for warning in caught))
        trainer.eval_collector = Collector(config)
        assert result == trainer.evaluate(test, load_best_model=False)
    assert counts[0] == counts[1], counts


def test_value_evaluation_s_missing_ranking_indices_pass_through_as_none():
    # CTR (value) evaluation hands the collector None for row_idx, positive_u and positive_i
    assert device_evaluation.to_device(None, "cpu") is None
    tensor = torch.arange(3)
    assert torch.equal(device_evaluation.to_device(tensor, "cpu"), tensor)
