"""A cluster whose op and collective times come from measurements (the simulator's estimates elsewhere).

The measurements are read from the database by :func:`autotune.db.calibration.measured`.
"""

from __future__ import annotations

import copy

from autotune.search_spaces.parallel.clusters import Cluster


def calibrated(cluster: Cluster, ops: dict[str, float], coll: list) -> Cluster:
    """A copy of ``cluster`` with measured op times ({op_key[#bwd]: s}) and collective points added."""
    out = copy.deepcopy(cluster)
    out.op_times = {**cluster.op_times, **ops}
    out.collectives = list(cluster.collectives) + coll
    return out
