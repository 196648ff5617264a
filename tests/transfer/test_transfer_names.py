"""Device and task names in the transfer API as every command takes them: exactly, differing only in case, or a
unique key prefix; a source named twice is one source; a spec naming no device, or the target, is refused."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import transfer as store
from autotune.errors import UsageError
from autotune.testing.caches import NAMES, turing_time, write_cache
from autotune.transfer.dispatch import best_config
from autotune.transfer.sources import choose_sources
from autotune.search_spaces.replay import KTCache
from autotune.types import Candidate, Device, Measurement, Status, Task

cli = CliRunner()


def _stored(db, name) -> Device:
    return next(d for d in store.devices(db) if d.name == name)


def _key(db, name) -> str:
    return _stored(db, name).key


def test_best_config_answers_a_measured_device_by_any_name_a_command_takes(recorded):
    db, _, task, _ = recorded
    own = best_config(task, NAMES["turing"], db=db)
    assert own.source == "measured"
    titan_key = _key(db, NAMES["turing"])
    for name in (NAMES["turing"].lower(), NAMES["turing"].upper(), titan_key[:8], titan_key):
        got = best_config(task.name, name, db=db)
        # its own measurements, not borrowed from the devices like it (itself among them, under another name)
        assert (got.source, got.config, got.cost, got.from_devices) == ("measured", own.config, own.cost, []), name
    assert best_config(task.name.upper(), NAMES["turing"], db=db).source == "measured"
    assert best_config(task.key[:8], NAMES["turing"], db=db).config == own.config
    with pytest.raises(UsageError, match="unknown task 'toy kernl'; closest: toy_kernel"):
        best_config("toy kernl", NAMES["turing"], db=db)
    for empty in ("", "  ", None):
        with pytest.raises(UsageError, match="device must name a device"):
            best_config(task, empty, db=db)
    # a GPU of the known table that never measured the task still borrows
    assert best_config(task, NAMES["turing2"], db=db).source == "transfer"


def test_transfer_from_takes_names_as_commands_do_and_counts_a_device_once(recorded):
    db, _, task, _ = recorded
    target = Device(NAMES["turing2"], "cuda", {})
    key = _key(db, NAMES["ampere"])
    for spec in (NAMES["ampere"].lower(), key[:8], f"{NAMES['ampere']},{key[:8]}", f"{NAMES['ampere']}, {NAMES['ampere']}"):
        picked = choose_sources(db, task, target, spec)
        assert [s.device.name for s in picked] == [NAMES["ampere"]], spec
    both = choose_sources(db, task, target, f"{NAMES['ampere']},{NAMES['turing']}")
    assert [s.device.name for s in both] == [NAMES["ampere"], NAMES["turing"]]
    for spec in (",", " , "):
        with pytest.raises(UsageError, match="names no device"):
            choose_sources(db, task, target, spec)
    with pytest.raises(UsageError, match="no successful measurement.*closest: NVIDIA GeForce RTX 3090"):
        choose_sources(db, task, target, "rtx 3090")
    with pytest.raises(UsageError, match="is the device being tuned"):
        choose_sources(db, task, _stored(db, NAMES["turing"]), NAMES["turing"].lower())


def test_tune_replay_refuses_a_transfer_spec_that_names_no_device(recorded):
    _, url, _, tmp = recorded
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    res = cli.invoke(app, ["tune", "replay", "--cache", cache, "--transfer-from", ",", "--trials", "2", "--no-progress",
                           "--db", url])
    assert res.exit_code == 2 and "--transfer-from ',' names no device" in res.output
    res = cli.invoke(app, ["tune", "replay", "--cache", cache, "--transfer-from", "auto", "--transfer-top", "-3",
                           "--trials", "2", "--no-progress", "--db", url])
    assert res.exit_code == 2 and "--transfer-top must be a whole number >= 0, not -3" in res.output, res.output
    res = cli.invoke(app, ["tune", "replay", "--cache", cache, "--transfer-from", NAMES["turing"].lower(), "--trials", "2",
                           "--no-progress", "--db", url])
    assert res.exit_code == 0 and f"warm start from: {NAMES['turing']}" in res.output, res.output


def test_a_named_source_that_measured_the_kernel_with_other_knobs_or_only_failures_is_refused_saying_so(recorded):
    db, _, task, tmp = recorded
    # the same kernel measured on another GPU at another problem size: another task of the same name
    cache = KTCache.load(write_cache(tmp / "w.json.gz", "Some GPU", turing_time))
    shape = Task(task.kind, task.name, {**task.params, "problem_size": [128]})
    db.add_trials(shape, Device("Some GPU", "cuda", {}),
                  [Measurement(Candidate(cache.config(v)), Status.OK, cost=1.0) for v in list(cache.records)[:4]])
    target = Device(NAMES["ampere_laptop"], "cuda", {})
    with pytest.raises(UsageError, match=r"only with other parameters \(task " + shape.key[:8]):
        choose_sources(db, task, target, "Some GPU")
    db.add_trials(task, Device("Broken GPU", "cuda", {}),
                  [Measurement(Candidate({"a": 1, "b": 16, "c": 0}), Status.COMPILE_ERROR)])
    with pytest.raises(UsageError, match=r"no successful measurement .*\(its 1 measurements of it all failed\)"):
        choose_sources(db, task, target, "broken gpu")


def test_a_device_name_stored_as_several_devices_is_one_device_to_best_config(recorded):
    """A GPU stored again (a driver update) under its name: the name is answered by the device stored last that
    measured the task, as export-configs ships it, and a device never tuned borrows from that one once."""
    db, _, task, _ = recorded
    titan = _stored(db, NAMES["turing"])
    c = [Candidate({"a": a, "b": 64, "c": 1}) for a in (1, 2, 4, 8, 16)]
    again = Device(titan.name, titan.kind, {**titan.properties, "driver_version": 2})
    db.add_trials(task, again, [Measurement(x, Status.OK, cost=1.0 + i) for i, x in enumerate(c)])  # best a=1
    newest = Device(titan.name, titan.kind, {**titan.properties, "driver_version": 3})  # another task only
    db.add_trials(Task("function", "other", {}), newest, [Measurement(c[0], Status.OK, cost=1.0)])
    got = best_config(task, NAMES["turing"].lower(), db=db)
    assert (got.source, got.device.key, got.config) == ("measured", again.key, {"a": 1, "b": 64, "c": 1})
    assert best_config(task, titan.key[:8], db=db).device.key == titan.key  # a key names that one device
    borrowed = best_config(task, "Tesla T4", db=db)
    assert borrowed.source == "transfer" and [d["key"] for d in borrowed.from_devices] == [again.key]
