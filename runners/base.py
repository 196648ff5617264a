"""The Runner interface: measure candidates of a task on one device.

A runner never raises for one bad candidate: every outcome is a Measurement with
a Status. It raises only when it cannot run at all (no device, bad task).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from autotune.types import Candidate, Device, Measurement, Task


class Runner(ABC):
    device: Device

    @abstractmethod
    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        """One Measurement per candidate, in the same order."""

    def close(self) -> None:
        """Release worker processes, contexts and files."""

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
