"""autotune.Campaign with a runner of the user's own: what it may be given, and what it does with a runner
that breaks the Runner promise."""

from __future__ import annotations

import threading

import pytest

import autotune
from autotune.errors import UsageError

KNOBS = {"x": list(range(6))}


class Formula(autotune.Runner):
    """A user's runner: cost = formula(config), on one named device."""

    def __init__(self, formula, device: str = "my-box"):
        self.formula, self.device = formula, autotune.Device(device, "cpu", {})

    def measure(self, task, candidates):
        return [autotune.Measurement(c, autotune.Status.OK, times=[self.formula(c.payload)]) for c in candidates]


def _run(name, runner, db, space=None, **kw):
    return autotune.Campaign(name, space or autotune.KnobSpace(KNOBS), "grid", runner, db, progress=False, **kw).run()


def test_two_runners_over_a_knob_space_without_a_task_measure_their_own_points(tmp_path):
    db = autotune.open_database(f"sqlite:///{tmp_path / 'c.db'}")
    up = _run("up", Formula(lambda c: c["x"] + 1.0), db)
    down = _run("down", Formula(lambda c: 10.0 - c["x"]), db)  # same knobs, same device name
    assert up.best_config == {"x": 0} and down.best_config == {"x": 5}
    assert down.trials == 6 and down.reused == 0 and down.task.key != up.task.key
    again = _run("down", Formula(lambda c: 10.0 - c["x"]), db)  # the same campaign resumes
    assert again.resumed and again.measured_here == 0 and again.task.key == down.task.key
    named = autotune.KnobSpace(KNOBS, task=autotune.Task("mine", "shared", {}))  # a task named on purpose is shared
    first = _run("n1", Formula(lambda c: c["x"] + 1.0), db, named)
    second = _run("n2", Formula(lambda c: c["x"] + 1.0), db, named)
    assert first.trials == 6 and second.trials == 0 and second.reused == 6


@pytest.mark.parametrize("space,runner,needle", [
    ({"x": [1, 2]}, Formula(lambda c: 1.0), "the space must be a Space"),
    (None, lambda c: 1.0, "the runner must be a Runner with a device"),
])
def test_a_wrong_space_or_runner_is_one_sentence(tmp_path, space, runner, needle):
    db = autotune.open_database(f"sqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(UsageError, match=needle):
        autotune.Campaign("c", space or autotune.KnobSpace(KNOBS), "grid", runner, db, trials=2)


class Forgetful(Formula):
    """Returns no measurement for the last candidate of each batch."""

    def measure(self, task, candidates):
        return super().measure(task, candidates)[:-1]


class Negative(Formula):
    pass


class Silent(Formula):
    """Forgets to return its measurements."""

    def measure(self, task, candidates):
        super().measure(task, candidates)


class Twice(Formula):
    """Measures the first candidate of each batch twice."""

    def measure(self, task, candidates):
        out = super().measure(task, candidates)
        return out + out[:1]


class Costs(Formula):
    """Returns the costs, not Measurements."""

    def measure(self, task, candidates):
        return [m.cost for m in super().measure(task, candidates)]


@pytest.mark.parametrize("runner,needle", [
    (Forgetful(lambda c: 1.0), "returned 5 results for 6 candidates"),
    (Silent(lambda c: 1.0), "returned None for 6 candidates; measure() returns a list of one Measurement"),
    (Twice(lambda c: 1.0), "returned 7 results for 6 candidates (one candidate twice)"),
    (Costs(lambda c: 1.0), "returned a float among its results; measure() returns one autotune.Measurement"),
    (Negative(lambda c: -1.0 - c["x"]), "at cost -1.0; a cost must be a finite number >= 0"),
    (Negative(lambda c: float("nan")), "at cost nan"),
])
def test_a_runner_that_breaks_the_promise_is_named_not_hung_or_trusted(tmp_path, runner, needle):
    db = autotune.open_database(f"sqlite:///{tmp_path / 'c.db'}")
    outcome = []

    def run():
        try:
            outcome.append(_run("c", runner, db, batch=6))
        except Exception as exc:  # noqa: BLE001 - the test looks at what was raised
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)  # a campaign that waits forever must not hang the suite
    thread.start()
    thread.join(timeout=60)
    assert outcome, "the campaign hung"
    assert isinstance(outcome[0], UsageError) and needle in str(outcome[0])
    assert type(runner).__name__ in str(outcome[0])
