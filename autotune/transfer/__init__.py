"""Transfer of tuning results across devices.

- :mod:`.similarity`: device similarity from properties and from the rank correlation of
  measured times on common configurations.
- :mod:`.sources`: choosing the source devices of a warm start (named, or ``auto``: the most
  similar) and building the warm-started search (:mod:`autotune.algorithms.warm_start`, whose
  model lives in :mod:`autotune.cost_models.pooled`).
- :mod:`.dispatch`: ``best_config(task, device, db=...)``; the database reads are in
  :mod:`autotune.db.transfer`.
- :mod:`.export`: best configurations per device plus a fallback, as JSON or a C header.
"""
