"""Conformance suite every Runner must pass. Subclass and define ``make_case`` returning
``(runner, task, good_candidates, bad_candidate)``; ``bad_candidate`` must not be OK."""

from __future__ import annotations

import math

from autotune.types import Device, Measurement, Status


class RunnerConformance:
    def make_case(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def test_device_is_described(self):
        runner, *_ = self.make_case()
        try:
            assert isinstance(runner.device, Device) and runner.device.name and runner.device.key
        finally:
            runner.close()

    def test_measurements_match_candidates(self):
        runner, task, good, bad = self.make_case()
        try:
            cands = [*good, bad]
            results = runner.measure(task, cands)
            assert [m.candidate.key for m in results] == [c.key for c in cands]
            for m in results:
                assert isinstance(m, Measurement) and isinstance(m.status, Status)
            for m in results[:-1]:
                if m.status is Status.OK:
                    assert m.times and all(t > 0 and math.isfinite(t) for t in m.times)
                    assert m.cost is not None and min(m.times) <= m.cost <= max(m.times)
                else:
                    assert m.error
            assert results[-1].status is not Status.OK and results[-1].error
            assert any(m.ok for m in results[:-1]), "no good candidate measured OK"
        finally:
            runner.close()

    def test_empty_batch(self):
        runner, task, *_ = self.make_case()
        try:
            assert runner.measure(task, []) == []
        finally:
            runner.close()
