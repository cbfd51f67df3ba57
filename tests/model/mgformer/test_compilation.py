import warnings

import pytest
import torch

from recbole_mgformer.model.mgformer.compilation import CompiledOrEager


def test_compiled_function_matches_eager_values_and_gradients():
    def function(x, w):
        return (x @ w).exp().sum(0)

    x = torch.randn(7, 3)
    w_eager = torch.randn(3, 4, requires_grad=True)
    w_compiled = w_eager.detach().clone().requires_grad_()
    compiled = CompiledOrEager(function, "test", dynamic=True)
    expected, got = function(x, w_eager), compiled(x, w_compiled)
    torch.testing.assert_close(got, expected)
    expected.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(w_compiled.grad, w_eager.grad)
    assert compiled.active


def test_a_failing_compilation_falls_back_to_eager_with_one_warning():
    calls = []

    def function(x):
        calls.append(len(x))
        return x * 2

    wrapper = CompiledOrEager(function, "flaky")

    def broken(*_):
        raise RuntimeError("no C++ compiler found\nsecond line")

    wrapper.compiled = broken  # stands in for a backend that cannot compile on this machine
    with pytest.warns(
        RuntimeWarning, match="flaky: torch.compile failed .RuntimeError: no C.. compiler found.; running in eager"
    ):
        torch.testing.assert_close(wrapper(torch.ones(3)), torch.full((3,), 2.0))
    assert not wrapper.active
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        wrapper(torch.ones(2))
    assert calls == [3, 2]


def test_errors_that_eager_mode_raises_too_still_surface():
    def function(x):
        raise ValueError("bad input")

    wrapper = CompiledOrEager(function, "buggy")
    wrapper.compiled = function
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="bad input"):
        wrapper(torch.ones(1))
