"""scripts/record_space.py: a built-in kernel's space measured in random order and written as a Kernel
Tuner cache that the replay runner reads back; a second run resumes the campaign. Runs the C target
(gcc) so that it needs no GPU; the CUDA target differs only in the runner."""

from __future__ import annotations

import shutil

import pytest

from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.kernels import kernel_problem
from autotune.search_spaces.replay import KTCache, ReplaySpace
from autotune.types import Candidate

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build the C kernels")


def test_record_writes_a_replayable_cache_and_resumes(tmp_path, load_script):
    record = load_script("record_space").record
    out, db = tmp_path / "softmax.json.gz", f"sqlite:///{tmp_path / 'rec.db'}"
    first = record("softmax", "64,64", out, db, max_configs=5, time_budget=None, batch=4, seed=1, target="cpu")
    assert (first["recorded"], first["complete"]) == (5, True)
    cache = KTCache.load(out)
    assert cache.kernel_name == "softmax" and len(cache.records) == 5
    space, _ = kernel_problem("softmax", "64,64", "cpu")
    assert cache.param_names == space.names
    for values, rec in cache.records.items():
        assert space.is_valid(cache.config(values))          # every key is a point of the template's space
        assert rec["time"] > 0 and len(rec["times"]) == 7    # Kernel Tuner's 7 timed launches
    first_key = next(iter(cache.records))
    m = ReplayRunner(cache).measure(cache.task(), [Candidate(cache.config(first_key))])[0]
    assert ReplaySpace(cache).contains(m.candidate) and m.ok
    assert m.cost == pytest.approx(cache.records[first_key]["time"] * 1e-3)

    again = record("softmax", "64,64", out, db, max_configs=9, time_budget=None, batch=4, seed=1, target="cpu")
    assert again["recorded"] == 9                             # the campaign resumed: 4 more, none repeated
    assert set(cache.records) < set(KTCache.load(out).records)
