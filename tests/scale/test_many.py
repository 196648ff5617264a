"""Campaign files of `autotune tune many`, recipes, and `autotune worker` / `workers` (no Ray needed)."""

import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.drivers.scale import join_campaign, load_many, tune_many
from autotune.errors import UsageError

EXAMPLE = "example:pnpoly-rtx3090"


def _write(tmp_path, text, name="many.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,match", [
    ("- {kind: replay, cache: x, trails: 5}", r"no argument 'trails' \(did you mean 'trials'\?\)"),
    ("- {kind: kernels, name: gemm}", "unknown campaign kind 'kernels'"),
    ("- {cache: x}", "names no kind"),
    ("[]", "non-empty list"),
    ("- [1, 2]", "not a mapping"),
    ("{defaults: {}, campaign: []}", "unknown top-level keys"),
    ("- {kind: replay, cache: x, campaign: a}\n- {kind: replay, cache: y, campaign: a}", "same name"),
    ("- {kind: replay, cache: x, db: 'sqlite:///a.db', ray: local}", "no argument 'ray'"),
    ("- {kind: replay\n  cache", "not valid YAML"),
    ("- {kind: replay, cache: x}\n- {kind: replay, trials: 5}", "campaign 2: replay campaigns need 'cache'"),
    ("- {kind: kernel, target: cpu}", "kernel campaigns need 'name'"),
])
def test_bad_campaign_files_are_refused_before_anything_runs(tmp_path, text, match):
    with pytest.raises(UsageError, match=match):
        load_many(_write(tmp_path, text))


def test_defaults_apply_to_every_campaign_and_json_files_work(tmp_path):
    doc = {"defaults": {"trials": 7, "seed": 3}, "campaigns": [{"kind": "replay", "cache": EXAMPLE, "seed": 4},
                                                              {"kind": "replay", "cache": EXAMPLE, "campaign": "b"}]}
    entries = load_many(_write(tmp_path, json.dumps(doc), "many.json"))
    assert [e["args"]["trials"] for e in entries] == [7, 7] and [e["args"]["seed"] for e in entries] == [4, 3]
    assert entries[1]["campaign"] == "b" and "campaign" not in entries[1]["args"]


def test_tune_many_without_ray_runs_each_campaign_and_goes_on_after_a_failure(tmp_path, sqlite_url):
    entries = load_many(_write(tmp_path, f"""
- {{kind: replay, cache: "{EXAMPLE}", campaign: one, trials: 6}}
- {{kind: replay, cache: missing.json, campaign: broken}}
- {{kind: parallel, model: mlp-unity, cluster: dgx-a100-x1, campaign: two, trials: 3}}
"""))
    seen = []
    results = tune_many(entries, sqlite_url, on_done=seen.append)
    assert [r["campaign"] for r in results] == ["one", "broken", "two"] and seen == results
    assert results[0]["trials"] == 6 and results[0]["error"] is None
    assert results[1]["status"] == "failed" and "missing.json" in results[1]["error"]
    assert results[2]["status"] == "finished"
    db = open_database(sqlite_url)
    assert len(db.campaign_history(db.campaign("one").id)) == 6 and db.campaign("two").status == "finished"


def test_the_cli_exits_1_when_a_campaign_failed_and_prints_json(tmp_path, sqlite_url):
    spec = _write(tmp_path, f"- {{kind: replay, cache: '{EXAMPLE}', campaign: ok, trials: 4}}\n"
                            "- {kind: replay, cache: nope.json, campaign: bad}\n")
    r = CliRunner().invoke(app, ["tune", "many", str(spec), "--db", sqlite_url, "--json"])
    assert r.exit_code == 1, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["failed"] == 1 and [c["campaign"] for c in out["campaigns"]] == ["ok", "bad"]


def test_a_worker_joins_from_the_stored_recipe(tmp_path, sqlite_url):
    from autotune.drivers.replay import tune_replay

    first = tune_replay(EXAMPLE, trials=10, campaign="grow", db=sqlite_url, algorithm="random", cost_model=None)
    assert first.trials == 10
    recipe = open_database(sqlite_url).campaign("grow").options["recipe"]
    assert recipe == {"kind": "replay", "args": {
        "cache": EXAMPLE, "algorithm": "random", "cost_model": None, "trials": 10, "time_budget": None,
        "simulated_budget": None, "seed": 0, "batch": 8, "measure_delay": 0.0}}
    # the campaign is done: a worker joining it finds the budget met and stops at once
    out = join_campaign("grow", sqlite_url)
    assert out["trials"] == 10 and out["measured_here"] == 0
    r = CliRunner().invoke(app, ["workers", "--campaign", "grow", "--db", sqlite_url])
    assert r.exit_code == 0 and "no worker running" in r.output


def test_a_campaign_without_a_recipe_cannot_be_joined(sqlite_url):
    from autotune.campaign import Campaign
    from autotune.runners.replay import ReplayRunner
    from autotune.search_spaces.replay import ReplaySpace

    space = ReplaySpace(EXAMPLE)
    Campaign("scripted", space, "random", ReplayRunner(space.cache), open_database(sqlite_url), trials=3).run()
    with pytest.raises(UsageError, match="no recipe"):
        join_campaign("scripted", sqlite_url)
    r = CliRunner().invoke(app, ["worker", "--campaign", "nope", "--db", sqlite_url])
    assert r.exit_code == 2 and "unknown campaign 'nope'" in r.output
