"""What the dashboard makes of what it reads: JSON column values, and the names a request gives,
resolved as the command line resolves them (autotune.db.names)."""

from __future__ import annotations

import orjson

from autotune.db.names import UnknownName
from autotune.db.queries import resolve_filters
from autotune.errors import UsageError


class NotFound(UsageError):
    """A campaign or task that is not in the database; ``suggestions`` holds the closest names."""

    def __init__(self, what: str, name: str, suggestions: list[str], message: str | None = None):
        hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        super().__init__(message or f"unknown {what} {name!r}{hint}")
        self.suggestions = suggestions


def resolve_stored(db, kind: str, given: str) -> str:
    """The stored name (or key) a requested ``kind`` name stands for, by the command line's rules
    (:func:`autotune.db.queries.resolve_filters`): exact, case-insensitive, or a unique key prefix of
    6+ characters. A name matching nothing is NotFound with the closest stored names (404); a task name
    several tasks share is Ambiguous (400, with their keys as candidates); another ambiguous one (names
    differing only in case, a prefix of several keys) stays a UsageError (400)."""
    try:
        return resolve_filters(db, **{kind: given})[kind]
    except UnknownName as exc:
        raise NotFound(kind, given, exc.closest, message=str(exc)) from None


def json_value(v):
    """A JSON column value: SQLite may hand back text when the column is read without its type."""
    if isinstance(v, (str, bytes)):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v
