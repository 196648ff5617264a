"""Where a model-guided search's candidates come from (:class:`ListedCandidates`, a mixin of
:class:`~autotune.algorithms.model_guided.ModelGuided`, which owns the state these methods read).

- A space of at most ``score_all`` points that can be listed is listed once, and the model scores every
  unseen point of it; a larger one is listed through a fixed random sample of ``sample`` points (by
  index where the space can index its points, else by one pass over its enumeration), its seed kept in
  the search's state so that a resumed search lists the same points.
- A space that cannot be listed (or any, with ``large="inner"``) is searched by a fresh copy of the inner
  algorithm against the first ensemble member's predicted costs: ``pool`` proposals, ``inner_batch`` at a
  time; every member scores the proposals once they are all in.
- Over the listed points: the design's spread points (each the farthest from every point seen) and the
  far picks of a stalled search.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.algorithms.base import offered_moves
from autotune.algorithms.batch_choice import far_picks, first_member_scores, member_scores
from autotune.algorithms.support import farthest, rank_scaled
from autotune.types import Candidate, Measurement, Status


class ListedCandidates:
    """The listed points of a model-guided search's space and the candidates scored from them.

    ``shared_listing``: a dict that searches of the same space share (a warm start's arms), holding the
    listing of the whole space (points, features, index by key: read, never changed) so that it is built
    once; None: a listing of its own. A sample of a large space is each search's own (its own seed)."""

    shared_listing: dict | None = None

    def _enumerated(self) -> bool:
        """Whether the space is scored exhaustively (at most ``score_all`` points, enumerable); if so its
        points and features are listed (once) and ``_unseen`` is refreshed from ``seen``, which another
        search may share."""
        size, limit = self.space.size(), int(self.config["score_all"])
        if size is None or "enumerate" not in offered_moves(self.space):
            return False
        if size > limit and (limit <= 0 or str(self.config["large"]) == "inner"):
            return False
        if self._all is None:
            shared = self.shared_listing if size <= limit else None  # a sample is each search's own
            listing = shared.get("whole") if shared is not None else None
            if listing is None:
                points = list(self.space.enumerate()) if size <= limit else \
                    self._sample_points(size, min(limit, int(self.config["sample"])))
                listing = (points, np.asarray(self.space.features(points), dtype=float),
                           {c.key: i for i, c in enumerate(points)})
                if shared is not None:
                    shared["whole"] = listing
            self._all, self._all_X, self._all_index = listing
        if self._unseen is None or self._synced_set is not self.seen or len(self.seen) < len(self._synced):
            self._unseen = np.array([c.key not in self.seen for c in self._all], dtype=bool)
            self._synced_set, self._synced = self.seen, set(self.seen)
        else:  # ``seen`` only grows: mark what was added since, not the whole space again
            new = self.seen - self._synced
            for k in new:
                i = self._all_index.get(k)
                if i is not None:
                    self._unseen[i] = False
            self._synced |= new
        return True

    def _sample_points(self, size: int, k: int) -> list[Candidate]:
        """``k`` distinct points drawn at random from a space of ``size`` (by index where the space can
        index its points, else in one pass over its enumeration)."""
        if self._sample_seed is None:
            self._sample_seed = int(self.rng.integers(2**63))
        rng = np.random.default_rng(self._sample_seed)
        point = getattr(self.space, "point", None)
        if point is not None:
            return [point(int(i)) for i in np.sort(rng.choice(size, k, replace=False))]
        out: list[Candidate] = []
        for i, c in enumerate(self.space.enumerate()):  # reservoir sampling
            if i < k:
                out.append(c)
            else:
                j = int(rng.integers(i + 1))
                if j < k:
                    out[j] = c
        return out

    def _scored_all(self) -> tuple[list[Candidate], np.ndarray] | None:
        if not self._enumerated():
            return None
        idx = np.flatnonzero(self._unseen)
        if len(idx) == 0:
            return [], np.zeros((1, 0))
        if self._all_scored_at != self.retrains:  # predictions change only when the model does
            self._all_scores = member_scores(self.cost_model, self._all_X, screen=True)
            self._all_scored_at = self.retrains
        return [self._all[i] for i in idx], self._all_scores[:, idx]

    def _scored_by_inner(self) -> tuple[list[Candidate], np.ndarray]:
        inner = type(self.inner)(**self.inner.config)
        inner.bind(self.space, np.random.default_rng(int(self.rng.integers(2**63))), self.history)
        a, b = self._calib
        found: dict[str, tuple[Candidate, np.ndarray]] = {}  # each unseen point and its feature row
        budget = int(self.config["pool"])
        while budget > 0:
            batch = inner.ask(min(int(self.config["inner_batch"]), budget))
            if not batch:
                break
            budget -= len(batch)
            X = self._features(batch)
            scores = first_member_scores(self.cost_model, X)
            inner.tell([Measurement(c, Status.OK, cost=float(math.exp(min(a * s + b, 700.0))))
                        for c, s in zip(batch, scores)])
            for j, c in enumerate(batch):
                if c.key not in self.seen:
                    found[c.key] = (c, X[j])
        self.inner_state = inner.state_dict()
        if not found:
            return [], np.zeros((1, 0))
        return [c for c, _ in found.values()], member_scores(self.cost_model, np.vstack([x for _, x in found.values()]))

    def _spread(self) -> Candidate | None:
        """Of 256 random unseen points of the enumerated space (``_enumerated``), the one farthest from
        every point seen: measured, pending or chosen, by this search or one sharing ``seen`` (support.farthest
        on per-feature ranks)."""
        if self._ranked is None:
            self._ranked = rank_scaled(self._all_X)
        idx = np.flatnonzero(self._unseen)
        if len(idx) == 0:
            return None
        thr = float(self.config["spread_avoid"])
        if thr < 1.0 and self._all_p_fail is not None:  # spread over what should run (set once the model trains)
            likely = idx[self._all_p_fail[idx] <= thr]
            idx = likely if len(likely) else idx
        pool = self.rng.choice(idx, size=min(256, len(idx)), replace=False)
        return self._all[farthest(self._ranked, pool, self._seen_rows())]

    def _seen_rows(self) -> list[int]:
        """Rows of the enumerated space of every point seen (measured, pending or chosen, by this search or
        one sharing ``seen``)."""
        return [self._all_index[k] for k in self.seen if k in self._all_index]

    def _stalled(self, n: int, enumerated: bool) -> int:
        """How many of ``n`` model slots go to far picks once the last ``stall`` results brought no better one
        (enumerated spaces only): ``stall_share`` of them, at least one; asked one point at a time, the share
        accumulates from ask to ask, so every fourth point (at 0.25) is a far pick."""
        stall = int(self.config["stall"])
        best, last = np.inf, 0
        for i, m in enumerate(self.history):
            if m.ok and m.cost < best:
                best, last = m.cost, i
        if stall <= 0 or not enumerated or len(self.history) - last < stall:
            self.far_carry = 0.0
            return 0
        if n >= 2:
            return max(1, round(float(self.config["stall_share"]) * n))
        self.far_carry += float(self.config["stall_share"])
        if self.far_carry < 1.0:
            return 0
        self.far_carry -= 1.0
        return 1

    def _far_from_seen(self, cands: list[Candidate], scores: np.ndarray, n: int, chosen: list[int]) -> list[int]:
        """Up to ``n`` far picks (batch_choice.far_picks) among the ``stall_pool`` best mean-scored candidates."""
        if n <= 0 or not cands:
            return []
        if self._ranked is None:
            self._ranked = rank_scaled(self._all_X)
        listed = [i for i, c in enumerate(cands) if c.key in self._all_index]  # the inner search's are not
        at = {i: j for j, i in enumerate(listed)}
        picks = far_picks(self._ranked, lambda j: self._all_index[cands[listed[j]].key],
                          scores[:, listed].mean(axis=0), n, int(self.config["stall_pool"]), self._seen_rows(),
                          [at[i] for i in chosen if i in at])
        return [listed[j] for j in picks]

    def _mark_seen(self, c: Candidate) -> None:
        self.seen.add(c.key)
        if self._unseen is not None and c.key in self._all_index:
            self._unseen[self._all_index[c.key]] = False
