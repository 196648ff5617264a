"""Choosing the source devices of a warm start: named ones, or `auto` (the most similar that measured the task)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from sqlalchemy import select

from autotune.algorithms.base import SearchAlgorithm
from autotune.algorithms.registry import DEFAULT_TRANSFER_TOP, check_same_sources, same_sources_spec
from autotune.algorithms.warm_start import SourceData, WarmStart
from autotune.db import transfer as store
from autotune.db.models import CampaignRow
from autotune.db.names import UnknownName, resolve
from autotune.errors import UsageError, argument
from autotune.transfer.similarity import Similar, rank_similar
from autotune.types import Device, Task


def choose_sources(db, task: Task, target: Device, spec: str, max_auto: int = 2, min_score: float = 0.3,
                   campaign: str | None = None) -> list[SourceData]:
    """``spec``: "auto" or comma-separated device names/keys. Sources are other devices with
    successful measurements of ``task``; auto keeps the most similar (at most ``max_auto``,
    similarity at least ``min_score``), else, when none is that similar, the single most similar
    device of the same kind, another vendor's included: the warm start races its guess against the
    cold search, so a poor source costs little and another vendor's data often still ranks well.
    ``campaign``: a campaign that kept the devices ``spec`` chose when it started (its recipe's ``sources``,
    key: name) is resumed, or joined, from exactly those, whatever ``spec`` resolves to now."""
    trials = store.task_trials(db, task)
    others = {k: v for k, v in trials.items() if k != target.key and any(m.ok for m in v[1])}
    mine = trials.get(target.key, (target, []))[1]
    ranked = rank_similar(target, [d for d, _ in others.values()], {k: v[1] for k, v in others.items()}, mine)
    # a campaign of that name for another task or device is not this one (the campaign refuses the name)
    kept = kept_sources(db, campaign, spec) if campaign and db.campaign_is_for(campaign, task, target) else None
    if kept is not None:
        gone = [f"{n!r} ({k[:8]})" for k, n in kept.items() if k not in others]
        if gone:
            raise UsageError(f"campaign {campaign!r} was warm-started from {', '.join(map(repr, kept.values()))}, and "
                             f"the database holds no successful measurement of task {task.name!r} by "
                             f"{', '.join(gone)} any more; start it afresh ({argument('fresh=True', '--fresh')}) or "
                             f"choose another {argument('campaign')} name")
        picked = [s for k in kept for s in ranked if s.device.key == k]
    elif (names := spec_names(spec)) is None:
        picked = pick_auto(ranked, max_auto, min_score)
    else:
        picked = {}
        have = ", ".join(sorted({s.device.name for s in ranked})) or "none"
        for n in names:
            try:  # as every command takes a device name: exactly, differing only in case, or a key prefix
                stored = resolve(db, "device", n)
            except UnknownName as exc:
                closest = f"; closest: {', '.join(exc.closest)}" if exc.closest else ""
                raise UsageError(f"{argument('transfer_from')}: device {n!r} has no successful measurement of task "
                                 f"{task.name!r} (no device of that name or key{closest}); devices with some: {have}") \
                    from None
            hit = [s for s in ranked if stored in (s.device.name, s.device.key)]
            if not hit:
                if stored in (target.name, target.key):
                    raise UsageError(f"{argument('transfer_from')}: device {n!r} is the device being tuned; name other "
                                     f"devices that measured task {task.name!r}: {have}")
                failed = [ms for k, (d, ms) in trials.items() if stored in (d.name, k) and k != target.key]
                if failed:
                    why = f" (its {sum(map(len, failed))} measurements of it all failed)"
                else:
                    other = store.namesakes_measured(db, stored, task)
                    why = (f" ({task.key[:8]}); it measured {task.name!r} only with other parameters (task "
                           f"{', '.join(k[:8] for k in other)}), and a source must have measured the same task"
                           if other else "")
                raise UsageError(f"{argument('transfer_from')}: device {n!r} has no successful measurement of task "
                                 f"{task.name!r}{why}; devices with some: {have}")
            picked.setdefault(hit[0].device.key, hit[0])  # a device named twice is one source, weighed once
        picked = list(picked.values())
    return [source_data(s, others[s.device.key][1]) for s in picked]


def spec_names(spec: str) -> list[str] | None:
    """The device names a ``transfer_from`` spec gives, None for ``auto`` (any case); UsageError for one that
    names no device, or that mixes ``auto`` (not a device: the most similar ones, chosen alone) with names."""
    names = [n.strip() for n in str(spec).split(",") if n.strip()]
    if [n.lower() for n in names] == ["auto"]:
        return None
    if any(n.lower() == "auto" for n in names):
        raise UsageError(f"{argument('transfer_from')} {spec!r} mixes auto with device names; give auto alone (the "
                         "most similar devices that measured the task) or DEVICE[,DEVICE...]")
    if not names:
        raise UsageError(f"{argument('transfer_from')} {spec!r} names no device; give DEVICE[,DEVICE...] (names or "
                         "keys in the database) or auto")
    return names


def pick_auto(ranked: list[Similar], max_auto: int = 2, min_score: float = 0.3) -> list[Similar]:
    """What `auto` keeps of devices ranked most similar first: those at least ``min_score`` similar (at most
    ``max_auto``), else the single most similar one with any similarity."""
    return [s for s in ranked if s.score >= min_score][:max_auto] or [s for s in ranked if s.score > 0][:1]


def source_data(similar: Similar, measurements) -> SourceData:
    """A chosen device's measurements as a warm start's source, weighted by its similarity."""
    return SourceData(similar.device, measurements, weight=max(similar.score, 0.05), info=similar.to_json())


def kept_sources(db, campaign: str, spec: str) -> dict[str, str] | None:
    """The source devices (key: name) ``spec`` chose when the campaign ``campaign`` started; None when there is
    no such campaign, it was warm-started with another spec (which the campaign refuses), or it was stored
    before they were kept."""
    with db.session() as s:
        options = s.scalar(select(CampaignRow.options).where(CampaignRow.name == campaign))
    recipe = (options or {}).get("recipe") or {}
    return recipe.get("sources") if same_sources_spec((recipe.get("args") or {}).get("transfer_from"), spec) else None


def warm_start_search(db, task: Task, target: Device, algorithm: str, spec: str, top_k: int = DEFAULT_TRANSFER_TOP,
                      campaign: str | None = None, **options) -> tuple[WarmStart | None, list[SourceData]]:
    """A WarmStart around the registered ``algorithm`` from the sources ``spec`` names; (None, [])
    for ``auto`` when no device qualifies (the caller runs its ordinary search). ``campaign``: the
    campaign's name; when that campaign exists, it keeps the sources it started from (``choose_sources``).
    None: a campaign started afresh."""
    from autotune.algorithms.registry import make_algorithm

    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise UsageError(f"{argument('transfer_top')} must be a whole number >= 0, not {top_k!r}")
    inner = make_algorithm(algorithm)
    sources = choose_sources(db, task, target, spec, campaign=campaign)
    if not sources:
        return None, []
    return WarmStart(inner, sources, target_device=target, top_k=top_k, **options), sources


def warm_started(db, task: Task, target: Device, algorithm: str, spec: str, top_k: int, search: SearchAlgorithm,
                 named: Callable[[str], str], fresh: bool = False, recipe: dict | None = None,
                 quiet: bool = False) -> tuple[SearchAlgorithm, str]:
    """The search a warm start from ``spec`` runs, and its campaign's name. The search: a WarmStart
    (:func:`warm_start_search`), or ``search`` itself when ``auto`` finds no source. The name: ``named`` given
    the warm start's search name, whether a source was found or not, so that the same command run again
    resumes the campaign it started, from the sources chosen then (none included); ``fresh`` chooses again.
    The devices chosen are kept in ``recipe`` (what a resume or a worker starts from) and said on standard
    error unless ``quiet``."""
    from autotune.algorithms.registry import make_algorithm

    spec_names(spec)  # a malformed spec is refused first, whatever the database holds
    name = named(f"{WarmStart.name}+{make_algorithm(algorithm).name}")
    warm, sources = warm_start_search(db, task, target, algorithm, spec, top_k, campaign=None if fresh else name)
    if not fresh and db.campaign_is_for(name, task, target):  # the campaign refuses other sources: before they are said
        with db.session() as s:
            stored = s.scalar(select(CampaignRow.options).where(CampaignRow.name == name))
        check_same_sources(name, stored, (recipe or {}).get("args") or {"transfer_from": spec, "transfer_top": top_k})
    if recipe is not None:
        recipe["sources"] = {s.device.key: s.device.name for s in sources}
    if not quiet:
        print("warm start from: " + (", ".join(s.device.name for s in sources)
                                     or "no similar device measured this task; ordinary search"), file=sys.stderr)
    return (warm if warm is not None else search), name
