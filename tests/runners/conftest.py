"""Puts this folder on the import path, so the simulator tests' shared helpers (simulator_helpers.py) import
under every pytest import mode, importlib included."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
