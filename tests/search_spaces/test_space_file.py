"""Space files (YAML or JSON): one format for `autotune tune command`, `autotune space check` and
autotune.minimize; every bad input is one UsageError sentence naming what is wrong."""

from __future__ import annotations

import json

import pytest
import yaml

from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.search_spaces.space_file import Objective, load_space_file

DOC = {
    "name": "matmul",
    "knobs": {"block": [16, 32, 64], "unroll": {"range": [1, 4]}, "vec": {"pow2": [1, 8]}, "mode": ["a", "b"]},
    "constraints": ["block * unroll <= 128", "vec <= block"],
    "default": {"block": 32, "unroll": 1, "vec": 4, "mode": "a"},
    "objective": {"regex": "time: ([0-9.eE+-]+)", "scale": 0.001},
}

YAML_TEXT = """\
name: matmul
knobs:
  block: [16, 32, 64]
  unroll: {range: [1, 4]}
  vec: {pow2: [1, 8]}
  mode: [a, b]
constraints:
  - block * unroll <= 128
  - vec <= block
default: {block: 32, unroll: 1, vec: 4, mode: a}
objective:
  regex: "time: ([0-9.eE+-]+)"
  scale: 1e-3   # YAML 1.1 reads this as a string: accepted as a number
"""


def _write(tmp_path, doc, suffix=".yaml"):
    path = tmp_path / f"space{suffix}"
    path.write_text(doc if isinstance(doc, str) else (json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc, sort_keys=False)))
    return path


def _brute_force_size(doc) -> int:
    return sum(1 for b in (16, 32, 64) for u in (1, 2, 3, 4) for v in (1, 2, 4, 8) for _ in "ab"
               if b * u <= 128 and v <= b)


def test_yaml_and_json_load_to_the_same_space(tmp_path):
    y_space, y_obj = load_space_file(_write(tmp_path, YAML_TEXT))
    j_space, j_obj = load_space_file(_write(tmp_path, DOC, ".json"))
    assert isinstance(y_space, KnobSpace)
    assert y_space.names == j_space.names == ["block", "unroll", "vec", "mode"]
    assert y_space.values == j_space.values == [[16, 32, 64], [1, 2, 3, 4], [1, 2, 4, 8], ["a", "b"]]
    assert y_space.size() == j_space.size() == _brute_force_size(DOC) == 80
    assert [c.payload for c in y_space.enumerate()] == [c.payload for c in j_space.enumerate()]
    assert y_space.task.key == j_space.task.key and y_space.task.name == "matmul"
    assert y_obj == j_obj == Objective("time: ([0-9.eE+-]+)", 0.001)
    assert y_space.initial().payload == {"block": 32, "unroll": 1, "vec": 4, "mode": "a"}


def test_value_forms_and_optional_parts(tmp_path):
    space, objective = load_space_file(_write(tmp_path, {"knobs": {"x": {"range": [0, 20], "step": 8},
                                                                   "p": {"pow2": [3, 40]}, "f": [0.5, True, "s"]}}))
    assert space.values == [[0, 8, 16], [4, 8, 16, 32], [0.5, True, "s"]]
    assert objective is None and space.initial() is None and space.constraints == []
    assert space.task.name == "space"  # the file's stem when no name is given
    _, wall = load_space_file(_write(tmp_path, {"knobs": {"x": [1]}, "objective": {"wall_time": True}}))
    assert wall == Objective() and wall.wall_time


BAD = [
    ("not a mapping", "- 1\n- 2\n", "must be a mapping"),
    ("bad yaml", "knobs: [1, 2\n", "not valid YAML"),
    ("python tag", "knobs: !!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
    ("unknown key", {"knob": {"x": [1]}}, "did you mean 'knobs'"),
    ("misspelled constraints", {"knobs": {"x": [1]}, "constraint": ["x > 0"]}, "did you mean 'constraints'"),
    ("no knobs", {"name": "x"}, "needs knobs"),
    ("empty knob", {"knobs": {"x": []}}, "knob 'x' has no values"),
    ("knob not a list", {"knobs": {"x": 3}}, "not a list of values"),
    ("nested value", {"knobs": {"x": [[1, 2]]}}, "values must be numbers, strings or booleans"),
    ("null value", {"knobs": {"x": [None]}}, "values must be numbers, strings or booleans"),
    ("huge integer", {"knobs": {"x": [2**70]}}, "fit in 64 bits"),
    ("repeated value", {"knobs": {"x": [1, 1]}}, "lists a value twice"),
    ("bad knob name", {"knobs": {"2x": [1]}}, "knob name"),
    ("keyword knob name", {"knobs": {"if": [1]}}, "knob name"),
    ("empty range", {"knobs": {"x": {"range": [5, 1]}}}, "is empty"),
    ("range of floats", {"knobs": {"x": {"range": [0.5, 2]}}}, "two integers"),
    ("huge range", {"knobs": {"x": {"range": [0, 10**9]}}}, "the limit is"),
    ("zero step", {"knobs": {"x": {"range": [0, 4], "step": 0}}}, "positive integer"),
    ("unknown form", {"knobs": {"x": {"list": [1]}}}, "not a value form"),
    ("pow2 from zero", {"knobs": {"x": {"pow2": [0, 8]}}}, "1 <= low"),
    ("constraint naming an unknown knob", {"knobs": {"x": [1]}, "constraints": ["y > 0"]}, "unknown name(s) y"),
    ("constraint not a string", {"knobs": {"x": [1]}, "constraints": [3]}, "list of expression strings"),
    ("constraint with a call", {"knobs": {"x": [1]}, "constraints": ["__import__('os')"]}, "not allowed"),
    ("default missing a knob", {"knobs": {"x": [1], "y": [2]}, "default": {"x": 1}}, "missing y"),
    ("default not valid", {"knobs": {"x": [1, 2]}, "constraints": ["x > 1"], "default": {"x": 1}}, "not a valid point"),
    ("bad regex", {"knobs": {"x": [1]}, "objective": {"regex": "time: ([0-9"}}, "not a valid regular expression"),
    ("regex without a group", {"knobs": {"x": [1]}, "objective": {"regex": "time: [0-9.]+"}}, "0 capturing groups"),
    ("regex with two groups", {"knobs": {"x": [1]}, "objective": {"regex": "(a)(b)"}}, "2 capturing groups"),
    ("bad scale", {"knobs": {"x": [1]}, "objective": {"regex": "t=(.*)", "scale": -1}}, "positive number"),
    ("unknown objective key", {"knobs": {"x": [1]}, "objective": {"regexp": "t=(.*)"}}, "did you mean 'regex'"),
    ("empty objective", {"knobs": {"x": [1]}, "objective": {}}, "needs regex"),
    ("both objectives", {"knobs": {"x": [1]}, "objective": {"regex": "(1)", "wall_time": True}}, "one of them"),
]


@pytest.mark.parametrize("doc, expected", [(d, e) for _, d, e in BAD], ids=[i for i, _, _ in BAD])
def test_bad_space_files_are_one_sentence(tmp_path, doc, expected):
    with pytest.raises(UsageError) as err:
        load_space_file(_write(tmp_path, doc))
    message = str(err.value)
    assert expected in message and "\n" not in message and len(message) < 400, message


def test_bad_json_and_missing_files(tmp_path):
    (tmp_path / "bad.json").write_text('{"knobs": {"x": [1,]}}')
    with pytest.raises(UsageError, match="not valid JSON"):
        load_space_file(tmp_path / "bad.json")
    with pytest.raises(UsageError, match="does not exist"):
        load_space_file(tmp_path / "missing.yaml")
    with pytest.raises(UsageError, match="is a folder"):
        load_space_file(tmp_path)
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    with pytest.raises(UsageError, match="is empty; it needs at least a 'knobs' mapping"):
        load_space_file(tmp_path / "empty.yaml")
    (tmp_path / "latin1.yaml").write_bytes(b"knobs: {x: ['\xe9']}\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        load_space_file(tmp_path / "latin1.yaml")


def test_constraints_that_exclude_everything_say_so(tmp_path):
    space, _ = load_space_file(_write(tmp_path, {"knobs": {"x": [1, 2]}, "constraints": ["x > 5"]}))
    with pytest.raises(UsageError, match="no valid point"):
        space.size()


@pytest.mark.parametrize("name,text", [
    ("d.yaml", "knobs:\n  a: [1, 2]\n  a: [3, 4, 5]\n"),
    ("t.yaml", "knobs:\n  a: [1, 2]\nknobs:\n  b: [3]\n"),
    ("d.json", '{"knobs": {"a": [1, 2], "a": [3, 4, 5]}}'),
])
def test_a_key_given_twice_is_refused_not_silently_dropped(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=r"the key '(a|knobs)' is given twice in one mapping"):
        load_space_file(tmp_path / name)


def test_yaml_merge_keys_still_merge(tmp_path):
    (tmp_path / "m.yaml").write_text("knobs:\n  <<: {x: [1, 2]}\n  y: [1]\n")
    space, _ = load_space_file(tmp_path / "m.yaml")
    assert space.names == ["x", "y"] and space.values == [[1, 2], [1]]
