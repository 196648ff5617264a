"""`--transfer-from` is `auto` alone or device names: `auto` among names is refused as such (not looked up as a
device); a warm-started campaign resumed with other sources is refused before any 'warm start from' line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import UsageError
from autotune.testing.caches import NAMES, turing_time, write_cache
from autotune.transfer.sources import choose_sources
from autotune.types import Device


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_auto_among_device_names_is_refused_as_a_mixed_spec(recorded):
    db, url, task, tmp = recorded
    target = Device(NAMES["turing2"], "cuda", {})
    for spec in (f"auto,{NAMES['ampere']}", f"{NAMES['ampere']}, AUTO"):
        with pytest.raises(UsageError, match="mixes auto with device names") as err:
            choose_sources(db, task, target, spec)
        assert "device 'auto'" not in str(err.value)
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    r = run("tune", "replay", "--cache", cache, "--transfer-from", f"auto,{NAMES['ampere']}", "--trials", 2,
            "--no-progress", "--db", url)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "--transfer-from 'auto,NVIDIA GeForce RTX 3090' mixes auto with device names" in r.stderr


def test_other_sources_for_a_warm_started_campaign_are_refused_before_any_is_said(recorded):
    _, url, _, tmp = recorded
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    first = run("tune", "replay", "--cache", cache, "--transfer-from", "auto", "--trials", 2, "--no-progress",
                "--db", url)
    assert first.exit_code == 0 and "warm start from: " in first.stderr, first.output
    again = run("tune", "replay", "--cache", cache, "--transfer-from", NAMES["ampere"], "--trials", 4,
                "--no-progress", "--db", url)
    assert again.exit_code == 2, again.output
    assert again.stderr.startswith("error: campaign ") and "was warm-started with --transfer-from 'auto'" in again.stderr
    assert "warm start from" not in again.output and again.stderr.count("\n") == 1
    same = run("tune", "replay", "--cache", cache, "--transfer-from", "AUTO", "--trials", 4, "--no-progress",
               "--db", url)
    assert same.exit_code == 0 and "warm start from: " in same.stderr, same.output
