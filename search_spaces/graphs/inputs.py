"""Random inputs of an ONNX model's declared types, with integer inputs kept valid for the tables they
index (token ids within the vocabulary): what the numeric checks and timings feed a model."""

from __future__ import annotations

import numpy as np

ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
             "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def table_bounds(gathers) -> dict[str, int]:
    """{index name: bound} from (index name, table length along the gathered axis) pairs: an index that
    several tables share stays below the shortest."""
    bounds: dict[str, int] = {}
    for name, size in gathers:
        bounds[name] = min(bounds.get(name, size), size)
    return bounds


def index_bounds(model) -> dict[str, int]:
    """For each integer graph input that indexes a table (a Gather of an initializer: token ids into an
    embedding), the table's length along the gathered axis: its values must stay below it."""
    if model is None or not hasattr(model, "graph"):
        return {}
    from onnx import helper

    dims = {t.name: list(t.dims) for t in model.graph.initializer}

    def gathered(n) -> tuple[str, int]:
        axis = next((helper.get_attribute_value(a) for a in n.attribute if a.name == "axis"), 0)
        return n.input[1], dims[n.input[0]][axis]

    return table_bounds(gathered(n) for n in model.graph.node
                        if n.op_type == "Gather" and len(n.input) > 1 and n.input[0] in dims)


def random_inputs(specs, seed: int = 0, bounds: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random arrays for ``specs`` ((name, shape, dtype), ...) of each input's declared type: floats standard
    normal; integers below the length of the table they index (``bounds``: token ids within the
    vocabulary), else 0 or 1 (masks, segment ids, and any index valid for a table of two rows or more);
    booleans at random."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dtype in specs:
        shape, dtype = [int(d) for d in shape], np.dtype(dtype)
        if np.issubdtype(dtype, np.integer):
            out[name] = rng.integers(0, (bounds or {}).get(name, 2), size=shape).astype(dtype)
        elif dtype == np.bool_:
            out[name] = rng.random(shape) < 0.5
        else:
            out[name] = rng.standard_normal(shape).astype(dtype)
    return out
