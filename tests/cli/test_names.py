"""Unknown campaign, task and device names get a clear error with the closest stored names, never a
silent guess or an empty table; a case-only difference and a unique key prefix resolve silently."""

from __future__ import annotations

import json
import pickle

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.db.logs import import_kt
from autotune.db.names import close_matches, resolve, resolve_name
from autotune.errors import UsageError
from autotune.testing.caches import NAMES, ampere_time, import_two_gpus, write_cache

cli = CliRunner()


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


def test_resolve_name_exact_case_and_key_prefix():
    known = ["NVIDIA GeForce RTX 3090", "NVIDIA TITAN RTX"]
    keys = ["f06d8c92aa11bb22", "5c56192e33445566"]
    assert resolve_name("device", "NVIDIA TITAN RTX", known, keys) == "NVIDIA TITAN RTX"
    assert resolve_name("device", "nvidia titan rtx", known, keys) == "NVIDIA TITAN RTX"  # case only: silent
    assert resolve_name("device", "f06d8c92", known, keys) == "f06d8c92aa11bb22"  # the 8 characters tables show
    assert resolve_name("device", "5c56192e33445566", known, keys) == "5c56192e33445566"
    with pytest.raises(UsageError, match=r"^unknown device 'rtx 3090'; closest: NVIDIA GeForce RTX 3090$"):
        resolve_name("device", "rtx 3090", known, keys)
    with pytest.raises(UsageError, match="ambiguous"):
        resolve_name("campaign", "run", ["Run", "RUN"])
    with pytest.raises(UsageError, match="matches several"):
        resolve_name("task", "abcdef", ["t"], ["abcdef01", "abcdef02"])
    with pytest.raises(UsageError, match="unknown task 'f06d'"):  # too short to be taken as a key prefix
        resolve_name("task", "f06d", ["t"], ["f06d8c92aa11bb22"])
    with pytest.raises(UsageError, match=r"unknown campaign 'zzz'; campaigns in the database: a, b$"):
        resolve_name("campaign", "zzz", ["b", "a"])
    with pytest.raises(UsageError, match="there are no devices in the database yet"):
        resolve_name("device", "x", [])


def test_close_matches_ignore_case_and_spacing_and_rank_containment_first():
    known = ["NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A10", "NVIDIA TITAN RTX", "Tesla T4"]
    got = close_matches("NVIDIA A100", known)
    assert got[:2] == ["NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-80GB"] and "Tesla T4" not in got
    assert close_matches("titan_rtx", known) == ["NVIDIA TITAN RTX"]
    assert close_matches("something else entirely", known) == []


@pytest.fixture
def recorded(tmp_path):
    """A TITAN RTX and an RTX 3090 measured toy_kernel; an A100 measured another kernel only."""
    url = f"sqlite:///{tmp_path / 'n.db'}"
    db = open_database(url)
    task = import_two_gpus(db, tmp_path)
    import_kt(db, write_cache(tmp_path / "a100.json.gz", "NVIDIA A100-PCIE-40GB", ampere_time, kernel="other_kernel"))
    db.close()
    assert run("tune", "replay", "--cache", tmp_path / "r3090.json.gz", "--trials", 4, "--algorithm", "random",
               "--cost-model", "none", "--campaign", "toy-3090-random", "--db", url, "--no-progress").exit_code == 0
    return url, task


@pytest.mark.parametrize("args,needle", [
    (["best", "--device", "NVIDIA A1000", "--task", "toy_kernel"],
     "unknown device 'NVIDIA A1000'; closest: NVIDIA A100-PCIE-40GB"),
    (["best", "--device", "NVIDIA A1000"], "unknown device 'NVIDIA A1000'; closest: NVIDIA A100-PCIE-40GB"),
    (["trials", "--device", "rtx 3090"], "unknown device 'rtx 3090'; closest: NVIDIA GeForce RTX 3090"),
    (["trials", "--task", "toy_kernl"], "unknown task 'toy_kernl'; closest: toy_kernel"),
    (["trials", "--campaign", "toy-3090-randon"], "unknown campaign 'toy-3090-randon'; closest: toy-3090-random"),
    (["best", "--task", "toy-kernel2"], "unknown task 'toy-kernel2'; closest: toy_kernel"),
    (["models", "--campaign", "toy3090random"], "unknown campaign 'toy3090random'; closest: toy-3090-random"),
    (["models", "--device", "titan"], "unknown device 'titan'; closest: NVIDIA TITAN RTX"),
    (["campaigns", "--task", "toy"], "unknown task 'toy'; closest: toy_kernel"),
    (["campaigns", "list", "--device", "RTX3090"], "unknown device 'RTX3090'; closest: NVIDIA GeForce RTX 3090"),
    (["devices", "--similar-to", "Nope GPU"], "unknown device 'Nope GPU'"),
    (["devices", "--similar-to", NAMES["turing"], "--task", "toy kernel"], "unknown task 'toy kernel'; closest: toy_kernel"),
    (["campaigns", "rename", "toy-3090", "x"], "unknown campaign 'toy-3090'; closest: toy-3090-random"),
])
def test_unknown_names_exit_2_with_the_closest(recorded, args, needle):
    url, _ = recorded
    r = run(*args, "--db", url)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""  # no table, not even an empty one


def test_case_only_differences_and_key_prefixes_resolve_silently(recorded):
    url, task = recorded
    every = json.loads(run("trials", "--device", NAMES["ampere"], "--all", "--format", "json", "--db", url).stdout)
    r = run("trials", "--device", NAMES["ampere"].lower(), "--all", "--format", "json", "--db", url)
    assert r.exit_code == 0 and r.stderr == "" and json.loads(r.stdout) == every and len(every) == 32
    by_prefix = json.loads(run("trials", "--task", task.key[:8], "--all", "--format", "json", "--db", url).stdout)
    assert len(by_prefix) == 64 and {t["task_key"] for t in by_prefix} == {task.key}
    r = run("best", "--task", "TOY_KERNEL", "--device", "nvidia titan rtx", "--format", "json", "--db", url)
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["device"] == NAMES["turing"]
    r = run("campaigns", "--task", "toy_kernel", "--device", "nvidia geforce rtx 3090", "--format", "json", "--db", url)
    assert [c["campaign"] for c in json.loads(r.stdout)] == ["toy-3090-random"]
    exact = json.loads(run("trials", "--campaign", "toy-3090-random", "--format", "json", "--db", url).stdout)
    r = run("trials", "--campaign", "TOY-3090-RANDOM", "--format", "json", "--db", url)
    assert r.exit_code == 0 and json.loads(r.stdout) == exact and len(exact) == 32  # all looked up


def test_best_transfers_to_a_stored_device_without_trials_and_to_a_known_gpu(recorded):
    url, _ = recorded
    # in the database (it measured another kernel), but never this task: transfer, silently
    r = run("best", "--task", "toy_kernel", "--device", "NVIDIA A100-PCIE-40GB", "--format", "json", "--db", url)
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)[0]
    assert row["source"] == "transfer" and row["device"] == "NVIDIA A100-PCIE-40GB" and r.stderr == ""
    # not in the database but a GPU of the known table: transfer, saying so
    r = run("best", "--task", "toy_kernel", "--device", NAMES["turing2"], "--format", "json", "--db", url)
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)[0]
    assert row["source"] == "transfer" and NAMES["turing"] in row["from"]
    assert "not in the database" in r.stderr and "RTX 2080 Ti" in r.stderr
    # a known GPU stored under another spelling: answered, and the stored name is pointed out
    r = run("best", "--task", "toy_kernel", "--device", "RTX_3090", "--format", "json", "--db", url)
    assert r.exit_code == 0 and f"as '{NAMES['ampere']}'" in r.stderr
    assert NAMES["ampere"] in json.loads(r.stdout)[0]["from"]


def test_resolve_against_a_database(recorded):
    url, task = recorded
    db = open_database(url)
    try:
        assert resolve(db, "task", None) is None
        assert resolve(db, "task", "toy_kernel") == "toy_kernel"
        assert resolve(db, "task", task.key[:6]) == task.key
        assert resolve(db, "campaign", "Toy-3090-Random") == "toy-3090-random"
        with pytest.raises(UsageError, match="closest: NVIDIA A100-PCIE-40GB"):
            resolve(db, "device", "a100")
    finally:
        db.close()


def test_every_command_taking_a_name_resolves_it_as_trials_does(recorded, tmp_path):
    url, task = recorded
    exact = run("export-configs", "--task", "toy_kernel", "--devices", NAMES["turing"], "--db", url)
    assert exact.exit_code == 0, exact.output
    for args in (["--task", "TOY_KERNEL", "--devices", NAMES["turing"].lower()],
                 ["--task", task.key[:6], "--devices", NAMES["turing"]]):
        r = run("export-configs", *args, "--db", url)
        assert r.exit_code == 0 and r.stdout == exact.stdout, r.output
    r = run("plot", "convergence", "--campaign", "TOY-3090-RANDOM", "-o", tmp_path / "c.png", "--db", url)
    assert r.exit_code == 0 and (tmp_path / "c.png").stat().st_size > 0, r.output
    r = run("plot", "convergence", "--campaign", "toy-3090-randon", "-o", tmp_path / "d.png", "--db", url)
    assert r.exit_code == 2 and "closest: toy-3090-random" in r.stderr
    r = run("devices", "--task", "toy_kernel", "--db", url)  # --task only means something beside --similar-to
    assert r.exit_code == 2 and "--task goes with --similar-to" in r.stderr


def test_a_filter_that_matches_nothing_gives_an_empty_result_in_every_format(recorded):
    url, _ = recorded
    # both names exist, the pair does not: the A100 measured another kernel only
    args = ("--task", "toy_kernel", "--device", "NVIDIA A100-PCIE-40GB", "--db", url)
    r = run("campaigns", *args, "--format", "csv")
    assert r.exit_code == 0 and r.stdout.splitlines()[0].startswith("campaign,") and len(r.stdout.splitlines()) == 1
    assert json.loads(run("campaigns", *args, "--format", "json").stdout) == []
    r = run("trials", "--campaign", "toy-3090-random", "--status", "TIMEOUT", "--format", "csv", "--db", url)
    assert r.exit_code == 0 and r.stdout.splitlines() == [r.stdout.splitlines()[0]] and r.stdout.startswith("id,")
    r = run("campaigns", *args, "--format", "CSV")  # a format in any case
    assert r.exit_code == 0 and r.stdout.startswith("campaign,")


def test_json_keeps_every_digit_of_a_cost_and_the_microseconds(recorded):
    url, _ = recorded
    rows = json.loads(run("trials", "--all", "--format", "json", "--db", url).stdout)
    csv_rows = run("trials", "--all", "--format", "csv", "--db", url).stdout.splitlines()
    import csv as csv_module

    by_id = {int(r["id"]): r for r in csv_module.DictReader(csv_rows)}
    assert len(rows) == len(by_id) > 0
    for r in rows:
        if r["cost"] is not None:
            assert r["cost"] == float(by_id[r["id"]]["cost"])  # the same float, to the last digit
        assert r["created"] == by_id[r["id"]]["created"].replace(" ", "T")


def test_top_does_not_go_with_limit_or_all(recorded):
    url, _ = recorded
    for extra in (["--limit", 1], ["--all"]):
        r = run("trials", "--top", 3, *extra, "--db", url)
        assert r.exit_code == 2 and "--top 3" in r.stderr, r.output
    assert len(json.loads(run("trials", "--top", 3, "--format", "json", "--db", url).stdout)) == 3


def test_export_to_stdout_and_a_failed_export_keeps_the_file_there(recorded, tmp_path):
    url, _ = recorded
    out = tmp_path / "keep.jsonl"
    r = run("export", "-o", out, "--device", NAMES["ampere"], "--db", url)
    assert r.exit_code == 0 and "wrote 32 trials" in r.stderr and r.stdout == ""
    before = out.read_bytes()
    r = run("export", "-o", out, "--device", NAMES["ampere"], "--status", "FAILED", "--db", url)
    assert r.exit_code == 2 and out.read_bytes() == before  # the unknown status leaves the old export whole
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    r = run("export", "-o", "-", "--device", NAMES["ampere"], "--db", url)
    assert r.exit_code == 0 and r.stdout.encode() == before and not (tmp_path / "-").exists()


# -- a task name that several tasks share ---------------------------------------------------------

@pytest.fixture
def shared_name(tmp_path):
    """Two tasks named 'scale' (one kernel tuned at n=1024 and at n=4096) on one device, each with a
    campaign of 3 trials, and the costs of the 4096 one 4x the 1024 one's."""
    from autotune.types import Candidate, Device, Measurement, Status, Task

    url = f"sqlite:///{tmp_path / 's.db'}"
    db = open_database(url)
    dev = Device("Synthetic GPU", "cuda", {"model": "Synthetic GPU"})
    tasks = [Task("kernel", "scale", {"n": n, "dtype": "float32"}) for n in (1024, 4096)]
    try:
        for t in tasks:
            row, _ = db.open_campaign(f"scale-{t.params['n']}", t, dev, "random", {})
            ms = [Measurement(Candidate({"block": b}), Status.OK, times=[t.params["n"] * 1e-6 / b]) for b in (32, 64, 128)]
            db.record_batch(db.task_id(t), db.device_id(dev), row.id, ms)
    finally:
        db.close()
    return url, tasks


@pytest.mark.parametrize("args", [
    ["trials"], ["trials", "--all"], ["trials", "--top", "1"], ["campaigns"], ["campaigns", "list"], ["best"],
    ["models"], ["export", "-o", "-"], ["export-configs"], ["devices", "--similar-to", "Synthetic GPU"],
])
@pytest.mark.parametrize("name", ["scale", "SCALE"])
def test_a_task_name_several_tasks_share_is_refused_naming_their_keys(shared_name, args, name):
    """Every command taking --task refuses a name two tasks share (a case-only spelling of it too), naming
    their keys and what tells them apart, instead of answering for both at once."""
    url, tasks = shared_name
    r = run(*args, "--task", name, "--db", url)
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.strip() == (f"error: task name 'scale' matches several tasks ({tasks[0].key} (kernel, n=1024); "
                                f"{tasks[1].key} (kernel, n=4096)); give the task key")


def test_the_trials_table_names_the_task_of_each_row_when_the_rows_are_of_several(shared_name, tmp_path):
    """csv and json have task and task_key; the default table shows the task once rows of two tasks are
    listed, with a short key where two of them share a name, and no task column for one task."""
    url, tasks = shared_name
    for args in ([], ["--top", "6"], ["--all"]):
        lines = run("trials", *args, "--db", url).stdout.splitlines()
        assert lines[0].split()[:3] == ["id", "campaign", "task"], lines
        shown = {line.split()[0]: " ".join(line.split()[2:4]) for line in lines[2:]}
        assert sorted(shown.values()) == sorted([f"scale {tasks[0].key[:8]}"] * 3 + [f"scale {tasks[1].key[:8]}"] * 3)
    for t in tasks:
        assert "task" not in run("trials", "--task", t.key, "--db", url).stdout.splitlines()[0].split()
    from autotune.types import Candidate, Device, Measurement, Status, Task

    other = f"sqlite:///{tmp_path / 'two.db'}"  # two tasks of different names: the names alone
    db = open_database(other)
    try:
        dev = Device("Synthetic GPU", "cuda", {"model": "Synthetic GPU"})
        for name in ("scale", "gemm"):
            task = Task("kernel", name, {"n": 1024})
            db.record_batch(db.task_id(task), db.device_id(dev), None,
                            [Measurement(Candidate({"block": 32}), Status.OK, times=[1e-3])])
    finally:
        db.close()
    lines = run("trials", "--db", other).stdout.splitlines()
    assert lines[0].split()[:2] == ["id", "task"] and [line.split()[1] for line in lines[2:]] == ["scale", "gemm"]


def test_a_task_key_picks_one_of_the_tasks_that_share_a_name(shared_name):
    url, tasks = shared_name
    for t in tasks:
        for given in (t.key, t.key[:8]):
            rows = json.loads(run("trials", "--task", given, "--all", "--format", "json", "--db", url).stdout)
            assert len(rows) == 3 and {r["task_key"] for r in rows} == {t.key}, given
        rows = json.loads(run("campaigns", "--task", t.key, "--format", "json", "--db", url).stdout)
        assert [c["campaign"] for c in rows] == [f"scale-{t.params['n']}"]
        rows = json.loads(run("best", "--task", t.key, "--format", "json", "--db", url).stdout)
        assert [r["task_key"] for r in rows] == [t.key]
        lines = [json.loads(x) for x in run("export", "-o", "-", "--task", t.key, "--db", url).stdout.splitlines()]
        trials = [d for d in lines if "candidate" in d]
        assert len(trials) == 3 and {d["task"]["key"] for d in lines if "task" in d} == {t.key}


def test_the_queries_refuse_a_shared_task_name_too(shared_name):
    """The Python API's queries (autotune.queries) never merge two tasks' trials either."""
    from autotune.db import queries
    from autotune.db.logs import export_lines
    from autotune.db.names import Ambiguous

    url, tasks = shared_name
    db = open_database(url)
    try:
        for call in (lambda: queries.trials(db, task="scale"), lambda: queries.count_trials(db, task="scale"),
                     lambda: next(queries.trial_pages(db, task="scale")), lambda: queries.best(db, task="scale"),
                     lambda: queries.cost_models(db, task="scale"), lambda: list(export_lines(db, task="scale")),
                     lambda: resolve(db, "task", "Scale")):
            with pytest.raises(Ambiguous) as err:
                call()
            assert err.value.candidates == [t.key for t in tasks]
        again = pickle.loads(pickle.dumps(err.value))  # whole, as a Ray task hands it back
        assert str(again) == str(err.value) and again.candidates == err.value.candidates
        assert set(queries.trials(db, task=tasks[1].key)["task_key"]) == {tasks[1].key}
        assert queries.count_trials(db, task=tasks[0].key) == 3
        with pytest.raises(UsageError, match="unknown task 'no such task'"):  # as the command line refuses it
            queries.trials(db, task="no such task")
    finally:
        db.close()
