"""Cost models by name (``--cost-model NAME``), loaded on first use."""

from __future__ import annotations

from autotune.lazy import load

COST_MODELS: dict[str, str] = {
    "xgb": "autotune.cost_models.xgb:XGBCostModel",
    "graph-ops": "autotune.cost_models.graph_ops:GraphOpCostModel",
}


def cost_model_class(name: str) -> type:
    return load(COST_MODELS, "cost model", name)
