"""The simulator's compute and memory costs against hand-computed figures on small graphs: an op's forward
and backward time at the device's peak rate, small GEMMs' lost efficiency (partial waves, short reductions),
eager kernels against fused ones, and measured op and collective times (given to the cluster or read from
the database) over the estimates; the bytes each device holds (weights with their gradients and optimizer
state, the activations a layer stores for its backward as Megatron-LM and Korthikanti et al. count them,
attention internals unless recomputed, ZeRO's sharded state, a replicated op's copies); and the engine's
bookkeeping: a delta simulation equals a fresh one, and the timeline covers the iteration. Memory capacity
as a hard constraint is tests/runners/test_simulator_capacity.py's."""

import math

import numpy as np
import pytest
from simulator_helpers import INTER, INTRA, LAT_I, LAT_N, PEAK, cfg, chain, cluster, grad_sync

from autotune.runners.simulator import nccl
from autotune.runners.simulator.engine import Simulator
from autotune.search_spaces.parallel.clusters import LATENCY_SCALE, Cluster, DeviceSpec
from autotune.search_spaces.parallel.graph import Builder
from autotune.search_spaces.parallel.space import StrategySpace
from autotune.search_spaces.parallel.strategy import OpConfig, data_parallel


def test_one_op_forward_backward():
    g = chain(1)
    r = Simulator(g, cluster(per_node=1)).simulate([cfg(g, "x"), cfg(g, "l0")])
    flops = 2 * 8 * 16 * 32
    assert r.iteration_s == pytest.approx(3 * flops / PEAK)  # forward + backward (2x)
    weights = 16 * 32 * 16  # parameters x (weight, gradient, 2 Adam moments)
    acts = (8 * 16 + 8 * 32) * 4
    assert r.peak_memory == pytest.approx(weights + acts)


def test_measured_op_times_and_collectives_override_estimates():
    g = chain(1, b=8, f=64, width=64)
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4)]
    key = Cluster.op_key("linear", {"a0": 2, "o": 64, "i": 64})
    cl = cluster(op_times={key: 1e-3, key + "#bwd": 3e-3},
                 collectives=[("allreduce", 4, 1e3, 1e-4), ("allreduce", 4, 1e5, 1e-2)])
    r = Simulator(g, cl).simulate(s)
    wbytes = 64 * 64 * 4  # 16384 bytes: log-log between the two points
    t_ar = math.exp(math.log(1e-4) + (math.log(wbytes) - math.log(1e3)) / (math.log(1e5) - math.log(1e3))
                    * (math.log(1e-2) - math.log(1e-4)))
    assert r.iteration_s == pytest.approx(1e-3 + 3e-3 + t_ar)


@pytest.mark.parametrize("layout_prob, zero", [(0.0, {}), (0.5, {}), (0.5, {"zero": 3}),
                                               (0.5, {"zero": 3, "zero_prefetch": True})])
def test_delta_simulation_matches_a_fresh_simulation(layout_prob, zero):
    """Op moves change one op (the simulator recomputes that op only); layout moves change many, and the
    delta simulation still equals a fresh one, with ZeRO-3's gathers too (on a graph that branches and joins,
    whose prefetched gathers wait on several ops)."""
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model

    g, cl = get_model("inception-v3", 32), get_cluster("p100-4x4")
    space = StrategySpace(g, cl, layout_prob=layout_prob, tie_prob=0.0)
    sim = Simulator(g, cl, **zero)
    rng = np.random.default_rng(0)
    c = space.initial()
    sim.simulate(space.strategy(c))
    most = 0
    for _ in range(15):
        c = space.neighbor(c, rng)
        s = space.strategy(c)
        changed = sum(a != b for a, b in zip(sim.current, s))
        assert sim.load(s) == changed
        most = max(most, changed)
        fresh = Simulator(g, cl, **zero).simulate(s)
        r = sim.simulate(s)
        assert r.iteration_s == pytest.approx(fresh.iteration_s)
        assert np.allclose(r.memory, fresh.memory)
    assert most <= 1 if layout_prob == 0 else most > 1


def test_timeline_covers_the_iteration():
    g = chain(2, width=16)
    sim = Simulator(g, cluster(per_node=2))
    r = sim.simulate([cfg(g, "x"), cfg(g, "l0"), cfg(g, "l1", start=1)], timeline=True)
    assert max(e for _, _, e, _ in r.timeline) == pytest.approx(r.iteration_s)
    assert {res for res, *_ in r.timeline} >= {0, 1}


def test_measurements_from_the_database_override_the_cluster(tmp_path):
    from autotune.db import open_database
    from autotune.db.calibration import measured, record
    from autotune.runners.simulator.calibration import calibrated
    from autotune.types import Device

    db = open_database(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        key = Cluster.op_key("linear", {"a0": 2, "o": 64, "i": 64})
        dev = Device("toy accelerator", "cuda", {})
        record(db, dev, {key: 1e-3, key + "#bwd": 3e-3}, [("allreduce", 4, 1e3, 1e-4), ("allreduce", 4, 1e5, 1e-2)])
        record(db, Device("other", "cuda", {}), {key: 1.0})  # another device kind: ignored
        cl = calibrated(cluster(), *measured(db, cluster().device.name))
    finally:
        db.close()
    assert cl.op_times == {key: 1e-3, key + "#bwd": 3e-3} and len(cl.collectives) == 2
    g = chain(1, b=8, f=64, width=64)
    r = Simulator(g, cl).simulate([cfg(g, "x", b=4), cfg(g, "l0", a0=4)])
    assert r.iteration_s > 4e-3  # measured 1 ms + 3 ms plus the interpolated all-reduce
    assert Simulator(g, cluster()).simulate([cfg(g, "x", b=4), cfg(g, "l0", a0=4)]).iteration_s < 1e-3


def test_small_gemms_lose_efficiency_by_wave_and_reduction_length():
    from autotune.runners.simulator.costs import gemm_efficiency

    dev = DeviceSpec("toy", PEAK, PEAK, 1e12, math.inf, sm_count=4, gemm_k_half=64)
    # 5 tiles of 128x128 on 4 multiprocessors: two waves, the second one quarter full
    assert gemm_efficiency(5 * 128, 128, 64, 1, dev) == pytest.approx(5 / 8 * 0.5)
    assert gemm_efficiency(4 * 128, 128, 192, 1, dev) == pytest.approx(0.75)
    plain = DeviceSpec("toy", PEAK, PEAK, 1e12, math.inf)
    assert gemm_efficiency(1, 1, 1, 1, plain) == 1.0
    # in the simulator: one linear op with k = 64 on a device of 1 multiprocessor runs at half the rate
    g = chain(1, b=128, f=64, width=128)
    c = cluster(per_node=1)
    c.device.gemm_k_half, c.device.sm_count = 64.0, 1
    r = Simulator(g, c).simulate([cfg(g, "x"), cfg(g, "l0")])
    assert r.iteration_s == pytest.approx(3 * 2 * 128 * 64 * 128 / (PEAK * 0.5))


def test_replicated_op_computes_whole_on_each_copy_and_feeds_local_consumers():
    from autotune.search_spaces.parallel import strategy as st

    g = chain(2, width=16)
    c = cluster(per_node=2)
    flops = 2 * 8 * 16 * 16
    # l0 whole on both devices; l1 split by samples over them: each half is already local
    s = [OpConfig((1,), 0, replicas=2), OpConfig((1, 1, 1), 0, replicas=2), cfg(g, "l1", a0=2)]
    sim = Simulator(g, c)
    r = sim.simulate(s)
    gs = grad_sync(2, 16 * 16 * 4)  # l1's weight gradient, all-reduced after its backward
    assert r.iteration_s == pytest.approx(flops / PEAK + 3 * flops / 2 / PEAK + gs)
    weights = 16 * 16 * 16
    assert np.all(r.memory >= weights)  # both copies hold l0's weights
    # round trip through JSON keeps the copies; a block that does not fit is refused
    assert st.from_json(g, st.to_json(g, s, 2), 2) == s
    assert "copies" in st.check_config(g.ops[1], OpConfig((1, 1, 1), 0, replicas=4), 2)


def test_attention_internals_are_stored_unless_recomputed():
    """Without recomputation each layer also stores its attention's softmax output, dropout output and mask:
    (2 x 2 + 1) bytes x b x heads x s^2 in fp16 (Korthikanti et al.'s 5 a s^2 b); selective recomputation
    drops that and the attention's output (b x s x hidden in fp16, recomputed with it) but for the one layer
    whose backward runs, which holds them again; data parallelism over 4 devices holds a quarter on each."""
    from autotune.search_spaces.parallel.models import transformer

    cl = cluster(per_node=4)
    b, layers, heads, s = 8, 3, 4, 64
    mem = {}
    for mode in ("none", "selective", "full"):
        g = transformer("tiny", b, layers, 64, heads, s, 128, recompute=mode)
        mem[mode] = Simulator(g, cl).simulate(data_parallel(g, cl)).memory
    internals = (5 * b * heads * s * s + 2 * b * s * 64) / 4
    assert np.allclose(mem["none"] - mem["selective"], (layers - 1) * internals)
    # full recomputation stashes each layer's input alone and holds one layer's activations during its backward
    per_layer = (mem["none"] - mem["full"]) / (layers - 1)
    assert np.all(per_layer > internals) and np.all(mem["full"] < mem["selective"])


def test_a_recomputed_layer_split_over_blocks_holds_its_whole_working_set():
    """Megatron's strategy on 16 devices at a batch of 2: a layer's tensor-parallel ops span 4 devices and its
    replicated ones all 16, so each device holds, during the layer's recomputed backward, the sum of its shares
    of every op of that layer (then the largest layer's)."""
    from autotune.runners.simulator.memory import device_memory, op_share
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import transformer
    from autotune.search_spaces.parallel.strategy import megatron

    cl = get_cluster("dgx-a100-x2")
    g = transformer("t", 2, 8, 256, 8, 128, 1024, recompute="full")
    s = megatron(g, cl, 2, 1)
    assert len({(c.start, c.span) for op, c in zip(g.ops, s) if op.layer == 0}) > 1
    sim = Simulator(g, cl)
    shares = [op_share(g, op, c, 0) for op, c in zip(g.ops, s)]
    parts = [mem for mem, _ in shares]
    kept = [sim._kept(i, s, reduced) for i, (_, reduced) in enumerate(shares)]  # of a reduce-scattered output
    per_layer = {}
    for op, c, part, scale in zip(g.ops, s, parts, kept):
        per_layer.setdefault(op.layer, np.zeros(cl.devices))[c.start:c.start + c.span] += part[3] * scale
    working = np.max(list(per_layer.values()), axis=0)
    stashed_only = device_memory(g, s, [(w, a, full, 0.0) for w, a, full, _ in parts], kept, cl.devices, 1)
    assert working.max() > 0
    assert np.allclose(sim.memory(s) - stashed_only, working)


@pytest.mark.parametrize("zero, per_param", [(0, 16), (1, 4 + 12 / 4), (2, 2 + 14 / 4), (3, 16 / 4)])
def test_zero_stages_shard_optimizer_state_gradients_and_weights(zero, per_param):
    """One fp16 layer (2-byte weights and gradients, 12 bytes of fp32 master weight and Adam moments per
    parameter), data parallel on 4 devices: ZeRO stage 1 shards the 12 bytes, 2 the gradient too, 3 all 16;
    stage 3 holds the layer's gathered fp16 weights (twice when prefetched: computing, and the next
    gathered during it); stage 3 reduce-scatters the gradient (a ring of
    the weight's bytes) instead of all-reducing it, and gathers the weight before the forward and the
    backward."""
    g = Builder("fp16", 8, dtype_bytes=2)
    x = g.input("x", {"b": 8, "f": 64}, {"b": "sample", "f": None})
    g.linear(x, 64, "l0")
    g = g.build(state_bytes_per_param=16)
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4)]
    sim = Simulator(g, cluster(per_node=4), zero=zero)
    r = sim.simulate(s)
    acts = (8 * 64 + 8 * 64) * 2 / 4
    gathered = 64 * 64 * 2 if zero == 3 else 0
    assert r.memory[0] == pytest.approx(64 * 64 * per_param + acts + gathered)
    if zero == 3:
        prefetched = Simulator(g, cluster(per_node=4), zero=zero, zero_prefetch=True).simulate(s).memory[0]
        assert prefetched == pytest.approx(64 * 64 * per_param + acts + 2 * gathered)
    else:  # only ZeRO-3 gathers weights
        with pytest.raises(ValueError, match="zero=3"):
            Simulator(g, cluster(per_node=4), zero=zero, zero_prefetch=True)
    gather = nccl.allgather_time(4, 64 * 64 * 2, INTRA, latency_scale=LATENCY_SCALE)
    assert sim.dur[sim.GS[1]] == pytest.approx(gather if zero == 3 else grad_sync(4, 64 * 64 * 2))
    assert (sim.dur[sim.WF[1]] == sim.dur[sim.WB[1]] == gather) if zero == 3 else sim.WF == sim.WB == []


def test_a_prefetched_gather_runs_during_the_weighted_op_before_it_in_every_micro_batch():
    """On demand, layer 2's gather starts when layer 1's forward ends; prefetched, when layer 1's starts, and
    ends before it would have. In a transformer the gather of a layer's first GEMM runs during the previous
    layer's last GEMM, past the weightless ops between (not before that GEMM's inputs are ready). With
    micro-batches the prefetched gathers also hide behind each steady step's compute."""
    from autotune.search_spaces.parallel.models import transformer

    def spans(sim, s):
        out = {}
        for _, a, b, name in sim.simulate(s, timeline=True).timeline:
            out.setdefault(name, (a, b))
        return out

    g = chain(4, b=8192, f=256, width=256)
    s = [cfg(g, "x", b=4)] + [cfg(g, f"l{i}", a0=4) for i in range(4)]
    lazy = spans(Simulator(g, cluster(per_node=4), zero=3), s)
    eager = spans(Simulator(g, cluster(per_node=4), zero=3, zero_prefetch=True), s)
    assert lazy["WF l2"][0] >= lazy["F l1"][1]
    assert eager["F l1"][0] <= eager["WF l2"][0] < eager["F l1"][1]
    g = chain(4, b=65536, f=64, width=64)  # compute longer than each gather: one op ahead, no further
    s = [cfg(g, "x", b=4)] + [cfg(g, f"l{i}", a0=4) for i in range(4)]
    eager = spans(Simulator(g, cluster(per_node=4), zero=3, zero_prefetch=True), s)
    assert eager["F l1"][0] <= eager["WF l2"][0] < eager["F l1"][1] <= eager["WF l3"][0]
    cl = cluster(per_node=4)
    t = transformer("tiny", 8, 2, 256, 4, 64, 512, recompute="full")
    eager = spans(Simulator(t, cl, zero=3, zero_prefetch=True), data_parallel(t, cl))
    assert eager["F l0.fc1"][1] <= eager["WF l1.qkv"][0] < eager["F l0.fc2"][1]
    for m in (1, 4):  # the same samples in m micro-batches
        gm = chain(4, b=8192 // m, f=256, width=256)
        sm = [cfg(gm, "x", b=4)] + [cfg(gm, f"l{i}", a0=4) for i in range(4)]
        saved = (Simulator(gm, cluster(per_node=4), zero=3, microbatches=m).simulate(sm).iteration_s
                 - Simulator(gm, cluster(per_node=4), zero=3, microbatches=m, zero_prefetch=True).simulate(sm).iteration_s)
        if m > 1:  # each steady step hides its compute (under its gathers, here the longer)
            assert saved >= (m - 1) * 4 * 3 * 2 * (2048 // m) * 256 * 256 / PEAK


def test_zero_3_gathers_every_micro_batchs_weights_and_waits_for_them_unless_prefetched():
    """ZeRO-3 gathers an op's weights before its forward and its backward in every micro-batch and
    reduce-scatters each micro-batch's gradients. Fetched on demand, each op's compute waits for its own
    gather: one micro-batch takes the forward and backward compute plus at least the 8 gathers (the 4
    reduce-scatters may overlap the backward's compute, not the link the gathers use). With prefetch an op's
    gather runs during the op before it, which hides most of the forward's and the backward's gathers."""
    g = chain(4, b=8192, f=256, width=256)
    s = [cfg(g, "x", b=4)] + [cfg(g, f"l{i}", a0=4) for i in range(4)]
    gather = nccl.allgather_time(4, 256 * 256 * 4, INTRA, latency_scale=LATENCY_SCALE)
    layer = 2 * 2048 * 256 * 256 / PEAK  # one layer's forward on a quarter of the samples
    compute = 4 * 3 * layer  # four layers, forward and backward (2x)
    on_demand = Simulator(g, cluster(per_node=4), zero=3).simulate(s).iteration_s
    assert compute + 8 * gather <= on_demand <= compute + 12 * gather * 1.0001
    prefetched = Simulator(g, cluster(per_node=4), zero=3, zero_prefetch=True).simulate(s).iteration_s
    assert prefetched < on_demand - 6 * min(gather, layer)
    assert Simulator(g, cluster(per_node=4)).simulate(s).iteration_s < prefetched
    two = Simulator(g, cluster(per_node=4), zero=3, microbatches=2)
    two.simulate(s)
    assert two.dur[two.GS[1]] == pytest.approx(2 * gather) and two.dur[two.WF[1]] == pytest.approx(gather)
    recomputed = chain(1, b=8, f=256, width=256)
    recomputed.recompute, recomputed.ops[1].keep = True, False  # its forward recomputed in the backward
    sim = Simulator(recomputed, cluster(per_node=4), zero=3)
    sim.simulate([cfg(recomputed, "x", b=4), cfg(recomputed, "l0", a0=4)])
    assert sim.dur[sim.WB[1]] == pytest.approx(2 * sim.dur[sim.WF[1]])  # the recomputed forward gathers again


def test_zero_stage_1_keeps_a_bf16_optimizers_fp32_gradients_whole():
    """DeepSpeed's BF16 optimizer under ZeRO stage 1: of the 16 bytes of mixed-precision Adam state beyond
    the bf16 weight and gradient, its 4-byte fp32 gradients stay whole on each of the 4 ranks and only the
    fp32 weights and moments (12) are sharded; other stages and stage 1 without it are unchanged."""
    g = Builder("bf16", 8, dtype_bytes=2)
    x = g.input("x", {"b": 8, "f": 64}, {"b": "sample", "f": None})
    g.linear(x, 64, "l0")
    g = g.build(state_bytes_per_param=20)
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4)]
    acts = (8 * 64 + 8 * 64) * 2 / 4

    def weights(zero, whole):
        return Simulator(g, cluster(per_node=4), zero=zero, whole_grad_bytes=whole).simulate(s).memory[0] - acts

    assert weights(1, 4.0) == pytest.approx(64 * 64 * (2 + 2 + 4 + 12 / 4))
    assert weights(1, 0.0) == pytest.approx(64 * 64 * (2 + 2 + 16 / 4))
    assert weights(0, 4.0) == weights(0, 0.0) == pytest.approx(64 * 64 * 20)
    assert weights(2, 4.0) == weights(2, 0.0)


def test_a_bf16_optimizer_accumulates_each_micro_batchs_gradients_in_fp32():
    """DeepSpeed's BF16 optimizer (``whole_grad_bytes``: its fp32 gradients) adds each micro-batch's bf16
    gradients into them after the backward: it casts the gradient to an fp32 copy and adds that in. Per weight
    that streams 2 + 4 + 4 + 4 + 4 bytes at the device's memory bandwidth, in two kernels, in every
    micro-batch's backward. Nothing is added without it (fp16 accumulation in the gradient itself), under ZeRO
    stages 2 and 3 (DeepSpeed's ZeRO optimizer, not the BF16 one) or for a model already in fp32."""
    import dataclasses

    def build(dtype_bytes):
        g = Builder("m", 8, dtype_bytes=dtype_bytes)
        x = g.input("x", {"b": 8, "f": 64}, {"b": "sample", "f": None})
        g.linear(x, 64, "l0")
        return g.build(state_bytes_per_param=20 if dtype_bytes == 2 else 12)

    cl = cluster(per_node=4)
    cl.device = dataclasses.replace(cl.device, mem_bandwidth=1e9, launch_s=1e-6)

    def backward(g, whole, zero=1):
        sim = Simulator(g, cl, microbatches=3, zero=zero, whole_grad_bytes=whole)
        iteration = sim.simulate([cfg(g, "x", b=4), cfg(g, "l0", a0=4)]).iteration_s
        return sim.dur[sim.B[1]], iteration

    bf16 = build(2)
    extra = 64 * 64 * (2 + 4 * 4) / 1e9 + 2e-6
    (b0, i0), (b1, i1) = backward(bf16, 0.0), backward(bf16, 4.0)
    assert b1 == pytest.approx(b0 + extra) and i1 == pytest.approx(i0 + 3 * extra)  # once per micro-batch
    assert backward(bf16, 4.0, zero=0)[0] == pytest.approx(b1)
    assert backward(bf16, 4.0, zero=2) == backward(bf16, 0.0, zero=2)
    assert backward(build(4), 4.0) == backward(build(4), 0.0)


def test_eager_kernels_cost_more_than_fused_ones_and_are_kept_by_rebuild():
    """The same GPT with Megatron-LM 2019's separate elementwise kernels (more passes over the attention
    scores, head transposes by copies, dropout and residual add apart) takes longer than with fused kernels
    on a device with finite memory bandwidth; rebuilding the graph at another batch keeps its kernels."""
    from autotune.errors import UsageError
    from autotune.search_spaces.parallel.models import rebuild, transformer

    dev = DeviceSpec("toy", PEAK, PEAK, 1e12, 1e11, gemm_efficiency=1.0, launch_s=1e-6)
    cl = Cluster("toy", 1, 1, dev, INTRA, LAT_I, INTER, LAT_N)
    t = {}
    for kernels in ("fused", "eager"):
        g = transformer("tiny", 2, 2, 64, 4, 64, 128, kernels=kernels)
        t[kernels] = Simulator(g, cl).simulate(data_parallel(g, cl)).iteration_s
        assert rebuild(g)(4).meta["kernels"] == kernels
    assert t["eager"] > t["fused"]
    with pytest.raises(UsageError, match="kernels must be one of"):
        transformer("tiny", 2, 2, 64, 4, 64, 128, kernels="triton")


def test_a_layer_stores_what_megatron_stores_for_its_backward():
    """One more GPT layer on one device without recomputation adds its weights with their gradient and Adam
    state (Megatron-LM's 20 bytes x 12 h^2: fp16 weight and gradient, fp32 main weight, main gradient and
    two moments) and the activations Korthikanti et al. (2022) count for a layer in fp16:
    34 s b h + 5 a s^2 b bytes (layer norm and linear inputs, Q, K, V, the GELU's input and output, the
    softmax output, the dropout outputs and byte masks)."""
    from autotune.search_spaces.parallel.models import transformer

    b, h, a, s = 2, 64, 4, 32
    cl = cluster(per_node=1)
    mem = [Simulator(g, cl).simulate(data_parallel(g, cl)).peak_memory
           for g in (transformer("t", b, layers, h, a, s, 128) for layers in (2, 3))]
    assert mem[1] - mem[0] == pytest.approx(20 * 12 * h * h + 34 * s * b * h + 5 * a * s * s * b)
