"""ONNX import of models a user brings that the import used to get wrong or explain wrongly: an op the graph IR
does not know that omits an output before one it names, an input with no shape at all, a shape that depends on
the data, a model with no nodes, an --input-shape with a symbolic dim left in it, and onnxruntime's messages."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from autotune.errors import UsageError
from autotune.runners.onnx_ops import max_errors
from autotune.search_spaces.graphs import onnx_io
from autotune.search_spaces.graphs.onnx_prepare import parse_input_shapes, runtime_message


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_an_opaque_op_that_omits_an_output_before_a_named_one_round_trips_unchanged():
    """LSTM asked for its last hidden state alone (outputs '', 'yh'): outputs are positional, and the import kept
    'yh' as the LSTM's first output, so the exported model returned the whole sequence Y under its name."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 16, 6)).astype(np.float32), "W")
    r = numpy_helper.from_array(rng.standard_normal((1, 16, 4)).astype(np.float32), "R")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 6])
    yh = helper.make_tensor_value_info("yh", TensorProto.FLOAT, [1, 2, 4])
    model = _model([helper.make_node("Relu", ["x"], ["rx"]),
                    helper.make_node("LSTM", ["rx", "W", "R"], ["", "yh"], hidden_size=4)], [x], [yh], [w, r])
    g = onnx_io.from_onnx(model)
    assert g.shape["yh"] == (1, 2, 4)
    out = onnx_io.to_onnx(g)
    assert [list(n.output) for n in out.graph.node] == [["rx"], ["", "yh"]]  # omitted again
    assert max_errors(model, out, trials=1)["max_abs_error"] == 0


def test_an_input_without_a_shape_is_refused_naming_the_input_shape_that_gives_it_one():
    """An input whose type has no shape (not even a rank) was read as a scalar: a crash in shape inference
    further on, and --input-shape refused it as having 0 dims."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])], [x], [y], [w])
    with pytest.raises(UsageError, match=r"^input 'x' has no shape, not even a number of dims; give it with "
                                         r"input_shapes=\{'x': \(1, 128\)\}"):
        onnx_io.from_onnx(model)
    g = onnx_io.from_onnx(model, input_shapes={"x": (1, 3, 8, 8)})
    assert g.inputs["x"][0] == (1, 3, 8, 8) and g.shape["y"] == (1, 4, 6, 6)


def test_a_data_dependent_shape_is_not_blamed_on_the_inputs():
    """NonZero's output size depends on the values: the message said to give every input a static shape, which
    they all had."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    model = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
                    helper.make_node("Transpose", ["nz"], ["y"])], [x], [y])
    with pytest.raises(UsageError, match="NonZero.*data-dependent shape") as info:
        onnx_io.from_onnx(model)
    assert "input_shapes" not in str(info.value) and "static shape" not in str(info.value)


def test_a_model_with_no_nodes_is_not_called_an_empty_file():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    with pytest.raises(UsageError, match=r"^the ONNX model has no nodes \(its outputs are its inputs or weights\)"):
        onnx_io.from_onnx(_model([], [x], [x]))
    with pytest.raises(UsageError, match="an empty file, or not an ONNX model"):
        onnx_io.from_onnx(onnx.ModelProto())


def test_an_input_shape_with_a_symbolic_dim_left_in_it_names_that_dim():
    """The hint for a symbolic batch reads `--input-shape x=Nx16`; typed as it is, the refusal names the N."""
    with pytest.raises(UsageError, match=r"\('N' is not a number: give each symbolic dim a size\)$"):
        parse_input_shapes(["x=Nx3x32x32"])
    with pytest.raises(UsageError, match=r"e\.g\. input_ids=1x128$"):
        parse_input_shapes(["x=0x3"])


def test_onnxruntime_messages_keep_the_reason_rather_than_its_source_location():
    """onnxruntime writes the C++ file, line and function signature before the reason; cut at 300 characters,
    the message said where in onnxruntime's source, not what is wrong."""
    message = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. Name:'' "
               "Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:91 "
               "onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, onnxruntime::"
               "TensorShapeVector&, bool) input_shape_size == requested_shape_size was false. The input tensor "
               "cannot be reshaped to the requested shape. Input shape:{1,3,8,8}, requested shape:{12,16,16}\nmore")
    assert runtime_message(RuntimeError(message)) == (
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. Name:'' Status "
        "Message: input_shape_size == requested_shape_size was false. The input tensor cannot be reshaped to the "
        "requested shape. Input shape:{1,3,8,8}, requested shape:{12,16,16}")
    assert runtime_message(RuntimeError("")) == "RuntimeError"
    assert runtime_message(ValueError("FAIL : /src/model.cc:245 Missing opset in the model.")) == (
        "FAIL : Missing opset in the model.")


def test_an_input_that_is_not_a_tensor_is_named_as_such():
    """A sequence input has no tensor shape: it is not an input without a shape, which --input-shape would fix."""
    s = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2, 3])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    model = _model([helper.make_node("SequenceAt", ["s", "i"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
                   [s, i], [y])
    with pytest.raises(UsageError, match=r"^input 's' is not a tensor \(sequence\); only tensors are supported$"):
        onnx_io.from_onnx(model)
