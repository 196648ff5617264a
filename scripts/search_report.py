"""What bench_search.py reports: under a protocol, the candidate each fold chooses on its training spaces and its
rows on the fold's test spaces, then the figures over all test spaces; without one, the summary of measurements to
5% of the optimum per space and algorithm (each algorithm's figures on a space over its runs: `summarise`), against the best
peer of the run and the recorded best peer."""

from __future__ import annotations

import math

import numpy as np
import protocol

CHECKPOINTS = (50, 100, 200, 500)  # measurements at which the best-so-far ratio is reported


def reach(trace: list[float], optimum: float, tol: float) -> int | None:
    """Measurements (1-based) until the best-so-far is within ``tol`` of the optimum; None: never."""
    return next((i + 1 for i, b in enumerate(trace) if b <= optimum * (1 + tol)), None)


def summarise(trackers: list, optimum: float) -> dict:
    """One algorithm's figures on one space over its runs (bench_search.Tracker: best-so-far trace, simulated
    times, failures): medians to 5% and 10% of ``optimum``, success shares, and best-so-far ratios at CHECKPOINTS."""
    out: dict = {"seeds": len(trackers)}
    for tol, tag in ((0.05, "5pct"), (0.10, "10pct")):
        hits = [reach(tr.trace, optimum, tol) for tr in trackers]
        # median over seeds, a miss counting as worse than any hit (None when half or more missed)
        ranked = sorted(h if h is not None else math.inf for h in hits)
        med = ranked[(len(ranked) - 1) // 2] if len(ranked) % 2 else 0.5 * (ranked[len(ranked) // 2 - 1] + ranked[len(ranked) // 2])
        out[f"to_{tag}_median"] = None if not math.isfinite(med) else math.ceil(med)
        out[f"success_{tag}"] = round(sum(h is not None for h in hits) / len(hits), 3)
        if tag == "5pct":
            sims = sorted(tr.sim[h - 1] if h else math.inf for tr, h in zip(trackers, hits))
            mid = sims[(len(sims) - 1) // 2]
            out["sim_time_to_5pct_s_median"] = round(mid, 2) if math.isfinite(mid) else None
            # the share of the measurements up to there (all of them on a miss) that failed
            out["failed_share_to_5pct_median"] = round(float(np.median(
                [np.mean(tr.failed[:h or len(tr.failed)]) if tr.failed else 0.0 for tr, h in zip(trackers, hits)])), 3)
    out["ratio_at"] = {
        str(k): round(float(np.median([(tr.trace[min(k, len(tr.trace)) - 1] if tr.trace else math.inf) / optimum
                                       for tr in trackers])), 4)
        for k in CHECKPOINTS
    }
    return out


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


def protocol_report(args, candidates: list[str], peers: list[str], reference: bool, units: list[tuple], folds: list,
                    runs: dict, med: dict, best_peer: dict) -> dict:
    """A protocol run's report, printed as Markdown and returned as the --json report. ``runs[name, unit]``: each
    seed's figures; ``med[name, unit]``: their capped median to 5%; ``best_peer[unit]``: (median, name), empty
    without peers; ``reference``: the best peers are REFERENCE_BEST_PEER's."""
    peer_names = "the reference best peers (REFERENCE_BEST_PEER)" if reference else ", ".join(peers) or "none"
    seeds_said = f"seeds {args.first_seed}-{args.first_seed + args.seeds - 1}" + (
        f" (peers: 0-{args.peer_seeds - 1})" if args.peer_seeds and peers else "")
    print(f"# {args.protocol}: {len(folds)} folds, {len(units)} spaces, {seeds_said}, budget {args.budget}\n\n"
          f"candidates: {', '.join(candidates)}; peers: {peer_names}. To 5%: median over seeds of the "
          f"measurements to reach within 5% of the optimum, a miss counting as {args.budget + 1}.")
    report = {"protocol": args.protocol, "budget": args.budget, "seeds": args.seeds, "first_seed": args.first_seed,
              "peer_seeds": args.peer_seeds, "candidates": candidates,
              "peers": peers, "runs": {n: {} for n in dict.fromkeys(candidates + peers)}, "folds": []}
    for (name, unit), rs in runs.items():
        report["runs"][name][label(unit)] = rs
    all_rows = []
    for fold in folds:
        chosen, scores = protocol.select_search(candidates, fold.train, med,
                                                {u: best_peer[u][0] for u in units} if best_peer else None)
        rows = [search_row(unit, chosen, runs[chosen, unit], med, best_peer.get(unit)) for unit in fold.test]
        all_rows += rows
        report["folds"].append({"fold": fold.name, "train": [label(u) for u in fold.train],
                                "test": [label(u) for u in fold.test], "scores": scores, "chosen": chosen, "rows": rows})
        print(f"\n## {fold.name}: chosen {chosen}\n\nscore on the {len(fold.train)} training spaces (geometric mean of "
              f"{'to 5% / best peer' if best_peer else 'to 5%'}): " + ", ".join(f"{c} {v:.3f}" for c, v in scores.items()))
        print("\n| test space | ours (chosen), to 5% | best peer, to 5% | ours / best peer | success 5% | every seed within budget |")
        print("|---|---:|---|---:|---:|---|")
        for r in rows:
            peer = f"{protocol.fmt_med(r['best_peer'], args.budget)} ({r['peer']})" if best_peer else "-"
            ratio = f"{r['ratio']:.2f}" if best_peer else "-"
            print(f"| {r['space']} | {protocol.fmt_med(r['ours'], args.budget)} | {peer} | {ratio} | {r['success_5pct']} | "
                  f"{'yes' if r['all_reached'] else 'no'} |")
    report["summary"] = summ = protocol.summarise_search(all_rows)
    print(f"\n## Over all {summ['spaces']} test spaces\n")
    if best_peer:
        n = summ["spaces"]
        print(f"- ours < best peer on {summ['ours_below_best_peer']}/{n} spaces; ours <= 2/3 of best peer on "
              f"{summ['ours_at_most_two_thirds']}/{n}")
        print(f"- ours / best peer: median {summ['median_ratio']:.2f}, worst {summ['worst_ratio']:.2f} "
              f"({summ['worst_space']}); min / 25% / median / 75% / max: {protocol.fmt_distribution(summ['ratio'])}")
    print(f"- ours, to 5%: min / 25% / median / 75% / max: {protocol.fmt_distribution(summ['ours'], 1)}")
    print(f"- spaces where some seed missed 5% within the budget: {', '.join(summ['spaces_with_a_miss']) or 'none'}")
    # every run of every space, not one fold's choice: how the candidates compare beneath the medians
    report["geomean_to_5pct"] = geo = {
        name: protocol.geomean([r["to_5pct"] or args.budget + 1 for u in units for r in runs[name, u]])
        for name in dict.fromkeys(candidates + peers)}
    print("- geometric mean of to 5% over every run (spaces x seeds): "
          + ", ".join(f"{name} {g:.1f}" for name, g in geo.items()))
    return report


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
