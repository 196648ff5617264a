"""The experiment database: SQLAlchemy models, the Database facade, queries to pandas, migrations."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError, SQLAlchemyError

from autotune.db.database import Database
from autotune.errors import UsageError

__all__ = ["Database", "open_database"]


def open_database(url: str = "sqlite:///autotune.db", create: bool = True) -> Database:
    """Open (and, when empty, create) an experiment database; bad or unreachable URLs raise UsageError."""
    from autotune.db.migrate import check_schema

    db = Database(url)
    try:
        check_schema(db.engine, db.safe_url, create=create)
    except OperationalError as exc:
        db.close()
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise UsageError(f"cannot open database {db.safe_url}: {reason}") from None
    except SQLAlchemyError as exc:
        db.close()
        raise UsageError(f"cannot open database {db.safe_url}: {exc}") from None
    except BaseException:
        db.close()
        raise
    return db
