"""A graph saved by ``Graph.save`` loads as the same graph: the checks of a model JSON accept every op the builders
and the ONNX importer make, and keep the digest (the task of a file model) as it was."""

import json

import pytest

from autotune.errors import UsageError
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.models import get_model


@pytest.mark.parametrize("name", ["gpt-350m:layers=2", "gpt-moe-350m-128:layers=2", "llama-3-8b:layers=2",
                                  "bert-large:layers=1", "mlp-unity", "resnet101", "inception-v3", "dlrm", "rnnlm",
                                  "nmt"])
def test_a_saved_graph_loads_as_itself(name):
    g = get_model(name, 8)
    loaded = Graph.from_json(json.loads(json.dumps(g.to_json())))
    assert loaded.digest() == g.digest() and [op.name for op in loaded.ops] == [op.name for op in g.ops]
    assert Graph.from_json(g.to_json()).digest() == g.digest()  # a dict from Python: tuples, not lists


def test_a_saved_onnx_graph_loads_as_itself(tmp_path):
    from autotune.search_spaces.graphs import model_zoo
    from autotune.search_spaces.parallel.onnx_import import load_onnx

    path = tmp_path / "m.onnx"
    path.write_bytes(model_zoo.build("squeezenet11", small=True).SerializeToString())
    g = load_onnx(str(path), None, None)
    assert Graph.from_json(json.loads(json.dumps(g.to_json()))).digest() == g.digest()


def test_a_cycle_and_a_missing_producer_are_told_apart():
    d = get_model("mlp-unity", 8).to_json()
    first, second = d["ops"][1]["name"], d["ops"][2]["name"]
    d["ops"][1]["inputs"] = [[second, d["ops"][1]["inputs"][0][1]]]
    with pytest.raises(UsageError, match=f"op '{first}' reads '{second}', which is not an earlier op"):
        Graph.from_json(d)
    d["ops"][1]["inputs"] = [["nowhere", d["ops"][1]["inputs"][0][1]]]
    with pytest.raises(UsageError, match="reads 'nowhere', which is no op of the model"):
        Graph.from_json(d)
