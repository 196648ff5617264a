"""SearchAlgorithm: the ask/tell interface every strategy implements.

Options are declared once, as a class attribute ``options`` mapping each name to an
:class:`Option` (default and one-line help); the constructor validates keyword
arguments against it, and ``autotune algorithms`` lists them.

The space moves an algorithm uses are declared in ``needs`` and checked when it is bound
to a space (:meth:`SearchAlgorithm.check_space`), so a search that cannot work on a space
is refused before anything is measured instead of failing half-way, naming the kinds of space
it can search (``SPACE_KINDS``). Besides the moves (methods a space overrides), ``needs`` may
name what a space is (``TRAITS``): ``rewrites``, children that are complete points (a graph
space), and ``knobs``, a point being one listed value per named knob (a knob space).

An algorithm that cannot be the inner search of a cost-model-guided search says why in
``unguided``; :func:`check_guidable` refuses it there.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from autotune.errors import UsageError, argument
from autotune.lazy import load
from autotune.search_spaces.base import Space
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Candidate, Measurement

#: the optional moves of :class:`Space`: a space offers one when its class overrides Space's
#: method (whose default raises NotImplementedError); ``sample`` every space offers
OPTIONAL_MOVES = ("neighbor", "crossover", "children", "enumerate", "saturate")
#: what a space is, beyond its moves, with the words a refusal explains it in: ``rewrites`` when it
#: offers ``children`` and every point is complete (it keeps Space's ``is_complete``), so a child is a
#: rewrite of its parent (a graph space; a knob space's children are the partial points of a tree);
#: ``knobs`` when a point is one value of each named knob (``names`` and ``values``: a KnobSpace)
TRAITS = {"rewrites": "children that are complete points", "knobs": "named knobs with listed values"}
MOVES = ("sample", *OPTIONAL_MOVES, *TRAITS)
#: the kinds of space the tuning commands build ("module:Class", loaded when a refusal names them)
SPACE_KINDS = {
    "knob spaces (tune replay, tune kernel, tune command)": "autotune.search_spaces.knobs:KnobSpace",
    "graph spaces (tune graph)": "autotune.search_spaces.graphs.space:GraphSpace",
    "parallelization strategies (tune parallel)": "autotune.search_spaces.parallel.space:StrategySpace",
}


def _overrides(cls: type, method: str) -> bool:
    return getattr(cls, method, None) not in (None, getattr(Space, method))


def offered_moves(space: Space | type[Space]) -> tuple[str, ...]:
    """The moves ``space`` (a space, or a Space class) offers and its traits, in the order of ``MOVES``."""
    cls = space if isinstance(space, type) else type(space)
    out = ["sample", *(m for m in OPTIONAL_MOVES if _overrides(cls, m))]
    if "children" in out and not _overrides(cls, "is_complete"):
        out.append("rewrites")
    if issubclass(cls, KnobSpace) or (cls is not space and hasattr(space, "names") and hasattr(space, "values")):
        out.append("knobs")
    return tuple(out)


def searchable_kinds(moves: Iterable[str]) -> list[str]:
    """The kinds of ``SPACE_KINDS`` that offer every one of ``moves`` (a kind whose module cannot be
    imported here is left out)."""
    wanted, out = set(moves), []
    for kind in SPACE_KINDS:
        try:
            cls = load(SPACE_KINDS, "space", kind)
        except ImportError:
            continue
        if wanted <= set(offered_moves(cls)):
            out.append(kind)
    return out


def check_guidable(inner: SearchAlgorithm, model: str) -> None:
    """UsageError when ``inner`` (or an algorithm it runs) cannot be the inner search of a search guided
    by the cost model named ``model`` (its ``guidance_refusal``)."""
    reason = inner.guidance_refusal()
    if reason:
        alone = argument("cost_model=None", "--cost-model none")
        raise UsageError(f"algorithm {inner.name!r} cannot be guided by the {model} cost model: {reason}; "
                         f"run it without a cost model ({alone}) or guide another algorithm")


def union_moves(*groups: Iterable[str]) -> tuple[str, ...]:
    """The moves of all ``groups``, each once, in the order of ``MOVES``."""
    wanted = {m for g in groups for m in g}
    return tuple(m for m in MOVES if m in wanted) + tuple(sorted(wanted - set(MOVES)))


@dataclass(frozen=True)
class Option:
    """An algorithm option: its default and help. A numeric option's value lies in [low, high] (whole
    numbers where the default is one); a value outside is refused when the algorithm is made."""

    default: Any
    help: str
    low: float = 0
    high: float = math.inf

    def check(self, name: str, algorithm: str, value: Any) -> Any:
        """``value`` as this option's type (numeric text is read as a number); UsageError when it is not one
        or lies outside the bounds."""
        d = self.default
        if not isinstance(d, (int, float)) or isinstance(d, bool):
            return value
        whole = isinstance(d, int)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if ok and whole:
            ok = float(value).is_integer()
        if not ok or not self.low <= value <= self.high:
            kind = "a whole number" if whole else "a number"
            bounds = f">= {self.low:g}" if self.high == math.inf else f"in [{self.low:g}, {self.high:g}]"
            raise UsageError(f"algorithm {algorithm!r} option {name} must be {kind} {bounds}, not {value!r}")
        return int(value) if whole else float(value)


class SearchAlgorithm(ABC):
    """Ask for candidates, tell their measurements. ``ask`` returning [] means exhausted.

    Hooks a campaign uses (defaults do nothing, so an algorithm without a cost model ignores them):
    ``on_retrain`` is set by the caller and called by an algorithm that retrains a cost model,
    ``cost_model`` names that model, and ``predicted`` holds the model's score of the candidates
    it chose (stored with their trials).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[dict[str, Option]] = {}
    #: whether ``ask`` never proposes a candidate twice (checked by the conformance suite)
    no_repeats: ClassVar[bool] = False
    #: the Space moves this algorithm needs ("sample", "neighbor", "crossover", "children", "enumerate",
    #: "saturate") and the traits ("rewrites", "knobs"); an algorithm wrapping others adds theirs in
    #: ``required_moves``
    needs: ClassVar[tuple[str, ...]] = ("sample",)
    #: why this algorithm cannot be the inner search of a cost-model-guided search (None: it can)
    unguided: ClassVar[str | None] = None

    #: called as ``on_retrain(metrics, model_bytes)`` after every retrain of the algorithm's cost
    #: model, with the model's quality on results it had not seen and the serialised model; set
    #: by the caller (a campaign stores every model), None when nobody listens
    on_retrain: Callable[[dict, bytes], None] | None = None
    #: the cost model guiding the search (its ``name`` labels the stored models); None without one
    cost_model: Any = None
    #: candidate key -> the cost model's score, for the candidates a model chose (empty without one)
    predicted: Mapping[str, float] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        # an algorithm of one's own that sets no name is named by its class: its campaigns store that, and the
        # default campaign names of the tuning commands carry it. That holds for a subclass of a built-in
        # algorithm too, which would otherwise pass for the built-in one in the logs and share its campaigns
        if cls.__dict__.get("name", "") == "":
            cls.name = cls.__name__

    def __init__(self, **kwargs: Any):
        unknown = set(kwargs) - set(self.options)
        if unknown:
            valid = ", ".join(sorted(self.options)) or "none"
            raise UsageError(f"algorithm {self.name!r} has no option(s) {', '.join(sorted(unknown))}; valid: {valid}")
        self.config: dict[str, Any] = {k: o.default for k, o in self.options.items()}
        for k, v in kwargs.items():
            self.config[k] = self.options[k].check(k, self.name, v)
        self.space: Space | None = None
        self.rng: np.random.Generator | None = None

    def required_moves(self, space: Space | None = None) -> tuple[str, ...]:
        """The space moves this algorithm uses (on ``space``, where that changes them): ``needs``, plus those
        of the algorithms it wraps."""
        return union_moves(self.needs)

    def guidance_refusal(self) -> str | None:
        """Why this algorithm, or one it runs, cannot be the inner search of a cost-model-guided search;
        None when it can."""
        return self.unguided

    def check_space(self, space: Space) -> None:
        """Raise UsageError when ``space`` lacks a move this algorithm needs, naming the missing moves, the
        kinds of space it can search and what ``space`` offers. An algorithm whose choices depend on the
        space settles them here (bandit: its default arms), so that what a campaign stores is what runs."""
        offered = offered_moves(space)
        needed = self.required_moves(space)
        missing = [m for m in needed if m not in offered]
        if missing:
            name = self.name or type(self).__name__
            kinds = searchable_kinds(needed)
            where = (f"searches {kinds[0].replace(' (', ' only (', 1)}" if len(kinds) == 1 else
                     f"searches {', '.join(kinds[:-1])} and {kinds[-1]}" if kinds else
                     "searches no kind of space the tuning commands build")
            what = " and ".join(f"{m} ({TRAITS[m]})" if m in TRAITS else m for m in missing)
            raise UsageError(f"algorithm {name!r} {where}: it needs a space with {what}, and "
                             f"{type(space).__name__} offers {', '.join(offered)}")

    def bind(self, space: Space, rng: np.random.Generator, history: list[Measurement] = ()) -> SearchAlgorithm:
        """Attach to a space; ``history`` holds earlier measurements (a resumed campaign).

        Raises UsageError when the space lacks a move the algorithm needs (``check_space``)."""
        self.check_space(space)
        self.space = space
        self.rng = rng
        self.setup()
        if history:
            self.tell(list(history))
        return self

    def setup(self) -> None:
        """Initialise per-space state after ``bind`` set ``space`` and ``rng``."""

    @abstractmethod
    def ask(self, n: int) -> list[Candidate]:
        """Up to ``n`` candidates to evaluate next; [] when the space is exhausted."""

    def tell(self, results: list[Measurement]) -> None:
        """Feed back measurements (also of candidates this algorithm did not propose)."""

    def set_parallel(self, slots: int) -> None:
        """Told how many evaluations the campaign keeps in flight at once (1: one batch at a time)."""

    def state_dict(self) -> dict:
        """JSON-serialisable state, stored in the database after every batch."""
        return {"rng": self.rng.bit_generator.state if self.rng is not None else None}

    def load_state_dict(self, state: dict) -> None:
        if state.get("rng") is not None and self.rng is not None:
            self.rng.bit_generator.state = state["rng"]
