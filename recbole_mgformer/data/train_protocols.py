"""Which training rows a batch holds (``train_protocol``), resolved in one place for every model:

- ``prefix`` (the default): RecBole's training rows as they are, a general dataset's interactions and a sequential
  dataset's prefixes, ``train_batch_size`` rows a batch;
- ``sequence``: a sequential history's windows with a loss at every position (:mod:`.sequence_windows`);
- ``user``: every training pair of a batch's users, for a loss that scores every item for a user
  (:mod:`.user_batches`).

A model trains under the protocols its ``TRAIN_PROTOCOLS`` names (``model/abstract_recommender.py``).
"""

from recbole_mgformer.data.sequence_windows import SequenceWindowLoader, check_window_stride
from recbole_mgformer.data.user_batches import UserBatchLoader
from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.model.recbole_sequential import train_protocol

# protocol -> its loader (None: RecBole's) and the models that offer it, for the error that names them
PROTOCOLS = {
    "prefix": (None, "every model"),
    "sequence": (SequenceWindowLoader, "this project's sequential models SASRec, GRU4Rec and EAGPS"),
    "user": (UserBatchLoader, "MGFormer with loss: softmax"),
}


def check_train_protocol(config, model_class):
    """``train_protocol`` must be one the model trains under (``prefix``, RecBole's, by default), with the settings
    of its protocol."""
    protocol = train_protocol(config)
    if protocol not in PROTOCOLS:
        raise ValueError(f"train_protocol={protocol!r} must be one of {', '.join(PROTOCOLS)}")
    supported = model_contract(model_class).TRAIN_PROTOCOLS
    if protocol not in supported:
        raise ValueError(
            f"{model_class.__name__} does not train under train_protocol={protocol!r} (it trains under "
            f"{', '.join(supported)}); train_protocol: {protocol} is offered by {PROTOCOLS[protocol][1]}"
        )
    check_window_stride(config, protocol)
    check_user_chunk(config, protocol)


def check_user_chunk(config, protocol):
    """``train_user_chunk``: set only with ``train_protocol: user``, a whole number of pairs, 1 or more."""
    chunk = config["train_user_chunk"]
    if chunk is None:
        return
    if protocol != "user":
        raise ValueError("train_user_chunk applies to train_protocol: user only; set both, or neither")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"train_user_chunk={chunk!r} must be a whole number of pairs, 1 or more (e.g. 4)")


def training_loader(config, train_data):
    """RecBole's training loader ``train_data``, or its protocol's loader over the same dataset and sampler."""
    loader = PROTOCOLS[train_protocol(config)][0]
    if loader is None:
        return train_data
    return loader(config, train_data._dataset, train_data._sampler, shuffle=train_data.shuffle)
