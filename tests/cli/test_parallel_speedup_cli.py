"""The speed-up line of `autotune tune parallel`'s report where data parallelism does not fit in memory: over the
fastest baseline that fits, named; with no baseline that fits, the line says so without a number."""

import json

from autotune.search_spaces.parallel.models import mlp
from parallel_cli_helpers import in_tmp, last_json, run  # noqa: F401 (in_tmp: the autouse fixture)


def small_devices(tmp_path, memory_bytes: float) -> tuple:
    """Two fully connected layers (134 MB of fp32 weights) and two devices of ``memory_bytes`` each."""
    mlp(8, layers=2, width=4096, name="mlp-2x4096").save(str(tmp_path / "mlp.json"))
    device = {"name": "small", "flops_fp32": 15e12, "flops_fp16": 120e12, "memory_bytes": memory_bytes,
              "mem_bandwidth": 900e9}
    (tmp_path / "cluster.json").write_text(json.dumps({"name": "two-small", "nodes": 1, "per_node": 2,
                                                       "intra_bw": 100e9, "inter_bw": 1e9, "device": device}))
    return "-m", tmp_path / "mlp.json", "-c", tmp_path / "cluster.json", "--trials", 5


def test_where_data_parallelism_does_not_fit_the_speed_up_is_over_the_fastest_baseline_that_fits(tmp_path):
    args = small_devices(tmp_path, 0.3e9)  # data parallelism needs 0.38 GiB a device, Megatron 0.19
    out = last_json(run(*args, "--json"))
    base = out["baselines"]
    assert base["data-parallel"]["iteration_s"] is None and base["megatron"]["iteration_s"] is not None
    fastest = min((b["iteration_s"], n) for n, b in base.items() if b["iteration_s"] is not None)
    ratio = fastest[0] / out["best"]["iteration_s"]
    r = run(*args)
    assert r.exit_code == 0, r.output
    said = (f"speed-up over {fastest[1]}, the fastest baseline that fits (data parallelism does not fit in "
            f"memory): {ratio:.2f}x")
    assert f"  {said}\n" in r.stdout
    # the closing summary line says the same
    assert f", {ratio:.2f}x over {fastest[1]}, the fastest baseline that fits" in r.stderr


def test_where_no_baseline_fits_the_line_says_so(tmp_path):
    args = small_devices(tmp_path, 0.05e9)  # nothing fits
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert "  no speed-up: no strategy fits in memory\n" in r.stdout and "none fits in memory" in r.stderr


def test_where_no_strategy_fits_no_strategy_file_or_timeline_is_written(tmp_path):
    """-o and --timeline are the best strategy's; a baseline that does not fit is none, so neither is written,
    and the report says so."""
    args = small_devices(tmp_path, 0.05e9)  # nothing fits
    r = run(*args, "-o", "strategy.json", "--timeline", "timeline.png")
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "strategy.json").exists() and not (tmp_path / "timeline.png").exists()
    assert "  nothing written to strategy.json: no strategy fits in memory\n" in r.stdout
    assert "  nothing written to timeline.png: no strategy fits in memory\n" in r.stdout


def test_where_only_a_searched_strategy_fits_there_is_no_baseline_to_compare_with():
    """Unit test of the comparison on hand-made results: data parallelism and Megatron do not fit, a strategy
    the search found does."""
    from types import SimpleNamespace

    from autotune.drivers.parallel import speedup
    from autotune.types import Candidate, Measurement, Status

    def too_big(name):
        return Measurement(Candidate({"name": name}), Status.INVALID, meta={"capacity_bytes": 1, "peak_memory_bytes": 2})

    r = SimpleNamespace(best=Measurement(Candidate({"name": "found"}), Status.OK, cost=0.5),
                        baselines={"data-parallel": too_big("dp"), "megatron": too_big("megatron")})
    assert speedup(r) == ("data parallelism does not fit in memory, nor does any other baseline", None)
