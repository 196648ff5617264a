import numpy as np

from autotune.algorithms.batch_choice import (
    SCREEN_KEEP,
    SCREEN_ROWS,
    best_first,
    far_picks,
    member_scores,
    round_robin,
)
from autotune.cost_models.xgb import XGBCostModel


def test_round_robin_takes_each_members_best_in_turn():
    scores = np.array([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    assert round_robin(scores, 3) == [0, 3, 1]
    assert round_robin(scores[:1], 2) == [0, 1]
    assert round_robin(scores, 9) == [0, 3, 1, 2]
    assert round_robin(scores, 1, first=1) == [3]  # slot 0 goes to member 1
    assert round_robin(scores, 0) == [] and round_robin(np.zeros((2, 0)), 3) == []


def test_best_first_orders_the_top_k_with_ties_by_index():
    row = np.array([1.0, 5.0, 3.0, 5.0, 0.0])
    assert best_first(row, 2).tolist() == [1, 3]
    assert best_first(row, 3).tolist() == [1, 3, 2]
    assert best_first(row, 9).tolist() == [1, 3, 2, 0, 4]


def test_far_picks_go_where_nothing_was_seen_among_the_best_scored():
    ranked = np.linspace(0.0, 1.0, 11)[:, None]  # eleven points on a line
    rows = [0, 1, 2, 9, 10, 5]  # candidate i is row rows[i]
    mean = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    # seen: rows 0-2 (0.0-0.2); the farthest of the best-scored is row 10
    picks = far_picks(ranked, rows.__getitem__, mean, 1, 5, near=[0, 1, 2], chosen=[])
    assert [rows[i] for i in picks] == [10]
    # row 10 already chosen for the batch: it counts as seen, so row 9 is next to it and row 5 is the farthest
    picks = far_picks(ranked, rows.__getitem__, mean, 1, 5, near=[0, 1, 2], chosen=[4])
    assert [rows[i] for i in picks] == [5]
    # the pool holds the 5 best-scored only (not row 5); each pick counts as seen for the next
    picks = far_picks(ranked, rows.__getitem__, mean, 2, 5, near=[0, 10], chosen=[])
    assert [rows[i] for i in picks] == [2, 1]
    assert far_picks(ranked, rows.__getitem__, mean, 0, 5, near=[], chosen=[]) == []


def test_member_scores_of_a_large_listing_screen_by_the_first_member_and_keep_every_members_best():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 16, size=(SCREEN_ROWS + 5000, 4)).astype(float)
    train = X[rng.choice(len(X), 200, replace=False)]
    cost = (train[:, 0] - 3) ** 2 + (train[:, 1] - 11) ** 2 + 0.5 * train[:, 2] + rng.random(len(train))
    model = XGBCostModel(seed=0).fit(train, cost)
    full = model.predict_members(X)
    screened = member_scores(model, X, screen=True)
    assert screened.shape == full.shape == (8, len(X))
    top = np.argpartition(-full[0], SCREEN_KEEP)[:SCREEN_KEEP]
    rest = np.setdiff1d(np.arange(len(X)), top)
    np.testing.assert_array_equal(screened[0], full[0])  # the first member scores every row
    np.testing.assert_array_equal(screened[1:, top], full[1:, top])  # the others, its best rows as they are
    assert (screened[1:, rest].max(axis=1) < screened[1:, top].min(axis=1)).all()  # the rest rank last
    assert (np.diff(screened[1:, rest[np.argsort(-full[0, rest])]], axis=1) <= 0).all()  # in the first's order
    for m in range(8):  # what a batch takes: every member's best, and the mean's best 256
        assert set(best_first(screened[m], 16)[:16]) == set(best_first(full[m], 16)[:16])
    assert set(best_first(screened.mean(axis=0), 256)[:256]) <= set(top)
    small = X[:SCREEN_ROWS - 1]
    np.testing.assert_array_equal(member_scores(model, small, screen=True), model.predict_members(small))
    np.testing.assert_array_equal(member_scores(model, X), full)  # only a listing is screened
    assert member_scores(XGBCostModel(seed=0), X, screen=True).shape == (1, len(X))  # untrained: one random row
    one = XGBCostModel(seed=0, members=1).fit(train, cost)
    np.testing.assert_array_equal(member_scores(one, X, screen=True), one.predict_members(X))
    reg = XGBCostModel(seed=0, objective="reg").fit(train, cost)  # its scores are negated predictions
    top = np.argpartition(-reg.predict_members(X)[0], SCREEN_KEEP)[:SCREEN_KEEP]
    np.testing.assert_array_equal(member_scores(reg, X, screen=True)[:, top], reg.predict_members(X)[:, top])
