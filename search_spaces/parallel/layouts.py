"""Whole-model layouts of a parallel strategy space: every (tensor, pipeline, data) factorisation of the devices
with its micro-batch counts, interleaving, sequence parallelism and expert-parallel degrees
(:func:`every_layout`), and the ones a search measures first (:func:`seed_layouts`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.errors import UsageError
from autotune.search_spaces.parallel import strategy as st
from autotune.search_spaces.parallel.clusters import Cluster
from autotune.search_spaces.parallel.graph import Graph

SEED_MICRO_BATCH = (1, 2, 4, 8)  # samples per data-parallel replica and micro-batch of the seeded layouts


@dataclass(frozen=True)
class Layout:
    """A whole-model layout: tensor, pipeline and data parallel degrees and micro-batches per iteration."""

    tensor: int
    pipeline: int
    data: int
    microbatches: int
    virtual: int = 1  # model chunks per pipeline stage (interleaved 1F1B when above 1)
    sequence: bool = False  # sequence parallelism over the tensor-parallel group (``strategy.megatron``)
    expert: int = 0  # expert-parallel degree of mixture-of-experts ops (0: the tensor degree)

    @property
    def name(self) -> str:
        v = f" v{self.virtual}" if self.virtual > 1 else ""
        ep = f" ep{self.expert}" if self.expert else ""
        sp = " sp" if self.sequence else ""
        return f"layout t{self.tensor} p{self.pipeline} d{self.data} m{self.microbatches}{v}{ep}{sp}"


def every_layout(graph: Graph, cluster: Cluster, counts: list[int], batch: int) -> list[Layout]:
    """Every (t, p, d, m, v) and, for t > 1, with and without sequence parallelism: t at most a node,
    p at most the model's layers, m one of ``counts`` with each replica's micro-batch a whole number of the
    iteration's ``batch`` samples, at least p micro-batches when pipelined; v > 1 virtual stages (of a model with
    layers) when the layers split into p * v equal chunks and m is a multiple of p, as Megatron-LM's interleaved
    schedule requires; for a mixture of experts, every expert-parallel degree that divides the experts and a
    stage's devices."""
    devices = cluster.devices
    layers = graph.meta.get("layers")
    stages = int(layers or len(graph.ops))
    out = []
    for t in st.divisors(devices):
        if t > cluster.per_node:
            continue
        for p in st.divisors(devices // t):
            d = devices // (t * p)
            if p > stages:
                continue
            for m in counts:
                if (batch // m) % d == 0 and (p == 1 or m >= p):
                    out.append(Layout(t, p, d, m))
                    if layers and p > 1 and m % p == 0:
                        out.extend(Layout(t, p, d, m, v) for v in st.divisors(layers // p)[1:] if v <= 8)
    experts = [op.dims[op.routed] for op in graph.ops if op.routed]
    if experts:
        out += [Layout(lay.tensor, lay.pipeline, lay.data, lay.microbatches, lay.virtual, False, ep)
                for lay in list(out) for ep in st.divisors(math.gcd(min(experts), devices // lay.pipeline))
                if ep != lay.tensor]
    return out + [Layout(lay.tensor, lay.pipeline, lay.data, lay.microbatches, lay.virtual, True, lay.expert)
                  for lay in out if lay.tensor > 1]


def seed_layouts(layouts: list[Layout], graph: Graph, cluster: Cluster, batch: int, modes: tuple[str, ...],
                 recompute: str | None) -> list[tuple[str, Layout, str | None]]:
    """(name, layout, recomputation mode or None for the model's own ``recompute``) of the layouts a search
    measures first, of ``layouts`` (in :func:`every_layout`'s order): each (t, p) with its fewest micro-batches
    and with the counts that give each data-parallel replica SEED_MICRO_BATCH samples per micro-batch, plain
    and (where valid) with the fewest virtual stages above one that its layers split into (2 where they split
    evenly, 3 for 105 layers on 35 stages), with and without sequence parallelism; in the other recomputation
    ``modes`` each (t, p) at its fewest micro-batches and at one sample per replica and micro-batch, plain and
    with those virtual stages, sequence parallel where t > 1. At one sample per replica and micro-batch (the most
    micro-batches, where interleaving shortens the pipeline's bubble most) every interleaving the layers allow is
    seeded in every mode, sequence parallel where t > 1: which one is fastest trades the bubble against the
    pipeline's transfers, which each chunk adds (Megatron-LM ran 175B on 8 stages of 12 layers in 3 chunks, not
    2). For mixture-of-experts models each (t, p) with
    its fewest micro-batches at every expert-parallel degree. A layout whose weights and optimizer state alone,
    spread evenly over its t * p devices (all devices for a mixture of experts), with the device's allocator slack
    and context, exceed a device's memory is no seed: its fullest device holds at least that much, so it cannot
    fit."""
    fewest: dict[tuple[int, int], int] = {}
    least_v: dict[tuple[int, int], int] = {}  # the least interleaving each (t, p)'s layers allow
    state, dev = graph.parameters * graph.state_bytes_per_param, cluster.device
    moe = any(op.routed for op in graph.ops)  # experts split over a whole stage, not only t ways
    fitting = [lay for lay in layouts  # as the simulator counts it: with the device's allocator slack and context
               if dev.held(state / (cluster.devices if moe else lay.tensor * lay.pipeline)) <= dev.memory_bytes]
    for lay in fitting:
        fewest.setdefault((lay.tensor, lay.pipeline), lay.microbatches)  # counts ascend
        if lay.virtual > 1:
            key = (lay.tensor, lay.pipeline)
            least_v[key] = min(least_v.get(key, lay.virtual), lay.virtual)

    def interleaved(lay: Layout) -> bool:  # a seeded interleaving (or none)
        return lay.virtual in (1, least_v.get((lay.tensor, lay.pipeline))) or (
            batch // lay.microbatches == lay.data and lay.sequence == (lay.tensor > 1))

    out = [(lay.name, lay, None) for lay in fitting
           if (interleaved(lay) and not lay.expert
               and (lay.microbatches == fewest[lay.tensor, lay.pipeline]
                    or batch // lay.microbatches // lay.data in SEED_MICRO_BATCH))
           or (lay.expert and lay.virtual == 1 and lay.microbatches == fewest[lay.tensor, lay.pipeline])]
    for lay in fitting:  # the other recomputation modes at each (t, p)'s fewest micro-batches and at
        # one sample per replica and micro-batch, with sequence parallelism where there is tensor parallelism
        if (interleaved(lay) and not lay.expert
                and lay.sequence == (lay.tensor > 1)
                and (lay.microbatches == fewest[lay.tensor, lay.pipeline] or batch // lay.microbatches == lay.data)):
            out += [(f"{lay.name} rc-{r}", lay, r) for r in modes if r != recompute]
    return out


LAYOUT_HELP = ("t<N> p<N> (tensor and pipeline degrees), then any of: d<N> (data-parallel degree: the devices left), "
               "m<N> (micro-batches per iteration) or mb<N> (samples per replica and micro-batch), v<N> (interleaved "
               "chunks per stage), ep<N> (expert-parallel degree), sp (sequence parallelism), rc-none, rc-selective "
               "or rc-full (recomputation), zero-<N> (ZeRO stage 0-3); e.g. \"t8 p8 mb1 v3 sp rc-selective\"")


def parse_layout(text: str, layouts: list[Layout], batch: int, modes: tuple[str, ...],
                 recompute: str | None) -> tuple[Layout, str | None, int]:
    """The layout a user names in the words of a seed layout's name (LAYOUT_HELP; the words of a search's report
    can be given back), with its recomputation mode (None: the model's own) and ZeRO stage; UsageError saying
    what is wrong, or which layouts of that (t, p) there are, when ``layouts`` holds none such."""
    words = text.replace(",", " ").split()
    if words[:1] == ["layout"]:
        words = words[1:]
    want: dict[str, int] = {}
    sequence, mode, zero = False, None, 0
    for w in words:
        key = w.rstrip("0123456789")
        if w == "sp":
            sequence = True
        elif w.startswith("rc-"):
            mode = w[3:]
            if mode not in (*modes, recompute):
                raise UsageError(f"layout {text!r}: recomputation {mode!r} is not one this search runs "
                                 f"({', '.join(dict.fromkeys((*modes, recompute or 'none')))})")
        elif key == "zero-" and w[5:].isdigit() and int(w[5:]) in st.ZERO_STAGES:
            zero = int(w[5:])
        elif key in ("t", "p", "d", "m", "mb", "v", "ep") and w[len(key):].isdigit() and key not in want:
            want[key] = int(w[len(key):])
        else:
            raise UsageError(f"layout {text!r}: cannot read {w!r}; a layout is {LAYOUT_HELP}")
    if "t" not in want or "p" not in want:
        raise UsageError(f"layout {text!r} names no {'tensor' if 't' not in want else 'pipeline'} degree; "
                         f"a layout is {LAYOUT_HELP}")
    if "m" in want and "mb" in want:
        raise UsageError(f"layout {text!r}: give micro-batches (m) or samples per micro-batch (mb), not both")
    same = [lay for lay in layouts if (lay.tensor, lay.pipeline) == (want["t"], want["p"])]
    if not same:
        degrees = sorted({f"t{lay.tensor} p{lay.pipeline}" for lay in layouts}, key=lambda s: [int(x[1:]) for x in s.split()])
        raise UsageError(f"layout {text!r}: t{want['t']} p{want['p']} is not a layout of this model on these devices; "
                         f"these are: {', '.join(degrees)}")
    match = [lay for lay in same if lay.sequence == sequence and lay.virtual == want.get("v", 1)
             and lay.data == want.get("d", lay.data) and lay.expert == want.get("ep", 0)
             and lay.microbatches == want.get("m", lay.microbatches)
             and ("mb" not in want or batch == lay.microbatches * lay.data * want["mb"])]
    if not match:
        raise UsageError(f"layout {text!r} is not one of the {len(same)} layouts of t{want['t']} p{want['p']} here "
                         f"(batch {batch}: d{same[0].data}; micro-batches m "
                         f"{sorted({lay.microbatches for lay in same})}; chunks v {sorted({lay.virtual for lay in same})}; "
                         f"sp {'allowed' if any(lay.sequence for lay in same) else 'only with t > 1'})")
    return match[0], mode if mode != recompute else None, zero
