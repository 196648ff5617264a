"""`autotune parallelize --layout`: a layout the user names (the one they run now) is simulated beside the
baselines, in the words of a seed layout's name, and the search is never slower than it."""

import pytest

from autotune.errors import UsageError
from autotune.runners.simulator.engine import Simulator
from autotune.search_spaces.parallel import strategy as st
from autotune.search_spaces.parallel.clusters import get_cluster
from autotune.search_spaces.parallel.layouts import Layout, parse_layout
from autotune.search_spaces.parallel.models import get_model, rebuild
from parallel_cli_helpers import in_tmp, last_json, run  # noqa: F401 (in_tmp: the autouse fixture)


def test_a_given_layout_is_simulated_as_megatrons_strategy_at_its_degrees_and_the_search_is_at_least_as_fast():
    r = run("--model", "gpt-1.3b", "--cluster", "dgx-a100-x1", "--batch", "64", "--trials", "10",
            "--layout", "t2 p2 mb4 sp rc-full", "--layout", "layout t4 p1 d2 m8", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "given layout t2 p2 d2 m8 sp rc-full" in r.output  # mb4: 64 samples over 2 replicas in 8 micro-batches
    assert "speed-up over the given layout t4 p1 d2 m8:" in r.output
    out = last_json(run("--model", "gpt-1.3b", "--cluster", "dgx-a100-x1", "--batch", "64", "--trials", "10",
                        "--layout", "t2 p2 mb4 sp rc-full", "--json"))
    given = out["baselines"]["given layout t2 p2 d2 m8 sp rc-full"]
    cluster = get_cluster("dgx-a100-x1")
    g = rebuild(get_model("gpt-1.3b", 8))(8, "full")  # one micro-batch of 8 samples, fully recomputed
    expected = Simulator(g, cluster, 8).simulate(st.megatron(g, cluster, 2, 2, 1, True)).iteration_s
    assert given["iteration_s"] == pytest.approx(expected, rel=1e-9)
    assert out["best"]["iteration_s"] <= given["iteration_s"]


def test_every_seed_layouts_name_reads_back_as_that_seed():
    """The names a report writes for seed layouts (interleaved, sequence parallel, other recomputation modes)
    can be given back with --layout: each reads as the very strategy the search measured."""
    from autotune.drivers.parallel import strategy_space

    graph = get_model("gpt-350m", 32)
    space = strategy_space(graph, get_cluster("dgx-a100-x2"))
    seeds = {n: c for n, c in space.seeds().items() if n.startswith("layout ")}
    assert len(seeds) > 50 and any(" v" in n for n in seeds) and any(" sp rc-" in n for n in seeds)
    for name, c in seeds.items():
        given, back = space.given(name)
        assert given == f"given {name}" and back.key == c.key, name


LAYOUTS = [Layout(2, 1, 4, m) for m in (1, 2, 4)] + [Layout(2, 1, 4, 2, sequence=True), Layout(1, 2, 4, 4)]


@pytest.mark.parametrize("text, msg", [
    ("p1 m2", "names no tensor degree"),
    ("t2 p1 m2 mb4", "not both"),
    ("t2 p1 x2", "cannot read 'x2'"),
    ("t2 p1 rc-full", "recomputation 'full' is not one this search runs (none)"),
    ("t4 p1", "t4 p1 is not a layout of this model on these devices; these are: t1 p2, t2 p1"),
    ("t2 p1 m8", "micro-batches m [1, 2, 4]"),
    ("t2 p1 d2", "d4"),
    ("t2 p1 zero-4", "cannot read 'zero-4'"),
])
def test_a_layout_that_is_not_one_says_why(text, msg):
    with pytest.raises(UsageError, match=None) as e:
        parse_layout(text, LAYOUTS, batch=16, modes=(), recompute="none")
    assert msg in str(e.value)


def test_layout_words_pick_the_layout_its_recomputation_and_zero_stage():
    assert parse_layout("t2 p1", LAYOUTS, 16, (), "none") == (LAYOUTS[0], None, 0)  # the fewest micro-batches
    assert parse_layout("t2,p1,mb2,sp", LAYOUTS, 16, (), "none") == (LAYOUTS[3], None, 0)  # 16 = m2 x d4 x 2
    assert parse_layout("layout t1 p2 d4 m4 rc-full zero-1", LAYOUTS, 16, ("none", "selective", "full"),
                        "none") == (LAYOUTS[4], "full", 1)
    assert parse_layout("t2 p1 m4 rc-none", LAYOUTS, 16, ("none", "full"), "none") == (LAYOUTS[2], None, 0)


def test_where_no_baseline_fits_the_report_points_to_layout_and_a_given_layout_is_the_comparison():
    """A batch of 512 sequences fits no baseline of a 2.6B model on one node (each runs it in one micro-batch)."""
    args = ("--model", "gpt-2.6b", "--cluster", "dgx-h100-x1", "--batch", "512", "--trials", "0", "--no-progress")
    r = run(*args)
    assert r.exit_code == 0 and "nor does any other baseline (--layout compares with a layout you name)" in r.stdout
    r = run(*args, "--layout", "t2 p1 mb1")
    assert r.exit_code == 0 and "--layout compares" not in r.stdout
    assert "speed-up over given layout t2 p1 d4 m128, the fastest baseline that fits" in r.stdout
