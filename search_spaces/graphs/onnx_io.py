"""ONNX in and out: import to the graph IR (own topological sort, defaults made explicit,
unsupported constructs rejected naming node and op) and export loadable by onnxruntime."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from autotune.errors import MissingDependencyError, UsageError, argument
from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.ir import Graph, Node, TensorAttr
from autotune.search_spaces.graphs.onnx_prepare import (
    MAX_TENSOR_ELEMENTS,
    executed_shapes,
    fold_constants,
    known_shape,
    with_input_shapes,
)

EXPORT_OPSET = 17  # for a graph that did not come from an ONNX file (a model is written at its own opset)
EXPORT_IR_VERSION = 8  # onnxruntime >= 1.14 loads IR 8 / opset 17
OLDEST_OPSET = 7  # older models are converted to it by onnx's version converter
# outputs an inference graph may leave unused, after the ones it needs: (op, outputs kept)
OPTIONAL_OUTPUTS = {"Dropout": 1, "BatchNormalization": 1, "MaxPool": 1, "LayerNormalization": 1}
#: the name given at import to an optional output a node omits ('') before one it names (LSTM's Y before its
#: Y_h): outputs are positional, so the slot is kept; the export writes it as omitted again while nothing reads it
ABSENT_OUTPUT = "__absent_output_"


def _onnx():
    try:
        import onnx
    except ImportError as exc:
        raise MissingDependencyError("ONNX import/export needs the package 'onnx'; "
                                     "install it with pip install 'autotune[graphs]'") from exc
    return onnx


def _dtype(elem_type: int) -> str:
    from onnx import helper
    return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))


def _static_shape(vi, what: str) -> tuple[int, ...]:
    """The static shape of ``vi``, an input of the model (``what`` "input") or a tensor it computes (the
    inputs' shapes are static by then)."""
    dims = vi.type.tensor_type.shape.dim
    if not vi.type.HasField("tensor_type"):
        kind = vi.type.WhichOneof("value") or "of no type"
        raise UsageError(f"{what} {vi.name!r} is not a tensor ({kind.replace('_type', '')}); only tensors are supported")
    if what == "input" and not vi.type.tensor_type.HasField("shape"):  # not even its rank (no dims: a scalar)
        api = "input_shapes={%r: (1, 128)}" % vi.name
        raise UsageError(f"input {vi.name!r} has no shape, not even a number of dims; give it with "
                         f"{argument(api, f'--input-shape {vi.name}=DIMS')} (e.g. {vi.name}=1x3x224x224)")
    out = []
    for d in dims:
        if not d.HasField("dim_value"):
            shown = [str(x.dim_value) if x.HasField("dim_value") else "N" for x in dims]
            api = "input_shapes={%r: (%s)}" % (vi.name, ", ".join(shown))
            if what == "input":
                hint = f"give it with {argument(api, f'--input-shape {vi.name}=' + 'x'.join(shown))}"
            else:  # every input is static: the size depends on the values the op reads (NonZero's count)
                hint = ("its size does not follow from the input shapes (ONNX shape inference leaves it symbolic: "
                        "a data-dependent shape, such as NonZero's count), which the graph IR does not represent")
            raise UsageError(f"{what} {vi.name!r} has a symbolic dimension {d.dim_param or '?'!r}; {hint}")
        if d.dim_value < 0:
            raise UsageError(f"{what} {vi.name!r} has a negative dimension {d.dim_value}")
        out.append(int(d.dim_value))
    if math.prod(out) > MAX_TENSOR_ELEMENTS:
        raise UsageError(f"{what} {vi.name!r} declares {math.prod(out):,} elements {tuple(out)}; the limit is "
                         f"{MAX_TENSOR_ELEMENTS:,} (AUTOTUNE_MAX_TENSOR_ELEMENTS)")
    return tuple(out)


def _normalise(op: str, a: dict, node, shape_of) -> dict:
    """Make default attributes explicit so that rules can compare them."""
    where = f"node {node.name or node.output[0]!r} (op {op})"
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        raise UsageError(f"{where} uses auto_pad; only explicit pads are supported")
    a.pop("auto_pad", None)
    if op in ("Conv", "MaxPool", "AveragePool"):
        ks = a.get("kernel_shape") or shape_of(node.input[1])[2:]
        sp = len(ks)
        a.setdefault("kernel_shape", list(ks))
        a.setdefault("strides", [1] * sp)
        a.setdefault("pads", [0] * (2 * sp))
        if op == "Conv":
            a.setdefault("dilations", [1] * sp)
            a.setdefault("group", 1)
        elif op == "MaxPool":
            if len(node.output) > 1:
                raise UsageError(f"{where} asks for indices; not supported")
            if any(v != 1 for v in a.get("dilations", [1] * sp)) or a.get("storage_order", 0):
                raise UsageError(f"{where} uses dilations or storage_order; not supported")
            a.pop("dilations", None)
            a.pop("storage_order", None)
    elif op == "Gemm":
        for k, v in (("alpha", 1.0), ("beta", 1.0), ("transA", 0), ("transB", 0)):
            a.setdefault(k, v)
    elif op == "BatchNormalization":
        a.setdefault("epsilon", 1e-5)
        a.pop("momentum", None)
        if a.pop("training_mode", 0) or len([o for o in node.output if o]) > 1:
            raise UsageError(f"{where} is in training mode; export the model in eval mode")
    elif op == "Transpose":
        a.setdefault("perm", list(reversed(range(len(shape_of(node.input[0]))))))
    elif op in ("Softmax", "Flatten"):
        a.setdefault("axis", -1 if op == "Softmax" else 1)
    return a


def from_onnx(model, name: str | None = None, input_shapes: dict | None = None) -> Graph:
    """Import an ONNX ModelProto or file path into a :class:`Graph` (``input_shapes``: static shapes for
    inputs with dynamic axes, see :func:`with_input_shapes`).

    A model the import cannot make sense of (e.g. a corrupted file that still parses) is a UsageError,
    never a crash. onnx's own checker is not used: it refuses models the import handles (unsorted
    nodes) and would hide the node-and-op messages of unsupported constructs."""
    onnx = _onnx()
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        try:
            model = onnx.load(str(model))
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"cannot read ONNX model {str(model)!r}: {exc}") from None
    if not model.graph.node or not model.graph.output:
        if model.graph.output and model.opset_import:  # a well-formed model whose outputs are its inputs
            raise UsageError("the ONNX model has no nodes (its outputs are its inputs or weights): there is no graph "
                             "to search")
        raise UsageError("the ONNX model has no nodes or no outputs (an empty file, or not an ONNX model)")
    model = with_input_shapes(model, input_shapes or {})
    try:
        return _import(onnx, model, name)
    except UsageError:
        raise  # already names what is wrong (a ValueError too: not to be wrapped below)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"the ONNX model cannot be imported: {exc.__class__.__name__}: {str(exc)[:160]}") from None


def main_opset(model) -> int:
    """The version of the default operator set (ai.onnx) ``model`` imports; 0 when it imports none."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def upgraded(model):
    """``model`` itself, or converted to ``OLDEST_OPSET`` by onnx's version converter when its opset is older
    (onnxruntime runs no older one); UsageError when the converter cannot convert it."""
    opset = main_opset(model)
    if not 0 < opset < OLDEST_OPSET:
        return model
    onnx = _onnx()
    try:
        return onnx.version_converter.convert_version(model, OLDEST_OPSET)
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"the model's opset {opset} is older than {OLDEST_OPSET} and onnx's version converter "
                         f"cannot convert it: {str(exc)[:160]}") from None


def _import(onnx, model, name: str | None) -> Graph:
    from onnx import helper, numpy_helper

    name = name or model.graph.name or "graph"
    model = upgraded(model)
    opset = main_opset(model)
    model = _name_absent_outputs(model)
    model, inferred = fold_constants(model)
    g = model.graph
    consumed = {t for n in g.node for t in n.input} | {o.name for o in g.output}
    for t in g.initializer:
        if any(d < 0 for d in t.dims) or math.prod(t.dims) > MAX_TENSOR_ELEMENTS:
            raise UsageError(f"weight {t.name!r} declares the shape {tuple(t.dims)}; at most "
                             f"{MAX_TENSOR_ELEMENTS:,} elements are accepted (AUTOTUNE_MAX_TENSOR_ELEMENTS)")
    try:
        weights = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    except (ValueError, TypeError) as exc:
        raise UsageError(f"the ONNX model's weights cannot be read: {str(exc)[:120]}") from None
    inputs = {vi.name: (_static_shape(vi, "input"), _dtype(vi.type.tensor_type.elem_type))
              for vi in g.input if vi.name not in weights}
    info = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    shapes = {k: v[0] for k, v in inputs.items()} | {k: w.shape for k, w in weights.items()}

    where = ""
    domains = {o.domain: o.version for o in model.opset_import if o.domain not in ("", "ai.onnx")}
    executed: dict = {}

    def run_shapes(t):
        """Shape and dtype of ``t`` from one run in onnxruntime: for the outputs of operators ONNX shape
        inference does not know (onnxruntime's contrib ops)."""
        if not executed:
            executed.update(executed_shapes(model))
        if t not in executed:
            raise UsageError(f"{where}: tensor {t!r} has no known shape (neither ONNX shape inference nor a run "
                             "in onnxruntime gives one)")
        return executed[t]

    def shape_of(t):
        if t in shapes:
            return shapes[t]
        if t in info and (known_shape(info[t]) is not None or not domains):  # symbolic dims: say how to fix them
            return _static_shape(info[t], f"{where}: tensor")
        return run_shapes(t)[0]

    def dtype_of(t):
        if t in info and info[t].type.tensor_type.elem_type:
            return _dtype(info[t].type.tensor_type.elem_type)
        return run_shapes(t)[1]

    nodes = []
    for n in g.node:
        op, where = n.op_type, f"node {n.name or n.output[0]!r} (op {n.op_type})"
        if op in OPTIONAL_OUTPUTS and not any(o in consumed for o in n.output[OPTIONAL_OUTPUTS[op]:]):
            trimmed = onnx.NodeProto()
            trimmed.CopyFrom(n)
            del trimmed.output[OPTIONAL_OUTPUTS[op]:]  # optional outputs nobody reads (Dropout's mask)
            n = trimmed
        foreign = n.domain not in ("", "ai.onnx")  # another operator set: kept as an opaque node
        if foreign and n.domain not in domains:
            raise UsageError(f"{where} is in domain {n.domain!r}, which the model does not import")
        if foreign and (registered := ops.registered_as(op, n.domain, list(n.input))):
            op, foreign = registered, False  # a contrib kernel the rules write
        a = {}
        for at in n.attribute:
            if at.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                raise UsageError(f"{where} has a subgraph attribute {at.name!r}; control flow is not supported")
            v = helper.get_attribute_value(at)
            if isinstance(v, bytes):
                v = v.decode()
            if isinstance(v, onnx.TensorProto):
                v = TensorAttr.of(numpy_helper.to_array(v))
            a[at.name] = v
        if op == "Constant":
            if not isinstance(a.get("value"), TensorAttr):
                raise UsageError(f"{where}: only Constant with a 'value' tensor is supported")
            weights[n.output[0]] = a["value"].array()
            shapes[n.output[0]] = weights[n.output[0]].shape
            continue
        ins = list(n.input)
        if op == "Split":
            if len(ins) > 1 and ins[1]:
                if ins[1] not in weights:
                    raise UsageError(f"{where}: split sizes must be a constant")
                a["split"] = [int(v) for v in weights[ins[1]]]
            ins = ins[:1]
            ax = a.setdefault("axis", 0)
            if "split" not in a:
                dim = shape_of(ins[0])[ax]
                a["split"] = [dim // len(n.output)] * len(n.output)
            a.pop("num_outputs", None)
        if op == "Reshape" and ins[1] not in weights:
            raise UsageError(f"{where}: the target shape must be a constant")
        if op == "Softmax" and opset < 13:  # before opset 13: over all the axes from ``axis`` on, as one
            shape = shape_of(ins[0])
            axis = a.get("axis", 1) % len(shape)
            if math.prod(shape[axis + 1:]) != 1:
                raise UsageError(f"{where}: opset<13 Softmax over several axes is not supported")
            a["axis"] = axis
        fixed = ()
        if ops.is_known(op) and op[0] != "_" and not foreign:
            a = _normalise(op, a, n, shape_of)
            if op in ("Conv", "Gemm") and (len(ins) < 3 or not ins[2]):  # explicit zero bias: uniform patterns
                out_ch = shape_of(ins[1])[0] if op == "Conv" or a.get("transB") else shape_of(ins[1])[1]
                bname = f"{n.output[0]}__zero_bias"
                weights[bname] = np.zeros(out_ch, dtype=np.float32)
                ins = ins[:2] + [bname]
                if op == "Gemm":
                    a["beta"] = 1.0
        else:
            fixed = tuple((shape_of(o), dtype_of(o)) for o in n.output if o)
        node = Node.make(op, ins, [o for o in n.output if o], a, fixed)
        if foreign:
            node = dataclasses.replace(node, domain=n.domain)
        nodes.append(node)
        for o, s in zip(node.outputs, node.fixed):
            shapes[o] = s[0]
    return Graph(nodes, inputs, [o.name for o in g.output], weights, name, opset=opset or None, domains=domains)


def _name_absent_outputs(model):
    """``model`` with each omitted output ('') that comes before a named output of its node given a name
    (``ABSENT_OUTPUT`` and a number): the graph IR keeps a node's outputs as a list of names, and dropping the
    slot would make the named outputs after it the wrong ones."""
    gaps = [n for n in model.graph.node if any(not o for o in n.output[:-1]) and any(n.output)]
    if not gaps:
        return model
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    taken = {t for n in out.graph.node for t in (*n.input, *n.output)} | {vi.name for vi in out.graph.input}
    count = 0
    for n in out.graph.node:
        last = max((i for i, o in enumerate(n.output) if o), default=-1)
        for i in range(last):
            if not n.output[i]:
                while f"{ABSENT_OUTPUT}{count}" in taken:
                    count += 1
                n.output[i] = f"{ABSENT_OUTPUT}{count}"
                count += 1
    return out


def _attr_value(v):
    from onnx import numpy_helper

    if isinstance(v, TensorAttr):
        return numpy_helper.from_array(v.array())
    if isinstance(v, tuple):
        return list(v)
    return v


def to_onnx(graph: Graph):
    """Export (after folding weight-only subgraphs) as an ONNX ModelProto onnxruntime loads, at the opset the
    graph was imported at (``EXPORT_OPSET`` for one built here)."""
    _onnx()
    from onnx import helper, numpy_helper
    g = graph.folded()
    opset = graph.opset or EXPORT_OPSET
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in g.weights.items()]
    read = {t for n in g.nodes for t in n.inputs} | set(g.outputs)
    nodes = []
    for i, n in enumerate(g.nodes):
        if n.op.startswith("_"):
            raise UsageError(f"internal op {n.op} reads an activation; it cannot be exported")
        a = {k: _attr_value(v) for k, v in n.attrs}
        ins = list(n.inputs)
        if n.op == "Split" and opset >= 13:  # the sizes are an input since opset 13, an attribute before
            sname = f"{n.outputs[0]}__split"
            inits.append(numpy_helper.from_array(np.asarray(a.pop("split"), dtype=np.int64), sname))
            ins.append(sname)
        op_type, domain = ops.onnx_type(n.op, n.domain)
        outs = ["" if t.startswith(ABSENT_OUTPUT) and t not in read else t for t in n.outputs]  # omitted again
        nodes.append(helper.make_node(op_type, ins, outs, name=f"n{i}_{n.op}", domain=domain or None, **a))

    def vi(t):
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(g.dtype[t]))
        return helper.make_tensor_value_info(t, elem, list(g.shape[t]))

    og = helper.make_graph(nodes, g.name, [vi(t) for t in g.inputs], [vi(t) for t in g.outputs], inits)
    used = {d for n in g.nodes if (d := ops.onnx_type(n.op, n.domain)[1])}
    versions = {**ops.DOMAIN_VERSIONS, **graph.domains}
    ids = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, versions.get(d, 1)) for d in sorted(used)]
    model = helper.make_model(og, opset_imports=ids, producer_name="autotune")
    model.ir_version = ir_version_for(ids)
    return model


def ir_version_for(opset_ids) -> int:
    """The oldest IR version that carries these operator sets: what the installed onnxruntime loads."""
    from onnx import helper

    try:
        return max(helper.find_min_ir_version_for(opset_ids), 3)
    except (AttributeError, ValueError):  # an onnx without the table, or an opset it does not know
        return EXPORT_IR_VERSION


def save(graph: Graph, path: str) -> None:
    import onnx
    onnx.save(to_onnx(graph), path)
