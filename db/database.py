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
import os
from collections.abc import Iterator

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autotune.db.campaign_admin import CampaignAdmin
from autotune.db.campaigns import CampaignRuns
from autotune.db.engine import locked_error, locked_text, make_engine, read_only_reason, sqlite_file
from autotune.db.graph_rules import GraphRules
from autotune.db.models import DeviceRow, TaskRow
from autotune.db.stored_models import StoredModels
from autotune.db.trial_store import TrialStore
from autotune.db.workers import CampaignWorkers
from autotune.errors import DatabaseError
from autotune.types import Device, Task

#: SQLite's "disk I/O error" of a write (SQLITE_FULL is the disk full alone: ENOSPC)
_WRITE_ERRORS = {"SQLITE_IOERR_WRITE", "SQLITE_IOERR_TRUNCATE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_SHMSIZE"}


def _why_a_write_fails() -> str:
    """The usual causes of a failed write other than a full disk, this process's file size limit first when it
    has one (``ulimit -f``: the write past it fails, where the disk still has room)."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        limit = None
    quota = "a disk quota reached, or the disk failing"
    if limit is None or limit == resource.RLIM_INFINITY:
        return quota
    return f"this process's file size limit, ulimit -f, of {limit} bytes reached; or {quota}"


class Database(CampaignRuns, TrialStore, GraphRules, CampaignWorkers, StoredModels, CampaignAdmin):
    """The experiment database. Use :func:`autotune.db.open_database` to open one (it checks the schema)."""

    def __init__(self, url: str):
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._ids: dict[tuple[str, str], int] = {}
        self.dialect = self.engine.dialect.name
        file = sqlite_file(url)
        self._file = os.path.abspath(file) if file else None
        #: why this process cannot write the SQLite file (it was opened read-only), else None
        self.read_only = read_only_reason(file) if file else None
        self._identity = self._file_identity()

    def _file_identity(self) -> tuple[int, int] | None:
        """(device, inode) of the SQLite file now; None when there is none (yet)."""
        try:
            st = os.stat(self._file) if self._file else None
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if st else None

    def _check_same_file(self) -> None:
        """Refuse to commit into an SQLite file that was deleted or replaced since this process opened it: the
        open connections would go on writing into the old file, and every later trial would vanish with it."""
        if self._file is None:
            return
        now = self._file_identity()
        if self._identity is None:  # created by this process's first connection
            self._identity = now
        elif now != self._identity:
            raise DatabaseError(f"the database file {self._file} was {'deleted' if now is None else 'replaced'} "
                                "while this process used it; nothing more is written (what was stored before "
                                "went with the old file)")

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """Commit on success, roll back on error, and turn database errors into DatabaseError."""
        s = self._sessions()
        try:
            yield s
            self._check_same_file()
            s.commit()
        except SQLAlchemyError as exc:
            s.rollback()
            orig = getattr(exc, "orig", None)
            raise DatabaseError(self._error_message(exc, orig)) from exc
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    def _error_message(self, exc: SQLAlchemyError, orig) -> str:
        """One line on a failed transaction (rolled back: nothing of it was stored), the usual causes in words."""
        text = str(orig)
        if "readonly database" in text:
            why = f" ({self.read_only})" if self.read_only else ""
            return (f"database {self.safe_url} is read-only here{why}: this command writes to it; the query "
                    "commands (trials, best, campaigns) read it")
        if locked_error(orig):
            return f"{locked_text(self.safe_url)}; try again once it ends"
        if "disk is full" in text:
            return (f"database {self.safe_url}: the disk is full; the last transaction was not stored (what was "
                    "stored before stays): free some space and run the command again")
        if getattr(orig, "sqlite_errorname", "") in _WRITE_ERRORS:
            return (f"database {self.safe_url}: the file could not be written ({_why_a_write_fails()}); the last "
                    "transaction was not stored (what was stored before stays)")
        return f"database error on {self.safe_url}: {exc.__class__.__name__}: {orig if orig is not None else exc}"

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
