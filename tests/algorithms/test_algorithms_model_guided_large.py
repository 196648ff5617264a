"""ModelGuided on a space above ``score_all``: a fixed random sample of its points searched as a space that
size, with the inner search's proposals beside it (autotune/algorithms/listing.py)."""

import json

import numpy as np
import pytest

from autotune.algorithms.model_guided import make_guided
from autotune.errors import UsageError
from autotune.testing.algorithms import AlgorithmConformance, drive
from autotune.testing.fakes import FakeRunner, small_knob_space


class TestGuidedLargeSpace(AlgorithmConformance):
    """A space above score_all, searched through a sample of its points and the inner search."""

    def make_algorithm(self):
        return make_guided("evolutionary", init=6, retrain_every=4, score_all=20, large="both", pool=32,
                           inner_batch=8, cost_model_options={"min_samples": 4, "rounds": 10})



@pytest.mark.parametrize("indexed", [True, False])
def test_a_space_above_score_all_is_searched_through_a_fixed_sample_of_its_points(indexed):
    space = small_knob_space()  # 57 points
    if not indexed:
        space.point = None  # a space that lists its points but cannot index them: sampled in one pass
    algo = make_guided("evolutionary", init=8, score_all=20, large="sample", epsilon=0.0,
                       cost_model_options={"min_samples": 4, "rounds": 5})
    algo.bind(space, np.random.default_rng(0), [])
    first = algo.ask(8)
    listed = {c.key for c in algo._all}
    assert len(listed) == 20 and all(space.contains(c) for c in algo._all)
    assert {c.key for c in first[1:]} <= listed  # the design's spread points come from the sample
    algo.tell(FakeRunner(space).measure(space.task, first))
    for _ in range(2):
        batch = algo.ask(4)
        assert {c.key for c in batch} <= listed  # the model scores the sample (no exploration: epsilon 0)
        algo.tell(FakeRunner(space).measure(space.task, batch))


def test_samples_differ_between_seeds_and_the_inner_search_adds_points_beyond_them():
    space = small_knob_space()
    samples = []
    for seed in (0, 1):
        algo = make_guided("evolutionary", init=4, score_all=20, large="both", pool=64, epsilon=0.0,
                           cost_model_options={"min_samples": 4, "rounds": 5})
        keys = drive(algo, space, FakeRunner(space), seed=seed, steps=8)
        listed = {c.key for c in algo._all}
        samples.append(listed)
        assert any(k not in listed for k in keys[4:])
    assert samples[0] != samples[1]


def test_large_must_name_a_known_mode():
    with pytest.raises(UsageError, match="large must be one of inner, sample, both"):  # the CLI's clean error
        make_guided("evolutionary", large="everything")


def test_a_resumed_search_lists_the_same_sample_of_a_large_space():
    def make():
        return make_guided("evolutionary", init=4, score_all=20, large="both", pool=32,
                           cost_model_options={"min_samples": 4, "rounds": 5})

    space = small_knob_space()
    algo = make()
    drive(algo, space, FakeRunner(space), seed=0, steps=3)
    history = list(algo.history)
    state = json.loads(json.dumps(algo.state_dict()))
    resumed = make()
    resumed.bind(small_knob_space(), np.random.default_rng(7), history)  # another rng: the state's is loaded
    resumed.load_state_dict(state)
    resumed.ask(4)
    assert [c.key for c in resumed._all] == [c.key for c in algo._all]


def test_far_picks_come_from_the_sample_when_the_inner_search_adds_candidates():
    space = small_knob_space()
    algo = make_guided("evolutionary", init=4, score_all=20, large="both", pool=32,
                       cost_model_options={"min_samples": 4, "rounds": 5})
    drive(algo, space, FakeRunner(space), seed=0, steps=3)
    listed, scores = algo._scored_all()
    outside = [c for c in space.enumerate() if c.key not in algo._all_index and c.key not in algo.seen][:3]
    assert listed and outside
    cands = outside[:1] + listed + outside[1:]  # the inner search's, best scored, around the sample's
    high = np.full((scores.shape[0], 1), scores.max() + 1.0)
    scores = np.hstack([high, scores, np.repeat(high, len(outside) - 1, axis=1)])
    chosen = [1]
    picks = algo._far_from_seen(cands, scores, 3, chosen)
    assert len(picks) == 3 and len(set(picks)) == 3
    assert all(cands[i].key in algo._all_index for i in picks) and 1 not in picks


def test_the_inner_search_is_told_the_first_members_scores_and_its_proposals_carry_every_members(monkeypatch):
    from autotune.algorithms.evolutionary import Evolutionary

    space = small_knob_space()
    algo = make_guided("evolutionary", init=4, score_all=0, pool=32, inner_batch=8, epsilon=0.0,
                       cost_model_options={"min_samples": 4, "rounds": 5})
    drive(algo, space, FakeRunner(space), seed=0, steps=4)
    model = algo.cost_model
    assert model.members > 1
    told = []
    original = Evolutionary.tell
    monkeypatch.setattr(Evolutionary, "tell", lambda self, results: (told.extend(results), original(self, results))[1])
    measured = {m.candidate.key for m in algo.history}
    cands, scores = algo._scored_by_inner()
    proposals = [m for m in told if m.candidate.key not in measured]  # not the history the inner search is bound to
    assert cands and len(proposals) == 32
    np.testing.assert_array_equal(scores, model.predict_members(algo._features(cands)))  # every member, each candidate
    X = algo._features([m.candidate for m in proposals])
    cost = np.array([m.cost for m in proposals])

    def follows(s):  # a higher score never told as a higher cost
        return all(cost[i] <= cost[j] for i in range(len(s)) for j in range(len(s)) if s[i] > s[j])

    assert follows(model.predict_members(X, slice(0, 1))[0])
    assert not follows(model.predict_members(X).mean(axis=0))  # the members' mean would order them otherwise


@pytest.mark.parametrize("options", [{"score_all": 8}, {"score_all": 40, "sample": 8}])
def test_a_sample_every_point_of_which_was_measured_leaves_the_inner_searchs_proposals(options):
    """A sample smaller than the measurements (score_all or sample below the budget, e.g. 8): once every
    sampled point was seen, the model's slots are the inner search's proposals alone and the search goes on
    (the sample's empty scores were stacked beside the proposals' and the ask crashed)."""
    space = small_knob_space()  # 57 points, above the sample
    algo = make_guided("evolutionary", init=8, retrain_every=4, large="both", pool=32, inner_batch=8,
                       cost_model_options={"min_samples": 4, "rounds": 5}, **options)
    keys = drive(algo, space, FakeRunner(space), seed=0, steps=6, batch=8)
    listed = {c.key for c in algo._all}
    assert len(listed) == 8 and listed <= set(keys)  # the sample was used up...
    assert len(keys) == 48 == len(set(keys))  # ...and every batch was still filled, never twice the same point
