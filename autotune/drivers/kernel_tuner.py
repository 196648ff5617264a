"""tune_kernel(): Kernel Tuner's interface over autotune's engine, for a user's own C and CUDA kernels.

A Kernel Tuner script switches by changing its import::

    from autotune import tune_kernel      # was: from kernel_tuner import tune_kernel
    results, env = tune_kernel("vector_add", kernel_string, size, [c, a, b, n], {"block_size_x": [64, 128]})

Every measured configuration is a trial in the database (``db``), in a campaign (``campaign``;
the same name resumes it), searched by a Kernel Tuner strategy's equivalent guided by a cost
model. Semantics, supported options and differences from Kernel Tuner: docs/kernel-tuner.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import DEFAULT_TRANSFER_TOP
from autotune.campaign import Campaign, check_run
from autotune.db import open_database
from autotune.drivers.function import constraint_texts
from autotune.drivers.kernel_tuner_args import (
    IGNORED_KT_OPTIONS,
    check_cache_path,
    check_options,
    choose_search,
    detect_language,
    finite_number,
    read_source,
)
from autotune.errors import UsageError, check_campaign_name
from autotune.progress import Progress, make_progress, stderr_is_terminal
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels.user_arguments import check_answer
from autotune.search_spaces.kernels.user_kernel import UserKernel, kernel_name_in_source
from autotune.search_spaces.replay import check_cache_header, write_cache
from autotune.types import Measurement, Status, stable_key


def _metric(spec, params: dict):
    if callable(spec):
        return spec(dict(params))
    if isinstance(spec, str):
        from autotune.search_spaces.constraints import Constraint

        c = Constraint(spec, set(params))
        return c._fn(params)  # the expression's value
    raise UsageError(f"a metric must be an expression string or a callable, not {type(spec).__name__}")


def _result(m: Measurement, metrics: Mapping | None) -> dict:
    r = dict(m.candidate.payload)
    r["time"] = m.cost * 1e3
    r["times"] = [t * 1e3 for t in m.times]
    r["compile_time"] = m.build_s * 1e3
    r["benchmark_time"] = m.run_s * 1e3
    for k, spec in (metrics or {}).items():
        try:
            r[k] = _metric(spec, r)
        except (ArithmeticError, ValueError, TypeError) as exc:
            r[k] = f"metric failed: {exc}"
    return r


def tune_kernel(kernel_name: str, kernel_source, problem_size, arguments: list, tune_params: dict, *,
                grid_div_x=None, grid_div_y=None, grid_div_z=None, restrictions=None, answer=None, atol: float = 1e-6,
                verify: Callable | None = None, lang: str | None = None, compiler_options: list[str] | None = None,
                block_size_names: list[str] | None = None, iterations: int = 7, strategy: str | None = None,
                cost_model: str | None = "xgb", trials: int | None = None, time_budget: float | None = None,
                seed: int = 0, db: str = "sqlite:///autotune.db", campaign: str | None = None,
                cache: str | os.PathLike | None = None, verbose: bool = False, quiet: bool = False,
                progress: bool | Progress | None = None, **ignored_kt_options) -> tuple[list[dict], dict]:
    """Tune a C or CUDA kernel as Kernel Tuner's ``tune_kernel`` does; ``(results, env)``.

    ``results``: one dict per configuration measured OK in this campaign (the tunable parameters,
    ``time`` in ms (the median of the repeats), ``times`` (ms), ``compile_time``, ``benchmark_time`` and
    any ``metrics``); ``env``: the device, problem size, parameters, campaign, and the configurations
    that failed (``failed``: status and error). Extra options beyond Kernel Tuner's: ``cost_model``,
    ``trials``, ``time_budget``, ``seed``, ``db``, ``campaign``, ``transfer_from`` (a warm start, as the drivers'),
    ``fresh`` (delete the campaign of that name first), ``retry_failed`` (measure again the configurations
    whose stored trial crashed or timed out, which another attempt may pass), and ``c_timing`` ("kernel": the C
    function returns its own time in ms, Kernel Tuner's convention; "runner": a void function timed by
    the wall clock; default: decided from the function's declared return type), and ``progress``: bars
    on standard error for the compile check and the search, and a closing summary line (True, False,
    or an :class:`autotune.progress.Progress`; default: on when standard error is a terminal or with
    ``verbose``, off with ``quiet``; the bars themselves are drawn only on a terminal)."""
    check_campaign_name(campaign)
    strategy_options, device_index, smem_args = check_options(ignored_kt_options)
    # arguments that are only used late (by the runners, or after the search) are checked first
    run_timeout = ignored_kt_options.get("run_timeout")
    run_timeout = 60.0 if run_timeout is None else finite_number(
        run_timeout, "run_timeout must be a {} number of seconds", positive=True)
    atol = finite_number(atol, "atol must be a {} number (numpy.allclose's absolute tolerance)", positive=False)
    if verify is not None and not callable(verify):
        raise UsageError(f"verify must be a function verify(answer, results, atol=...), not {type(verify).__name__}")
    if cache is not None:
        check_cache_path(cache)
    if progress is None:
        progress = not quiet and (verbose or stderr_is_terminal())
    bar = make_progress(progress, "tune_kernel")
    for name in IGNORED_KT_OPTIONS:
        if ignored_kt_options.get(name) is not None:
            warnings.warn(f"tune_kernel ignores the Kernel Tuner option {name!r}", stacklevel=2)
    code, source_file = read_source(kernel_source)
    lang = detect_language(code, lang)
    if not isinstance(kernel_name, str) or not kernel_name.strip():
        raise UsageError("kernel_name must be the name of the kernel function, a non-empty string")
    if not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise UsageError(f"iterations must be a positive integer, not {iterations!r}")
    if compiler_options is None:
        compiler_options = []
    if isinstance(compiler_options, str) or not all(isinstance(o, str) for o in compiler_options):
        raise UsageError("compiler_options must be a list of strings, e.g. ['-O3', '-fopenmp']")
    trials = trials if trials is not None else strategy_options.pop("max_fevals", None)
    time_budget = time_budget if time_budget is not None else strategy_options.pop("time_limit", None)
    strategy_options.pop("max_fevals", None)
    strategy_options.pop("time_limit", None)
    if strategy_options:
        warnings.warn(f"tune_kernel ignores the strategy options {', '.join(strategy_options)} (only max_fevals "
                      "and time_limit are used)", stacklevel=2)
    algorithm, guide = choose_search(strategy, cost_model, trials is not None or time_budget is not None)
    search = make_search(algorithm, guide)  # unknown names fail before anything is built
    answer = check_answer(answer, arguments)
    include = [f"-I{Path.cwd()}"] + ([f"-I{source_file.parent}"] if source_file else [])
    options = [*include, *compiler_options]
    defines = ignored_kt_options.get("defines")
    # a misspelt kernel_name would fail every configuration only when the compiled function is looked up;
    # the name may also come from an included file, a -D option or a define
    include_dirs = [o[2:] if len(o) > 2 else nxt for o, nxt in zip(options, [*options[1:], ""]) if o.startswith("-I")]
    define_text = [f"{k} {v}" for k, v in defines.items()] if isinstance(defines, Mapping) else []
    kernel_name_in_source(kernel_name, code, [d for d in include_dirs if d], extra=[*compiler_options, *define_text])
    compiler = ignored_kt_options.get("compiler") or (os.environ.get("CXX") or "g++")
    protocol = Protocol(warmup=0, min_repeats=int(iterations), max_repeats=int(iterations), min_time_s=0.0,
                        budget_s=5.0)
    grid_div = (grid_div_x, grid_div_y, grid_div_z)
    common = {"restrictions": restrictions, "grid_div": grid_div, "block_size_names": block_size_names,
              "defines": defines, "smem_args": smem_args,
              "source_name": str(source_file) if source_file else None, "answer": answer, "atol": atol,
              "verify": verify}
    if lang == "C":
        from autotune.runners.c import UserCRunner

        kernel = UserKernel(kernel_name, code, lang, problem_size, arguments, tune_params, compiler=compiler,
                            timing=ignored_kt_options.get("c_timing"), **common)
        kernel.space().size()  # an empty space fails here, before any compilation
        runner = UserCRunner(kernel, arguments, answer, atol, verify, protocol=protocol, compiler_options=options,
                             run_timeout_s=run_timeout)
    else:
        from autotune.runners.cuda import probe_cuda_device
        from autotune.runners.user_cuda import UserCudaRunner

        props = probe_cuda_device(device_index, ignored_kt_options.get("backend") or "auto")
        kernel = UserKernel(kernel_name, code, lang, problem_size, arguments, tune_params,
                            max_threads=int(props.get("max_threads_per_block") or 1024), **common)
        kernel.space().size()
        runner = UserCudaRunner(kernel, arguments, answer, atol, verify, device_index,
                                ignored_kt_options.get("backend") or "auto", protocol=protocol,
                                compiler_options=options, run_timeout_s=run_timeout)
    space = kernel.space()
    # the task is the kernel and its inputs, so that any space over them looks up what another measured; the
    # space searched (the tunable parameters' values and the restrictions) is the campaign's: its search state
    # and history hold only that space's points, so another space is another campaign
    space_id = stable_key({"tune_params": kernel.tune_params, "restrictions": constraint_texts(space)})
    label = f"{kernel.kernel_name}-{lang.lower()}-{stable_key([kernel.task.key, space_id])[:8]}"

    def named(name: str) -> str:  # the campaign's name, given its search's
        return campaign or f"kt-{label}-{name}-seed{seed}"

    fresh = bool(ignored_kt_options.get("fresh"))
    retry_failed = bool(ignored_kt_options.get("retry_failed"))
    database = None
    try:
        # before the database is opened: a refused call leaves no database file behind
        if cache is not None:  # one the results could not be written to is refused before they are measured
            check_cache_header(cache, runner.device.name, kernel.kernel_name, problem_size, kernel.names)
        check_run(space, search, trials=trials, time_budget=time_budget, seed=seed)
        database = open_database(db)
        _compile_check(kernel, runner, space, seed, bar)
        transfer_from, cname = ignored_kt_options.get("transfer_from"), named(search.name)
        recipe: dict = {"space": space_id}  # what a resume under a campaign= name checks (_check_same_space)
        if transfer_from:  # the sources chosen are kept with the campaign (its recipe), as the drivers' are
            from autotune.transfer.sources import warm_started

            recipe["args"] = {"transfer_from": transfer_from, "transfer_top": DEFAULT_TRANSFER_TOP}
            search, cname = warm_started(database, space.task, runner.device, algorithm, transfer_from,
                                         DEFAULT_TRANSFER_TOP, search, named, fresh=fresh, recipe=recipe, quiet=quiet)
        if not fresh:
            _check_same_space(database, cname, space, runner.device, space_id)
        result = Campaign(cname, space, search, runner, database, trials=trials, time_budget=time_budget,
                          batch=8, seed=seed, progress=bar.shown, console=bar.console, recipe=recipe,
                          fresh=fresh, retry_failed=retry_failed).run()
        history = [m for m, _ in database.campaign_history(database.campaign(cname).id)]
    finally:
        runner.close()
        if database is not None:
            database.close()
    if history and all(m.status is Status.COMPILE_ERROR for m in history):
        raise UsageError(f"every configuration failed to compile ({len(history)} tried); the first error: "
                         f"{history[0].error.strip()[:1500]}")
    metrics = ignored_kt_options.get("metrics")
    results = [_result(m, metrics) for m in history if m.ok]
    failed = [{**m.candidate.payload, "status": m.status.value, "error": m.error[:500]} for m in history if not m.ok]
    device = runner.device
    env = {
        "device_name": device.name, "device_kind": device.kind, "device_properties": device.properties,
        "kernel_name": kernel.kernel_name, "lang": lang, "problem_size": problem_size if not callable(problem_size)
        else "callable", "tune_params": kernel.tune_params, "iterations": int(iterations),
        "compiler_options": list(compiler_options), "strategy": strategy, "algorithm": search.name,
        "campaign": cname, "status": result.status, "trials": result.trials, "resumed": result.resumed,
        "task_key": kernel.task.key, "device_key": device.key, "db": database.safe_url, "failed": failed,
        # the best of everything the campaign holds, trials it reused from earlier campaigns included
        "best_config": dict(best.candidate.payload) if (best := result.best_evaluated) is not None else None,
    }
    if lang == "C":
        env["c_timing"] = runner.timing
        env["compiler"] = device.properties.get("compiler")
    if cache is not None:
        write_cache(cache, device.name, kernel.kernel_name, problem_size, kernel.tune_params, history)
        env["cache"] = str(cache)
    if not quiet:
        _print(results, failed, kernel.names, verbose)
    bar.summary(summary_text(results, failed, result.measured_here, cname, bar.elapsed_s))
    return results, env


def _check_same_space(database, name: str, space, device, space_id: str) -> None:
    """UsageError when the campaign ``name`` of this task and device was run over other tunable parameter
    values or restrictions: its search state and history belong to that space (a grid search would resume
    at its end and never measure the points a loosened restriction lets in). A campaign stored without its
    space's digest is resumed as it is."""
    if database.campaign_is_for(name, space.task, device) is not True:
        return  # no such campaign yet, or another task's (which opening it refuses)
    stored = ((database.campaign(name).options or {}).get("recipe") or {}).get("space")
    if stored is not None and stored != space_id:
        raise UsageError(f"campaign {name!r} searched other tune_params or restrictions; resume it with the same "
                         "ones, start it afresh (fresh=True: its measurements stay, looked up), or choose another "
                         "campaign name")


def summary_text(results: list[dict], failed: list[dict], measured_here: int, campaign: str, seconds: float) -> str:
    """The closing line of a tune_kernel call: what the campaign holds, what this call measured and in how
    long, and the best time."""
    text = (f"{len(results) + len(failed)} configurations in campaign {campaign} ({len(failed)} failed), "
            f"{measured_here} measured in {seconds:.1f} s")
    if results:
        text += f", best {min(r['time'] for r in results):.4g} ms"
    return text


def _compile_check(kernel: UserKernel, runner, space, seed: int, bar: Progress | None = None) -> None:
    """Compile up to three configurations before the campaign; when all fail, the source is broken:
    UsageError with the first compiler error (a configuration that fails alone is a trial like any other).
    The builds are cached, so the campaign does not compile them again. ``bar`` counts the compilations
    (its total grows by one for each one that fails)."""
    bar = bar or Progress("compile check", enabled=False)
    with bar.phase("compile check", total=1):
        _compile_first(kernel, runner, space, seed, bar)


def _compile_first(kernel: UserKernel, runner, space, seed: int, bar: Progress) -> None:
    rng = np.random.default_rng(seed)
    first = ""
    for k in range(3):
        cand = space.point(0) if k == 0 and space.size() is not None else space.sample(rng)
        if kernel.lang == "C":
            so, err, _ = runner.build(dict(cand.payload))
            ok = so is not None
        else:
            cubin, err, _, _ = runner.builder.build(kernel.source(cand.payload))
            ok = cubin is not None
        bar.advance(1)
        if ok:
            return
        if k < 2:
            bar.update(total=k + 2)
        first = first or err
        if err.startswith("invalid configuration"):
            raise UsageError(f"configuration {cand.payload} cannot be made: {err}")
    raise UsageError(f"the kernel does not compile ({kernel.lang}, tried 3 configurations); the first error: "
                     f"{first.strip()[:1500]}")


def _print(results: list[dict], failed: list[dict], names: list[str], verbose: bool) -> None:
    def line(r: dict) -> str:
        params = ", ".join(f"{n}={r[n]}" for n in names)
        return f"{params}, time={r['time']:.3f}ms" if isinstance(r.get("time"), float) else params

    for r in results:
        print(line(r))
    if verbose:
        for f in failed:
            print(", ".join(f"{n}={f[n]}" for n in names) + f", {f['status']}: {f['error'].splitlines()[0][:120]}")
    if results:
        best = min(results, key=lambda r: r["time"])
        print(f"best performing configuration:\n{line(best)}")
    elif failed:
        print(f"no configuration ran correctly ({len(failed)} failed); see env['failed']")
