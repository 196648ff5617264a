import numpy as np

from autotune.algorithms.batch_choice import best_first, far_picks, round_robin


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
