"""What a graph campaign keeps in the database and finds there: the device its graph trials are stored on
(the measured one, or one of its own when op costs are estimated), the rules of its search, and its own
measurements."""

from __future__ import annotations

from autotune.db.database import Database
from autotune.errors import UsageError, argument
from autotune.runners.graph import ESTIMATED_SUFFIX, estimating_device, is_estimating
from autotune.types import Device, Task

#: distinct ops a search without --max-measure may time for costs it never stores (equality saturation's
#: extraction, which costs every op of the e-graph); the graphs it stores are costed from timed ops only
DEFAULT_MAX_MEASURE = 400


def store_rules(database: Database, records: list[dict]) -> None:
    """Store the rules of a search: the built-in ones as they are; those read from a file (status
    ``FILE_STATUS``) only when the database does not hold them yet, so that a rule proved or tested by
    `autotune rules generate`, or built in, keeps its provenance and status."""
    from autotune.db.queries import rules as stored_rules
    from autotune.search_spaces.graphs.rule_files import FILE_STATUS

    own = [r for r in records if r["status"] != FILE_STATUS]
    from_file = [r for r in records if r["status"] == FILE_STATUS]
    if from_file:
        known = set(stored_rules(database)["key"]) | {r["key"] for r in own}
        own += [r for r in from_file if r["key"] not in known]
    database.save_rules(own)


def graph_device(database: Database, name: str, measured: Device, max_measure: int | None,
                  fresh: bool) -> tuple[Device, int]:
    """(the device the campaign ``name`` stores its graph trials on, the op measurement cap of its search).

    A new campaign (or one started afresh) with ``max_measure`` gets a device of its own,
    ``estimating_device(measured)``: its graph costs rest partly on estimated ops; without it, ``measured``
    (every op timed; the cap, DEFAULT_MAX_MEASURE, then bounds only costs never stored). An existing campaign
    keeps the device it is stored on, and so the way it started: resumed without ``max_measure``, an
    estimating one keeps the cap its recipe holds. A campaign stored on another device is left to the
    campaign's own check (another task or device: refused)."""
    stored = None if fresh else _stored_device(database, name)
    if stored is not None:
        device, options = stored
        base = {k: v for k, v in device.properties.items() if k not in ("op_costs", "campaign", "id")}
        if is_estimating(device) and device.name == measured.name + ESTIMATED_SUFFIX and base == measured.properties:
            if max_measure is None:
                max_measure = ((options or {}).get("recipe") or {}).get("args", {}).get("max_measure")
            return device, max_measure or DEFAULT_MAX_MEASURE
        return measured, max_measure or DEFAULT_MAX_MEASURE
    if max_measure is None:
        return measured, DEFAULT_MAX_MEASURE
    return estimating_device(measured, name), max_measure


def _stored_device(database: Database, name: str) -> tuple[Device, dict] | None:
    """(the device, the options) the campaign ``name`` is stored with; None when there is no such campaign."""
    from sqlalchemy import select

    from autotune.db.models import CampaignRow, DeviceRow

    with database.session() as s:
        row = s.execute(select(DeviceRow.name, DeviceRow.kind, DeviceRow.properties, CampaignRow.options)
                        .join(CampaignRow, CampaignRow.device_id == DeviceRow.id)
                        .where(CampaignRow.name == name)).first()
    if row is None:
        return None
    return Device(row[0], row[1], dict(row[2] or {})), dict(row[3] or {})


def check_campaign_task(database: Database, name: str, task: Task) -> None:
    """UsageError saying what differs when the campaign ``name`` exists for another task than the graph search
    ``task``: another kind of tuning, or another model (its content), input shapes or rule set (a --rules file
    added or left out), each of which makes another task. Nothing when there is no such campaign or it is
    ``task``'s (another device is the campaign's own check)."""
    from sqlalchemy import select

    from autotune.db.models import CampaignRow, TaskRow

    with database.session() as s:
        row = s.execute(select(TaskRow.kind, TaskRow.name, TaskRow.params, TaskRow.key)
                        .join(CampaignRow, CampaignRow.task_id == TaskRow.id).where(CampaignRow.name == name)).first()
    if row is None or row[3] == task.key:
        return
    kind, model, params = row[0], row[1], dict(row[2] or {})
    if kind != task.kind:
        raise UsageError(f"campaign {name!r} is a campaign of {kind} task {model!r}, not a graph search; choose "
                         f"another {argument('campaign')} name")
    mine = task.params
    differs = []
    if params.get("graph") != mine.get("graph"):
        differs.append(f"model {model!r} (content {str(params.get('graph'))[:8]}), not {task.name!r} "
                       f"(content {str(mine.get('graph'))[:8]})")
    if params.get("inputs") != mine.get("inputs"):
        def shapes(inputs):
            return ", ".join(f"{k}={'x'.join(map(str, v[0]))}" for k, v in (inputs or {}).items())
        differs.append(f"input shapes {shapes(params.get('inputs'))}, not {shapes(mine.get('inputs'))}")
    if params.get("rules") != mine.get("rules"):
        differs.append(f"with {params.get('n_rules')} rules, not these {mine.get('n_rules')} (a "
                       f"{argument('rules_file', '--rules')} file added, left out or changed)")
    what = "searched " + "; ".join(differs or [f"task {row[3][:8]} of model {model!r}"])
    raise UsageError(f"campaign {name!r} {what}: resume it with the same model, input shapes and rules, start it "
                     f"afresh ({argument('fresh=True', '--fresh')}), or choose another {argument('campaign')} name")


def estimated_on_device(database: Database, task: Task, device: Device) -> dict[str | None, int]:
    """{campaign name (None: a deleted campaign's): OK graph trials} of ``task`` stored on ``device`` itself whose
    cost rests partly on estimated op costs (their ``meta.ops_estimated``, stored with every graph trial). Only
    older versions stored such costs there (this one stores them on ``estimating_device``); a campaign on ``device`` looks
    them up as measurements."""
    from sqlalchemy import func, select

    from autotune.db.models import CampaignRow, TrialRow

    task_id, device_id = database.task_id(task), database.device_id(device)
    with database.session() as s:
        rows = s.execute(select(CampaignRow.name, func.count(TrialRow.id))
                         .outerjoin(CampaignRow, CampaignRow.id == TrialRow.campaign_id)
                         .where(TrialRow.task_id == task_id, TrialRow.device_id == device_id, TrialRow.cost.is_not(None),
                                TrialRow.meta["ops_estimated"].as_integer() > 0)
                         .group_by(CampaignRow.name)).all()
    return dict(rows)


def estimated_note(model: str, device: str, stored: dict[str | None, int]) -> str:
    """The line that says ``device`` holds graph costs of ``model`` resting on estimated ops
    (``estimated_on_device``'s {campaign: trials})."""
    named = sorted(n for n in stored if n is not None)
    where = ", ".join(f"{n!r} ({stored[n]})" for n in named[:5]) + (", ..." if len(named) > 5 else "")
    if None in stored:
        where += f"{', ' if where else ''}{stored[None]} of deleted campaigns"
    return (f"note: {sum(stored.values())} graph costs of {model} stored on {device!r} rest partly on estimated op "
            f"costs (stored so by an older version; their meta.ops_estimated counts those ops) and are looked up as "
            f"measurements: campaigns {where}; `autotune campaigns delete NAME --with-trials` removes a campaign's")


def own_history(database: Database, name: str) -> list:
    """The measurements a campaign made itself (not look-ups of other campaigns' trials); [] when it is new."""
    try:
        row = database.campaign(name)
    except UsageError:
        return []
    return [m for m, reused in database.campaign_history(row.id) if not reused]
