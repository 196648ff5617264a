"""The simulator's communication and pipeline timing against hand-computed times on small graphs: activations
sent between devices (once over the network to copies on another node, then shared on their links), gradient
all-reduces (NCCL's ring, the cheaper of ring and hierarchical across nodes, sparse for embeddings),
Megatron's tensor-parallel all-reduces and sequence parallelism's reduce-scatters, expert parallelism's
all-to-alls, ZeRO-3's gathers on lists of per-rank tensors; pipelines of micro-batches (the fill and drain,
1F1B against interleaved schedules, the activations stashed while micro-batches are in flight), how
Megatron-LM's baseline cuts a model into stages and places its loss; and overlap: gradient syncs during the
backward or after it, and the optimizer step after the whole backward either way."""

import math

import numpy as np
import pytest
from simulator_helpers import INTER, INTRA, LAT_I, LAT_N, PEAK, cfg, chain, cluster, grad_sync

from autotune.runners.simulator import nccl
from autotune.runners.simulator.engine import Simulator
from autotune.search_spaces.parallel.clusters import Cluster, DeviceSpec
from autotune.search_spaces.parallel.graph import Builder
from autotune.search_spaces.parallel.strategy import OpConfig, data_parallel


def test_chain_on_two_devices_pays_two_transfers():
    g = chain(2, width=16)
    s = [cfg(g, "x"), cfg(g, "l0", start=0), cfg(g, "l1", start=1)]
    r = Simulator(g, cluster(per_node=2)).simulate(s)
    flops = 2 * 8 * 16 * 16
    transfer = 8 * 16 * 4 / INTRA + LAT_I  # activation forward, its gradient backward
    assert r.iteration_s == pytest.approx(2 * 3 * flops / PEAK + 2 * transfer)
    # on one device there is no transfer
    r1 = Simulator(g, cluster(per_node=2)).simulate([cfg(g, "x"), cfg(g, "l0"), cfg(g, "l1")])
    assert r1.iteration_s == pytest.approx(2 * 3 * flops / PEAK)


def test_data_parallel_ring_allreduce():
    g = chain(1, b=8, f=64, width=64)
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4)]
    r = Simulator(g, cluster(per_node=4)).simulate(s)
    flops = 2 * 8 * 64 * 64 / 4
    wbytes = 64 * 64 * 4
    ring = grad_sync(4, wbytes)  # NCCL's ring (its protocols: tests/runners/test_nccl.py), bucketed
    assert ring > 2 * 3 / 4 * wbytes / INTRA  # no faster than the link allows
    assert r.iteration_s == pytest.approx(3 * flops / PEAK + ring)


def test_data_parallel_across_nodes_takes_the_cheaper_of_ring_and_hierarchical():
    g = chain(1, b=8, f=64, width=64)
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4)]
    r = Simulator(g, cluster(nodes=2, per_node=2)).simulate(s)
    wbytes = 64 * 64 * 4
    c = cluster()
    intra, inter = INTRA * c.bus_efficiency, INTER * c.net_efficiency  # what NCCL's Simple protocol reaches
    flat = grad_sync(4, wbytes, inter, efficiency=1, nodes=2)  # one ring: the network is the slower
    hier = grad_sync(2, wbytes, intra, efficiency=1) + grad_sync(2, wbytes, inter, efficiency=1, nodes=2)
    assert flat != hier
    assert r.iteration_s == pytest.approx(3 * 2 * 8 * 64 * 64 / 4 / PEAK + min(flat, hier))


def test_megatron_pair_needs_only_the_output_allreduce():
    g = chain(2, b=8, f=64, width=64)
    s = [cfg(g, "x"), cfg(g, "l0", o=2), cfg(g, "l1", i=2)]
    sim = Simulator(g, cluster(per_node=2))
    r = sim.simulate(s)
    flops = 2 * 8 * 64 * 64 / 2
    out_ar = nccl.allreduce_time(2, 8 * 64 * 4, INTRA)
    x_to_l0 = 8 * 64 * 4 / INTRA + LAT_I  # the input lives on device 0; device 1 needs a copy
    # forward: x->l0 copy, l0, l1, all-reduce of l1's partial sums; backward: l1, l0 (x is data:
    # neither an input-gradient all-reduce nor a gradient sent back)
    expected = x_to_l0 + flops / PEAK * 2 + out_ar + 2 * flops / PEAK * 2
    assert r.iteration_s == pytest.approx(expected)
    e = g.edges.index((1, 2, 0))
    assert sim.dur[sim.X[e]] == 0.0  # l1's input slices are on the devices that produced them


def test_embedding_gradients_are_synchronised_sparsely():
    g = Builder("emb", 8)
    ids = g.input("ids", {"b": 8}, {"b": "sample"})
    g.embedding(ids, 100_000, 4, "emb")
    g = g.build(state_bytes_per_param=16)
    r = Simulator(g, cluster(per_node=4)).simulate(data_parallel(g, cluster(per_node=4)))
    looked_up = 8 * 4 * 4  # every sample's row (4 floats) from each of the 4 replicas, not the 1.6 MB table
    assert r.iteration_s == pytest.approx(grad_sync(4, looked_up))


def test_pipeline_of_two_stages_streams_microbatches_at_the_busiest_stage_rate():
    g = chain(2, width=16)  # each "micro-batch" is the chain's batch of 8
    flops = 2 * 8 * 16 * 16
    f = flops / PEAK
    x = 8 * 16 * 4 / INTRA + LAT_I  # l0's output to the other device, and its gradient back
    s = [cfg(g, "x"), cfg(g, "l0", start=0), cfg(g, "l1", start=1)]
    one = Simulator(g, cluster(per_node=2)).simulate(s).iteration_s
    assert one == pytest.approx(6 * f + 2 * x)
    r = Simulator(g, cluster(per_node=2), microbatches=4).simulate(s)
    # the first micro-batch fills and drains the pipeline; three more follow, one per busiest-stage time
    assert r.iteration_s == pytest.approx(6 * f + 2 * x + 3 * (3 * f + 2 * x))
    # gradient accumulation on one device: micro-batches run back to back
    whole = [cfg(g, "x"), cfg(g, "l0"), cfg(g, "l1")]
    assert Simulator(g, cluster(per_node=2), microbatches=4).simulate(whole).iteration_s == pytest.approx(4 * 6 * f)


def test_pipeline_stashes_activations_of_micro_batches_in_flight():
    g = chain(2, width=16)
    s = [cfg(g, "x"), cfg(g, "l0", start=0), cfg(g, "l1", start=1)]
    weights = 16 * 16 * 16
    act = 8 * 16 * 4
    for m, in_flight in ((1, 1), (2, 2), (8, 2)):  # two stages: the first holds up to two micro-batches,
        mem = Simulator(g, cluster(per_node=2), microbatches=m).simulate(s).memory
        assert mem[0] == pytest.approx(weights + in_flight * 2 * act)  # the input and l0's output
        assert mem[1] == pytest.approx(weights + act)  # the last one only the micro-batch it is running (1F1B)


def test_interleaved_pipeline_stashes_more_on_the_first_stage():
    """Megatron-LM's interleaved schedule: with v chunks per stage, the first of S stages runs
    2 (S - 1) + (v - 1) S chunk forwards before its first backward, so it holds (1 + (S - 1) / (S v)) times
    its layers' worth of activations (Korthikanti et al.), against exactly that worth (S micro-batches of
    1/S of the layers) without interleaving. Here S = 4, v = 2, 8 micro-batches: 5.5 against 4 micro-batches'
    worth of the first stage's layers, 4.5 against 3 beyond a single micro-batch's."""
    from autotune.search_spaces.parallel.strategy import megatron

    g = chain(8, b=8, f=16, width=16)
    cl = cluster(per_node=4)
    extra = {}
    for v in (1, 2):
        s = megatron(g, cl, tensor=1, pipeline=4, virtual=v)
        sim = Simulator(g, cl, microbatches=8)
        assert sim.virtual_stages(s) == v
        extra[v] = sim.simulate(s).memory[0] - Simulator(g, cl, microbatches=1).simulate(s).memory[0]
    assert extra[1] > 0 and extra[2] / extra[1] == pytest.approx(4.5 / 3)


def test_megatron_pipeline_baseline_cuts_layers_into_stage_blocks():
    from autotune.search_spaces.parallel.strategy import megatron

    g = chain(4, b=8, f=16, width=16)
    s = megatron(g, cluster(per_node=2, nodes=2), tensor=2, pipeline=2)
    starts = [cfg.start for cfg in s[1:]]
    assert starts == [0, 0, 2, 2] and all(cfg.span == 2 for cfg in s[1:])


def test_megatron_pipeline_stages_hold_whole_layers_with_the_embedding_first_and_the_head_last():
    """Megatron-LM cuts a transformer into stages of as many layers each; the embedding rides on the first,
    the final norm, head and loss on the last, however their FLOPs would balance."""
    from autotune.search_spaces.parallel.models import transformer
    from autotune.search_spaces.parallel.strategy import megatron

    g = transformer("gpt", 4, 6, 64, 4, 32, 4096)
    cl = cluster(per_node=2, nodes=3)
    stage_of = {op.name: cfg.start // 2 for op, cfg in zip(g.ops, megatron(g, cl, tensor=2, pipeline=3))}
    assert {stage_of[n] for n in ("tokens", "embed", "l0.ln1", "l1.add2")} == {0}
    assert {stage_of[n] for n in ("l2.ln1", "l3.add2")} == {1}
    assert {stage_of[n] for n in ("l4.ln1", "l5.add2", "ln_f", "lm_head")} == {2}
    interleaved = megatron(g, cl, tensor=2, pipeline=3, virtual=2)  # 6 chunks of one layer, round-robin
    stage_of = {op.name: cfg.start // 2 for op, cfg in zip(g.ops, interleaved)}
    assert [stage_of[f"l{i}.qkv"] for i in range(6)] == [0, 1, 2, 0, 1, 2] and stage_of["lm_head"] == 2


def test_megatron_computes_each_replicas_loss_on_its_own_tensor_parallel_group():
    """Megatron-LM's cross-entropy is vocab-parallel, each replica's on that replica's tensor-parallel group:
    with fewer sequences per micro-batch than a stage has devices the loss must not sit on the stage's first
    devices (whose node would take in every replica's logits), and its share per rank is 1/t."""
    from autotune.search_spaces.parallel.models import transformer
    from autotune.search_spaces.parallel.strategy import megatron

    g = transformer("gpt", 2, 4, 64, 4, 32, 4096)  # 2 sequences per micro-batch: one per replica
    cl = cluster(per_node=2, nodes=4)  # t = 2, p = 2, d = 2: a stage of 4 devices on two nodes
    s = megatron(g, cl, tensor=2, pipeline=2)
    head, loss = (s[g.index[n]] for n in ("lm_head", "loss"))
    assert (loss.start, loss.span) == (head.start, head.span) == (4, 4)  # the whole last stage, not 2 of it
    deg = dict(zip(g.ops[g.index["loss"]].parallel_dims, loss.degrees))
    assert sorted(deg.values()) == [2, 2] and loss.replicas == 1  # a sequence per replica, half of it per rank


@pytest.mark.parametrize("name", ["nmt", "rnnlm"])
def test_a_loss_with_no_sequence_to_share_out_stays_split_over_its_samples(name):
    """A loss over a vocabulary head whose rows are whole samples (no sequence dimension) is not placed as a
    vocab-parallel loss: replicated on every tensor-parallel rank, each rank would take in every logit."""
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model
    from autotune.search_spaces.parallel.strategy import megatron

    g = get_model(name)
    loss = next(cfg for op, cfg in zip(g.ops, megatron(g, get_cluster("dgx-a100-x1"), tensor=8))
                if op.type == "softmax_loss")
    assert loss.degrees == (8,) and loss.replicas == 1


def test_copies_on_another_node_take_a_tensor_over_the_network_once_and_share_it_on_their_links():
    """A producer on node 0 and a consumer copied on the 4 devices of node 1 (as Megatron's pipeline
    stages run layer norms on every tensor-parallel rank): the tensor crosses the network once, then the
    copies all-gather it over their own links (each receives 3/4 of it)."""
    from autotune.runners.simulator.costs import transfer

    g = chain(2, width=16)
    cl = cluster(nodes=2, per_node=4)
    src, dst = g.ops[g.index["l0"]], g.ops[g.index["l1"]]
    nbytes = 8 * 16 * 4
    t, res, moved = transfer(src, OpConfig((1, 1, 1), 0), dst, OpConfig((1, 1, 1), 4, replicas=4), dst.inputs[0][1],
                             cl, 4)
    assert moved == pytest.approx(4 * nbytes)  # every copy gets the whole tensor...
    assert t == pytest.approx(max(nbytes / INTER + LAT_N, 0.75 * nbytes / INTRA + LAT_I))
    assert set(res.tolist()) >= {2 * 8 + 0, 2 * 8 + 1} and set(res.tolist()) >= {8 + d for d in range(4, 8)}
    # ...where four separate fetches would have sent it four times over node 1's port
    t4 = 4 * nbytes / INTER + LAT_N
    assert t < t4 / 2


def test_without_overlap_the_gradient_all_reduces_follow_the_whole_backward():
    """Two data-parallel layers on 4 devices: overlapped, the last layer's gradient all-reduce runs during
    the first layer's backward; without overlap (Megatron-LM 2019) both follow the backward."""
    g = chain(2, b=8, f=64, width=64)
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4), cfg(g, "l1", a0=4)]
    compute = 2 * 3 * 2 * 8 * 64 * 64 / 4 / PEAK
    ring = grad_sync(4, 64 * 64 * 4)
    serial = Simulator(g, cluster(per_node=4), overlap=False).simulate(s).iteration_s
    assert serial == pytest.approx(compute + 2 * ring)
    overlapped = Simulator(g, cluster(per_node=4)).simulate(s).iteration_s
    assert overlapped < serial - 0.5 * min(ring, compute / 3)


def test_interleaved_stages_cut_the_pipeline_fill_and_drain():
    """Four equal layers on two devices, 4 micro-batches, transfers free: 1F1B takes (M + p - 1) stage
    steps; with the layers placed round-robin (2 virtual stages per device) (M + (p - 1) / 2)."""
    from autotune.search_spaces.parallel.strategy import megatron

    g = chain(4, b=8, f=64, width=64)
    dev = DeviceSpec("toy", PEAK, PEAK, 1e12, math.inf, gemm_efficiency=1.0, launch_s=0.0)
    cl = Cluster("fast links", 1, 2, dev, 1e18, 0.0, 1e18, 0.0)
    layer = 3 * 2 * 8 * 64 * 64 / PEAK  # forward and backward of one layer
    for v, steps in ((1, 4 + 1), (2, 4 + 0.5)):
        s = megatron(g, cl, tensor=1, pipeline=2, virtual=v)
        assert [c.start for c in s[1:]] == ([0, 0, 1, 1] if v == 1 else [0, 1, 0, 1])
        sim = Simulator(g, cl, microbatches=4, overlap=True)
        assert sim.virtual_stages(s) == v
        assert sim.simulate(s).iteration_s == pytest.approx(steps * 2 * layer, rel=1e-6)


def test_with_micro_batches_overlapped_gradient_syncs_hide_behind_the_last_backward():
    """Two data-parallel layers, 4 micro-batches: by default (Megatron-LM) both gradient all-reduces follow
    the last micro-batch's backward; overlapped (``--overlap-grad-reduce``), the second layer's runs during
    the first layer's backward, so only the first layer's is exposed."""
    g = chain(2, b=65536, f=64, width=64)  # enough work per layer to hide a gradient all-reduce
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4), cfg(g, "l1", a0=4)]
    per_microbatch = 2 * 3 * 2 * 65536 * 64 * 64 / 4 / PEAK
    ring = grad_sync(4, 64 * 64 * 4)
    default = Simulator(g, cluster(per_node=4), microbatches=4).simulate(s).iteration_s
    assert default == pytest.approx(4 * per_microbatch + 2 * ring)
    assert Simulator(g, cluster(per_node=4), microbatches=4, overlap=False).simulate(s).iteration_s == default
    overlapped = Simulator(g, cluster(per_node=4), microbatches=4, overlap=True).simulate(s).iteration_s
    l0_backward = 2 * 2 * 65536 * 64 * 64 / 4 / PEAK
    assert ring < l0_backward  # so the second layer's all-reduce hides entirely
    assert overlapped == pytest.approx(4 * per_microbatch + ring)
    # with one micro-batch the default is overlapped (PyTorch DDP)
    one = Simulator(g, cluster(per_node=4)).simulate(s).iteration_s
    assert one == Simulator(g, cluster(per_node=4), overlap=True).simulate(s).iteration_s


def test_sequence_parallelism_turns_all_reduces_into_reduce_scatters_and_slices_the_stash():
    """A two-layer GPT on 4 devices, tensor parallel over all 4: with sequence parallelism the layer norms and
    residual adds split along the sequence, so the all-reduce after each row-parallel projection (and of the
    input gradient before each column-parallel one) only leaves each device its quarter: half the time; each
    device stores a quarter of those ops' outputs; the iteration is faster and takes less memory."""
    from autotune.search_spaces.parallel.models import transformer
    from autotune.search_spaces.parallel.strategy import megatron

    g = transformer("tiny", 1, 2, 64, 4, 64, 128, recompute="none")
    cl = cluster(per_node=4)
    runs = {}
    for sp in (False, True):
        s = megatron(g, cl, tensor=4, sequence=sp)
        ln = s[g.index["l0.ln1"]]
        assert (ln.parts, ln.replicas) == ((4, 1) if sp else (1, 4))
        sim = Simulator(g, cl, tp_overlap=False)  # each input-gradient reduction in full
        runs[sp] = (sim.simulate(s), sim)
    (plain, sp_plain), (seq, sp_seq) = runs[False], runs[True]
    for name in ("l0.proj", "l0.fc2"):
        i = g.index[name]
        assert sp_plain.dur[sp_plain.AO[i]] > 0
        assert sp_seq.dur[sp_seq.AO[i]] == pytest.approx(sp_plain.dur[sp_plain.AO[i]] / 2)
    qkv = g.index["l0.qkv"]
    assert sp_seq.dur[sp_seq.AI[qkv][0]] == pytest.approx(sp_plain.dur[sp_plain.AI[qkv][0]] / 2)
    assert seq.iteration_s < plain.iteration_s and seq.peak_memory < plain.peak_memory


def test_tp_overlap_hides_input_gradient_reductions_behind_the_weight_gradient():
    """Megatron-LM's asynchronous tensor-parallel all-reduce (and sequence parallelism's reduce-scatter): the
    input-gradient reduction of a column-parallel layer starts once that input gradient is computed and runs
    beside the weight-gradient GEMM (half the backward's FLOPs), so only what outlasts that GEMM is left: on
    the toy devices the collective outlasts it, on devices 10,000 times slower it hides."""
    from dataclasses import replace

    from autotune.search_spaces.parallel.models import transformer
    from autotune.search_spaces.parallel.strategy import megatron

    g = transformer("tiny", 1, 2, 64, 4, 64, 128, recompute="none")
    for peak, hides in ((PEAK, False), (PEAK / 1e4, True)):
        cl = cluster()
        cl.device = replace(cl.device, flops_fp32=peak, flops_fp16=peak)
        for sp in (False, True):
            s = megatron(g, cl, tensor=4, sequence=sp)
            plain, hidden = Simulator(g, cl, tp_overlap=False), Simulator(g, cl)
            slow, fast = plain.simulate(s).iteration_s, hidden.simulate(s).iteration_s
            for name in ("l0.qkv", "l0.fc1", "l1.qkv", "l1.fc1"):
                i = g.index[name]
                wgrad = g.ops[i].bwd_flops / 2 / 4 / peak  # the weight gradient's half, split 4 ways, at peak
                full = plain.dur[plain.AI[i][0]]
                assert full > 0 and (full < wgrad) == hides
                assert hidden.dur[hidden.AI[i][0]] == pytest.approx(max(0.0, full - wgrad))
            for i in range(len(g.ops)):  # the output all-reduces of the row-parallel layers stay as they were
                assert hidden.dur[hidden.AO[i]] == plain.dur[plain.AO[i]]
            assert fast < slow


def test_expert_parallelism_moves_routed_tokens_by_all_to_all():
    """A mixture of 4 experts (top-1, capacity 1) between two data-parallel layers on 4 devices, its experts
    split 4 ways: each device keeps a quarter of the expert weights, and tokens reach their expert by an
    all-to-all (each device sends and receives 3/16 of the activations: a quarter of its tokens to each of
    the 3 others), and come back by another; no all-reduce of outputs or input gradients."""
    g = Builder("moe", 8)
    x = g.input("x", {"b": 8, "s": 4, "h": 16}, {"b": "sample", "s": "attribute", "h": None})
    x = g.linear(x, 16, "l0")
    m = g.moe(x, 4, 32, "experts")
    g.linear(m, 16, "l1")
    g = g.build(state_bytes_per_param=16)
    base = [cfg(g, "x", b=4), cfg(g, "l0", a0=4), None, cfg(g, "l1", a0=4)]
    total = 8 * 4 * 16 * 4  # the activation in fp32
    sims = {}
    for split in (1, 4):
        s = list(base)
        s[2] = cfg(g, "experts", e=4) if split == 4 else cfg(g, "experts", a0=4)
        sim = Simulator(g, cluster(per_node=4))
        sims[split] = (sim.simulate(s), sim)
    (dp, sim_dp), (ep, sim_ep) = sims[1], sims[4]
    i = g.index["experts"]
    a2a = 3 / 16 * total / INTRA + LAT_I
    edges = {(g.ops[p].name, g.ops[c].name): e for e, (p, c, _) in enumerate(g.edges)}
    assert sim_ep.dur[sim_ep.X[edges["l0", "experts"]]] == pytest.approx(a2a)
    assert sim_ep.dur[sim_ep.X[edges["experts", "l1"]]] == pytest.approx(a2a)
    assert sim_dp.dur[sim_dp.X[edges["l0", "experts"]]] == 0.0  # data parallel: tokens stay where they are
    assert sim_ep.dur[sim_ep.AO[i]] == 0.0 and sim_ep.dur[sim_ep.AI[i][0]] == 0.0
    weights = 4 * (2 * 16 * 32 + 16) * 16  # 4 experts' parameters x 16 bytes of weight, gradient and state
    assert dp.peak_memory - ep.peak_memory == pytest.approx(weights * 3 / 4)  # the same tokens' outputs held


def test_the_optimizer_updates_follow_the_backward_even_when_the_gradient_syncs_overlap_it():
    """Four layers alternating over two devices (no data parallelism, so no gradient sync): a device's
    update of its later layer could run while it waits for the other device's backward, but an optimizer
    step waits for the whole backward (global gradient norm, loss-scale check), overlapped or not."""
    dev = DeviceSpec("toy", PEAK, PEAK, 1e12, 1e6, gemm_efficiency=1.0, launch_s=0.0)  # updates take time
    cl = Cluster("toy", 1, 2, dev, INTRA, LAT_I, INTER, LAT_N)
    g = chain(4, width=16)
    s = [cfg(g, "x")] + [cfg(g, f"l{i}", start=i % 2) for i in range(4)]
    sim = Simulator(g, cl, overlap=True)
    overlapped = sim.simulate(s).iteration_s
    assert overlapped == pytest.approx(Simulator(g, cl, overlap=False).simulate(s).iteration_s)
    in_the_gaps = sim._run(sim.dur, False)[0]  # every task as soon as its inputs are ready
    update = 16 * 16 * 16 * 2 / 1e6  # l1's weights x state bytes, read and written, at 1 MB/s
    assert overlapped > in_the_gaps + update / 2


def test_zero_3_list_collectives_copy_each_ranks_part():
    """Collectives on lists of per-rank tensors (DeepSpeed's ZeRO-3 of 2021 through PyTorch's NCCL process group
    of the time) add to each gather and reduce-scatter one copy kernel per rank of the group, which together read
    and write the whole weight once; nothing else changes, and only ZeRO-3 has such collectives."""
    g = chain(1, b=8, f=64, width=64)  # one fp32 64 x 64 weight
    s = [cfg(g, "x", b=4), cfg(g, "l0", a0=4)]
    dev = DeviceSpec("toy", PEAK, PEAK, 1e12, 1e9, gemm_efficiency=1.0, launch_s=1e-5)
    cl = Cluster("toy", 1, 4, dev, INTRA, LAT_I, INTER, LAT_N)
    plain, copied = Simulator(g, cl, zero=3), Simulator(g, cl, zero=3, zero_rank_copies=True)
    r_plain, r_copied = plain.simulate(s), copied.simulate(s)
    extra = 4 * 1e-5 + 2 * 64 * 64 * 4 / 1e9
    for tasks in ("WF", "WB", "GS"):
        task = getattr(plain, tasks)[1]
        assert copied.dur[task] == pytest.approx(plain.dur[task] + extra)
    assert r_copied.iteration_s >= r_plain.iteration_s + 2 * extra * 0.9999  # the compute waits for both gathers
    assert np.allclose(r_copied.memory, r_plain.memory)
    with pytest.raises(ValueError, match="zero=3"):
        Simulator(g, cl, zero=2, zero_rank_copies=True)
