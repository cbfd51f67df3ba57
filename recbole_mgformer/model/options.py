"""Checked reads of model options from a RecBole config: a bad value fails at construction with a
message that names the model, the key, what was given and what is allowed."""

import numbers


def _fail(model, key, value, expected):
    raise ValueError(f"{model}: {key} must be {expected}, got {value!r} (set it in a config file or with --{key}=...)")


def choice(config, key, choices, model):
    value = config[key]
    if value not in choices or isinstance(value, bool) != isinstance(choices[0], bool):
        raise ValueError(
            f"{model}: unknown {key} {value!r}; choose one of {', '.join(map(str, choices))} "
            f"(set it in a config file or with --{key}=...)"
        )
    return value


def positive_int(config, key, model, optional=False):
    value = config[key]
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        _fail(model, key, value, "a positive integer" + (" or ~" if optional else ""))
    return int(value)


def non_negative_int(config, key, model):
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        _fail(model, key, value, "a non-negative integer")
    return int(value)


def _real(config, key, model, expected, accept):
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not accept(value):
        _fail(model, key, value, expected)
    return float(value)


def positive_float(config, key, model):
    return _real(config, key, model, "a number > 0", lambda v: v > 0)


def non_negative_float(config, key, model):
    return _real(config, key, model, "a number >= 0", lambda v: v >= 0)
