"""`autotune models` (stored cost models and their quality) and `autotune predict` (rank configurations)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors, open_db, parse_json_arg
from autotune.cli.listings import FormatOption, WideOption, check_format, print_table, write_frame
from autotune.cli.tables import Col, device_text, number, relative_time, size_bytes


def _weights(v) -> str:
    return "pruned" if v == 0 else size_bytes(v)


# The default table (--wide: every column in full; csv and json: every column, raw).
MODEL_COLUMNS = [
    Col("id", render=number, right=True),
    Col("model", width=10, least=5),
    Col("task", width=12),
    Col("device", render=device_text, width=12),
    Col("campaign", flex=True, cut="distinct", optional=True),  # left out when no model is of a campaign
    Col("n_samples", header="samples", render=number, right=True),
    Col("spearman", render=number, right=True),
    Col("top_k_recall", header="top-k recall", render=number, right=True),
    Col("bytes", header="weights", render=_weights, right=True, spare=1),
    Col("pinned", render=number, optional=True),  # left out when no model is pinned
    Col("created", render=relative_time, least=10, spare=2),  # on a narrow terminal, these go first
]


LISTED = 1_000_000  # points of a rebuilt knob space ranked one by one at most
SAMPLED, SAMPLE_TRIES = 20_000, 500_000  # beyond: up to this many random points, from this many random tries


@dataclass
class TaskSpace:
    """What a model of a task ranks: a knob space whose features are those the model was trained on; its valid
    points as a list where they are one (a recording), else None; what they are called; the task's constraints
    that are Python code, which the database keeps by name only (the space leaves them out); and, for points
    known only partly, how to know them all."""

    space: object
    points: list | None = None
    noun: str = "points of the task's space"
    code: list = field(default_factory=list)
    hint: str = ""

    @cached_property
    def rows(self) -> set[tuple]:
        """The listed points, each as the tuple of its values' reprs in the knobs' order."""
        return {tuple(repr(p[n]) for n in self.space.names) for p in self.points or ()}


def space_for_task(database, task, info: dict) -> TaskSpace:
    """The space a stored model of ``task`` ranks (``info``: Database.load_cost_model's); a space that cannot be rebuilt
    from the database is a UsageError."""
    from autotune.errors import UsageError
    from autotune.search_spaces.knobs import KnobSpace

    if task.kind == "replay":
        recording = _recording(database, task, info)
        if recording is not None:
            points = [recording.cache.config(v) for v in recording.cache.records]
            return TaskSpace(recording, points, "points of the recording")
        from autotune.db.transfer import task_configurations

        return TaskSpace(KnobSpace(task.params["tune_params"], task=task), task_configurations(database, task),
                         "configurations of the task in the database",
                         hint="; the recording (the campaign's --cache file, readable from here) lists every point")
    if task.kind == "kernel":
        from autotune.search_spaces.kernels import space_for_task as kernel_space

        return TaskSpace(kernel_space(task, info["device_properties"]))
    knobs = task.params.get("knobs")
    if isinstance(knobs, dict) and knobs:  # autotune.minimize, tune command, a space file
        from autotune.search_spaces.constraints import Constraint

        exprs, code = [], []
        for text in task.params.get("constraints") or []:
            try:
                exprs.append(Constraint(text, set(knobs)))
            except UsageError:  # the name of a Python callable, not an expression
                code.append(text)
        return TaskSpace(KnobSpace(knobs, exprs, task=task, enumerate_limit=LISTED), code=code)
    if task.kind == "user-kernel":
        raise UsageError(f"predict cannot rebuild the space of user kernel {task.name!r}: its knob values stay in the "
                         "script that tuned it (Kernel Tuner's tune_kernel), not in the database")
    raise UsageError(f"predict ranks configurations of knob spaces (replay, kernel, function, command and space-file "
                     f"tasks), not those of a {task.kind!r} task")


def _recording(database, task, info: dict):
    """The recorded space (a ReplaySpace) that the model's campaign replayed, where its cache file still holds
    the task (the path as the campaign was given it: a relative one is read from the working directory); else
    None."""
    from autotune.errors import UsageError
    from autotune.search_spaces.replay import ReplaySpace

    cache = (database.campaign_recipe(info.get("campaign_id")).get("args") or {}).get("cache")
    if not isinstance(cache, str):
        return None
    try:
        space = ReplaySpace(cache)
    except UsageError:  # moved, removed or rewritten since
        return None
    return space if space.task.key == task.key else None


def _whole_space(ts: TaskSpace) -> tuple[list, bool]:
    """The candidates ranked when no configuration is given, and whether they are a random sample (of a space
    with more than LISTED points)."""
    import numpy as np

    from autotune.errors import UsageError

    space = ts.space
    if ts.code:
        raise UsageError(f"the space of task {space.task.name!r} has a constraint written as Python code "
                         f"({ts.code[0]}), which the database does not store, so its points cannot be listed; "
                         "rank given configurations with --config (that constraint unchecked)")
    if ts.points is not None:
        return [space.candidate(p) for p in ts.points], False
    # without constraints the combinations are the points: no walk needed to tell that they are too many
    if (space.constraints or space.combinations() <= LISTED) and space.size() is not None:
        return list(space.enumerate()), False
    rng = np.random.default_rng(0)
    picks = [rng.integers(len(vals), size=SAMPLE_TRIES).tolist() for vals in space.values]
    seen, found = set(), []
    for row in zip(*picks):
        if row in seen:
            continue
        seen.add(row)
        config = {n: vals[i] for n, vals, i in zip(space.names, space.values, row)}
        if space.is_valid(config):
            found.append(space.candidate(config))
            if len(found) >= SAMPLED:
                break
    if not found:
        raise UsageError(f"the task's space is too large to list, and none of {SAMPLE_TRIES:,} random combinations "
                         "of its knob values meets its constraints; rank given configurations with --config")
    return found, True


def _candidate(ts: TaskSpace, config: dict):
    """The candidate of a given configuration; UsageError naming the knob value, or the constraint, that puts
    it outside the space (for a space whose points are a list: the values no listed point has together)."""
    from autotune.errors import UsageError
    from autotune.search_spaces.constraints import Constraint

    space = ts.space
    if set(config) != set(space.names):
        return space.candidate(config)  # names the missing and unknown knobs
    config = {n: config[n] for n in space.names}
    for n, vals in zip(space.names, space.values):
        if repr(config[n]) not in {repr(v) for v in vals}:
            raise UsageError(f"configuration {config}: {n}={config[n]!r} is not a value of knob {n!r} "
                             f"(its values: {', '.join(map(repr, vals))})"[:400])
    if ts.points is not None and tuple(repr(config[n]) for n in space.names) not in ts.rows:
        raise UsageError(f"configuration {config} is not among the {len(ts.rows):,} {ts.noun}: "
                         f"{_never_together(config, list(ts.rows))}{ts.hint}")
    for c in space.constraints:
        if isinstance(c, Constraint) and not c(config):
            raise UsageError(f"configuration {config} breaks the space's constraint {c.text!r}")
    if not space.is_valid(config):
        raise UsageError(f"configuration {config} breaks a constraint of the task's space (one written as Python code)")
    return space.candidate(config)


def _never_together(config: dict, rows: list[tuple]) -> str:
    """Which value, or which two values, of ``config`` none of ``rows`` (each a tuple of value reprs) has."""
    import itertools

    names = list(config)
    mine = [repr(v) for v in config.values()]
    for size in (1, 2):
        for ks in itertools.combinations(range(len(names)), size):
            if not any(all(r[k] == mine[k] for k in ks) for r in rows):
                return "none has " + " with ".join(f"{names[k]}={config[names[k]]!r}" for k in ks)
    return "none has this combination of values"


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("models")
    @handle_errors
    def models_cmd(
        task: Annotated[str | None, typer.Option("--task", help="Task key (or a unique prefix of it, at least 6 characters) or name")] = None,
        device: Annotated[str | None, typer.Option("--device", help="Device name or key (or a unique prefix of it, at least 6 characters)")] = None,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Only this campaign's models")] = None,
        latest: Annotated[bool, typer.Option("--latest", help="Only the latest model of each campaign (of each task, device and model kind for models outside a campaign)")] = False,
        pin: Annotated[list[int] | None, typer.Option("--pin", metavar="ID", help="Keep this model (its weights are never pruned as superseded); repeatable")] = None,
        unpin: Annotated[list[int] | None, typer.Option("--unpin", metavar="ID", help="No longer keep this model; repeatable")] = None,
        format: FormatOption = "table",
        wide: WideOption = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """List stored cost models with their training size, held-out quality (Spearman, top-k recall),
        whether their weights are kept and whether they are pinned; --pin/--unpin ID marks a model kept."""
        from autotune.db.queries import cost_models, resolve_filters
        from autotune.errors import UsageError

        check_format(format)
        database = open_db(db, existing=True)
        if pin or unpin:
            pin, unpin = list(dict.fromkeys(pin or ())), list(dict.fromkeys(unpin or ()))  # an id given twice: once
            both = set(pin) & set(unpin)
            if both:
                raise UsageError(f"model {min(both)} given to both --pin and --unpin")
            stored = set(cost_models(database)["id"].tolist())
            missing = sorted((set(pin) | set(unpin)) - stored)
            if missing:
                raise UsageError(f"no stored model {', '.join(map(str, missing))}; `autotune models` lists them")
            done = []
            for ids, flag in ((pin, True), (unpin, False)):
                for model_id in ids:
                    has_weights = database.pin_cost_model(model_id, flag)
                    done.append({"id": model_id, "pinned": flag, "has_weights": has_weights})
                    note = "" if has_weights or not flag else " (its weights were already pruned: only its row is kept)"
                    if format == "table":
                        typer.echo(f"{'pinned' if flag else 'unpinned'} model {model_id}{note}")
            if format != "table":  # what a script asked for: each model changed, whether its weights are kept
                import pandas as pd

                write_frame(pd.DataFrame(done, columns=["id", "pinned", "has_weights"]), format)
            return
        names = resolve_filters(database, campaign=campaign, task=task, device=device)
        df = cost_models(database, **names, latest=latest)
        if format == "table" and df.empty:
            typer.echo("no stored cost models" + (" match" if task or device or campaign else " yet"), err=True)
            return
        write_frame(df, format, columns=MODEL_COLUMNS, wide=wide)

    @app.command("predict")
    @handle_errors
    def predict_cmd(
        model: Annotated[int | None, typer.Option("--model", help="Stored model id (see `autotune models`)")] = None,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Use this campaign's latest model")] = None,
        config: Annotated[list[str] | None, typer.Option("--config", help="A configuration as JSON (repeatable)")] = None,
        configs: Annotated[Path | None, typer.Option("--configs", help="JSONL file of configurations ('-' for stdin)")] = None,
        top: Annotated[int | None, typer.Option("--top", min=1, help="How many to show, best first (default: every given configuration, or the best 10 of the whole space)")] = None,
        untried: Annotated[bool, typer.Option("--untried", help="Only configurations not yet measured of the task on the model's device")] = False,
        format: FormatOption = "table",
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Rank configurations (given, or every point of the task's space) with a stored cost model."""
        import numpy as np
        import pandas as pd

        from autotune.db.queries import resolve_filters
        from autotune.errors import UsageError

        check_format(format)
        database = open_db(db, existing=True)
        try:
            campaign = resolve_filters(database, campaign=campaign)["campaign"]
            cost_model, task, info = _load_model(database, model, campaign)
            if untried and info["device_id"] is None:
                raise UsageError(f"model {info['id']} was stored without a device: --untried leaves out the "
                                 "configurations measured on the model's device, and it has none")
            ts = space_for_task(database, task, info)
            given = [parse_json_arg(c, "--config") for c in (config or [])]
            where = ["--config"] * len(given)  # what each configuration was given as, for an error about it
            if configs is not None:
                try:
                    text = sys.stdin.read() if str(configs) == "-" else configs.read_text()
                except (OSError, UnicodeDecodeError) as exc:
                    raise UsageError(f"cannot read --configs {str(configs)!r}: {exc.__class__.__name__}") from None
                lines = [(f"line {n} of --configs {str(configs)!r}", line)
                         for n, line in enumerate(text.splitlines(), 1) if line.strip()]
                if not lines:  # else the whole space would be ranked, as if no --configs were given
                    raise UsageError(f"--configs {str(configs)!r} holds no configuration (one JSON object a line)")
                given += [parse_json_arg(line, what) for what, line in lines]
                where += [what for what, _ in lines]
            for what, c in zip(where, given):
                if not isinstance(c, dict):
                    raise UsageError(f"{what} {json.dumps(c)[:60]!r} must be a JSON object of knob values, "
                                     "e.g. '{\"block\": 64}'")
            sampled = False
            cands = [_candidate(ts, c) for c in given] if given else None
            if cands is None:
                cands, sampled = _whole_space(ts)
            if untried:
                tried = database.lookup(info["task_id"], info["device_id"], [c.key for c in cands])
                cands = [c for c in cands if c.key not in tried]
        finally:
            database.close()
        if given and ts.code:
            typer.echo(f"note: the space's constraint {ts.code[0]} is Python code the database does not store: "
                       "it is not checked", err=True)
        scores = _scores(cost_model, ts.space, cands, info) if cands else np.zeros(0)
        order = np.argsort(-scores, kind="stable")[: top or (len(cands) if given else 10)]
        df = pd.DataFrame({"rank": np.arange(1, len(order) + 1), "score": scores[order],
                           "config": [cands[i].payload for i in order]})
        if format != "table":  # each row names the stored model that scored it, as the table's first line does
            write_frame(df.assign(model=info["id"]), format)
            return
        on = f" on {info['device']}" if info.get("device") else ""
        noun = ("untried " if untried else "") + ts.noun
        if sampled:
            noun = f"random {noun} (too many to rank each)"
        if given:
            shown = (f": {len(cands):,} untried of the {len(given):,} given configurations" if cands else
                     ": none of the given configurations is untried, every one is measured") if untried else ""
        else:
            shown = (f": the best {len(order):,} of the {len(cands):,} {noun}" if len(order) < len(cands)
                     else f": all {len(cands):,} {noun}" if cands else f": no {noun}, every one is measured")
        typer.echo(f"model {info['id']} ({info['name']}, {info['n_samples']} samples) for task {task.name}{on}{shown}")
        if cands:
            print_table(df, max_width=200)


def _load_model(database, model_id: int | None, campaign: str | None):
    """(model, task, info) as ``Database.load_cost_model`` gives them; a model stored untrained is a UsageError."""
    from autotune.cost_models.pooled import PooledModel, device_vector
    from autotune.db.queries import cost_models
    from autotune.errors import UsageError
    from autotune.types import Device

    if campaign is not None and model_id is None and cost_models(database, campaign=campaign).empty:
        row = database.campaign(campaign)
        if "+" not in row.algorithm:  # a guided search is named search+model (warm-start+...)
            raise UsageError(f"campaign {campaign!r} stores no cost model: its search ({row.algorithm}) is not guided "
                             "by one (--cost-model xgb, the default, is); `autotune models` lists the stored ones")
        every = ((row.options or {}).get("algorithm_options") or {}).get("retrain_every")
        raise UsageError(f"campaign {campaign!r} has no stored cost model yet: its search ({row.algorithm}) stores its "
                         f"model when it first trains it{f', after {every} results' if every else ''}; "
                         "`autotune models` lists the stored ones")
    cost_model, task, info = database.load_cost_model(model_id=model_id, campaign=campaign)
    if not getattr(cost_model, "trained", True):
        raise UsageError(f"model {info['id']} was stored untrained (its campaign had too few results when it was "
                         "stored): it has nothing to rank with; `autotune models` lists the others")
    if isinstance(cost_model, PooledModel) and not cost_model.target_known:
        # stored before the model kept its target's properties: those of the device it was stored for
        cost_model.target = device_vector(Device(info["device"] or "", "cuda", dict(info["device_properties"] or {})))
    return cost_model, task, info


def _scores(cost_model, space, cands, info):
    """The model's scores of the candidates; a model whose features are not those of the space is a UsageError."""
    import numpy as np
    from xgboost.core import XGBoostError

    from autotune.cost_models.xgb import xgb_message
    from autotune.errors import UsageError

    try:
        return np.asarray(cost_model.predict(space.features(cands)), dtype=float)
    except (XGBoostError, ValueError) as exc:
        raise UsageError(f"model {info['id']} does not fit the space of its task ({xgb_message(exc)})") from None
