"""Fuzzing the space-file loader: random and hostile YAML/JSON documents either load to a KnobSpace
or end in a UsageError (one sentence), never another exception; `autotune space check` on them
exits 0 or 2 without a traceback."""

from __future__ import annotations

import copy
import json
import math

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.search_spaces.space_file import TOP_LEVEL, Objective, load_space_file

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])

leaf = (st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(max_size=12) | st.sampled_from(["", "x", "x > 0", "(", "time: ([0-9.]+)", "[", "range", "pow2",
                                                 "__import__('os')", "1e-3", "a" * 300]))
value = st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(
    st.text(max_size=6) | st.sampled_from(["range", "pow2", "step", "regex", "scale", "wall_time", "x", "y"]),
    c, max_size=4), max_leaves=16)
knob_spec = (st.lists(st.integers(-5, 100), min_size=1, max_size=5, unique=True)  # mostly valid
             | st.lists(st.sampled_from(["a", "b", 1, 2.5, True]), min_size=1, max_size=3, unique_by=repr)
             | st.lists(leaf, max_size=5)
             | st.fixed_dictionaries({"range": st.lists(st.integers(-50, 50) | leaf, max_size=3)},
                                     optional={"step": st.integers(-3, 5) | leaf})
             | st.fixed_dictionaries({"pow2": st.lists(st.integers(-4, 2**20) | leaf, max_size=3)})
             | value)
document = st.fixed_dictionaries(
    {"knobs": st.dictionaries(st.sampled_from(["x", "y", "x", "y", "block", "2x", "if", ""]) | st.text(max_size=5),
                              knob_spec, max_size=3)},
    optional={
        "name": leaf,
        "constraints": st.lists(st.sampled_from(["x > 0", "x * y <= 64", "z < 1", "x / 0 > 1", "x ** 99999 > 1",
                                                  "(", "x if y else 1"]) | leaf, max_size=3) | leaf,
        "default": st.dictionaries(st.sampled_from(["x", "y", "block"]), leaf, max_size=3) | leaf,
        "objective": st.dictionaries(st.sampled_from(["regex", "scale", "wall_time", "regexp"]),
                                     leaf | st.sampled_from(["(a)(b)", "[0-9", "t=(\\d+)"]), max_size=3) | leaf,
    })
document = document | st.builds(lambda d, k: {**d, "knob": k}, document, value)  # an unknown top-level key
good_document = st.fixed_dictionaries(  # valid or nearly so, so that the success path is fuzzed too
    {"knobs": st.fixed_dictionaries({"x": st.lists(st.integers(-5, 100), min_size=1, max_size=6, unique=True)},
                                    optional={"y": knob_spec})},
    optional={"constraints": st.lists(st.sampled_from(["x > 0", "x * y <= 64", "x + y != 3", "x % 2 == 0"]),
                                      max_size=2),
              "objective": st.sampled_from([{"wall_time": True}, {"regex": "t=([0-9.]+)", "scale": 0.5},
                                            {"regex": "t=([0-9.]+)", "scale": "1e-3"}]),
              "name": st.text(max_size=20)})
document = good_document | document

HOSTILE_TEXT = [
    "", "\0", "---\n...\n", "!!python/object/apply:os.system ['true']", "knobs: !!binary 'bad base64'",
    "a: &a [*a]", "knobs: {x: &v [1, 2]}\nconstraints: *v", "[" * 5000, "{" * 5000, "knobs:\n" + "  " * 2000 + "x",
    "knobs: {x: [2001-01-01]}", "knobs: {x: !!timestamp 2001-13-45}", "knobs: {x: [1, 2]}\n" * 3, "\ufeffknobs: {x: [1]}",
    "knobs: {x: {range: [0, 99999999999]}}", "knobs: {x: .nan}", "knobs: {x: [.inf]}", "%YAML 9.9\n---\nx",
    "knobs: {? [1, 2] : [1]}", "knobs: {x: [1]}\nobjective: {regex: '(?P<x>' }",
]


def _check(path) -> None:
    try:
        space, objective = load_space_file(path)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc), str(exc)
        return
    assert isinstance(space, KnobSpace) and space.names
    assert objective is None or isinstance(objective, Objective)
    combinations = math.prod(len(v) for v in space.values)
    if combinations <= 5000:
        try:
            size = space.size()
        except UsageError:  # no valid point, a constraint that cannot be evaluated
            return
        assert 1 <= size <= combinations


@FAST
@given(doc=document, suffix=st.sampled_from([".yaml", ".json", ".yml"]), data=st.data())
def test_generated_documents_load_or_fail_with_a_usage_error(tmp_path, doc, suffix, data):
    try:
        text = json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc, sort_keys=False)
    except ValueError:  # NaN in JSON is written by json.dumps; nothing else fails here
        text = str(doc)
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(st.sampled_from(["", "\n  - ", ": {", "\t", "'", "*x", "&a"])) + text[cut:]
    path = tmp_path / f"space{suffix}"
    path.write_text(text)
    _check(path)


@FAST
@given(text=st.text(max_size=300) | st.sampled_from(HOSTILE_TEXT), suffix=st.sampled_from([".yaml", ".json"]))
def test_random_and_hostile_text(tmp_path, text, suffix):
    path = tmp_path / f"space{suffix}"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    _check(path)


VALID = {"name": "v", "knobs": {"x": [1, 2, 4], "y": {"range": [0, 3]}}, "constraints": ["x + y < 6"],
         "default": {"x": 1, "y": 0}, "objective": {"regex": "t=([0-9.]+)", "scale": 0.001}}


@FAST
@given(data=st.data())
def test_one_field_of_a_valid_file_replaced(tmp_path, data):
    doc = copy.deepcopy(VALID)
    where = data.draw(st.sampled_from(["top", "knobs", "objective", "default"]))
    target = doc if where == "top" else doc[where]
    field = data.draw(st.sampled_from(sorted(target) + ["extra", *TOP_LEVEL]))
    if data.draw(st.booleans()):
        target.pop(field, None)
    else:
        target[field] = data.draw(value)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    _check(path)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=document)
def test_space_check_command_exits_0_or_2(tmp_path, doc):
    """Exit 0 with the size for a file the loader accepts, 2 with one sentence for one it refuses."""
    from autotune.cli.main import app

    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        space, _ = load_space_file(path)
        if math.prod(len(v) for v in space.values) > 5000:
            return  # enumerating it is slow, not wrong
        expected = space.size()
    except UsageError:
        expected = None
    r = CliRunner().invoke(app, ["space", "check", str(path), "--json"])
    assert "Traceback" not in r.output and not (r.exception and not isinstance(r.exception, SystemExit))
    if expected is None:
        assert r.exit_code == 2 and r.output.startswith("error: "), r.output[-800:]
    else:
        assert r.exit_code == 0 and json.loads(r.output.splitlines()[-1])["size"] == expected, r.output[-800:]
