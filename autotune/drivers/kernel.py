"""tune_template(): tune a kernel template's schedule on this machine's CPU (C via gcc) or GPU (CUDA via nvcc).

    import autotune
    result, template, extra = autotune.tune_template("gemm", "512,512,512", "cpu", trials=50)
    print(extra["gflops"], template.source(result.best.candidate.payload))
"""

from __future__ import annotations

import numbers
import sys
from functools import partial

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import (
    DEFAULT_ALGORITHM,
    DEFAULT_COST_MODEL,
    DEFAULT_TRANSFER_TOP,
    check_options,
)
from autotune.campaign import Campaign, check_run, checked_seed
from autotune.db import open_database
from autotune.errors import COMMAND_LINE, UsageError, argument, check_campaign_name
from autotune.search_spaces.kernels import TEMPLATES
from autotune.types import Status

DEFAULT_SHAPES = {"gemm": "1024,1024,1024", "conv2d": "1,64,56,56,64,3,3,stride=1,pad=1", "softmax": "4096,4096"}


#: the error of threads given for a GPU target
THREADS_ON_CPU_ONLY = argument("threads") + " applies to " + argument("target='cpu'", "--target cpu") + " only"
#: the error of a GPU index given for the CPU target
DEVICE_ON_CUDA_ONLY = (argument("device_index", "--device") + " (a GPU index) applies to "
                       + argument("target='cuda'", "--target cuda") + " only")


def check_device_index(device_index, target: str, ray: str | None = None) -> int:
    """``device_index`` when it is a GPU index that this run uses: UsageError for one that is not a whole number
    0 or more, or one given where no GPU is chosen by it (the cpu target; Ray, whose actors each hold one GPU),
    which would be ignored."""
    flag = argument("device_index", "--device")
    if isinstance(device_index, bool) or not isinstance(device_index, numbers.Integral) or device_index < 0:
        raise UsageError(f"{flag} is a GPU index, a whole number 0 or more, not {device_index!r}")
    if device_index != 0 and target == "cpu":
        raise UsageError(DEVICE_ON_CUDA_ONLY)
    if device_index != 0 and ray is not None:
        raise UsageError(f"{flag} does not apply with {argument('ray')}: each Ray actor measures on the GPU the "
                         "cluster gives it")
    return int(device_index)


def make_runner(name: str, shape, target: str, threads: int | None = None, device_index: int = 0,
                backend: str = "auto", seed: int = 0, protocol=None):
    """(space, template, runner) for one kernel on this machine."""
    from autotune.search_spaces.kernels import kernel_problem

    if target == "cpu":
        from autotune.runners.c import CRunner, check_compiler, compiler_command

        space, template = kernel_problem(name, shape, "cpu", threads=threads)
        check_compiler(compiler_command())  # a compiler that builds nothing is one message, not a failed trial each
        return space, template, CRunner(template, protocol=protocol, seed=seed)
    if target == "cuda":
        from autotune.runners.cuda import CudaRunner, probe_cuda_device

        if threads is not None:
            raise UsageError(THREADS_ON_CPU_ONLY)
        props = probe_cuda_device(device_index, backend)
        space, template = kernel_problem(name, shape, "cuda", device_props=props)
        return space, template, CudaRunner(template, device_index, backend, protocol=protocol, seed=seed)
    raise UsageError(f"unknown target {target!r}; valid: cpu, cuda")


def make_ray_runner(name: str, shape, target: str, threads: int | None, backend: str, seed: int, address: str,
                    actors: int | None, protocol=None):
    """(space, template, runner) for one kernel measured by Ray actors, each on one device of the cluster
    (a GPU for cuda, ``threads`` or one core for cpu); the knob ranges are those of the cluster's devices."""
    from autotune.runners.ray import RayRunner, probe_device
    from autotune.search_spaces.kernels import kernel_problem

    if target not in ("cpu", "cuda"):
        raise UsageError(f"unknown target {target!r}; valid: cpu, cuda")
    if target == "cuda" and threads is not None:
        raise UsageError(THREADS_ON_CPU_ONLY)
    props = probe_device(target, backend, address)
    space, template = kernel_problem(name, shape, target, device_props=props, threads=threads)
    if target == "cpu":
        from autotune.runners.c import CRunner

        factory = partial(CRunner, template, protocol=protocol, seed=seed)
        return space, template, RayRunner(factory, actors, address=address, num_cpus=threads or 1)
    from autotune.runners.cuda import CudaRunner

    factory = partial(CudaRunner, template, 0, backend, protocol=protocol, seed=seed)
    return space, template, RayRunner(factory, actors, address=address, num_gpus=1)


def default_measurement(database, template, runner):
    """The untuned baseline: looked up in the database, else measured and stored (outside any campaign)."""
    cand = template.space().initial()
    tid, did = database.task_id(template.task), database.device_id(runner.device)
    known = database.lookup(tid, did, [cand.key])
    if cand.key in known:
        return known[cand.key]
    m = runner.measure(template.task, [cand])[0]
    if database.add_trials(template.task, runner.device, [m]):
        return m
    # another process stored the baseline meanwhile: the stored one is the baseline every run reports
    return database.lookup(tid, did, [cand.key]).get(cand.key, m)


def tune_template(name: str, shape=None, target: str = "cpu", algorithm: str = DEFAULT_ALGORITHM, trials: int | None = 100,
                time_budget: float | None = None, seed: int = 0, batch: int = 8, campaign: str | None = None,
                db: str = "sqlite:///autotune.db", threads: int | None = None, device_index: int = 0, backend: str = "auto",
                progress: bool | None = None, cost_model: str | None = DEFAULT_COST_MODEL, transfer_from: str | None = None,
                transfer_top: int = DEFAULT_TRANSFER_TOP, ray: str | None = None, ray_actors: int | None = None, fresh: bool = False,
                options: dict | None = None, retry_failed: bool = False):
    """Run (or resume) a kernel tuning campaign; (CampaignResult, template, extra summary keys).

    ``ray``: measure on ``ray_actors`` Ray actors (default: one per GPU, or per core, of the cluster)
    of the cluster at this address (``local``, ``auto`` or HOST:PORT); builds run on its CPUs.
    ``fresh``: delete a campaign of that name first (its trials stay, reused as look-ups).
    ``options``: the algorithm's options, and the cost-model guidance's (``autotune algorithms``).
    ``retry_failed``: measure again the configurations whose stored trial crashed or timed out (Campaign)."""
    check_campaign_name(campaign)
    if name not in TEMPLATES:
        raise UsageError(f"unknown kernel {name!r}; valid: {', '.join(TEMPLATES)}")
    from autotune.runners.cuda import CUDA_BACKENDS
    from autotune.runners.ray import check_ray_args

    if backend not in CUDA_BACKENDS:  # whatever the target: a misspelt flag is refused, not ignored
        raise UsageError(f"unknown CUDA backend {backend!r}; valid: {', '.join(CUDA_BACKENDS)}")
    check_ray_args(ray, ray_actors)
    if target in ("cpu", "cuda"):  # another target is refused by name below
        device_index = check_device_index(device_index, target, ray)
    seed = checked_seed(seed)  # the runner and the default's measurement use it before the campaign does
    options = check_options(algorithm, options, cost_model)
    if options and transfer_from:
        raise UsageError(f"algorithm options ({argument('options', '--option')}) apply to the ordinary search, not to a "
                         f"warm start ({argument('transfer_from')})")
    algo = make_search(algorithm, cost_model, **options)
    shape = DEFAULT_SHAPES[name] if shape is None else shape  # an empty shape is refused, not the default
    if ray is not None:
        space, template, runner = make_ray_runner(name, shape, target, threads, backend, seed, ray, ray_actors)
    else:
        space, template, runner = make_runner(name, shape, target, threads, device_index, backend, seed)
    recipe = {"kind": "kernel", "args": {
        "name": name, "shape": shape, "target": target, "algorithm": algorithm, "cost_model": cost_model,
        "trials": trials, "time_budget": time_budget, "seed": seed, "batch": batch, "threads": threads,
        "device_index": device_index, "backend": backend}}
    if options:
        recipe["args"]["options"] = options
    if retry_failed:
        recipe["args"]["retry_failed"] = True
    if transfer_from:  # a worker joining the campaign, and its resume command, warm-start from the same sources
        recipe["args"].update(transfer_from=transfer_from, transfer_top=transfer_top)
    label = "x".join(str(v) for v in template.shape.values())

    def named(search: str) -> str:  # the campaign's name, given its search's
        return campaign or f"kernel-{name}-{target}-{label}{f'-t{threads}' if threads else ''}-{search}-seed{seed}"

    database = None
    try:  # the runner (its worker processes) and the database are closed whatever is refused below
        # before the database is opened: a refused command leaves no --db file behind
        check_run(space, algo, trials=trials, time_budget=time_budget, batch=batch, seed=seed)
        database = open_database(db)
        warm_name = None  # the warm start's campaign name (not `name`, the kernel's, which named() reads)
        if transfer_from:
            from autotune.transfer.sources import warm_started

            algo, warm_name = warm_started(database, template.task, runner.device, algorithm, transfer_from, transfer_top,
                                           algo, named, fresh=fresh, recipe=recipe)
        base = default_measurement(database, template, runner)
        if base.status is Status.TIMEOUT:  # said before the campaign spends the run timeout on each slow one
            flag = "--shape" if COMMAND_LINE.get() else "shape"
            print(f"note: the default configuration of {name} {label} timed out ({base.error}); configurations "
                  f"as slow time out too: a smaller {flag} measures in less time", file=sys.stderr)
        result = Campaign(warm_name or named(algo.name), space, algo, runner, database, trials=trials, time_budget=time_budget,
                          batch=batch, seed=seed, progress=progress, recipe=recipe, fresh=fresh,
                          retry_failed=retry_failed).run()
    finally:
        runner.close()
        if database is not None:
            database.close()
    best = result.best
    default_cost = base.cost if base.ok else None
    extra = {
        "gflops": template.flops / best.cost / 1e9 if best is not None else None,
        "gbytes_s": template.bytes / best.cost / 1e9 if best is not None else None,
        "default_cost": default_cost,
        "default_status": base.status.value,
        "speedup_over_default": default_cost / best.cost if best is not None and default_cost else None,
    }
    if not base.ok:  # why the baseline failed (a compile error's first line): without it the status alone says little
        from autotune.runners.c import first_error_line

        extra["default_error"] = first_error_line(base.error)
    return result, template, extra
