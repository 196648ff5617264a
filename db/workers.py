"""The workers of a campaign, in the database: who runs it, what each holds of its trial budget
(claims), which candidates each has reserved for measurement, and heartbeats.

A worker is one campaign run, HOST:PID:TOKEN. It reserves each candidate before measuring it
(``campaign_pending``: none is measured twice), claims from the trial budget before asking for
candidates (``campaign_claims``: the budget is met exactly), and refreshes its heartbeat; a dead
worker's claim is dropped and its reservations go to the next worker that claims.
``CampaignWorkers`` holds these methods of ``Database`` (db/database.py), which it is mixed into.
"""

from __future__ import annotations

import functools
import os
import socket
import uuid
import zlib
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from autotune.db.engine import waits_out_locks
from autotune.db.models import CHUNK, CampaignClaimRow, CampaignPendingRow, CampaignRow, TrialRow, utcnow
from autotune.errors import UsageError, argument
from autotune.runners.processes import process_alive
from autotune.types import Candidate


#: how a campaign with live workers is deleted, or renamed, anyway
FORCE = argument("Database.delete_campaign(name, force=True)", "`autotune campaigns delete --force`")
FORCE_RENAME = argument("Database.rename_campaign(old, new, force=True)", "`autotune campaigns rename --force`")


@functools.cache
def this_host() -> str:
    """The HOST of this process's workers: the host name and, where Linux tells them, a tag of the boot and the
    PID namespace, since only a process of this namespace can be judged by its PID. Containers of one host name
    (host networking) each have their own PIDs: by name alone, one would take another's workers for dead."""
    name = socket.gethostname()
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            where = f"{f.read().strip()}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return name
    return f"{name}#{zlib.crc32(where.encode()):08x}"


def worker_id(run: bool = False) -> str:
    """HOST:PID, this process; with ``run``, HOST:PID:TOKEN, one campaign run (several may share a process)."""
    return f"{this_host()}:{os.getpid()}" + (f":{uuid.uuid4().hex[:8]}" if run else "")


def _worker_is_dead(worker: str, heartbeat, now, grace_s: float) -> bool:
    """A worker is gone: a process of this host (and PID namespace) that no longer exists, or no heartbeat for
    ``grace_s``."""
    host, pid = (worker.split(":") + ["", ""])[:2]
    if host == this_host() and pid.isdigit() and not process_alive(int(pid)):
        return True
    return (now - heartbeat).total_seconds() > grace_s


class CampaignWorkers:
    """Database methods for the workers of a campaign (mixed into Database)."""

    HEARTBEAT_S = 10.0  # a running worker refreshes its heartbeat this often (Campaign starts the thread)
    CLAIM_GRACE_S = 60.0  # a worker not heard of for this long is presumed dead

    def _claim_in(self, s: Session, campaign_id: int, worker: str, want: int, budget: int | None, stored: int,
                  in_flight: int, now) -> tuple[int, list[Candidate]]:
        """Set ``worker``'s claim to ``in_flight`` plus what it may start next: at most ``want``, within
        ``budget`` less the ``stored`` trials and other live workers' claims (the caller holds the
        campaign's row: record_batch). Dead workers' claims are dropped, and the candidates they (or any
        worker without a live claim) reserved are reassigned to ``worker`` as the first part of the
        grant. Returns (granted, adopted candidates)."""
        claims, pending = CampaignClaimRow.__table__, CampaignPendingRow.__table__
        rows = s.execute(select(claims.c.id, claims.c.worker, claims.c.n, claims.c.heartbeat)
                         .where(claims.c.campaign_id == campaign_id)).all()
        dead = [r for r in rows if r.worker != worker and _worker_is_dead(r.worker, r.heartbeat, now,
                                                                            self.CLAIM_GRACE_S)]
        dead_ids = {r.id for r in dead}
        if dead_ids:
            s.execute(claims.delete().where(claims.c.id.in_(dead_ids)))
        live = {r.worker for r in rows if r.id not in dead_ids} | {worker}
        others = sum(r.n for r in rows if r.worker != worker and r.id not in dead_ids)
        room = int(want) if budget is None else int(budget) - stored - others - int(in_flight)
        granted = max(0, min(int(want), room))
        adopted: list[Candidate] = []
        if granted:
            orphans = s.execute(select(pending.c.id, pending.c.candidate_key, pending.c.candidate)
                                .where(pending.c.campaign_id == campaign_id, pending.c.worker.not_in(live))
                                .order_by(pending.c.id).limit(granted)).all()
            if orphans:
                s.execute(update(pending).where(pending.c.id.in_([r.id for r in orphans]))
                          .values(worker=worker, claimed=now))
                adopted = [Candidate(r.candidate, r.candidate_key) for r in orphans]
        mine = [r for r in rows if r.worker == worker]
        n = int(in_flight) + granted
        if not (mine and mine[0].n == n == 0):  # nothing held, nothing asked: no write needed
            s.execute(self._insert(claims).values(campaign_id=campaign_id, worker=worker, n=n, heartbeat=now)
                      .on_conflict_do_update(index_elements=["campaign_id", "worker"], set_={"n": n, "heartbeat": now}))
        return granted, adopted

    @waits_out_locks
    def reserve(self, campaign_id: int, worker: str, candidates: list[Candidate], limit: int | None = None,
                elsewhere: list[Candidate] | None = None, again: Iterable[str] = (),
                again_before: datetime | None = None) -> list[Candidate]:
        """Reserve candidates for ``worker`` to measure, in order, until ``limit`` are reserved; returns
        those it got: no other worker of the campaign has them reserved, and none is stored yet (a
        worker that stored one after this worker looked it up has also ended its reservation).

        ``elsewhere``, a list: a candidate that another campaign of the task and device reserved first is
        not reserved either, and is appended to it (that campaign stores it; this one looks it up later
        instead of measuring it again and losing the race to store it).

        ``again``: keys of candidates stored as failed that the caller measures again (``retry_failed``): their
        stored trial does not keep them from being reserved while it is still a failure stored before
        ``again_before`` (the run's start), checked in this transaction: one that another worker or campaign
        measured again since (stored later) is looked up instead, not measured a third time."""
        if not candidates or limit is not None and limit <= 0:
            return []
        pending, now = CampaignPendingRow.__table__, utcnow()
        rows = [{"campaign_id": campaign_id, "candidate_key": c.key, "candidate": c.payload, "worker": worker,
                 "claimed": now} for c in {c.key: c for c in candidates}.values()]
        got: set[str] = set()
        with self.session() as s:
            tid, did = s.execute(select(CampaignRow.task_id, CampaignRow.device_id)
                                 .where(CampaignRow.id == campaign_id)).one()
            if elsewhere is not None and self.dialect == "postgresql":
                # reservations of one task and device in turn, so each sees the campaigns' reservations before
                # it (SQLite serialises writers itself); the two-key form, apart from the schema's one-key lock
                s.execute(text("SELECT pg_advisory_xact_lock(:t, :d)"), {"t": tid, "d": did})
            for i in range(0, len(rows), CHUNK):
                stmt = self._insert(pending).on_conflict_do_nothing(index_elements=["campaign_id", "candidate_key"])
                for row in rows[i:i + CHUNK]:  # RETURNING with executemany is not portable: one row at a time
                    got.update(k for (k,) in s.execute(stmt.values(**row).returning(pending.c.candidate_key)))
                    if limit is not None and len(got) >= limit:
                        break
            if got:
                # the other campaigns' reservations are read before the stored trials: a worker storing a trial
                # deletes its reservation in the same transaction, and each statement sees what was committed
                # before it began (PostgreSQL's read committed), so a point stored between the two reads is
                # seen as reserved by the first or as stored by the second; read the other way round, it could
                # be seen as neither, and be measured twice
                first: set[str] = set()
                if elsewhere is not None:
                    first = self._reserved_first_elsewhere(s, campaign_id, tid, did, got)
                    elsewhere += [c for c in candidates if c.key in first]
                table, again = TrialRow.__table__, set(again)
                done = {k for k, status, created in self._rows_for_keys(
                            s.connection(), [table.c.candidate_key, table.c.status, table.c.created], tid, did,
                            got - first)
                        if not (k in again and status != "OK" and again_before is not None
                                and created < again_before)} | first
                if done:
                    s.execute(pending.delete().where(pending.c.campaign_id == campaign_id, pending.c.worker == worker,
                                                     pending.c.candidate_key.in_(done)))
                    got -= done
        return [c for c in candidates if c.key in got]

    def _reserved_first_elsewhere(self, s: Session, campaign_id: int, task_id: int, device_id: int,
                                  keys: set[str]) -> set[str]:
        """Which of ``keys``, reserved by this campaign, a live worker of *another* campaign of the same task
        and device reserved first (the lower reservation id): it is measuring them, and a trial is stored
        once per task, device and configuration."""
        pending, claims, camps = CampaignPendingRow.__table__, CampaignClaimRow.__table__, CampaignRow.__table__
        ours = pending.alias("ours")
        since = utcnow() - timedelta(seconds=self.CLAIM_GRACE_S)
        keys, found = list(keys), set()
        for i in range(0, len(keys), CHUNK):
            found.update(s.scalars(
                select(pending.c.candidate_key)
                .join(camps, camps.c.id == pending.c.campaign_id)
                .join(claims, (claims.c.campaign_id == pending.c.campaign_id) & (claims.c.worker == pending.c.worker))
                .join(ours, (ours.c.campaign_id == campaign_id) & (ours.c.candidate_key == pending.c.candidate_key)
                      & (ours.c.id > pending.c.id))
                .where(camps.c.task_id == task_id, camps.c.device_id == device_id, camps.c.id != campaign_id,
                       claims.c.heartbeat > since, pending.c.candidate_key.in_(keys[i:i + CHUNK]))).all())
        return found

    def set_campaign_run(self, campaign_id: int, budget: dict, recipe: dict | None = None) -> None:
        """Store the budget the campaign runs to now (its options' ``budget``), the one workers joining it take,
        and the recipe of the run that set it (when it has one), which a worker started later runs."""
        with self.session() as s:
            row = s.get(CampaignRow, campaign_id)
            if row is not None:
                row.options = {**(row.options or {}), "budget": budget, **({"recipe": recipe} if recipe else {})}

    @waits_out_locks
    def heartbeat(self, campaign_id: int, worker: str) -> None:
        """Tell the other workers that ``worker`` is alive (creates its claim row, holding nothing, if none)."""
        claims, now = CampaignClaimRow.__table__, utcnow()
        with self.session() as s:
            s.execute(self._insert(claims).values(campaign_id=campaign_id, worker=worker, n=0, heartbeat=now)
                      .on_conflict_do_update(index_elements=["campaign_id", "worker"], set_={"heartbeat": now}))

    @waits_out_locks
    def release_claim(self, campaign_id: int, worker: str) -> None:
        """Give back whatever ``worker`` still holds of the campaign: its claim and its reservations."""
        claims, pending = CampaignClaimRow.__table__, CampaignPendingRow.__table__
        with self.session() as s:
            s.execute(pending.delete().where(pending.c.campaign_id == campaign_id, pending.c.worker == worker))
            s.execute(claims.delete().where(claims.c.campaign_id == campaign_id, claims.c.worker == worker))

    def running_status(self, rows: list[tuple[int, str]]) -> dict[int, str]:
        """The status to show for each (campaign id, stored status): a campaign stored as "running" with no
        live worker is "stopped" (killed: SIGKILL or a lost machine leave no word; rerunning it resumes it). A
        worker is live as the claims judge it: heard of within CLAIM_GRACE_S and, on this host, its process
        still there (one killed here is seen at once, as ``autotune workers`` sees it)."""
        running = [cid for cid, status in rows if status == "running"]
        live: set[int] = set()
        if running:
            claims, now = CampaignClaimRow.__table__, utcnow()
            since = now - timedelta(seconds=self.CLAIM_GRACE_S)
            with self.engine.connect() as conn:
                for i in range(0, len(running), CHUNK):
                    live.update(r.campaign_id for r in conn.execute(
                        select(claims.c.campaign_id, claims.c.worker, claims.c.heartbeat).where(
                            claims.c.campaign_id.in_(running[i:i + CHUNK]), claims.c.heartbeat > since))
                        if not _worker_is_dead(r.worker, r.heartbeat, now, self.CLAIM_GRACE_S))
        return {cid: "stopped" if status == "running" and cid not in live else status for cid, status in rows}

    def campaign_workers(self, campaign_id: int) -> list[dict]:
        """The campaign's workers: name, claimed measurements, reserved candidates, last heartbeat, alive."""
        claims, pending, now = CampaignClaimRow.__table__, CampaignPendingRow.__table__, utcnow()
        with self.engine.connect() as conn:
            rows = conn.execute(select(claims.c.worker, claims.c.n, claims.c.heartbeat)
                                .where(claims.c.campaign_id == campaign_id).order_by(claims.c.id)).all()
            reserved = dict(conn.execute(select(pending.c.worker, func.count(pending.c.id))
                                         .where(pending.c.campaign_id == campaign_id).group_by(pending.c.worker)).all())
        return [{"worker": r.worker, "claimed": r.n, "reserved": reserved.get(r.worker, 0), "heartbeat": r.heartbeat,
                 "alive": not _worker_is_dead(r.worker, r.heartbeat, now, self.CLAIM_GRACE_S)} for r in rows]

    def refuse_live_workers(self, campaign_id: int, name: str, rename: bool = False) -> None:
        """UsageError naming the campaign's live workers, if it has any (before it is deleted, or ``rename``d:
        a running worker goes on naming the campaign by the name it was started with, in its summary and in
        the resume command a Ctrl-C prints, which would then start a new campaign of the old name)."""
        live = [w["worker"] for w in self.campaign_workers(campaign_id) if w["alive"]]
        if live:
            who = ", ".join(live[:3]) + (f" and {len(live) - 3} more" if len(live) > 3 else "")
            if rename:
                raise UsageError(f"campaign {name!r} has {len(live)} live worker(s) ({who}), which go on naming it "
                                 f"{name!r} (a Ctrl-C's resume command would start a new campaign of that name); "
                                 f"stop them first, or rename it anyway with {FORCE_RENAME}")
            raise UsageError(f"campaign {name!r} has {len(live)} live worker(s) ({who}); stop them first, "
                             f"or delete it anyway with {FORCE}")

    def pending_keys(self, campaign_id: int) -> dict[str, str]:
        """Reserved candidates of the campaign not yet stored: candidate key -> worker."""
        pending = CampaignPendingRow.__table__
        with self.engine.connect() as conn:
            return dict(conn.execute(select(pending.c.candidate_key, pending.c.worker)
                                     .where(pending.c.campaign_id == campaign_id)).all())
