"""An interrupt Python drops still stops the campaign. A signal handler runs between two bytecodes wherever the main
thread is, and an exception raised inside a weakref callback or a finaliser is printed and dropped: a Ctrl-C, a
SIGTERM or Ray's cancel of a task (which runs the SIGINT handler) landing in one of SQLAlchemy's weakref callbacks
would be lost, and a cancelled campaign would run on on its Ray cluster. The campaign's handlers remember the
interrupt, and its next round raises it."""

from __future__ import annotations

import gc
import signal
import weakref

import pytest
from sqlalchemy import select

import autotune
from autotune.db import open_database
from autotune.db.models import TrialRow

SPACE = {"x": list(range(8)), "y": [0, 1, 2]}
CALLS: list[dict] = []


class _Box:
    pass


def _in_a_weakref_callback(handler) -> None:
    """Run the signal ``handler`` as a signal landing in a weakref callback runs it: what it raises is dropped."""
    box = _Box()
    ref = weakref.ref(box, lambda _: handler(signal.SIGINT, None))
    del box
    assert ref() is None


def objective(config):
    CALLS.append(dict(config))
    if len(CALLS) == 3:  # Ctrl-C during the first batch's third call, lost in a weakref callback
        _in_a_weakref_callback(signal.getsignal(signal.SIGINT))
    return (config["x"] - 3) ** 2 + config["y"] + 1.0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_dropped_in_a_weakref_callback_stops_the_campaign_at_its_next_round(tmp_path):
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        autotune.minimize(objective, SPACE, trials=12, batch=4, algorithm="random", cost_model=None, db=url,
                          campaign="lost", progress=False)
    gc.collect()
    assert len(CALLS) == 4  # the batch in which it landed ends, and no other starts
    db = open_database(url)
    try:
        row = db.campaign("lost")
        assert row.status == "interrupted" and db.campaign_workers(row.id) == []
        with db.session() as s:  # what the batch measured is stored
            assert len(s.scalars(select(TrialRow).where(TrialRow.campaign_id == row.id)).all()) == 4
    finally:
        db.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is Python's again after
