"""The trials a search runs (``recbole_mgformer.tune.draws``): Ray's own draws from the seed, and the finished
trials' records checked against them."""

import pytest

from recbole_mgformer.tune.draws import drawn_trials, plan_trials
from recbole_mgformer.tune.space import TuneSetupError, parse_space, ray_space

SPACE = {
    "n_layers": {"grid": [1, 2]},
    "uniformity_weight": {"loguniform": [1.0e-3, 1.0]},
    "mlp_hidden_size": {"choice": [[64], [128, 128]]},
    "n_heads": {"randint": [1, 4]},
}


def request(search="random", samples=3, seed=0, first_trial=None, space=SPACE):
    return {
        "space": space,
        "search": search,
        "samples": samples,
        "search_seed": seed,
        "experiment": "/somewhere/tune/x",
        **({"first_trial": first_trial} if first_trial is not None else {}),
    }


def rays_draws(space, search, samples, seed, first_trial=None):
    """The trials Ray's BasicVariantGenerator creates for the space, as a search without the records drew them."""
    from ray.tune.search.basic_variant import BasicVariantGenerator

    class Whole:  # a list in a point, which Ray would otherwise walk into item by item
        def __init__(self, value):
            self.value = value

        def __eq__(self, other):
            return self.value == other

        __hash__ = None

    point = {k: Whole(v) if isinstance(v, list) else v for k, v in first_trial.items()} if first_trial else None
    generator = BasicVariantGenerator(random_state=seed, points_to_evaluate=[point] if point else None)
    config = ray_space(parse_space(space), search)
    generator.add_configurations({"x": {"run": lambda config: None, "config": config, "num_samples": samples}})
    trials = []
    while (trial := generator.next_trial()) is not None:
        trials.append({k: v.value if isinstance(v, Whole) else v for k, v in trial.config.items()})
    return trials


@pytest.mark.parametrize(
    "search, samples, seed, first_trial",
    [
        ("random", 3, 0, None),
        ("random", 3, 7, {"n_layers": 3, "uniformity_weight": 0.0, "mlp_hidden_size": [256], "n_heads": 2}),
        ("grid", 1, 0, None),
    ],
)
def test_the_draws_are_rays_from_the_same_seed(search, samples, seed, first_trial):
    space = SPACE if search == "random" else {"n_layers": {"grid": [1, 2]}, "mlp_hidden_size": {"choice": [[64], [8]]}}
    drawn = drawn_trials(request(search, samples, seed, first_trial, space))
    assert drawn == rays_draws(space, search, samples, seed, first_trial)
    assert len(drawn) == (2 * samples - (1 if first_trial else 0) if search == "random" else 4)
    assert drawn != drawn_trials(request(search, samples, seed + 1, first_trial, space)) or search == "grid"


def record(index, params, status="completed"):
    return {"index": index, "params": params, "status": status, "score": 0.1, "results": []}


def test_a_plan_skips_the_finished_draws_and_refuses_a_record_that_is_not_its_draw():
    search = request(samples=3)
    drawn = drawn_trials(search)
    plan = plan_trials(search, {1: record(1, drawn[1]), 4: record(4, drawn[4], "failed")})
    assert plan.remaining == [0, 2, 3, 5] and plan.to_run == 4 and plan.total == 6 and plan.drawn == drawn
    edited = {**drawn[2], "n_heads": drawn[2]["n_heads"] % 3 + 1}
    with pytest.raises(TuneSetupError, match=r"trials/0002.json holds .*not a trial of this search \(its draw is"):
        plan_trials(search, {2: record(2, edited)})
    with pytest.raises(TuneSetupError, match=r"trials/0006.json .*\(it draws 6 trials\)"):
        plan_trials(search, {6: record(6, drawn[0])})


def test_a_hyperopt_plan_runs_the_remaining_samples_and_refuses_values_outside_the_space():
    search = request("hyperopt", samples=4, space={"uniformity_weight": {"loguniform": [0.1, 1.0]}})
    plan = plan_trials(search, {0: record(0, {"uniformity_weight": 0.5})})
    assert plan.to_run == 3 and plan.drawn is None and plan.first_pending is None
    with pytest.raises(
        TuneSetupError, match="trials/0001.json is not a trial of this search .uniformity_weight outside"
    ):
        plan_trials(search, {1: record(1, {"uniformity_weight": 5.0})})
    # the model's defaults, where the search starts from them, run first until their trial has finished
    first = request("hyperopt", 4, first_trial={"uniformity_weight": 0.2}, space=search["space"])
    assert plan_trials(first, {}).first_pending == {"uniformity_weight": 0.2}
    finished = {0: {**record(0, {"uniformity_weight": 0.2}), "defaults": True}}
    assert plan_trials(first, finished).first_pending is None
