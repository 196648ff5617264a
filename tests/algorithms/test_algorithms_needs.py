"""An algorithm's ``needs`` are checked when it is bound to a space: a search that uses a move (or a
trait: rewrites, knobs) the space lacks is refused with one sentence (UsageError) naming the kinds of
space it searches, before it proposes anything, and wrappers (model guidance, bandit, warm start) need
what the algorithms they wrap need. Every registered algorithm, plain and guided, is checked so on
every kind of space the tuning commands build."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.algorithms.base import SPACE_KINDS, offered_moves, searchable_kinds
from autotune.algorithms.model_guided import ModelGuided, make_search
from autotune.algorithms.registry import ALGORITHMS, make_algorithm
from autotune.algorithms.warm_start import WarmStart
from autotune.cost_models.xgb import XGBCostModel
from autotune.errors import MissingDependencyError, UsageError
from autotune.search_spaces.base import Space
from autotune.testing.fakes import FakeRewriteSpace, FakeRunner, small_knob_space
from autotune.testing.spaces import SpaceCase
from autotune.types import Candidate, Measurement, Status, Task


class Line(Space):
    """Points 0..size-1 on a line: samples and neighbor steps only (no crossover, children or enumeration)."""

    def __init__(self, size: int = 40):
        self.n = size
        self.task = Task("kernel", "line", {"n": size})

    def sample(self, rng):
        return Candidate({"x": int(rng.integers(self.n))})

    def neighbor(self, c, rng):
        x = c.payload["x"] + (1 if rng.random() < 0.5 else -1)
        return Candidate({"x": min(max(x, 0), self.n - 1)})

    def features(self, cs):
        return np.array([[c.payload["x"]] for c in cs], dtype=float)

    def size(self):
        return self.n


def bind(algo, space):
    return algo.bind(space, np.random.default_rng(0), [])


def test_offered_moves_are_the_methods_a_space_overrides():
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model
    from autotune.search_spaces.parallel.space import StrategySpace

    assert offered_moves(Line()) == ("sample", "neighbor")
    # a knob space's children are partial points (it overrides is_complete): no rewrites; its points are knob values
    assert offered_moves(small_knob_space()) == ("sample", "neighbor", "crossover", "children", "enumerate", "knobs")
    strategies = StrategySpace(get_model("rnnlm", 64), get_cluster("p100-4x4"))
    assert offered_moves(strategies) == ("sample", "neighbor", "crossover")
    # every point complete and children offered: each child is a rewrite of its parent
    assert offered_moves(FakeRewriteSpace()) == ("sample", "neighbor", "crossover", "children", "enumerate",
                                                 "saturate", "rewrites")
    assert offered_moves(StrategySpace) == offered_moves(strategies)  # a class answers as its instances


@pytest.mark.parametrize("name,missing", [("backtracking", "children"), ("grid", "enumerate"),
                                          ("evolutionary", "crossover")])
def test_an_algorithm_needing_a_move_the_space_lacks_is_refused_at_bind(name, missing):
    algo = make_algorithm(name)
    with pytest.raises(UsageError) as err:
        bind(algo, Line())
    msg = str(err.value)
    assert msg.startswith(f"algorithm {name!r} searches ") and f": it needs a space with {missing}, and " in msg
    assert msg.endswith("Line offers sample, neighbor") and "\n" not in msg
    assert algo.space is None  # refused before it was attached


@pytest.mark.parametrize("name", ["random", "mcmc"])
def test_an_algorithm_whose_moves_the_space_offers_is_bound(name):
    algo = bind(make_algorithm(name), Line())
    assert algo.ask(3)


def test_model_guidance_needs_what_its_inner_algorithm_needs():
    with pytest.raises(UsageError, match="'backtracking\\+xgb' searches .*: it needs a space with children"):
        bind(make_search("backtracking", "xgb"), Line())
    guided = ModelGuided(make_algorithm("random"), XGBCostModel(), local=0.5)
    assert guided.required_moves() == ("sample", "neighbor")
    bind(guided, Line())
    assert "neighbor" not in ModelGuided(make_algorithm("random"), XGBCostModel()).required_moves()


def test_bandit_needs_the_moves_of_its_arms():
    with pytest.raises(UsageError, match="'bandit' searches .*: it needs a space with children"):
        bind(make_algorithm("bandit", algorithms="random,backtracking"), Line())
    assert bind(make_algorithm("bandit", algorithms="random,mcmc"), Line()).ask(4)


def test_warm_start_needs_what_its_inner_algorithm_needs():
    with pytest.raises(UsageError, match="'warm-start\\+grid' searches knob spaces only .*: it needs a space with enumerate"):
        bind(WarmStart(make_algorithm("grid"), []), Line())


def test_model_guidance_searches_a_small_space_it_cannot_enumerate_with_the_inner_algorithm():
    """A sized space without ``enumerate`` is not scored exhaustively (enumerating it would raise
    NotImplementedError once the model is trained): the inner search explores the model instead."""
    space = Line(40)
    algo = bind(make_search("mcmc", "xgb", init=4, retrain_every=4, pool=32,
                            cost_model_options={"min_samples": 4, "rounds": 5}), space)
    told = 0
    for _ in range(6):
        batch = algo.ask(4)
        algo.tell([Measurement(c, Status.OK, times=[1.0 + abs(c.payload["x"] - 17)]) for c in batch])
        told += len(batch)
    assert told == 24 and algo.trained_on > 0 and algo.predicted


def test_algorithms_without_a_model_have_inert_hooks():
    algo = bind(make_algorithm("mcmc"), small_knob_space())
    assert algo.on_retrain is None and algo.cost_model is None and dict(algo.predicted) == {}
    with pytest.raises(TypeError):
        algo.predicted["k"] = 1.0  # the shared default cannot be filled by accident


def _knob_space():
    return small_knob_space()


def _graph_space():
    from autotune.search_spaces.graphs.space import GraphSpace
    from autotune.testing.spaces import build, small_graph

    return build(SpaceCase("graph", lambda: GraphSpace(small_graph("resnet50"))))


def _strategy_space():
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model
    from autotune.search_spaces.parallel.space import StrategySpace

    return StrategySpace(get_model("rnnlm", 64), get_cluster("p100-4x4"))


#: one space of each kind the tuning commands build (SPACE_KINDS), by the kind's name there
KIND_SPACES = {"knob spaces": _knob_space, "graph spaces": _graph_space, "parallelization strategies": _strategy_space}
GUIDED = {"init": 4, "score_all": 0, "pool": 16, "inner_batch": 8, "cost_model_options": {"min_samples": 4, "rounds": 5}}


def test_the_kinds_of_space_are_those_the_tuning_commands_build():
    assert [k.split(" (")[0] for k in SPACE_KINDS] == list(KIND_SPACES)


@pytest.mark.parametrize("kind", list(KIND_SPACES))
@pytest.mark.parametrize("cost_model", [None, "xgb"])
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_searches_a_kind_of_space_or_is_refused_naming_the_kinds_it_searches(name, cost_model, kind):
    """One check for every registered algorithm, plain and guided, on every kind of space: binding either
    refuses it (UsageError naming the kinds of space it can search, which this kind is not among) or it
    searches, proposing more than one point over a few rounds (a search that proposes the space's default
    point and stops, as TASO's queue did on a knob space's tree of partial points, must be refused instead)."""
    space = KIND_SPACES[kind]()
    try:
        algo = make_search(name, cost_model, **(GUIDED if cost_model else {}))
    except UsageError as exc:  # a combination refused when it is made (optuna-gp guided by a model)
        assert cost_model and "cannot be guided" in str(exc)
        return
    kinds = searchable_kinds(algo.required_moves(space))
    try:
        algo.bind(space, np.random.default_rng(0), [])
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    except UsageError as exc:
        assert str(exc).startswith(f"algorithm {algo.name!r} searches ")
        assert not any(k.startswith(kind) for k in kinds), f"refused on {kind}, which it claims to search: {exc}"
        assert all(k.split(" (")[0] in str(exc) for k in kinds) and type(space).__name__ in str(exc)
        return
    assert any(k.startswith(kind) for k in kinds)
    runner, proposed = FakeRunner(space), []
    for _ in range(3):
        batch = algo.ask(4)
        if not batch:
            break
        assert all(space.contains(c) and space.is_complete(c) for c in batch)
        proposed += [c.key for c in batch]
        algo.tell(runner.measure(space.task, batch))
    assert len(set(proposed)) >= 2, f"{algo.name} on {kind} proposed {len(proposed)} point(s) and stopped"
