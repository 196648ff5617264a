import gzip
import json

import pytest

from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import KTCache, ReplaySpace, cache_label
from autotune.types import Candidate, Status

EXAMPLE = "example:pnpoly-rtx3090"


def write_cache(path, device_name="Test GPU", gz=False):
    """A tiny hand-made Kernel Tuner cache: 2 knobs, one point missing, one compile and one runtime failure."""
    cache = {}
    for a in (1, 2, 4):
        for b in (8, 16):
            if (a, b) == (4, 16):
                continue  # not in the recorded space
            rec = {"a": a, "b": b, "time": a * 0.1 + b * 0.01, "times": [a * 0.1 + b * 0.01] * 3,
                   "compile_time": 100.0, "benchmark_time": 50.0}
            if (a, b) == (2, 16):
                rec["time"] = "CompilationFailedConfig"
                del rec["times"]
            if (a, b) == (4, 8):
                rec["time"] = "RuntimeFailedConfig"
                del rec["times"]
            cache[f"{a},{b}"] = rec
    data = {"device_name": device_name, "kernel_name": "toy", "problem_size": [64], "tune_params_keys": ["a", "b"],
            "tune_params": {"a": [1, 2, 4], "b": [8, 16]}, "cache": cache}
    text = json.dumps(data)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def test_replay_answers_recorded_times_in_seconds_and_charges_the_clock(tmp_path):
    path = write_cache(tmp_path / "toy.json.gz", gz=True)
    space = ReplaySpace(path)
    assert space.size() == 5 and cache_label(path) == "toy"
    runner = ReplayRunner(path)
    assert runner.device.name == "Test GPU"
    ms = runner.measure(space.task, [space.candidate({"a": 1, "b": 8}), space.candidate({"a": 2, "b": 16}),
                                     space.candidate({"a": 4, "b": 8}), Candidate({"a": 4, "b": 16})])
    assert ms[0].status is Status.OK and ms[0].times == pytest.approx([0.18e-3] * 3) and ms[0].cost == pytest.approx(0.18e-3)
    assert [m.status for m in ms[1:]] == [Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.INVALID]
    assert ms[1].error == "CompilationFailedConfig"
    assert runner.clock == pytest.approx(3 * 0.15)  # compile + benchmark ms of the three recorded points
    assert ms[3].simulated_s == 0
    assert not space.contains(Candidate({"a": 4, "b": 16}))


def test_device_name_falls_back_to_the_file_name(tmp_path):
    runner = ReplayRunner(write_cache(tmp_path / "My_GPU.json", device_name=""))
    assert runner.device.name == "My_GPU"


def test_an_unchanged_cache_is_parsed_once_and_one_rewritten_in_place_is_read_again(tmp_path):
    path = write_cache(tmp_path / "c.json", device_name="GPU A")
    first = KTCache.load(path)
    assert KTCache.load(path) is first
    size = path.stat().st_size
    write_cache(path, device_name="GPU B")  # the same size, at once: only the content tells the two apart
    assert path.stat().st_size == size
    assert KTCache.load(path).device_name == "GPU B"
    assert KTCache.load(tmp_path / "c.json").device_name == "GPU B"


def test_same_kernel_on_two_gpus_is_one_task(tmp_path):
    a = KTCache.load(write_cache(tmp_path / "a.json", device_name="GPU A"))
    b = KTCache.load(write_cache(tmp_path / "b.json", device_name="GPU B"))
    assert a.task().key == b.task().key
    assert ReplayRunner(a).device.key != ReplayRunner(b).device.key


@pytest.mark.parametrize("content,match", [
    ("{oops", "not readable JSON"),
    (json.dumps({"cache": {}}), "not a Kernel Tuner cache"),
    (json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {}}), "holds no configurations"),
    (json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {"2": {"a": 2, "time": 1}}}), "not among tune_params"),
    # a JSON column stores integers of 64 bits at most: a larger knob value is refused, not a crash when stored
    (json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": [1, 2 ** 63]}, "cache": {"1": {"a": 1, "time": 1}}}),
     r"tune_params\['a'\] must be a non-empty list of strings, booleans, finite numbers or integers of 64 bits"),
    (json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {"1": {"a": -2 ** 63 - 1, "time": 1}}}),
     "has a parameter value that is not a string, a boolean, a finite number or an integer of 64 bits"),
])
def test_malformed_caches_are_rejected_clearly(tmp_path, content, match):
    """Refused by the reader itself, so that every use of a cache (a replay, import-kt) refuses it alike."""
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(UsageError, match=match):
        KTCache.load(p)
    with pytest.raises(UsageError, match=match):
        ReplaySpace(p)


def test_a_cache_that_inflates_past_the_limit_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """A small gzip that inflates to more than AUTOTUNE_MAX_CACHE_MB is refused after reading the limit."""
    import gzip

    from autotune.errors import UsageError
    from autotune.search_spaces import replay

    monkeypatch.setattr(replay, "MAX_CACHE_MB", 1)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b'{"tune_params_keys": ["a"], "pad": "' + b" " * (8 << 20) + b'"}')
    assert bomb.stat().st_size < 100_000
    with pytest.raises(UsageError) as err:
        replay.KTCache.load(str(bomb))
    # the whole sentence, not taken for a parse error and cut short inside one
    assert str(err.value).endswith("holds more than 1 MB of text; raise AUTOTUNE_MAX_CACHE_MB if it is a genuine cache")
    assert "not readable JSON" not in str(err.value)


def test_kernel_tuners_failure_names_and_error_time_read_as_failures(tmp_path):
    """Each failure name of a cache reads as its status (the names write_cache writes, read back alike), an
    empty name as a runtime failure, and Kernel Tuner's error time (1e20 ms, which some of its versions store
    in place of a name) as a failure, not as a time."""
    from autotune.runners.replay import record_measurement

    recs = {(1,): "CompilationFailedConfig", (2,): "InvalidConfig", (3,): "RuntimeFailedConfig", (4,): "",
            (5,): 1e20, (6,): 1.7976931348623157e308, (7,): 0.5}
    cache = {"tune_params_keys": ["x"], "tune_params": {"x": [v for (v,) in recs]},
             "cache": {str(v): {"x": v, "time": t} for (v,), t in recs.items()}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cache))
    kt = KTCache.load(p)
    got = {v: record_measurement(kt, Candidate({"x": v}), kt.records[(v,)]) for (v,) in recs}
    assert {v: m.status for v, m in got.items()} == {
        1: Status.COMPILE_ERROR, 2: Status.INVALID, 3: Status.RUNTIME_ERROR, 4: Status.RUNTIME_ERROR,
        5: Status.RUNTIME_ERROR, 6: Status.RUNTIME_ERROR, 7: Status.OK}
    assert got[7].cost == pytest.approx(0.5e-3) and "failed configuration" in got[5].error and got[4].error


def _t4_file(folder, name="A100_T4.json", objective_unit="ms"):
    """A results file in the T4 format, as Kernel Tuner's results_file writes it: two block sizes, one of them
    also failing to compile at tile 2, one invalid."""
    results = []
    for block, tile, invalidity, ms in [(64, 1, "correct", 2.0), (128, 1, "correct", 1.5),
                                        (64, 2, "compile", None), (128, 2, "constraints", None)]:
        results.append({
            "timestamp": "2024-01-01T00:00:00Z", "configuration": {"block": block, "tile": tile},
            "times": {"compilation": 120.0, "benchmark": 30.0, "runtimes": [ms, ms * 1.1] if ms else []},
            "invalidity": invalidity, "correctness": 1, "objectives": ["time"],
            "measurements": [{"name": "time", "value": ms if ms is not None else "CompilationFailedConfig",
                              "unit": objective_unit}]})
    folder.mkdir(exist_ok=True)
    p = folder / name
    p.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    return p


def test_a_t4_results_file_reads_as_the_cache_it_stands_for(tmp_path):
    p = _t4_file(tmp_path / "dedispersion")
    kt = KTCache.load(p)
    assert (kt.device_name, kt.kernel_name) == ("A100", "dedispersion")
    assert kt.param_names == ["block", "tile"] and kt.param_values == {"block": [64, 128], "tile": [1, 2]}
    runner = ReplayRunner(kt)
    got = runner.measure(kt.task(), [Candidate({"block": b, "tile": t}) for b, t in [(128, 1), (64, 2), (128, 2)]])
    assert [m.status for m in got] == [Status.OK, Status.COMPILE_ERROR, Status.INVALID]
    assert got[0].times == pytest.approx([1.5e-3, 1.65e-3]) and got[0].build_s == pytest.approx(0.12)
    # the same kernel on another GPU (another file of the folder) is the same task
    other = KTCache.load(_t4_file(tmp_path / "dedispersion", "W7800_T4.json"))
    assert other.device_name == "W7800" and other.task() == kt.task()


def test_a_t4_file_whose_objective_is_not_a_time_is_refused(tmp_path):
    p = _t4_file(tmp_path / "k", objective_unit="GFLOP/s")
    with pytest.raises(UsageError, match="no measurement of its objective 'time' in a unit of time"):
        KTCache.load(p)
    empty = tmp_path / "e.json"
    empty.write_text(json.dumps({"schema_version": "1.0.0", "results": []}))
    with pytest.raises(UsageError, match="holds no results"):
        KTCache.load(empty)


def test_a_t4_files_times_are_read_in_their_unit(tmp_path):
    p = _t4_file(tmp_path / "k", objective_unit="s")
    kt = KTCache.load(p)
    (m,) = ReplayRunner(kt).measure(kt.task(), [Candidate({"block": 128, "tile": 1})])
    assert m.meta["recorded_mean_s"] == pytest.approx(1.5) and m.times == pytest.approx([1.5, 1.65])
