import numpy as np
import pytest
from dense_filters import assert_scores, dense_interactions, ideal_low_pass, normalized


def torchdiffeq_trajectory(start, a, horizon, steps, solver):
    """States after each step of ``dr/dt = r A`` on ``linspace(0, T, K + 1)`` as torchdiffeq's fixed-grid
    solvers step (the authors' solver): ``euler``, and ``rk4`` as its 3/8 rule."""
    f = lambda r: r @ a  # noqa: E731
    h, r, states = horizon / steps, start, []
    for _ in range(steps):
        if solver == "euler":
            r = r + h * f(r)
        else:
            k1 = f(r)
            k2 = f(r + h * k1 / 3)
            k3 = f(r + h * (k2 - k1 / 3))
            k4 = f(r + h * (k1 - k2 + k3))
            r = r + (k1 + 3 * (k2 + k3) + k4) * h / 8
        states.append(r)
    return states


def reference(r, k, beta, solvers, times, final_sharpening=True, sharpening=True, t_point_combination=False):
    """BSPM as the authors' CPU class combines its three processes (bspm/model.py, BSPM.getUsersRating)."""
    rn = normalized(r, 0.5, 0.5)
    p, eye = rn.T @ rn, np.eye(r.shape[1])
    (s_idl, s_b, s_s), ((t_idl, k_idl), (t_b, k_b), (t_s, k_s)) = solvers, times
    idl = torchdiffeq_trajectory(r, ideal_low_pass(r, k) - eye, t_idl, k_idl, s_idl)[-1] if beta else 0 * r
    blurred = torchdiffeq_trajectory(r, p - eye, t_b, k_b, s_b)
    if sharpening:
        start = beta * idl + blurred[-1] if final_sharpening else blurred[-1]
        sharpened = torchdiffeq_trajectory(start, -p, t_s, k_s, s_s)
        combined = np.mean(blurred + sharpened, axis=0) if t_point_combination else sharpened[-1]
    else:
        combined = np.mean(blurred, axis=0) if t_point_combination else blurred[-1]
    return combined if final_sharpening and sharpening else combined + beta * idl


def settings(k, beta, solvers, times, **flags):
    keys = {"factor_dim": k, "idl_beta": beta, **flags}
    for name, solver, (horizon, steps), (t_key, k_key) in zip(
        ("idl", "blur", "sharpen"), solvers, times, (("T_idl", "K_idl"), ("T_b", "K_b"), ("T_s", "K_s"))
    ):
        keys.update({f"solver_{name}": solver, t_key: horizon, k_key: steps})
    return keys


CASES = [
    # the authors' Gowalla setting: euler T=1 K=1 ideal and blurring, rk4 sharpening T_s 2.5, final sharpening
    (8, 0.2, ("euler", "euler", "rk4"), ((1.0, 1), (1.0, 1), (2.5, 1)), {}),
    # Yelp2018's: euler sharpening, t-point combination
    (6, 0.3, ("euler", "euler", "euler"), ((1.0, 1), (1.0, 1), (1.2, 1)), {"t_point_combination": True}),
    # Amazon-Book's: no ideal filter, two rk4 steps, ideal added after the sharpening
    (8, 0.0, ("euler", "euler", "rk4"), ((1.0, 1), (1.0, 1), (2.2, 2)), {"final_sharpening": False}),
    # every process integrated over several steps, both solvers, ideal filter added after
    (
        5,
        0.5,
        ("rk4", "euler", "rk4"),
        ((0.7, 3), (1.3, 2), (0.9, 3)),
        {"final_sharpening": False, "t_point_combination": True},
    ),
    (5, 0.4, ("rk4", "rk4", "euler"), ((1.0, 2), (0.8, 3), (1.0, 1)), {"sharpening": False}),
    (
        5,
        0.4,
        ("euler", "euler", "euler"),
        ((1.0, 1), (0.8, 3), (1.0, 1)),
        {"sharpening": False, "t_point_combination": True},
    ),
]


@pytest.mark.parametrize("k,beta,solvers,times,flags", CASES)
def test_scores_are_the_three_processes_as_the_authors_combine_them(tiny_setup, k, beta, solvers, times, flags):
    _, model, _, (train, _, _) = tiny_setup("BSPM", **settings(k, beta, solvers, times, **flags))
    r = dense_interactions(train)
    assert_scores(model, reference(r, k, beta, solvers, times, **flags))


def test_default_blurring_and_ideal_processes_are_one_filter_each(tiny_setup):
    """Euler, T = 1, K = 1 (the authors' defaults): r_b = r P~ and r_idl = r F, as their GPU class computes."""
    _, model, _, (train, _, _) = tiny_setup("BSPM", factor_dim=8, idl_beta=0.2, sharpening=False)
    r = dense_interactions(train)
    rn = normalized(r, 0.5, 0.5)
    assert_scores(model, r @ rn.T @ rn + 0.2 * r @ ideal_low_pass(r, 8))


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"solver_sharpen": "dopri5"}, "unknown solver_sharpen 'dopri5'; choose one of euler, rk4"),
        ({"K_s": 0}, "K_s must be a positive integer"),
        ({"T_b": 0.0}, "T_b must be a number > 0"),
        ({"factor_dim": 1000}, "factor_dim = 1000 singular vectors is impossible"),
        ({"final_sharpening": "yes"}, "unknown final_sharpening 'yes'"),
    ],
)
def test_bad_options_are_named(tiny_setup, setting, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup("BSPM", **{"factor_dim": 8, **setting})
