"""Record a built-in kernel's tuning space on this machine's GPU (or CPU) as a Kernel Tuner cache.

Measures the configurations of one kernel template (gemm, conv2d, softmax) in uniformly random
order, without a cost model, until the space, --max-configs or --time-budget runs out, then
writes every measured configuration (failures included) to a Kernel Tuner cache file that
`bench_search.py --cache`, `bench_transfer.py` and `autotune tune replay` replay. Stopping
early leaves a uniform random sample of the space, and the same command resumes the campaign
(its trials are in --db), so a large space can be recorded over several runs:

    python scripts/record_space.py conv2d --out conv2d_H100.json.gz --time-budget 300
    python scripts/record_space.py gemm --shape 1024,1024,1024 --max-configs 4000 --out gemm_H100.json.gz

Timing: one warm-up launch and 7 timed launches (Kernel Tuner's default count); a record's
`time` is their median, as for every autotune measurement, and `times` holds all 7.

Ctrl-C stops the recording and still writes what was measured to --out (exit status 130); the same
command continues from there.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from autotune.algorithms.registry import make_algorithm
from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.drivers.kernel import DEFAULT_SHAPES, make_runner
from autotune.runners.timing import Protocol
from autotune.search_spaces.replay import write_cache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import non_negative_int, positive_int  # noqa: E402

KT_PROTOCOL = Protocol(warmup=1, min_repeats=7, max_repeats=7, min_time_s=0.0, budget_s=2.0)


class Recording(Campaign):
    """The recording's campaign, whose Ctrl-C message says to run ``command`` again: the script finds its
    campaign by kernel, shape, device and seed (it takes no ``--campaign``)."""

    command = "the same record_space.py command"

    def resume_command(self) -> str:
        return self.command


def record(kernel: str, shape: str, out: Path, db: str, max_configs: int | None, time_budget: float | None,
           batch: int, seed: int, target: str = "cuda", backend: str = "auto", command: str | None = None) -> dict:
    """``command``: the command line that continues the recording, said on Ctrl-C."""
    space, template, runner = make_runner(kernel, shape, target, backend=backend, seed=seed, protocol=KT_PROTOCOL)
    size = space.size()
    trials = min(size, max_configs) if max_configs else size
    label = "x".join(str(v) for v in template.shape.values())
    name = f"record-{kernel}-{label}-{runner.device.name.replace(' ', '_')}-seed{seed}"
    database = open_database(db)
    t0 = time.perf_counter()
    interrupted = False
    try:
        try:
            campaign = Recording(name, space, make_algorithm("random"), runner, database, trials=trials,
                                 time_budget=time_budget, batch=batch, seed=seed, progress=True)
            campaign.command = command or campaign.command
            campaign.run()
        except KeyboardInterrupt:  # the campaign stored what was measured: it is written below all the same
            interrupted = True
        history = [m for m, _ in database.campaign_history(database.campaign(name).id)]
    finally:
        runner.close()
        database.close()
    params = {n: list(v) for n, v in zip(space.names, space.values)}
    write_cache(out, runner.device.name, kernel, template.shape, params, history)
    ok = sum(1 for m in history if m.ok)
    return {"interrupted": interrupted, "kernel": kernel, "shape": label, "device": runner.device.name, "space": size, "recorded": len(history),
            "ok": ok, "failed": len(history) - ok, "best_ms": min((m.cost for m in history if m.ok), default=None),
            "seconds": round(time.perf_counter() - t0, 1), "out": str(out), "complete": len(history) >= trials}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", choices=sorted(DEFAULT_SHAPES), help="kernel template")
    ap.add_argument("--shape", default=None, help="problem shape (default: the template's, as `autotune tune kernel`)")
    ap.add_argument("--out", type=Path, required=True, help="Kernel Tuner cache file to write (.json or .json.gz)")
    ap.add_argument("--db", default="sqlite:///record.db", help="database of the recording campaign (resumable)")
    ap.add_argument("--max-configs", type=positive_int, default=None,
                    help="stop after this many configurations (over all runs of the recording)")
    ap.add_argument("--time-budget", type=float, default=None, help="wall-clock seconds for this run")
    ap.add_argument("--batch", type=positive_int, default=32, help="configurations compiled in parallel per batch")
    ap.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random order and of the inputs")
    ap.add_argument("--target", default="cuda", choices=("cuda", "cpu"), help="cuda (nvcc) or cpu (C via gcc)")
    ap.add_argument("--backend", default="auto", help="cuda: auto, pycuda or cupy")
    args = ap.parse_args(argv)
    command = shlex.join(["python", sys.argv[0] if argv is None else "scripts/record_space.py",
                          *(sys.argv[1:] if argv is None else argv)])
    summary = record(args.kernel, args.shape or DEFAULT_SHAPES[args.kernel], args.out, args.db, args.max_configs,
                     args.time_budget, args.batch, args.seed, args.target, args.backend, command)
    print(summary)
    if summary["interrupted"]:
        print(f"interrupted: {summary['recorded']} configurations written to {summary['out']}; the same command "
              "continues the recording", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
