"""autotune: a search-and-autotuning engine for ML systems.

This module is the public Python API: scripts import from ``autotune`` only. ::

    import autotune
    result = autotune.tune_replay("example:pnpoly-rtx3090", trials=20)
    print(result.best.cost, result.best.candidate.payload)

One function per domain (each builds a space and a runner and runs a Campaign):
``tune_replay``, ``tune_template``, ``optimize_graph``, ``parallelize``; the engine's
parts for a campaign of one's own: ``Campaign``, ``open_database``, ``KnobSpace``,
``ReplaySpace``, ``ReplayRunner``, ``make_algorithm``, ``make_search``, and the base classes ``Space``,
``Runner``, ``SearchAlgorithm`` (with its ``Option``) and ``CostModel`` for parts of one's own; and
``queries`` (the tuning log as pandas DataFrames), ``best_config`` (transfer),
``zoo_model`` (the graph benchmarks' ONNX models) and ``UsageError`` (what bad input raises).
"""

from importlib import import_module

from autotune.types import Candidate, Device, Measurement, Status, Task

__version__ = "0.1.0"

# Heavier parts load on first use, so `import autotune` stays cheap and a missing optional
# dependency (onnx, torch) only affects the name that needs it. A value is the module that
# defines the name, "module:attr" where the public name differs from the module's, or
# "module:" for the module itself.
_LAZY = {
    # the engine
    "Campaign": "autotune.campaign",
    "CampaignResult": "autotune.campaign",
    "open_database": "autotune.db",
    "KnobSpace": "autotune.search_spaces.knobs",
    "Space": "autotune.search_spaces.base",
    "Runner": "autotune.runners.base",
    "SearchAlgorithm": "autotune.algorithms.base",
    "Option": "autotune.algorithms.base",
    "CostModel": "autotune.cost_models.base",
    "ReplaySpace": "autotune.search_spaces.replay",
    "ReplayRunner": "autotune.runners.replay",
    "make_algorithm": "autotune.algorithms.registry",
    "make_search": "autotune.algorithms.model_guided",
    # one driver per domain
    "tune_replay": "autotune.drivers.replay",
    "tune_template": "autotune.drivers.kernel",
    "optimize_graph": "autotune.drivers.graph",
    "parallelize": "autotune.drivers.parallel",
    # the user's own code: a C or CUDA kernel (Kernel Tuner's interface), a Python function
    "tune_kernel": "autotune.drivers.kernel_tuner",
    "minimize": "autotune.drivers.function",
    "tune_command": "autotune.drivers.command",
    "load_space_file": "autotune.search_spaces.space_file",
    # bad input (an unknown knob, a space with no valid point, a kernel that never compiles): a script catches it
    "UsageError": "autotune.errors",
    # the tuning log as pandas DataFrames: queries.trials(db, campaign=...), best, campaigns, convergence
    "queries": "autotune.db.queries:",
    # transfer across devices
    "best_config": "autotune.transfer.dispatch",
    # the eight graph benchmark models as ONNX ModelProtos: zoo_model("squeezenet11", small=True)
    "zoo_model": "autotune.search_spaces.graphs.model_zoo:build",
}

__all__ = ["Candidate", "Device", "Measurement", "Status", "Task", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        module, colon, attr = _LAZY[name].partition(":")
        obj = import_module(module)
        return obj if colon and not attr else getattr(obj, attr or name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
