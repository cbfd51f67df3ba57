"""The random streams a training epoch draws from, kept in a checkpoint so that a resumed run continues them and
trains exactly as the uninterrupted run would have.

Without them a resumed run reseeds everything at its start: the training loader's generator shuffles the next epoch
as it shuffled the first, numpy's global generator (RecBole's negative sampler, SGL's views) and the models' own
generators (SimGCL's noise, MGFormer's sampled keys) replay the draws of the run's first steps. The state holds
tensors and plain values only, so checkpoints still load with ``weights_only=True``.
"""

import random

import numpy as np
import torch


def model_generators(model):
    """``{"<module path>.<attribute>": generator}`` for every ``torch.Generator`` a module of ``model`` holds."""
    generators = {}
    for path, module in model.named_modules():
        for attribute, value in vars(module).items():
            if isinstance(value, torch.Generator):
                generators[f"{path}.{attribute}" if path else attribute] = value
    return generators


def capture_random_state(model, train_data):
    """Every stream's state now: python's, numpy's and torch's global generators (and CUDA's where there is one),
    the training loader's shuffling generator and the model's own generators."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    version, python_state, gauss_next = random.getstate()
    state = {
        "python": [version, list(python_state), gauss_next],
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],  # a CPU run never starts CUDA
        "generators": {name: generator.get_state() for name, generator in model_generators(model).items()},
    }
    loader_generator = getattr(train_data, "generator", None)
    if loader_generator is not None:
        state["train_loader"] = loader_generator.get_state()
    return state


def restore_random_state(state, model, train_data):
    """Put back what :func:`capture_random_state` returned. A generator the state does not name keeps its seed, and
    a state naming one the model lacks is an error: the checkpoint comes from another kind of model."""
    version, python_state, gauss_next = state["python"]
    random.setstate((version, tuple(python_state), gauss_next))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["position"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():  # same GPUs
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    generators = model_generators(model)
    unknown = sorted(set(state["generators"]) - set(generators))
    if unknown:
        raise ValueError(
            f"the checkpoint's random state names generators this {type(model).__name__} does not have "
            f"({', '.join(unknown)}); resume with the model that wrote it"
        )
    for name, generator_state in state["generators"].items():
        generators[name].set_state(generator_state.cpu())
    loader_generator = getattr(train_data, "generator", None)
    if loader_generator is not None and "train_loader" in state:
        loader_generator.set_state(state["train_loader"].cpu())
