"""Database methods for stored cost models (mixed into Database): a trained model's bytes are kept for
the latest model of each campaign and for pinned ones; older ones keep their row (training size and
quality) without their weights. A kept model loads back with its class (``load_cost_model``)."""

from __future__ import annotations

import zlib

from sqlalchemy import and_, func, select, update

from autotune.db.engine import waits_out_locks
from autotune.db.models import CampaignRow, CostModelRow, DeviceRow, TaskRow, utcnow
from autotune.errors import UsageError, argument
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

    def load_cost_model(self, model_id: int | None = None, campaign: str | None = None):
        """A stored model (by id, or a campaign's latest) loaded with its class; returns (model, task, info), info
        naming its device; UsageError for stored weights that do not load (damaged, or written by something else)."""
        from autotune.cost_models.registry import MODEL_SPEC, stored_model_class

        if (model_id is None) == (campaign is None):
            raise UsageError(f"name a stored model with exactly one of {argument('model_id', '--model ID')} or "
                             f"{argument('campaign', '--campaign NAME')}")
        query = (select(CostModelRow, TaskRow, DeviceRow).outerjoin(TaskRow, TaskRow.id == CostModelRow.task_id)
                 .outerjoin(DeviceRow, DeviceRow.id == CostModelRow.device_id))
        if model_id is not None:
            query = query.where(CostModelRow.id == model_id)
        else:
            query = (query.where(CostModelRow.campaign_id == self.campaign(campaign).id, func.length(CostModelRow.data) > 0)
                     .order_by(CostModelRow.id.desc()).limit(1))
        with self.session() as s:
            found = s.execute(query).first()
        if found is None:
            what = f"model {model_id}" if model_id is not None else f"model of campaign {campaign!r}"
            raise UsageError(f"no stored {what}; `autotune models` lists them (campaigns guided by a cost model, "
                             f"{argument('cost_model')}, store one)")
        row, task_row, device_row = found
        if not row.data:
            raise UsageError(f"model {row.id} was superseded and its weights were not kept (only the latest model of "
                             "each campaign and pinned models keep theirs; `autotune models --pin ID` keeps one)")
        which = f"model {model_id}" if model_id is not None else f"the latest model of campaign {campaign!r}"
        try:
            cls = stored_model_class(row.name, row.metrics)  # one of the user's own by its stored "module:Class"
        except UsageError as exc:  # a cost model of the user's own that does not import here: not damage
            spec = (row.metrics or {}).get(MODEL_SPEC) if isinstance(row.metrics, dict) else None
            how = f"; it loads where {spec!r} imports (its module on PYTHONPATH or in the working directory)" if spec else ""
            raise UsageError(f"{which} is a {row.name!r} model, not one autotune can load ({exc}); its weights are "
                             f"intact{how}") from None
        try:
            model = cls.load(self.cost_model_bytes(row.data, row.format))
        except (zlib.error, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{which} cannot be read: its stored weights are damaged ({str(exc)[:100]}); "
                             "`autotune models` lists the others") from None
        task = Task(task_row.kind, task_row.name, task_row.params)
        device, props = (device_row.name, device_row.properties) if device_row is not None else (None, None)
        return model, task, {"id": row.id, "name": row.name, "n_samples": row.n_samples, "metrics": row.metrics,
                             "device": device, "device_properties": props, "task_id": row.task_id,
                             "device_id": row.device_id, "campaign_id": row.campaign_id}
