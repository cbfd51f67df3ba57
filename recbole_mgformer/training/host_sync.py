"""The aten ops whose result the host must read before it can go on: on a GPU each one waits for the device.

Named as a ``TorchDispatchMode`` sees them (``func._schema.name`` without ``aten::``), for counting a step's or an
evaluation's syncs: ``tests/training/test_device_evaluation.py`` and ``experiments/launch_census.py``.
"""

HOST_SYNCING_OPS = frozenset(
    {
        # a value read on the host: ``.item()``, ``bool``, ``int`` and ``float`` of a tensor arrive as this one
        "_local_scalar_dense",
        "is_nonzero",
        # a Python bool
        "equal",
        "allclose",
        # an output whose shape depends on the data
        "nonzero",
        "masked_select",
        "unique",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "bincount",
        "histc",  # its range read from the data where min = max (the default)
    }
)
