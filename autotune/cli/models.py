"""`autotune models` (stored cost models and their quality) and `autotune predict` (rank configurations)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import (
    DEFAULT_DB,
    DbOption,
    FormatOption,
    WideOption,
    check_format,
    handle_errors,
    open_db,
    parse_json_arg,
    print_table,
    write_frame,
)
from autotune.cli.tables import Col, device_text, number, relative_time, size_bytes


def _weights(v) -> str:
    return "pruned" if v == 0 else size_bytes(v)


# The default table (--wide: every column in full; csv and json: every column, raw).
MODEL_COLUMNS = [
    Col("id", render=number, right=True),
    Col("model", width=10),
    Col("trained_for", header="trained for", flex=True, cut="start"),
    Col("n_samples", header="samples", render=number, right=True),
    Col("spearman", render=number, right=True),
    Col("top_k_recall", header="top-k recall", render=number, right=True),
    Col("bytes", header="weights", render=_weights, right=True),
    Col("pinned", render=number),
    Col("created", render=relative_time, least=10),
]


def space_for_task(task, device_props: dict | None = None):
    """A knob space whose features match those the task's campaigns trained on."""
    from autotune.errors import UsageError
    from autotune.search_spaces.knobs import KnobSpace

    if task.kind == "replay":
        return KnobSpace(task.params["tune_params"], task=task)
    if task.kind == "kernel":
        from autotune.search_spaces.kernels import space_for_task as kernel_space

        return kernel_space(task, device_props)
    raise UsageError(f"predict ranks configurations of knob tasks (replay, kernel), not of a {task.kind!r} task")


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("models")
    @handle_errors
    def models_cmd(
        task: Annotated[str | None, typer.Option("--task", help="Task key (or a unique prefix of it) or name")] = None,
        device: Annotated[str | None, typer.Option("--device", help="Device name or key (or a unique prefix of it)")] = None,
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
            both = set(pin or ()) & set(unpin or ())
            if both:
                raise UsageError(f"model {min(both)} given to both --pin and --unpin")
            stored = set(cost_models(database)["id"].tolist())
            missing = sorted((set(pin or ()) | set(unpin or ())) - stored)
            if missing:
                raise UsageError(f"no stored model {', '.join(map(str, missing))}; `autotune models` lists them")
            for ids, flag in ((pin or [], True), (unpin or [], False)):
                for model_id in ids:
                    has_weights = database.pin_cost_model(model_id, flag)
                    note = "" if has_weights or not flag else " (its weights were already pruned: only its row is kept)"
                    typer.echo(f"{'pinned' if flag else 'unpinned'} model {model_id}{note}")
            return
        names = resolve_filters(database, campaign=campaign, task=task, device=device)
        df = cost_models(database, **names, latest=latest)
        if format == "table" and df.empty:
            typer.echo("no stored cost models" + (" match" if task or device or campaign else " yet"), err=True)
            return
        if format == "table" and not wide:
            df = df.assign(trained_for=[c if isinstance(c, str) else f"{t or '-'} on {device_text(d) or '-'}"
                                        for c, t, d in zip(df["campaign"], df["task"], df["device"])])
        write_frame(df, format, columns=MODEL_COLUMNS, wide=wide)

    @app.command("predict")
    @handle_errors
    def predict_cmd(
        model: Annotated[int | None, typer.Option("--model", help="Stored model id (see `autotune models`)")] = None,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Use this campaign's latest model")] = None,
        config: Annotated[list[str] | None, typer.Option("--config", help="A configuration as JSON (repeatable)")] = None,
        configs: Annotated[Path | None, typer.Option("--configs", help="JSONL file of configurations ('-' for stdin)")] = None,
        top: Annotated[int | None, typer.Option("--top", min=1, help="How many to show, best first (default: every given configuration, or the best 10 of the whole space)")] = None,
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
            space = space_for_task(task, info["device_properties"])
            given = [parse_json_arg(c, "--config") for c in (config or [])]
            if configs is not None:
                try:
                    text = sys.stdin.read() if str(configs) == "-" else configs.read_text()
                except (OSError, UnicodeDecodeError) as exc:
                    raise UsageError(f"cannot read --configs {str(configs)!r}: {exc.__class__.__name__}") from None
                given += [parse_json_arg(line, f"a line of {configs}") for line in text.splitlines() if line.strip()]
            if not all(isinstance(c, dict) for c in given):
                raise UsageError("each configuration must be a JSON object of knob values, e.g. '{\"block\": 64}'")
            what = ""
            if given:
                try:
                    cands = [space.candidate(c) for c in given]
                except json.JSONDecodeError as exc:
                    raise UsageError(f"a configuration is not valid JSON: {exc}") from None
            elif task.kind == "replay":  # a recording's constraints are its keys, which the task does not carry
                from autotune.db.transfer import task_configurations

                cands = [space.candidate(c) for c in task_configurations(database, task)]
                what = f"of the {len(cands)} configurations of the task in the database"
            else:
                cands = list(space.enumerate())
                what = f"of the {len(cands)} points of the task's space"
        finally:
            database.close()
        scores = _scores(cost_model, space, cands, info)
        order = np.argsort(-scores, kind="stable")[: top or (len(cands) if given else 10)]
        df = pd.DataFrame({"rank": np.arange(1, len(order) + 1), "score": scores[order],
                           "config": [cands[i].payload for i in order]})
        if format == "table":
            on = f" on {info['device']}" if info.get("device") else ""
            shown = f": the best {len(order)} {what}" if what else ""
            typer.echo(f"model {info['id']} ({info['name']}, {info['n_samples']} samples) for task {task.name}{on}{shown}")
            print_table(df, max_width=200)
        else:
            write_frame(df, format)


def _load_model(database, model_id: int | None, campaign: str | None):
    """(model, task, info) as ``load_cost_model`` gives them; a model stored untrained is a UsageError."""
    from autotune.cost_models.pooled import PooledModel, device_vector
    from autotune.db.queries import load_cost_model
    from autotune.errors import UsageError
    from autotune.types import Device

    cost_model, task, info = load_cost_model(database, model_id=model_id, campaign=campaign)
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
