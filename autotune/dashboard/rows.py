"""What the dashboard makes of what it reads: JSON column values, and names that are not in the database."""

from __future__ import annotations

import orjson

from autotune.errors import UsageError


class NotFound(UsageError):
    """A campaign or task that is not in the database; ``suggestions`` holds the closest names."""

    def __init__(self, what: str, name: str, suggestions: list[str]):
        hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {what} {name!r}{hint}")
        self.suggestions = suggestions


def json_value(v):
    """A JSON column value: SQLite may hand back text when the column is read without its type."""
    if isinstance(v, (str, bytes)):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v
