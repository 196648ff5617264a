"""Scale-out: a campaign made again from its recipe (`autotune worker`), many campaigns at once
(`autotune tune many`), and a whole campaign run as a Ray task.

A recipe is ``{"kind": "replay" | "kernel" | "graph" | "parallel" | "command", "args": {...}}``: the
keyword arguments of that kind's driver (tune_replay, tune_template, optimize_graph, parallelize,
tune_command). Drivers
store the recipe with the campaign, so any process that reaches the database can join it.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path

from autotune.errors import AutotuneError, UsageError, argument, check_campaign_name, did_you_mean

KINDS = {
    "replay": ("autotune.drivers.replay", "tune_replay"),
    "kernel": ("autotune.drivers.kernel", "tune_template"),
    "graph": ("autotune.drivers.graph", "optimize_graph"),
    "parallel": ("autotune.drivers.parallel", "parallelize"),
    "command": ("autotune.drivers.command", "tune_command"),
}
#: arguments a recipe may not set: where results go and how this process runs are the caller's (the files a
#: command line writes, which its resume command names, too)
RUN_ARGS = ("db", "campaign", "progress", "ray", "ray_actors", "command_files")


def driver(kind: str) -> Callable:
    if kind not in KINDS:
        raise UsageError(f"unknown campaign kind {kind!r}; valid: {', '.join(KINDS)}")
    module, name = KINDS[kind]
    return getattr(importlib.import_module(module), name)


def check_args(kind: str, args: dict, where: str = "") -> None:
    """Refuse arguments the driver does not take, with the closest valid name, and arguments it needs missing."""
    params = inspect.signature(driver(kind)).parameters
    for key in args:
        if key not in params or key in RUN_ARGS:
            hint = did_you_mean(key, [p for p in params if p not in RUN_ARGS], n=1)
            raise UsageError(f"{where}{kind} campaigns take no argument {key!r}{hint} "
                             f"(valid: {', '.join(p for p in params if p not in RUN_ARGS)})")
    missing = [name for name, p in params.items() if p.default is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name not in args and name not in RUN_ARGS]
    if missing:
        raise UsageError(f"{where}{kind} campaigns need {', '.join(map(repr, missing))}")


def summarize(kind: str, result) -> dict:
    """One JSON-ready line per campaign, whatever the driver returned."""
    if kind in ("replay", "command"):
        return result.summary()
    if kind == "kernel":
        res, _, extra = result
        return {**res.summary(), **extra}
    if kind == "parallel":
        out = result.to_json()
        return {"campaign": out["campaign"], "status": "finished", "trials": out["simulations"],
                "best_cost": out["best"]["iteration_s"], "best_config": out["best"]["strategy"]}
    keys = ("campaign", "status", "trials", "best_cost", "best_config", "measured_speedup", "kept")
    return {k: result.get(k) for k in keys}


def run_recipe(kind: str, args: dict, **run: object) -> dict:
    """Run (or join) one campaign from a recipe; ``run`` holds db, campaign, progress, ray."""
    check_args(kind, args)
    fn = driver(kind)
    params = inspect.signature(fn).parameters
    return summarize(kind, fn(**args, **{k: v for k, v in run.items() if k in params}))


def join_campaign(name: str, db: str, ray: str | None = None, ray_actors: int | None = None,
                  progress: bool = False) -> dict:
    """Run one more worker of the campaign ``name`` (made by a driver, which stored its recipe)."""
    from autotune.db import open_existing_database

    database = open_existing_database(db, "a worker")  # a mistyped --db leaves no empty file behind
    try:
        recipe = (database.campaign(name).options or {}).get("recipe")
    finally:
        database.close()
    if not (recipe or {}).get("kind"):  # none, or only the warm start's sources of a script (tune_kernel)
        raise UsageError(f"campaign {name!r} stored no recipe (it was made by a script with its own Space or "
                         "runner): run that script again to add a worker")
    kind, args = recipe["kind"], dict(recipe["args"])
    if (ray is not None or ray_actors is not None) and "ray" not in inspect.signature(driver(kind)).parameters:
        # measured on actors: replay and kernel campaigns; graph and parallel ones run whole as a Ray task
        if kind not in ("graph", "parallel") or ray_actors is not None:
            raise UsageError(f"{argument('ray_actors') if ray_actors is not None else argument('ray')} does not apply "
                             f"to {kind} campaigns: replay and kernel campaigns are measured on Ray actors, graph "
                             f"and parallel ones run as one Ray task ({argument('ray')} alone)")
        check_args(kind, args)
        return summarize(kind, run_on_ray(kind, {**args, "db": db, "campaign": name}, ray))
    return run_recipe(kind, args, db=db, campaign=name, progress=progress, ray=ray, ray_actors=ray_actors)


# -- many campaigns ---------------------------------------------------------------------------------
def load_many(path: str | Path) -> list[dict]:
    """Campaigns from a YAML or JSON file: a list of entries, or ``{"defaults": {...}, "campaigns": [...]}``;
    each entry is ``kind`` plus the driver's arguments, and may name its ``campaign`` and ``db``."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the campaign file {path}: {exc.strerror or exc}") from None
    try:
        if p.suffix.lower() == ".json":
            doc = json.loads(text)
        else:
            import yaml

            doc = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is the file's fault
        raise UsageError(f"{path} is not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'}: {exc}") from None
    defaults = {}
    if isinstance(doc, dict):
        unknown = set(doc) - {"defaults", "campaigns"}
        if unknown:
            raise UsageError(f"{path}: unknown top-level keys {sorted(unknown)}; valid: defaults, campaigns")
        defaults, doc = doc.get("defaults") or {}, doc.get("campaigns")
    if not isinstance(doc, list) or not doc or not isinstance(defaults, dict):
        raise UsageError(f"{path} must hold a non-empty list of campaigns (or defaults: and campaigns:)")
    entries = []
    for i, entry in enumerate(doc, 1):
        if not isinstance(entry, dict):
            raise UsageError(f"{path}: campaign {i} is not a mapping of arguments")
        entry = {**defaults, **entry}
        kind = entry.pop("kind", None)
        if kind is None:
            raise UsageError(f"{path}: campaign {i} names no kind ({', '.join(KINDS)})")
        run = {k: entry.pop(k) for k in ("campaign", "db") if k in entry}
        check_args(kind, entry, where=f"{path}: campaign {i}: ")
        try:
            check_campaign_name(run.get("campaign"))
        except UsageError as exc:
            raise UsageError(f"{path}: campaign {i}: {exc}") from None
        entries.append({"kind": kind, "args": entry, **run})
    names = [e["campaign"] for e in entries if "campaign" in e]
    if len(names) != len(set(names)):
        raise UsageError(f"{path}: two campaigns have the same name; names must be unique")
    return entries


def _run_entry(entry: dict, db: str) -> dict:
    try:
        out = run_recipe(entry["kind"], entry["args"], db=entry.get("db", db), campaign=entry.get("campaign"))
        return {"kind": entry["kind"], **out, "error": None}
    except AutotuneError as exc:
        return {"kind": entry["kind"], "campaign": entry.get("campaign"), "status": "failed", "error": str(exc)}


def _resources(entry: dict) -> dict:
    """What one campaign holds while it runs as a Ray task: a GPU for CUDA kernels and graphs, a core else."""
    args = entry["args"]
    gpu = (entry["kind"] == "kernel" and args.get("target") == "cuda") or \
        (entry["kind"] == "graph" and args.get("device") == "cuda")
    return {"num_gpus": 1 if gpu else 0, "num_cpus": 1}


def _unschedulable(entry: dict) -> str | None:
    """Why the Ray cluster cannot run this campaign's task at all, else None: a task asking for a GPU on a cluster
    that has none would wait for one for good (Ray keeps an infeasible task pending), the campaign shown as
    still running."""
    if not _resources(entry)["num_gpus"]:
        return None
    from autotune.runners.ray import cluster_resources

    res = cluster_resources()
    if res.get("GPU", 0) >= 1:
        return None
    return (f"a {entry['kind']} campaign on a CUDA device runs as a Ray task holding a GPU, and the Ray cluster has "
            f"none (its CPUs: {res.get('CPU', 0):g}): start a node with a GPU in it, or run the campaign on a "
            "GPU machine without --ray")


def tune_many(entries: list[dict], db: str, ray: str | None = None,
              on_done: Callable[[dict], None] | None = None,
              on_wait: Callable[[list[dict]], None] | None = None, wait_s: float = 60.0) -> list[dict]:
    """Run campaigns: one after the other here, or with ``ray`` as Ray tasks sharing the cluster, in
    completion order. A campaign that fails is reported (status failed, its error) and the others go on.
    ``on_wait``: with ``ray``, called with the entries still running whenever none has ended for ``wait_s``."""
    out = []
    if ray is None:
        for e in entries:
            out.append(_run_entry(e, db))
            if on_done:
                on_done(out[-1])
        return out
    from autotune.runners.ray import _ray, ray_failure, ray_init

    rt = _ray()
    ray_init(ray)
    task = rt.remote(_run_entry)
    refs = {}
    for e in entries:
        why = _unschedulable(e)
        if why is None:
            refs[task.options(**_resources(e)).remote(e, db)] = e
            continue
        out.append({"kind": e["kind"], "campaign": e.get("campaign"), "status": "failed", "error": why})
        if on_done:
            on_done(out[-1])
    try:
        while refs:
            done, _ = rt.wait(list(refs), num_returns=1, timeout=wait_s if on_wait else None)
            if not done and on_wait:
                on_wait(list(refs.values()))
            for ref in done:
                e = refs.pop(ref)
                try:
                    out.append(rt.get(ref))
                except rt.exceptions.RayError as exc:
                    out.append({"kind": e["kind"], "campaign": e.get("campaign"), "status": "failed",
                                "error": str(ray_failure(exc, "the Ray task failed"))})
                if on_done:
                    on_done(out[-1])
    except KeyboardInterrupt:
        _interrupt(rt, list(refs))
        raise
    return out


def _interrupt(rt, refs: list, wait_s: float = 30.0) -> None:
    """Ctrl-C here: interrupt the campaigns running as Ray tasks as Ctrl-C interrupts one in this process (each
    stores what it measured, gives back its claim and is marked interrupted), waiting up to ``wait_s`` for them;
    left alone they would be killed with this process's Ray job, losing what they measured since their last
    batch and leaving their campaigns marked running."""
    for ref in refs:
        rt.cancel(ref)
    if refs:
        rt.wait(refs, num_returns=len(refs), timeout=wait_s)


def _call(kind: str, kwargs: dict):
    return driver(kind)(**kwargs)


def run_on_ray(kind: str, kwargs: dict, address: str):
    """Run one whole campaign as a Ray task on the cluster and return what its driver returns (graph
    and parallel campaigns, whose evaluations are simulations too short to send one by one)."""
    from autotune.runners.ray import _ray, ray_failure, ray_init

    rt = _ray()
    ray_init(address)
    why = _unschedulable({"kind": kind, "args": kwargs})
    if why is not None:
        raise UsageError(why)
    print(f"running the {kind} campaign as a Ray task on the cluster ({address})", file=sys.stderr)
    ref = rt.remote(_call).options(**_resources({"kind": kind, "args": kwargs})).remote(kind, kwargs)
    try:
        return rt.get(ref)
    except KeyboardInterrupt:
        _interrupt(rt, [ref])
        raise
    except rt.exceptions.RayError as exc:
        raise ray_failure(exc, "the campaign's Ray task failed") from None
