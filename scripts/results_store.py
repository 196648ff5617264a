"""Results of the benchmark scripts by key, kept in JSON files so that an interrupted run continues
where it stopped, and runs split over several processes (each with a file of its own) are reported
together (``--results FILE [MORE ...]`` of bench_search.py and bench_transfer.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from autotune.errors import UsageError


class ResultStore:
    """A dict of JSON values by string key. ``paths``: the file new values are written to (rewritten
    atomically, temporary file + os.replace, after every new value), then files that are only read; each
    is read at start where it exists, an earlier file's value winning. ``measured`` counts the values
    computed in this run.

    ``keys``: a regular expression every key of the script's own results matches (``script`` names it in
    messages). A file that is not JSON, not an object, or holds a key that does not match (another script's
    results, a ``--json`` report) is refused with a UsageError before anything is measured, and left as it
    is: rewriting it with this run's results would mix the two. So is a first file in a folder that does not
    exist or cannot be written (found at the first result, after its measurement, otherwise)."""

    def __init__(self, paths: list[str] | None = None, keys: str | None = None, script: str = "this script"):
        paths = paths or []
        self.path = Path(paths[0]) if paths else None
        self.data: dict = {}
        pattern = re.compile(keys) if keys else None
        for p in reversed(paths):
            if Path(p).exists():
                self.data.update(_read(Path(p), pattern, script))
        if self.path is not None:
            folder = self.path.parent
            if self.path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
                why = "is a folder" if self.path.is_dir() else (
                    f"is in a folder that does not exist ({folder})" if not folder.is_dir() else
                    f"is in a folder that cannot be written ({folder})")
                raise UsageError(f"--results file {self.path} {why}; name a file in a writable folder")
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
        try:
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)  # Ctrl-C between the two: the file keeps the results before this one


def _read(path: Path, pattern: re.Pattern | None, script: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--results file {path} cannot be read as a results file ({exc}); name another "
                         "file, or move this one away to start afresh") from None
    if not isinstance(data, dict):
        raise UsageError(f"--results file {path} holds a JSON {type(data).__name__}, not the results "
                         f"(a JSON object) {script} writes; name another file")
    if pattern is not None:
        other = next((k for k in data if not pattern.match(k)), None)
        if other is not None:
            raise UsageError(f"--results file {path} holds results that are not {script}'s (key {other!r}); "
                             "name a file of its own (it is left as it is)")
    return data
