"""StrategySpace: the SOAP space of per-op parallel configurations (FlexFlow).

A candidate's payload is the strategy JSON (``strategy.to_json``). Moves:
``neighbor`` gives one op a random valid configuration or copies the configuration
of an adjacent op (mapped role by role), as FlexFlow's MCMC proposals do; with
probability ``tie_prob`` the new configuration goes to every op of the same type and
shape (all the layers of a stack alike, as Alpa and Unity tie repeated layers);
``initial`` is data parallelism; ``crossover`` takes a prefix of ops (in
topological order) from one parent and the rest from the other.
"""

from __future__ import annotations

import math

import numpy as np
from autotune.search_spaces.base import Space
from autotune.search_spaces.parallel import strategy as st
from autotune.search_spaces.parallel.clusters import Cluster
from autotune.search_spaces.parallel.graph import ROLES, Graph

from autotune.errors import UsageError
from autotune.types import Candidate, Task

N_FEATURES = 4 + 2 * len(ROLES)


class StrategySpace(Space):
    def __init__(self, graph: Graph, cluster: Cluster, copy_prob: float = 0.5, tie_prob: float = 0.2,
                 microbatches: int = 1):
        self.graph, self.cluster, self.D, self.microbatches = graph, cluster, cluster.devices, microbatches
        self.copy_prob, self.tie_prob = copy_prob, tie_prob
        groups: dict[tuple, list[int]] = {}
        for i, op in enumerate(graph.ops):
            groups.setdefault((op.type, tuple(op.dims.items()), tuple(op.roles.items())), []).append(i)
        self.alike = [groups[(op.type, tuple(op.dims.items()), tuple(op.roles.items()))] for op in graph.ops]
        self.task = Task("parallel", f"{graph.name}@{cluster.name}",
                         {"model": graph.name, "cluster": cluster.name, "batch": graph.batch * microbatches,
                          "devices": self.D, **({"microbatches": microbatches} if microbatches > 1 else {})})
        self.choices = [st.degree_choices(op, self.D) for op in graph.ops]
        self.neighbors: list[list[int]] = [[] for _ in graph.ops]
        for p, c, _ in graph.edges:
            self.neighbors[p].append(c)
            self.neighbors[c].append(p)
        self._parsed: dict[str, st.Strategy] = {}

    # -- conversions -----------------------------------------------------------------
    def wrap(self, strategy: st.Strategy) -> Candidate:
        c = Candidate(st.to_json(self.graph, strategy, self.D))
        self._remember(c.key, strategy)
        return c

    def _remember(self, key: str, strategy: st.Strategy) -> None:
        if len(self._parsed) > 50_000:
            self._parsed.clear()
        self._parsed[key] = list(strategy)

    def strategy(self, c: Candidate) -> st.Strategy:
        s = self._parsed.get(c.key)
        if s is None:
            s = st.from_json(self.graph, c.payload, self.D)
            self._remember(c.key, s)
        return s

    def candidate(self, config) -> Candidate:
        return self.wrap(st.from_json(self.graph, config, self.D))

    def contains(self, c: Candidate) -> bool:
        try:
            return st.check_strategy(self.graph, self.strategy(c), self.D) is None
        except (UsageError, TypeError, ValueError, AttributeError):
            return False

    # -- moves -----------------------------------------------------------------------
    def random_config(self, i: int, rng: np.random.Generator) -> st.OpConfig:
        ch = self.choices[i]
        deg = ch[int(rng.integers(len(ch)))]
        p = math.prod(deg)
        return st.OpConfig(deg, p * int(rng.integers(self.D // p)))

    def _copy(self, i: int, jcfg: st.OpConfig, j: int) -> st.OpConfig:
        """Op ``j``'s configuration carried over to op ``i``, role by role."""
        src, dst = self.graph.ops[j], self.graph.ops[i]
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
        start = jcfg.start if jcfg.start % p == 0 and jcfg.start + p <= self.D else 0
        return st.OpConfig(tuple(deg), start)

    def sample(self, rng: np.random.Generator) -> Candidate:
        return self.wrap([self.random_config(i, rng) for i in range(len(self.graph.ops))])

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        s = list(self.strategy(c))
        for _ in range(20):
            i = int(rng.integers(len(s)))
            nb = self.neighbors[i]
            if nb and rng.random() < self.copy_prob:
                j = nb[int(rng.integers(len(nb)))]
                new = self._copy(i, s[j], j)
            else:
                new = self.random_config(i, rng)
            if new != s[i] and st.check_config(self.graph.ops[i], new, self.D) is None:
                tied = self.alike[i] if rng.random() < self.tie_prob else [i]
                for t in tied:
                    s[t] = new
                return self.wrap(s)
        return self.wrap(s)

    def crossover(self, a: Candidate, b: Candidate, rng: np.random.Generator) -> Candidate:
        sa, sb = self.strategy(a), self.strategy(b)
        cut = int(rng.integers(len(sa) + 1))
        return self.wrap(list(sa[:cut]) + list(sb[cut:]))

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
        mean log2 partitions, share of ops on the whole cluster, distinct blocks, mean block start."""
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
                                        [w @ parts, w @ whole, math.log2(blocks), w @ starts]]))
        return np.array(rows, dtype=float).reshape(len(cs), N_FEATURES)
