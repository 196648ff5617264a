"""What bench_transfer.py reports: the Markdown table of cold against warm-started search per pair (or per target
with --auto) and its summary; under a protocol, the candidate each fold chooses on its training pairs, its rows on
the fold's test pairs, and the figures over all test pairs per vendor group."""

from __future__ import annotations

import statistics

import protocol


def summary(pairs: list[dict], cap: int) -> dict:
    def val(v):
        return cap + 1 if v is None else v

    ratios = [val(p["cold_to_5pct_median"]) / val(p["warm_to_5pct_median"]) for p in pairs]
    worst = max(val(p["warm_to_5pct_median"]) / val(p["cold_to_5pct_median"]) for p in pairs)
    return {"median_speedup": round(statistics.median(ratios), 3), "worst_warm_over_cold": round(worst, 3),
            "pairs": len(pairs)}


def markdown(groups: list[tuple[str, list[dict]]]) -> str:
    lines = ["| kernel | source | target | cold to 5% (median) | warm to 5% (median) | cold/warm | source best / target optimum |",
             "|---|---|---|---:|---:|---:|---:|"]
    for kernel, pairs in groups:
        for p in pairs:
            c, w = p["cold_to_5pct_median"], p["warm_to_5pct_median"]
            sp = f"{c / w:.1f}x" if c and w else "-"
            lines.append(f"| {kernel} | {p['source']} | {p['target']} | {c if c is not None else '>cap'} | "
                         f"{w if w is not None else '>cap'} | {sp} | {p['source_best_ratio']:.3f} |")
    return "\n".join(lines)


def pair_label(unit: tuple) -> str:
    return f"{unit[0]}:{unit[1]}->{unit[2]}"


def protocol_report(args, candidates: list[str], units: list[tuple], folds: list, cold: dict, warm: dict,
                    cold_med: dict, warm_med: dict, vendors: dict) -> dict:
    """A protocol run's report, printed as Markdown and returned as the --json report. ``cold[kernel, target]`` and
    ``warm[candidate, unit]``: each seed's measurements to 5%; ``cold_med[unit]``, ``warm_med[candidate, unit]``:
    their capped medians; ``vendors[kernel, gpu]``: the GPU's vendor."""
    cap = args.max_trials
    print(f"# {args.protocol}: {len(folds)} folds, {len(units)} pairs, seeds {args.seeds}, batch {args.batch}, "
          f"cap {cap}\n\ncandidates: {', '.join(candidates)}. To 5%: median over seeds of the target measurements "
          f"to reach within 5% of the target's optimum, a miss counting as {cap + 1}.")
    report = {"protocol": args.protocol, "seeds": args.seeds, "batch": args.batch, "max_trials": cap,
              "candidates": candidates, "cold_runs": {f"{k}/{t}": rs for (k, t), rs in cold.items()},
              "warm_runs": {c: {pair_label(u): warm[c, u] for u in units} for c in candidates}, "folds": []}
    all_rows = []
    for fold in folds:
        chosen, scores = protocol.select_transfer(candidates, fold.train, warm_med, cold_med)
        rows = []
        for u in fold.test:
            c, w = cold_med[u], warm_med[chosen, u]
            rows.append({"pair": pair_label(u), "candidate": chosen, "cold": c, "warm": w, "cold_over_warm": c / w,
                         "warm_over_cold": w / c,
                         "group": protocol.vendor_group(vendors[u[0], u[1]], vendors[u[0], u[2]])})
        all_rows += rows
        report["folds"].append({"fold": fold.name, "train": [pair_label(u) for u in fold.train],
                                "test": [pair_label(u) for u in fold.test], "scores": scores, "chosen": chosen,
                                "rows": rows})
        print(f"\n## {fold.name}: chosen {chosen}\n\non the {len(fold.train)} training pairs, worst warm/cold and "
              "median cold/warm: " + ", ".join(f"{c} {v['worst']:.3f} and {v['median_speedup']:.3f}"
                                                for c, v in scores.items()))
        print("\n| test pair | cold to 5% | warm to 5% (chosen) | cold/warm | warm/cold |\n|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['pair']} | {protocol.fmt_med(r['cold'], cap)} | {protocol.fmt_med(r['warm'], cap)} | {r['cold_over_warm']:.2f} | "
                  f"{r['warm_over_cold']:.2f} |")
    report["summary"] = summ = protocol.summarise_transfer(all_rows)
    print(f"\n## Over all {len(all_rows)} test pairs\n")
    for group, g in summ.items():
        if not g["pairs"]:
            print(f"- {group}: {g['note']}")
            continue
        print(f"- {group}, {g['pairs']} pairs: median cold/warm {g['median_cold_over_warm']:.2f}; min / 25% / median / "
              f"75% / max: {protocol.fmt_distribution(g['cold_over_warm'])}; worst warm/cold "
              f"{g['worst_warm_over_cold']:.2f} ({g['worst_pair']})")
    return report
