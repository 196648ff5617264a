"""tune_kernel(transfer_from=...): the warm start's sources are chosen when the campaign starts and kept with it,
as the drivers keep theirs (autotune/transfer/sources.py)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_tuner_helpers import db_url
from sqlalchemy import delete, select

import autotune
from autotune.db.models import DeviceRow, TaskRow, TrialRow
from autotune.drivers.kernel_tuner import tune_kernel
from autotune.drivers.scale import join_campaign
from autotune.errors import UsageError
from autotune.types import Device, Measurement, Status, Task

# 8 configurations; a void function: the runner times it
KERNEL = """
void scale(float *out, const float *in, int n) {
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < n; i += chunk) out[i] = 2.0f * in[i];
}
"""
PARAMS = {"reps": [1, 2, 4, 8], "chunk": [1, 2]}
A, B = Device("Fake CPU A", "cpu", {}), Device("Fake CPU B", "cpu", {})


def scale_args(n=4096):
    return [np.zeros(n, dtype=np.float32), np.ones(n, dtype=np.float32), np.int32(n)]


def tune(url, **kw):
    return tune_kernel("scale", KERNEL, 4096, scale_args(), PARAMS, db=url, progress=False, **kw)


@pytest.fixture
def measured(tmp_path):
    """This CPU measured every configuration (a brute-force campaign): (database URL, the task, its trials)."""
    url = db_url(tmp_path)
    _, env = tune(url)
    db = autotune.open_database(url)
    with db.session() as s:
        row = s.scalar(select(TaskRow).where(TaskRow.key == env["task_key"]))
        task = Task(row.kind, row.name, row.params)
    history = [m for m, _ in db.campaign_history(db.campaign(env["campaign"]).id)]
    db.close()
    return url, task, history


def add_source(url, task, device, history, factor):
    """``device`` measured the task as this CPU did, ``factor`` times slower."""
    db = autotune.open_database(url)
    db.add_trials(task, device, [Measurement(m.candidate, Status.OK, cost=factor * m.cost) for m in history if m.ok])
    db.close()


def warm_from(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("warm start from: "))


def test_a_resumed_tune_kernel_warm_start_keeps_its_sources_and_refuses_them_gone(measured, capsys):
    url, task, history = measured
    add_source(url, task, A, history, 2.0)
    capsys.readouterr()
    name = "warm"
    _, env = tune(url, trials=4, transfer_from="auto", campaign=name)
    assert warm_from(capsys.readouterr().err) == f"warm start from: {A.name}"
    add_source(url, task, B, history, 3.0)  # auto would now choose B too
    _, env = tune(url, trials=6, transfer_from="auto", campaign=name)
    assert env["resumed"] and env["algorithm"].startswith("warm-start")
    assert warm_from(capsys.readouterr().err) == f"warm start from: {A.name}"
    db = autotune.open_database(url)
    assert list(db.campaign(name).options["recipe"]["sources"].values()) == [A.name]
    with db.session() as s:
        s.execute(delete(TrialRow).where(TrialRow.device_id == s.scalar(select(DeviceRow.id)
                                                                         .where(DeviceRow.name == A.name))))
    db.close()
    with pytest.raises(UsageError, match=f"was warm-started from '{A.name}'.*fresh=True"):
        tune(url, trials=8, transfer_from="auto", campaign=name)
    _, env = tune(url, trials=2, transfer_from="auto", campaign=name, fresh=True)  # chooses again
    assert not env["resumed"]
    assert warm_from(capsys.readouterr().err) == f"warm start from: {B.name}"
    with pytest.raises(UsageError, match="run that script again"):  # its recipe keeps only the sources
        join_campaign(name, url)


def test_tune_kernel_auto_that_found_no_source_resumes_its_ordinary_search(measured, capsys):
    """A device measured since does not turn the campaign `auto` started without a source into another."""
    url, task, history = measured
    _, env = tune(url, trials=4, transfer_from="auto")
    assert warm_from(capsys.readouterr().err).endswith("ordinary search")
    assert env["campaign"].endswith("-warm-start+evolutionary-seed0")  # the name of the search asked for
    add_source(url, task, A, history, 2.0)
    _, again = tune(url, trials=6, transfer_from="auto")
    assert again["resumed"] and again["campaign"] == env["campaign"]
    assert warm_from(capsys.readouterr().err).endswith("ordinary search")
