"""A synthetic Kernel Tuner cache far larger than the recorded ones, to measure the engine where the model
cannot score every point (spaces above ``score_all``, 100,000 points, by default).

Eight knobs shaped like a stencil kernel's (block sizes, tiles, temporal tiling, unrolling, shared-memory
power, blocks per SM), 972,000 valid points (32 to 1,024 threads per block; an unroll factor that divides the
temporal tiling factor), times from a smooth product of per-knob penalties with 3% log-normal noise, and
10% of the points with large tiles failing at run time. Not a measurement of any GPU: its optimum says
nothing about search quality on real kernels, only about the engine's time and memory at this size.

    python scripts/synthetic_space.py --out big.json.gz
    python scripts/bench_search.py --cache big.json.gz --algorithms evolutionary+xgb --seeds 2 --budget 1000

``--points 95000`` keeps a random 95,000 of them: a space the model still scores exhaustively.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

from autotune.errors import UsageError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import non_negative_int, output_file, positive_int  # noqa: E402

KNOBS = {"block_size_x": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], "block_size_y": [1, 2, 4, 8, 16, 32],
         "tile_size_x": list(range(1, 11)), "tile_size_y": list(range(1, 11)),
         "temporal_tiling_factor": list(range(1, 11)), "loop_unroll_factor_t": list(range(1, 11)),
         "sh_power": [0, 1], "blocks_per_sm": [0, 1, 2, 3, 4]}


def synthetic_cache(seed: int = 0, device: str = "synthetic", points: int | None = None) -> dict:
    """The cache; with ``points``, a uniform random choice of that many of its points (drawn with ``seed``)."""
    if points is not None and points < 1:  # before the minute it takes to build the whole cache
        raise UsageError(f"--points must be at least 1, got {points:,}")
    rng = np.random.default_rng(seed)
    cache = {}
    for values in itertools.product(*KNOBS.values()):
        c = dict(zip(KNOBS, values))
        threads = c["block_size_x"] * c["block_size_y"]
        tt, unroll = c["temporal_tiling_factor"], c["loop_unroll_factor_t"]
        if not 32 <= threads <= 1024 or tt % unroll:
            continue
        t = ((1 + 0.3 * abs(math.log2(threads) - 8)) * (1 + 0.1 * abs(c["tile_size_x"] - 4) + 0.08 * abs(c["tile_size_y"] - 3))
             * (1 + 0.06 * abs(tt - 5)) * (1.1 - 0.1 * c["sh_power"]) * (1 + 0.05 * abs(c["blocks_per_sm"] - 2)))
        t *= math.exp(rng.normal(0, 0.03))
        failed = c["tile_size_x"] * c["tile_size_y"] > 50 and rng.random() < 0.1
        cache[",".join(map(str, values))] = {**c, "time": "RuntimeFailedConfig" if failed else t,
                                              "compile_time": 800.0, "benchmark_time": 50.0}
    if points is not None:
        if points > len(cache):
            raise UsageError(f"--points must be between 1 and {len(cache):,}, got {points:,}")
        keys = list(cache)
        cache = {keys[i]: cache[keys[i]] for i in sorted(rng.choice(len(keys), points, replace=False))}
    return {"device_name": device, "kernel_name": "synthetic_stencil", "problem_size": [4096, 4096],
            "tune_params_keys": list(KNOBS), "tune_params": KNOBS, "cache": cache}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=output_file, required=True, help="the cache file to write (.json.gz)")
    ap.add_argument("--seed", type=non_negative_int, default=0, help="the seed of the times' noise and of the failures")
    ap.add_argument("--points", type=positive_int, default=None, help="keep a random choice of this many points (a space "
                    "between the recorded kernels' and score_all, which the model scores exhaustively)")
    ap.add_argument("--device", default="synthetic", help="the device name recorded (another one for a second "
                    "recording to warm-start from)")
    args = ap.parse_args()
    data = synthetic_cache(args.seed, args.device, args.points)
    with gzip.open(args.out, "wt") if args.out.endswith(".gz") else open(args.out, "w") as f:
        json.dump(data, f)
    print(f"{args.out}: {len(data['cache']):,} points")


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
