"""Evaluation that stays on the device until its metrics: no host round trip per batch, one copy at the end.

RecBole 1.2.1's evaluation waits on the GPU at every batch: each batch's interaction, history mask indices and
positive items reach the device by blocking copies from pageable memory, the index tensors that mask and mark items
are on the host (``scores[history_index]``, ``pos_matrix[positive_u, positive_i]``: a blocking copy each), and
GAUC's average rank reads a ``torch.where`` (``nonzero``) result; its collector also joins every batch's results to
all earlier ones with ``torch.cat`` (quadratic in the number of batches), and later releases copy each batch to the
host instead (RecBole issue #2085). Here:

- :class:`DeviceEvaluationMixin` copies each batch's tensors from pinned memory without blocking (the copies are
  ordered before the batch's kernels on the stream), then scores it with RecBole's own ``_full_sort_batch_eval`` /
  ``_neg_sample_batch_eval``;
- :class:`DeviceCollector` is RecBole's ``Collector``, running RecBole's own per-batch code on the device, with the
  positive items copied the same way, GAUC's average rank computed without reading a value on the host
  (:func:`average_rank`, equal to RecBole's), and each result kept in a list, joined with one ``torch.cat`` per
  result and copied to the host once, when the evaluator asks for it.

The metrics are RecBole's, computed by its ``Evaluator`` from the very tensors its collector would hold. On a CPU
the copies are RecBole's no-ops and only the joining differs.
"""

import torch
from recbole.data.interaction import Interaction
from recbole.evaluator import Collector
from recbole.evaluator.collector import DataStruct


def to_device(tensor, device):
    """``tensor`` on ``device``; a host tensor bound for a GPU is copied from pinned memory without blocking the host
    (torch's pinned-memory allocator keeps the staging buffer until the copy has run); None (what value, i.e. CTR,
    evaluation passes for the ranking indices) stays None."""
    if tensor is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def interaction_to_device(interaction, device):
    """A new Interaction holding ``interaction``'s tensors on ``device`` (the loader's own is left on the host)."""
    return Interaction({key: to_device(value, device) for key, value in interaction.interaction.items()})


def average_rank(scores):
    """RecBole's ``Collector._average_rank`` without reading a value on the host: the 1-based rank of every entry of
    each row of ``scores`` (L, W), sorted descending, ties given their mean rank, (L, W) float32.

    A tie run spans columns ``[start, next_start)``; its mean 1-based rank is ``(start + next_start + 1) / 2``, the
    integers RecBole's ``torch.where`` finds, halved in the same float arithmetic."""
    length, width = scores.shape
    columns = torch.arange(width, device=scores.device).expand(length, width)
    ends = torch.ones((length, 1), dtype=torch.bool, device=scores.device)
    starts_run = torch.cat([ends, scores[:, 1:] != scores[:, :-1]], dim=1)  # (L, W) first entry of its run
    ends_run = torch.cat([starts_run[:, 1:], ends], dim=1)  # (L, W) last entry of its run
    start = torch.where(starts_run, columns, 0).cummax(dim=1).values
    after_end = torch.where(ends_run, columns + 1, width)
    next_start = after_end.flip(1).cummin(dim=1).values.flip(1)
    return 0.5 * (start + next_start + 1)


class DeviceDataStruct(DataStruct):
    """RecBole's DataStruct whose per-batch tensors wait in lists, on their device, until :meth:`join`."""

    def __init__(self):
        super().__init__()
        self.pending = {}

    def update_tensor(self, name, value):
        if name in self._data_dict and not isinstance(self._data_dict[name], torch.Tensor):
            raise ValueError(f"{name} is not a tensor.")  # RecBole's check
        self.pending.setdefault(name, []).append(value.clone().detach())

    def join(self):
        """Each result's batches (and what it held already) as one tensor, concatenated on its device."""
        for name, parts in self.pending.items():
            held = [self._data_dict[name]] if name in self._data_dict else []
            joined = held + parts
            self._data_dict[name] = joined[0] if len(joined) == 1 else torch.cat(joined, dim=0)
        self.pending = {}


class DeviceCollector(Collector):
    """RecBole's ``Collector`` with no host sync per batch; :func:`get_data_struct` joins and copies once."""

    def __init__(self, config):
        super().__init__(config)
        self.data_struct = DeviceDataStruct()

    def eval_batch_collect(self, scores_tensor, interaction, positive_u, positive_i):
        device = scores_tensor.device
        if self.register.need("data.label"):  # RecBole's .to(device) then finds it there
            label = self.config["LABEL_FIELD"]
            interaction = Interaction({label: to_device(interaction[label], self.device)})
        super().eval_batch_collect(
            scores_tensor, interaction, to_device(positive_u, device), to_device(positive_i, device)
        )

    def _average_rank(self, scores):
        return average_rank(scores)

    def get_data_struct(self):
        self.data_struct.join()
        # RecBole's: every tensor to the host (one copy each, the only sync), a copy returned, per-evaluation keys
        # dropped; values data_collect set (ints, counters) are kept as they are (RecBole's .cpu() fails on them)
        for key, value in self.data_struct._data_dict.items():
            if isinstance(value, torch.Tensor):
                self.data_struct._data_dict[key] = value.cpu()
        returned = DataStruct()
        returned._data_dict = dict(self.data_struct._data_dict)
        for key in ["rec.topk", "rec.meanrank", "rec.score", "rec.items", "data.label"]:
            if key in self.data_struct:
                del self.data_struct[key]
        return returned


class DeviceEvaluationMixin:
    """A RecBole trainer whose evaluation copies batches without blocking and collects with :class:`DeviceCollector`.

    The evaluation loop itself stays RecBole's (``Trainer.evaluate``); a trainer that sets its own collector
    afterwards (DDP's gathering one, which builds on :class:`DeviceCollector`) keeps it."""

    def __init__(self, config, model):
        super().__init__(config, model)
        self.eval_collector = DeviceCollector(config)

    def _full_sort_batch_eval(self, batched_data):
        interaction, history_index, positive_u, positive_i = batched_data
        interaction = interaction_to_device(interaction, self.device)
        if history_index is not None:  # the (rows, items) to mask: indices on the scores' device
            history_index = tuple(to_device(index, self.device) for index in history_index)
        return super()._full_sort_batch_eval((interaction, history_index, positive_u, positive_i))

    def _neg_sample_batch_eval(self, batched_data):
        interaction, row_idx, positive_u, positive_i = batched_data
        interaction = interaction_to_device(interaction, self.device)
        return super()._neg_sample_batch_eval((interaction, to_device(row_idx, self.device), positive_u, positive_i))
