"""Tuned C gemm against numpy.matmul (its BLAS) on this machine's CPU.

For each thread count (1 and all cores) a campaign tunes gemm at --tune-size for --trials
measurements; every other size gets the top --transfer configurations of that campaign
plus its own shorter campaign (--trials-other). Then the best tuned kernel and
numpy.matmul (a fresh process with OPENBLAS/OMP/MKL_NUM_THREADS set) are timed in
alternation, --rounds times, under the same protocol; the best median of each is
kept, and the ratio tuned/BLAS (GFLOP/s over GFLOP/s) printed.

    nice -n 10 python scripts/bench_kernels.py                       # the full benchmark
    python scripts/bench_kernels.py --target cuda                    # on a GPU: tuned gemm 4096^3 vs cuBLAS
    python scripts/bench_kernels.py --sizes 256 --trials 10 --trials-other 0 --threads 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from autotune.algorithms.registry import make_algorithm
from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.errors import UsageError
from autotune.runners.c import CRunner
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels import kernel_problem

NUMPY_TIMER = r"""
import json, sys, time
import numpy as np
n, min_time = int(sys.argv[1]), float(sys.argv[2])
rng = np.random.default_rng(0)
a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
c = np.empty((n, n), dtype=np.float32)
np.matmul(a, b, out=c)
times, start = [], time.perf_counter()
while len(times) < 3 or (sum(times) < min_time and len(times) < 100):
    t0 = time.perf_counter()
    np.matmul(a, b, out=c)
    times.append(time.perf_counter() - t0)
print(json.dumps(times))
"""


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def numpy_median(n: int, threads: int, min_time: float) -> float:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", NUMPY_TIMER, str(n), str(min_time)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return median(json.loads(out.strip().splitlines()[-1]))


def campaign_top(db, name: str, k: int) -> list[dict]:
    try:
        cid = db.campaign(name).id
    except Exception:  # noqa: BLE001 - no such campaign yet
        return []
    ok = sorted((m for m, _ in db.campaign_history(cid) if m.ok), key=lambda m: m.cost)
    return [m.candidate.payload for m in ok[:k]]


def tune(db, n: int, threads: int, trials: int, algorithm: str, seed: int, batch: int, seeds: list[dict]):
    """Best (cost, config) for gemm n^3 on `threads` threads after a campaign plus the seeded configs."""
    space, t = kernel_problem("gemm", f"{n},{n},{n}", "cpu", threads=threads)
    runner = CRunner(t)
    best = []
    try:
        cands = [space.candidate(c) for c in seeds if space.is_valid(c)] + [space.initial()]
        if cands:
            ms = runner.measure(t.task, cands)
            db.add_trials(t.task, runner.device, ms)
            best += [(m.cost, m.candidate.payload) for m in ms if m.ok]
        name = f"bench-gemm-{n}-t{threads}-{algorithm}-seed{seed}"
        if trials > 0:
            r = Campaign(name, space, make_algorithm(algorithm), runner, db, trials=trials, batch=batch,
                         seed=seed, progress=sys.stderr.isatty()).run()
            if r.best is not None:
                best.append((r.best.cost, r.best.candidate.payload))
        default_cost = min((c for c, p in best if p == space.initial().payload), default=None)
    finally:
        runner.close()
    cost, cfg = min(best, key=lambda x: x[0])
    return cost, cfg, default_cost, name


def compare(n: int, threads: int, cfg: dict, rounds: int, min_time: float):
    """Alternate tuned kernel and numpy `rounds` times; the best median of each."""
    space, t = kernel_problem("gemm", f"{n},{n},{n}", "cpu", threads=threads)
    runner = CRunner(t, protocol=Protocol(warmup=2, min_repeats=5, max_repeats=200, min_time_s=min_time,
                                          budget_s=30.0), run_timeout_s=120)
    tuned, blas = [], []
    try:
        for _ in range(rounds):
            m = runner.measure(t.task, [space.candidate(cfg)])[0]
            if not m.ok:
                raise RuntimeError(f"the tuned kernel failed on re-measurement: {m.status.value} {m.error}")
            tuned.append(m.cost)
            blas.append(numpy_median(n, threads, min_time))
        device = runner.device
    finally:
        runner.close()
    return min(tuned), min(blas), t.flops, device


CUBLAS_TIMER = r"""
import json, sys
n, reps = int(sys.argv[1]), int(sys.argv[2])
try:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    mm, ev, lib = (lambda: torch.matmul(a, b)), (lambda: torch.cuda.Event(enable_timing=True)), "torch.matmul"
    sync = torch.cuda.synchronize
except ImportError:
    import cupy as cp
    a, b = cp.random.standard_normal((n, n), dtype=cp.float32), cp.random.standard_normal((n, n), dtype=cp.float32)
    mm, ev, lib = (lambda: cp.matmul(a, b)), cp.cuda.Event, "cupy.matmul"
    sync = cp.cuda.Device().synchronize
for _ in range(3):
    mm()
sync()
times = []
for _ in range(reps):
    s, e = ev(), ev()
    s.record(); mm(); e.record(); e.synchronize()
    times.append((s.elapsed_time(e) if hasattr(s, "elapsed_time") else cp.cuda.get_elapsed_time(s, e)) * 1e-3)
print(json.dumps({"lib": lib, "times": times}))
"""


def bench_cuda(a, db) -> dict:
    """Tune fp32 gemm n^3 on GPU 0 and compare with cuBLAS (torch.matmul with TF32 off, else cupy.matmul)."""
    from autotune.runners.cuda import CudaRunner, probe_cuda_device

    n = a.cuda_size
    props = probe_cuda_device(0)
    space, t = kernel_problem("gemm", f"{n},{n},{n}", "cuda", device_props=props)
    runner = CudaRunner(t, protocol=Protocol(warmup=2, min_repeats=5, max_repeats=50, min_time_s=0.2, budget_s=10))
    try:
        default = runner.measure(t.task, [space.initial()])[0]
        r = Campaign(f"bench-gemm-cuda-{n}-{a.algorithm}-seed{a.seed}", space, make_algorithm(a.algorithm), runner,
                     db, trials=a.trials, batch=a.batch, seed=a.seed, progress=sys.stderr.isatty()).run()
        if r.best is None:
            raise RuntimeError("no CUDA candidate ran successfully")
        again = runner.measure(t.task, [r.best.candidate])[0]
        tuned = min(r.best.cost, again.cost if again.ok else r.best.cost)
    finally:
        runner.close()
    out = json.loads(subprocess.run([sys.executable, "-c", CUBLAS_TIMER, str(n), "20"], capture_output=True,
                                    text=True, check=True).stdout.strip().splitlines()[-1])
    blas = median(out["times"])
    row = {"n": n, "gpu": props["name"], "backend": props.get("backend"), "trials": a.trials,
           "tuned_gflops": t.flops / tuned / 1e9, "cublas_gflops": t.flops / blas / 1e9, "cublas_via": out["lib"],
           "ratio": blas / tuned, "default_gflops": t.flops / default.cost / 1e9 if default.ok else None,
           "config": r.best.candidate.payload}
    print(f"gemm {n}^3 fp32 on {props['name']}: tuned {row['tuned_gflops']:.0f} GFLOP/s, cuBLAS ({out['lib']}, "
          f"TF32 off) {row['cublas_gflops']:.0f} GFLOP/s, ratio {row['ratio']:.2f}; config {json.dumps(row['config'])}")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="512,1024,2048", help="square gemm sizes")
    ap.add_argument("--threads", default=None, help="thread counts (default: 1 and all cores)")
    ap.add_argument("--tune-size", type=int, default=1024, help="the size tuned with --trials")
    ap.add_argument("--trials", type=int, default=200, help="trials of the --tune-size campaign")
    ap.add_argument("--trials-other", type=int, default=40, help="trials of the other sizes' own campaigns")
    ap.add_argument("--transfer", type=int, default=5, help="top configs of --tune-size tried at other sizes")
    ap.add_argument("--algorithm", default="random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="alternating final comparisons")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds of timed repeats per final measurement")
    ap.add_argument("--db", default="sqlite:///bench_kernels.db")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--cuda-size", type=int, default=4096, help="--target cuda: the gemm size")
    a = ap.parse_args(argv)
    if a.target == "cuda":
        db = open_database(a.db)
        try:
            row = bench_cuda(a, db)
        finally:
            db.close()
        if a.json:
            print(json.dumps(row))
        return 0
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        raise UsageError(f"--sizes {a.sizes!r} is not a comma-separated list of whole numbers (e.g. 512,1024)") from None
    if min(sizes) < 1:
        raise UsageError(f"--sizes {a.sizes!r}: every size must be at least 1")
    cores = os.cpu_count() or 1
    threads = [int(x) for x in a.threads.split(",")] if a.threads else sorted({1, cores})
    order = sorted(sizes, key=lambda s: s != a.tune_size)  # the tuned size first, then transfer from it
    db = open_database(a.db)
    rows = []
    try:
        for th in threads:
            seeds: list[dict] = []
            for n in order:
                trials = a.trials if n == a.tune_size else a.trials_other
                t0 = time.perf_counter()
                _, cfg, default_cost, name = tune(db, n, th, trials, a.algorithm, a.seed, a.batch,
                                                     seeds if n != a.tune_size else [])
                tune_s = time.perf_counter() - t0
                if n == a.tune_size:
                    seeds = campaign_top(db, name, a.transfer) or [cfg]
                tuned, blas, flops, device = compare(n, th, cfg, a.rounds, a.min_time)
                row = {"n": n, "threads": th, "trials": trials, "tune_s": round(tune_s, 1),
                       "tuned_gflops": flops / tuned / 1e9, "numpy_gflops": flops / blas / 1e9,
                       "ratio": blas / tuned, "default_gflops": flops / default_cost / 1e9 if default_cost else None,
                       "config": cfg}
                rows.append(row)
                print(f"gemm {n}^3 threads={th}: tuned {row['tuned_gflops']:.1f} GFLOP/s, numpy.matmul "
                      f"{row['numpy_gflops']:.1f} GFLOP/s, ratio {row['ratio']:.2f} (default config "
                      f"{row['default_gflops'] or float('nan'):.1f} GFLOP/s; {trials} trials, {tune_s:.0f} s)",
                      flush=True)
    finally:
        db.close()
    print(f"\ndevice: {device.name}, {device.properties['cores']} cores, {device.properties['compiler']}")
    print(f"{'n':>6} {'threads':>7} {'tuned GFLOP/s':>14} {'numpy GFLOP/s':>14} {'ratio':>6}  best config")
    for r in rows:
        print(f"{r['n']:>6} {r['threads']:>7} {r['tuned_gflops']:>14.1f} {r['numpy_gflops']:>14.1f} "
              f"{r['ratio']:>6.2f}  {json.dumps(r['config'])}")
    if a.json:
        print(json.dumps({"device": device.to_json(), "results": rows}))
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
