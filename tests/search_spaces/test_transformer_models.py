"""Transformer stacks as models: Llama's shapes (grouped-query attention, SwiGLU, an untied head, no dropout),
FlashAttention, and how the simulator splits and syncs them."""

import json

import pytest

from autotune.errors import UsageError
from autotune.search_spaces.parallel import strategy as st
from autotune.search_spaces.parallel.clusters import get_cluster
from autotune.search_spaces.parallel.models import LLAMA, MODELS, get_model, llama, rebuild, transformer


@pytest.mark.parametrize("name,published", [("llama-2-7b", 6.738e9), ("llama-2-13b", 13.016e9),
                                            ("llama-2-70b", 68.977e9), ("llama-3-8b", 8.030e9),
                                            ("llama-3-70b", 70.554e9), ("llama-3-405b", 405.85e9)])
def test_llama_presets_have_metas_parameter_counts(name, published):
    """Grouped-query attention, SwiGLU and an untied head as Meta's model cards count them (no biases; the norms'
    weights, a few per layer, are not modelled)."""
    assert name in LLAMA and name in MODELS
    assert get_model(name, 1).parameters == pytest.approx(published, rel=2e-3)


def test_grouped_query_attention_and_a_gated_ffn_size_their_ops():
    """GQA narrows the qkv projection to the keys' and values' heads and leaves the attention core as it was;
    a gated block projects to twice the width with one weight, doubling fc1's FLOPs and what its backward keeps;
    an untied head gives the embedding its own table."""
    b, layers, h, heads, seq, vocab, ffn = 2, 2, 512, 8, 128, 1000, 1376
    mha = transformer("mha", b, layers, h, heads, seq, vocab, ffn=ffn)
    gqa = transformer("gqa", b, layers, h, heads, seq, vocab, kv_heads=2, ffn=ffn, gated=True, tied=False)
    op = {n: {o.name: o for o in g.ops} for n, g in (("mha", mha), ("gqa", gqa))}
    assert op["mha"]["l0.qkv"].weight_elems == h * 3 * h
    assert op["gqa"]["l0.qkv"].weight_elems == h * (h + 2 * 2 * h // heads)
    assert op["gqa"]["l0.attn"].flops == op["mha"]["l0.attn"].flops == 4.0 * b * seq * seq * h
    assert op["gqa"]["l0.fc1"].weight_elems == 2 * op["mha"]["l0.fc1"].weight_elems == 2 * h * ffn
    gemm = 2.0 * b * seq * h * ffn  # fc1's GEMM FLOPs without the activation's
    assert op["gqa"]["l0.fc1"].flops - op["mha"]["l0.fc1"].flops == pytest.approx(gemm)
    assert op["gqa"]["l0.fc1"].stash_bytes == 2 * op["mha"]["l0.fc1"].stash_bytes
    assert op["gqa"]["l0.fc2"].dims["i"] == op["mha"]["l0.fc2"].dims["i"] == ffn  # fc2 reads the product
    assert op["mha"]["embed"].weight_elems == 0 and op["gqa"]["embed"].weight_elems == vocab * h
    # the shape travels with the graph: rebuilt for another batch, and through JSON
    again = rebuild(gqa)(4)
    assert again.meta == {**gqa.meta, "recompute": again.meta["recompute"]} and again.batch == 4
    assert again.parameters == gqa.parameters
    assert st.Graph.from_json(json.loads(json.dumps(gqa.to_json()))).meta == gqa.meta
    assert "kv_heads" not in get_model("gpt-1.3b", 1).meta  # a GPT stack's record is what it was
    for bad in ({"kv_heads": 3}, {"kv_heads": 16}, {"ffn": 0}):
        with pytest.raises(UsageError, match="kv_heads dividing heads"):
            transformer("bad", b, layers, h, heads, seq, vocab, **bad)


def test_a_llama_trains_without_dropout_and_syncs_its_whole_embedding():
    """Without dropout the attention keeps only the softmax output for the backward and moves fewer [s, s]
    passes, and the residual adds keep no mask; an untied embedding's gradient is the whole table (Megatron's),
    so data parallelism all-reduces as much for it as for the head of the same size."""
    from autotune.runners.simulator import costs
    from autotune.runners.simulator.engine import Simulator

    shape = {"batch": 2, "layers": 1, "hidden": 512, "heads": 8, "seq": 256, "vocab": 4096, "ffn": 1536, "gated": True,
             "tied": False}
    on = transformer("on", **shape)
    off = transformer("off", **shape, dropout=False)
    def op(g, name):
        return g.ops[g.index[name]]

    att = {g.name: op(g, "l0.attn") for g in (on, off)}
    scores = 2 * 8 * 256 * 256  # b x heads x s x s
    assert att["on"].stash_bytes == 5 * scores and att["off"].stash_bytes == 2 * scores
    assert att["on"].mem_elems - att["off"].mem_elems == pytest.approx(2.5 * scores)
    assert op(on, "l0.add1").stash_bytes > 0 == op(off, "l0.add1").stash_bytes
    assert off.meta["dropout"] is False and "dropout" not in get_model("gpt-1.3b", 1).meta
    c = get_cluster("dgx-a100-x1")
    sim = Simulator(off, c)
    sim.simulate(st.data_parallel(off, c))
    sync = {n: sim.dur[sim.GS[off.index[n]]] for n in ("embed", "lm_head")}
    assert op(off, "embed").dense_grad and sync["embed"] == pytest.approx(sync["lm_head"], rel=1e-6)
    # a gated projection is one GEMM twice as wide: its shape factor is that GEMM's
    fc1 = op(off, "l0.fc1")
    part = dict(fc1.dims)
    m = part["a0"] * part["a1"]
    assert costs.shape_efficiency(fc1, part, 1, c.device) == pytest.approx(
        costs.gemm_efficiency(m, 2 * 1536, 512 + 8.0 * m * 1536 / (2.0 * m * 2 * 1536), 1, c.device))


def test_flash_attention_keeps_no_scores_and_computes_them_again():
    """kernels="flash": the scores never reach memory (no [s, s] pass, only each row's fp32 softmax normaliser
    kept), the backward computes them again (2.5 times the forward's FLOPs, not 2), one kernel; a shape spec
    names it, and a Llama preset runs it."""
    b, h, heads, s = 2, 512, 8, 1024
    fused, flash = (transformer(k, b, 1, h, heads, s, 1000, kernels=k) for k in ("fused", "flash"))
    att = {g.name: g.ops[g.index["l0.attn"]] for g in (fused, flash)}
    assert att["flash"].stash_bytes == 4 * b * heads * s < att["fused"].stash_bytes
    assert att["flash"].mem_elems == b * s * (3 * h + h) < att["fused"].mem_elems
    assert att["flash"].bwd_flops == 2.5 * att["flash"].flops and att["fused"].bwd_flops == 2 * att["fused"].flops
    assert att["flash"].kernels == 1 and att["flash"].post_elems == 0
    # selective recomputation recomputes an unfused attention core, never a flash one (nothing to spare)
    selective = {k: transformer(k, b, 1, h, heads, s, 1000, kernels=k, recompute="selective") for k in ("fused", "flash")}
    assert [g.ops[g.index["l0.attn"]].keep for g in selective.values()] == [False, True]
    assert get_model("gpt-1.3b:kernels=flash,layers=1", 1).meta["kernels"] == "flash"
    assert get_model("llama-3-8b", 1).meta["kernels"] == "flash"
    with pytest.raises(UsageError, match="kernels must be one of fused, eager, flash"):
        get_model("gpt-1.3b:kernels=triton")


def test_megatron_splits_a_llama_across_tensor_parallel_ranks():
    """Llama-2-70B's 8 key-value heads split over 8 tensor-parallel ranks like its 64 query heads: each rank's
    share of the weights is an eighth, and the layout simulates within memory on 16 nodes."""
    from autotune.runners.simulator.engine import Simulator

    g = llama("llama-2-70b", 8, recompute="full")
    c = get_cluster("dgx-a100-x16")
    s = st.megatron(g, c, 8, 8)
    r = Simulator(g, c, microbatches=16).simulate(s)
    assert r.fits and r.iteration_s > 0
