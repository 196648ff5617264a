"""The Space interface: every search algorithm works on every space that offers its moves."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np

from autotune.types import Candidate, Task


class Space(ABC):
    """A search space for one task.

    Required: ``sample`` and ``features``. The other moves are optional (a space offers
    one by overriding its method); an algorithm declares the moves it needs and binding it
    to a space that lacks one raises ``UsageError`` naming them.
    """

    task: Task

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Candidate:
        """A uniformly random valid point."""

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        """A random local move from ``c`` (MCMC, annealing)."""
        raise NotImplementedError(f"{type(self).__name__} offers no neighbor move")

    def crossover(self, a: Candidate, b: Candidate, rng: np.random.Generator) -> Candidate:
        """A child of two parents (evolutionary search)."""
        raise NotImplementedError(f"{type(self).__name__} offers no crossover")

    def children(self, c: Candidate | None) -> Iterator[Candidate]:
        """Successors of a partial or complete point in a tree search; ``None`` is the root."""
        raise NotImplementedError(f"{type(self).__name__} offers no children")

    def saturate(self, **limits) -> list[Candidate]:
        """Equality saturation: every point the space's rewrites reach from ``initial()``, held at once (an
        e-graph), and the cheapest points in it by the space's own cost, best first; ``limits`` bound the
        work (the space documents them)."""
        raise NotImplementedError(f"{type(self).__name__} offers no equality saturation")

    def is_complete(self, c: Candidate) -> bool:
        """Whether ``c`` is a point that can be measured (tree searches also visit partial ones)."""
        return True

    def initial(self) -> Candidate | None:
        """The default, unoptimised point, if the space has one."""
        return None

    @abstractmethod
    def features(self, cs: list[Candidate]) -> np.ndarray:
        """Cost-model rows, one per candidate, of a fixed width for this space."""

    def size(self) -> int | None:
        """Number of valid points, or ``None`` when unbounded or unknown."""
        return None

    def enumerate(self) -> Iterator[Candidate]:
        """Every valid point in a fixed order (grid search)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be enumerated")

    def contains(self, c: Candidate) -> bool:
        """Whether ``c`` is a valid point of this space."""
        return True

    def candidate(self, config) -> Candidate:
        """Build a candidate from a user-given configuration (validated)."""
        return Candidate(config)
