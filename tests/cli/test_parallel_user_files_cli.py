"""`autotune tune parallel` with a user's own files: a cluster file or a JSON graph with a mistake is refused in one
line naming the file and the fault (exit status 2), and --output or --timeline never overwrites a file the command
reads (the model, the cluster, the database)."""

import json
import sqlite3

import pytest

from autotune.search_spaces.parallel.graph import Builder
from parallel_cli_helpers import in_tmp, run  # noqa: F401 (in_tmp: the autouse fixture)

CLUSTER = "name: mine\nnodes: 1\nper_node: 4\ndevice: A100\nintra_bw: 300e9\ninter_bw: 25e9\n"
MODEL = "transformer:layers=1,hidden=64,heads=2,seq=16,vocab=100"


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.output, r.stderr
    return r.stderr


@pytest.mark.parametrize("name, text, fault", [
    ("c.yaml", "", "is empty"),
    ("c.yaml", "# nothing but a comment\n", "is empty"),
    ("c.json", "", "is empty"),
    ("c.yaml", CLUSTER.replace("inter_bw: 25e9\n", ""), "lacks inter_bw"),
    ("c.yaml", CLUSTER.replace("intra_bw: 300e9", "intra_bw: 0"), "intra_bw must be a finite positive number"),
    ("c.yaml", CLUSTER.replace("intra_bw: 300e9", "intra_bw: 300GB/s"), "of bytes/s (300e9 for 300 GB/s)"),
    # a figure in another unit (GB/s, microseconds, TFLOP/s) is no real machine's, not a slow one
    ("c.yaml", CLUSTER.replace("intra_bw: 300e9", "intra_bw: 300"), "intra_bw is 300 bytes/s, no real device's"),
    ("c.yaml", CLUSTER + "intra_latency: 3\n", "intra_latency is 3 seconds, no real device's"),
    ("c.yaml", CLUSTER.replace("device: A100", "device: {name: L40S, flops_fp32: 91.6, flops_fp16: 362e12, "
                                                "memory_bytes: 48e9, mem_bandwidth: 864e9}"),
     "device.flops_fp32 is 91.6 FLOP/s"),
    ("c.yaml", CLUSTER.replace("device: A100", "device: {name: L40S, flops_fp32: 91.6e12, flops16: 362e12, "
                                                "memory_bytes: 48e9, mem_bandwidth: 864e9}"),
     "it lacks flops_fp16; unknown field(s) flops16 (did you mean 'flops_fp16'?)"),
    ("c.yaml", CLUSTER + "intra_latecy: 3e-6\n", "unknown key(s) 'intra_latecy'"),
    ("c.yaml", CLUSTER.replace("A100", "A200"), "unknown device 'A200'"),
    # valid JSON whose figure is not finite: not called invalid JSON
    ("c.json", '{"name": "c", "nodes": 1, "per_node": 4, "device": "A100", "intra_bw": Infinity, "inter_bw": 25e9}',
     "intra_bw must be a finite positive number"),
])
def test_a_cluster_files_fault_is_one_line_naming_the_file(name, text, fault, tmp_path):
    """Each fault of a cluster file was a line without the file's name (a run names several files), an empty or
    comment-only YAML file "not a NoneType", a non-finite JSON figure "not valid JSON", and a bandwidth given in
    GB/s ran as a link of 300 bytes/s."""
    (tmp_path / name).write_text(text)
    err = one_line_error(run("--model", MODEL, "--cluster", name, "--trials", 0))
    assert err.startswith(f"error: cluster file {name!r}") and fault in err, err
    assert "not valid JSON" not in err
    assert not (tmp_path / "parallel.db").exists()


def test_a_cluster_files_extension_is_read_in_any_case(tmp_path):
    """MY.YAML is a cluster file, as my.yaml is (a model's MODEL.ONNX already was): not an unknown preset."""
    (tmp_path / "MY.YAML").write_text(CLUSTER)
    r = run("--model", MODEL, "--cluster", "MY.YAML", "--trials", 0, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["cluster"] == "mine"


def _graph() -> dict:
    g = Builder("tiny", 8)
    x = g.input("x", {"b": 8, "f": 64}, {"b": "sample", "f": "attribute"})
    h = g.elementwise(g.linear(x, 128, "fc1"), "relu", "relu")
    g.loss(g.linear(h, 10, "fc2"))
    return g.build().to_json()


def _set(path: list, value):
    def change(d):
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return change


def _drop(path: list):
    def change(d):
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]
    return change


@pytest.mark.parametrize("change, fault", [
    (_set(["ops", 1, "roles", "o"], "params"), "op 'fc1': unknown role 'params'"),
    (_drop(["ops", 1, "dims", "o"]), "op 'fc1': roles name dim 'o', which dims does not size"),
    (_drop(["ops", 1, "roles", "o"]), "op 'fc1': roles give dim 'o' no role"),
    (_set(["ops", 1, "dims", "o"], -128), "op 'fc1': the size of dim 'o' must be a whole number >= 1, not -128"),
    (_set(["ops", 1, "dims", "o"], 0), "the size of dim 'o' must be a whole number >= 1, not 0"),
    (_set(["ops", 1, "dims", "o"], 128.5), "the size of dim 'o' must be a whole number >= 1, not 128.5"),
    (_set(["ops", 1, "flops"], "many"), "op 'fc1': flops must be a finite number >= 0, not 'many'"),
    (_set(["ops", 1, "out"], ["a0", "z"]), "op 'fc1': out must be a list of its dims (a0, o, i)"),
    (_set(["ops", 1, "weight"], ["i", "q"]), "op 'fc1': weight must be a list of its dims"),
    (_set(["ops", 2, "inputs"], [["fc1", ["a0", "zz"]]]), "op 'relu': the axes of input 'fc1' must be a list"),
    (_set(["ops", 2, "inputs"], [["fcX", ["a0", "a1"]]]), "op 'relu' reads 'fcX', which is no op of the model"),
    (_set(["ops", 1, "inputs"], [["fc2", ["a0", "i"]]]), "op 'fc1' reads 'fc2', which is not an earlier op"),
    (_set(["ops", 1, "tp"], "zz"), "op 'fc1': tp must be one of its dims"),
    (_set(["ops", 1, "layer"], "one"), "op 'fc1': layer must be a whole number >= 0 or null"),
    (_set(["ops", 1, "colour"], "red"), "op 'fc1': unknown field(s) 'colour'"),
    (_drop(["ops", 1, "type"]), "op 'fc1' lacks type"),
    (_set(["meta"], [1]), "its meta an object"),
    (_set(["batch"], 0), "the model JSON's batch must be a whole number >= 1, not 0"),
])
def test_a_json_graphs_fault_is_one_line_naming_the_file_and_the_op(change, fault, tmp_path):
    """A JSON graph with a role, a size or a dim the ops do not have, a number that is not one, or a field of
    the wrong kind was a KeyError, TypeError or ZeroDivisionError traceback from inside the simulator (or, for a
    batch of 0, a campaign at batch 0)."""
    d = _graph()
    change(d)
    (tmp_path / "g.json").write_text(json.dumps(d))
    err = one_line_error(run("--model", "g.json", "--cluster", "dgx-a100-x1", "--trials", 0))
    assert err.startswith("error: the JSON graph 'g.json' is not a model: ") and fault in err, err
    assert not (tmp_path / "parallel.db").exists()


def test_the_json_graph_as_saved_runs(tmp_path):
    (tmp_path / "g.json").write_text(json.dumps(_graph()))
    r = run("--model", "g.json", "--cluster", "dgx-a100-x1", "--trials", 0, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["best"]["iteration_s"] > 0


def test_output_and_timeline_never_overwrite_a_file_the_command_reads(tmp_path):
    """-o onto the --db file replaced the database (every campaign in it) with the strategy's JSON, and -o onto the
    model or cluster file replaced the user's file; now each is refused before anything runs."""
    (tmp_path / "g.json").write_text(json.dumps(_graph()))
    (tmp_path / "c.yaml").write_text(CLUSTER)
    assert run("--model", "g.json", "--cluster", "c.yaml", "--trials", 0).exit_code == 0  # parallel.db holds it
    kept = {name: (tmp_path / name).read_bytes() for name in ("g.json", "c.yaml", "parallel.db")}
    for args, fault in [
        (["-o", "parallel.db"], "--output 'parallel.db' is the file of --db"),
        (["-o", "./g.json"], "--output './g.json' is the file of --model"),
        (["-o", str(tmp_path / "c.yaml")], "is the file of --cluster"),
        (["-o", "t.png", "--timeline", "t.png"], "--timeline 't.png' is the file of --output"),
    ]:
        err = one_line_error(run("--model", "g.json", "--cluster", "c.yaml", "--trials", 0, *args))
        assert fault in err and "would overwrite it" in err, err
    assert {name: (tmp_path / name).read_bytes() for name in kept} == kept
    with sqlite3.connect(tmp_path / "parallel.db") as con:
        assert con.execute("select count(*) from sqlite_master").fetchone()[0] > 0


def test_the_report_keeps_its_columns_with_a_long_best_source():
    """The best strategy's label ("best (data-parallel zero-1)", a seed layout's name) is longer than the label
    column, which pushed that row's figures right of the baselines'."""
    r = run("--model", MODEL, "--cluster", "dgx-a100-x1", "--trials", 0)
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stdout.splitlines() if "ms/iter" in line]
    assert len(rows) >= 4 and rows[0].startswith("  best (") and rows[0].index(")") > 22  # longer than the column
    assert len({line.index("ms/iter") for line in rows}) == 1, rows
    assert len({line.index("samples/s") for line in rows}) == 1, rows
