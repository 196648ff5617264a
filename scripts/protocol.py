"""Honest evaluation of benchmark settings: folds, selection on the training units, figures on the
test units. Pure logic shared by scripts/bench_search.py and scripts/bench_transfer.py (nothing
here measures, reads or writes files).

A unit is a tuple whose first item is the kernel and whose last item is the GPU it is measured on:
``(kernel, gpu)`` for a space of bench_search, ``(kernel, source, target)`` for a transfer pair of
bench_transfer.

- leave-one-kernel-out: one fold per kernel; test = that kernel's units, train = the other kernels'.
- leave-one-gpu-out: one fold per GPU; test = the units measured on that GPU (a space on it, a pair
  whose target it is), train = the units that involve that GPU nowhere (neither as source nor target).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

from autotune.errors import UsageError

PROTOCOLS = ("none", "leave-one-kernel-out", "leave-one-gpu-out")
TIE = 0.01  # selection scores within 1% of each other are a tie


@dataclass(frozen=True)
class Fold:
    name: str  # "kernel=gemm", "gpu=RTX_3090"
    train: tuple
    test: tuple


def folds(units: list[tuple], protocol: str) -> list[Fold]:
    """The folds of ``protocol`` over ``units``; ValueError when a fold has no training unit."""
    if protocol not in PROTOCOLS[1:]:
        raise ValueError(f"unknown protocol {protocol!r} (one of {', '.join(PROTOCOLS[1:])})")
    by_kernel = protocol == "leave-one-kernel-out"
    out = []
    for key in sorted({u[0] if by_kernel else u[-1] for u in units}):
        if by_kernel:
            train = tuple(u for u in units if u[0] != key)
            test = tuple(u for u in units if u[0] == key)
        else:
            train = tuple(u for u in units if key not in u[1:])
            test = tuple(u for u in units if u[-1] == key)
        fold = Fold(f"{'kernel' if by_kernel else 'gpu'}={key}", train, test)
        if not fold.train:
            raise ValueError(f"{protocol}: fold {fold.name} has no training units (too few kernels or GPUs)")
        out.append(fold)
    return out


def parse_options(items: list[str]) -> dict:
    """``KEY=VALUE`` items -> options, values read as JSON when they parse (else strings); UsageError for an item
    that is not KEY=VALUE."""
    out = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k:
            raise UsageError(f"option {item!r} is not KEY=VALUE")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def capped_median(runs: list[int | None], cap: int) -> float:
    """Median over seeds of measurements to the target, a miss (None) counting as cap + 1."""
    return float(statistics.median([cap + 1 if r is None else r for r in runs]))


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def select_search(candidates: list[str], train: tuple, ours: dict, best_peer: dict | None) -> tuple[str, dict]:
    """The candidate with the smallest geometric mean, over the training spaces, of its to-5% median
    over the best peer's (``best_peer[unit]``), or of its to-5% median alone without peers.
    ``ours[(candidate, unit)]``: capped medians. Scores within 1% (``TIE``) of the smallest are a tie, as in
    the transfer protocol, broken by list order (the first candidate, the default, keeps its place unless
    another beats it by more than noise). Returns (chosen, score per candidate)."""
    scores = {c: geomean([ours[c, u] / (best_peer[u] if best_peer else 1.0) for u in train]) for c in candidates}
    best = min(scores.values())
    return next(c for c in candidates if scores[c] <= best * (1 + TIE)), scores


def select_transfer(candidates: list[str], train: tuple, warm: dict, cold: dict) -> tuple[str, dict]:
    """The candidate with the smallest worst warm/cold over the training pairs; among those within
    1% of it, the largest median cold/warm; then list order. ``warm[(candidate, unit)]`` and
    ``cold[unit]``: capped medians. Returns (chosen, {candidate: {"worst": .., "median_speedup": ..}})."""
    scores = {c: {"worst": max(warm[c, u] / cold[u] for u in train),
                  "median_speedup": statistics.median(cold[u] / warm[c, u] for u in train)} for c in candidates}
    best = min(s["worst"] for s in scores.values())
    tied = [c for c in candidates if scores[c]["worst"] <= best * (1 + TIE)]
    return max(tied, key=lambda c: scores[c]["median_speedup"]), scores


def distribution(values: list[float]) -> dict:
    """min, 25%, median, 75%, max (linear interpolation between order statistics)."""
    s = sorted(values)

    def q(p: float) -> float:
        x = p * (len(s) - 1)
        lo = math.floor(x)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (x - lo)

    return {"min": s[0], "p25": q(0.25), "median": q(0.5), "p75": q(0.75), "max": s[-1]}


def summarise_search(rows: list[dict]) -> dict:
    """Over all test spaces. A row: space, ours, best_peer (None without peers), ratio, all_reached."""
    out = {"spaces": len(rows), "ours": distribution([r["ours"] for r in rows]),
           "spaces_with_a_miss": [r["space"] for r in rows if not r["all_reached"]]}
    if rows and rows[0]["best_peer"] is not None:
        ratios = [r["ratio"] for r in rows]
        worst = max(rows, key=lambda r: r["ratio"])
        out |= {"ours_below_best_peer": sum(r["ours"] < r["best_peer"] for r in rows),
                "ours_at_most_two_thirds": sum(r["ours"] <= 2 / 3 * r["best_peer"] for r in rows),
                "median_ratio": statistics.median(ratios), "ratio": distribution(ratios),
                "worst_ratio": worst["ratio"], "worst_space": worst["space"]}
    return out


def vendor_group(source_vendor: str, target_vendor: str) -> str:
    if "unknown" in (source_vendor, target_vendor):
        return "unknown-vendor"
    return "same-vendor" if source_vendor == target_vendor else "cross-vendor"


def summarise_transfer(rows: list[dict]) -> dict:
    """Per vendor group (same-vendor, cross-vendor, and unknown-vendor when present). A row: pair,
    group, cold_over_warm, warm_over_cold."""
    out = {}
    for group in ("same-vendor", "cross-vendor", "unknown-vendor"):
        sub = [r for r in rows if r["group"] == group]
        if not sub:
            if group != "unknown-vendor":
                out[group] = {"pairs": 0, "note": f"no {group} pairs in this data"}
            continue
        worst = max(sub, key=lambda r: r["warm_over_cold"])
        speedups = [r["cold_over_warm"] for r in sub]
        out[group] = {"pairs": len(sub), "median_cold_over_warm": statistics.median(speedups),
                      "cold_over_warm": distribution(speedups), "worst_warm_over_cold": worst["warm_over_cold"],
                      "worst_pair": worst["pair"]}
    return out


def fmt_med(value: float, cap: int) -> str:
    """A capped median for a table: ">cap" for a miss."""
    return f">{cap}" if value > cap else f"{value:g}"


def fmt_distribution(d: dict, digits: int = 2) -> str:
    return " / ".join(f"{d[k]:.{digits}f}" for k in ("min", "p25", "median", "p75", "max"))
