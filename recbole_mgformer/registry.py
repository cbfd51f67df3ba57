"""The model registry's former address, kept so scripts written against it (``../shared/tools/gpu/launch_count.py``)
still import: the registry lives in :mod:`recbole_mgformer.integration.registry`."""

from recbole_mgformer.integration.registry import *  # noqa: F403
from recbole_mgformer.integration.registry import __all__  # noqa: F401
