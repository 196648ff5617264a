"""A recorded space as a device with a lower limit on threads per block would run it: every configuration
whose block (the product of its ``block_size_x``, ``block_size_y`` and ``block_size_z``) is above the limit
fails at launch, the rest keep their recorded times.

A test of search on spaces where most configurations fail, shaped as real failures are (a resource limit
on a product of knobs, as AMD's default of 256 work-items per work-group refuses blocks that CUDA takes up
to 1,024), on times that were measured. The result is a Kernel Tuner cache like its input, its device named
with the limit, so every benchmark reads it; the optimum may move (when the recorded optimum's block is too
large), and the benchmarks take the optimum of the file they read.

    python scripts/limit_threads.py ../shared/datasets/replay/pnpoly/RTX_3090.json.gz pnpoly_3090_256.json.gz
    python scripts/bench_search.py --cache pnpoly_3090_256.json.gz --seeds 10 --budget 1000 \
        --algorithms evolutionary+xgb evolutionary+xgb:avoid_failures=1.0 optuna-tpe-direct random
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import positive_int, write_text_atomic  # noqa: E402

from autotune.errors import UsageError  # noqa: E402

BLOCK = ("block_size_x", "block_size_y", "block_size_z")
LAUNCH_FAILURE = "RuntimeFailedConfig"


def limit_threads(data: dict, max_threads: int) -> tuple[dict, int]:
    """The cache ``data`` with every record whose block exceeds ``max_threads`` failed; and how many were."""
    if not any(k in data.get("tune_params_keys", ()) for k in BLOCK):
        raise ValueError(f"the space has no block size parameter ({', '.join(BLOCK)}): no block to limit")
    out = {**data, "device_name": f"{data.get('device_name', 'device')} (max {max_threads} threads)",
           "cache": {}}
    failed = 0
    for key, rec in data["cache"].items():
        threads = math.prod(int(rec.get(k, 1)) for k in BLOCK)
        if threads > max_threads and not isinstance(rec.get("time"), str):
            rec = {**rec, "time": LAUNCH_FAILURE}
            rec.pop("times", None)
            failed += 1
        out["cache"][key] = rec
    return out, failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="a Kernel Tuner cache (.json or .json.gz)")
    ap.add_argument("out", help="the cache file to write (.json or .json.gz)")
    ap.add_argument("--max-threads", type=positive_int, default=256,
                    help="threads per block the device launches (default 256)")
    args = ap.parse_args(argv)
    if Path(args.out).is_dir():
        raise UsageError(f"cannot write {args.out!r}: it is a folder; name the cache file to write")
    if not Path(args.source).is_file():
        raise UsageError(f"cache file {args.source!r} does not exist")
    try:
        with (gzip.open(args.source, "rt") if args.source.endswith(".gz") else open(args.source)) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, EOFError, json.JSONDecodeError) as exc:
        raise UsageError(f"cache file {args.source!r} is not readable JSON ({exc}); expected a Kernel Tuner "
                         "cache") from None
    if not isinstance(data, dict) or not isinstance(data.get("cache"), dict):
        raise UsageError(f"cache file {args.source!r} has no \"cache\" object of records; expected a Kernel Tuner "
                         "cache")
    try:
        out, failed = limit_threads(data, args.max_threads)
    except ValueError as exc:
        print(f"error: {args.source}: {exc}", file=sys.stderr)
        return 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(out)
    if args.out.endswith(".gz"):  # written beside and renamed: an interrupted write leaves no broken cache
        tmp = Path(f"{args.out}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(gzip.compress(text.encode()))
            os.replace(tmp, args.out)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        write_text_atomic(args.out, text)
    total = len(out["cache"])
    bad = sum(isinstance(r.get("time"), str) for r in out["cache"].values())
    print(f"{args.out}: {total:,} points, {failed:,} more failing ({bad / total:.0%} failing in all)")
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
