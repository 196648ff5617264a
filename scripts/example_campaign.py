"""A complete tuning campaign from a script: the bundled replay space and a look at the log.
Everything comes from the public API, the top-level ``autotune`` module.
Run: python scripts/example_campaign.py (it writes example.db in the working directory)"""

import argparse

import autotune

argparse.ArgumentParser(description=__doc__).parse_args()  # --help says this, and runs nothing
db = autotune.open_database("sqlite:///example.db")

# 1. a recorded GPU kernel (pnpoly on an RTX 3090, bundled): measurements come from the recording
space = autotune.ReplaySpace("example:pnpoly-rtx3090")
result = autotune.Campaign("example-pnpoly", space, "random", autotune.ReplayRunner(space.cache), db,
                           trials=150, seed=1, progress=True).run()
print(f"best {result.best.cost * 1e3:.3f} ms with {result.best.candidate.payload} "
      f"after {result.trials} trials ({result.simulated_s:.0f} s of simulated GPU time)")

# 2. the tuning log, as pandas
print(autotune.queries.trials(db, campaign="example-pnpoly", top=5)[["cost", "config"]])
print(autotune.queries.convergence(db, "example-pnpoly")[["trial", "best_so_far"]].tail(3))
