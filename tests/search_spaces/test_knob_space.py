import json
import re

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.testing.fakes import small_knob_space
from autotune.types import Candidate


def test_enumeration_respects_constraints():
    space = small_knob_space()
    points = [c.payload for c in space.enumerate()]
    expected = [
        {"x": x, "y": y, "mode": m}
        for x in [1, 2, 4, 8, 16] for y in [1, 2, 4, 8] for m in "abc" if x * y <= 64
    ]
    assert points == expected
    assert space.size() == len(expected) == 57


def test_neighbor_moves_one_knob_to_adjacent_valid_value():
    space = KnobSpace({"a": [1, 2, 4, 8], "b": [1, 2, 4, 8]}, ["a * b <= 16"])
    rng = np.random.default_rng(0)
    c = space.candidate({"a": 4, "b": 4})
    for _ in range(50):
        n = space.neighbor(c, rng)
        changed = [k for k in "ab" if n.payload[k] != c.payload[k]]
        assert len(changed) == 1
        k = changed[0]
        vals = [1, 2, 4, 8]
        # 4,4 -> 8,4 is invalid (32 > 16), so a moves only down, b only down
        assert abs(vals.index(n.payload[k]) - vals.index(c.payload[k])) == 1
        assert n.payload[k] == 2


def test_remembered_points_change_no_move_even_when_the_memory_starts_again(monkeypatch):
    """Moves give the same valid points whether the space remembers every point it reached or forgets
    them every few points; a point breaking a constraint is never handed out from memory."""
    from autotune.search_spaces import knobs

    def walk(memo: int) -> list[str]:
        monkeypatch.setattr(knobs, "MEMO", memo)
        space = KnobSpace({"a": [1, 2, 4, 8, 16], "b": [1, 2, 4, 8], "m": ["x", "y"]}, ["a * b <= 16"])
        rng = np.random.default_rng(3)
        c, d, keys = space.candidate({"a": 1, "b": 1, "m": "x"}), space.candidate({"a": 16, "b": 1, "m": "y"}), []
        for _ in range(200):
            c = space.neighbor(c, rng)
            d = space.crossover(c, d, rng)
            for p in (c, d, space.sample(rng)):
                assert p.payload["a"] * p.payload["b"] <= 16 and space.contains(p)
                keys.append(p.key)
        return keys

    assert walk(3) == walk(10_000)


def test_features_use_log2_for_powers_of_two_and_index_for_choices():
    space = small_knob_space()
    X = space.features([space.candidate({"x": 16, "y": 2, "mode": "c"})])
    assert X.tolist() == [[4.0, 1.0, 2.0]]
    odd = KnobSpace({"t": [1, 3, 5]})
    assert odd.features([odd.candidate({"t": 5})]).tolist() == [[5.0]]


def test_children_fix_the_next_knob_and_prune_dead_prefixes():
    space = KnobSpace({"a": [1, 2, 3], "b": [1, 2]}, ["a + b <= 3"])
    root = [c.payload for c in space.children(None)]
    assert root == [{"a": 1}, {"a": 2}]  # a=3 has no valid completion
    kids = [c.payload for c in space.children(space.children(None).__next__())]
    assert kids == [{"a": 1, "b": 1}, {"a": 1, "b": 2}]


@pytest.mark.parametrize(
    "expr",
    ["__import__('os').system('true')", "x.__class__", "open('f')", "[x for x in y]", "lambda: 1", "x +", "z > 1"],
)
def test_unsafe_or_bad_constraints_are_rejected_naming_the_expression(expr):
    with pytest.raises(UsageError) as err:
        KnobSpace({"x": [1, 2], "y": [1]}, [expr])
    assert expr in str(err.value)


def test_safe_constraint_language():
    space = KnobSpace(
        {"x": [1, 2, 4, 8], "y": [1, 2, 3]},
        ["max(x, y) <= 4 and not (x == 1 and y == 3)", "x % 2 == 0 or y != 2", "(x if y > 1 else 0) < 8"],
    )
    pts = {(c.payload["x"], c.payload["y"]) for c in space.enumerate()}
    assert pts == {(1, 1), (2, 1), (2, 2), (2, 3), (4, 1), (4, 2), (4, 3)}


def test_callable_constraints_and_invalid_configs():
    space = KnobSpace({"x": [1, 2, 3]}, [lambda cfg: cfg["x"] != 2])
    assert [c.payload["x"] for c in space.enumerate()] == [1, 3]
    with pytest.raises(UsageError, match="not a valid point"):
        space.candidate({"x": 2})
    with pytest.raises(UsageError, match="missing"):
        space.candidate({})
    with pytest.raises(UsageError, match="no valid point"):
        KnobSpace({"x": [1]}, ["x > 5"]).size()


def test_candidate_keys_are_stable_across_processes():
    space = small_knob_space()
    c = space.candidate({"x": 2, "y": 4, "mode": "b"})
    assert c.key == space.candidate(json.loads(json.dumps({"mode": "b", "y": 4, "x": 2}))).key


@pytest.mark.parametrize("expr, env, message", [
    ("9**9**9 > a", {"a": 1}, "too large"),
    ("2 ** a < 10", {"a": 10**6}, "too large"),
    ("a / 0 > 1", {"a": 2}, "division by zero"),
    ("log2(a) > 1", {"a": 0}, "math domain error"),
    ("+".join(["a"] * 100_000) + " > 0", {"a": 1}, "the limit is 10,000"),
    ("+".join(["a"] * 1_500) + " > 0", {"a": 1}, "terms; the limit is 2,000"),
    ("(" * 300 + "a" + ")" * 300 + " > 0", {"a": 1}, "not a valid expression|nested too deeply"),
])
def test_hostile_constraints_fail_fast_with_a_usage_error(expr, env, message):
    import time

    from autotune.search_spaces.constraints import Constraint

    t0 = time.perf_counter()
    with pytest.raises(UsageError, match=message):
        Constraint(expr, {"a"})(env)
    assert time.perf_counter() - t0 < 10.0  # a guard against hanging, not a performance target


def test_a_constraint_that_divides_by_zero_at_some_point_names_the_point():
    space_constraints = ["b == 0 or a / b > 1"]  # short-circuit: fine
    KnobSpace({"a": [1, 2], "b": [0, 1]}, space_constraints).size()
    with pytest.raises(UsageError, match="at a=1, b=0"):
        KnobSpace({"a": [1, 2], "b": [0, 1]}, ["a / b > 1"]).size()


def test_every_point_is_keyed_as_its_configuration_is_whatever_the_values():
    from autotune.types import stable_key

    space = KnobSpace({"zeta": [1, -2, 3.5, 1e-7], "Alpha": ["a", 'q"uote', "ünï", "x y"], "mid": [True, False, None],
                       "nested": [[1, 2], {"b": 1, "a": [2.0]}]}, constraints=[lambda c: c["zeta"] != 3.5 or c["mid"] is not None])
    points = list(space.enumerate())
    assert len(points) == space.size() > 0
    assert all(c.key == stable_key(c.payload) == Candidate(dict(c.payload)).key for c in points)
    rng = np.random.default_rng(0)
    for c in [space.sample(rng) for _ in range(20)] + [space.neighbor(points[5], rng) for _ in range(20)]:
        assert c.key == stable_key(c.payload)
    assert space.point(3).key == points[3].key


def test_a_space_that_builds_its_own_candidates_keeps_them():
    class Tagged(KnobSpace):
        def _make(self, config):
            return Candidate({**config, "tag": 1})

    points = list(Tagged({"x": [1, 2], "y": [3]}).enumerate())
    assert [c.payload for c in points] == [{"x": 1, "y": 3, "tag": 1}, {"x": 2, "y": 3, "tag": 1}]
    assert all(c.key == Candidate(c.payload).key for c in points)


def test_knob_values_are_plain_json_values_or_refused_by_name():
    space = KnobSpace({"a": np.arange(3), "b": [np.float32(0.5), "x y", None, True]})
    assert space.values == [[0, 1, 2], [0.5, "x y", None, True]]
    assert all(type(v) is int for v in space.values[0])  # numpy integers as Python ones, as the JSON stores them
    for knobs, needle in (({"a": "abc"}, "must be a list of values, not 'abc' (str)"),
                          ({"a": 5}, "must be a list of values, not 5 (int)"),
                          ({"a": [1.0, float("nan")]}, "has the value nan"),
                          ({"a": [1.0, np.inf]}, "has the value inf"),
                          ({"a": [object()]}, "(object)")):
        with pytest.raises(UsageError, match=f"^knob 'a' .*{re.escape(needle)}"):
            KnobSpace(knobs)


def test_a_callable_constraint_that_raises_is_named_with_the_point():
    def odd(c):
        return 1 / (c["a"] - 2) > 0

    space = KnobSpace({"a": [1, 2, 3]}, constraints=[odd])
    with pytest.raises(UsageError, match=r"^constraint 'test_a_callable.*odd' \(test_knob_space.py line \d+\) "
                                         r"cannot be evaluated at a=2: ZeroDivisionError"):
        list(space.enumerate())
    assert space.constraints[0].__name__ == "odd"  # the wrapper keeps the name a task's identity reads


def test_a_tight_constraint_over_huge_ranges_stops_counting_at_the_check_limit():
    """x, y in 1..99,999 with x * y == 7: 10^10 combinations; the walk gives up after the limit, not hours."""
    import time

    big = list(range(1, 100_000))
    space = KnobSpace({"x": big, "y": big}, ["x * y == 7"], check_limit=1_000_000)
    seen = []
    t0 = time.perf_counter()
    assert space.count(seen.append) is None and space.too_large_by == "checks"
    assert time.perf_counter() - t0 < 30
    assert seen and seen == sorted(seen) and 0 < seen[-1] <= 1.0  # progress, towards the limit
    assert space.combinations() == 99_999 ** 2 and space.estimate_valid(10_000) == 0
    # a walk that prunes early is counted whatever the product: x is fixed before y is tried
    pruned = KnobSpace({"x": big, "y": big}, ["x == 7", "y * x <= 21"], check_limit=1_000_000)
    assert pruned.count() == 3 and pruned.too_large_by is None
    # too many valid points is told apart from too many checks
    wide = KnobSpace({"x": list(range(100)), "y": list(range(100))}, enumerate_limit=50)
    assert wide.size() is None and wide.too_large_by == "points"


def test_an_unconstrained_space_beyond_the_listing_limit_is_known_too_large_without_walking_it():
    """30 knobs of 4 values: 4^30 points, every one valid; the product says so, no walk (which took seconds)."""
    space = KnobSpace({f"k{i}": [1, 2, 3, 4] for i in range(30)}, check_limit=1_000)
    assert space.size() is None and space.too_large_by == "points"  # a walk would stop at the checks first
    small = KnobSpace({"a": [1, 2], "b": [1, 2, 3]}, enumerate_limit=6)
    assert small.size() == 6 and small.too_large_by is None
