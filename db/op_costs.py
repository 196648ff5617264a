"""Graph op costs kept in the experiment database, as trials of task kind "op".

An op (its spec: op type, attributes, input and output shapes) is timed once per device,
ever: every graph search on that device, in any campaign, reuses the cost, and each
measurement is a trial like any other (queryable, exportable). A measurement is committed
as soon as it is made, so a killed search keeps the ops it timed. A timing that failed is
stored too, as a failed trial with its error (listed by ``autotune trials`` with the op
costs): every later search knows the op cannot be timed, and why, without timing it again.
"""

from __future__ import annotations

from sqlalchemy import select

from autotune.db.database import Database
from autotune.db.models import TaskRow, TrialRow
from autotune.runners.graph import OpCostCache, failure_text
from autotune.types import Device, Measurement, Task


class DatabaseOpCostCache(OpCostCache):
    """:class:`OpCostCache` over the op trials of one device (see ``runners.graph``): what it is given is stored."""

    def __init__(self, db: Database, device: Device, label: str = "cpu"):
        costs, failures, device_id = {}, {}, db.device_id(device)
        with db.session() as s:
            for key, status, cost, error in s.execute(
                    select(TrialRow.candidate_key, TrialRow.status, TrialRow.cost, TrialRow.error)
                    .join(TaskRow, TaskRow.id == TrialRow.task_id)
                    .where(TaskRow.kind == "op", TrialRow.device_id == device_id)):
                if cost is not None:
                    costs[key] = cost
                else:
                    failures[key] = failure_text(status, error)
        super().__init__(costs, failures)
        self.db, self.device, self.label = db, device, label

    def put(self, key: str, measurement: Measurement) -> None:
        super().put(key, measurement)
        op = measurement.candidate.payload.get("op", "op")
        self.db.add_trials(Task("op", op, {"device": self.label}), self.device, [measurement])
