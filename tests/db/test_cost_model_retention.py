"""Stored cost models: only the latest of a campaign and pinned ones keep their weights; every
retrain keeps its row (training size and quality), and the weights are stored compressed."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from autotune.algorithms.model_guided import make_search
from autotune.campaign import Campaign
from autotune.cost_models.xgb import XGBCostModel
from autotune.db import open_database
from autotune.db.models import CostModelRow
from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace


@pytest.fixture
def db(db_url):
    d = open_database(db_url)
    yield d
    d.close()


def _rows(db):
    with db.session() as s:
        return [(r.id, len(r.data), r.pinned, r.n_samples, r.format)
                for r in s.scalars(select(CostModelRow).order_by(CostModelRow.id))]


def test_campaign_keeps_the_latest_model_and_every_retrain_row(db):
    space = ReplaySpace("example:pnpoly-rtx3090")
    Campaign("kept", space, make_search("evolutionary", "xgb"), ReplayRunner(space.cache), db, trials=60,
             batch=8).run()
    rows = _rows(db)
    assert len(rows) >= 3  # several retrains, each logged (7 at 60 trials)
    with_weights = [r for r in rows if r[1] > 0]
    assert [r[0] for r in with_weights] == [rows[-1][0]]  # the latest only
    assert all(r[4] == "json+zlib" for r in rows)
    assert [r[3] for r in rows] == sorted(r[3] for r in rows)  # the quality history stays, in order
    model, task, info = db.load_cost_model(campaign="kept")
    assert info["id"] == rows[-1][0] and task.name == space.task.name
    feats = space.features(list(space.enumerate())[:50])
    assert np.isfinite(model.predict(feats)).all()
    with pytest.raises(UsageError, match="superseded"):
        db.load_cost_model(model_id=rows[0][0])


def test_pinned_model_survives_newer_ones(db):
    space = ReplaySpace("example:pnpoly-rtx3090")
    m = XGBCostModel()
    cands = list(space.enumerate())[:64]
    m.fit(space.features(cands), np.linspace(1.0, 2.0, len(cands)))
    first = db.save_cost_model(m.name, m.save(), {"spearman": 0.5}, 64, space.task)
    assert db.pin_cost_model(first) is True
    second = db.save_cost_model(m.name, m.save(), {"spearman": 0.6}, 64, space.task)
    third = db.save_cost_model(m.name, m.save(), {"spearman": 0.7}, 64, space.task)
    sizes = {r[0]: r[1] for r in _rows(db)}
    assert sizes[first] > 0 and sizes[second] == 0 and sizes[third] > 0
    loaded, _, _ = db.load_cost_model(model_id=first)
    assert np.allclose(loaded.predict(space.features(cands)), m.predict(space.features(cands)))
    assert db.pin_cost_model(second) is False  # pinned too late: its weights are gone, the call says so
