"""The trial table's pages: keyset paging over a campaign's trials, bounded however rare a filter's
matches are.

Sorted by id, a page walks the campaign's (campaign_id, trial_id) link index; sorted by cost, the
(task, device, cost) index of the trials, keeping the campaign's (an EXISTS on the link index).
Either way a page with filters looks at no more than SCAN_LIMIT index entries: when it found too few
matches there it answers with what it has, ``partial``, and a cursor that goes on from where it
stopped. The cursor is the sort key of the last row seen, as opaque URL-safe text.
"""

from __future__ import annotations

import base64
import json
import math
import re

import orjson
from sqlalchemy import Text, and_, cast, or_, select

from autotune.db.models import CampaignTrialRow, TrialRow
from autotune.errors import UsageError

#: trials a filtered page looks at, at most, before it answers
SCAN_LIMIT = 20_000

T, L = TrialRow.__table__, CampaignTrialRow.__table__


def encode_cursor(d: dict) -> str:
    """A page cursor (the sort key of the last row seen) as URL-safe text."""
    return base64.urlsafe_b64encode(orjson.dumps(d)).decode().rstrip("=")


def _cursor_ok(d) -> bool:
    """Whether ``d`` has a cursor's shape: a trial id ``i`` (an integer) and a cost ``c`` (a finite number,
    with ``i``, or null), each optional."""
    if not isinstance(d, dict):
        return False
    i, c = d.get("i"), d.get("c")
    if "i" in d and type(i) is not int:
        return False
    return c is None or (type(c) in (int, float) and math.isfinite(c) and "i" in d)


def decode_cursor(text: str | None) -> dict | None:
    """The cursor ``encode_cursor`` made (None for none); UsageError for anything else."""
    if not text:
        return None
    try:
        d = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if _cursor_ok(d):
            return d
    except (ValueError, orjson.JSONDecodeError):
        pass
    raise UsageError(f"bad page cursor {text[:40]!r}")


def like_literal(text: str) -> str:
    """``text`` for a LIKE pattern with escape character backslash: its % and _ match themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def json_inner(text: str) -> str:
    """``text`` as it reads inside a JSON string, as the configurations are stored: a quote as \\", a
    backslash doubled, other characters (non-ASCII included) as they are."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def text_filter(q: str):
    """Trials whose configuration (as JSON text), error or status contains ``q`` (any case);
    ``name=value`` also matches a configuration entry (``"name":value`` in its JSON), whatever
    characters the name holds."""
    cand = cast(T.c.candidate, Text)
    pat = f"%{like_literal(q)}%"
    anywhere = [cand.ilike(pat, escape="\\"), T.c.error.ilike(pat, escape="\\"), T.c.status.ilike(pat, escape="\\")]
    if json_inner(q) != q:  # a quote or a backslash: written escaped in the configuration's JSON
        anywhere.append(cand.ilike(f"%{like_literal(json_inner(q))}%", escape="\\"))
    m = re.fullmatch(r"\s*([^=]*[^=\s])\s*=\s*(.+?)\s*", q)
    if m:
        k, v = (like_literal(json_inner(x)) for x in m.groups())
        pats = [f'%"{k}":{v}%', f'%"{k}": {v}%', f'%"{k}":"{v}"%', f'%"{k}": "{v}"%']
        return or_(*[cand.ilike(p, escape="\\") for p in pats], *anywhere)
    return or_(*anywhere)


def id_page(conn, cid: int, desc: bool, cursor: dict, filters: list, limit: int):
    """A page in trial-id order through the campaign's links ((campaign_id, trial_id) index); with
    filters, among the next SCAN_LIMIT links at most."""
    key = L.c.trial_id
    keyset = [key < cursor["i"] if desc else key > cursor["i"]] if "i" in cursor else []
    order = key.desc() if desc else key
    edge = None
    if filters:  # the SCAN_LIMIT-th link on: a rare match must not read the whole campaign
        edge = conn.scalar(select(key).where(L.c.campaign_id == cid, *keyset).order_by(order).limit(1)
                           .offset(SCAN_LIMIT - 1))
    window = [] if edge is None else [key >= edge if desc else key <= edge]
    rows = conn.execute(select(T).join(L, L.c.trial_id == T.c.id).where(L.c.campaign_id == cid, *keyset, *window,
                                                                        *filters)
                        .order_by(order).limit(limit + 1)).all()
    if len(rows) > limit:
        return rows[:limit], {"i": rows[limit - 1].id}, False
    return (rows, {"i": edge}, True) if edge is not None else (rows, None, False)


def cost_page(conn, cid: int, task_id: int, device_id: int, desc: bool, cursor: dict, filters: list, limit: int):
    """A page in (cost, id) order of the campaign's trials with a cost: a walk of the (task, device,
    cost) index keeping the campaign's trials, among the next SCAN_LIMIT index entries at most (other
    campaigns of the task and device may hold most of them)."""
    member = select(L.c.id).where(L.c.campaign_id == cid, L.c.trial_id == T.c.id).exists()
    on_index = [T.c.task_id == task_id, T.c.device_id == device_id, T.c.cost.is_not(None)]
    keyset = []
    if cursor.get("c") is not None:
        c, i = float(cursor["c"]), int(cursor["i"])
        # the plain bound first: it gives the index scan its range (an OR alone would not)
        keyset = [T.c.cost <= c, or_(T.c.cost < c, and_(T.c.cost == c, T.c.id < i))] if desc \
            else [T.c.cost >= c, or_(T.c.cost > c, and_(T.c.cost == c, T.c.id > i))]
    order = (T.c.cost.desc(), T.c.id.desc()) if desc else (T.c.cost, T.c.id)
    edge = conn.execute(select(T.c.cost, T.c.id).where(*on_index, *keyset).order_by(*order).limit(1)
                        .offset(SCAN_LIMIT - 1)).first()
    window = []
    if edge is not None:
        ec, ei = edge
        window = [T.c.cost >= ec, or_(T.c.cost > ec, and_(T.c.cost == ec, T.c.id >= ei))] if desc \
            else [T.c.cost <= ec, or_(T.c.cost < ec, and_(T.c.cost == ec, T.c.id <= ei))]
    rows = conn.execute(select(T).where(*on_index, *keyset, *window, member, *filters)
                        .order_by(*order).limit(limit + 1)).all()
    if len(rows) > limit:
        last = rows[limit - 1]
        return rows[:limit], {"c": last.cost, "i": last.id, "phase": "cost"}, False
    return (rows, {"c": edge[0], "i": edge[1], "phase": "cost"}, True) if edge is not None else (rows, None, False)


def trial_page(conn, cid: int, task_id: int, device_id: int, sort: str, cursor: dict, filters: list, status: str,
               limit: int):
    """(rows, next cursor or None, partial) of one page of the campaign's trials in ``sort`` order (id,
    -id, cost, -cost). By cost, the trials with a cost come first (cost_page), then the failures,
    which have none, by id; a cursor with ``c`` None is in the failures."""
    if sort in ("id", "-id"):
        return id_page(conn, cid, sort == "-id", cursor, filters, limit)
    only = status.upper()
    failures = [*filters, T.c.cost.is_(None)]
    if (cursor.get("c") is None and "i" in cursor) or (only and only != "OK"):
        if only == "OK":
            return [], None, False
        rows, nxt, partial = id_page(conn, cid, False, cursor if cursor.get("c") is None else {}, failures, limit)
        return rows, None if nxt is None else {**nxt, "c": None}, partial
    rows, nxt, partial = cost_page(conn, cid, task_id, device_id, sort == "-cost", cursor, filters, limit)
    if nxt is not None or only == "OK":
        return rows, nxt, partial
    # the costs are done: the failures follow, on this page while it has room
    more, after, partial = id_page(conn, cid, False, {}, failures, max(1, limit - len(rows)))
    if len(rows) == limit:
        return rows, {"c": None, "i": 0} if more or partial else None, False
    return rows + more, None if after is None else {**after, "c": None}, partial
