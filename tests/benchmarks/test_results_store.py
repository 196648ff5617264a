"""scripts/results_store.py: a --results file that several processes write at once, or that a run stops writing
half-way, keeps every result it was given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_two_stores_on_one_file_keep_each_others_results(tmp_path, load_script):
    """Each store merges the file's results into its own before it writes: neither drops the other's."""
    ResultStore = load_script("results_store").ResultStore
    path = tmp_path / "r.json"
    first, second = ResultStore([str(path)]), ResultStore([str(path)])
    first.get("a", lambda: 1)
    second.get("b", lambda: 2)
    first.get("c", lambda: 3)
    assert json.loads(path.read_text()) == {"a": 1, "b": 2, "c": 3}
    assert second.get("a", pytest.fail) == 1  # what another process stored is reused, not measured again


WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from results_store import ResultStore
store = ResultStore([sys.argv[2]])
for i in range(40):
    store.get(f"{sys.argv[3]}{i}", lambda: i)
"""


def test_processes_writing_one_file_at_once_lose_nothing(tmp_path):
    path = tmp_path / "r.json"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(SCRIPTS), str(path), tag]) for tag in "xyz"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert json.loads(path.read_text()) == {f"{tag}{i}": i for tag in "xyz" for i in range(40)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.lock"]  # no temporary file left


def test_a_write_interrupted_half_way_leaves_the_file_as_it_was(tmp_path, monkeypatch, load_script):
    ResultStore = load_script("results_store").ResultStore
    path = tmp_path / "r.json"
    store = ResultStore([str(path)])
    store.get("a", lambda: 1)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.get("b", lambda: 2)
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.lock"]
