"""Ctrl-C while a Ray campaign waits for its actors loses none of the measurements that completed and were not
collected yet: the runner hands them back in ``partial`` and the campaign stores them before it stops. A stand-in
for the ray module (so Ray need not be installed) finishes some candidates, then Ctrl-C comes in ray.wait."""

import numpy as np
import pytest

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.runners import ray as ray_runner
from autotune.runners.base import StreamingRunner
from autotune.testing.fakes import FakeRunner, small_knob_space


class FakeRayWaitInterrupted:
    """What RayRunner.collect uses of the ray module. Object references are numbers, in submission order;
    ``finished[i]`` is how many of them have completed at wait call i (0-based), or None: that call is Ctrl-C."""

    class exceptions:
        class RayError(Exception):
            pass

    def __init__(self, finished: list):
        self.finished, self.waits, self.results = finished, 0, []

    def wait(self, refs, num_returns=1, timeout=None):
        n = self.finished[min(self.waits, len(self.finished) - 1)]
        self.waits += 1
        if n is None:
            raise KeyboardInterrupt
        ready = [r for r in refs if r < n][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref):
        return self.results[ref]


class FakeRayRunner(ray_runner.RayRunner):
    """RayRunner's collect on the stand-in, each candidate measured by ``inner`` as it is submitted (a fake:
    for tests only)."""

    def __init__(self, inner, fake: FakeRayWaitInterrupted, slots: int = 8):
        self.inner, self.fake, self.device, self.slots = inner, fake, inner.device, slots
        self._refs, self._load, self.actors = {}, [0], []

    def submit(self, task, candidates):
        for c in candidates:
            self._refs[len(self.fake.results)] = (c, 0)
            self.fake.results.append(self.inner.measure(task, [c])[0])
            self._load[0] += 1

    def close(self):
        self._refs = {}


def _candidates(space, n):
    rng = np.random.default_rng(0)
    out = {}
    while len(out) < n:
        c = space.sample(rng)
        out[c.key] = c
    return list(out.values())


def _interrupted_collect(monkeypatch, fake, n: int):
    """A FakeRayRunner on ``fake`` given ``n`` candidates, whose collect is interrupted; (runner, candidates)."""
    space = small_knob_space()
    monkeypatch.setattr(ray_runner, "_ray", lambda: fake)
    runner = FakeRayRunner(FakeRunner(space), fake)
    cands = _candidates(space, n)
    runner.submit(space.task, cands)
    with pytest.raises(KeyboardInterrupt):
        runner.collect()
    return runner, cands


def test_collect_interrupted_hands_back_what_completed(monkeypatch):
    runner, cands = _interrupted_collect(monkeypatch, FakeRayWaitInterrupted([None, 3]), 6)
    assert [m.candidate.key for m in runner.partial] == [c.key for c in cands[:3]]
    assert runner.in_flight == 3 and isinstance(runner, StreamingRunner)


def test_a_campaign_interrupted_in_ray_wait_stores_what_completed(tmp_path, monkeypatch):
    space = small_knob_space()
    # the first collect hands back 3 (two waits); the second is Ctrl-C in its first wait, when 6 have completed
    fake = FakeRayWaitInterrupted([3, 3, None, 6])
    monkeypatch.setattr(ray_runner, "_ray", lambda: fake)
    db = open_database(f"sqlite:///{tmp_path / 'r.db'}")
    campaign = Campaign("r", space, "random", FakeRayRunner(FakeRunner(space), fake), db, trials=8, batch=8,
                        progress=False)
    with pytest.raises(KeyboardInterrupt):
        campaign.run()
    assert db.count_trials() == 6
    assert db.campaign("r").status == "interrupted"
    db.close()


def test_ctrl_c_while_results_are_taken_loses_none_taken_before_it(monkeypatch):
    fake = FakeRayWaitInterrupted([4])
    gets = {"n": 0}
    real_get = fake.get

    def get(ref):  # the second result's get is where Ctrl-C lands
        gets["n"] += 1
        if gets["n"] == 2:
            raise KeyboardInterrupt
        return real_get(ref)

    fake.get = get
    runner, cands = _interrupted_collect(monkeypatch, fake, 4)
    assert sorted(m.candidate.key for m in runner.partial) == sorted(c.key for c in cands)
    assert runner.in_flight == 0
