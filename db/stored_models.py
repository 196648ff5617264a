"""Database methods for stored cost models (mixed into Database): a trained model's bytes are kept for
the latest model of each campaign and for pinned ones; older ones keep their row (training size and
quality) without their weights."""

from __future__ import annotations

import zlib

from sqlalchemy import and_, func, select, update

from autotune.db.engine import waits_out_locks
from autotune.db.models import CampaignRow, CostModelRow, utcnow
from autotune.errors import UsageError
from autotune.types import Device, Task


class StoredModels:
    """Cost-model storage methods of the Database facade (which provides session, task_id, device_id)."""

    @waits_out_locks
    def save_cost_model(self, name: str, data: bytes, metrics: dict, n_samples: int, task: Task | None = None,
                        device: Device | None = None, campaign_id: int | None = None, fmt: str = "json") -> int:
        """Store a trained model and return its id.

        The model's bytes are kept for the latest model of each campaign (of each task and device for
        models outside a campaign) and for pinned ones (``pin_cost_model``): storing a newer model
        empties the bytes of the older unpinned ones, whose rows stay with their training size and
        quality, so the history of retrains costs a few hundred bytes each instead of a model each.
        The bytes are zlib-compressed (format ``FORMAT+zlib``; XGBoost's JSON shrinks about 3.5x at level 1,
        4x at level 6, which takes four times as long: a model is stored at every retrain).
        """
        task_id = self.task_id(task) if task else None
        device_id = self.device_id(device) if device else None
        row = CostModelRow(
            name=name, data=zlib.compress(data, 1), metrics=metrics, n_samples=n_samples, format=f"{fmt}+zlib",
            created=utcnow(), task_id=task_id, device_id=device_id, campaign_id=campaign_id,
        )
        table = CostModelRow.__table__
        with self.session() as s:
            s.add(row)
            s.flush()
            same = (table.c.campaign_id == campaign_id if campaign_id is not None else and_(
                table.c.campaign_id.is_(None), table.c.task_id.is_not_distinct_from(task_id),
                table.c.device_id.is_not_distinct_from(device_id), table.c.name == name))
            s.execute(update(table).where(same, table.c.id < row.id, table.c.pinned.is_(False),
                                          func.length(table.c.data) > 0).values(data=b""))
            return row.id

    @staticmethod
    def cost_model_bytes(data: bytes, fmt: str) -> bytes:
        """A stored model's bytes in its library's format (undoing the storage compression)."""
        return zlib.decompress(data) if fmt.endswith("+zlib") else data

    def pin_cost_model(self, model_id: int, pinned: bool = True) -> bool:
        """Mark a stored model kept (``pinned``) or no longer kept; returns whether it still has its
        weights (a model superseded before it was pinned keeps only its row). UsageError if none."""
        table = CostModelRow.__table__
        with self.session() as s:
            done = s.execute(update(table).where(table.c.id == int(model_id)).values(pinned=bool(pinned))).rowcount
            has_data = s.scalar(select(func.length(table.c.data) > 0).where(table.c.id == int(model_id)))
        if not done:
            raise UsageError(f"no stored model {model_id}; `autotune models` lists them")
        return bool(has_data)

    def campaign_recipe(self, campaign_id: int | None) -> dict:
        """How the campaign that stored a model was run (its driver's kind and arguments, ``{}`` when it kept
        none): a recorded space's valid points are those of the recording it names."""
        if campaign_id is None:
            return {}
        with self.session() as s:
            options = s.scalar(select(CampaignRow.options).where(CampaignRow.id == int(campaign_id)))
        return dict((options or {}).get("recipe") or {})
