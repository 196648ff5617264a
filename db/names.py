"""Names given on the command line (campaigns, tasks, devices) matched to the names in the database.

A name is taken as given when the database has it exactly (a task or device also by its key, or a
unique prefix of its key of at least 6 characters, as the tables show keys shortened); a name that
differs from one stored name only in case resolves to that name, and so does a name as a table shows it
cut, '…' standing for the text left out ('replay-RTX_30…'), where one stored name matches it (a table
cuts names so that its rows stay told apart). Anything else is a usage error
naming the closest stored names (difflib), never a silent guess and never an empty answer. A task name
that several tasks share (one kernel tuned at two shapes, a graph at two input shapes) stands for none of
them: it is refused (Ambiguous) naming their keys, never answered with their trials merged.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable

from sqlalchemy import or_, select

from autotune.db.models import CampaignRow, DeviceRow, TaskRow
from autotune.errors import UsageError
from autotune.progress import cut_matches

#: what each kind of name is looked up in: (model, whether it also has a key)
KINDS = {"campaign": (CampaignRow, False), "task": (TaskRow, True), "device": (DeviceRow, True)}
PLURAL = {"campaign": "campaigns", "task": "tasks", "device": "devices"}
MIN_KEY_PREFIX = 6


def _norm(text: str) -> str:
    """Lower case, runs of anything but letters and digits as one space: 'RTX_3090' ~ 'rtx 3090'."""
    return re.sub(r"[^0-9a-z]+", " ", text.casefold()).strip()


def close_matches(given: str, known: Iterable[str], n: int = 4) -> list[str]:
    """The stored names closest to ``given``, best first, ignoring case and spacing: names having every
    word of it ('rtx 3090' ~ 'NVIDIA GeForce RTX 3090'), then names containing it written without
    spaces ('RTX3090'), then difflib's close matches (typos)."""
    by_norm: dict[str, list[str]] = {}
    for name in dict.fromkeys(known):
        by_norm.setdefault(_norm(name), []).append(name)
    g = _norm(given)
    if not g:
        return []
    words, squashed = set(g.split()), g.replace(" ", "")

    def ratio(k: str) -> float:
        return difflib.SequenceMatcher(None, g, k).ratio()

    having = sorted((k for k in by_norm if words <= set(k.split())), key=lambda k: (-ratio(k), k))
    inside = sorted((k for k in by_norm if squashed in k.replace(" ", "")), key=lambda k: (-ratio(k), k))
    similar = difflib.get_close_matches(g, list(by_norm), n=n, cutoff=0.6)
    out: list[str] = []
    for k in dict.fromkeys(having + inside + similar):
        out.extend(by_norm[k])
    return out[:n]


def _listing(names: list[str], n: int = 8) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" (and {len(names) - n} more)" if len(names) > n else "")


def resolve_name(kind: str, given: str, known_names: Iterable[str], keys: Iterable[str] = ()) -> str:
    """The stored name ``given`` stands for, or UsageError naming the closest stored names.

    ``kind`` is what the name is ("campaign", "task", "device"), for the message. ``keys`` (tasks and
    devices) are also accepted exactly, or by a unique prefix of at least 6 hex digits. A name that
    equals one stored name but for case resolves to it silently; two such names are ambiguous."""
    known = list(dict.fromkeys(known_names))
    key_list = list(dict.fromkeys(keys))
    if given in known or given in key_list:
        return given
    folded = [n for n in known if n.casefold() == given.casefold()]
    if len(folded) == 1:
        return folded[0]
    if len(folded) > 1:
        raise UsageError(f"{kind} {given!r} is ambiguous: it differs only in case from {_listing(folded)}; "
                         "give the name exactly")
    if "…" in given:  # a name as a table showed it cut: the one stored name it can stand for
        cut = [n for n in known if cut_matches(given, n)]
        if len(cut) == 1:
            return cut[0]
        if len(cut) > 1:
            raise UsageError(f"{kind} {given!r} (a name cut with '…') matches several {PLURAL.get(kind, kind + 's')} "
                             f"({_listing(cut)}); give more of the name, or the whole name")
    if key_list and len(given) >= MIN_KEY_PREFIX and re.fullmatch(r"[0-9a-fA-F]+", given):
        prefixed = [k for k in key_list if k.startswith(given.casefold())]
        if len(prefixed) == 1:
            return prefixed[0]
        if len(prefixed) > 1:
            raise UsageError(f"{kind} key prefix {given!r} matches several {PLURAL.get(kind, kind + 's')} "
                             f"({_listing(prefixed)}); give more of the key")
    raise unknown_name(kind, given, known)


class UnknownName(UsageError):
    """A name the database does not have (not an ambiguous one); ``closest`` holds the closest stored names."""

    def __init__(self, message: str, closest: list[str]):
        super().__init__(message)
        self.closest = closest

    def __reduce__(self):  # pickled whole (a Ray task's error comes back so)
        return type(self), (self.args[0], self.closest)


class Ambiguous(UsageError):
    """A name that stands for several stored rows (a task name that tasks of other parameters share);
    ``candidates`` holds what tells them apart (their keys)."""

    def __init__(self, message: str, candidates: list[str]):
        super().__init__(message)
        self.candidates = candidates

    def __reduce__(self):  # pickled whole (a Ray task's error comes back so)
        return type(self), (self.args[0], self.candidates)


def _differing(rows: list) -> list[str]:
    """The parameters whose values are not the same in every task of ``rows`` (at most 3), in order."""
    params = [r.params if isinstance(r.params, dict) else {} for r in rows]
    names = list(dict.fromkeys(k for p in params for k in p))
    return [k for k in names if len({json.dumps(p.get(k), sort_keys=True, default=str) for p in params}) > 1][:3]


def ambiguous_task(given: str, rows: list) -> Ambiguous:
    """The error for a task name that the tasks ``rows`` (TaskRow) share: each one's key, with its kind
    and the parameters that tell the tasks apart."""
    differ = _differing(rows)

    def label(r) -> str:
        params = r.params if isinstance(r.params, dict) else {}
        shown = [f"{k}={json.dumps(params.get(k), default=str)}" for k in differ]
        shown = [v if len(v) <= 40 else v[:39] + "…" for v in shown]
        return f"{r.key} ({', '.join([r.kind, *shown])})"

    listed = "; ".join(label(r) for r in rows[:8]) + (f"; and {len(rows) - 8} more" if len(rows) > 8 else "")
    return Ambiguous(f"task name {given!r} matches several tasks ({listed}); give the task key",
                     [r.key for r in rows])


def tasks_named(db, given: str) -> list:
    """The tasks (TaskRow) whose key or name is ``given``, oldest first."""
    with db.session() as s:
        return list(s.scalars(select(TaskRow).where(or_(TaskRow.key == given, TaskRow.name == given))
                              .order_by(TaskRow.id)).all())


def one_task(db, given: str):
    """The one task (TaskRow) whose key or name is ``given``: None when there is none, Ambiguous naming
    the keys when several tasks share the name (a key, being unique, always stands for one)."""
    rows = tasks_named(db, given)
    exact = [r for r in rows if r.key == given]
    if not exact and len(rows) > 1:
        raise ambiguous_task(given, rows)
    return (exact or rows or [None])[0]


def unknown_name(kind: str, given: str, known: Iterable[str]) -> UnknownName:
    """The error for a name the database does not have: the closest stored names, else the stored
    names (or that there are none)."""
    known = list(dict.fromkeys(known))
    closest = close_matches(given, known)
    if closest:
        return UnknownName(f"unknown {kind} {given!r}; closest: {', '.join(closest)}", closest)
    plural = PLURAL.get(kind, kind + "s")
    if known:
        return UnknownName(f"unknown {kind} {given!r}; {plural} in the database: {_listing(sorted(known))}", [])
    return UnknownName(f"unknown {kind} {given!r}; there are no {plural} in the database yet", [])


def stored_names(db, kind: str) -> tuple[list[str], list[str]]:
    """(every distinct name, every key) of this kind in the database (keys empty for campaigns)."""
    model, has_key = KINDS[kind]
    with db.session() as s:
        names = list(s.scalars(select(model.name).distinct()).all())
        keys = list(s.scalars(select(model.key)).all()) if has_key else []
    return names, keys


def is_stored(db, kind: str, given: str) -> bool:
    """Whether ``given`` is exactly a stored name (or key) of this kind: the common case, one indexed look-up."""
    model, has_key = KINDS[kind]
    cond = model.name == given
    if has_key:
        cond = cond | (model.key == given)
    with db.session() as s:
        return s.scalar(select(model.id).where(cond).limit(1)) is not None


def resolve(db, kind: str, given: str | None) -> str | None:
    """``given`` resolved against the database's names of this kind (None stays None); see resolve_name.
    A task name that several tasks share is Ambiguous, naming their keys."""
    if given is None:
        return None
    if kind not in KINDS:
        raise ValueError(f"unknown kind of name {kind!r}; valid: {', '.join(KINDS)}")
    if is_stored(db, kind, given):
        resolved = given
    else:
        names, keys = stored_names(db, kind)
        resolved = resolve_name(kind, given, names, keys)
    if kind == "task":
        one_task(db, resolved)  # refuses a name several tasks share
    return resolved
