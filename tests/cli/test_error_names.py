"""An error of the library names the caller's input as the caller gave it: the Python API's keyword
argument (``microbatches``) when a script called a function, the flag (``--microbatches``) when the
command line did. The message carries both (autotune.errors.argument); ``str(error)`` shows the
first, the command line prints the second."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import autotune
from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.errors import MissingDependencyError, UsageError, argument

ROOT = Path(__file__).resolve().parents[2]
CACHE = "example:pnpoly-rtx3090"
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_an_argument_is_shown_by_its_api_name_and_on_the_command_line_by_its_flag():
    err = UsageError(f"{argument('microbatches')} must be >= 1; use {argument('device=' + repr('cpu'), '--device cpu')}")
    assert str(err) == "microbatches must be >= 1; use device='cpu'"
    assert err.command_line_message() == "--microbatches must be >= 1; use --device cpu"
    assert repr(err) == 'UsageError("microbatches must be >= 1; use device=\'cpu\'")'
    again = pickle.loads(pickle.dumps(err))  # as a Ray task hands it back
    assert str(again) == str(err) and again.command_line_message() == err.command_line_message()
    missing = MissingDependencyError(f"{argument('ray')} needs the package 'ray'")
    assert str(missing) == "ray needs the package 'ray'" and missing.command_line_message().startswith("--ray needs")
    plain = UsageError("no argument in it")
    assert str(plain) == plain.command_line_message() == "no argument in it"


def test_an_argument_holding_the_markers_is_shown_without_them():
    """An argument's text can be the user's (an option's value): a marker character in it is replaced, so
    neither rendering shows a raw marker or breaks."""
    err = UsageError(f"{argument('x=a' + chr(3) + 'b', '--option x=a' + chr(2) + 'b')} is not a number")
    for shown in (str(err), err.command_line_message()):
        assert not set(shown) & {chr(2), chr(3), chr(31)}, repr(shown)
    assert str(err) == "x=a?b is not a number" and err.command_line_message() == "--option x=a?b is not a number"


def _api_error(call) -> UsageError:
    with pytest.raises(UsageError) as err:
        call()
    return err.value


@pytest.fixture
def replayed(tmp_path):
    url = f"sqlite:///{tmp_path / 'e.db'}"
    autotune.tune_replay(CACHE, "random", None, trials=3, campaign="c", db=url)
    return url


def test_api_errors_name_the_keyword_arguments(replayed, tmp_path):
    url = replayed
    cases = [
        (lambda: autotune.tune_replay(CACHE, trials=2, options={"population": 8}, transfer_from="auto", db=url),
         "algorithm options (options) apply to the ordinary search, not to a warm start (transfer_from)"),
        (lambda: autotune.tune_replay(CACHE, trials=2, ray_actors=2, db=url),
         "ray_actors needs ray (the address of the Ray cluster to measure on)"),
        (lambda: autotune.tune_replay(CACHE, "mcmc", None, trials=2, campaign="c", db=url),
         "start it afresh (fresh=True), or choose another campaign name"),
        (lambda: autotune.tune_replay(CACHE, "evolutionary", None, trials=2, db=url, options={"population": "lots"}),
         "options['population']='lots': population must be an integer (default "),
        (lambda: autotune.parallelize("rnnlm", "p100-4x4", microbatches=0, db=url), "microbatches must be >= 1, got 0"),
        (lambda: autotune.tune_template("gemm", "8,8,8", target="cuda", threads=2, db=url),
         "threads applies to target='cpu' only"),
        (lambda: autotune.tune_command([], tmp_path / "space.yaml", db=url),
         "the command is empty; give argv as a list of the program and its arguments"),
        (lambda: queries.trials(open_database(url), top=0), "top must be a positive number of trials, not 0"),
        (lambda: open_database(url).load_cost_model(), "exactly one of model_id or campaign"),
    ]
    for call, needle in cases:
        err = _api_error(call)
        assert needle in str(err), (needle, str(err))
        assert not FLAG.search(str(err).replace("'--block'", "")), str(err)  # no flag (the example's own argv aside)


@pytest.mark.parametrize("args,needle", [
    (["tune", "replay", "--cache", CACHE, "--trials", 2, "--option", "population=8", "--transfer-from", "auto"],
     "algorithm options (--option) apply to the ordinary search, not to a warm start (--transfer-from)"),
    (["tune", "replay", "--cache", CACHE, "--trials", 2, "--ray-actors", 2], "--ray-actors needs --ray"),
    (["tune", "replay", "--cache", CACHE, "--trials", 2, "-a", "mcmc", "--cost-model", "none", "--campaign", "c"],
     "start it afresh (--fresh), or choose another --campaign name"),
    (["tune", "replay", "--cache", CACHE, "--trials", 2, "-a", "evolutionary", "--cost-model", "none", "--option",
      "population=lots"], "--option population=lots: population must be an integer"),
    (["tune", "parallel", "--model", "rnnlm", "--cluster", "p100-4x4", "--microbatches", 0],
     "--microbatches must be >= 1, got 0"),
    (["tune", "kernel", "gemm", "--shape", "8,8,8", "--target", "cuda", "--threads", 2],
     "--threads applies to --target cpu only"),
    (["trials", "--top", 0], "--top must be a positive number of trials, not 0"),
])
def test_the_command_line_names_the_flags(replayed, args, needle):
    r = run(*args, "--db", replayed)
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.output, r.output
    assert "\x02" not in r.output and "\x1f" not in r.output


def test_the_json_error_of_a_command_names_the_flag_too(replayed):
    import json

    r = run("tune", "replay", "--cache", CACHE, "--trials", 2, "--ray-actors", 2, "--json", "--db", replayed)
    assert r.exit_code == 2 and json.loads(r.stdout.splitlines()[-1])["error"].startswith("--ray-actors needs --ray")


# Messages of the library that name a flag on purpose: parsers of the command line's own syntax, and a
# command to run, which is the remedy whoever called.
ON_PURPOSE = ("is not KEY=VALUE", "give NAME=DIMS", "autotune db upgrade", "autotune models --pin",
              "pip install --force-reinstall")


def _flag_literals(node: ast.AST):
    """The string constants under ``node`` that name a flag, leaving out argument(...) calls (both names)."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "argument":
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and FLAG.search(node.value):
        yield node.value
    for child in ast.iter_child_nodes(node):
        yield from _flag_literals(child)


def test_no_library_error_names_a_flag_but_through_argument():
    """Below the command line, an error's message names an input with argument(...), never a bare flag."""
    found = []
    for folder in ("autotune", "db", "search_spaces", "runners", "cost_models"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.relative_to(ROOT).parts[:2] == ("autotune", "cli"):
                continue
            source = path.read_text()
            for node in ast.walk(ast.parse(source, str(path))):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    flags = list(_flag_literals(node.exc))
                    if flags and not any(p in ast.get_source_segment(source, node) for p in ON_PURPOSE):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {flags}")
    assert found == [], "\n".join(found)
