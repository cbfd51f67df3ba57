"""``torch.compile`` where it works, eager where it does not.

Compilation can fail on a given machine for reasons unrelated to the model (no C++ compiler for the CPU
backend, an unsupported operator in an older torch); a training run should then go on in eager mode with a
warning rather than stop.
"""

import warnings

import torch


class CompiledOrEager:
    """Calls ``torch.compile(function)``; on the first failure warns once and calls ``function`` from then on.

    An error that eager mode raises too is re-raised from the eager call, so genuine bugs still surface.
    """

    def __init__(self, function, name, **compile_options):
        self.eager = function
        self.name = name
        self.compiled = torch.compile(function, **compile_options)

    @property
    def active(self):
        """True while the compiled version is in use."""
        return self.compiled is not None

    def __call__(self, *args, **kwargs):
        if self.compiled is not None:
            try:
                return self.compiled(*args, **kwargs)
            except Exception as error:  # torch._dynamo / inductor errors come in many types
                warnings.warn(
                    f"{self.name}: torch.compile failed ({type(error).__name__}: "
                    f"{str(error).splitlines()[0] if str(error) else ''}); running in eager mode",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self.compiled = None
        return self.eager(*args, **kwargs)
