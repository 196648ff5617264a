"""What the dashboard reads from the experiment database, as JSON-ready dicts.

The dashboard must stay quick on a database of millions of trials while campaigns keep writing to
it, so no read here loads a campaign's trials whole:

- a campaign's figures (own measurements, look-ups, counts by status, best cost) and its
  convergence (only the points where the best so far improves) come from one streamed scan of its
  history, kept and brought up to date by reading only the links added since, so a live campaign
  costs a few new rows per refresh (summary.py);
- the trial table pages by keyset, and a filtered page looks at a bounded number of trials before it
  answers (paging.py);
- plots read a sample: the campaign's best trials plus random ones, drawn as random link ids
  (primary-key look-ups, not a sort of the whole campaign);
- per task, the devices are compared with one GROUP BY on the (task, device, cost) index (domains.py,
  with the cost models, graph rewrites and parallel strategies).

A campaign's *own* trials are those it measured (their ``campaign_id`` is the campaign); the other
trials of its history are *reused* look-ups of measurements made elsewhere, counted apart.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict

import numpy as np
from sqlalchemy import func, or_, select

from autotune.dashboard.analysis import dimensions, flatten, main_effects, transfer_of
from autotune.dashboard.domains import DomainReads
from autotune.dashboard.paging import decode_cursor, encode_cursor, like_literal, text_filter, trial_page
from autotune.dashboard.rows import NotFound, resolve_stored
from autotune.dashboard.rows import json_value as _json
from autotune.dashboard.summary import Series, Summary, as_text, seconds_between
from autotune.db import Database, open_existing_database
from autotune.db.models import CampaignRow, CampaignTrialRow, DeviceRow, TaskRow, TrialRow
from autotune.errors import UsageError
from autotune.types import Status

#: a text-filtered count is exact up to this many trials in the campaign (None above)
COUNT_LIMIT = 200_000
#: trials of the plots' sample, and how many of them are the campaign's best
SAMPLE_SIZE, SAMPLE_BEST = 2000, 200
#: rows a page of the trial table holds, at most
PAGE_MAX = 200
#: samples, importances and other per-campaign results kept between requests
CACHE_SIZE = 64

T, L = TrialRow.__table__, CampaignTrialRow.__table__


def open_dashboard_db(url: str) -> Database:
    """Open an existing experiment database for reading: a bad URL, a missing SQLite file or a
    database without the autotune schema is a UsageError (nothing is created)."""
    return open_existing_database(url, "the dashboard")


# -- the reads -------------------------------------------------------------------------------------
class DashboardData(DomainReads):
    """The dashboard's view of one database. Thread-safe: the web server calls it from its worker
    threads; per-campaign results are cached and keyed by the campaign's history (last link id and
    length), so they are recomputed only when the campaign has moved on."""

    def __init__(self, db: Database):
        self.db = db
        self._summaries: dict[int, Summary] = {}
        self._cache: OrderedDict[tuple, tuple] = OrderedDict()  # the latest CACHE_SIZE results
        self._lock = threading.Lock()

    # campaigns and their figures
    def _campaign_row(self, name: str):
        """(campaign, task, device) rows of the campaign ``name`` stands for: the stored name, else the
        one the command line would resolve it to (a case-only difference); NotFound with the closest
        names, or a UsageError for an ambiguous name."""
        found = self._campaign_by_name(name)
        if found is None:
            found = self._campaign_by_name(resolve_stored(self.db, "campaign", name))
        if found is None:  # deleted between the two reads
            raise NotFound("campaign", name, [])
        return found

    def _campaign_by_name(self, name: str):
        with self.db.session() as s:
            return s.execute(
                select(CampaignRow, TaskRow, DeviceRow).join(TaskRow, TaskRow.id == CampaignRow.task_id)
                .join(DeviceRow, DeviceRow.id == CampaignRow.device_id).where(CampaignRow.name == name)).first()

    def summary_of(self, campaign_id: int, wait: bool = True) -> tuple[Summary, bool]:
        """(the campaign's summary, whether it is complete), brought up to date first. A campaign deleted
        and made again (``--fresh``) starts over, though SQLite may give it the same id and link ids: its
        creation time tells it apart. Without ``wait``, a summary another thread holds is returned as it
        is: complete when it was read to the end (that thread is only checking for new links, or reading
        the last few), marked incomplete while its history is still being read (the start-up warm-up, a
        first visit, a backlog of more than one chunk)."""
        with self._lock:
            summ = self._summaries.setdefault(campaign_id, Summary(campaign_id))
        if not summ.lock.acquire(blocking=wait):
            return summ, summ.ready
        try:
            last_link = select(func.max(L.c.id)).where(L.c.campaign_id == campaign_id).scalar_subquery()
            with self.db.session() as s:
                created, last = s.execute(select(CampaignRow.created, last_link)
                                          .where(CampaignRow.id == campaign_id)).first() or (None, None)
            last = last or 0
            if last < summ.last_link or created != summ.created:
                summ.reset(created)
            if last > summ.last_link:
                summ.update(self.db)
            summ.ready = True
            return summ, True
        finally:
            summ.lock.release()

    def _cached(self, key: tuple, version, compute):
        """``compute()``, or its kept result while ``version`` is unchanged (the latest CACHE_SIZE kept)."""
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = compute()
        with self._lock:
            self._cache[key] = (version, value)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return value

    def _campaign_json(self, c: CampaignRow, task: TaskRow, device: DeviceRow, summ: Summary,
                       complete: bool = True) -> dict:
        statuses = dict(summ.statuses)  # a copy: another thread may be reading the history into it
        return {
            "name": c.name, "id": c.id, "task": task.name, "task_key": task.key, "task_kind": task.kind,
            "device": device.name, "device_key": device.key, "device_kind": device.kind, "algorithm": c.algorithm,
            "status": self.db.running_status([(c.id, c.status)])[c.id], "measured": summ.own.n, "reused": summ.all.n - summ.own.n, "evaluations": summ.all.n,
            "errors": sum(n for s, n in statuses.items() if s != "OK"), "best_cost": summ.own.best,
            "best_cost_including_reused": summ.all.best, "simulated_s": summ.own.simulated_s,
            "created": as_text(c.created), "updated": as_text(c.updated), "complete": complete,
        }

    def campaigns(self, q: str = "", limit: int = 100, offset: int = 0) -> dict:
        """A page of campaigns, most recently updated first, optionally those whose name, task or
        device contains ``q``."""
        limit, offset = max(1, min(int(limit), 500)), max(0, int(offset))
        where = True
        if q:  # the text as it is: % and _ are no wildcards
            pat = f"%{like_literal(q)}%"
            where = or_(*(col.ilike(pat, escape="\\") for col in (CampaignRow.name, TaskRow.name, DeviceRow.name,
                                                                    CampaignRow.algorithm)))
        base = (select(CampaignRow, TaskRow, DeviceRow).join(TaskRow, TaskRow.id == CampaignRow.task_id)
                .join(DeviceRow, DeviceRow.id == CampaignRow.device_id).where(where))
        with self.db.session() as s:
            total = s.scalar(select(func.count()).select_from(base.subquery()))
            rows = s.execute(base.order_by(CampaignRow.updated.desc(), CampaignRow.id.desc())
                             .limit(limit).offset(offset)).all()
        return {"total": total, "offset": offset, "limit": limit,
                "campaigns": [self._campaign_json(c, t, d, *self.summary_of(c.id, wait=False)) for c, t, d in rows]}

    def campaign(self, name: str) -> dict:
        """One campaign: its figures, options, counts by status and best trials."""
        c, task, device = self._campaign_row(name)
        summ, complete = self.summary_of(c.id, wait=False)
        out = self._campaign_json(c, task, device, summ, complete)
        best_ids = [i for i in (summ.own.best_trial, summ.all.best_trial) if i is not None]
        best = {}
        if best_ids:
            with self.db.session() as s:
                for r in s.execute(select(T).where(T.c.id.in_(best_ids))).all():
                    best[r.id] = self._trial_json(r, c.id)
        out.update({
            "options": c.options or {}, "task_params": task.params or {}, "device_properties": device.properties or {},
            "statuses": dict(summ.statuses), "reused_statuses": dict(summ.reused_statuses),
            "best": best.get(summ.own.best_trial), "best_including_reused": best.get(summ.all.best_trial),
            "transfer": transfer_of(c.algorithm, c.options or {}),
        })
        return out

    def convergence(self, name: str) -> dict:
        """Best-so-far where it improves, against the campaign's own trials and against all its
        evaluations (look-ups count as trials at no simulated time), each with simulated seconds and
        wall seconds since the campaign's first trial (by the trials' ``created`` time)."""
        c, _, _ = self._campaign_row(name)
        summ, complete = self.summary_of(c.id, wait=False)
        first, last = summ.first_created, summ.last_created

        def series(s: Series) -> dict:
            end = {"n": s.n, "simulated_s": s.simulated_s, "created": as_text(last),
                   "elapsed_s": seconds_between(first, last) if first is not None else 0.0}
            return {"points": s.public_points(), "end": end, "best": s.best, "best_trial": s.best_trial, "n": s.n}

        return {"campaign": c.name, "own": series(summ.own), "all": series(summ.all), "complete": complete}

    # the trial table
    @staticmethod
    def _trial_json(r, campaign_id: int) -> dict:
        cand = _json(r.candidate)
        return {"id": r.id, "status": r.status, "cost": r.cost, "candidate": cand, "reused": r.campaign_id != campaign_id,
                "error": (r.error or "")[:500], "simulated_s": r.simulated_s, "predicted": r.predicted,
                "created": as_text(r.created), "worker": r.worker, "repeats": len(_json(r.times) or []),
                "meta": _json(r.meta) or {}}

    def trials(self, name: str, sort: str = "id", status: str = "", q: str = "", after: str | None = None,
               limit: int = 50) -> dict:
        """One page of the campaign's trials (own and reused), sorted by ``sort`` (id, -id, cost, -cost;
        failures, which have no cost, come after every cost), filtered by ``status`` and text ``q``,
        starting after the cursor ``after``. ``next`` is the cursor of the following page (None at
        the end); ``partial`` says the page stopped after SCAN_LIMIT trials without filling up."""
        if sort not in ("id", "-id", "cost", "-cost"):
            raise UsageError(f"unknown sort {sort!r}; valid: id, -id, cost, -cost")
        if status:  # any case; an unknown status is a UsageError naming the valid ones
            status = Status.parse(status).value
        limit = max(1, min(int(limit), PAGE_MAX))
        c, task, device = self._campaign_row(name)
        summ, complete = self.summary_of(c.id, wait=False)
        cursor = decode_cursor(after) or {}
        filters = []
        if status:
            filters.append(T.c.status == status)
        if q.strip():
            filters.append(text_filter(q.strip()))
        with self.db.engine.connect() as conn:
            rows, nxt, partial = trial_page(conn, c.id, task.id, device.id, sort, cursor, filters, status, limit)
            count, exact = self._count(conn, c.id, summ, status, q, filters)
            exact = exact and complete
        return {"trials": [self._trial_json(r, c.id) for r in rows], "next": encode_cursor(nxt) if nxt else None,
                "partial": partial, "count": count, "count_exact": exact, "sort": sort}

    @staticmethod
    def _count(conn, cid: int, summ: Summary, status: str, q: str, filters: list) -> tuple[int | None, bool]:
        """How many trials the filters keep: from the summary when there is no text filter, counted
        in SQL for a campaign of at most COUNT_LIMIT trials, else unknown (None)."""
        if not q.strip():
            if not status:
                return summ.all.n, True
            s = status.upper()
            return summ.statuses.get(s, 0) + summ.reused_statuses.get(s, 0), True
        if summ.all.n > COUNT_LIMIT:
            return None, False
        n = conn.scalar(select(func.count()).select_from(T).join(L, L.c.trial_id == T.c.id)
                        .where(L.c.campaign_id == cid, *filters))
        return int(n or 0), True

    # samples for plots, and parameter importance
    def sample(self, name: str) -> dict:
        """At most SAMPLE_SIZE trials for the plots: the SAMPLE_BEST best, then random ones; each with its
        flattened configuration. Cached until the campaign moves on."""
        c, task, device = self._campaign_row(name)
        summ, _ = self.summary_of(c.id)
        return self._cached(("sample", c.id), summ.version, lambda: self._sample(c.id, task.id, device.id, summ))

    def _sample(self, cid: int, task_id: int, device_id: int, summ: Summary) -> dict:
        member = select(L.c.id).where(L.c.campaign_id == cid, L.c.trial_id == T.c.id).exists()
        with self.db.engine.connect() as conn:
            best = conn.execute(select(T).where(T.c.task_id == task_id, T.c.device_id == device_id,
                                                T.c.cost.is_not(None), member)
                                .order_by(T.c.cost, T.c.id).limit(SAMPLE_BEST)).all()
            seen = {r.id for r in best}
            want = SAMPLE_SIZE - len(best)
            if summ.all.n <= SAMPLE_SIZE:
                rnd = [r for r in conn.execute(select(T).join(L, L.c.trial_id == T.c.id).where(L.c.campaign_id == cid)
                                               .order_by(L.c.id).limit(SAMPLE_SIZE + 1)).all()
                       if r.id not in seen]
            else:
                rnd = self._random_trials(conn, cid, summ.all.n, want, seen)
        random.Random(0).shuffle(rnd)
        trials = []
        whole = summ.all.n <= SAMPLE_SIZE  # the whole campaign: no trial is singled out as best
        for r, is_best in [(r, not whole) for r in best] + [(r, False) for r in rnd[:want]]:
            trials.append({"id": r.id, "status": r.status, "cost": r.cost, "best": is_best,
                           "reused": r.campaign_id != cid, "params": flatten(_json(r.candidate)),
                           "meta": {k: v for k, v in (_json(r.meta) or {}).items() if isinstance(v, (int, float))}})
        return {"trials": trials, "params": dimensions(trials), "n": summ.all.n}

    @staticmethod
    def _random_trials(conn, cid: int, n: int, want: int, seen: set) -> list:
        """About ``want`` random trials of the campaign, drawn as random link ids between its first and
        last (index look-ups, oversampled by how densely its links fill that range)."""
        lo = conn.scalar(select(func.min(L.c.id)).where(L.c.campaign_id == cid))
        hi = conn.scalar(select(func.max(L.c.id)).where(L.c.campaign_id == cid))
        span = hi - lo + 1
        density = n / span
        rng = np.random.default_rng(hi)
        if density < 0.02:  # a campaign spread thin among others': let the database draw
            return conn.execute(select(T).join(L, L.c.trial_id == T.c.id).where(L.c.campaign_id == cid)
                                .order_by(func.random()).limit(want)).all()
        draw = min(span, int(want / density * 1.2) + 10)
        ids = np.unique(rng.integers(lo, hi + 1, size=draw)).tolist()  # with repeats, dropped: O(draw) memory
        out = []
        for i in range(0, len(ids), 500):
            # the campaign is checked on the rows, not in the WHERE clause: with it there, a planner may
            # walk the campaign's whole index instead of looking the ids up
            out += [r for r in conn.execute(select(T, L.c.campaign_id.label("link_campaign"))
                                            .join(L, L.c.trial_id == T.c.id).where(L.c.id.in_(ids[i:i + 500]))).all()
                    if r.link_campaign == cid and r.id not in seen]
        return out

    def importance(self, name: str) -> dict:
        """A main-effect share per parameter (fANOVA-style): the variance of log cost explained by each
        parameter alone, over the random part of the sample's successful trials."""
        c, _, _ = self._campaign_row(name)
        summ, _ = self.summary_of(c.id)
        sample = self.sample(name)
        return self._cached(("importance", c.id), summ.version, lambda: main_effects(sample["trials"]))

    def warm(self, stop: threading.Event) -> None:
        """Bring every campaign's summary up to date, most recently updated first (run at start-up in
        a background thread, so the first visit of a large campaign finds its figures ready)."""
        with self.db.session() as s:
            ids = s.scalars(select(CampaignRow.id).order_by(CampaignRow.updated.desc()).limit(10_000)).all()
        for cid in ids:
            if stop.is_set():
                return
            self.summary_of(cid)
