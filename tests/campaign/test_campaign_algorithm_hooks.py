"""The campaign uses the algorithm hooks SearchAlgorithm declares: it refuses an algorithm whose
needed moves the space lacks before anything is written, stores every retrained cost model under
the model's name, and keeps the model's prediction with each trial a model chose, for every
model-guided algorithm (plain model guidance and warm start alike)."""

from __future__ import annotations

import pytest

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import make_algorithm
from autotune.algorithms.warm_start import SourceData, WarmStart
from autotune.campaign import Campaign
from autotune.db import open_database, queries
from autotune.errors import UsageError
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Device


def test_an_algorithm_the_space_cannot_serve_is_refused_before_the_campaign_opens(sqlite_url):
    from autotune.runners.simulator import SimulatorRunner
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model
    from autotune.search_spaces.parallel.space import StrategySpace

    graph, cluster = get_model("rnnlm", 64), get_cluster("p100-4x4")
    space = StrategySpace(graph, cluster)
    runner = SimulatorRunner(graph, cluster, space)
    db = open_database(sqlite_url)
    with pytest.raises(UsageError, match="'backtracking' searches knob spaces .* and graph spaces .*: it needs a space with children, and "
                                        "StrategySpace offers"):
        Campaign("tree", space, "backtracking", runner, db, trials=10)
    assert queries.campaigns(db).empty and runner.sim.simulations == 0


@pytest.mark.parametrize("kind", ["guided", "warm-start"])
def test_models_and_predictions_are_stored_for_every_model_guided_algorithm(sqlite_url, kind):
    space = small_knob_space()
    runner = FakeRunner(space)
    if kind == "guided":
        algo = make_search("random", "xgb", init=6, retrain_every=4, cost_model_options={"min_samples": 4})
        model_name = "xgb"
    else:
        other = Device("other-gpu", "cuda", {})
        source = SourceData(other, FakeRunner(space, device=other).measure(space.task, list(space.enumerate())))
        algo = WarmStart(make_algorithm("random"), [source], target_device=runner.device, top_k=3, init=2,
                         retrain_every=4)
        model_name = "xgb-pooled"
    db = open_database(sqlite_url)
    Campaign(kind, space, algo, runner, db, trials=28, batch=4).run()
    trials = queries.trials(db, campaign=kind)
    chosen = trials["predicted"].notna()
    assert 0 < chosen.sum() < len(trials)  # the model's picks carry its score; the random ones do not
    assert set(trials.loc[chosen, "candidate_key"]) <= set(algo.predicted)
    models = queries.cost_models(db)
    assert len(models) >= 2 and set(models["model"]) == {model_name} and set(models["campaign"]) == {kind}
