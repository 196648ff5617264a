"""The experiment database: SQLAlchemy models, the Database facade, queries to pandas, migrations."""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from autotune.db.database import Database
from autotune.errors import UsageError, argument

__all__ = ["Database", "open_database", "open_existing_database"]


def open_database(url: str = "sqlite:///autotune.db", create: bool = True) -> Database:
    """Open (and, when empty, create) an experiment database; bad or unreachable URLs raise UsageError. With
    ``create`` (a command that writes: a campaign, an import), an SQLite file this process cannot write is
    refused before any work starts; without it, such a file is opened read-only. An SQLite file of another
    program's (tables, and no autotune schema) is refused before anything connects to it, and left unchanged."""
    from autotune.db.engine import sqlite_file
    from autotune.db.migrate import check_schema, refuse_foreign_sqlite_file

    db = Database(url)  # nothing is connected yet
    file = sqlite_file(url)
    if file is not None:
        try:
            refuse_foreign_sqlite_file(db.safe_url, file)
        except BaseException:
            db.close()
            raise
    if create and db.read_only:
        db.close()
        raise UsageError(f"cannot write database {db.safe_url}: {db.read_only}; tuning and imports store into it "
                         f"(the query commands read it as it is); use a writable {argument('url', '--db')}")
    try:
        check_schema(db.engine, db.safe_url, create=create)
    except SQLAlchemyError as exc:
        db.close()
        # the driver's own message, without SQLAlchemy's statement echo and "Background on this error" link
        orig = getattr(exc, "orig", None)
        reason = (str(orig).strip().splitlines() or [""])[0] if orig is not None else str(exc).splitlines()[0]
        raise UsageError(f"cannot open database {db.safe_url}: {reason or type(orig).__name__}") from None
    except BaseException:
        db.close()
        raise
    return db


def open_existing_database(url: str, who: str = "this command") -> Database:
    """Open a database that must exist already: a malformed URL or a missing SQLite file is a UsageError
    naming ``who`` needs one, and nothing is created (a typo in --db does not leave an empty file behind)."""
    import os

    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - any parse failure is the same usage error
        from autotune.db.engine import malformed_url

        raise malformed_url(url) from None
    sqlite_file = parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")
    if sqlite_file and os.path.isdir(parsed.database):
        from autotune.db.engine import directory_error

        raise directory_error(url, parsed.database)
    if sqlite_file and not os.path.isfile(parsed.database):
        raise UsageError(f"no database file {parsed.database!r} ({who} reads an existing database; campaigns "
                         "create one)")
    return open_database(url, create=False)
