"""SearchAlgorithm: the ask/tell interface every strategy implements.

Options are declared once, as a class attribute ``options`` mapping each name to an
:class:`Option` (default and one-line help); the constructor validates keyword
arguments against it, and ``autotune algorithms`` lists them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.base import Space
from autotune.types import Candidate, Measurement


@dataclass(frozen=True)
class Option:
    default: Any
    help: str


class SearchAlgorithm(ABC):
    """Ask for candidates, tell their measurements. ``ask`` returning [] means exhausted."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[dict[str, Option]] = {}
    #: whether ``ask`` never proposes a candidate twice (checked by the conformance suite)
    no_repeats: ClassVar[bool] = False
    #: the Space moves this algorithm needs ("sample", "neighbor", "crossover", "children", "enumerate")
    needs: ClassVar[tuple[str, ...]] = ("sample",)

    def __init__(self, **kwargs: Any):
        unknown = set(kwargs) - set(self.options)
        if unknown:
            valid = ", ".join(sorted(self.options)) or "none"
            raise UsageError(f"algorithm {self.name!r} has no option(s) {', '.join(sorted(unknown))}; valid: {valid}")
        self.config: dict[str, Any] = {k: o.default for k, o in self.options.items()}
        for k, v in kwargs.items():
            default = self.options[k].default
            if isinstance(default, (int, float)) and not isinstance(default, bool) and isinstance(v, str):
                v = type(default)(v)
            self.config[k] = v
        self.space: Space | None = None
        self.rng: np.random.Generator | None = None

    def bind(self, space: Space, rng: np.random.Generator, history: list[Measurement] = ()) -> "SearchAlgorithm":
        """Attach to a space; ``history`` holds earlier measurements (a resumed campaign)."""
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

    def state_dict(self) -> dict:
        """JSON-serialisable state, stored in the database after every batch."""
        return {"rng": self.rng.bit_generator.state if self.rng is not None else None}

    def load_state_dict(self, state: dict) -> None:
        if state.get("rng") is not None and self.rng is not None:
            self.rng.bit_generator.state = state["rng"]
