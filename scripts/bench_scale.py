"""Scale-out load test: one replay campaign whose every measurement takes --delay wall seconds (so the
measurement, not the engine, is the bottleneck), run

- by one process measuring on 1, 2, 4, 8 actors of a local Ray cluster (--actors), and
- by 1, 2, 4 `autotune tune replay` processes sharing the campaign through PostgreSQL (--workers),

reporting wall time, trials/s, speed-up over one actor or worker, and what went wrong: duplicates
(measurements made beyond the trials stored), lost (trials short of the budget) and overshoot
(trials beyond it). Target: 8 actors >= 5x faster than one, with 0 duplicates, lost and overshoot.

    python scripts/bench_scale.py                     # 400 trials, 0.2 s each, the default search
    python scripts/bench_scale.py --trials 100 --actors 1,4 --workers 1,2 --json out.json

The Ray runs time the campaign itself (the actors start before it, their start time is shown apart);
the worker runs time from launching every process to the last one's exit, process start included.
Workers need a PostgreSQL server (--pg, default the local test server); without one that part is skipped.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import func, select

from autotune.algorithms.model_guided import make_search
from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.models import TrialRow
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import output_file, positive_int, write_json  # noqa: E402

CLI = [sys.executable, "-c", "from autotune.cli.main import main; main()"]


def stored(url: str, name: str) -> tuple[int, int]:
    """(trials of the campaign, distinct candidates among them)."""
    db = open_database(url)
    try:
        cid = db.campaign(name).id
        with db.session() as s:
            n = s.scalar(select(func.count(TrialRow.id)).where(TrialRow.campaign_id == cid))
            distinct = s.scalar(select(func.count(func.distinct(TrialRow.candidate_key)))
                                .where(TrialRow.campaign_id == cid))
        return n, distinct
    finally:
        db.close()


def row(mode: str, n: int, wall: float, trials: int, budget: int, measured: int, distinct: int, extra: dict) -> dict:
    return {"mode": mode, "n": n, "wall_s": round(wall, 2), "trials": trials, "trials_per_s": round(trials / wall, 2),
            "duplicates": measured - distinct, "lost": max(0, budget - trials), "overshoot": max(0, trials - budget),
            **extra}


def ray_runs(args, space: ReplaySpace, tmp: str) -> list[dict]:
    import ray

    from autotune.runners.ray import RayRunner

    ray.init(include_dashboard=False, log_to_driver=False)
    out = []
    try:
        for n in args.actors:
            url = f"sqlite:///{os.path.join(tmp, f'ray{n}.db')}"
            t0 = time.perf_counter()
            runner = RayRunner(functools.partial(ReplayRunner, space.cache, args.delay), actors=n)
            start = time.perf_counter() - t0
            try:
                algo = make_search(args.algorithm, args.cost_model)
                res = Campaign(f"ray{n}", space, algo, runner, open_database(url), trials=args.trials,
                               seed=args.seed).run()
            finally:
                runner.close()
            trials, distinct = stored(url, f"ray{n}")
            out.append(row("ray actors", n, res.wall_s, trials, args.trials, res.measured_here, distinct,
                           {"actor_start_s": round(start, 2)}))
            print(json.dumps(out[-1]), file=sys.stderr)
    finally:
        ray.shutdown()
    return out


def fresh_pg(base: str):
    """A new empty database on the server of ``base`` (dropped by the caller), or None with the reason."""
    try:
        import psycopg
        from sqlalchemy.engine import make_url

        u = make_url(base)
        conn = psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database,
                               password=u.password, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - no server: the worker part is skipped
        return None, None, f"no PostgreSQL at {base} ({type(exc).__name__})"
    name = f"autotune_scale_{uuid.uuid4().hex[:10]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    return conn, name, u.set(database=name).render_as_string(hide_password=False)


def worker_runs(args, tmp: str) -> list[dict]:
    out = []
    for n in args.workers:
        conn, name, url = fresh_pg(args.pg)
        if conn is None:
            print(f"workers skipped: {url}", file=sys.stderr)
            return out
        try:
            open_database(url).close()  # the schema, made before the clock starts
            cmd = [*CLI, "tune", "replay", "--cache", args.cache, "-n", str(args.trials), "--measure-delay",
                   str(args.delay), "--campaign", "workers", "--db", url, "-a", args.algorithm,
                   "--cost-model", args.cost_model or "none", "--seed", str(args.seed), "--no-progress", "--json"]
            t0 = time.perf_counter()
            procs = [subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(n)]
            outs = [p.communicate() for p in procs]
            wall = time.perf_counter() - t0
            for p, (_, err) in zip(procs, outs):
                if p.returncode != 0:
                    raise SystemExit(f"a worker failed: {err[-2000:]}")
            measured = sum(json.loads(o.strip().splitlines()[-1])["measured_here"] for o, _ in outs)
            trials, distinct = stored(url, "workers")
            out.append(row("postgres workers", n, wall, trials, args.trials, measured, distinct, {}))
            print(json.dumps(out[-1]), file=sys.stderr)
        finally:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default="example:pnpoly-rtx3090", help="Kernel Tuner cache to replay")
    ap.add_argument("--trials", type=positive_int, default=400, help="trials of each campaign (default 400)")
    ap.add_argument("--delay", type=float, default=0.2, help="wall seconds per measurement")
    ap.add_argument("--actors", default="1,2,4,8", help="Ray actor counts ('' skips the Ray part)")
    ap.add_argument("--workers", default="1,2,4", help="worker process counts ('' skips the worker part)")
    ap.add_argument("--pg", default=os.environ.get("AUTOTUNE_TEST_POSTGRES",
                                                   "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--algorithm", default="evolutionary")
    ap.add_argument("--cost-model", default="xgb", help="xgb or none")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=output_file, help="write the rows to this file (its folder must exist)")
    args = ap.parse_args()
    args.cost_model = None if args.cost_model in ("none", "") else args.cost_model
    args.actors = [int(x) for x in args.actors.split(",") if x]
    args.workers = [int(x) for x in args.workers.split(",") if x]
    space = ReplaySpace(args.cache)
    rows = []
    with tempfile.TemporaryDirectory(prefix="autotune-scale-") as tmp:
        if args.actors:
            rows += ray_runs(args, space, tmp)
        if args.workers:
            rows += worker_runs(args, tmp)
    for mode in {r["mode"] for r in rows}:
        base = next((r for r in rows if r["mode"] == mode and r["n"] == 1), None)
        for r in rows:
            if r["mode"] == mode and base is not None:
                r["speedup"] = round(base["wall_s"] / r["wall_s"], 2)
    print(f"{args.trials} trials of {args.cache}, {args.delay:g} s per measurement, "
          f"{args.algorithm}{'+' + args.cost_model if args.cost_model else ''}, {os.cpu_count()} CPUs")
    print(f"{'mode':18s}{'n':>3s}{'wall s':>9s}{'trials/s':>10s}{'speed-up':>10s}{'dup':>5s}{'lost':>6s}{'over':>6s}")
    for r in rows:
        print(f"{r['mode']:18s}{r['n']:3d}{r['wall_s']:9.2f}{r['trials_per_s']:10.2f}{r.get('speedup', 0):10.2f}"
              f"{r['duplicates']:5d}{r['lost']:6d}{r['overshoot']:6d}")
    if args.json:
        write_json(args.json, {"trials": args.trials, "delay_s": args.delay, "cache": args.cache, "rows": rows})


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
