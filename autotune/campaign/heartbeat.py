"""The heartbeat of a campaign's worker: a thread that tells the other workers it is alive."""

from __future__ import annotations

import sys
import threading

from autotune.db.database import Database


class Heartbeat:
    """A thread that tells the other workers of the campaign that this one is alive."""

    def __init__(self, db: Database, campaign_id: int, worker: str):
        self.db, self.campaign_id, self.worker = db, campaign_id, worker
        self.stopped = threading.Event()
        self.db.heartbeat(campaign_id, worker)
        self.thread = threading.Thread(target=self._beat, name="autotune-heartbeat", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.db.HEARTBEAT_S):
            try:
                self.db.heartbeat(self.campaign_id, self.worker)
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the campaign goes on
                print(f"autotune: heartbeat failed ({exc}); retrying", file=sys.stderr)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
