"""Helpers of the dashboard's API tests: a JSON GET that checks the status, a campaign's history read
with plain SQL, the convergence points it implies, and a walk over every page of the trial table."""

from __future__ import annotations

import math

from sqlalchemy import create_engine, text


def get(client, path, expect=200, **params):
    r = client.get(f"/api/{path}", params=params)
    assert r.status_code == expect, r.text[:500]
    return r.json()


def history(url: str, name: str) -> list[tuple]:
    """(trial id, cost, own, simulated_s, status) of every evaluation of a campaign, in its order, read
    with plain SQL."""
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT t.id, t.cost, t.campaign_id = c.id, t.simulated_s, t.status FROM campaign_trials l "
            "JOIN campaigns c ON c.id = l.campaign_id JOIN trials t ON t.id = l.trial_id "
            "WHERE c.name = :n ORDER BY l.id"), {"n": name}).all()
    engine.dispose()
    return [(i, cost, bool(own), sim, st) for i, cost, own, sim, st in rows]


def expected_points(rows) -> list[tuple]:
    best, out = math.inf, []
    for n, (tid, cost, _, _, _) in enumerate(rows, 1):
        if cost is not None and cost < best:
            best = cost
            out.append((n, tid, cost))
    return out


def pages(client, name, limit, **filters) -> list[list[dict]]:
    out, after = [], None
    while True:
        page = get(client, "trials", campaign=name, limit=limit, **filters, **({"after": after} if after else {}))
        out.append(page["trials"])
        after = page["next"]
        if after is None:
            return out
        assert len(out) < 10_000
