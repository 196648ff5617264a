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
#: the key of a stored model's metrics that holds the "module:Class" of a model of one's own, by which
#: :func:`stored_model_class` loads it again (a built-in model's metrics do not have it)
MODEL_SPEC = "model_spec"


def own_model_spec(model: object) -> str | None:
    """"module:Class" of ``model`` when it is a cost model of one's own (not autotune's, and its class reachable
    by that name from another process: not a script's ``__main__`` nor a class made inside a function), None
    otherwise."""
    if model is None:
        return None
    cls = type(model)
    if cls.__module__.split(".")[0] in ("autotune", "__main__") or "<" in cls.__qualname__:
        return None
    return f"{cls.__module__}:{cls.__qualname__}"


def stored_model_class(name: str, metrics: dict | None) -> type:
    """The class of a stored model named ``name``: a registered one by its name, one of one's own by the
    "module:Class" stored with it (its metrics' ``MODEL_SPEC``)."""
    spec = (metrics or {}).get(MODEL_SPEC) if isinstance(metrics, dict) else None
    if name in COST_MODELS or name in STORED_ONLY or not isinstance(spec, str) or not is_spec(spec):
        return cost_model_class(name)
    return cost_model_class(spec)


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
