"""Results of the benchmark scripts by key, kept in a JSON file so that an interrupted run continues
where it stopped (``--results FILE`` of bench_search.py and bench_transfer.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path


class ResultStore:
    """A dict of JSON values by string key; with a path, read from it at start and rewritten
    atomically (temporary file + os.replace) after every new value. ``measured`` counts the values
    computed in this run."""

    def __init__(self, path: str | None = None):
        self.path = Path(path) if path else None
        self.data: dict = json.loads(self.path.read_text()) if self.path and self.path.exists() else {}
        self.measured = 0

    def get(self, key: str, compute, *args):
        """The stored value of ``key``, else ``compute(*args)``, stored."""
        if key not in self.data:
            self.data[key] = compute(*args)
            self.measured += 1
            self._save()
        return self.data[key]

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)
