"""The CostModel interface, with scikit-learn habits: fit, predict, save, load.

``predict`` returns a score where higher means faster. Models are serialised with
their library's own format (for XGBoost, its JSON/UBJ), never with pickle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

import numpy as np


class CostModel(ABC):
    name: str = ""

    @abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> Self:
        """Train on feature rows ``X`` and costs ``y`` (seconds; inf for failures); ``groups`` = task ids."""

    @abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        """A score per row: higher means predicted faster."""

    @abstractmethod
    def save(self) -> bytes:
        """Serialised model (no pickle)."""

    @classmethod
    @abstractmethod
    def load(cls, data: bytes) -> Self:
        """Inverse of ``save``."""
