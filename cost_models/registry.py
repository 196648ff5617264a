"""Cost models by name (``--cost-model NAME``), loaded on first use.

``COST_MODELS`` are those a search may be guided by; ``STORED_ONLY`` are names stored models also carry
(``xgb-pooled``: a warm start's model, built from its sources), which :func:`cost_model_class` resolves
so that such a model loads (``autotune predict``), while choosing it with ``--cost-model`` is refused
when the model is built."""

from __future__ import annotations

from autotune.lazy import load

COST_MODELS: dict[str, str] = {
    "xgb": "autotune.cost_models.xgb:XGBCostModel",
    "graph-ops": "autotune.cost_models.graph_ops:GraphOpCostModel",
}
STORED_ONLY: dict[str, str] = {
    "xgb-pooled": "autotune.cost_models.pooled:PooledModel",
}


def cost_model_class(name: str) -> type:
    if name in STORED_ONLY:
        return load(STORED_ONLY, "cost model", name)
    return load(COST_MODELS, "cost model", name)
