"""Fuzzing every file reader and its command: generated malformed inputs end in a UsageError (exit 2
with one sentence from the CLI), never a traceback, and leave the database as it was.

Each target is bounded to a few seconds (max_examples); hypothesis keeps the examples that failed
in its database, so a failure found once is replayed first next time.
"""

from __future__ import annotations

import copy
import gzip
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.db.logs import export_lines, import_file, import_kt
from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.constraints import Constraint
from autotune.search_spaces.replay import KTCache, ReplaySpace
from autotune.testing.caches import turing_time, write_cache

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])
cli = CliRunner()

json_leaf = (st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True, allow_infinity=True)
             | st.text(max_size=12) | st.sampled_from(["CompilationFailedConfig", "", "*/", "\n#", "\\"]))
json_value = st.recursive(json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                          max_leaves=12)


def base_cache(tmp_path) -> dict:
    path = write_cache(tmp_path / "base.json.gz", "NVIDIA TITAN RTX", turing_time)
    with gzip.open(path, "rt") as f:
        return json.load(f)


def mutate(doc: dict, data) -> dict:
    """Replace or delete one field somewhere in the document (top level, tune_params, or a record)."""
    doc = copy.deepcopy(doc)
    where = data.draw(st.sampled_from(["top", "params", "record", "key"]))
    if where == "top":
        target = doc
    elif where == "params":
        target = doc["tune_params"]
    else:
        target = doc["cache"][data.draw(st.sampled_from(sorted(doc["cache"])))]
    if where == "key":
        target = doc["cache"]
    field = data.draw(st.sampled_from(sorted(target) + ["extra"]))
    if data.draw(st.booleans()):
        target.pop(field, None)
    else:
        target[field] = data.draw(json_value)
    return doc


def write_doc(path, doc, data) -> str:
    text = json.dumps(doc)  # NaN and Infinity are written as JSON does not allow, as Python writes them
    if data.draw(st.booleans(), label="corrupt the text"):
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(st.text(max_size=5))
    with gzip.open(path, "wt") as f:
        f.write(text)
    return str(path)


@FAST
@given(data=st.data())
def test_replay_cache_reader(tmp_path, data):
    doc = mutate(base_cache(tmp_path), data)
    path = write_doc(tmp_path / "fuzz.json.gz", doc, data)
    try:
        cache = KTCache.load(path)
        space = ReplaySpace(cache)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    import numpy as np

    cands = [space.sample(np.random.default_rng(0)) for _ in range(5)]
    for m in ReplayRunner(cache).measure(space.task, cands):
        assert m.status.value != "OK" or (m.cost is not None and math.isfinite(m.cost) and m.cost >= 0)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tune_replay_and_import_kt_commands(tmp_path, data):
    path = write_doc(tmp_path / "fuzz.json.gz", mutate(base_cache(tmp_path), data), data)
    url = f"sqlite:///{tmp_path / 'f.db'}"
    for args in (["tune", "replay", "--cache", path, "--trials", "5", "--cost-model", "none", "--no-progress"],
                 ["import-kt", path]):
        r = cli.invoke(app, [*args, "--db", url])
        assert r.exit_code in (0, 2), (args, r.output, r.exception)
        assert "Traceback" not in r.output
        if r.exit_code == 2:
            assert r.output.strip().startswith("error:") and len(r.output.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def trial_lines(tmp_path_factory):
    db = open_database(f"sqlite:///{tmp_path_factory.mktemp('lines') / 's.db'}")
    import_kt(db, "example:pnpoly-rtx3090")
    lines = [d for d in map(json.loads, export_lines(db)) if "candidate" in d][:30]  # trial lines alone
    db.close()
    for d in lines:
        d["campaign"] = {"name": "fz", "algorithm": "random", "options": {}, "created": "2026-01-01T00:00:00"}
    return lines


def counts(db):
    from sqlalchemy import func, select

    from autotune.db.models import CampaignRow, CampaignTrialRow, DeviceRow, TaskRow, TrialRow

    with db.session() as s:
        return [s.scalar(select(func.count()).select_from(m)) for m in (TrialRow, CampaignRow, CampaignTrialRow,
                                                                        TaskRow, DeviceRow)]


@FAST
@given(data=st.data())
def test_jsonl_import(tmp_path, trial_lines, data):
    lines = copy.deepcopy(trial_lines)
    i = data.draw(st.integers(0, len(lines) - 1))
    target = data.draw(st.sampled_from(["line", "task", "device", "campaign"]))
    obj = lines[i] if target == "line" else lines[i][target]
    field = data.draw(st.sampled_from(sorted(obj) + ["extra"]))
    obj[field] = data.draw(json_value)
    texts = [json.dumps(d) for d in lines]
    if data.draw(st.booleans()):
        texts[i] = texts[i][: data.draw(st.integers(0, len(texts[i])))]
    path = tmp_path / "f.jsonl"
    path.write_text("\n".join(texts) + "\n")
    db = open_database(f"sqlite:///{tmp_path / 'i.db'}")
    try:
        before = counts(db)
        try:
            read, _ = import_file(db, path)
            assert read >= len(lines) - 1
        except UsageError as exc:
            assert "nothing was imported" in str(exc)
            assert counts(db) == before
    finally:
        db.close()


TOKENS = ["a", "b", "1", "0", "9", "+", "-", "*", "/", "//", "%", "**", "(", ")", " ", "<", "<=", "==", "and",
          "or", "not", "if", "else", "min(", "max(", "log2(", "sqrt(", ",", "1e308", "__import__", ".", "[", "'",
          "lambda", ":"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(TOKENS), max_size=40), a=st.integers(-5, 5), b=st.integers(-5, 5))
def test_constraint_expressions(parts, a, b):
    try:
        result = Constraint("".join(parts), {"a", "b"})({"a": a, "b": b})
    except UsageError as exc:
        assert str(exc)
        return
    assert result in (True, False)


BASE_CLUSTER = {"name": "c", "nodes": 2, "per_node": 4, "intra_bw": 1e11, "inter_bw": 1e10,
                "device": {"name": "g", "flops_fp32": 1e13, "flops_fp16": 1e14, "memory_bytes": 1.6e10,
                           "mem_bandwidth": 9e11}}


@FAST
@given(data=st.data())
def test_cluster_files(tmp_path, data):
    from autotune.search_spaces.parallel.clusters import get_cluster

    doc = copy.deepcopy(BASE_CLUSTER)
    target = doc["device"] if data.draw(st.booleans()) else doc
    field = data.draw(st.sampled_from(sorted(target) + ["intra_latency", "op_times", "collectives"]))
    if data.draw(st.booleans()):
        target.pop(field, None)
    else:
        target[field] = data.draw(json_value | st.floats(-1e12, 1e12))
    suffix = data.draw(st.sampled_from([".json", ".yaml"]))
    text = json.dumps(doc)  # JSON is YAML too
    if data.draw(st.booleans()):
        text = text[: data.draw(st.integers(0, len(text)))]
    path = tmp_path / f"cluster{suffix}"
    path.write_text(text)
    try:
        cluster = get_cluster(str(path))
    except UsageError as exc:
        assert str(exc)
        return
    for v in (cluster.intra_bw, cluster.inter_bw, cluster.device.flops_fp32, cluster.device.mem_bandwidth):
        assert math.isfinite(v) and v > 0
    assert cluster.nodes >= 1 and cluster.per_node >= 1


_MODEL_BYTES: list[bytes] = []


def _small_model_bytes() -> bytes:
    if not _MODEL_BYTES:
        from autotune.search_spaces.graphs import model_zoo

        _MODEL_BYTES.append(model_zoo.build("squeezenet11", small=True).SerializeToString())
    return _MODEL_BYTES[0]


@FAST
@given(data=st.data())
def test_onnx_model_reader(data):
    pytest.importorskip("onnx", reason="ONNX models need the graphs extra (pip install 'autotune[graphs]')")
    from autotune.search_spaces.graphs.onnx_io import from_onnx

    raw = bytearray(_small_model_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    import onnx as _onnx

    try:
        model = _onnx.load_from_string(bytes(raw))
    except Exception:  # noqa: BLE001 - bytes that are not a protobuf: the reader says so (tested in tests/cli)
        return
    try:
        from_onnx(model)
    except UsageError as exc:
        assert str(exc)
