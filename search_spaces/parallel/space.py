"""StrategySpace: the SOAP space of per-op parallel configurations (FlexFlow), with whole layouts.

A candidate's payload is the strategy JSON (``strategy.to_json``), plus ``microbatches`` when the
iteration's batch is split into another number of micro-batches than the space's default (only
for models that can be rebuilt at another micro-batch size: the transformer stacks). Moves:
``neighbor`` gives one op a random valid configuration (some with replicas: copies of each
partition on consecutive devices) or copies the configuration of an adjacent op (mapped role by
role), as FlexFlow's MCMC proposals do; with probability ``tie_prob`` the new configuration goes
to every op of the same type and shape (all the layers of a stack alike, as Alpa and Unity tie
repeated layers); with probability ``layout_prob`` it replaces the whole strategy by a layout:
Megatron-LM's strategy at a tensor (t), pipeline (p) and data (d = devices / t p) degree, a
micro-batch count, a number of virtual stages (interleaved 1F1B), sequence parallelism on or off and,
for mixture-of-experts models, an expert-parallel degree, so the search moves between (t, p, d)
layouts in one step and refines op by op from there; with probability ``zero_prob`` it keeps the
strategy and changes its ZeRO stage (``"zero"`` in the payload: optimizer state, gradients and
weights sharded over the data-parallel replicas, see ``Simulator``; stage 3 with or without its gathers
prefetched, ``"prefetch"``), with ``recompute_prob`` its
activation recomputation mode (``"recompute"``), and with ``overlap_prob`` whether the weight-gradient
all-reduces overlap the (last micro-batch's) backward (``"overlap"``; absent: overlapped with one
micro-batch, not with several, as PyTorch DDP and Megatron-LM do by default). ``initial`` is data parallelism; ``crossover`` takes a prefix of ops (in
topological order) from one parent and the rest from the other. ``seeds`` are the layouts a
search measures first: every (t, p) with its fewest micro-batches and with the counts that give
each data-parallel replica 1, 2, 4 or 8 samples per micro-batch, plain and interleaved in 2, each with
and without sequence parallelism, and some in the other recomputation modes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.base import Space
from autotune.search_spaces.parallel import strategy as st
from autotune.search_spaces.parallel.clusters import Cluster
from autotune.search_spaces.parallel.graph import ROLES, Graph
from autotune.search_spaces.parallel.layouts import Layout, every_layout, parse_layout, seed_layouts
from autotune.types import Candidate, Task

N_FEATURES = 9 + 2 * len(ROLES)
ZERO_SETTINGS = [(z, False) for z in st.ZERO_STAGES] + [(3, True)]  # (ZeRO stage, its gathers prefetched)
RECOMPUTE_LEVEL = {None: 0, "none": 0, "selective": 1, "full": 2}  # a feature: how much is recomputed


class StrategySpace(Space):
    def __init__(self, graph: Graph, cluster: Cluster, copy_prob: float = 0.5, tie_prob: float = 0.2,
                 microbatches: int = 1, layout_prob: float = 0.1, rebuild: Callable[..., Graph] | None = None,
                 replica_prob: float = 0.2, zero_prob: float = 0.05, recompute_modes: tuple[str, ...] = (),
                 recompute_prob: float = 0.05, overlap_prob: float = 0.05):
        """``graph`` is one micro-batch of ``microbatches``; ``rebuild(batch, recompute=None)`` builds the model
        at another micro-batch size (then the micro-batch count is searched too) and, with
        ``recompute_modes``, another activation recomputation mode (then the mode is searched too)."""
        self.graph, self.cluster, self.D, self.microbatches = graph, cluster, cluster.devices, microbatches
        self.copy_prob, self.tie_prob, self.layout_prob, self.replica_prob = copy_prob, tie_prob, layout_prob, replica_prob
        self.zero_prob, self.recompute_prob, self.overlap_prob = zero_prob, recompute_prob, overlap_prob
        self.batch = graph.batch * microbatches  # of an iteration
        self._rebuild = rebuild
        self.counts = list(st.divisors(self.batch)) if rebuild is not None else [microbatches]
        self.recompute = graph.meta.get("recompute")  # the model's own mode (None: not a transformer stack)
        self.modes = tuple(recompute_modes) if rebuild is not None and self.recompute is not None else ()
        self._graphs: dict[tuple[int, str | None], Graph] = {(microbatches, self.recompute): graph}
        self._choices: dict[int, list] = {}
        groups: dict[tuple, list[int]] = {}
        for i, op in enumerate(graph.ops):
            groups.setdefault((op.type, tuple(op.dims.items()), tuple(op.roles.items())), []).append(i)
        self.alike = [groups[(op.type, tuple(op.dims.items()), tuple(op.roles.items()))] for op in graph.ops]
        self.task = Task("parallel", f"{graph.name}@{cluster.name}",
                         {"model": graph.name, "cluster": cluster.name, "batch": graph.batch * microbatches,
                          "devices": self.D, **({"microbatches": microbatches} if microbatches > 1 else {}),
                          # a recomputation mode fixed for the search is part of the task; one it chooses is not
                          **({"recompute": self.recompute or "full"}
                             if graph.recompute or (self.recompute is not None and not self.modes) else {}),
                          # an ONNX model at other input shapes is another task (never its campaign resumed)
                          **({"input_shapes": graph.meta["input_shapes"]} if graph.meta.get("input_shapes") else {}),
                          # a model read from a file (ONNX, JSON graph) is known by its content, not by the
                          # name inside it: two models of one name are two tasks (Graph.digest)
                          **({"model_digest": graph.meta["digest"]} if graph.meta.get("digest") else {})})
        self.neighbors: list[list[int]] = [[] for _ in graph.ops]
        for p, c, _ in graph.edges:
            self.neighbors[p].append(c)
            self.neighbors[c].append(p)
        self._parsed: dict[str, st.Strategy] = {}
        self.layouts = every_layout(graph, cluster, self.counts, self.batch)

    # -- micro-batches ---------------------------------------------------------------
    def graph_for(self, microbatches: int, recompute: str | None = None) -> Graph:
        """The model of one micro-batch when an iteration runs ``microbatches`` of them, recomputing its
        activations as ``recompute`` says (default: the model's own mode)."""
        key = (microbatches, recompute or self.recompute)
        if key not in self._graphs:
            if microbatches not in self.counts:
                raise UsageError(f"{microbatches} micro-batches: valid for batch {self.batch} of {self.graph.name!r}: "
                                 f"{', '.join(map(str, self.counts))}")
            self._graphs[key] = self._rebuild(self.batch // microbatches, key[1])
        return self._graphs[key]

    def choices(self, microbatches: int) -> list:
        """Per op, every valid degree tuple at that micro-batch count."""
        if microbatches not in self._choices:
            self._choices[microbatches] = [st.degree_choices(op, self.D) for op in self.graph_for(microbatches).ops]
        return self._choices[microbatches]

    def microbatches_of(self, c: Candidate) -> int:
        m = c.payload.get("microbatches", self.microbatches) if isinstance(c.payload, dict) else self.microbatches
        if isinstance(m, bool) or not isinstance(m, int):
            raise UsageError(f"microbatches must be a whole number, got {m!r}")
        return m

    @staticmethod
    def zero_of(c: Candidate) -> int:
        """The candidate's ZeRO stage (0: none; see ``Simulator``)."""
        z = c.payload.get("zero", 0) if isinstance(c.payload, dict) else 0
        if isinstance(z, bool) or z not in st.ZERO_STAGES:
            raise UsageError(f"zero must be a ZeRO stage 0-3, got {z!r}")
        return z

    @staticmethod
    def overlap_of(c: Candidate) -> bool | None:
        """Whether the candidate's weight-gradient all-reduces overlap the backward (None: the default,
        overlapped with one micro-batch and not with several)."""
        o = c.payload.get("overlap") if isinstance(c.payload, dict) else None
        if o is not None and not isinstance(o, bool):
            raise UsageError(f"overlap must be true or false, got {o!r}")
        return o

    def prefetch_of(self, c: Candidate) -> bool:
        """Whether the candidate's ZeRO-3 gathers each run during the op before it (FSDP's prefetch; False: the
        compute waits for each, as DeepSpeed's hooks fetched): only with ZeRO stage 3."""
        f = c.payload.get("prefetch", False) if isinstance(c.payload, dict) else False
        if not isinstance(f, bool):
            raise UsageError(f"prefetch must be true or false, got {f!r}")
        if f and self.zero_of(c) != 3:
            raise UsageError("prefetch needs ZeRO stage 3 (\"zero\": 3)")
        return f

    def recompute_of(self, c: Candidate) -> str | None:
        """The candidate's activation recomputation mode (``"recompute"`` in the payload; default the model's)."""
        r = c.payload.get("recompute", self.recompute) if isinstance(c.payload, dict) else self.recompute
        if r != self.recompute and r not in self.modes:
            valid = ", ".join(self.modes) if self.modes else f"only the model's own ({self.recompute})"
            raise UsageError(f"recompute must be one of: {valid}; got {r!r}")
        return r

    # -- layouts ---------------------------------------------------------------------
    def layout(self, lay: Layout, zero: int = 0, recompute: str | None = None,
               overlap: bool | None = None, prefetch: bool = False) -> Candidate:
        g = self.graph_for(lay.microbatches)
        return self.wrap(st.megatron(g, self.cluster, lay.tensor, lay.pipeline, lay.virtual, lay.sequence,
                                     lay.expert or None), lay.microbatches, zero, recompute, overlap, prefetch)

    def given(self, text: str) -> tuple[str, Candidate]:
        """A layout the user names (:func:`~autotune.search_spaces.parallel.layouts.parse_layout`), with its name
        as a search's report writes it: ``given layout t8 p8 d1 m64 v3 sp rc-selective``."""
        lay, mode, zero = parse_layout(text, self.layouts, self.batch, self.modes, self.recompute)
        name = f"given {lay.name}{f' rc-{mode}' if mode else ''}{f' zero-{zero}' if zero else ''}"
        return name, self.layout(lay, zero, mode)

    def seeds(self) -> dict[str, Candidate]:
        """The layouts a search measures first (:func:`~autotune.search_spaces.parallel.layouts.seed_layouts`: a
        530B model on 280 A100s has 134 of its 715 layouts as seeds), and data parallelism with each ZeRO stage
        (stage 3: FSDP)."""
        out = {name: self.layout(lay, recompute=r) for name, lay, r in
               seed_layouts(self.layouts, self.graph, self.cluster, self.batch, self.modes, self.recompute)}
        dp = st.data_parallel(self.graph, self.cluster)
        out.update({f"data-parallel zero-{z}": self.wrap(dp, zero=z) for z in st.ZERO_STAGES[1:]})
        out["data-parallel zero-3 prefetch"] = self.wrap(dp, zero=3, prefetch=True)
        return out

    # -- conversions -----------------------------------------------------------------
    def wrap(self, strategy: st.Strategy, microbatches: int | None = None, zero: int = 0,
             recompute: str | None = None, overlap: bool | None = None, prefetch: bool = False) -> Candidate:
        m = self.microbatches if microbatches is None else microbatches
        payload = st.to_json(self.graph_for(m), strategy, self.D)
        if m != self.microbatches:
            payload["microbatches"] = m
        if zero:
            payload["zero"] = zero
        if recompute is not None and recompute != self.recompute:
            payload["recompute"] = recompute
        if overlap is not None:
            payload["overlap"] = overlap
        if prefetch:
            payload["prefetch"] = True
        c = Candidate(payload)
        self._remember(c.key, strategy)
        return c

    def _remember(self, key: str, strategy: st.Strategy) -> None:
        if len(self._parsed) > 50_000:
            self._parsed.clear()
        self._parsed[key] = list(strategy)

    def strategy(self, c: Candidate) -> st.Strategy:
        s = self._parsed.get(c.key)
        if s is None:
            s = st.from_json(self.graph_for(self.microbatches_of(c)), c.payload, self.D)
            self._remember(c.key, s)
        return s

    def candidate(self, config) -> Candidate:
        c = Candidate(config)
        m = self.microbatches_of(c)
        return self.wrap(st.from_json(self.graph_for(m), config, self.D), m, self.zero_of(c), self.recompute_of(c),
                         self.overlap_of(c), self.prefetch_of(c))

    def contains(self, c: Candidate) -> bool:
        try:
            self.zero_of(c)
            self.recompute_of(c)
            self.overlap_of(c)
            self.prefetch_of(c)
            m = self.microbatches_of(c)
            return st.check_strategy(self.graph_for(m), self.strategy(c), self.D) is None
        except (UsageError, TypeError, ValueError, AttributeError):
            return False

    # -- moves -----------------------------------------------------------------------
    def random_config(self, i: int, rng: np.random.Generator, microbatches: int | None = None,
                      replicas: bool = True) -> st.OpConfig:
        """Random degrees on a random aligned block; with ``replicas``, with probability ``replica_prob`` each
        partition copied on several consecutive devices."""
        ch = self.choices(self.microbatches if microbatches is None else microbatches)[i]
        deg = ch[int(rng.integers(len(ch)))]
        p = math.prod(deg)
        r = 1
        if replicas and rng.random() < self.replica_prob:
            rs = st.divisors(self.D // p)
            r = rs[int(rng.integers(len(rs)))]
        return st.OpConfig(deg, p * r * int(rng.integers(self.D // (p * r))), r)

    def _copy(self, i: int, jcfg: st.OpConfig, j: int, microbatches: int | None = None) -> st.OpConfig:
        """Op ``j``'s configuration carried over to op ``i``, role by role."""
        g = self.graph_for(self.microbatches if microbatches is None else microbatches)
        src, dst = g.ops[j], g.ops[i]
        want = {r: 1 for r in ROLES}
        for d, k in zip(src.parallel_dims, jcfg.degrees):
            want[src.roles[d]] *= k
        deg = []
        for d in dst.parallel_dims:
            r = dst.roles[d]
            k = math.gcd(want[r], dst.dims[d])
            deg.append(k)
            want[r] //= k
        p = math.prod(deg)
        r = jcfg.replicas if self.D % (p * jcfg.replicas) == 0 else 1
        start = jcfg.start if jcfg.start % (p * r) == 0 and jcfg.start + p * r <= self.D else 0
        return st.OpConfig(tuple(deg), start, r)

    def sample(self, rng: np.random.Generator) -> Candidate:
        return self.wrap([self.random_config(i, rng, replicas=False) for i in range(len(self.graph.ops))])

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        """An op move, a layout move (keeping the ZeRO stage, recomputation mode and gradient overlap) or, with
        probability ``zero_prob``, another ZeRO stage for the same strategy (``recompute_prob``: another
        recomputation mode; ``overlap_prob``: the gradient all-reduces overlapped or not)."""
        z, rc, ov, pf = self.zero_of(c), self.recompute_of(c), self.overlap_of(c), self.prefetch_of(c)
        if self.layouts and rng.random() < self.layout_prob:
            return self.layout(self.layouts[int(rng.integers(len(self.layouts)))], z, rc, ov, pf)
        m = self.microbatches_of(c)
        if rng.random() < self.zero_prob:  # another stage, stage 3 with or without prefetch
            other = [x for x in ZERO_SETTINGS if x != (z, pf)]
            z2, pf2 = other[int(rng.integers(len(other)))]
            return self.wrap(self.strategy(c), m, z2, rc, ov, pf2)
        if len(self.modes) > 1 and rng.random() < self.recompute_prob:
            return self.wrap(self.strategy(c), m, z, str(rng.choice([x for x in self.modes if x != rc])), ov, pf)
        if rng.random() < self.overlap_prob:
            return self.wrap(self.strategy(c), m, z, rc, not st.overlapped(ov, m), pf)
        ops = self.graph_for(m).ops
        s = list(self.strategy(c))
        for _ in range(20):
            i = int(rng.integers(len(s)))
            nb = self.neighbors[i]
            if nb and rng.random() < self.copy_prob:
                j = nb[int(rng.integers(len(nb)))]
                new = self._copy(i, s[j], j, m)
            else:
                new = self.random_config(i, rng, m)
            if new != s[i] and st.check_config(ops[i], new, self.D) is None:
                tied = self.alike[i] if rng.random() < self.tie_prob else [i]
                for t in tied:
                    s[t] = new
                return self.wrap(s, m, z, rc, ov, pf)
        return self.wrap(s, m, z, rc, ov, pf)

    def crossover(self, a: Candidate, b: Candidate, rng: np.random.Generator) -> Candidate:
        """A prefix of ``a``'s ops and the rest of ``b``'s, at ``a``'s micro-batch count (an op of ``b``'s
        that is not valid there keeps ``a``'s configuration)."""
        m = self.microbatches_of(a)
        ops = self.graph_for(m).ops
        sa, sb = self.strategy(a), self.strategy(b)
        cut = int(rng.integers(len(sa) + 1))
        child = list(sa[:cut]) + [y if st.check_config(op, y, self.D) is None else x
                                  for op, x, y in zip(ops[cut:], sa[cut:], sb[cut:])]
        return self.wrap(child, m, self.zero_of(a), self.recompute_of(a), self.overlap_of(a), self.prefetch_of(a))

    def initial(self) -> Candidate:
        return self.wrap(st.data_parallel(self.graph, self.cluster))

    def baselines(self) -> dict[str, Candidate]:
        out = {name: self.wrap(fn(self.graph, self.cluster)) for name, fn in st.BASELINES.items()}
        if self.microbatches > 1 and self.cluster.nodes > 1:  # micro-batches make a pipeline worth trying
            out["megatron-pipeline"] = self.wrap(st.megatron(self.graph, self.cluster, pipeline=self.cluster.nodes))
        return out

    # -- cost-model rows -------------------------------------------------------------
    def features(self, cs: list[Candidate]) -> np.ndarray:
        """Per candidate: FLOP-weighted mean log2 degree per role, share of ops splitting each role,
        mean log2 partitions, share of ops on the whole cluster, distinct blocks, mean block start,
        log2 micro-batches, ZeRO stage, recomputation level, gradient all-reduces overlapped, ZeRO-3 prefetch."""
        w = np.array([op.flops + op.bwd_flops + 1.0 for op in self.graph.ops])
        w = w / w.sum()
        rows = []
        for c in cs:
            s = self.strategy(c)
            role_log = np.zeros((len(s), len(ROLES)))
            for i, (op, cfg) in enumerate(zip(self.graph.ops, s)):
                for d, k in zip(op.parallel_dims, cfg.degrees):
                    role_log[i, ROLES.index(op.roles[d])] += math.log2(k)
            parts = np.array([math.log2(cfg.parts) for cfg in s])
            starts = np.array([cfg.start for cfg in s]) / self.D
            whole = np.array([cfg.parts == self.D for cfg in s], dtype=float)
            blocks = len({(cfg.start, cfg.parts) for cfg in s})
            rows.append(np.concatenate([w @ role_log, (role_log > 0).mean(axis=0),
                                        [w @ parts, w @ whole, math.log2(blocks), w @ starts,
                                         math.log2(self.microbatches_of(c)), self.zero_of(c),
                                         RECOMPUTE_LEVEL[self.recompute_of(c)],
                                         float(st.overlapped(self.overlap_of(c), self.microbatches_of(c))),
                                         float(self.prefetch_of(c))]]))
        return np.array(rows, dtype=float).reshape(len(cs), N_FEATURES)
