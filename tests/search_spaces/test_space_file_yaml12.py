"""Space files read booleans and numbers as YAML 1.2 does, not as PyYAML's YAML 1.1: a knob's values reach a
program's command line as the user wrote them (search_spaces/space_file.py)."""

from __future__ import annotations

from autotune.search_spaces.space_file import load_space_file

TEXT = """\
knobs:
  mode: [on, off, yes, no, y, n]
  flag: [true, False]
  ints: [010, 0o10, 0x10, -3, +4, 1_000]
  floats: [1e3, 1.5, .5, -2.5e-1]
  clock: [1:30, 2:00]
default: {mode: on, flag: true, ints: 010, floats: 1e3, clock: 1:30}
"""


def test_yaml_1_1_booleans_octals_and_base_60_numbers_are_read_as_yaml_1_2_reads_them(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(TEXT)
    space, _ = load_space_file(path)
    values = dict(zip(space.names, space.values))
    assert values["mode"] == ["on", "off", "yes", "no", "y", "n"]
    assert values["flag"] == [True, False]
    assert values["ints"] == [10, 8, 16, -3, 4, 1000] and all(type(v) is int for v in values["ints"])
    assert values["floats"] == [1000.0, 1.5, 0.5, -0.25] and all(type(v) is float for v in values["floats"])
    assert values["clock"] == ["1:30", "2:00"]
    assert space.initial().payload == {"mode": "on", "flag": True, "ints": 10, "floats": 1000.0, "clock": "1:30"}
