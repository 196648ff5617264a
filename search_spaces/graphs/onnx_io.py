"""ONNX in and out: import to the graph IR (own topological sort, defaults made explicit,
unsupported constructs rejected naming node and op) and export loadable by onnxruntime."""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.ir import Graph, Node, TensorAttr

from autotune.errors import MissingDependencyError, UsageError

EXPORT_OPSET = 17  # for a graph that did not come from an ONNX file (a model is written at its own opset)
EXPORT_IR_VERSION = 8  # onnxruntime >= 1.14 loads IR 8 / opset 17
OLDEST_OPSET = 7  # older models are converted to it by onnx's version converter
# outputs an inference graph may leave unused, after the ones it needs: (op, outputs kept)
OPTIONAL_OUTPUTS = {"Dropout": 1, "BatchNormalization": 1, "MaxPool": 1, "LayerNormalization": 1}
NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


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


# The most elements a declared tensor may have (2^32: 16 GiB of fp32): a model file cannot make the
# optimizer allocate more than this for one input or activation.
MAX_TENSOR_ELEMENTS = int(os.environ.get("AUTOTUNE_MAX_TENSOR_ELEMENTS", str(1 << 32)))


def _static_shape(vi, what: str) -> tuple[int, ...]:
    dims = vi.type.tensor_type.shape.dim
    out = []
    for d in dims:
        if not d.HasField("dim_value"):
            hint = (f"give it with --input-shape {vi.name}={'x'.join(str(x.dim_value) if x.HasField('dim_value') else 'N' for x in dims)}"
                    if what == "input" else "give every input a static shape (--input-shape NAME=1x128)")
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


def _known_shape(vi) -> tuple[int, ...] | None:
    dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else None
    if dims is None or not vi.type.tensor_type.HasField("shape") or not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def fold_constants(model, rounds: int = 4):
    """The model with every node whose inputs are all constants evaluated into an initializer (onnx's
    reference evaluator, at the model's opset), ``Shape`` and ``Size`` of tensors of known static shape
    included: the shape arithmetic exporters write (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) becomes
    constant targets. Ops the graph IR knows are folded only when they compute integers (shapes): on float
    weights they stay weight-only nodes, which rules may rewrite and the export folds. Shapes are
    re-inferred between rounds, as a folded shape makes more shapes known."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    opsets = list(model.opset_import)
    for _ in range(rounds):
        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # noqa: BLE001 - shapes stay unknown; the import names what it cannot handle
            inferred = model
        g = model.graph
        consts = {t.name: t for t in g.initializer}
        shapes = {vi.name: _known_shape(vi) for vi in list(inferred.graph.value_info) + list(g.input)}
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
            if (values is None or any(np.asarray(v).size > MAX_TENSOR_ELEMENTS for v in values)
                    or (ops.is_known(n.op_type) and not all(np.issubdtype(np.asarray(v).dtype, np.integer)
                                                            for v in values))):
                # ops the graph IR knows stay as weight-only nodes (rules see them; the export folds them)
                keep.append(n)
                continue
            for o, v in zip(n.output, values):
                if o:
                    consts[o] = new[o] = numpy_helper.from_array(np.asarray(v), o)
            changed = True
        if not changed:
            break
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
    return model


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
            raise UsageError(f"--input-shape {spec!r}: give NAME=DIMS with positive dims joined by x, e.g. input_ids=1x128")
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
            raise UsageError(f"--input-shape names {name!r}, which is not an input of the model; its inputs: "
                             f"{', '.join(inputs) or 'none'}")
        dims = inputs[name].type.tensor_type.shape.dim
        if len(dims) != len(shape):
            raise UsageError(f"--input-shape {name}: the model's input has {len(dims)} dims, not {len(shape)}")
        for d, n in zip(dims, shape):
            if d.HasField("dim_value") and d.dim_value != n:
                raise UsageError(f"--input-shape {name}: dim {d.dim_value} of the model is fixed, not {n}")
            d.ClearField("dim_param")
            d.dim_value = n
    return out


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
        raise UsageError("the ONNX model has no nodes or no outputs (an empty file, or not an ONNX model)")
    model = with_input_shapes(model, input_shapes or {})
    try:
        return _import(onnx, model, name)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"the ONNX model cannot be imported: {exc.__class__.__name__}: {str(exc)[:160]}") from None


def _import(onnx, model, name: str | None) -> Graph:
    from onnx import helper, numpy_helper

    name = name or model.graph.name or "graph"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if 0 < opset < OLDEST_OPSET:
        try:
            model = onnx.version_converter.convert_version(model, OLDEST_OPSET)
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"the model's opset {opset} is older than {OLDEST_OPSET} and onnx's version converter "
                             f"cannot convert it: {str(exc)[:160]}") from None
        opset = OLDEST_OPSET
    model = fold_constants(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - opaque ops without inferred shapes are rejected later
        inferred = model
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
            executed.update(_executed_shapes(model))
        if t not in executed:
            raise UsageError(f"{where}: tensor {t!r} has no known shape (neither ONNX shape inference nor a run "
                             "in onnxruntime gives one)")
        return executed[t]

    def shape_of(t):
        if t in shapes:
            return shapes[t]
        if t in info and _known_shape(info[t]) is not None:
            return _static_shape(info[t], f"{where}: tensor")
        if t in info and not domains:
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


def _executed_shapes(model) -> dict[str, tuple[tuple[int, ...], str]]:
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
        so.graph_optimization_level, so.log_severity_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL, 3
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        specs = [(i.name, i.shape, ORT_TYPES.get(i.type, np.float32)) for i in sess.get_inputs()]
        values = sess.run(None, random_inputs(specs, 0, index_bounds(model)))
    except Exception as exc:  # noqa: BLE001 - the runtime's own error, as a usage error
        raise UsageError(f"the model has operators ONNX shape inference does not know, and onnxruntime cannot "
                         f"run it to find their shapes: {str(exc).splitlines()[0][:200]}") from None
    return {o.name: (tuple(v.shape), str(v.dtype)) for o, v in zip(sess.get_outputs(), values)}


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
        nodes.append(helper.make_node(n.op, ins, list(n.outputs), name=f"n{i}_{n.op}", domain=n.domain or None, **a))

    def vi(t):
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(g.dtype[t]))
        return helper.make_tensor_value_info(t, elem, list(g.shape[t]))

    og = helper.make_graph(nodes, g.name, [vi(t) for t in g.inputs], [vi(t) for t in g.outputs], inits)
    used = {n.domain for n in g.nodes if n.domain}
    ids = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in graph.domains.items() if d in used]
    model = helper.make_model(og, opset_imports=ids, producer_name="autotune")
    try:
        model.ir_version = max(helper.find_min_ir_version_for(ids), 3)
    except (AttributeError, ValueError):  # an onnx without the table, or an opset it does not know
        model.ir_version = EXPORT_IR_VERSION
    return model


def save(graph: Graph, path: str) -> None:
    import onnx
    onnx.save(to_onnx(graph), path)
