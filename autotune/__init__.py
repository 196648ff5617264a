"""autotune: a search-and-autotuning engine for ML systems.

The public API for scripts::

    import autotune
    space = autotune.ReplaySpace("example:pnpoly-rtx3090")
    result = autotune.Campaign("demo", space, "random", autotune.ReplayRunner(space.cache),
                               autotune.open_database(), trials=100).run()
"""

from importlib import import_module

from autotune.types import Candidate, Device, Measurement, Status, Task

__version__ = "0.1.0"

# heavier parts load on first use, so `import autotune` stays cheap
_LAZY = {
    "Campaign": "autotune.campaign",
    "CampaignResult": "autotune.campaign",
    "open_database": "autotune.db",
    "KnobSpace": "autotune.search_spaces.knobs",
    "ReplaySpace": "autotune.search_spaces.replay",
    "ReplayRunner": "autotune.runners.replay",
    "make_algorithm": "autotune.algorithms.registry",
    "best_config": "autotune.transfer.dispatch",
}

__all__ = ["Candidate", "Device", "Measurement", "Status", "Task", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
