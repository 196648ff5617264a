"""Database methods for a campaign's run (mixed into Database): open a campaign or resume the existing
one of that name, count what it measured and looked up (:class:`CampaignFigures`), and read back what a
resumed run needs: its row, its algorithm state, its history of evaluations (or only each one's cost, and
chosen trials by id), and what the other workers stored since a worker last looked."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func, or_, select

from autotune.db.models import (
    AlgorithmStateRow,
    CampaignRow,
    CampaignTrialRow,
    DeviceRow,
    TaskRow,
    TrialRow,
    row_to_measurement,
    utcnow,
)
from autotune.errors import UsageError, argument, check_campaign_name
from autotune.types import Device, Measurement, Status, Task


def _shown(value) -> str:
    """A task parameter or device property as a message shows it: a dict as k=v pairs, a list as its items."""
    if isinstance(value, dict):
        text = ",".join(f"{k}={_shown(v)}" for k, v in value.items())
    elif isinstance(value, list | tuple):
        text = " ".join(map(_shown, value))
    else:
        text = "unset" if value is None else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _differences(theirs, mine) -> str:
    """"NAME THEIRS, not MINE" for each top-level key whose value differs between two dicts (a campaign's task
    parameters or device properties against this run's)."""
    theirs, mine = dict(theirs or {}), dict(mine or {})
    keys = [*theirs, *(k for k in mine if k not in theirs)]
    parts = [f"{k} {_shown(theirs.get(k))}, not {_shown(mine.get(k))}" for k in keys if theirs.get(k) != mine.get(k)]
    return "; ".join(parts) or "the same values, stored under another key"


class CampaignFigures(NamedTuple):
    """What a campaign counts. Its *own* trials are the trials whose ``campaign_id`` is the campaign:
    the measurements its runs and workers made (each trial row has one campaign, so no measurement is
    counted by two campaigns, and the trial budget counts the same rows). Its *reused* evaluations are
    the links of its history to trials it did not measure (measured by another campaign, imported, or
    left by a deleted campaign): look-ups, free, reported apart."""

    trials: int  # own measurements, every run and worker
    reused: int  # look-ups of trials measured elsewhere
    errors: int  # own measurements that failed
    simulated_s: float  # simulated seconds of the own measurements
    best: Measurement | None  # the best own measurement
    best_including_reused: Measurement | None  # a reused trial better than ``best``, else None

    @property
    def evaluations(self) -> int:
        return self.trials + self.reused


def not_own():
    """A link's trial was not measured by the linking campaign (another's, an import's, a deleted one's)."""
    return or_(TrialRow.campaign_id.is_(None), TrialRow.campaign_id != CampaignTrialRow.campaign_id)


class CampaignRuns:
    """Campaign methods of the Database facade (which provides session, safe_url, _insert, task_id and device_id)."""

    def open_campaign(self, name: str, task: Task, device: Device, algorithm: str, options: dict) -> tuple[CampaignRow, bool]:
        """Create the campaign, or return the existing one of that name (resume). Returns (row, resumed)."""
        check_campaign_name(name)
        tid, did = self.task_id(task), self.device_id(device)
        with self.session() as s:
            res = s.execute(
                self._insert(CampaignRow)
                .values(name=name, task_id=tid, device_id=did, algorithm=algorithm, options=options,
                        status="running", created=utcnow(), updated=utcnow())
                .on_conflict_do_nothing(index_elements=["name"]).returning(CampaignRow.id)
            )
            created = res.first() is not None
            row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
        if row.task_id != tid or row.device_id != did:
            with self.session() as s:
                theirs = s.execute(select(TaskRow.name, TaskRow.key, DeviceRow.name, TaskRow.params,
                                          DeviceRow.properties).select_from(CampaignRow)
                                   .join(TaskRow, TaskRow.id == CampaignRow.task_id)
                                   .join(DeviceRow, DeviceRow.id == CampaignRow.device_id)
                                   .where(CampaignRow.id == row.id)).one()
            differs = []  # what differs, the campaign's against this run's (a task by its name and key)
            if row.task_id != tid:
                same_name = theirs[0] == task.name  # then the parameters that differ say which task is which
                params = f": {_differences(theirs[3], task.params)}" if same_name else ""
                differs.append(f"task {theirs[0]} [{theirs[1][:8]}], not {task.name} [{task.key[:8]}]{params}")
            if row.device_id != did:
                same_name = theirs[2] == device.name
                props = f": {_differences(theirs[4], device.properties)}" if same_name else ""
                differs.append(f"device {theirs[2]}, not {device.name}{props}")
            raise UsageError(
                f"campaign {name!r} already exists for another task or device ({'; '.join(differs)}); resume it "
                f"with the same task and device, or choose another {argument('campaign')} name"
            )
        if not created and row.algorithm != algorithm:  # its stored search state belongs to that algorithm
            raise UsageError(
                f"campaign {name!r} was run with algorithm {row.algorithm!r}, not {algorithm!r}; resume it with "
                f"the same algorithm, start it afresh ({argument('fresh=True', '--fresh')}), or choose another "
                f"{argument('campaign')} name"
            )
        return row, not created

    def campaign_is_for(self, name: str, task: Task, device: Device) -> bool | None:
        """Whether the campaign ``name`` is of ``task`` on ``device``; None when there is no such campaign."""
        with self.session() as s:
            keys = s.execute(
                select(TaskRow.key, DeviceRow.key).select_from(CampaignRow)
                .join(TaskRow, TaskRow.id == CampaignRow.task_id).join(DeviceRow, DeviceRow.id == CampaignRow.device_id)
                .where(CampaignRow.name == name)).first()
        return None if keys is None else tuple(keys) == (task.key, device.key)

    def campaign(self, name: str) -> CampaignRow:
        with self.session() as s:
            row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
            if row is None:
                names = s.scalars(select(CampaignRow.name).order_by(CampaignRow.id.desc()).limit(10)).all()
        if row is None:
            known = ", ".join(names) if names else "none yet"
            raise UsageError(f"unknown campaign {name!r}; campaigns in {self.safe_url}: {known}")
        return row

    def load_state(self, campaign_id: int) -> dict | None:
        with self.session() as s:
            row = s.get(AlgorithmStateRow, campaign_id)
            return dict(row.state) if row else None

    def campaign_history(self, campaign_id: int) -> list[tuple[Measurement, bool]]:
        """Every evaluation of the campaign in order, with whether it was reused from the database."""
        with self.session() as s:
            rows = s.execute(
                select(TrialRow, CampaignTrialRow.reused)
                .join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
                .where(CampaignTrialRow.campaign_id == campaign_id)
                .order_by(CampaignTrialRow.id)
            ).all()
        return [(row_to_measurement(t), bool(reused)) for t, reused in rows]

    def campaign_figures(self, campaign_id: int) -> CampaignFigures:
        """The figures of one campaign (by id), by the rule of :class:`CampaignFigures`."""
        with self.session() as s:
            n, sim, failed = s.execute(
                select(func.count(TrialRow.id), func.sum(TrialRow.simulated_s),
                       func.count(TrialRow.id).filter(TrialRow.status != Status.OK.value))
                .where(TrialRow.campaign_id == campaign_id)).one()
            best_row = s.scalars(select(TrialRow).where(TrialRow.campaign_id == campaign_id, TrialRow.cost.is_not(None))
                                 .order_by(TrialRow.cost, TrialRow.id).limit(1)).first()
            looked_up = select(TrialRow).join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id).where(
                CampaignTrialRow.campaign_id == campaign_id, not_own())
            reused = s.scalar(select(func.count()).select_from(looked_up.subquery()))
            reused_row = s.scalars(looked_up.where(TrialRow.cost.is_not(None))
                                   .order_by(TrialRow.cost, CampaignTrialRow.id).limit(1)).first()
        best = row_to_measurement(best_row) if best_row is not None else None
        better = reused_row is not None and (best_row is None or reused_row.cost < best_row.cost)
        figures = CampaignFigures(int(n or 0), int(reused or 0), int(failed or 0), float(sim or 0.0), best,
                                  row_to_measurement(reused_row) if better else None)
        assert figures.trials >= 0 and figures.reused >= 0 and 0 <= figures.errors <= figures.trials, figures
        return figures

    def campaign_objectives(self, campaign_id: int) -> list[tuple[int, str, float]]:
        """(trial id, candidate key, objective: its cost, inf when it failed) of every evaluation of the campaign
        in order, look-ups included, without reading the configurations back (decoding a large one, a
        strategy of hundreds of ops, takes about a millisecond: seconds over a long search)."""
        with self.session() as s:
            rows = s.execute(
                select(TrialRow.id, TrialRow.candidate_key, TrialRow.cost)
                .join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
                .where(CampaignTrialRow.campaign_id == campaign_id).order_by(CampaignTrialRow.id)
            ).all()
        return [(int(i), k, float(c) if c is not None else float("inf")) for i, k, c in rows]

    def measurements_by_id(self, trial_ids) -> dict[int, Measurement]:
        """The trials of these ids, as measurements."""
        ids = sorted({int(i) for i in trial_ids})
        with self.session() as s:
            rows = s.scalars(select(TrialRow).where(TrialRow.id.in_(ids))).all() if ids else []
            return {int(t.id): row_to_measurement(t) for t in rows}

    def others_since(self, campaign_id: int, after: int | None, worker: str) -> tuple[list[Measurement], int]:
        """Measurements other workers added to the campaign after link ``after`` (None: none, only the
        position now), and the last link's id: what a worker has not been told yet."""
        links = CampaignTrialRow.__table__
        with self.session() as s:
            last = s.scalar(select(func.max(links.c.id)).where(links.c.campaign_id == campaign_id)) or 0
            if after is None or last <= after:
                return [], max(last, after or 0)
            rows = s.execute(
                select(TrialRow).join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
                .where(CampaignTrialRow.campaign_id == campaign_id, CampaignTrialRow.id > after,
                       CampaignTrialRow.id <= last, CampaignTrialRow.reused.is_(False), TrialRow.worker != worker)
                .order_by(CampaignTrialRow.id)).scalars().all()
            return [row_to_measurement(t) for t in rows], last
