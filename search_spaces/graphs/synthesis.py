"""generate(): TASO's rule synthesis end to end: enumerate small graphs (generator), verify each
candidate pair (verify: float tests over other sizes, z3 proofs for the linear ops), keep the rules.

Every domain is enumerated first, then every surviving pair is verified, in the same order as one
domain after the other: the verification (z3 above all) is nearly all of the time (about 97% for
``max_ops=3``), and enumerating first gives its progress bar a known total.
"""

from __future__ import annotations

import time

from autotune.progress import Progress
from autotune.search_spaces.graphs.generator import DOMAINS, candidate_pairs, classic_found
from autotune.search_spaces.graphs.rule_files import save_rules
from autotune.search_spaces.graphs.verify import to_rule, verify_pair


def generate(max_ops: int = 2, z3_timeout_ms: int = 2000, output: str | None = None, domains=None,
             progress: Progress | None = None) -> dict:
    """Enumerate graphs of up to ``max_ops`` ops over ``domains`` (default: all), verify the candidate pairs
    and return the report (counts, ``rules``, ``classic_found``); ``output``: also write the rules as JSON.
    ``progress``: one phase per domain counting the graphs enumerated (their number is not known
    beforehand), then one over the candidate pairs verified."""
    bar = progress or Progress("generate", enabled=False)
    t0 = time.perf_counter()
    report = {"max_ops": max_ops, "graphs": 0, "candidate_pairs": 0, "pruned_common_subgraph": 0,
              "pruned_renaming": 0, "generated": 0, "kept": 0, "rejected_shape_specific": 0, "proved": 0,
              "z3_unknown_or_timeout": 0}
    found = []
    for domain in domains or DOMAINS:
        with bar.phase(f"enumerating {domain.name} graphs (up to {max_ops} ops)"):
            pairs, st = candidate_pairs(domain, max_ops, on_graph=bar.advance)
        found.append((domain, pairs))
        report["graphs"] += st["graphs"]
        report["candidate_pairs"] += st["pairs"]
        report["pruned_common_subgraph"] += st["pruned_common"]
        report["pruned_renaming"] += st["pruned_renaming"]
        report["generated"] += len(pairs)
    rules = []
    with bar.phase("verifying candidate pairs", total=report["generated"]):
        for domain, pairs in found:
            _verify(domain, pairs, z3_timeout_ms, report, rules, bar)
    report["time_s"] = round(time.perf_counter() - t0, 2)
    report["rules_written"] = len(rules)
    report["rules"] = rules
    report["classic_found"] = classic_found(rules)
    if output:
        save_rules(rules, output)
    return report


def _verify(domain, pairs, z3_timeout_ms: int, report: dict, rules: list, bar: Progress) -> None:
    """Verify ``pairs`` of ``domain``, counting them in ``report`` and appending the rules kept to ``rules``."""
    for g1, g2, mapping in pairs:
        status = verify_pair(domain, g1, g2, mapping, z3_timeout_ms)
        bar.advance(1)
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


def summary_text(report: dict) -> str:
    """The closing line of a rule generation from its report."""
    text = (f"{report['graphs']:,} graphs enumerated, {report['generated']:,} candidate pairs verified: "
            f"{report['kept']:,} kept ({report['proved']:,} proved, {report['z3_unknown_or_timeout']:,} tested), "
            f"{report['rules_written']:,} rules")
    if "stored_new" in report:
        text += f" ({report['stored_new']:,} new in the database)"
    return text + f" in {report['time_s']:.1f} s"
