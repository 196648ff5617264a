"""Importing tuning logs: the JSONL files ``autotune export`` writes (autotune.db.logs), checked line by line
and whole (a file cut short imports nothing), and Kernel Tuner caches as trials.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import select

from autotune.db.database import Database
from autotune.db.log_lines import BadLine, LineParser, need
from autotune.db.models import (
    AlgorithmStateRow,
    CampaignRow,
    CostModelRow,
    utcnow,
)
from autotune.errors import UsageError
from autotune.progress import Progress
from autotune.types import Device, Task


def count_lines(path: str | Path) -> int:
    """Lines of a file (a last line without a newline counts), read in binary chunks: a quick first pass
    that gives a progress bar its total."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


#: the file name that stands for standard input
STDIN = "-"


def _is_stream(path: Path) -> bool:
    """Whether ``path`` is read once, from start to end, rather than a file that can be read twice: standard
    input ('-'), or a pipe or device such as /dev/stdin or a shell's <(...)."""
    if str(path) == STDIN:
        return True
    try:
        return not path.is_file()
    except OSError:
        return False


def _source_name(path: Path) -> str:
    return "standard input" if str(path) == STDIN else str(path)


def jsonl_path(path: str | Path) -> Path:
    """``path`` as a Path when it is a file, '-' (standard input), or a pipe or device to read (/dev/stdin);
    UsageError otherwise."""
    path = Path(path)
    if str(path) == STDIN:
        return path
    try:
        found = path.is_file() or (path.exists() and not path.is_dir())
    except OSError:  # e.g. a name too long for the file system
        found = False
    if not found:
        raise UsageError(f"file {str(path)[:200]!r} does not exist; give a JSONL file written by autotune export")
    return path


@contextlib.contextmanager
def _open_text(path: Path) -> Iterator[io.TextIOBase]:
    """``path`` as UTF-8 text read line by line; standard input for '-', left open when done."""
    if str(path) != STDIN:
        with open(path, encoding="utf-8", errors="strict") as f:
            yield f
        return
    f = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict")
    try:
        yield f
    finally:
        f.detach()  # standard input stays open for whoever owns it


def import_file(db: Database, path: str | Path, batch: int = 5000,
                progress: Progress | None = None) -> tuple[int, int]:
    """Import a JSONL export in one transaction: every line is validated, and the trials are stored
    all together or not at all (a bad line, a file cut short, or a database error, leaves the database
    as it was). Trials already present (same task, device and candidate) are kept as they are, but for a
    stored failure that the file's trial measured again (``retry_failed``: its meta holds the earlier
    attempts), which that trial replaces. A campaign already present (of the same name, task and device) is
    kept too: the evaluations of its history in the file that it lacks are added after its own. Returns
    (trials read, trials added).
    ``progress``: a phase counting the file's lines (counted first when the bar is drawn).

    A file of "autotune-trials/1" lines (or any trial lines outside an export's first and last line)
    carries no histories: each trial is added to the history of its campaign as it is read."""
    path = jsonl_path(path)
    bar = progress or Progress("import", enabled=False)
    parser = LineParser()
    read = added = 0
    tid: dict[int, int] = {}
    did: dict[int, int] = {}
    cid: dict[str, tuple[int, int, int]] = {}
    new_campaigns: set[int] = set()  # created by this import: they take the file's algorithm states
    pending: list[dict] = []  # trial rows in the file's order, so that their ids follow it
    to_link: dict[tuple[int, int, int], list[str]] = {}  # (task, device, campaign): keys of trials outside an export
    segment: int | None = None  # lines read since an export's first line; None outside one
    # a stream is read once: its lines are not counted first, and the bar counts up without a total
    total = count_lines(path) if bar.shown and not _is_stream(path) else None
    with bar.phase(f"importing {path.name if str(path) != STDIN else 'standard input'}", total=total), \
            db.session() as s, _open_text(path) as f:

        def flush() -> None:
            nonlocal added
            # a trial measured again after failures (its meta holds them) replaces a stored failure of the same
            # point: the retried result is not lost to the failure it retried
            db.overwrite_failed(s, [r for r in pending if (r.get("meta") or {}).get("earlier")])
            added += db.insert_rows(s, pending)
            for (t, dv, c), keys in to_link.items():
                ids = db.trial_ids(s, t, dv, keys)
                db.link(s, c, [ids[k] for k in keys], [False] * len(keys))
            pending.clear()
            to_link.clear()

        def ids_of(task: Task, device: Device, camp: dict | None) -> tuple[int, int, int | None]:
            t, dv = tid.get(id(task)), did.get(id(device))  # parsed objects are shared by equal lines
            if t is None:
                t = tid[id(task)] = db.row_id_in(s, task)
            if dv is None:
                dv = did[id(device)] = db.row_id_in(s, device)
            if camp is None:
                return t, dv, None
            if camp["name"] not in cid:
                c, created = _campaign_in(db, s, camp, t, dv)
                cid[camp["name"]] = (c, t, dv)
                if created:
                    new_campaigns.add(c)
            c, ct, cd = cid[camp["name"]]
            need((ct, cd) == (t, dv), f"campaign {camp['name']!r} appears with two tasks or devices")
            return t, dv, c

        lineno = 0
        try:
            for lineno, text in enumerate(f, 1):
                if not text.strip():
                    continue
                kind, *item = parser.parse(text)
                if kind == "begin":
                    need(segment is None, "an export begins here before the one above it ended (that one was cut "
                                           "short)")
                    segment = 0
                    continue
                if kind == "end":
                    need(segment is not None, "an export's last line without its first line")
                    need(item[0] == segment, f"the export wrote {item[0]} lines here and the file has {segment}: "
                                              "lines were taken out or added")
                    segment = None
                    continue
                if segment is not None:
                    segment += 1
                if kind == "task":
                    tid.setdefault(id(item[0]), db.row_id_in(s, item[0]))
                    continue
                if kind == "device":
                    did.setdefault(id(item[0]), db.row_id_in(s, item[0]))
                    continue
                if kind == "model":
                    _model_in(db, s, item[0], tid, did, cid)
                    continue
                if kind == "history":
                    task, device, camp, links, state = item
                    t, dv, c = ids_of(task, device, camp)
                    if state is not None and c in new_campaigns:
                        _state_in(db, s, c, state)
                    flush()  # the trials it names are stored first
                    ids = db.trial_ids(s, t, dv, [k for k, _ in links])
                    gone = next((k for k, _ in links if k not in ids), None)
                    need(gone is None, f"the history of campaign {camp['name']!r} names trial {str(gone)[:64]!r}, "
                                        "which is in neither the file nor the database (the file was edited)")
                    db.link(s, c, [ids[k] for k, _ in links], [r for _, r in links])
                    bar.update(completed=lineno)
                    continue
                task, device, camp, row = item
                t, dv, c = ids_of(task, device, camp)
                row.update(task_id=t, device_id=dv, campaign_id=c)
                pending.append(row)
                if c is not None and segment is None:
                    to_link.setdefault((t, dv, c), []).append(row["candidate_key"])
                read += 1
                if read % batch == 0:
                    flush()
                    bar.update(completed=lineno)
            flush()
            bar.update(completed=lineno)
        except BadLine as exc:
            raise UsageError(f"{_source_name(path)}:{lineno} is not a valid line of an autotune export: {exc}; "
                             "nothing was imported") from None
        except UnicodeDecodeError:
            raise UsageError(f"{_source_name(path)} is not UTF-8 text; give a JSONL file written by autotune export; "
                             "nothing was imported") from None
        if segment is not None:
            raise UsageError(f"{_source_name(path)} ends before the last line autotune export writes: the file was cut short "
                             "(an export or a copy stopped part-way); nothing was imported")
    db._ids.clear()  # ids cached earlier may name rows that a rolled-back import created
    return read, added


def _model_in(db: Database, s, m: dict, tid: dict, did: dict, cid: dict) -> None:
    """Store a cost model of the file unless the database has it (the same name, campaign, task, device,
    training size and creation time)."""
    t = None if m["task"] is None else tid.get(id(m["task"])) or db.row_id_in(s, m["task"])
    dv = None if m["device"] is None else did.get(id(m["device"])) or db.row_id_in(s, m["device"])
    c = None
    if m["campaign"] is not None:
        c = cid[m["campaign"]][0] if m["campaign"] in cid else \
            s.scalar(select(CampaignRow.id).where(CampaignRow.name == m["campaign"]))
        need(c is not None, f"the model names campaign {m['campaign'][:200]!r}, which is in neither the file nor "
                             "the database")
    table = CostModelRow.__table__
    same = s.scalar(select(table.c.id).where(
        table.c.name == m["name"], table.c.campaign_id.is_not_distinct_from(c), table.c.task_id.is_not_distinct_from(t),
        table.c.device_id.is_not_distinct_from(dv), table.c.n_samples == m["n_samples"],
        table.c.created == m["created"]).limit(1))
    if same is None:
        s.execute(table.insert().values(name=m["name"], task_id=t, device_id=dv, campaign_id=c, n_samples=m["n_samples"],
                                        metrics=m["metrics"], data=m["data"], format=m["format"], created=m["created"],
                                        pinned=m["pinned"]))


def _state_in(db: Database, s, campaign_id: int, state: dict) -> None:
    """Store a campaign's algorithm state, unless it has one (a resumed run goes on from it)."""
    table = AlgorithmStateRow.__table__
    s.execute(db._insert(table).values(campaign_id=campaign_id, state=state, updated=utcnow())
              .on_conflict_do_nothing(index_elements=["campaign_id"]))


def _campaign_in(db: Database, s, c: dict, task_id: int, device_id: int) -> tuple[int, bool]:
    """(the campaign's id, whether it was created), created when new with the status and times the file gives
    it (an older file's campaign: status "imported", its original creation time, updated now)."""
    row = s.scalar(select(CampaignRow).where(CampaignRow.name == c["name"]))
    created = row is None
    if row is None:
        row = CampaignRow(name=c["name"], task_id=task_id, device_id=device_id, algorithm=c["algorithm"],
                          options=c["options"], status=c["status"], created=c["created"],
                          updated=c["updated"] or utcnow())
        s.add(row)
        s.flush()
    elif (row.task_id, row.device_id) != (task_id, device_id):
        raise UsageError(f"campaign {c['name']!r} already exists in this database for another task or device; "
                         "nothing was imported")
    return row.id, created


def import_kt(db: Database, spec, batch: int = 5000,
              progress: Progress | None = None) -> tuple[Task, Device, int, int]:
    """Store every configuration of a Kernel Tuner cache (a path, ``example:NAME`` or a loaded KTCache) as a
    trial of its task and device, ``batch`` per transaction; ``progress``: a phase counting the cache's
    records as they are stored."""
    from autotune.runners.replay import record_measurement, replay_device
    from autotune.search_spaces.replay import KTCache
    from autotune.types import Candidate

    bar = progress or Progress("import-kt", enabled=False)
    cache = spec if isinstance(spec, KTCache) else KTCache.load(spec)
    task, device = cache.task(), replay_device(cache)
    worker = f"import-kt:{Path(cache.path).name}"
    records = list(cache.records.items())
    added = 0
    with bar.phase(f"importing {Path(cache.path).name}", total=len(records)):
        for i in range(0, len(records), batch):
            ms = [record_measurement(cache, Candidate(cache.config(values)), rec) for values, rec in records[i:i + batch]]
            added += db.add_trials(task, device, ms, worker=worker)
            bar.advance(len(ms))
    return task, device, len(records), added

