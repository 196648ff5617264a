"""`autotune optimize-graph` and `autotune rules generate`."""

from __future__ import annotations

import time
from collections import Counter
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, emit_json, handle_errors, open_db, write_frame
from autotune.errors import UsageError


def rule_record(rule) -> dict:
    """A rule as stored in the database: its JSON plus a content key (code rules are keyed by their JSON)."""
    from autotune.types import stable_key

    d = rule.to_json()
    return {**d, "key": getattr(rule, "key", None) or stable_key(d, 12)}


def optimize_graph(model: str, output: str, device: str = "cpu", algorithm: str = "backtracking",
                   alpha: float = 1.05, budget: int = 3000, time_limit: float = 45.0, op_cache: str | None = None,
                   rounds: int = 25, seed: int = 0, rules_file: str | None = None, db: str | None = None,
                   max_measure: int = 400) -> dict:
    """Optimize an ONNX model; op costs are logged to the database ``db`` (URL) unless a JSON ``op_cache`` is named.
    ``device``: cpu (onnxruntime), cuda (torch on the GPU) or torch-cpu (the torch path on the CPU, for tests)."""
    from autotune.drivers import graph as optimizer
    from autotune.search_spaces.graphs import onnx_io
    optimizer.check_device(device)
    import onnx

    try:
        original = onnx.load(model)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a usage error
        raise UsageError(f"cannot read ONNX model {model!r}: {exc}") from None
    from autotune.search_spaces.graphs.builtin_rules import builtin_rules
    from autotune.search_spaces.graphs.rules import load_rules
    graph = onnx_io.from_onnx(original)
    if device != "cpu":  # an op torch cannot run would fail the end-to-end check: say so before searching
        from autotune.runners.torch_ops import check_op
        for n in graph.runtime_nodes():
            check_op(n.op, f" (node {n.outputs[0]!r})")
    rules = builtin_rules() + (load_rules(rules_file) if rules_file else [])
    database = open_db(db) if db and not op_cache else None
    if database is not None:
        database.save_rules([rule_record(r) for r in rules])
    cm = optimizer.default_cost_model(op_cache, db=database, max_measure=max_measure, device=device)
    t0 = time.perf_counter()
    res = optimizer.search(graph, algorithm, alpha, budget, time_limit, rules=rules, cost_model=cm, seed=seed)
    # ops whose cost the result relies on but that were only predicted (beyond the measurement cap) get measured
    confirmed = cm.confirm(graph) + cm.confirm(res.graph)
    if confirmed:
        res.cost_before, res.cost_after = cm.graph_cost(graph), cm.graph_cost(res.graph)
    out_model, rep = optimizer.finalize(original, res, rounds=rounds, device=device)
    onnx.save(out_model, output)
    cm.cache.save() if hasattr(cm.cache, "save") else None
    return {"model": model, "output": output, "device": device, "op_device": cm.device,
            "backend": "onnxruntime" if device == "cpu" else "torch", "algorithm": algorithm,
            "rules_applied": res.applied,
            "rule_counts": dict(Counter(res.applied)), "nodes_before": len(graph.runtime_nodes()),
            "nodes_after": len(res.graph.runtime_nodes()) if rep["kept"] else len(graph.runtime_nodes()),
            "predicted_cost_before_s": res.cost_before, "predicted_cost_after_s": res.cost_after,
            "predicted_speedup": res.cost_before / res.cost_after, "evaluated": res.evaluated,
            "search_s": res.search_s, "ops_measured": cm.measured, "ops_estimated": cm.estimated,
            "ops_confirmed": confirmed,
            "total_s": time.perf_counter() - t0, **rep}


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    rules_app = typer.Typer(help="Graph substitution rules.", no_args_is_help=True)
    app.add_typer(rules_app, name="rules")

    @app.command("optimize-graph")
    @handle_errors
    def optimize_graph_cmd(
        model: Annotated[str, typer.Argument(help="input ONNX model (static shapes)")],
        output: Annotated[str, typer.Option("-o", "--output", help="where to write the optimized ONNX model")],
        device: Annotated[str, typer.Option(help="cpu (onnxruntime) or cuda (PyTorch on the GPU; needs the torch extra)")] = "cpu",
        algorithm: Annotated[str, typer.Option(help="backtracking (TASO), engine-backtracking, mcmc, evolutionary or random")] = "backtracking",
        alpha: Annotated[float, typer.Option(help="backtracking relaxation: queue graphs up to alpha x best")] = 1.05,
        budget: Annotated[int, typer.Option(help="graphs evaluated by predicted cost")] = 3000,
        time_limit: Annotated[float, typer.Option(help="search time limit, seconds")] = 45.0,
        op_cache: Annotated[str | None, typer.Option(help="JSON file caching measured op costs (instead of the database)")] = None,
        rules: Annotated[str | None, typer.Option(help="extra rules JSON (e.g. from rules generate)")] = None,
        max_measure: Annotated[int, typer.Option(help="distinct ops timed during the search; the rest are predicted by XGBoost, and those the result relies on are timed at the end")] = 400,
        json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
        db: DbOption = DEFAULT_DB,
    ):
        """Rewrite an ONNX graph with verified substitutions searched by measured per-op cost.
        Each distinct op is timed once per device and logged to the database as a trial of task kind "op"."""
        r = optimize_graph(model, output, device, algorithm, alpha, budget, time_limit, op_cache, rules_file=rules, db=db,
                           max_measure=max_measure)
        if json_out:
            emit_json(r)
            return
        typer.echo(f"rules applied ({len(r['rules_applied'])}): {r['rule_counts']}")
        typer.echo(f"nodes {r['nodes_before']} -> {r['nodes_after']}; searched {r['evaluated']} graphs "
                   f"in {r['search_s']:.1f} s ({r['ops_measured']} ops measured)")
        typer.echo(f"predicted cost {r['predicted_cost_before_s'] * 1e3:.3f} ms -> "
                   f"{r['predicted_cost_after_s'] * 1e3:.3f} ms (x{r['predicted_speedup']:.3f})")
        lb, la = r["latency_before"], r["latency_after"]
        runtime = "onnxruntime (all optimisations)" if r["backend"] == "onnxruntime" else f"torch on {r['op_device']}"
        typer.echo(f"{runtime} median {lb['median_s'] * 1e3:.3f} ms (IQR {lb['iqr_s'] * 1e3:.3f})"
                   f" -> {la['median_s'] * 1e3:.3f} ms (IQR {la['iqr_s'] * 1e3:.3f})")
        c = r["check"]
        typer.echo(f"numeric check: max abs error {c['max_abs_error']:.3g}, max rel error {c['max_rel_error']:.3g} "
                   f"({'passed' if c['passed'] else 'FAILED'})")
        typer.echo(f"wrote {output}: {'optimized graph' if r['kept'] else 'original graph'} ({r['reason']})")

    @rules_app.command("generate")
    @handle_errors
    def generate_cmd(
        max_ops: Annotated[int, typer.Option("--max-ops", help="largest graph size enumerated (1-3)")] = 2,
        output: Annotated[str | None, typer.Option("-o", "--output", help="write the kept rules as JSON")] = None,
        z3_timeout_ms: Annotated[int, typer.Option(help="z3 timeout per rule, ms")] = 2000,
        json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
        db: DbOption = DEFAULT_DB,
    ):
        """Enumerate small graphs, find equal pairs by exact fingerprints, verify, keep the non-redundant rules
        (stored in the database with their provenance and verification status, and with -o as JSON)."""
        from autotune.search_spaces.graphs.synthesis import generate
        if not 1 <= max_ops <= 3:
            raise UsageError(f"--max-ops must be 1, 2 or 3 (got {max_ops})")
        rep = generate(max_ops, z3_timeout_ms=z3_timeout_ms, output=output)
        rep["stored_new"] = open_db(db).save_rules([rule_record(r) for r in rep["rules"]])
        if json_out:
            emit_json({k: v for k, v in rep.items() if k != "rules"})
            return
        for k, v in rep.items():
            if k != "rules":
                typer.echo(f"{k}: {v}")

    @rules_app.command("list")
    @handle_errors
    def list_cmd(
        status: Annotated[str | None, typer.Option(help="hand-written, proved or tested")] = None,
        provenance: Annotated[str | None, typer.Option(help="builtin or generated (prefix)")] = None,
        format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json")] = "table",
        db: DbOption = DEFAULT_DB,
    ):
        """List the rules stored in the database with their provenance and verification status."""
        from autotune.db.queries import rules as rules_query

        df = rules_query(open_db(db), status=status, provenance=provenance)
        write_frame(df.drop(columns=["rule"]) if format == "table" else df, format)
