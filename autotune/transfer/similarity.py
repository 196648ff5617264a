"""Device similarity: from properties, and from measurements where both devices measured a task.

``property_similarity`` is in [0, 1]: 0 across device kinds, near 0 across vendors, else a
mix of the same architecture / compute capability and how close the numeric properties are
(SM count, memory bandwidth, clocks, L2: exp(-|log ratio|) each). ``measured_similarity`` is
the Spearman rank correlation of the two devices' costs on their common successful
configurations (failures on one side only count as slowest), None below ``min_common``.
``similarity`` combines them (measured, where known, weighs 3/4) with the reasons in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autotune.cost_models.metrics import rank_correlation
from autotune.gpus import device_properties
from autotune.types import Device, Measurement

NUMERIC = ("sm_count", "memory_bandwidth_gbs", "boost_clock_mhz", "l2_kib", "fp32_tflops")


def property_similarity(a: Device, b: Device) -> tuple[float, list[str]]:
    if a.kind != b.kind:
        return 0.0, [f"different kinds ({a.kind} vs {b.kind})"]
    pa, pb = device_properties(a), device_properties(b)
    why: list[str] = []
    va, vb = pa.get("vendor"), pb.get("vendor")
    if va and vb and va != vb:
        return 0.05, [f"different vendors ({va} vs {vb})"]
    arch = 0.5
    if pa.get("architecture") and pb.get("architecture"):
        if pa["architecture"] == pb["architecture"]:
            arch, _ = 1.0, why.append(f"same architecture ({pa['architecture']})")
        else:
            cca, ccb = str(pa.get("compute_capability", "")), str(pb.get("compute_capability", ""))
            same_major = cca[:1] and cca[:1] == ccb[:1]
            arch = 0.6 if same_major else 0.3
            why.append(f"architectures {pa['architecture']} vs {pb['architecture']}")
    close = []
    for k in NUMERIC:
        x, y = pa.get(k), pb.get(k)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > 0 and y > 0:
            close.append(math.exp(-abs(math.log(x / y))))
            if close[-1] < 0.7:
                why.append(f"{k} {x} vs {y}")
    num = float(np.mean(close)) if close else 0.5
    if not close and arch == 0.5:
        why.append("no known properties")
    return round(0.5 * arch + 0.5 * num, 4), why


def measured_similarity(a: list[Measurement], b: list[Measurement], min_common: int = 5) -> tuple[float | None, int]:
    """(Spearman of costs on common configurations, number of common configurations)."""
    ca = {m.candidate.key: m.objective for m in a}
    cb = {m.candidate.key: m.objective for m in b}
    common = [k for k in ca if k in cb and (math.isfinite(ca[k]) or math.isfinite(cb[k]))]
    if len(common) < min_common:
        return None, len(common)
    x, y = np.array([ca[k] for k in common]), np.array([cb[k] for k in common])
    for v in (x, y):
        fin = v[np.isfinite(v)]
        v[~np.isfinite(v)] = (fin.max() * 10 if len(fin) else 1.0)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None, len(common)
    return rank_correlation(x, y), len(common)


@dataclass
class Similar:
    device: Device
    score: float
    property_score: float
    rank_correlation: float | None = None
    common: int = 0
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"device": self.device.name, "key": self.device.key, "score": round(self.score, 4),
                "property_score": self.property_score,
                "rank_correlation": None if self.rank_correlation is None else round(self.rank_correlation, 4),
                "common_configs": self.common, "why": "; ".join(self.reasons)}


def similarity(a: Device, b: Device, ma: list[Measurement] = (), mb: list[Measurement] = ()) -> Similar:
    ps, why = property_similarity(a, b)
    rho, n = measured_similarity(list(ma), list(mb)) if ma and mb else (None, 0)
    score = ps
    if rho is not None:
        score = 0.25 * ps + 0.75 * max(rho, 0.0)
        why = [f"rank correlation {rho:.3f} on {n} common configurations", *why]
    return Similar(b, score, ps, rho, n, why)


def rank_similar(target: Device, others: list[Device], measurements: dict[str, list[Measurement]] | None = None,
                 target_measurements: list[Measurement] = ()) -> list[Similar]:
    """``others`` (not the target) ordered most similar first; ``measurements`` by device key."""
    measurements = measurements or {}
    out = [similarity(target, d, target_measurements, measurements.get(d.key, ())) for d in others
           if d.key != target.key]
    return sorted(out, key=lambda s: (-s.score, s.device.name))
