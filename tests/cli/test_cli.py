import gzip
import importlib.util
import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database, queries

runner = CliRunner()
EXAMPLE = "example:pnpoly-rtx3090"


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_tune_replay_json_and_queries(url, tmp_path):
    r = run("tune", "replay", "--cache", EXAMPLE, "--trials", 60, "--db", url, "--json", "--no-progress")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out) >= {"campaign", "task", "device", "trials", "best_cost", "best_config", "simulated_s", "wall_s"}
    assert out["trials"] == 60 and out["device"] == "NVIDIA GeForce RTX 3090" and out["simulated_s"] > 0
    r = run("trials", "--top", 5, "--format", "json", "--db", url)
    top = json.loads(r.stdout)
    assert len(top) == 5 and top[0]["cost"] == pytest.approx(out["best_cost"]) and top[0]["config"] == out["best_config"]
    assert [t["cost"] for t in top] == sorted(t["cost"] for t in top)
    r = run("trials", "--top", 5, "--db", url)
    assert r.exit_code == 0 and "OK" in r.stdout
    r = run("campaigns", "--format", "csv", "--db", url)
    assert out["campaign"] in r.stdout
    r = run("best", "--db", url, "--format", "json")
    assert json.loads(r.stdout)[0]["config"] == out["best_config"]
    r = run("plot", "convergence", "--campaign", out["campaign"], "-o", tmp_path / "c.png", "--db", url)
    assert r.exit_code == 0 and (tmp_path / "c.png").stat().st_size > 1000
    r = run("tune", "replay", "--cache", EXAMPLE, "--trials", 80, "--db", url, "--json", "--no-progress")
    assert json.loads(r.stdout.strip().splitlines()[-1])["trials"] == 80  # same name: resumed


def test_export_import_round_trip(url, tmp_path):
    run("import-kt", EXAMPLE, "--db", url)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert run("export", "-o", a, "--status", "OK", "--db", url).exit_code == 0
    other = f"sqlite:///{tmp_path / 'o.db'}"
    r = run("import", a, "--db", other)
    assert r.exit_code == 0 and "3774 new" in r.stdout
    run("export", "-o", b, "--db", other)
    assert a.read_text() == b.read_text()


def _bad_cache(tmp_path):
    p = tmp_path / "bad.json.gz"
    with gzip.open(p, "wt") as f:
        f.write("{not json")
    return p


def _wrong_cache(tmp_path):
    p = tmp_path / "wrong.json"
    p.write_text(json.dumps({"cache": {}}))
    return p


@pytest.mark.parametrize("args,needle", [
    (["tune", "replay", "--cache", "missing.json"], "does not exist"),
    (["tune", "replay", "--cache", "example:nope"], "unknown example cache"),
    (["tune", "replay", "--cache", "BAD"], "not readable JSON"),
    (["tune", "replay", "--cache", "WRONG"], "not a Kernel Tuner cache"),
    (["tune", "replay", "--cache", EXAMPLE, "--algorithm", "nope"], "unknown algorithm 'nope'; valid:"),
    (["tune", "replay", "--cache", EXAMPLE, "--trials", "0"], "must be a positive number"),
    (["tune", "replay", "--cache", EXAMPLE, "--time-budget", "-1"], "must be a positive number"),
    (["tune", "replay", "--cache", EXAMPLE, "--db", "mysql://x/y"], "unsupported backend"),
    (["tune", "replay", "--cache", EXAMPLE, "--db", "garbage"], "malformed"),
    (["tune", "replay", "--cache", EXAMPLE, "--db", "postgresql+psycopg://x@127.0.0.1:1/y"],
     "cannot open database" if importlib.util.find_spec("psycopg") else "needs a driver that is not installed"),
    (["trials", "--campaign", "nope"], "unknown campaign 'nope'"),
    (["trials", "--status", "weird"], "unknown status"),
    (["plot", "convergence", "--campaign", "nope", "-o", "x.png"], "unknown campaign"),
    (["import", "missing.jsonl"], "does not exist"),
])
def test_bad_input_exits_2_with_one_sentence_and_no_campaign(args, needle, url, tmp_path):
    args = [str(_bad_cache(tmp_path)) if a == "BAD" else str(_wrong_cache(tmp_path)) if a == "WRONG" else a for a in args]
    if "--db" not in args:
        args += ["--db", url]
    open_database(url).close()  # the query commands read an existing database
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1
    if args[-1] == url:
        assert queries.campaigns(open_database(url)).empty


@pytest.mark.parametrize("args", [["campaigns"], ["trials"], ["best"], ["models"], ["export", "-o", "x.jsonl"],
                                  ["campaigns", "rename", "a", "b"]])
def test_read_commands_refuse_a_missing_database_file_and_create_none(args, tmp_path):
    missing = tmp_path / "typo.db"
    r = run(*args, "--db", f"sqlite:///{missing}")
    assert r.exit_code == 2, r.output
    assert "no database file" in r.stderr and "Traceback" not in r.output
    assert not missing.exists()


@pytest.mark.parametrize("args", [["campaigns"], ["tune", "replay", "--cache", EXAMPLE, "--trials", 2, "--no-progress"]])
def test_a_file_that_is_not_a_database_is_one_line(args, tmp_path):
    other = tmp_path / "notes.db"
    other.write_text("not a database\n")
    r = run(*args, "--db", f"sqlite:///{other}")
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == f"error: cannot open database sqlite:///{other}: file is not a database"
    assert other.read_text() == "not a database\n"


def test_every_command_has_help():
    for cmd in (["tune", "replay"], ["campaigns"], ["trials"], ["best"], ["import-kt"], ["export"], ["import"],
                ["plot", "convergence"], ["algorithms"], ["db", "upgrade"]):
        r = run(*cmd, "--help")
        assert r.exit_code == 0 and "Usage" in r.output, cmd
    assert "random" in run("algorithms").stdout


def test_command_lists_give_each_command_its_first_paragraph_unbroken():
    """The command lists of --help (the top level's, a group's) join a docstring's lines: a break there
    cut sentences mid-line, whatever the terminal's width."""
    top = runner.invoke(app, ["--help"], env={"COLUMNS": "300"}).output
    assert "status and cost: every trial a --campaign evaluated (with those it looked up" in top
    assert "(in the database without a trial of it, or a GPU of the known table)" in top
    tune = runner.invoke(app, ["tune", "--help"], env={"COLUMNS": "300"}).output
    assert "Run many campaigns (one per operator shape, one task on several GPUs, ...); with --ray" in tune


def test_a_commands_own_help_joins_each_paragraphs_lines():
    """A command's --help gives each paragraph of its docstring as running text, wrapped to the terminal:
    the docstring's own line breaks (wrapped for the source) would cut its sentences mid-line."""
    text = runner.invoke(app, ["import", "--help"], env={"COLUMNS": "300"}).output
    assert "imports nothing (no new database file). One line says how many trials were read" in text
    text = runner.invoke(app, ["tune", "parallel", "--help"], env={"COLUMNS": "300"}).output
    assert "the baselines (data parallelism, Megatron, model parallelism) are its first trials" in text


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    r = run("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"autotune {version('autotune')}"


def test_cost_model_campaign_stores_models_and_predict_ranks(url):
    r = run("tune", "replay", "--cache", EXAMPLE, "--algorithm", "mcmc", "--cost-model", "xgb", "--trials", 40,
            "--db", url, "--json", "--no-progress")
    assert r.exit_code == 0, r.output
    name = json.loads(r.stdout.strip().splitlines()[-1])["campaign"]
    assert name.endswith("mcmc+xgb-seed0")
    models = json.loads(run("models", "--format", "json", "--db", url).stdout)
    assert models and all(m["campaign"] == name and m["model"] == "xgb" for m in models)
    # every retrain keeps its row; only the latest keeps its weights
    assert [m["bytes"] > 0 for m in models] == [False] * (len(models) - 1) + [True]
    latest = json.loads(run("models", "--latest", "--format", "json", "--db", url).stdout)
    assert [m["id"] for m in latest] == [models[-1]["id"]]
    assert models[-1]["n_samples"] > models[0]["n_samples"] > 0
    r = run("predict", "--campaign", name, "--top", 5, "--format", "json", "--db", url)
    ranked = json.loads(r.stdout)
    assert len(ranked) == 5 and [x["score"] for x in ranked] == sorted((x["score"] for x in ranked), reverse=True)
    # the top of the whole space also wins when given again among others (configurations in one leaf of
    # every tree tie: then either may come first, with the same score)
    given = [json.dumps(ranked[4]["config"]), json.dumps(ranked[0]["config"])]
    r = run("predict", "--model", models[-1]["id"], "--config", given[0], "--config", given[1], "--format", "json", "--db", url)
    again = json.loads(r.stdout)
    assert again[0]["score"] == pytest.approx(ranked[0]["score"]) and again[0]["score"] >= again[1]["score"]
    assert again[0]["config"] == ranked[0]["config"] or again[1]["score"] == pytest.approx(again[0]["score"])
    r = run("predict", "--campaign", name.upper(), "--top", 1, "--config", given[0], "--config", given[1],
            "--format", "JSON", "--db", url)  # --top cuts given configurations too; names and formats in any case
    assert r.exit_code == 0 and json.loads(r.stdout) == again[:1], r.output
    r = run("predict", "--campaign", name, "--config", '{"between_method": 99}', "--db", url)
    assert r.exit_code == 2 and "does not match the knobs" in r.stderr
    r = run("tune", "replay", "--cache", EXAMPLE, "--cost-model", "nope", "--db", url)
    assert r.exit_code == 2 and "unknown cost model 'nope'" in r.stderr


def test_algorithms_lists_every_option_of_the_model_guided_search():
    from autotune.algorithms.model_guided import ModelGuided

    out = CliRunner().invoke(app, ["algorithms"], env={"COLUMNS": "400"}).stdout
    missing = [k for k in ModelGuided.options if f"{k}=" not in out]
    assert not missing, missing


def test_summary_shows_keys_and_names_that_look_like_markup_on_one_line_each(capsys):
    from types import SimpleNamespace

    from autotune.cli.common import report

    payload = {"layout": "[bold]", **{f"knob_{i}": i for i in range(20)}}  # longer than 80 columns
    best = SimpleNamespace(cost=0.5, candidate=SimpleNamespace(payload=payload))
    result = SimpleNamespace(
        summary=dict, campaign="c[red]", status="finished", resumed=False, trials=3, reused=0, errors=0,
        task=SimpleNamespace(name="gemm", key="abcdef0123456789"), device=SimpleNamespace(name="cpu[x]"),
        best=best, best_including_reused=None, simulated_s=0.0, wall_s=0.1)
    report(result, as_json=False)
    out = capsys.readouterr().out
    assert "campaign c[red] (finished)" in out
    assert "task gemm [abcdef0123456789] on cpu[x]" in out
    assert f"best 500 ms  config {json.dumps(payload)}\n" in out  # one line, however long, when piped
    # a minimized function's value has no unit, as in the tables
    report(SimpleNamespace(**{**vars(result), "task": SimpleNamespace(name="f", key="0" * 16, kind="function")}),
           as_json=False)
    assert f"best 0.5  config {json.dumps(payload)}\n" in capsys.readouterr().out
