"""Every concrete Space subclass of the package passes the space conformance suite
(autotune.testing.spaces) on the small instances ``SPACE_FACTORIES`` builds for it.

The classes are found when this module is collected, by importing every module under
``autotune.search_spaces`` and collecting the subclasses of ``search_spaces.base.Space`` defined
there, so a new space is checked without editing this file; one without a factory fails
``test_every_space_class_has_a_factory``. Test fakes listed in the table are checked too. A class
whose optional dependency (onnx, onnxruntime) is missing is skipped with the reason.
"""

from __future__ import annotations

import pytest

from autotune.search_spaces.base import Space
from autotune.testing import discovery
from autotune.testing.spaces import SPACE_FACTORIES, SpaceConformance, build

PACKAGES = ["autotune.search_spaces"]
DISCOVERED = discovery.concrete_subclasses(Space, PACKAGES)


def cases() -> list:
    """(class name, SpaceCase) for every table entry: the discovered classes' and the fakes'."""
    out = []
    for name, entries in SPACE_FACTORIES.items():
        for case in entries:
            out.append(pytest.param((name, case), id=case.id))
    return out


@pytest.fixture(params=cases())
def space_case(request):
    name, case = request.param
    _, why = discovery.resolve_entry(name)  # a missing optional package, or a stale entry
    if why:
        pytest.skip(why)
    return name, case


class TestSpace(SpaceConformance):
    @pytest.fixture(autouse=True)
    def _bind_case(self, space_case):
        self.class_name, self.case = space_case
        self.samples = self.case.samples

    def make_space(self):
        return build(self.case)

    def test_factory_builds_its_class(self):
        """The table lists each instance under its own class (so coverage is what it says)."""
        space = self.make_space()
        assert discovery.dotted(type(space)) == self.class_name or \
            discovery.resolve(self.class_name) is type(space), \
            f"SPACE_FACTORIES[{self.class_name!r}] entry {self.case.id!r} builds a {discovery.dotted(type(space))}"


def test_every_space_class_has_a_factory():
    missing = [discovery.dotted(c) for c in DISCOVERED if discovery.table_entry(SPACE_FACTORIES, c) is None]
    assert not missing, (f"Space subclasses without a factory: {', '.join(missing)}; add a small instance of each "
                         "to SPACE_FACTORIES in autotune/testing/spaces.py")


def test_spaces_are_discovered():
    """The walk finds the spaces known today (a broken discovery would check nothing)."""
    names = {c.__name__ for c in DISCOVERED}
    assert {"KnobSpace", "ReplaySpace", "StrategySpace"} <= names


def test_no_module_is_left_out_silently():
    """Modules that could not be imported (a missing optional package) hide their classes: listed as a skip."""
    left_out = {m: why for m, why in discovery.unimportable.items() if m.startswith(tuple(PACKAGES))}
    if left_out:
        pytest.skip("not imported, their spaces unchecked: " + "; ".join(f"{m} ({why})" for m, why in left_out.items()))
