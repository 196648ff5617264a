"""`autotune tune parallel` as a campaign: the baselines and seed layouts open it, the same name resumes it (to
the log of one uninterrupted run), Ctrl-C prints the command that resumes it, progress ends with a summary
line, and `autotune parallelize` is its alias. The search's results: test_parallel_cli.py.

Every test runs in its tmp_path, and names its database there with --db unless it checks the default."""

import json
import re


from autotune.cli.main import app
from autotune.drivers.parallel import strategy_space, warmup
from autotune.search_spaces.parallel.clusters import get_cluster
from autotune.search_spaces.parallel.models import get_model
from parallel_cli_helpers import in_tmp, last_json, run, runner  # noqa: F401 (in_tmp: the autouse fixture)



def test_progress_is_on_by_default_and_ends_with_a_summary_line():
    """Off a terminal no bar is drawn, but the summary line is written on stderr: after the text report,
    before the JSON line with --json (stdout keeps only the JSON); --no-progress writes nothing there."""
    r = run("-m", "rnnlm", "-c", "p100-4x4", "-n", 5, "--campaign", "p")
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    first = len(warmup(strategy_space(get_model("rnnlm"), get_cluster("p100-4x4"))))
    assert lines[-1].startswith(f"tune parallel: {first + 5} strategies simulated in ") and "ms/iteration" in lines[-1]
    assert r.stderr.strip().splitlines() == [lines[-1]]
    r = run("-m", "rnnlm", "-c", "p100-4x4", "-n", 5, "--campaign", "p", "--json", command=("parallelize",))
    out = last_json(r)
    summary = r.stderr.strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith("parallelize: 0 strategies simulated")  # resumed: done
    assert f"{out['best']['iteration_s'] * 1e3:.3f} ms/iteration ({out['best']['source']})" in summary[0]
    assert r.output.strip().splitlines()[-1] == r.stdout.strip()  # merged, the JSON line is still the last
    r = run("-m", "rnnlm", "-c", "p100-4x4", "-n", 5, "--campaign", "q", "--json", "--no-progress")
    assert last_json(r)["simulations"] == first + 5 and r.stderr == ""


def _trial_keys(db: str, campaign: str) -> list[str]:
    r = runner.invoke(app, ["trials", "--campaign", campaign, "--db", db, "--format", "json"])
    assert r.exit_code == 0, r.output
    return [t["candidate_key"] for t in sorted(json.loads(r.stdout), key=lambda t: t["id"])]


def test_baselines_open_the_campaign_and_a_resumed_search_is_the_uninterrupted_one(tmp_path):
    from autotune.search_spaces.parallel.space import StrategySpace

    db, ref = f"sqlite:///{tmp_path / 'p.db'}", f"sqlite:///{tmp_path / 'ref.db'}"
    args = ("--model", "rnnlm", "--cluster", "p100-4x4", "--campaign", "rnn", "--json")
    first = last_json(run(*args, "--trials", 20, "--db", db))
    opening = warmup(strategy_space(get_model("rnnlm"), get_cluster("p100-4x4")))
    n = len(opening)
    assert first["campaign"] == "rnn" and first["simulations"] == n + 20 and n > 3
    keys = _trial_keys(db, "rnn")
    assert keys[:3] == [c.key for c in StrategySpace(get_model("rnnlm"), get_cluster("p100-4x4")).baselines().values()]
    assert keys[:n] == [c.key for c in opening.values()]  # the baselines (data parallelism first), the seed layouts
    assert len(keys) == len(set(keys)) == n + 20  # then 20 new strategies
    # the same name resumes: the budget is spent, so nothing more is simulated
    again = last_json(run(*args, "--trials", 20, "--db", db))
    assert again["simulations"] == 0 and again["best"] == first["best"] and _trial_keys(db, "rnn") == keys
    # a larger budget continues the same search: the log equals that of one uninterrupted run
    longer = last_json(run(*args, "--trials", 40, "--db", db))
    straight = last_json(run(*args, "--trials", 40, "--db", ref))
    assert longer["simulations"] == 20 and straight["simulations"] == n + 40
    assert _trial_keys(db, "rnn") == _trial_keys(ref, "rnn") and longer["best"] == straight["best"]


def test_parallelize_is_an_alias_and_the_old_budget_options_still_work():
    r = run("-m", "rnnlm", "-c", "p100-4x4", "--budget", 5, "--time-limit", 60, "--campaign", "old", "--json",
            command=("parallelize",))
    old = last_json(r)
    assert "--budget is deprecated; use --trials" in r.stderr and "--time-limit is deprecated" in r.stderr
    new = last_json(run("-m", "rnnlm", "-c", "p100-4x4", "--trials", 5, "--campaign", "new", "--json",
                        "--db", "sqlite:///other.db"))  # its own database: no trials of the first run to reuse
    first = len(warmup(strategy_space(get_model("rnnlm"), get_cluster("p100-4x4"))))
    assert old["best"] == new["best"] and old["simulations"] == new["simulations"] == first + 5
    help_text = run("--help", command=("parallelize",)).stdout
    assert "Alias of `autotune tune parallel`" in help_text and "--budget" not in help_text


def test_ctrl_c_prints_a_command_that_resumes_the_campaign(tmp_path, monkeypatch):
    """Ctrl-C while strategies are simulated: exit 130 and a `tune parallel` command that, run as printed,
    resumes the same campaign to its budget and writes the strategy file the first command asked for."""
    import shlex

    from autotune.db import open_database
    from autotune.runners.simulator import SimulatorRunner
    from autotune.testing.fakes import interrupting

    Interrupting = interrupting(SimulatorRunner, 9)  # Ctrl-C at the 10th simulation (a fake: for this test only)

    url = f"sqlite:///{tmp_path / 'p.db'}"
    strategy = tmp_path / "best strategy.json"
    args = ["tune", "parallel", "--model", "rnnlm", "--cluster", "p100-4x4", "--batch", "32", "--trials", "20",
            "--seed", "3", "--option", "t0=0.2", "-o", str(strategy), "--db", url, "--no-progress"]
    with monkeypatch.context() as m:
        m.setattr("autotune.drivers.parallel.SimulatorRunner", Interrupting)
        r = runner.invoke(app, args)
    assert r.exit_code == 130, r.output
    line = [x for x in r.stderr.splitlines() if x.startswith("interrupted: ")][-1]
    stored = int(re.match(r"interrupted: (\d+) trials stored; resume with: autotune tune parallel ", line).group(1))
    command = shlex.split(line.split("resume with: ", 1)[1])
    name = command[command.index("--campaign") + 1]
    assert command[command.index("-o") + 1] == str(strategy) and "t0=0.2" in command and "--seed" in command
    db = open_database(url)
    assert db.campaign(name).status == "interrupted" and not strategy.exists()
    first = len(warmup(strategy_space(get_model("rnnlm", 32), get_cluster("p100-4x4"))))
    assert 0 < stored < first + 20 and len(_trial_keys(url, name)) == stored
    again = runner.invoke(app, command[1:] + ["--json"])
    out = last_json(again)
    assert out["campaign"] == name and out["simulations"] == first + 20 - stored  # the rest of the same campaign
    assert db.campaign(name).status == "finished" and len(_trial_keys(url, name)) == first + 20
    assert json.loads(strategy.read_text()) == out["best"]["strategy"]
    db.close()
