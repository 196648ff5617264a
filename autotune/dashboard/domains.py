"""The dashboard's reads of cost models, graph rewrites, parallel strategies and tasks: the views that
belong to one kind of campaign or to the task, not to every campaign.

A mixin of :class:`autotune.dashboard.data.DashboardData`, which provides ``db``, ``_campaign_row``,
``summary_of`` and ``_cached``.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import Text, cast, func, or_, select

from autotune.dashboard.analysis import strategy_layout, transfer_of
from autotune.dashboard.paging import like_literal
from autotune.dashboard.rows import NotFound, resolve_stored
from autotune.db.names import one_task
from autotune.dashboard.rows import json_value as _json
from autotune.dashboard.summary import as_text
from autotune.db.models import CampaignRow, CampaignTrialRow, CostModelRow, DeviceRow, TaskRow, TrialRow

T, L = TrialRow.__table__, CampaignTrialRow.__table__


class DomainReads:
    """Reads of one kind of campaign (graph rewrites, parallel strategies), of cost models and of tasks."""

    def cost_models(self, name: str | None = None, limit: int = 5000) -> dict:
        """Stored cost models (their training size, quality metrics and time, not their bytes), of one
        campaign or of all; the latest ``limit``."""
        query = (select(CostModelRow.id, CostModelRow.name, CampaignRow.name, TaskRow.name, TaskRow.key, DeviceRow.name,
                        CostModelRow.n_samples, CostModelRow.metrics, CostModelRow.created)
                 .outerjoin(CampaignRow, CampaignRow.id == CostModelRow.campaign_id)
                 .outerjoin(TaskRow, TaskRow.id == CostModelRow.task_id)
                 .outerjoin(DeviceRow, DeviceRow.id == CostModelRow.device_id))
        if name is not None:
            c, _, _ = self._campaign_row(name)
            query = query.where(CostModelRow.campaign_id == c.id)
        with self.db.session() as s:
            rows = s.execute(query.order_by(CostModelRow.id.desc()).limit(limit)).all()
        models = [{"id": i, "model": m, "campaign": camp, "task": t, "task_key": tk, "device": d, "n_samples": n,
                   "metrics": _json(metrics) or {}, "created": as_text(created)}
                  for i, m, camp, t, tk, d, n, metrics, created in reversed(rows)]
        return {"models": models}

    def _trial_rows(self, ids: list[int]) -> dict:
        with self.db.session() as s:
            return {r.id: r for r in s.execute(select(T).where(T.c.id.in_(ids))).all()} if ids else {}

    def graph(self, name: str) -> dict:
        """A graph campaign's rewrites: the best graph's sequence of rule applications and each rule's
        count, the initial graph's cost, and how often each rule appears in the 50 best graphs."""
        c, task, device = self._campaign_row(name)
        summ, _ = self.summary_of(c.id)

        def compute() -> dict:
            member = select(L.c.id).where(L.c.campaign_id == c.id, L.c.trial_id == T.c.id).exists()
            with self.db.engine.connect() as conn:
                top = conn.execute(select(T.c.id, T.c.cost, T.c.candidate).where(
                    T.c.task_id == task.id, T.c.device_id == device.id, T.c.cost.is_not(None), member)
                    .order_by(T.c.cost, T.c.id).limit(50)).all()
                first = select(L.c.trial_id).where(L.c.campaign_id == c.id).order_by(L.c.id).limit(1000)
                initial = conn.execute(select(T.c.id, T.c.cost).where(  # the initial graph: among the first trials
                    T.c.id.in_(first), cast(T.c.candidate, Text).in_(["[]", "[ ]"])).limit(1)).first()
            usage = Counter()
            for _, _, cand in top:
                usage.update({s[0] for s in (_json(cand) or []) if isinstance(s, list) and s})
            best = None
            if top:
                steps = [s for s in (_json(top[0][2]) or []) if isinstance(s, list) and s]
                best = {"trial": top[0][0], "cost": top[0][1], "steps": steps,
                        "rule_counts": dict(Counter(s[0] for s in steps).most_common())}
            return {"best": best, "initial": None if initial is None else {"trial": initial[0], "cost": initial[1]},
                    "top_rule_usage": dict(usage.most_common()), "top_n": len(top)}

        return self._cached(("graph", c.id), summ.version, compute)

    def parallel(self, name: str) -> dict:
        """A parallel campaign's strategies: the best one's layout (each operator's parallel degrees and
        the devices it occupies, from its ``start`` device), its memory figures, and the strategy at
        each improvement of the search (devices used per operator), the strategy timeline."""
        c, _, _ = self._campaign_row(name)
        summ, _ = self.summary_of(c.id)

        def compute() -> dict:
            points = list(summ.all.points)
            if len(points) > 200:  # the timeline keeps the last 200 improvements
                points = points[-200:]
            rows = self._trial_rows([p["trial"] for p in points])
            timeline = []
            for p in points:
                r = rows.get(p["trial"])
                if r is not None:
                    timeline.append({"n": p["n"], "trial": p["trial"], "cost": p["cost"],
                                     "layout": strategy_layout(_json(r.candidate))})
            best = None
            if points and points[-1]["trial"] in rows:
                r = rows[points[-1]["trial"]]
                cand = _json(r.candidate) or {}
                best = {"trial": r.id, "cost": r.cost, "meta": _json(r.meta) or {}, "devices": cand.get("devices"),
                        "model": cand.get("model"), "layout": strategy_layout(cand)}
            return {"best": best, "timeline": timeline}

        return self._cached(("parallel", c.id), summ.version, compute)

    # tasks
    def tasks(self, q: str = "", limit: int = 100, offset: int = 0) -> dict:
        """A page of the tasks that have campaigns, by name, with their campaign counts and how many
        tasks there are (``total``); optionally those whose name, key or kind contains ``q``."""
        limit, offset = max(1, min(int(limit), 500)), max(0, int(offset))
        where = True
        if q:  # the text as it is: % and _ are no wildcards
            pat = f"%{like_literal(q)}%"
            where = or_(*(col.ilike(pat, escape="\\") for col in (TaskRow.name, TaskRow.key, TaskRow.kind)))
        counted = (select(TaskRow.key, TaskRow.kind, TaskRow.name, func.count(CampaignRow.id))
                   .join(CampaignRow, CampaignRow.task_id == TaskRow.id).where(where)
                   .group_by(TaskRow.id, TaskRow.key, TaskRow.kind, TaskRow.name))
        with self.db.session() as s:
            total = s.scalar(select(func.count()).select_from(counted.subquery()))
            rows = s.execute(counted.order_by(TaskRow.name, TaskRow.id).limit(limit).offset(offset)).all()
        return {"total": total, "offset": offset, "limit": limit,
                "tasks": [{"key": k, "kind": kind, "name": n, "campaigns": cnt} for k, kind, n, cnt in rows]}

    def task(self, key: str) -> dict:
        """A task (by key, or by name when one task has it): the devices that measured it compared by
        best cost, and its campaigns with what each transferred from other devices. ``key`` is resolved
        as the command line resolves ``--task``: a key, a name, a case-only difference of a name or a
        unique key prefix of 6+ characters; NotFound (404) with the closest names when nothing matches,
        and Ambiguous (400) naming the keys when several tasks share the name."""
        task = one_task(self.db, key) or one_task(self.db, resolve_stored(self.db, "task", key))
        if task is None:  # deleted between the two reads
            raise NotFound("task", key, [])
        with self.db.session() as s:
            max_trial = s.scalar(select(func.max(T.c.id))) or 0  # any new trial may change the comparison
            # the campaigns are read afresh (a few rows): their status changes with no new trial
            camps = s.execute(select(CampaignRow, DeviceRow.name).join(DeviceRow, DeviceRow.id == CampaignRow.device_id)
                              .where(CampaignRow.task_id == task.id).order_by(CampaignRow.id)).all()
        shown = self.db.running_status([(c.id, c.status) for c, _ in camps])  # "running" with no live worker: stopped
        campaigns = [{"name": c.name, "device": dname, "algorithm": c.algorithm, "status": shown[c.id],
                      "created": as_text(c.created), "transfer": transfer_of(c.algorithm, c.options or {}),
                      "options": c.options or {}} for c, dname in camps]
        return {"key": task.key, "kind": task.kind, "name": task.name, "params": task.params or {},
                "devices": self._cached(("task", task.id), max_trial, lambda: self._devices(task)),
                "campaigns": campaigns}

    def _devices(self, task: TaskRow) -> list[dict]:
        """The devices that measured ``task``, fastest first: best cost, trials and successes of each."""
        with self.db.session() as s:
            per_device = s.execute(
                select(T.c.device_id, func.min(T.c.cost), func.count(T.c.id), func.count(T.c.cost))
                .where(T.c.task_id == task.id).group_by(T.c.device_id)).all()
            devices = {d.id: d for d in s.execute(select(DeviceRow).where(
                DeviceRow.id.in_([r[0] for r in per_device]))).scalars().all()} if per_device else {}
        return sorted(
            ({"device": devices[d].name, "device_key": devices[d].key, "kind": devices[d].kind, "best_cost": best,
              "trials": n, "ok": ok, "properties": devices[d].properties or {}} for d, best, n, ok in per_device),
            key=lambda r: (r["best_cost"] is None, r["best_cost"] or 0.0))

