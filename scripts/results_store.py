"""Results of the benchmark scripts by key, kept in JSON files so that an interrupted run continues
where it stopped, and runs split over several processes (each with a file of its own) are reported
together (``--results FILE [MORE ...]`` of bench_search.py and bench_transfer.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from autotune.errors import UsageError


class ResultStore:
    """A dict of JSON values by string key. ``paths``: the file new values are written to, then files that
    are only read; each is read at start where it exists, an earlier file's value winning. ``measured`` counts
    the values computed in this run.

    After every new value the first file is read again and rewritten with what it holds and what this store
    holds, atomically (temporary file + os.replace) under a lock (``FILE.lock`` beside it, on systems with
    ``fcntl``): processes sharing one file keep each other's results (and reuse them), and a write cut short
    leaves the file as it was.

    ``keys``: a regular expression every key of the script's own results matches (``script`` names it in
    messages). A file that is not JSON, not an object, or holds a key that does not match (another script's
    results, a ``--json`` report) is refused with a UsageError before anything is measured, and left as it
    is: rewriting it with this run's results would mix the two. So is a first file in a folder that does not
    exist or cannot be written (found at the first result, after its measurement, otherwise), and one that is
    also the ``report`` (the script's --json file, written over it at the end)."""

    def __init__(self, paths: list[str] | None = None, keys: str | None = None, script: str = "this script",
                 report: str | None = None):
        paths = paths or []
        if report is not None and any(Path(report).resolve() == Path(p).resolve() for p in paths):
            raise UsageError(f"--json {report} is also a --results file: the report would overwrite the results; "
                             "name another file")
        self.path = Path(paths[0]) if paths else None
        self.data: dict = {}
        self.pattern, self.script = (re.compile(keys) if keys else None), script
        for p in reversed(paths):
            if Path(p).exists():
                self.data.update(_read(Path(p), self.pattern, script))
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
            value = compute(*args)
            self.measured += 1
            self._save(key, value)
        return self.data[key]

    def _save(self, key: str, value) -> None:
        if self.path is None:
            self.data[key] = value
            return
        with _locked(self.path):
            if self.path.exists():  # what other processes stored since (this store's values win: they are the same)
                self.data = _read(self.path, self.pattern, self.script) | self.data
            self.data[key] = value
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(self.data))
                os.replace(tmp, self.path)
            finally:
                tmp.unlink(missing_ok=True)  # Ctrl-C between the two: the file keeps the results before this one


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``PATH.lock`` while the block runs (none where there is no ``fcntl``)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path.with_name(f"{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, by the process's end too
        yield


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
