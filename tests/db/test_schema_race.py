"""Workers opening one fresh database at the same moment all succeed (the schema is created once)."""

import subprocess
import sys

from autotune.db import open_database
from autotune.db.migrate import current_revision, head_revision

OPEN_AND_WRITE = """
import sys
from autotune.db import open_database
from autotune.types import Device, Task
db = open_database(sys.argv[1])
db.task_id(Task("race", "t", {"worker": int(sys.argv[2])}))
db.device_id(Device("race-device", "cpu", {}))
db.close()
"""


def test_workers_started_together_on_a_fresh_database_all_succeed(db_url):
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AND_WRITE, db_url, str(i)], stderr=subprocess.PIPE,
                              text=True) for i in range(4)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert [r for r, _ in results] == [0, 0, 0, 0], [e[-600:] for r, e in results if r]
    db = open_database(db_url)
    try:
        assert current_revision(db.engine) == head_revision()
        from sqlalchemy import func, select

        from autotune.db.models import DeviceRow, TaskRow

        with db.session() as s:
            assert s.scalar(select(func.count()).select_from(TaskRow)) == 4
            assert s.scalar(select(func.count()).select_from(DeviceRow)) == 1
    finally:
        db.close()


def test_threads_opening_and_writing_a_fresh_sqlite_file_at_once_all_succeed(tmp_path):
    """A connection opened while another holds the file for the schema waits to switch it to WAL."""
    import threading

    from autotune.types import Task

    errors = []
    for attempt in range(40):
        url = f"sqlite:///{tmp_path / f'fresh{attempt}.db'}"

        def work(i):
            try:
                db = open_database(url)
                for k in range(10):
                    db.task_id(Task("race", "t", {"thread": i, "k": k}))
                db.close()
            except Exception as exc:  # noqa: BLE001 - collected and reported below
                errors.append(repr(exc))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []
