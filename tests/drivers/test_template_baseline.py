"""The default configuration's measurement (the baseline of speedup_over_default) is one stored trial per
task and device, and every run reports that one, also when two runs measure it at the same time."""

from autotune.db import open_database
from autotune.drivers.kernel import default_measurement
from autotune.search_spaces.kernels import Softmax
from autotune.testing.fakes import FakeRunner
from autotune.types import Measurement, Status


class FakeRacingRunner(FakeRunner):
    """While it measures, another process stores its own measurement of the same candidates (a fake)."""

    def __init__(self, space, database, other_cost):
        super().__init__(space)
        self.database, self.other_cost = database, other_cost

    def measure(self, task, candidates):
        theirs = [Measurement(c, Status.OK, times=[self.other_cost] * 3) for c in candidates]
        self.database.add_trials(task, self.device, theirs)
        return super().measure(task, candidates)


def test_a_baseline_stored_meanwhile_by_another_run_is_the_one_reported(tmp_path):
    template = Softmax("4,32", "cpu", threads=1)
    database = open_database(f"sqlite:///{tmp_path / 'k.db'}")
    try:
        runner = FakeRacingRunner(template.space(), database, other_cost=0.5)
        base = default_measurement(database, template, runner)
        assert base.cost == 0.5  # the stored trial, not this run's unstored measurement
        assert default_measurement(database, template, runner).cost == 0.5  # read back, as every later run
        assert runner.calls == 1
    finally:
        database.close()
