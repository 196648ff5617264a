"""`autotune models` (stored cost models and their quality) and `autotune predict` (rank configurations)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors, open_db, print_table, write_frame, parse_json_arg


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
        task: Annotated[str | None, typer.Option("--task", help="Task key or name")] = None,
        device: Annotated[str | None, typer.Option("--device", help="Device name or key")] = None,
        format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json")] = "table",
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """List stored cost models with their training size and held-out quality (Spearman, top-k recall)."""
        from autotune.db.queries import cost_models

        write_frame(cost_models(open_db(db), task=task, device=device), format)

    @app.command("predict")
    @handle_errors
    def predict_cmd(
        model: Annotated[int | None, typer.Option("--model", help="Stored model id (see `autotune models`)")] = None,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Use this campaign's latest model")] = None,
        config: Annotated[list[str] | None, typer.Option("--config", help="A configuration as JSON (repeatable)")] = None,
        configs: Annotated[Path | None, typer.Option("--configs", help="JSONL file of configurations ('-' for stdin)")] = None,
        top: Annotated[int, typer.Option("--top", help="How many to show; without configurations, the top of the whole space")] = 10,
        format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json")] = "table",
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Rank configurations (given, or every point of the task's space) with a stored cost model."""
        import numpy as np
        import pandas as pd

        from autotune.db.queries import load_cost_model
        from autotune.errors import UsageError

        database = open_db(db)
        cost_model, task, info = load_cost_model(database, model_id=model, campaign=campaign)
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
        try:
            cands = [space.candidate(c) for c in given] if given else list(space.enumerate())
        except json.JSONDecodeError as exc:
            raise UsageError(f"a configuration is not valid JSON: {exc}") from None
        scores = cost_model.predict(space.features(cands))
        order = np.argsort(-scores, kind="stable")[: (len(cands) if given else top)]
        df = pd.DataFrame({"rank": np.arange(1, len(order) + 1), "score": scores[order],
                           "config": [cands[i].payload for i in order]})
        if format == "table":
            typer.echo(f"model {info['id']} ({info['name']}, {info['n_samples']} samples) for task {task.name}")
            print_table(df, max_width=200)
        else:
            write_frame(df, format)
