"""What the ONNX import does to a model before reading it: dynamic axes fixed to given shapes, constants
folded (the shape arithmetic exporters write), and shapes ONNX inference cannot give taken from one run
in onnxruntime."""

from __future__ import annotations

import math
import os
import re

import numpy as np

from autotune.errors import UsageError, argument
from autotune.search_spaces.graphs import ops

# The most elements a declared tensor may have (2^32: 16 GiB of fp32): a model file cannot make the
# optimizer allocate more than this for one input or activation.
MAX_TENSOR_ELEMENTS = int(os.environ.get("AUTOTUNE_MAX_TENSOR_ELEMENTS", str(1 << 32)))
NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


#: where onnxruntime's messages say which line of its C++ source raised them: "/onnxruntime_src/.../x.h:91 "
_SOURCE_LINE = re.compile(r"\S+\.(?:h|hpp|cc|cpp|cxx):\d+ ")


def runtime_message(exc: BaseException, limit: int = 500) -> str:
    """The first line of a runtime's error message (at most ``limit`` characters; its type when it has none),
    without the C++ source file, line and function signature onnxruntime puts before its reason
    ("reshape_helper.h:91 onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, ...)"),
    which would otherwise fill the line and leave the reason out."""
    text = (str(exc).splitlines() or [""])[0]
    while (m := _SOURCE_LINE.search(text)) is not None:
        end, open_at = m.end(), text.find("(", m.end())
        head = text[m.end():open_at] if open_at >= 0 else ""
        if "::" in head and len(head) < 300 and ". " not in head:  # a C++ function's qualified name
            depth = 0
            for i in range(open_at, len(text)):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                if depth == 0:  # the signature ends here (and may be followed by const)
                    end = i + 1
                    if text.startswith(" const", end):
                        end += len(" const")
                    break
        text = text[:m.start()] + text[end:].lstrip()
    return text.strip()[:limit] or type(exc).__name__


def known_shape(vi) -> tuple[int, ...] | None:
    dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else None
    if dims is None or not vi.type.tensor_type.HasField("shape") or not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def _inferred(model):
    """``model`` with ONNX's inferred shapes (``model`` itself where inference fails: the import then names
    what it cannot handle)."""
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001
        return model


def fold_constants(model, rounds: int = 4):
    """(model, the model with inferred shapes): every node whose inputs are all constants evaluated into an
    initializer (onnx's reference evaluator, at the model's opset), ``Shape`` and ``Size`` of tensors of known
    static shape included: the shape arithmetic exporters write (Shape -> Gather -> Unsqueeze -> Concat ->
    Reshape) becomes constant targets. Ops the graph IR knows are folded only on integer constants (shapes):
    on float weights they stay weight-only nodes, which rules may rewrite and the export folds. Shapes are
    re-inferred between rounds, as a folded shape makes more shapes known."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    opsets = list(model.opset_import)
    for _ in range(rounds):
        inferred = _inferred(model)
        g = model.graph
        consts = {t.name: t for t in g.initializer}
        shapes = {vi.name: known_shape(vi) for vi in list(inferred.graph.value_info) + list(g.input)}
        shapes.update({t.name: tuple(t.dims) for t in g.initializer})
        keep, new, changed = [], {}, False
        for n in g.node:
            ins = [t for t in n.input if t]
            if n.domain not in ("", "ai.onnx") or n.op_type in NEVER_FOLD or not n.output:
                keep.append(n)
                continue
            values = None
            if n.op_type in ("Shape", "Size") and shapes.get(n.input[0]) is not None:
                shape = shapes[n.input[0]]
                if n.op_type == "Size":
                    values = [np.array(math.prod(shape), dtype=np.int64)]
                else:
                    a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
                    values = [np.array(shape[a.get("start", 0):a.get("end", len(shape))], dtype=np.int64)]
            elif ops.is_known(n.op_type) and ins and not all(
                    np.issubdtype(helper.tensor_dtype_to_np_dtype(consts[t].data_type), np.integer)
                    for t in ins if t in consts):
                keep.append(n)  # a known op on float weights: a weight-only node for the IR (see above)
                continue
            elif n.op_type == "Constant" or (ins and all(t in consts for t in ins)):
                small = all(math.prod(consts[t].dims) <= MAX_TENSOR_ELEMENTS for t in ins)
                one = helper.make_graph([n], "fold", [], [helper.make_value_info(o, onnx.TypeProto()) for o in n.output],
                                        [consts[t] for t in ins])
                try:
                    values = ReferenceEvaluator(helper.make_model(one, opset_imports=opsets)).run(None, {}) if small else None
                except Exception:  # noqa: BLE001 - an op the evaluator cannot run stays a node
                    values = None
            if values is None or any(np.asarray(v).size > MAX_TENSOR_ELEMENTS for v in values):
                keep.append(n)
                continue
            for o, v in zip(n.output, values):
                if o:
                    consts[o] = new[o] = numpy_helper.from_array(np.asarray(v), o)
            changed = True
        if not changed:
            return model, inferred
        used = {t for n in keep for t in n.input} | {o.name for o in g.output}
        for o in g.output:  # an output computed from constants alone stays an output: an Identity of it
            if o.name in new:
                keep.append(helper.make_node("Identity", [o.name + "__const"], [o.name]))
                new[o.name + "__const"] = numpy_helper.from_array(numpy_helper.to_array(new.pop(o.name)), o.name + "__const")
                used.add(o.name + "__const")
        inits = [t for t in g.initializer if t.name in used] + [t for k, t in new.items() if k in used]
        initial = {t.name for t in g.initializer}
        inputs = [vi for vi in g.input if vi.name not in initial or vi.name in used]  # folded weights leave
        graph = helper.make_graph(keep, g.name, inputs, list(g.output), inits)
        model = helper.make_model(graph, opset_imports=opsets, producer_name=model.producer_name)
    return model, _inferred(model)


def parse_input_shapes(specs) -> dict[str, tuple[int, ...]]:
    """``["input_ids=1x128", ...]`` as {name: shape}; UsageError naming a malformed one."""
    out = {}
    for spec in specs or ():
        name, _, dims = str(spec).rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not name or not shape or any(d < 1 for d in shape):
            words = [d for d in re.split("[xX]", dims) if d and not d.isdigit()] if name else []
            which = f" ({words[0]!r} is not a number: give each symbolic dim a size)" if words else ""
            raise UsageError(f"--input-shape {spec!r}: give NAME=DIMS with positive dims joined by x, e.g. "
                             f"input_ids=1x128{which}")
        out[name] = shape
    return out


def with_input_shapes(model, shapes: dict[str, tuple[int, ...]]):
    """A copy of ``model`` whose named graph inputs have the given static shapes (dynamic axes resolved);
    UsageError for a name that is no input or a shape of another rank."""
    if not shapes:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    weights = {t.name for t in out.graph.initializer}
    inputs = {vi.name: vi for vi in out.graph.input if vi.name not in weights}
    for name, shape in shapes.items():
        if name not in inputs:
            raise UsageError(f"{argument('input_shapes', '--input-shape')} names {name!r}, which is not an input of "
                             "the model; its inputs: "
                             f"{', '.join(inputs) or 'none'}")
        tensor = inputs[name].type.tensor_type
        if not tensor.HasField("shape"):  # a rank the model leaves open: the given shape's
            tensor.shape.dim.extend(onnx.TensorShapeProto.Dimension() for _ in shape)
        dims = tensor.shape.dim
        given = argument(f"input_shapes[{name!r}]", f"--input-shape {name}")
        if len(dims) != len(shape):
            raise UsageError(f"{given}: the model's input has {len(dims)} dims, not {len(shape)}")
        for d, n in zip(dims, shape):
            if d.HasField("dim_value") and d.dim_value != n:
                raise UsageError(f"{given}: dim {d.dim_value} of the model is fixed, not {n}")
            d.ClearField("dim_param")
            d.dim_value = n
    return out


def executed_shapes(model) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every node output's shape and dtype from one run of ``model`` in onnxruntime on random inputs."""
    import onnx

    from autotune.search_spaces.graphs.inputs import ORT_TYPES, index_bounds, random_inputs

    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {o.name for o in m.graph.output}
    names = [o for n in m.graph.node for o in n.output if o and o not in known]
    m.graph.output.extend(onnx.ValueInfoProto(name=o) for o in names)
    try:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level, so.log_severity_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL, 4  # raised
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        specs = [(i.name, i.shape, ORT_TYPES.get(i.type, np.float32)) for i in sess.get_inputs()]
        values = sess.run(None, random_inputs(specs, 0, index_bounds(model)))
    except Exception as exc:  # noqa: BLE001 - the runtime's own error, as a usage error
        raise UsageError(f"the model has operators ONNX shape inference does not know, and onnxruntime cannot "
                         f"run it to find their shapes: {runtime_message(exc)}") from None
    return {o.name: (tuple(v.shape), str(v.dtype)) for o, v in zip(sess.get_outputs(), values)}


