import numpy as np

from autotune.cost_models.features import with_pairs
from autotune.search_spaces.knobs import KnobSpace


def test_pairs_append_the_sum_and_difference_of_every_two_columns():
    X = np.array([[1.0, 2.0, 5.0, 7.0], [3.0, 0.0, 4.0, 1.0]])
    out = with_pairs(X, [0, 1, 3])
    assert out.shape == (2, 4 + 2 * 3)
    assert np.array_equal(out[:, :4], X)
    assert np.array_equal(out[:, 4:7], X[:, [0, 0, 1]] + X[:, [1, 3, 3]])  # pairs (0,1) (0,3) (1,3)
    assert np.array_equal(out[:, 7:], X[:, [0, 0, 1]] - X[:, [1, 3, 3]])


def test_fewer_than_two_columns_add_nothing():
    X = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(with_pairs(X, [1]), X)
    assert np.array_equal(with_pairs(X, []), X)


def test_log2_columns_are_the_power_of_two_knobs_that_vary():
    space = KnobSpace({"bx": [16, 32, 64], "tile": [1, 3], "prec": [32], "by": [1, 2, 4], "mode": ["a", "b"]})
    assert space.log2_columns == [0, 3]  # tile is not a power of two everywhere, prec takes one value
