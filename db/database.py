"""The Database facade: one session context manager and get-or-create of devices and tasks, with its
parts mixed in, each in a module of its own:

- ``engine``: the engine of a URL (SQLite in WAL mode, or PostgreSQL)
- ``campaigns`` (CampaignRuns): open or resume a campaign, read its state and history
- ``trial_store`` (TrialStore): store a batch of trials with the campaign's links, look trials up
- ``workers`` (CampaignWorkers): claims, reservations and heartbeats of a campaign's workers
- ``stored_models`` (StoredModels): cost models kept and pinned
- ``campaign_admin`` (CampaignAdmin): a campaign's status, delete and rename
- ``graph_rules`` (GraphRules): graph substitution rules

SQLite (the default, WAL mode) and PostgreSQL run through the same code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autotune.db.campaign_admin import CampaignAdmin
from autotune.db.campaigns import CampaignRuns
from autotune.db.engine import make_engine
from autotune.db.graph_rules import GraphRules
from autotune.db.models import DeviceRow, TaskRow
from autotune.db.stored_models import StoredModels
from autotune.db.trial_store import TrialStore
from autotune.db.workers import CampaignWorkers
from autotune.errors import DatabaseError
from autotune.types import Device, Task

class Database(CampaignRuns, TrialStore, GraphRules, CampaignWorkers, StoredModels, CampaignAdmin):
    """The experiment database. Use :func:`autotune.db.open_database` to open one (it checks the schema)."""

    def __init__(self, url: str):
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._ids: dict[tuple[str, str], int] = {}
        self.dialect = self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """Commit on success, roll back on error, and turn database errors into DatabaseError."""
        s = self._sessions()
        try:
            yield s
            s.commit()
        except SQLAlchemyError as exc:
            s.rollback()
            raise DatabaseError(f"database error on {self.safe_url}: {exc.__class__.__name__}: {exc.orig if hasattr(exc, 'orig') else exc}") from exc
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    @property
    def safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    def _insert(self, model):
        return (pg_insert if self.dialect == "postgresql" else sqlite_insert)(model)

    # -- devices, tasks -----------------------------------------------------------------
    def _ensure(self, kind: str, obj: Device | Task) -> int:
        if (kind, obj.key) not in self._ids:
            with self.session() as s:
                self._ids[(kind, obj.key)] = self.row_id_in(s, obj)
        return self._ids[(kind, obj.key)]

    def row_id_in(self, s: Session, obj: Device | Task) -> int:
        """Id of the device's or task's row, inserted in session ``s`` if missing."""
        if isinstance(obj, Device):
            model, values = DeviceRow, {"name": obj.name, "kind": obj.kind, "properties": obj.properties}
        else:
            model, values = TaskRow, {"kind": obj.kind, "name": obj.name, "params": obj.params}
        s.execute(self._insert(model).values(key=obj.key, **values).on_conflict_do_nothing(index_elements=["key"]))
        return s.scalar(select(model.id).where(model.key == obj.key))

    def device_id(self, device: Device) -> int:
        return self._ensure("device", device)

    def task_id(self, task: Task) -> int:
        return self._ensure("task", task)
