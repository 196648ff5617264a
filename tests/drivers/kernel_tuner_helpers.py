"""What the tune_kernel tests share: the bundled Kernel Tuner examples, and the trials a campaign logged."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import autotune

EXAMPLES = Path(__file__).parent / "kt_examples"
REPO = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("NVCC"),
                                reason="nvcc (CUDA toolkit) is not installed")


def db_url(tmp_path, name="kt.db"):
    return f"sqlite:///{tmp_path / name}"


def trials_of(url, campaign):
    db = autotune.open_database(url)
    try:
        return autotune.queries.trials(db, campaign=campaign)
    finally:
        db.close()
