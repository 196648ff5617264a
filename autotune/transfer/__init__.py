"""Transfer of tuning results across devices (DESIGN.md, issue 5).

- :mod:`.gpus`: known GPU properties (architecture, compute capability, SMs, bandwidth, clocks, L2).
- :mod:`.similarity`: device similarity from properties and from the rank correlation of
  measured times on common configurations.
- :mod:`.prior` and :mod:`.warm_start`: warm-started model-guided search (source top-k first,
  then a cost model boosted from the source's data, dropped when the target disagrees).
- :mod:`.dispatch`: ``best_config(task, device, db=...)``.
- :mod:`.export`: best configurations per device as JSON or a C header.
"""
