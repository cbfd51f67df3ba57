r"""BSPM (Choi et al., "Blurring-Sharpening Process Models for Collaborative Filtering", SIGIR 2023), training-free.

With GF-CF's ``R~ = D_U^{-1/2} R D_I^{-1/2}``, ``P~ = R~^T R~`` and ideal low-pass filter
``F = D_I^{-1/2} V_k V_k^T D_I^{1/2}`` (``V_k``: top-``k`` right singular vectors of ``R~``; ``factor_dim`` in the
authors' code), a user's row ``r_u`` of ``R`` goes through three linear ODEs, each solved on ``[0, T]`` in ``K``
equal steps of a fixed-step solver (``euler`` or ``rk4``):

    ideal low-pass:  dr/dt = r F - r,   r(0) = r_u,   over T_idl, K_idl steps   -> r_idl
    blurring:        dr/dt = r P~ - r,  r(0) = r_u,   over T_b, K_b steps       -> r_b(t_1), ..., r_b(T_b)
    sharpening:      dr/dt = -r P~,     r(0) = idl_beta r_idl + r_b(T_b)  (final_sharpening)
                                             or r_b(T_b)  (final_sharpening: False),
                                        over T_s, K_s steps                     -> r_s(t_1), ..., r_s(T_s)

and the score is ``r_s(T_s)`` with ``final_sharpening``, else ``r_s(T_s) + idl_beta r_idl``. With
``t_point_combination`` the sharpening's end point is replaced by the mean of the blurring's and the sharpening's
states after ``t = 0`` (``r_b(t_1..T_b)`` and ``r_s(t_1..T_s)``); ``sharpening: False`` skips the sharpening
(score ``r_b(T_b) + idl_beta r_idl``, or the blurring states' mean with ``t_point_combination``).

These are the paper's blurring (heat-equation) and sharpening processes with the ideal low-pass filter "IDL" and the
"t-point combination" (its Section 3; the paper is not on this machine, so its equation numbers are not quoted here).
Every detail above was checked against the authors' code (jeongwhanchoi/BSPM, ``bspm/model.py`` class ``BSPM``,
defaults in ``bspm/parse.py``, settings in ``README.md``): euler, ``T = 1``, ``K = 1`` for the ideal and blurring
processes (so ``r_idl = r_u F`` and ``r_b = r_u P~``, as their GPU class computes directly), and on Gowalla
``rk4``, ``T_s = 2.5``, ``K_s = 1``, ``idl_beta = 0.2``, ``factor_dim = 448``, ``final_sharpening`` (Yelp2018:
euler, ``T_s = 1.2``, ``t_point_combination``, ``factor_dim = 384``, ``idl_beta = 0.3``; Amazon-Book: no ideal
filter, rk4, ``T_s = 2.2``, ``K_s = 2``, ``final_sharpening: False``). Their solver is torchdiffeq's fixed grid
``linspace(0, T, K + 1)``; for these linear, autonomous ODEs its 3/8-rule ``rk4`` and the classic ``rk4`` used
here give the same step (the fourth-order Taylor polynomial of the step's matrix exponential).

``idl_beta = 0`` skips the singular value decomposition. Every product with ``P~`` is two sparse products per
block of users, so no users x users or items x items matrix is formed.
"""

import torch

from recbole_mgformer.model.filters import (
    SOLVERS,
    ClosedFormRecommender,
    ItemGraph,
    ideal_low_pass,
    integrate,
    item_degrees,
    normalized_interactions,
)
from recbole_mgformer.model.options import choice, non_negative_float, positive_float, positive_int

PROCESSES = (("idl", "T_idl", "K_idl"), ("blur", "T_b", "K_b"), ("sharpen", "T_s", "K_s"))


class BSPM(ClosedFormRecommender):
    r"""BSPM; see ``properties/model/BSPM.yaml`` for its options."""

    def fit(self, interactions, config):
        self.k = positive_int(config, "factor_dim", "BSPM")
        self.idl_beta = non_negative_float(config, "idl_beta", "BSPM")
        self.final_sharpening = choice(config, "final_sharpening", (True, False), "BSPM")
        self.sharpening = choice(config, "sharpening", (True, False), "BSPM")
        self.t_point_combination = choice(config, "t_point_combination", (True, False), "BSPM")
        self.schedule = {
            process: (
                choice(config, f"solver_{process}", SOLVERS, "BSPM"),
                positive_float(config, horizon, "BSPM"),
                positive_int(config, steps, "BSPM"),
            )
            for process, horizon, steps in PROCESSES
        }
        normalized = normalized_interactions(interactions, 0.5, 0.5)  # R~
        self.linear = ItemGraph(factor=normalized)
        self.ideal = (
            ideal_low_pass(normalized, item_degrees(interactions), self.k, config["seed"], "BSPM", key="factor_dim")
            if self.idl_beta > 0
            else None
        )

    def solve(self, process, derivative, start):
        solver, horizon, steps = self.schedule[process]
        return integrate(derivative, start, horizon, steps, solver)

    def filter_rows(self, rows):  # (block, items) -> (block, items)
        blurred = self.solve("blur", lambda r: self.linear(r) - r, rows)
        start = blurred[-1]
        ideal = None
        if self.ideal is not None:
            ideal = self.idl_beta * self.solve("idl", lambda r: self.ideal(r) - r, rows)[-1]
            if self.final_sharpening:
                start = start + ideal
        states = blurred
        if self.sharpening:
            sharpened = self.solve("sharpen", lambda r: -self.linear(r), start)
            states = blurred + sharpened
            scores = sharpened[-1]
        else:
            scores = blurred[-1]
        if self.t_point_combination:
            scores = torch.stack(states).mean(dim=0)
        if ideal is not None and not (self.final_sharpening and self.sharpening):
            scores = scores + ideal
        return scores
