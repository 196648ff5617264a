"""Where the benchmark scripts find the recorded tuning spaces when no --cache is given.

The replay data (one folder per kernel, one Kernel Tuner cache per GPU, e.g. ``gemm/RTX_3090.json.gz``)
lives in ``../shared/datasets/replay`` next to the repository root, or where ``$AUTOTUNE_REPLAY_DIR``
points.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DEFAULT_REPLAY_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "replay"


def replay_dir() -> Path:
    """The replay data folder; exits with status 2 and one sentence on stderr when it is missing."""
    folder = Path(os.environ.get("AUTOTUNE_REPLAY_DIR") or DEFAULT_REPLAY_DIR)
    if not folder.is_dir():
        print(f"error: the replay data folder {folder} does not exist; pass --cache FILE ... "
              "or set AUTOTUNE_REPLAY_DIR to the folder of recorded caches", file=sys.stderr)
        raise SystemExit(2)
    return folder


def replay_caches() -> list[str]:
    """Every recorded cache of the replay folder (KERNEL/GPU.json.gz), sorted."""
    return sorted(str(p) for p in replay_dir().glob("*/*.json.gz"))


def replay_groups() -> dict[str, list[str]]:
    """Every kernel folder of the replay data and its caches (KERNEL/GPU.json or .json.gz), sorted."""
    return {d.name: sorted(str(p) for p in d.glob("*.json*")) for d in sorted(replay_dir().iterdir()) if d.is_dir()}
