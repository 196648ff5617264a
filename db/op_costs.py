"""Graph op costs kept in the experiment database, as trials of task kind "op".

An op (its spec: op type, attributes, input and output shapes) is timed once per device,
ever: every graph search on that device, in any campaign, reuses the cost, and each
measurement is a trial like any other (queryable, exportable). A measurement is committed
as soon as it is made, so a killed search keeps the ops it timed.
"""

from __future__ import annotations

from autotune.db.database import Database
from autotune.db.queries import costs_by_key
from autotune.types import Device, Measurement, Task


class DatabaseOpCostCache:
    """``get(key)``/``put(key, seconds, measurement)`` over the op trials of one device (see ``runners.graph``)."""

    def __init__(self, db: Database, device: Device, label: str = "cpu"):
        self.db, self.device, self.label = db, device, label
        self.costs = costs_by_key(db, "op", db.device_id(device))

    def get(self, key: str) -> float | None:
        return self.costs.get(key)

    def put(self, key: str, seconds: float, measurement: Measurement | None = None) -> None:
        self.costs[key] = seconds
        if measurement is not None:
            op = measurement.candidate.payload.get("op", "op")
            self.db.add_trials(Task("op", op, {"device": self.label}), self.device, [measurement])
