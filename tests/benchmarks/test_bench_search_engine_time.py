"""bench_search.py's engine time per measured candidate: the search's own, not the process's start-up."""

import functools
import time

from autotune.testing.caches import NAMES, turing_time, write_cache


def test_the_one_time_start_up_is_charged_to_no_run_and_said_once(tmp_path, monkeypatch, capsys, load_script):
    """XGBoost's import and first fit happen once per process, before any timed run. A fake start-up of 2 s,
    charged, would put the first run of 8 measurements at 250 ms or more per measurement."""
    bench = load_script("bench_search")
    real = bench.start_libraries
    monkeypatch.setattr(bench, "start_libraries", functools.cache(lambda: (time.sleep(2.0), real())[1]))
    space = bench.ReplaySpace(write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time))
    runs = [bench.run_ours("evolutionary+xgb", space, bench.ReplayRunner(space.cache), seed, 8) for seed in (0, 1)]
    assert all(len(tracker.trace) == 8 for tracker, _ in runs)
    assert runs[0][1] < 0.15  # seconds of engine time per measurement: the 2 s were not charged to the first run
    assert capsys.readouterr().err.count("one-time start-up") == 1
