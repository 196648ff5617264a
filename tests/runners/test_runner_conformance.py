"""Every concrete Runner subclass of the package passes the runner conformance suite
(autotune.testing.runners) on the small cases ``RUNNER_FACTORIES`` builds for it.

The classes are found when this module is collected, by importing every module under
``autotune.runners`` and ``autotune.search_spaces`` (a runner may live beside the space it
measures) and collecting the subclasses of ``runners.base.Runner`` defined there, so a new
runner is checked without editing this file; one missing from the table fails
``test_every_runner_class_has_a_factory``. Runners that need what this machine lacks (a CUDA
GPU, torch with CUDA, onnxruntime) are skipped with the reason.
"""

from __future__ import annotations

import pytest

from autotune.runners.base import Runner
from autotune.testing import discovery
from autotune.testing.runners import RUNNER_FACTORIES, RunnerConformance, build

PACKAGES = ["autotune.runners", "autotune.search_spaces"]
DISCOVERED = discovery.concrete_subclasses(Runner, PACKAGES)


def cases() -> list:
    """(class name, RunnerCase) for every table entry: the discovered classes' and the fakes'."""
    return [pytest.param((name, case), id=case.id) for name, entries in RUNNER_FACTORIES.items() for case in entries]


@pytest.fixture(params=cases())
def runner_case(request):
    name, case = request.param
    _, why = discovery.resolve_entry(name)  # a missing optional package, or a stale entry
    if why:
        pytest.skip(why)
    return name, case


class TestRunner(RunnerConformance):
    @pytest.fixture(autouse=True)
    def _bind_case(self, runner_case):
        self.class_name, self.case = runner_case

    def make_case(self):
        return build(self.case)

    def test_factory_builds_its_class(self):
        """The table lists each case under the class it builds (so coverage is what it says)."""
        runner, *_ = self.make_case()
        try:
            built = discovery.dotted(type(runner))
            assert built == self.class_name or discovery.resolve(self.class_name) is type(runner), \
                f"RUNNER_FACTORIES[{self.class_name!r}] entry {self.case.id!r} builds a {built}"
        finally:
            runner.close()


def test_every_runner_class_has_a_factory():
    missing = [discovery.dotted(c) for c in DISCOVERED if discovery.table_entry(RUNNER_FACTORIES, c) is None]
    assert not missing, (f"Runner subclasses without a factory: {', '.join(missing)}; add a small case for each "
                         "to RUNNER_FACTORIES in autotune/testing/runners.py (one that raises "
                         "autotune.testing.discovery.Unavailable with the reason where it cannot run here)")


def test_runners_are_discovered():
    """The walk finds the runners known today (a broken discovery would check nothing)."""
    names = {c.__name__ for c in DISCOVERED}
    assert {"ReplayRunner", "CRunner", "SimulatorRunner"} <= names


def test_no_module_is_left_out_silently():
    """Modules that could not be imported (a missing optional package) hide their classes: listed as a skip."""
    left_out = {m: why for m, why in discovery.unimportable.items() if m.startswith(tuple(PACKAGES))}
    if left_out:
        pytest.skip("not imported, their runners unchecked: " + "; ".join(f"{m} ({why})" for m, why in left_out.items()))
