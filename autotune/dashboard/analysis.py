"""The dashboard's computations on rows already read: candidates as flat parameters, fANOVA-style
main effects, a parallel strategy's layout, what a campaign says of transfer. No database here."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import orjson

from autotune.cost_models.features import positive_costs


def flatten(payload) -> dict:
    """A candidate as flat named scalars, the dimensions of the plots and of parameter importance:
    knob dicts as they are (nested dicts as dotted names), a rewrite sequence (a list of [rule, ...]
    steps, as graph candidates are) as its length and the count of each rule."""
    out: dict = {}

    def walk(prefix: str, v) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, list) and all(isinstance(s, list) and s and isinstance(s[0], str) for s in v):
            out[f"{prefix}.rewrites" if prefix else "rewrites"] = len(v)
            for name, n in Counter(s[0] for s in v).items():
                out[f"{prefix}.rule:{name}" if prefix else f"rule:{name}"] = n
        elif isinstance(v, list):
            out[prefix or "value"] = orjson.dumps(v).decode()
        else:
            out[prefix or "value"] = v

    walk("", payload)
    return out


def transfer_of(algorithm: str, options: dict) -> dict | None:
    """What a campaign says of transfer from other devices: a warm-start algorithm and its options, and
    any transfer setting its recipe recorded; None when it did not transfer."""
    recipe = (options.get("recipe") or {}).get("args") or {}
    given = {k: v for k, v in recipe.items() if k.startswith("transfer") and v not in (None, "", [])}
    if not (algorithm or "").startswith("warm-start") and not given:
        return None
    return {"algorithm": algorithm, "options": options.get("algorithm_options") or {}, **given}


def strategy_layout(candidate) -> list[dict]:
    """A parallel strategy's operators in order: parallel degrees, devices used (their product) and the
    first and last device, as the strategy's ``ops`` hold them."""
    ops = (candidate or {}).get("ops") if isinstance(candidate, dict) else None
    out = []
    for op, cfg in (ops or {}).items():
        degrees = (cfg or {}).get("degrees") or {}
        n = math.prod(int(v) for v in degrees.values()) if degrees else 1
        start = int((cfg or {}).get("start", 0))
        out.append({"op": op, "degrees": degrees, "devices": n, "start": start, "end": start + n - 1})
    return out


def dimensions(trials: list[dict]) -> list[dict]:
    """The sample's parameters that vary, with whether each is numeric, and their values (categorical)."""
    values: dict[str, set] = {}
    for t in trials:
        for k, v in t["params"].items():
            values.setdefault(k, set()).add(v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
    dims = []
    for k, vs in values.items():
        if len(vs) < 2:
            continue
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vs)
        dims.append({"name": k, "numeric": numeric,
                     "values": None if numeric else sorted(str(v) for v in vs)[:200]})
    return dims


def main_effects(trials: list[dict], min_rows: int = 10) -> dict:
    """fANOVA-style main effects: per parameter, the share of the variance of log cost explained by the
    mean per value (numbers with more than 12 values in 10 quantile bins). Uses the random part of the
    sample (the best trials would bias it), or every successful trial when that is too small. Costs of 0
    are read through ``positive_costs`` (the best, at a finite log)."""
    ok = [t for t in trials if t["cost"] is not None and t["cost"] >= 0 and not t["best"]]
    if len(ok) < min_rows:
        ok = [t for t in trials if t["cost"] is not None and t["cost"] >= 0]
    if len(ok) < min_rows:
        return {"n": len(ok), "params": [], "source": "trials"}
    y = np.log(positive_costs([t["cost"] for t in ok]))
    total = float(np.var(y))
    names = sorted({k for t in ok for k in t["params"]})
    out = []
    for name in names:
        raw = [t["params"].get(name) for t in ok]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw if v is not None)
        distinct = set(map(str, raw))
        if len(distinct) < 2:
            continue
        if numeric and len(distinct) > 12 and None not in raw:
            x = np.array(raw, dtype=float)
            edges = np.unique(np.quantile(x, np.linspace(0, 1, 11)[1:-1]))
            groups = np.searchsorted(edges, x, side="right")
        else:
            _, groups = np.unique(np.array([str(v) for v in raw]), return_inverse=True)
        counts = np.bincount(groups)
        means = np.bincount(groups, weights=y) / np.maximum(counts, 1)
        explained = float(np.sum(counts * (means - y.mean()) ** 2) / len(y))
        out.append({"name": name, "share": explained / total if total > 0 else 0.0, "levels": len(counts)})
    out.sort(key=lambda r: -r["share"])
    return {"n": len(ok), "params": out, "source": "trials"}
