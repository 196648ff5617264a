"""Engine overhead: wall time per trial of a replay campaign spent outside the runner
(ask + database look-up + store + tell), and bulk-import throughput, on SQLite: Kernel Tuner
caches (import-kt) and JSONL trial logs (import; --import-lines lines, each with its campaign,
made by repeating the cache's exported trials under new candidate keys; target >= 10,000 lines/s),
and storage: the SQLite file of a default campaign (evolutionary search guided by the XGBoost cost
model) of --storage-trials trials, per 1,000 trials and for its stored cost models (target: under
5 MB for 2,000 trials), with the engine's time per trial when the model is on (target < 50 ms), and the
engine's time per trial of a campaign warm-started from other GPUs' caches (--warm-from; its two arms'
models and the pooled one).

    python scripts/bench_engine.py --cache ../shared/datasets/replay/gemm/RTX_3090.json.gz --trials 5000

Without --cache, gemm/RTX_3090.json.gz of the replay data (scripts/replay_data.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.logs import export_lines, import_file, import_kt
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_data import replay_dir  # noqa: E402
from script_args import output_file, positive_int, write_json  # noqa: E402

DEFAULT_CACHE = Path("gemm") / "RTX_3090.json.gz"  # inside the replay data folder


class TimedReplay(ReplayRunner):
    """Replay runner that keeps the time spent answering, to subtract it from the campaign's wall time."""

    spent = 0.0

    def measure(self, task, candidates):
        t0 = time.perf_counter()
        out = super().measure(task, candidates)
        self.spent += time.perf_counter() - t0
        return out


def storage(space: ReplaySpace, path: Path, trials: int) -> dict:
    """The size of the database of a default campaign (model-guided search, every retrain stored
    as the campaign stores it), after the WAL is folded into the file."""
    from sqlalchemy import text

    from autotune.algorithms.model_guided import make_search
    from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL

    db = open_database(f"sqlite:///{path}")
    runner = TimedReplay(space.cache)
    t0 = time.perf_counter()
    res = Campaign("storage", space, make_search(DEFAULT_ALGORITHM, DEFAULT_COST_MODEL), runner, db, trials=trials).run()
    wall = time.perf_counter() - t0
    with db.engine.connect() as c:
        models, model_bytes, kept = c.execute(text(
            "SELECT count(*), coalesce(sum(length(data)), 0), sum(length(data) > 0) FROM cost_models")).one()
        c.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    db.close()
    size = path.stat().st_size
    out = {"trials": res.trials, "db_bytes": size, "bytes_per_1000_trials": size / res.trials * 1000,
           "models": models, "models_with_weights": int(kept or 0), "model_bytes": model_bytes,
           "engine_ms_per_trial": (wall - runner.spent) / res.trials * 1e3}
    print(f"storage: {res.trials} trials of {DEFAULT_ALGORITHM}+{DEFAULT_COST_MODEL}: database {size / 2**20:.2f} MiB "
          f"({out['bytes_per_1000_trials'] / 2**20:.2f} MiB per 1,000 trials); {models} retrains logged, "
          f"{out['models_with_weights']} with weights ({model_bytes / 2**20:.2f} MiB); "
          f"engine {out['engine_ms_per_trial']:.1f} ms/trial with the model")
    return out


def warm_start(space: ReplaySpace, sources: list[str], path: Path, trials: int) -> dict:
    """Engine time per trial of a campaign warm-started (``--transfer-from``, the default settings) from the
    source caches, imported into the database first, as a user's earlier campaigns would be."""
    from autotune.algorithms.registry import DEFAULT_ALGORITHM
    from autotune.transfer.sources import warm_start_search

    db = open_database(f"sqlite:///{path}")
    names = [import_kt(db, src)[1].name for src in sources]
    runner = TimedReplay(space.cache)
    warm, picked = warm_start_search(db, space.task, runner.device, DEFAULT_ALGORITHM, ",".join(names))
    t0 = time.perf_counter()
    res = Campaign("warm", space, warm, runner, db, trials=trials).run()
    wall = time.perf_counter() - t0
    db.close()
    out = {"trials": res.trials, "sources": [s.device.name for s in picked],
           "engine_ms_per_trial": (wall - runner.spent) / res.trials * 1e3}
    print(f"warm start: {res.trials} trials from {', '.join(out['sources'])}: "
          f"engine {out['engine_ms_per_trial']:.1f} ms/trial with the models")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=None, help="Kernel Tuner cache (needs at least --trials points; "
                    f"default: {DEFAULT_CACHE} of the replay data)")
    ap.add_argument("--trials", type=positive_int, default=5000, help="trials of each random-search campaign (default 5000)")
    ap.add_argument("--batches", type=positive_int, nargs="+", default=[1, 8, 32],
                    help="batch sizes, one campaign each (default 1 8 32)")
    ap.add_argument("--algorithm", default="random")
    ap.add_argument("--import-lines", type=int, default=200_000, help="JSONL lines for the import benchmark")
    ap.add_argument("--storage-trials", type=int, default=2000,
                    help="trials of the default campaign whose database size is measured (0: skip)")
    ap.add_argument("--warm-from", nargs="*", default=None, metavar="CACHE",
                    help="source caches of a warm-started campaign on --cache whose engine time is measured "
                         "(default: the replay data's other GPUs of the same kernel, up to 2; none given: skip)")
    ap.add_argument("--warm-trials", type=int, default=200, help="trials of that warm-started campaign")
    ap.add_argument("--json", type=output_file, help="write the figures to this JSON file (its folder must exist)")
    args = ap.parse_args()
    args.cache = args.cache or str(replay_dir() / DEFAULT_CACHE)
    space = ReplaySpace(args.cache)
    results = {"cache": args.cache, "trials": args.trials, "algorithm": args.algorithm, "campaign": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for batch in args.batches:
            db = open_database(f"sqlite:///{tmp}/engine-{batch}.db")
            runner = TimedReplay(space.cache)
            t0 = time.perf_counter()
            res = Campaign("bench", space, args.algorithm, runner, db, trials=args.trials, batch=batch).run()
            wall = time.perf_counter() - t0
            per_trial_ms = (wall - runner.spent) / res.trials * 1e3
            results["campaign"][str(batch)] = {"trials": res.trials, "wall_s": wall, "runner_s": runner.spent,
                                               "engine_ms_per_trial": per_trial_ms}
            print(f"batch {batch:3d}: {res.trials} trials in {wall:.2f} s, engine {per_trial_ms:.3f} ms/trial "
                  f"(runner {runner.spent:.2f} s)")
        db = open_database(f"sqlite:///{tmp}/import.db")
        t0 = time.perf_counter()
        _, _, n, added = import_kt(db, args.cache)
        dt = time.perf_counter() - t0
        results["import"] = {"trials": n, "seconds": dt, "trials_per_s": n / dt}
        print(f"import-kt: {n} trials in {dt:.2f} s = {n / dt:,.0f} trials/s")
        lines = Path(tmp) / "trials.jsonl"
        exported = [d for d in map(json.loads, export_lines(db)) if "candidate" in d]  # the trials' lines
        with open(lines, "w") as f:
            for i in range(args.import_lines):
                d = dict(exported[i % len(exported)], candidate_key=f"{exported[i % len(exported)]['candidate_key']}-{i}")
                d["campaign"] = {"name": "bench-import", "algorithm": "random", "options": {},
                                 "created": "2026-01-01T00:00:00"}
                f.write(json.dumps(d) + "\n")
        db.close()
        target = open_database(f"sqlite:///{tmp}/jsonl.db")
        t0 = time.perf_counter()
        read, added = import_file(target, lines)
        dt = time.perf_counter() - t0
        target.close()
        results["import_jsonl"] = {"lines": read, "added": added, "seconds": dt, "lines_per_s": read / dt}
        print(f"import (JSONL): {read} lines in {dt:.2f} s = {read / dt:,.0f} lines/s")
        if args.storage_trials:
            results["storage"] = storage(space, Path(tmp) / "storage.db", args.storage_trials)
        if args.warm_from is None:  # the cache's kernel on the replay data's other GPUs
            others = sorted(p for p in Path(args.cache).parent.glob("*.json.gz") if p.resolve() != Path(args.cache).resolve())
            args.warm_from = [str(p) for p in others[:2]]
        if args.warm_from and args.warm_trials:
            results["warm_start"] = warm_start(space, args.warm_from, Path(tmp) / "warm.db", args.warm_trials)
    if args.json:
        write_json(args.json, results, indent=2)


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
