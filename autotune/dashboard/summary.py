"""A campaign's figures and convergence from one streamed scan of its history, kept up to date.

The scan reads the campaign's links in order (``campaign_trials.id``), SCAN_CHUNK rows per query, and
keeps only counters and the points where the best so far improves, so its memory does not grow with
the campaign. A campaign's history only grows, and its batches commit in link order (a campaign's
batches are serialised: SQLite has one writer, and on PostgreSQL ``record_batch`` locks the
campaign's row), so bringing a summary up to date reads only the links added since.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy import String, select, type_coerce

from autotune.db import Database
from autotune.db.models import CampaignTrialRow, TrialRow

#: history rows read per query of the scan
SCAN_CHUNK = 50_000

T, L = TrialRow.__table__, CampaignTrialRow.__table__


def as_text(v) -> str:
    """A time as text ('YYYY-MM-DD HH:MM:SS...'), whether the driver gave a datetime or text."""
    return v.isoformat(sep=" ") if isinstance(v, datetime) else ("" if v is None else str(v))


def seconds_between(a, b) -> float:
    """Seconds from created time ``a`` to ``b`` (datetimes, or their text as SQLite returns it)."""
    a, b = (x if isinstance(x, datetime) else datetime.fromisoformat(str(x)) for x in (a, b))
    return (b - a).total_seconds()


@dataclass
class Series:
    """Best-so-far of one sequence of evaluations: the points where it improves."""

    n: int = 0
    simulated_s: float = 0.0
    best: float | None = None
    best_trial: int | None = None
    points: list = field(default_factory=list)

    def extend(self, trials: list[int], costs: np.ndarray, simulated_s: np.ndarray, created: list, first) -> None:
        """Append evaluations in order: their trial ids, costs (inf for none), simulated seconds and
        creation times; a point per improvement, stamped with the latest creation time so far."""
        if not trials:
            return
        before = np.minimum.accumulate(np.concatenate(([np.inf if self.best is None else self.best], costs)))[:-1]
        cumulative = self.simulated_s + np.cumsum(simulated_s)
        for i in np.flatnonzero(costs < before).tolist():
            stamp = created[i]
            if self.points and self.points[-1]["stamp"] > stamp:  # a look-up made earlier: time runs on
                stamp = self.points[-1]["stamp"]
            self.points.append({"n": self.n + i + 1, "trial": trials[i], "cost": float(costs[i]),
                                "simulated_s": float(cumulative[i]), "created": as_text(stamp),
                                "elapsed_s": seconds_between(first, stamp), "stamp": stamp})
            self.best, self.best_trial = float(costs[i]), trials[i]
        self.n += len(trials)
        self.simulated_s = float(cumulative[-1])

    def public_points(self) -> list[dict]:
        return [{k: v for k, v in p.items() if k != "stamp"} for p in self.points]


@dataclass
class Summary:
    """Everything a single pass over a campaign's history in order gives, kept up to date."""

    campaign_id: int
    created: object = None  # the campaign's creation time: another campaign given the same id has another
    last_link: int = 0
    own: Series = field(default_factory=Series)
    all: Series = field(default_factory=Series)  # own and reused evaluations
    statuses: Counter = field(default_factory=Counter)  # of its own trials
    reused_statuses: Counter = field(default_factory=Counter)
    first_created: object = None
    last_created: object = None
    #: the figures hold the campaign's history as of the last read: False until a first read ends, and
    #: while a read has more than one chunk to catch up on (a reader that finds the lock taken by a
    #: mere freshness check may use them as they are)
    ready: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset(self, created=None) -> None:
        """Forget everything read (a campaign deleted and made again, created at ``created``)."""
        self.created, self.last_link, self.own, self.all = created, 0, Series(), Series()
        self.statuses, self.reused_statuses = Counter(), Counter()
        self.first_created = self.last_created = None
        self.ready = False

    @property
    def version(self) -> tuple:
        return self.created, self.last_link, self.all.n

    def update(self, db: Database) -> None:
        """Read the links added since the last update (all of them the first time), SCAN_CHUNK at a time."""
        created = type_coerce(T.c.created, String)  # compared and shown as stored: no per-row parsing
        if self.last_link == 0:
            self.ready = False
        while True:
            with db.engine.connect() as conn:
                rows = conn.execute(
                    select(L.c.id, T.c.id, T.c.campaign_id, T.c.status, T.c.cost, T.c.simulated_s, created)
                    .join(T, T.c.id == L.c.trial_id)
                    .where(L.c.campaign_id == self.campaign_id, L.c.id > self.last_link)
                    .order_by(L.c.id).limit(SCAN_CHUNK)).all()
            if rows:
                self._add(rows)
                self.last_link = rows[-1][0]
            if len(rows) < SCAN_CHUNK:
                self.ready = True
                return
            self.ready = False  # a backlog: more chunks to read

    def _add(self, rows) -> None:
        """Count one chunk of (link, trial, owner, status, cost, simulated_s, created) rows, vectorised."""
        _, trials, owners, statuses, costs, sims, created = (list(col) for col in zip(*rows))
        own = np.array([o == self.campaign_id for o in owners], dtype=bool)
        cost = np.array([np.inf if c is None else c for c in costs], dtype=float)
        sim = np.array([s or 0.0 for s in sims], dtype=float)
        if self.first_created is None:
            self.first_created = created[0]
        latest = max(created)
        if self.last_created is None or latest > self.last_created:
            self.last_created = latest
        self.statuses.update(itertools.compress(statuses, own))
        self.reused_statuses.update(itertools.compress(statuses, ~own))
        self.all.extend(trials, cost, np.where(own, sim, 0.0), created, self.first_created)  # look-ups: no time
        if own.all():
            self.own.extend(trials, cost, sim, created, self.first_created)
        else:
            keep = np.flatnonzero(own).tolist()
            self.own.extend([trials[i] for i in keep], cost[own], sim[own], [created[i] for i in keep],
                            self.first_created)
