"""`autotune tune graph` (alias `autotune optimize-graph`) and `autotune rules generate|list`."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli.common import (
    DEFAULT_DB,
    AlgorithmOptionsOption,
    BatchOption,
    CampaignOption,
    DbOption,
    FreshOption,
    InputShapeOption,
    JsonOption,
    OldBudgetOption,
    OldTimeLimitOption,
    ProgressOption,
    SeedOption,
    emit_json,
    handle_errors,
    open_db,
    with_old_budget_names,
    writable_output,
)
from autotune.cli.listings import FormatOption, WideOption, check_format, write_frame
from autotune.cli.tables import Col, relative_time, short_key
from autotune.errors import UsageError, check_choice
from autotune.progress import Progress

#: the verification statuses a stored rule can have (builtin rules are hand-written; generated ones proved or
#: tested; those read from a --rules file unverified)
RULE_STATUSES = ("hand-written", "proved", "tested", "unverified")
#: provenances of stored rules (generated ones are "generated:DOMAIN", those of a --rules file "file:PATH";
#: --provenance matches a prefix)
RULE_PROVENANCES = ("builtin", "generated", "file")

GraphTrialsOption = Annotated[int | None, typer.Option(
    "--trials", "-n", help="Graphs to evaluate (over all runs of the campaign); with no budget given, 3000 and a 45 s time budget")]
GraphTimeOption = Annotated[float | None, typer.Option("--time-budget", help="Wall-clock seconds of search for this run")]
GraphAlgorithmOption = Annotated[str, typer.Option(
    "--algorithm", "-a", help="Search algorithm: taso-queue (TASO's cost-ordered queue), equality-saturation "
                              "(Tensat: every rewrite at once in an e-graph, the cheapest graph extracted), "
                              "backtracking, mcmc, evolutionary, random, bandit (see `autotune algorithms`)")]


# `rules list`: key shortened, the name given the room (whole up to 24 characters, as long as the built-in
# and generated names: a long file provenance is cut first, at its start, keeping the file's name), times
# relative (--wide: every column in full)
RULE_COLUMNS = [Col("key", render=short_key), Col("name", flex=True, least=24), Col("provenance", cut="start"),
                Col("status"), Col("created", render=relative_time)]


def command_name(ctx: typer.Context) -> str:
    """The command as the user typed it, without the program name ("tune graph", "optimize-graph")."""
    return ctx.command_path.split(" ", 1)[-1]


def _print(r: dict) -> None:
    typer.echo(f"campaign {r['campaign']} ({r['status']}{', resumed' if r['resumed'] else ''}): "
               f"{r['evaluated']} graphs evaluated in {r['search_s']:.1f} s ({r['ops_measured']} ops timed)")
    if r.get("ops_failed"):
        graphs = "graphs holding them are failed trials" if r.get("op_costs") == "timed" else "their costs estimated"
        typer.echo(f"{len(r['ops_failed'])} ops could not be timed alone ({graphs}; stored as failed op trials of "
                   f"{r['op_device']!r}): " + "; ".join(f"{f['op']}: {f['error'][:200]}" for f in r["ops_failed"][:3])
                   + ("; ..." if len(r["ops_failed"]) > 3 else ""))
    if r.get("op_costs") == "estimated":
        typer.echo(f"graph costs partly estimated (ops beyond --max-measure): stored on {r['graph_device']!r}; "
                   f"{r['ops_confirmed']} distinct ops estimated during the search timed for the check")
    if r.get("started_from", "original") != "original":
        typer.echo(f"searched from {r['started_from']}'s output ({r['start_speedup']:.3f}x over the input model)")
    typer.echo(f"rules applied ({len(r['rules_applied'])}): {r['rule_counts']}")
    typer.echo(f"nodes {r['nodes_before']} -> {r['nodes_searched']} searched, {r['nodes_after']} kept")
    typer.echo(f"predicted cost {r['predicted_cost_before_s'] * 1e3:.3f} ms -> "
               f"{r['predicted_cost_after_s'] * 1e3:.3f} ms (x{r['predicted_speedup']:.3f})")
    lb, la = r["latency_before"], r["latency_after"]
    runtime = "onnxruntime (all optimisations)" if r["backend"] == "onnxruntime" else f"{r['backend']} on {r['op_device']}"
    typer.echo(f"{runtime} median {lb['median_s'] * 1e3:.3f} ms (IQR {lb['iqr_s'] * 1e3:.3f})"
               f" -> {la['median_s'] * 1e3:.3f} ms (IQR {la['iqr_s'] * 1e3:.3f})")
    c = r["check"]
    typer.echo(f"numeric check: max abs error {c['max_abs_error']:.3g}, max rel error {c['max_rel_error']:.3g} "
               f"({'passed' if c['passed'] else 'FAILED'})")
    where = f"wrote {r['output']}: " if r["output"] else ""
    typer.echo(f"{where}{'optimized graph' if r['kept'] else 'original graph'} ({r['reason']})")


def tune_graph(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Input ONNX model (static shapes, or dynamic axes given with --input-shape)")],
    output: Annotated[str, typer.Option("-o", "--output", help="Where to write the optimized ONNX model")],
    device: Annotated[str, typer.Option("--device", help="cpu (onnxruntime), cuda (PyTorch on the GPU) or torch-cpu (PyTorch on the CPU); the last two need the torch extra")] = "cpu",
    algorithm: GraphAlgorithmOption = "taso-queue",
    alpha: Annotated[float | None, typer.Option("--alpha", help="taso-queue and backtracking: keep graphs costing up to alpha x the best (default: the algorithm's, 1.05 for taso-queue)")] = None,
    trials: GraphTrialsOption = None,
    time_budget: GraphTimeOption = None,
    seed: SeedOption = 0,
    batch: BatchOption = 16,
    campaign: CampaignOption = None,
    fresh: FreshOption = False,
    option: AlgorithmOptionsOption = None,
    rules: Annotated[str | None, typer.Option("--rules", help="Extra rules JSON (e.g. from `autotune rules generate -o`); stored as provenance file:PATH, status unverified, unless the database holds them already")] = None,
    max_measure: Annotated[int | None, typer.Option("--max-measure", help="Time at most this many distinct ops during the search (at least 1) and estimate the rest by the op-cost model (those the result relies on are timed at the end); the campaign's graph costs are then partly estimated, stored on a device of its own, '... (estimated op costs)', never looked up by another campaign. Default: every op a stored graph's cost rests on is timed")] = None,
    rounds: Annotated[int, typer.Option("--rounds", help="Interleaved end-to-end timing rounds of the final check")] = 25,
    start_from: Annotated[str | None, typer.Option("--start-from", help="Search from a peer optimizer's output, as a user chains tools: onnxruntime (its offline optimizer, extended level), ort-transformers (onnxruntime's transformer optimizer, on transformers), onnxsim (pip install 'autotune\\[bench]') or best (the fastest of those faster than the input beyond noise, else the input); the model kept is the fastest of the original, the peer's and ours")] = None,
    input_shape: InputShapeOption = None,
    json_out: JsonOption = False,
    progress: ProgressOption = True,
    db: DbOption = DEFAULT_DB,
    budget: OldBudgetOption = None,
    time_limit: OldTimeLimitOption = None,
    ray: Annotated[str | None, typer.Option("--ray", metavar="ADDRESS", help="Run the campaign as a Ray task on this cluster (local, auto or HOST:PORT), on a GPU with --device cuda")] = None,
):
    """Rewrite an ONNX graph with verified substitutions, searched as a campaign by measured per-op cost.

    Every evaluated graph is a trial of the campaign (its rewrite sequence from MODEL), logged to --db: `autotune trials --campaign NAME` lists them, and rerunning with the same --campaign resumes the search.

    Each distinct op is timed once per device and stored as a trial of task kind "op" (a timing that fails too, as a failed trial with its reason, so that the op is not timed again). The best graph is checked numerically and timed end to end; OUTPUT is the original model unless the new one is faster.

    On a terminal, bars on standard error show the search and the end-to-end check, and a summary line ends the run (--no-progress: neither)."""
    from autotune.algorithms.registry import parse_options
    from autotune.drivers.graph import optimize_graph, summary_text
    from autotune.search_spaces.graphs.onnx_prepare import parse_input_shapes

    writable_output(output, "the output model")
    trials, time_budget = with_old_budget_names(trials, time_budget, budget, time_limit)
    kwargs = {"model": model, "output": output, "device": device, "algorithm": algorithm, "alpha": alpha,
              "trials": trials, "time_budget": time_budget, "seed": seed, "batch": batch, "campaign": campaign,
              "db": db, "rules_file": rules, "max_measure": max_measure, "rounds": rounds,
              "options": parse_options(option) or None, "fresh": fresh,
              "input_shapes": parse_input_shapes(input_shape) or None, "start_from": start_from}
    bar = Progress(command_name(ctx), enabled=progress, defer_summary=not json_out)  # the summary ends the text
    if ray is not None:
        from autotune.drivers.scale import run_on_ray

        r = run_on_ray("graph", kwargs, ray)
        bar.summary(summary_text(r))
    else:
        r = optimize_graph(**kwargs, progress=bar)
    if json_out:
        emit_json(r)
    else:
        _print(r)
        bar.write_summary()


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    rules_app = typer.Typer(help="Graph substitution rules.", no_args_is_help=True)
    app.add_typer(rules_app, name="rules")
    tune_app.command("graph")(handle_errors(tune_graph))
    app.command("optimize-graph", help="Alias of `autotune tune graph`. " + tune_graph.__doc__)(handle_errors(tune_graph))

    @rules_app.command("generate")
    @handle_errors
    def generate_cmd(
        ctx: typer.Context,
        max_ops: Annotated[int, typer.Option("--max-ops", help="largest graph size enumerated (1-3)")] = 2,
        output: Annotated[str | None, typer.Option("-o", "--output", help="write the kept rules as JSON")] = None,
        z3_timeout_ms: Annotated[int, typer.Option(help="z3 timeout per rule, ms (at least 1)")] = 2000,
        json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
        progress: ProgressOption = True,
        db: DbOption = DEFAULT_DB,
    ):
        """Enumerate small graphs, find equal pairs by exact fingerprints, verify, keep the non-redundant rules
        (stored in the database with their provenance and verification status, and with -o as JSON).

        On a terminal, bars on standard error show the enumeration (graphs per domain) and the verification
        (candidate pairs), and a summary line ends the run (--no-progress: neither)."""
        from autotune.search_spaces.graphs.rule_files import rule_record, save_rules
        from autotune.search_spaces.graphs.synthesis import generate, summary_text
        if not 1 <= max_ops <= 3:
            raise UsageError(f"--max-ops must be 1, 2 or 3 (got {max_ops})")
        if z3_timeout_ms < 1:  # checked here, not by the option's parser: with --json, the error is JSON too
            raise UsageError(f"--z3-timeout-ms must be at least 1, not {z3_timeout_ms}")
        if output:
            writable_output(output, "the rules file")
        bar = Progress(command_name(ctx), enabled=progress, defer_summary=not json_out)
        database = open_db(db)  # a bad URL fails here, before minutes of work
        try:
            rep = generate(max_ops, z3_timeout_ms=z3_timeout_ms, progress=bar)
            rep["stored_new"] = database.save_rules([rule_record(r) for r in rep["rules"]])
        finally:
            database.close()
        if output:  # after the rules are stored: a file that cannot be written loses none of them
            try:
                save_rules(rep["rules"], output)
            except UsageError as exc:
                raise UsageError(f"{exc}; the {len(rep['rules'])} rules kept are stored in the database "
                                 "(autotune rules list)") from None
        bar.summary(summary_text(rep))
        if json_out:
            emit_json({k: v for k, v in rep.items() if k != "rules"})
            return
        for k, v in rep.items():
            if k != "rules":
                typer.echo(f"{k}: {v}")
        bar.write_summary()

    @rules_app.command("list")
    @handle_errors
    def list_cmd(
        status: Annotated[str | None, typer.Option(help="hand-written, proved, tested or unverified (read from a --rules file)")] = None,
        provenance: Annotated[str | None, typer.Option(help="builtin, generated or file (prefix)")] = None,
        format: FormatOption = "table",
        wide: WideOption = False,
        db: DbOption = DEFAULT_DB,
    ):
        """List the rules stored in the database with their provenance and verification status."""
        from autotune.db.queries import rules as rules_query

        if status is not None:
            check_choice("status", status, RULE_STATUSES)
        check_format(format)
        database = open_db(db, existing=True)
        try:
            df = rules_query(database, status=status, provenance=provenance)
            if provenance is not None and df.empty:
                _check_provenance(provenance, rules_query(database)["provenance"])
        finally:
            database.close()
        if format == "table" and df.empty:
            typer.echo("no rules" + (" match" if status or provenance else " yet"), err=True)
            return
        write_frame(df.drop(columns=["rule"]) if format == "table" else df, format, columns=RULE_COLUMNS, wide=wide)


def _check_provenance(prefix: str, stored) -> None:
    """UsageError when ``prefix`` starts no provenance a rule can have (builtin, generated:DOMAIN, or one
    stored in the database), naming the valid ones and the closest; an empty listing of a valid one is fine."""
    valid = sorted({*RULE_PROVENANCES, *(f"generated:{d.name}" for d in _domains()), *stored})
    if not any(v.startswith(prefix) for v in valid):
        check_choice("provenance", prefix, valid)


def _domains():
    from autotune.search_spaces.graphs.generator import DOMAINS

    return DOMAINS
