"""Bad input to a benchmark script is one line on stderr and exit status 2, as in the CLI, not a
traceback (autotune.errors.run_script is every script's entry point)."""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.errors import UsageError, run_script

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_run_script_exits_with_main_s_status_and_turns_a_usage_error_into_one_line(capsys):
    with pytest.raises(SystemExit) as done:
        run_script(lambda: 3)
    assert done.value.code == 3

    def bad():
        raise UsageError("cache file 'x.json' does not exist")
    with pytest.raises(SystemExit) as done:
        run_script(bad)
    assert done.value.code == 2
    assert capsys.readouterr().err == "error: cache file 'x.json' does not exist\n"


def test_a_bug_still_shows_its_traceback():
    def bug():
        raise KeyError("x")
    with pytest.raises(KeyError):
        run_script(bug)


@pytest.mark.parametrize("args", [["bench_search.py", "--cache", "missing.json.gz", "--seeds", "1"],
                                  ["trace_runs.py", "search", "missing.json.gz", "--seeds", "1"],
                                  ["transfer_noise_floor.py", "--cache", "missing.json.gz", "--seeds", "1", "--pool", "2"]])
def test_a_script_given_a_missing_cache_names_it_without_a_traceback(args, tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPTS / args[0]), *args[1:]], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith("error: cache file 'missing.json.gz' does not exist")


# -- bad input found before anything is measured ------------------------------------------------------------

def toy_caches(tmp_path) -> list[str]:
    from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache

    folder = tmp_path / "toy"
    folder.mkdir(exist_ok=True)
    return [write_cache(folder / "GPU_A.json.gz", NAMES["turing"], turing_time),
            write_cache(folder / "GPU_B.json.gz", NAMES["ampere"], ampere_time)]


def script(name: str, *args, cwd) -> subprocess.CompletedProcess:
    """``python scripts/<name> args`` run in this process, as that command runs it (``runpy``: the script as
    ``__main__``, its path as ``sys.argv[0]``), in ``cwd``, its exit status, standard output and error captured.
    A new interpreter would cost a second of start-up per run; the command itself is run as a process by
    test_a_script_given_a_missing_cache_names_it_without_a_traceback and the Ctrl-C test."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with pytest.MonkeyPatch.context() as mp, contextlib.chdir(cwd), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        mp.setattr(sys, "argv", [str(SCRIPTS / name), *map(str, args)])
        try:
            runpy.run_path(str(SCRIPTS / name), run_name="__main__")
        except SystemExit as done:  # as the interpreter ends: a text is printed and is status 1
            code = 0 if done.code is None else done.code
            if not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
    return subprocess.CompletedProcess([name, *args], code, out.getvalue(), err.getvalue())


def refused(run: subprocess.CompletedProcess, says: str) -> None:
    """Exit status 2, no traceback, the reason on stderr, and nothing measured or reported on stdout."""
    assert run.returncode == 2, (run.returncode, run.stderr[-1500:])
    assert "Traceback" not in run.stderr
    assert says in run.stderr, run.stderr
    assert "runs measured" not in run.stderr and "| algorithm |" not in run.stdout and "## " not in run.stdout


SEARCH_PROTOCOL = ["--protocol", "leave-one-gpu-out", "--seeds", 1, "--budget", 10, "--candidates", "random",
                   "--peers", "random"]


@pytest.mark.parametrize("name,args", [
    ("bench_search.py", ["--seeds", 1, "--budget", 10, "--algorithms", "random"]),
    ("bench_search.py", SEARCH_PROTOCOL),
    ("bench_transfer.py", ["--seeds", 1, "--max-trials", 10]),
    ("transfer_noise_floor.py", ["--seeds", 1, "--pool", 2, "--max-trials", 10, "--draws", 5]),
])
def test_a_report_into_a_missing_folder_is_refused_before_the_run_not_after_it(tmp_path, name, args):
    """The report is written at the end: a missing folder found there lost the whole run (a traceback)."""
    run = script(name, "--cache", *toy_caches(tmp_path), *args, "--json", tmp_path / "no" / "report.json",
                 cwd=tmp_path)
    refused(run, f"argument --json: cannot write the file '{tmp_path / 'no' / 'report.json'}': the folder")
    assert "does not exist" in run.stderr
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("name,args", [("bench_search.py", SEARCH_PROTOCOL),
                                       ("transfer_noise_floor.py", ["--seeds", 1, "--pool", 2, "--max-trials", 10])])
def test_a_results_file_in_a_missing_folder_is_refused_before_the_first_measurement(tmp_path, name, args):
    run = script(name, "--cache", *toy_caches(tmp_path), *args, "--results", tmp_path / "no" / "r.json", cwd=tmp_path)
    refused(run, "is in a folder that does not exist")


@pytest.mark.parametrize("content,says", [
    ('{"random|toy/GPU_A|seed=0|budget=10": {"to_5pct": 3', "cannot be read as a results file"),  # cut short
    ("\x00\x01 not json", "cannot be read as a results file"),
    ("[1, 2]", "holds a JSON list, not the results"),
    # bench_search.py's own --json report, named as --results by mistake
    ('{"protocol": "leave-one-gpu-out", "budget": 10, "runs": {}, "folds": []}', "results that are not bench_search.py's"),
    # another script's results (bench_transfer.py's)
    ('{"cold|toy/GPU_A|seed=0|cap=10;batch=8": 4}', "results that are not bench_search.py's"),
])
def test_a_results_file_that_is_corrupt_or_not_this_scripts_is_refused_and_left_as_it_is(tmp_path, content, says):
    results = tmp_path / "r.json"
    results.write_text(content)
    run = script("bench_search.py", "--cache", *toy_caches(tmp_path), *SEARCH_PROTOCOL, "--results", results,
                 cwd=tmp_path)
    refused(run, f"error: --results file {results} ")
    assert says in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert results.read_text() == content  # not rewritten with this run's results mixed in


def test_results_files_of_each_script_are_read_back_by_it(tmp_path):
    """The checks of the keys accept every key each script writes: a second run measures nothing."""
    from autotune.testing.caches import NAMES, turing_time, write_cache

    caches = toy_caches(tmp_path)
    third = write_cache(tmp_path / "toy" / "GPU_C.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    for name, args in [
        ("bench_search.py", ["--cache", *caches, *SEARCH_PROTOCOL, "optuna-tpe-direct"]),
        ("bench_transfer.py", ["--cache", *caches, third, "--protocol", "leave-one-gpu-out", "--seeds", 1,
                               "--max-trials", 10, "--adversarial", "top"]),
        ("transfer_noise_floor.py", ["--cache", *caches, "--seeds", 1, "--pool", 2, "--max-trials", 10, "--draws", 5]),
    ]:
        results = tmp_path / f"{name}.results.json"
        for _ in range(2):
            run = script(name, *args, "--results", results, cwd=tmp_path)
            assert run.returncode == 0, run.stderr[-1500:]
        assert json.loads(results.read_text())
        if "runs measured" in run.stderr:
            assert "\n0 runs measured in this run" in run.stderr


@pytest.mark.parametrize("name,args,says", [
    # numpy refused a negative seed at the first run: a traceback
    ("bench_search.py", ["--algorithms", "random", "--first-seed", -1], "argument --first-seed: must be at least 0, got -1"),
    ("bench_transfer.py", SEARCH_PROTOCOL[:2] + ["--first-seed", -1], "argument --first-seed: must be at least 0, got -1"),
    # an option without a value was read as the empty text, and the xgb model's own check was a traceback
    ("bench_search.py", ["--algorithms", "evolutionary+xgb:epsilon"], "error: option 'epsilon' is not KEY=VALUE"),
    ("bench_transfer.py", ["--warm", "top_k"], "error: option 'top_k' is not KEY=VALUE"),
    ("bench_search.py", ["--algorithms", "evolutionary+xgb", "--model-option", "depth=3"],
     "error: xgb cost model has no option(s) ['depth']"),
    # options the run does not use were ignored: --results kept nothing to resume from, --auto ran the protocol
    ("bench_search.py", ["--algorithms", "random", "--results", "r.json"], "error: --results applies to a --protocol run only"),
    ("bench_search.py", [*SEARCH_PROTOCOL, "--algorithms", "random"], "error: --algorithms is not used under --protocol"),
    ("bench_transfer.py", ["--candidates", "top_k=2"], "error: --candidates applies to a --protocol run only"),
    ("bench_transfer.py", [*SEARCH_PROTOCOL[:2], "--auto"], "error: --auto is not used under --protocol"),
    ("bench_transfer.py", ["--kernels", "toy"], "error: --kernels picks kernel folders of the replay data"),
])
def test_a_bad_option_of_the_search_and_transfer_benchmarks_is_refused(tmp_path, name, args, says):
    run = script(name, "--cache", *toy_caches(tmp_path), "--seeds", 1, *args, cwd=tmp_path)
    refused(run, says)
    assert says in run.stderr.strip().splitlines()[-1]  # after argparse's usage, or alone
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("name,args", [("bench_search.py", SEARCH_PROTOCOL),
                                       ("bench_transfer.py", ["--protocol", "leave-one-gpu-out", "--seeds", 1,
                                                              "--max-trials", 10, "--candidates", "default"])])
def test_a_report_named_as_the_results_file_is_refused_and_the_results_kept(tmp_path, name, args):
    """The report was written over the results at the end: the next run refused the file as not its results."""
    from autotune.testing.caches import NAMES, turing_time, write_cache

    caches = [*toy_caches(tmp_path), write_cache(tmp_path / "toy" / "GPU_C.json.gz", NAMES["turing2"], turing_time)]
    results = tmp_path / "r.json"
    assert script(name, "--cache", *caches, *args, "--results", results, cwd=tmp_path).returncode == 0
    kept = results.read_text()
    run = script(name, "--cache", *caches, *args, "--results", results, "--json", results, cwd=tmp_path)
    refused(run, f"error: --json {results} is also a --results file")
    assert results.read_text() == kept


@pytest.mark.parametrize("name,args", [
    ("bench_search.py", ["--algorithms", "random", "--budget", 10]),
    ("bench_search.py", SEARCH_PROTOCOL[:2] + SEARCH_PROTOCOL[4:]),
    ("bench_transfer.py", ["--max-trials", 10]),
    ("transfer_noise_floor.py", ["--pool", 2, "--max-trials", 10, "--draws", 5]),
    ("trace_runs.py", ["--limit", 10]),
])
def test_zero_seeds_is_refused(tmp_path, name, args):
    """--seeds 0 was a traceback after the caches were read (bench_search, bench_transfer), a report of NaN
    (transfer_noise_floor) or an empty output with status 0 (trace_runs)."""
    caches = toy_caches(tmp_path)
    first = ["search", caches[0]] if name == "trace_runs.py" else ["--cache", *caches]
    run = script(name, *first, *args, "--seeds", 0, cwd=tmp_path)
    refused(run, "argument --seeds: must be at least 1, got 0")
    assert "nan" not in run.stdout


def test_an_unknown_kernel_tuner_strategy_is_refused_not_reported_as_misses(tmp_path):
    pytest.importorskip("kernel_tuner")
    run = script("bench_search.py", "--cache", toy_caches(tmp_path)[0], "--seeds", 1, "--budget", 10,
                 "--algorithms", "random", "kt:genetic_algorithmm", cwd=tmp_path)
    refused(run, "error: unknown Kernel Tuner strategy 'genetic_algorithmm'")
    assert "did you mean 'genetic_algorithm'" in run.stderr


def test_an_unknown_peer_is_refused_before_the_candidates_run(tmp_path):
    """The peers ran after the candidates on the first space: a typo in a peer's name ended the run there."""
    results = tmp_path / "r.json"
    run = script("bench_search.py", "--cache", *toy_caches(tmp_path), *SEARCH_PROTOCOL[:-1], "optuna-tpe-directt",
                 "--results", results, cwd=tmp_path)
    refused(run, "error: unknown algorithm 'optuna-tpe-directt'")
    assert not results.exists()


@pytest.mark.parametrize("args,says", [
    (["--kernels", "gemmm"], "unknown kernel folder (--kernels) 'gemmm'"),
    (["--cache", "ONE"], "--cache names 1 cache; a transfer needs one kernel recorded on at least 2 GPUs"),
])
def test_bench_transfer_without_a_pair_says_so(tmp_path, monkeypatch, args, says):
    caches = toy_caches(tmp_path)
    args = [caches[0] if a == "ONE" else a for a in args]
    monkeypatch.setenv("AUTOTUNE_REPLAY_DIR", str(tmp_path))  # the replay data: one kernel folder, toy
    run = script("bench_transfer.py", *args, "--seeds", 1, "--max-trials", 10, cwd=tmp_path)
    refused(run, says)


@pytest.mark.parametrize("source,says", [("missing.json", "does not exist"), ("bad.json", "is not readable JSON"),
                                         ("bad.json.gz", "is not readable JSON"), ("list.json", "has no \"cache\" object")])
def test_limit_threads_names_a_bad_source_in_one_line(tmp_path, source, says):
    (tmp_path / "bad.json").write_text("{cut")
    (tmp_path / "bad.json.gz").write_text("{cut")
    (tmp_path / "list.json").write_text("[]")
    run = script("limit_threads.py", source, "out.json.gz", cwd=tmp_path)
    refused(run, f"error: cache file '{source}' {says}")
    assert not (tmp_path / "out.json.gz").exists()


def test_record_space_refuses_zero_configurations_instead_of_recording_the_whole_space(tmp_path):
    """--max-configs 0 read as no limit: the whole space measured (hours on a GPU)."""
    run = script("record_space.py", "softmax", "--target", "cpu", "--max-configs", 0, "--out", tmp_path / "c.json",
                 "--db", f"sqlite:///{tmp_path / 'r.db'}", cwd=tmp_path)
    refused(run, "argument --max-configs: must be at least 1, got 0")
    assert not (tmp_path / "r.db").exists()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build the C kernels")
def test_record_space_interrupted_writes_what_it_measured_and_resumes(tmp_path):
    """Ctrl-C ended the recording with a traceback and no cache file: the measurements were only in --db."""
    import signal
    import time

    from autotune.search_spaces.replay import KTCache

    out, db = tmp_path / "gemm.json.gz", f"sqlite:///{tmp_path / 'rec.db'}"
    args = [sys.executable, str(SCRIPTS / "record_space.py"), "gemm", "--shape", "64,64,64", "--target", "cpu",
            "--batch", "2", "--out", str(out), "--db", db]
    proc = subprocess.Popen([*args, "--max-configs", "100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    from sqlalchemy import create_engine, text

    try:
        deadline = time.time() + 120
        stored = 0
        while time.time() < deadline and stored < 4:  # until some configurations are stored
            time.sleep(0.5)
            try:
                engine = create_engine(db)
                with engine.connect() as conn:
                    stored = conn.execute(text("SELECT count(*) FROM trials")).scalar()
                engine.dispose()
            except Exception:  # noqa: BLE001 - the database is not created yet
                stored = 0
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:  # a recording left running would compile for the rest of the suite
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-1500:]
    assert "Traceback" not in err and "written to" in err
    # the way to resume is this script's own command line: it takes no --campaign
    assert "--campaign" not in err and f"resume with: python {SCRIPTS / 'record_space.py'} gemm --shape 64,64,64" in err
    recorded = KTCache.load(out).records
    assert len(recorded) >= stored
    run = subprocess.run([*args, "--max-configs", str(len(recorded) + 2)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-1500:]
    assert set(recorded) < set(KTCache.load(out).records)  # resumed: what was written is kept, 2 more measured


@pytest.mark.parametrize("args,says", [
    (["nccl_fill_experiment.py", "--fit-on", "nccl-a100"], "argument --fit-on: invalid choice: 'nccl-a100'"),
    (["bench_egraph.py", "--models", "nasrn", "--small"], "error: unknown model (--models) 'nasrn'"),
    (["bench_egraph.py", "--algorithms", "taso", "--small"], "error: unknown algorithm 'taso'"),
    (["bench_kernels.py", "--sizes", "512;1024"], "error: --sizes '512;1024' is not a comma-separated list"),
    (["synthetic_space.py", "--out", "x.json.gz", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    (["synthetic_space.py", "--out", "no/x.json.gz"], "argument --out: cannot write the file 'no/x.json.gz': the folder"),
    (["bench_cost_model.py", "--k", "0"], "argument --k: must be at least 1, got 0"),
    (["bench_cost_model.py", "--members", "0"], "argument --members: must be at least 1, got 0"),
    (["limit_threads.py", "missing.json", "."], "error: cannot write '.': it is a folder"),
    (["example_campaign.py", "--trials", "5"], "unrecognized arguments: --trials 5"),
    (["validate_simulator.py", "--sources", "sc21-table1", "--protocol", "leave-one-source-out"],
     "error: --protocol leave-one-source-out needs at least two sources"),
    (["bench_parallel.py", "--trials", "0"], "argument --trials: must be at least 1, got 0"),
    (["bench_cost_model.py", "--objectives", "rnk"], "argument --objectives: invalid choice: 'rnk'"),
])
def test_a_bad_name_or_number_is_one_sentence_and_status_2(tmp_path, args, says):
    """A traceback (KeyError, ValueError), status 1, or a run with nothing to report, before."""
    if args[0] == "bench_egraph.py":
        pytest.importorskip("onnx")
    run = script(*args, cwd=tmp_path)
    refused(run, says)
    assert list(tmp_path.iterdir()) == []


def test_example_campaign_help_says_what_it_does_and_runs_nothing(tmp_path):
    """--help ran the campaign and wrote example.db into the working directory."""
    run = script("example_campaign.py", "--help", cwd=tmp_path)
    assert run.returncode == 0 and "usage: example_campaign.py" in run.stdout and "example.db" in run.stdout
    assert list(tmp_path.iterdir()) == []
