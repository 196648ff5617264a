"""StrategySpace conformance, strategy validity and JSON, models and clusters."""

import json

import numpy as np
import pytest

from autotune.errors import MissingDependencyError, UsageError
from autotune.search_spaces.parallel import strategy as st
from autotune.search_spaces.parallel.clusters import get_cluster
from autotune.search_spaces.parallel.models import MODELS, get_model
from autotune.search_spaces.parallel.space import StrategySpace
from autotune.types import Candidate


@pytest.mark.parametrize("name", list(MODELS))
def test_models_are_consistent(name):
    g = get_model(name)
    assert g.ops and g.flops > 0 and g.parameters > 0
    for p, c, k in g.edges:
        axes = g.ops[c].inputs[k][1]
        assert all(a is None or a in g.ops[c].dims for a in axes)
    for op in g.ops:
        assert all(r in (None, "sample", "attribute", "parameter", "reduction") for r in op.roles.values())
        assert set(op.weight) <= set(op.dims) and set(op.out) <= set(op.dims)
    assert st.Graph.from_json(json.loads(json.dumps(g.to_json()))).flops == pytest.approx(g.flops)


def test_known_parameter_counts():
    assert get_model("resnet101").parameters == pytest.approx(44.5e6, rel=0.02)
    assert get_model("bert-large").parameters == pytest.approx(335e6, rel=0.03)
    assert get_model("gpt-1.3b").parameters == pytest.approx(1.32e9, rel=0.03)


def test_the_h100_runs_its_gemms_at_a_smaller_share_of_its_peak_than_the_a100():
    """The H100 preset's GEMM efficiency is its own (fitted on MosaicML's H100 runs: tests/benchmarks/
    test_validate_h100.py), below the A100's, with its own hardware figures; the dgx-h100 clusters carry it."""
    from autotune.search_spaces.parallel.clusters import DEVICES

    h100, a100 = DEVICES["H100"], DEVICES["A100"]
    assert 0.3 < h100.gemm_efficiency < a100.gemm_efficiency and h100.flops_fp16 == 989e12 != a100.flops_fp16
    assert get_cluster("dgx-h100-x1").device.gemm_efficiency == h100.gemm_efficiency


def test_clusters_presets_and_files(tmp_path):
    assert get_cluster("p100-4x4").devices == 16 and get_cluster("k80-16x4").devices == 64
    assert get_cluster("dgx-h100-x3").devices == 24 and get_cluster("p3.16xlarge-x8").devices == 64
    for bad in ("tpu-v4", "dgx-a100-x0", "p100-4x4-x2"):
        with pytest.raises(UsageError):
            get_cluster(bad)
    spec = get_cluster("dgx-a100-x2").to_json()
    spec["name"], spec["device"] = "mine", "V100"
    (tmp_path / "c.json").write_text(json.dumps(spec))
    c = get_cluster(str(tmp_path / "c.json"))
    assert c.name == "mine" and c.device.name == "V100" and c.devices == 16
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    assert get_cluster(str(tmp_path / "c.yaml")).devices == 16
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(UsageError):
        get_cluster(str(tmp_path / "bad.json"))


def test_yaml_without_pyyaml_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__",
                        lambda n, *a, **k: (_ for _ in ()).throw(ImportError(n)) if n == "yaml" else real(n, *a, **k))
    (tmp_path / "c.yaml").write_text("name: x")
    with pytest.raises(MissingDependencyError, match="PyYAML"):
        get_cluster(str(tmp_path / "c.yaml"))


def test_strategy_validity_and_json_round_trip():
    g, cl = get_model("gpt-350m", 16), get_cluster("dgx-a100-x2")
    for name, fn in st.BASELINES.items():
        s = fn(g, cl)
        assert st.check_strategy(g, s, cl.devices) is None, name
        assert st.from_json(g, json.loads(json.dumps(st.to_json(g, s, cl.devices))), cl.devices) == s
    op = g.ops[g.index["l0.qkv"]]
    assert "does not divide" in st.check_config(op, st.OpConfig((1, 1, 7, 1), 0), 16)
    assert "aligned" in st.check_config(op, st.OpConfig((2, 1, 2, 1), 2), 16)
    assert "divide 16 devices" in st.check_config(op, st.OpConfig((1, 1, 3, 1), 0), 16)
    with pytest.raises(UsageError):
        st.from_json(g, {"ops": {"nope": {}}}, 16)
    space = StrategySpace(g, cl)
    assert not space.contains(Candidate({"ops": {"l0.qkv": {"degrees": {"o": 5}}}}))


def test_megatron_splits_transformer_ops_inside_a_node():
    g, cl = get_model("gpt-350m", 16), get_cluster("dgx-a100-x2")
    s = dict(zip((op.name for op in g.ops), st.megatron(g, cl)))
    qkv, proj = g.ops[g.index["l0.qkv"]], g.ops[g.index["l0.proj"]]
    assert dict(zip(qkv.parallel_dims, s["l0.qkv"].degrees)) == {"a0": 2, "a1": 1, "o": 8, "i": 1}
    assert dict(zip(proj.parallel_dims, s["l0.proj"].degrees)) == {"a0": 2, "o": 1, "i": 8}


def test_features_distinguish_strategies():
    space = StrategySpace(get_model("mlp-unity", 64), get_cluster("p100-4x4"))
    X = space.features([space.initial(), space.wrap(st.model_parallel(space.graph, space.cluster))])
    assert X.shape == (2, space.features([space.initial()]).shape[1]) and not np.allclose(X[0], X[1])


@pytest.mark.parametrize("change, message", [
    ({"inter_bw": -1e10}, "inter_bw must be a finite positive number"),
    ({"intra_bw": 0}, "intra_bw must be a finite positive number"),
    ({"intra_bw": float("nan")}, "intra_bw must be a finite positive number"),
    ({"nodes": 0}, "nodes must be a whole number >= 1"),
    ({"per_node": -4}, "per_node must be a whole number >= 1"),
    ({"nodes": 2**30}, "at most"),
    ({"device": "Z80"}, "unknown device"),
    ({"device": {"name": "g", "flops_fp32": 1e13, "flops_fp16": 1e14, "memory_bytes": 1e10, "mem_bandwidth": -1}},
     "mem_bandwidth"),
])
def test_cluster_files_with_impossible_quantities_are_refused(tmp_path, change, message):
    doc = {"name": "c", "nodes": 2, "per_node": 4, "device": "A100", "intra_bw": 3e11, "inter_bw": 2.5e10, **change}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=message):
        get_cluster(str(path))


@pytest.mark.parametrize("text, message", [("{not: [yaml", "not valid YAML"), ("- 1\n- 2\n", "must be a mapping")])
def test_malformed_yaml_cluster_files_are_usage_errors(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        get_cluster(str(path))


def test_megatron_replicates_layer_norms_on_the_tensor_group_with_one_sequence_per_micro_batch():
    """A micro-batch of one sequence has no partitionable sample dim; layer norms and residual adds
    still run on every device of their stage (whole on each tensor-parallel rank), not on one."""
    g, cl = get_model("gpt-350m", 1), get_cluster("dgx-a100-x2")
    s = dict(zip((op.name for op in g.ops), st.megatron(g, cl, tensor=8, pipeline=2)))
    for name in ("l0.ln1", "l0.add1", "l23.add2"):
        op = g.ops[g.index[name]]
        assert "a0" not in op.parallel_dims  # the sample dim has size 1
        assert s[name].span == 8 and s[name].replicas * s[name].parts == 8
    assert s["l0.ln1"].start == 0 and s["l23.add2"].start == 8
    assert s["l0.qkv"].span == 8 and s["l0.qkv"].start == s["l0.ln1"].start


def test_layouts_cover_every_factorisation_and_choose_the_micro_batch_count():
    """GPT-350M, batch 64 on 16 A100s: a layout is Megatron's strategy at (t, p, d) with t*p*d = 16 and a
    micro-batch count m (each replica's micro-batch whole, m >= p when pipelined); its candidate carries m,
    round-trips through its JSON, and runs on the model rebuilt at batch 64 / m."""
    from autotune.drivers.parallel import strategy_space
    from autotune.runners.simulator.engine import Simulator
    from autotune.runners.simulator.runner import SimulatorRunner

    g, cl = get_model("gpt-350m", 64), get_cluster("dgx-a100-x2")
    space = strategy_space(g, cl)
    assert {(x.tensor, x.pipeline) for x in space.layouts} == {(t, p) for t in (1, 2, 4, 8) for p in (1, 2, 4, 8, 16)
                                                               if t * p <= 16}
    for x in space.layouts:
        assert x.tensor * x.pipeline * x.data == 16 and (64 // x.microbatches) % x.data == 0
        assert x.pipeline == 1 or x.microbatches >= x.pipeline
        # interleaved: 24 layers in p * v equal chunks, micro-batches a multiple of p
        assert x.virtual == 1 or (x.pipeline > 1 and 24 % (x.pipeline * x.virtual) == 0 and x.microbatches % x.pipeline == 0)
    assert {x.virtual for x in space.layouts} == {1, 2, 3, 4, 6}  # divisors of 24 / p, at most 8
    all_seeds = space.seeds()  # computed once: each call takes most of a second
    layout_seeds = [n for n in all_seeds if n.startswith("layout ") and " rc-" not in n]
    seeded = [x for x in map({x.name: x for x in space.layouts}.get, layout_seeds) if x.virtual > 1]
    for x in seeded:  # interleaved seeds: the fewest chunks above one that the stage's layers split into, or
        # at one sample per replica and micro-batch (sequence parallel where t > 1) every interleaving there is
        fewest_v = min(y.virtual for y in space.layouts if y.virtual > 1 and y.pipeline == x.pipeline)
        assert x.virtual == fewest_v or (64 // x.microbatches == x.data and x.sequence == (x.tensor > 1))
    every_v = {(x.tensor, x.pipeline, x.virtual) for x in space.layouts
               if x.virtual > 1 and 64 // x.microbatches == x.data and x.sequence == (x.tensor > 1)}
    assert every_v and every_v <= {(x.tensor, x.pipeline, x.virtual) for x in seeded}
    assert {x.virtual for x in seeded} == {2, 3, 4, 6}  # 24 layers: 12 per stage on 2 stages split 2, 3, 4 or 6 ways
    assert {x.virtual for x in seeded if 64 // x.microbatches != x.data} == {2, 3}  # elsewhere the fewest: 3 on 8 stages
    by_name = {x.name: x for x in space.layouts}  # and so in the other recomputation modes (a published layout
    other = {by_name[n.split(" rc-")[0]].virtual for n in all_seeds if " rc-" in n}  # may interleave there)
    assert other == {1, 2, 3, 4, 6}
    lay = next(x for x in space.layouts if (x.tensor, x.pipeline, x.microbatches) == (8, 2, 16))
    c = space.layout(lay)
    assert c.payload["microbatches"] == 16 and space.microbatches_of(c) == 16 and space.contains(c)
    assert space.candidate(json.loads(json.dumps(c.payload))).key == c.key
    micro = get_model("gpt-350m", 4)
    expected = Simulator(micro, cl, 16).simulate(st.megatron(micro, cl, 8, 2))
    m = SimulatorRunner(g, cl, space).measure_one(c)
    assert m.cost == pytest.approx(expected.iteration_s, rel=1e-12) and m.meta["microbatches"] == 16
    assert m.meta["throughput"] == pytest.approx(64 / m.cost)
    assert not space.contains(Candidate({**c.payload, "microbatches": 3}))  # 64 does not split in 3
    assert not space.contains(Candidate({**c.payload, "microbatches": 64}))  # a 1-sample micro-batch on 2 replicas
    seeds = {n: c for n, c in all_seeds.items() if n.startswith("layout ") and " rc-" not in n}
    # the other recomputation modes are seeded at each (t, p)'s fewest micro-batches
    other = {n: c for n, c in all_seeds.items() if " rc-" in n}
    assert {space.recompute_of(c) for c in other.values()} == {"selective", "full"}
    for n, c in other.items():
        lay, mode = n.split(" rc-")
        assert c.payload["recompute"] == mode and space.strategy(c) == space.strategy(seeds[lay]) and space.contains(c)
    assert {n for n in all_seeds if n not in seeds and n not in other} == {
        "data-parallel zero-1", "data-parallel zero-2", "data-parallel zero-3", "data-parallel zero-3 prefetch"}
    fewest = {}
    for x in space.layouts:
        fewest[x.tensor, x.pipeline] = min(fewest.get((x.tensor, x.pipeline), 64), x.microbatches)
    names = {x.name: x for x in space.layouts}
    assert set(seeds) <= set(names) and {(t, p, m) for (t, p), m in fewest.items()} <= {
        (names[n].tensor, names[n].pipeline, names[n].microbatches) for n in seeds}
    assert all(64 // x.microbatches // x.data in (1, 2, 4, 8) or x.microbatches == fewest[x.tensor, x.pipeline]
               for x in map(names.get, seeds))


def test_layout_moves_jump_between_layouts_and_op_moves_keep_the_micro_batch_count():
    from autotune.drivers.parallel import strategy_space

    space = strategy_space(get_model("gpt-350m", 64), get_cluster("dgx-a100-x2"))
    rng = np.random.default_rng(0)
    space.layout_prob = 1.0
    jumps = {space.neighbor(space.initial(), rng).key for _ in range(40)}
    assert jumps <= {space.layout(x).key for x in space.layouts} and len(jumps) > 10
    space.layout_prob = 0.0
    c = space.layout(space.layouts[-1])
    for _ in range(40):
        n = space.neighbor(c, rng)
        assert space.contains(n) and space.microbatches_of(n) == space.microbatches_of(c)
        changed = sum(a != b for a, b in zip(space.strategy(n), space.strategy(c)))
        # an op move, or alone a ZeRO move, a recomputation move or a gradient-overlap move
        moves = [changed >= 1, (space.zero_of(n), space.prefetch_of(n)) != (space.zero_of(c), space.prefetch_of(c)),
                 space.recompute_of(n) != space.recompute_of(c), space.overlap_of(n) != space.overlap_of(c)]
        assert sum(moves) == 1
    assert space.recompute_of(c) == "none" and {space.recompute_of(space.neighbor(c, rng)) for _ in range(400)} == {
        "none", "selective", "full"}
    child = space.crossover(c, space.initial(), rng)
    assert space.contains(child) and space.microbatches_of(child) == space.microbatches_of(c)


def test_gradient_overlap_is_a_strategy_dimension():
    from autotune.drivers.parallel import strategy_space
    from autotune.runners.simulator import SimulatorRunner

    space = strategy_space(get_model("gpt-350m", 64), get_cluster("dgx-a100-x2"))
    rng = np.random.default_rng(0)
    space.layout_prob = space.zero_prob = space.recompute_prob = 0.0
    space.overlap_prob = 1.0
    c = space.layout(next(x for x in space.layouts if x.data > 1 and x.microbatches > 1))
    assert space.overlap_of(c) is None  # the default: not overlapped with several micro-batches
    on = space.neighbor(c, rng)
    assert space.overlap_of(on) is True and space.strategy(on) == space.strategy(c) and on.payload["overlap"] is True
    assert space.overlap_of(space.neighbor(on, rng)) is False
    assert not np.allclose(*space.features([c, on]))
    assert not space.contains(Candidate({**c.payload, "overlap": "yes"}))
    runner = SimulatorRunner(space.graph, space.cluster, space)
    default, overlapped = runner.measure(space.task, [c, on])
    assert overlapped.ok and default.ok and overlapped.cost < default.cost
    assert space.overlap_of(space.crossover(on, c, rng)) is True


def test_zero_3_prefetch_is_a_strategy_dimension_with_its_memory_cost():
    """The ZeRO move draws among the stages and stage 3 with its gathers prefetched; prefetched, a ZeRO-3
    strategy is faster (each gather runs during the op before it) and holds one more op's gathered weights."""
    from autotune.drivers.parallel import strategy_space
    from autotune.runners.simulator import SimulatorRunner

    space = strategy_space(get_model("gpt-350m", 64), get_cluster("dgx-a100-x2"))
    rng = np.random.default_rng(0)
    space.layout_prob = space.recompute_prob = space.overlap_prob = 0.0
    space.zero_prob = 1.0
    dp = space.initial()
    settings = {(space.zero_of(n), space.prefetch_of(n)) for n in (space.neighbor(dp, rng) for _ in range(60))}
    assert settings == {(1, False), (2, False), (3, False), (3, True)}
    seeds = space.seeds()
    on_demand, prefetched = seeds["data-parallel zero-3"], seeds["data-parallel zero-3 prefetch"]
    assert prefetched.payload["prefetch"] is True and "prefetch" not in on_demand.payload
    assert space.strategy(prefetched) == space.strategy(on_demand) and not np.allclose(
        *space.features([on_demand, prefetched]))
    assert not space.contains(Candidate({**dp.payload, "prefetch": True}))  # prefetch needs stage 3
    runner = SimulatorRunner(space.graph, space.cluster, space)
    a, b = runner.measure(space.task, [on_demand, prefetched])
    assert a.ok and b.ok and b.cost < a.cost and b.meta["peak_memory_bytes"] > a.meta["peak_memory_bytes"]
    assert space.prefetch_of(space.crossover(prefetched, dp, rng)) is True


def test_models_without_a_rebuild_keep_their_micro_batch_count():
    from autotune.drivers.parallel import strategy_space

    space = strategy_space(get_model("resnet101", 64), get_cluster("p100-4x4"))
    assert space.counts == [1] and all(x.microbatches == 1 and x.pipeline == 1 for x in space.layouts)
    assert not space.contains(Candidate({**space.initial().payload, "microbatches": 2}))


def test_mixture_of_experts_layouts_choose_the_expert_parallel_degree():
    """DeepSpeed-MoE's 350M+MoE-128 on 16 A100s: the layouts add every expert-parallel degree dividing 128
    and a stage's devices; a layout's candidate splits each mixture-of-experts op's experts that many ways
    (its tokens over the rest of the stage), the dense ops as Megatron's strategy at the layout's t; the
    seeds cover each degree."""
    from autotune.drivers.parallel import strategy_space

    g, cl = get_model("gpt-moe-350m-128", 16), get_cluster("dgx-a100-x2")
    space = strategy_space(g, cl)
    moe = [i for i, op in enumerate(g.ops) if op.routed]
    assert moe and g.ops[moe[0]].dims["e"] == 128
    for lay in space.layouts:
        if lay.pipeline == 1 and lay.microbatches == 1:
            s = space.strategy(space.layout(lay))
            ep = lay.expert or lay.tensor
            op = g.ops[moe[0]]
            deg = dict(zip(op.parallel_dims, s[moe[0]].degrees))
            assert deg["e"] == ep and s[moe[0]].span == 16
    degrees = {lay.expert or lay.tensor for lay in space.layouts if lay.pipeline == 1}
    assert degrees == {1, 2, 4, 8, 16}
    assert {int(w[2:]) for name in space.seeds() for w in name.split() if w.startswith("ep")} == {1, 2, 4, 8, 16}


def test_layouts_whose_weights_cannot_fit_are_no_seeds():
    """A layout whose weights and optimizer state spread over its t * p devices exceed one device's memory is
    no seed; each such (t, p) indeed fits at none of its micro-batch counts, even with full recomputation. A
    device's allocator slack and context count as the simulator counts them: more layouts are left out."""
    import dataclasses

    from autotune.drivers.parallel import strategy_space
    from autotune.runners.simulator.runner import SimulatorRunner

    g, preset = get_model("gpt-6.7b", 16), get_cluster("p3.16xlarge-x2")  # 6.7B x 20 bytes on 16 GB V100s
    stack = dataclasses.replace(preset, device=dataclasses.replace(preset.device, allocator_slack=0.6,
                                                                   context_bytes=1e9))
    left = []
    for cl in (preset, stack):
        space = strategy_space(g, cl)
        by_name = {x.name: x for x in space.layouts}
        seeded = {(x.tensor, x.pipeline) for n in space.seeds() if (x := by_name.get(n.split(" rc-")[0]))}
        left_out = {(x.tensor, x.pipeline) for x in space.layouts} - seeded
        assert seeded and left_out and all(t * p < 16 for t, p in left_out)
        runner = SimulatorRunner(g, cl, space)
        for t, p in left_out:
            lay = max((x for x in space.layouts if (x.tensor, x.pipeline) == (t, p) and x.virtual == 1),
                      key=lambda x: x.microbatches)  # the least activation memory
            assert not runner.measure_one(space.layout(lay, recompute="full")).ok
        left.append(left_out)
    assert left[0] < left[1]
