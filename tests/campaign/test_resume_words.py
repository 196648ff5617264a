"""A resume command spells a whole-number budget as the user typed it."""

from autotune.campaign import resume_command


def test_a_whole_float_budget_is_printed_without_its_fraction():
    graph = {"kind": "graph", "args": {"model": "m.onnx", "trials": 3000, "time_budget": 45.0, "alpha": 1.05},
             "files": {"output": "m-opt.onnx"}}
    assert resume_command("g", graph) == ("autotune tune graph m.onnx --alpha 1.05 --trials 3000 --time-budget 45 "
                                          "-o m-opt.onnx --campaign g")
