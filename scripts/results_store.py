"""Results of the benchmark scripts by key, kept in JSON files so that an interrupted run continues
where it stopped, and runs split over several processes (each with a file of its own) are reported
together (``--results FILE [MORE ...]`` of bench_search.py and bench_transfer.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path


class ResultStore:
    """A dict of JSON values by string key. ``paths``: the file new values are written to (rewritten
    atomically, temporary file + os.replace, after every new value), then files that are only read; each
    is read at start where it exists, an earlier file's value winning. ``measured`` counts the values
    computed in this run."""

    def __init__(self, paths: list[str] | None = None):
        paths = paths or []
        self.path = Path(paths[0]) if paths else None
        self.data: dict = {}
        for p in reversed(paths):
            if Path(p).exists():
                self.data.update(json.loads(Path(p).read_text()))
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
