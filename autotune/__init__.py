"""autotune: a search-and-autotuning engine for ML systems."""

from autotune.types import Candidate, Device, Measurement, Status, Task

__all__ = ["Candidate", "Device", "Measurement", "Status", "Task"]
__version__ = "0.1.0"
