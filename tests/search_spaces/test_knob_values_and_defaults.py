"""KnobSpace built from what a Python user passes: values of every type, the knobs' names, one constraint
given bare, and a default configuration."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Candidate


def test_tuples_are_stored_as_lists_so_a_point_read_back_is_in_the_space():
    space = KnobSpace({"tile": [(8, 8), (4, 16)], "opts": [{"b": 1, "a": 2}]})
    points = list(space.enumerate())
    assert [p.payload["tile"] for p in points] == [[8, 8], [4, 16]]
    assert list(points[0].payload["opts"]) == ["a", "b"]  # as its JSON gives it back
    assert space.contains(Candidate({"tile": [8, 8], "opts": {"a": 2, "b": 1}}))  # a payload from the database
    assert not np.isnan(space.features([Candidate({"tile": [4, 16], "opts": {"a": 2, "b": 1}})])).any()


@pytest.mark.parametrize("values", [[(1, 2), [1, 2]], [{"a": 1, "b": 2}, {"b": 2, "a": 1}]],
                         ids=["tuple and list", "dicts in two orders"])
def test_two_values_with_one_key_are_refused_as_a_value_listed_twice(values):
    with pytest.raises(UsageError, match="lists a value twice"):
        KnobSpace({"k": values})


@pytest.mark.parametrize("values,needle", [
    ({"range": [0, 9]}, "the {range: ...} and {pow2: ...} forms are for space files"),
    ({"b", "a", "c"}, "a set has no fixed order"),
])
def test_a_dict_or_a_set_where_a_list_belongs_is_refused(values, needle):
    with pytest.raises(UsageError, match="must be a list of values") as info:
        KnobSpace({"k": values})
    assert needle in str(info.value)


def test_knob_names_must_be_strings():
    with pytest.raises(UsageError, match=r"knob name 1 \(int\) is not a string"):
        KnobSpace({1: [1, 2], "1": [3]})


def test_one_constraint_given_bare_is_one_constraint():
    assert KnobSpace({"a": [1, 2, 3]}, "a > 1").size() == 2
    assert KnobSpace({"a": [1, 2, 3]}, lambda c: c["a"] != 2).size() == 2


def test_the_default_is_checked_knob_by_knob_and_takes_numpy_values():
    knobs = {"a": [1, 2], "b": [0, 1]}
    assert KnobSpace(knobs, default={"a": np.int64(2), "b": 0}).initial().payload == {"a": 2, "b": 0}
    with pytest.raises(UsageError, match=r"the default configuration .* unknown \['c'\]"):
        KnobSpace(knobs, default={"a": 1, "b": 0, "c": 3})
    with pytest.raises(UsageError, match=r"the default configuration .* missing \['b'\]"):
        KnobSpace(knobs, default={"a": 1})
    with pytest.raises(UsageError, match="the default configuration .* is not a valid point"):
        KnobSpace(knobs, ["a > 1"], default={"a": 1, "b": 0})


def test_a_constraint_compares_a_string_knob_with_a_string():
    space = KnobSpace({"layout": ["row", "col"], "block": [16, 64]}, "layout == 'row' or block <= 16")
    assert sorted((c.payload["layout"], c.payload["block"]) for c in space.enumerate()) == [
        ("col", 16), ("row", 16), ("row", 64)]
    with pytest.raises(UsageError, match="is not allowed"):  # a string is a comparison's operand, nothing else
        KnobSpace({"layout": ["row"], "n": [3]}, "layout == 'row' * n")
