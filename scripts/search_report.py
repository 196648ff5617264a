"""What bench_search.py reports: a protocol's row per test space, and the summary of a run without a protocol
(measurements to 5% of the optimum per space and algorithm, against the best peer of the run and the
recorded best peer)."""

from __future__ import annotations

import math

import numpy as np


def label(unit: tuple) -> str:
    """A space's name in reports: kernel/GPU."""
    return "/".join(unit)


def search_row(unit: tuple, chosen: str, runs: list[dict], med: dict, best_peer: tuple | None) -> dict:
    """A test space's row: the chosen candidate's median to 5%, the share of seeds that reached it, and its ratio to
    the best peer (median, name) where there is one."""
    hits = [r["to_5pct"] is not None for r in runs]
    row = {"space": label(unit), "candidate": chosen, "ours": med[chosen, unit], "best_peer": None, "peer": None,
           "ratio": None, "success_5pct": round(sum(hits) / len(hits), 3), "all_reached": all(hits)}
    if best_peer is not None:
        row |= {"best_peer": best_peer[0], "peer": best_peer[1], "ratio": med[chosen, unit] / best_peer[0]}
    return row


def print_summary(report: dict, names: list[str], reference: dict[str, tuple]) -> None:
    """The table of measurements to 5% per space and algorithm (medians over seeds), the best peer here and
    in ``reference`` (space label -> (median, peer)), and how often the default beats the better of the two."""
    peers = [n for n in names if n == "random" or n == "optuna-tpe-direct" or n.startswith("kt:")]
    default = report["default_algorithm"]
    print("\n## Summary: measurements to reach within 5% of the optimum (median over seeds)\n")
    print("| space | " + " | ".join(names) + " | best peer here | reference best peer |")
    print("|---|" + "---|" * (len(names) + 2))
    wins = ratio_ok = compared = 0
    for label, rows in report["spaces"].items():
        vals = {n: rows[n]["to_5pct_median"] for n in names if n in rows}
        pv = [(vals[p], p) for p in peers if vals.get(p) is not None]
        best = min(pv) if pv else (None, "-")
        ref = reference.get(label, (None,))[0]
        cands = [x for x in (best[0], ref) if x is not None]
        target = min(cands) if cands else None
        if default in vals and target is not None:
            compared += 1
            ours = vals[default] if vals[default] is not None else math.inf
            wins += ours < target
            ratio_ok += ours <= 1.5 * target
        print(f"| {label} | " + " | ".join(str(vals.get(n)) for n in names) + f" | {best[0]} ({best[1]}) | {ref} |")
    if compared:
        print(f"\n{default}: fewer measurements than the best peer (min of here and reference) on {wins}/{compared} "
              f"spaces, within 1.5x on {ratio_ok}/{compared}")
    for n in names:
        v = [rows[n]["to_5pct_median"] for rows in report["spaces"].values() if n in rows]
        v = [x if x is not None else math.inf for x in v]
        ov = [rows[n]["overhead_ms_median"] for rows in report["spaces"].values() if n in rows]
        print(f"{n}: median over spaces {np.median(v) if v else None}, engine overhead median {np.median(ov):.2f} ms/measurement")
