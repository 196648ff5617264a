"""The parallel execution simulator (FlexFlow's) and the runner that measures strategies with it.

- :mod:`.engine`: ``Simulator``, one training iteration as a task graph;
- :mod:`.costs`: per-op task times, collectives and tensor transfers;
- :mod:`.nccl`: collective times as NCCL runs them (ring, protocol by message size);
- :mod:`.calibration`: a cluster whose op and collective times come from measurements;
- :mod:`.runner`: ``SimulatorRunner``, a strategy's simulated iteration time as a Measurement.
"""

from autotune.runners.simulator.runner import SimulatorRunner, cluster_device

__all__ = ["SimulatorRunner", "cluster_device"]
