"""Cost models by name (``--cost-model NAME``), loaded on first use.

``COST_MODELS`` are those a search may be guided by; ``STORED_ONLY`` are names stored models also carry
(``xgb-pooled``: a warm start's model, built from its sources), which :func:`cost_model_class` resolves
so that such a model loads (``autotune predict``), while choosing it with ``--cost-model`` is refused
when the model is built. A user's own model is named "module:Class" wherever a registered name is taken."""

from __future__ import annotations

from autotune.lazy import is_spec, load, load_user

COST_MODELS: dict[str, str] = {
    "xgb": "autotune.cost_models.xgb:XGBCostModel",
    "graph-ops": "autotune.cost_models.graph_ops:GraphOpCostModel",
}
STORED_ONLY: dict[str, str] = {
    "xgb-pooled": "autotune.cost_models.pooled:PooledModel",
}


def cost_model_class(name: str | type) -> type:
    """The class of the registered cost model ``name``, of a user's own named "module:Class" (a CostModel
    subclass), or a CostModel class given as such."""
    from autotune.cost_models.base import CostModel  # here: the command line imports this module at start

    if isinstance(name, type) and issubclass(name, CostModel):
        return name
    if name in STORED_ONLY:
        return load(STORED_ONLY, "cost model", name)
    if name not in COST_MODELS and is_spec(name):
        return load_user(name, "cost model", CostModel)
    return load(COST_MODELS, "cost model", name)
