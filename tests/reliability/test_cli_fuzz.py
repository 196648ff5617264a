"""Every command of the CLI, fed malformed values: exit status 0 or 2, one sentence and no traceback.

Commands are found by walking the typer application, so a new command is fuzzed without a change
here. Each example gives one to three options (and every required argument) values drawn from a list
of hostile strings; commands that tune get a budget of one trial so an accidentally valid call stays
cheap. Two commands are left out, with the reason: `rules generate` (a valid call synthesises rules
for minutes) and `tune kernel` (a valid call compiles and times kernels); their bad input is tested in
tests/cli.
"""

from __future__ import annotations

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autotune.cli.main import app

LEFT_OUT = {("rules", "generate"), ("tune", "kernel")}
HOSTILE = ["", "-1", "0", "nan", "inf", "-inf", "1e400", "abc", "{bad json", "[1, 2]", "/nonexistent/dir/x.png",
           "x" * 3000, "*/ #define X", "../../etc/passwd", "sqlite:///", "postgresql+psycopg://nobody@127.0.0.1:1/x",
           "9" * 5000, "example:nope", "OK; DROP TABLE trials"]


def _commands():
    def walk(c, path=()):
        subs = getattr(c, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, path + (name,))
        else:
            yield path, c

    return [(path, c) for path, c in walk(typer.main.get_command(app)) if path not in LEFT_OUT]


COMMANDS = _commands()


def test_every_command_is_fuzzed_or_left_out_with_a_reason():
    names = {p for p, _ in COMMANDS} | LEFT_OUT
    assert ("tune", "replay") in names and ("trials",) in names and len(names) >= 15


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_command_with_hostile_values(tmp_path, monkeypatch, path, command, data):
    monkeypatch.chdir(tmp_path)  # outputs named by hostile values land here, never in the working tree
    params = [p for p in command.params if not getattr(p, "hidden", False) and p.name not in ("db", "help")]
    options = [p for p in params if getattr(p, "opts", None) and p.opts[0].startswith("-")]
    args = list(path)
    for p in params:
        if p.required:
            value = data.draw(st.sampled_from(HOSTILE))
            args += [value] if not p.opts[0].startswith("-") else [p.opts[0], value]
    chosen = data.draw(st.lists(st.sampled_from(options), max_size=3, unique_by=lambda p: p.name)) if options else []
    for p in chosen:
        if p.required:
            continue
        if getattr(p, "is_flag", False):
            args.append(p.opts[0])
        else:
            args += [p.opts[0], data.draw(st.sampled_from(HOSTILE))]
    names = {p.name for p in params}
    if "trials" in names and "trials" not in {p.name for p in chosen}:
        args += ["--trials", "1"]
    if any(p.name == "db" for p in command.params):
        args += ["--db", f"sqlite:///{tmp_path / 'fuzz.db'}"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code in (0, 2), (args, r.output[-800:], repr(r.exception))
    assert "Traceback" not in r.output, (args, r.output[-800:])
    if r.exit_code == 2 and r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError((args, repr(r.exception)))
