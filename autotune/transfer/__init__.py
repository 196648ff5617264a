"""Transfer of tuning results across devices (DESIGN.md, issue 5).

- :mod:`.gpus`: known GPU properties (architecture, compute capability, SMs, bandwidth, clocks, L2).
- :mod:`.similarity`: device similarity from properties and from the rank correlation of
  measured times on common configurations.
- :mod:`.warm_start`: ``WarmStart``, a search warm-started from other devices (the sources'
  best configurations first, then model-guided search with a model that learns from the
  sources' data: :mod:`.pooled` (device properties as features, the default) or :mod:`.prior`
  (source scores as base margin or feature); a source the target disagrees with is dropped).
- :mod:`.sources`: choosing the source devices (named, or ``auto``: the most similar).
- :mod:`.dispatch`: ``best_config(task, device, db=...)``; :mod:`.store`: the database reads.
- :mod:`.export`: best configurations per device plus a fallback, as JSON or a C header.
"""
