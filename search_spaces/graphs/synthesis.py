"""generate(): TASO's rule synthesis end to end: enumerate small graphs (generator), verify each
candidate pair (verify: float tests over other sizes, z3 proofs for the linear ops), keep the rules."""

from __future__ import annotations

import time

from autotune.search_spaces.graphs.generator import DOMAINS, candidate_pairs, classic_found
from autotune.search_spaces.graphs.rules import save_rules
from autotune.search_spaces.graphs.verify import to_rule, verify_pair


def generate(max_ops: int = 2, z3_timeout_ms: int = 2000, output: str | None = None, domains=None) -> dict:
    t0 = time.perf_counter()
    report = {"max_ops": max_ops, "graphs": 0, "candidate_pairs": 0, "pruned_common_subgraph": 0,
              "pruned_renaming": 0, "generated": 0, "kept": 0, "rejected_shape_specific": 0, "proved": 0,
              "z3_unknown_or_timeout": 0}
    rules = []
    for domain in domains or DOMAINS:
        pairs, st = candidate_pairs(domain, max_ops)
        report["graphs"] += st["graphs"]
        report["candidate_pairs"] += st["pairs"]
        report["pruned_common_subgraph"] += st["pruned_common"]
        report["pruned_renaming"] += st["pruned_renaming"]
        report["generated"] += len(pairs)
        for i, (g1, g2, mapping) in enumerate(pairs):
            status = verify_pair(domain, g1, g2, mapping, z3_timeout_ms)
            if status == "rejected":
                report["rejected_shape_specific"] += 1
                continue
            report["kept"] += 1
            report["proved"] += status == "proved"
            report["z3_unknown_or_timeout"] += status == "tested"
            name = f"gen_{domain.name}_{report['kept']}"
            rule = to_rule(domain, g1, g2, mapping, name, status)
            back = to_rule(domain, g2, g1, {b: a for a, b in mapping.items()}, name + "_rev", status)
            if rule is None:
                report["not_expressible"] = report.get("not_expressible", 0) + 1
                continue
            rules.append(rule)
            if back is not None and not any(n["op"] == "Split" for n in back.source):
                rules.append(back)  # the other direction (e.g. the merge itself), when its source is matchable
    report["time_s"] = round(time.perf_counter() - t0, 2)
    report["rules_written"] = len(rules)
    report["rules"] = rules
    report["classic_found"] = classic_found(rules)
    if output:
        save_rules(rules, output)
    return report
