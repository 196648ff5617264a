"""optimize_graph: the graph search as an engine campaign (trials, algorithms, budgets, the op-cost model)."""

import pytest
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.drivers.graph import faster_beyond_noise, graph_algorithm, optimize_graph
from autotune.errors import UsageError
from autotune.runners.graph import BACKENDS
from autotune.runners.timing import compare_blocks
from autotune.search_spaces.graphs import model_zoo, onnx_io
from autotune.search_spaces.graphs.space import GraphSpace
from autotune.testing.graphs import fake_backend


@pytest.fixture
def fake(monkeypatch):
    """The "fake" device: op times as a fixed function of each op (fast, exactly repeatable)."""
    monkeypatch.setitem(BACKENDS, "fake", fake_backend)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), path)
    return path


def test_every_evaluated_graph_is_a_trial_of_the_campaign(fake, resnet, tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    r = optimize_graph(resnet, tmp_path / "o.onnx", device="fake", trials=40, batch=8, db=url, campaign="g", rounds=3)
    assert r["campaign"] == "g" and r["trials"] == r["evaluated"] == 40 and r["status"] == "finished"
    db = open_database(url)
    df = queries.trials(db, campaign="g")
    assert len(df) == 40 and df["candidate_key"].is_unique and (df["task"] == "resnet50").all()
    assert r["best_cost"] == pytest.approx(df["cost"].min())
    space = GraphSpace(onnx_io.from_onnx(onnx.load(resnet)), name="resnet50")
    assert df["task_key"].eq(space.task.key).all()
    for config, key in zip(df["config"], df["candidate_key"]):  # each trial is a rewrite sequence of the model
        assert space.candidate(config).key == key
    assert [] in list(df["config"])
    best = queries.best(db, task="resnet50")
    assert best["config"].iloc[0] == r["best_config"] and [step[0] for step in r["best_config"]] == r["rules_applied"]
    assert queries.convergence(db, "g")["best_so_far"].iloc[-1] == pytest.approx(r["best_cost"])
    plot = CliRunner().invoke(app, ["plot", "convergence", "--campaign", "g", "-o", str(tmp_path / "c.png"), "--db", url])
    assert plot.exit_code == 0 and (tmp_path / "c.png").stat().st_size > 0, plot.output
    # op timings are trials of their own task kind, outside the campaign, under the op runner's device
    ops = queries.trials(db, device="fake-op-runner")
    assert len(ops[ops["campaign"].isna()]) == r["ops_measured"] > 0
    onnx.checker.check_model(onnx.load(tmp_path / "o.onnx"))


def test_a_campaign_resumes_with_a_larger_budget(fake, resnet, tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    first = optimize_graph(resnet, device="fake", trials=16, batch=8, db=url, campaign="g", rounds=3)
    more = optimize_graph(resnet, device="fake", trials=48, batch=8, db=url, campaign="g", rounds=3)
    assert not first["resumed"] and more["resumed"] and more["trials"] == 48
    ref_url = f"sqlite:///{tmp_path / 'ref.db'}"
    once = optimize_graph(resnet, device="fake", trials=48, batch=8, db=ref_url, campaign="g", rounds=3)
    assert more["best_config"] == once["best_config"] and more["best_cost"] == once["best_cost"]
    # no op was timed twice: the resumed search measured only ops the first run had not met
    assert first["ops_measured"] + more["ops_measured"] == once["ops_measured"]
    ops = [queries.trials(open_database(u), device="fake-op-runner") for u in (url, ref_url)]
    assert sorted(ops[0]["candidate_key"]) == sorted(ops[1]["candidate_key"])


def test_without_a_database_named_the_search_is_kept_in_the_working_directory(fake, resnet, tmp_path, monkeypatch):
    """As every driver and command: autotune.db in the working directory, which the queries read afterwards."""
    monkeypatch.chdir(tmp_path)
    r = optimize_graph(resnet, device="fake", trials=8, batch=8, rounds=3)
    assert len(queries.trials(open_database("sqlite:///autotune.db"), campaign=r["campaign"])) == 8


@pytest.mark.parametrize("algorithm", ["taso-queue", "equality-saturation", "backtracking", "mcmc", "evolutionary",
                                       "random", "bandit"])
def test_registered_algorithms_search_graphs(fake, resnet, algorithm):
    r = optimize_graph(resnet, device="fake", algorithm=algorithm, trials=40, batch=8, rounds=3, db=None)
    # equality saturation evaluates the input and the graph it extracts, and is done
    assert r["algorithm"] == algorithm and r["evaluated"] >= (2 if algorithm == "equality-saturation" else 40 - 8)
    assert r["predicted_cost_after_s"] < r["predicted_cost_before_s"] and r["rules_applied"]
    assert r["check"]["passed"]


def test_algorithms_that_cannot_search_graphs_are_refused_before_anything_is_stored(fake, resnet, tmp_path):
    db = tmp_path / "never.db"
    with pytest.raises(UsageError, match="grid. searches knob spaces only .*needs a space with enumerate.*valid here: .*taso-queue"):
        optimize_graph(resnet, device="fake", algorithm="grid", db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="knob spaces only.*valid here: backtracking, bandit, equality-saturation, evolutionary, mcmc, random, taso-queue$"):
        optimize_graph(resnet, device="fake", algorithm="optuna-tpe", db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="unknown algorithm 'nope'"):
        optimize_graph(resnet, device="fake", algorithm="nope", db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="no option.*alpha"):
        optimize_graph(resnet, device="fake", algorithm="mcmc", alpha=1.1, db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="trial budget must be a positive"):
        optimize_graph(resnet, device="fake", trials=0, db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="cannot read ONNX model"):
        optimize_graph(tmp_path / "missing.onnx", device="fake", db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="unknown device 'tpu'; valid: cpu, cuda"):
        optimize_graph(resnet, device="tpu", db=f"sqlite:///{db}")
    assert not db.exists()
    space = GraphSpace(onnx_io.from_onnx(onnx.load(resnet)))
    assert graph_algorithm("backtracking", space, alpha=1.2).config["alpha"] == 1.2


def test_a_search_timing_no_op_is_refused_before_anything_is_stored(fake, resnet, tmp_path):
    """With max_measure=0 every graph's stored cost was a guess at nominal rates (5x the timed cost on
    nasrnn), which the report's timed costs contradicted and later campaigns reused as look-ups."""
    db = tmp_path / "never.db"
    with pytest.raises(UsageError) as err:
        optimize_graph(resnet, device="fake", max_measure=0, db=f"sqlite:///{db}")
    assert str(err.value).startswith("max_measure must be at least 1, not 0: ")
    assert err.value.command_line_message().startswith("--max-measure must be at least 1, not 0: ")
    assert not db.exists()


@pytest.fixture(scope="module")
def nasrnn(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "nasrnn.onnx"
    onnx.save(model_zoo.build("nasrnn", small=True), path)
    return path


def _timed_cost(space, config) -> float:
    """The cost of a rewrite of ``space`` with every op timed by the fake op runner (what a measurement is)."""
    from autotune.runners.graph import OpCosts
    from autotune.testing.graphs import FakeOpRunner

    return OpCosts(FakeOpRunner(), max_measure=None, model=False, fusion=False).graph_cost(
        space.graph(space.candidate(config)))


def test_costs_resting_on_untimed_ops_are_stored_apart_and_never_looked_up_as_measured(fake, nasrnn, tmp_path):
    """With --max-measure 3 below NasRNN's distinct ops, the graph costs the search stores are partly guessed: they
    are trials of a device of the campaign's own ("... (estimated op costs)"), so a later campaign of the model on
    the device looks none of them up, measures every graph with all its ops timed, and the device's best is a
    measured cost. (They were OK trials of the device itself, reused by the next campaign as measurements.)"""
    url = f"sqlite:///{tmp_path / 'g.db'}"
    capped = optimize_graph(nasrnn, device="fake", trials=30, max_measure=3, db=url, campaign="capped", rounds=3)
    assert capped["op_costs"] == "estimated" and capped["graph_device"] == "fake-op-runner (estimated op costs)"
    assert capped["ops_measured"] == 3 + capped["ops_confirmed"] and capped["ops_confirmed"] > 0
    timed = optimize_graph(nasrnn, device="fake", trials=30, db=url, campaign="timed", rounds=3)
    assert timed["op_costs"] == "timed" and timed["graph_device"] == "fake-op-runner"
    assert timed["evaluated"] == timed["trials"] == 30  # nothing looked up
    db = open_database(url)
    space = GraphSpace(onnx_io.from_onnx(onnx.load(nasrnn)), name="nasrnn")
    guessed = queries.trials(db, campaign="capped")
    assert (guessed["device"] == "fake-op-runner (estimated op costs)").all()
    assert any(abs(c - _timed_cost(space, cfg)) > 1e-9 for c, cfg in zip(guessed["cost"], guessed["config"]))
    measured = queries.trials(db, campaign="timed")
    assert (measured["device"] == "fake-op-runner").all() and (measured["status"] == "OK").all()
    for cost, config in zip(measured["cost"], measured["config"]):
        assert cost == pytest.approx(_timed_cost(space, config), rel=1e-9)
    best = queries.best(db, task="nasrnn", device="fake-op-runner")
    assert best["cost"].iloc[0] == pytest.approx(_timed_cost(space, best["config"].iloc[0]), rel=1e-9)
    # op timings: every op timed once, stored as op trials of the op runner's device (outside any campaign)
    ops = queries.trials(db, device="fake-op-runner")
    assert len(ops[ops["campaign"].isna()]) == capped["ops_measured"] + timed["ops_measured"]


def test_a_campaign_keeps_the_way_it_started_when_resumed(fake, nasrnn, tmp_path):
    """A capped campaign resumed without --max-measure stays on its own device with its recipe's cap; a timed one
    resumed with --max-measure stays timed; --fresh gives a capped campaign a new device, so it looks up none of
    its deleted predecessor's estimates."""
    url = f"sqlite:///{tmp_path / 'g.db'}"
    first = optimize_graph(nasrnn, device="fake", trials=10, max_measure=3, db=url, campaign="c", rounds=3)
    more = optimize_graph(nasrnn, device="fake", trials=20, db=url, campaign="c", rounds=3)
    assert more["resumed"] and more["op_costs"] == "estimated" and more["graph_device"] == first["graph_device"]
    assert more["ops_measured"] == more["ops_confirmed"]  # its cap was spent by the first run
    db = open_database(url)
    assert queries.trials(db, campaign="c")["device"].nunique() == 1
    again = optimize_graph(nasrnn, device="fake", trials=10, max_measure=3, db=url, campaign="c", rounds=3, fresh=True)
    assert not again["resumed"] and again["evaluated"] == again["trials"] == 10
    t = optimize_graph(nasrnn, device="fake", trials=5, db=url, campaign="t", rounds=3)
    t2 = optimize_graph(nasrnn, device="fake", trials=10, max_measure=1, db=url, campaign="t", rounds=3)
    assert t2["resumed"] and t["op_costs"] == t2["op_costs"] == "timed"


def test_the_op_cost_model_is_trained_and_stored_with_the_campaign(fake, tmp_path):
    src = tmp_path / "inception.onnx"
    onnx.save(model_zoo.build("inception_v3", small=True), src)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    r = optimize_graph(src, device="fake", trials=24, max_measure=20, db=url, campaign="inc", rounds=3)
    assert r["ops_estimated"] > 0 and r["ops_confirmed"] > 0  # beyond the cap ops were predicted, then timed
    db = open_database(url)
    models = queries.cost_models(db)
    assert len(models) >= 1 and set(models["model"]) == {"graph-ops"}
    assert (models["campaign"] == "inc").all() and (models["task"] == "inception").all()
    model, task, info = db.load_cost_model(campaign="inc")
    assert model.trained and task.kind == "graph" and info["n_samples"] >= 16


def test_time_budget_stops_the_search(fake, resnet):
    r = optimize_graph(resnet, device="fake", time_budget=0.01, batch=1, rounds=3, db=None)
    assert r["status"] == "time-budget" and r["evaluated"] < 20


def test_sign_test_keeps_only_clear_wins():
    before = [1.0 + 0.01 * i for i in range(20)]
    assert faster_beyond_noise(before, [b * 0.9 for b in before])[0]
    assert not faster_beyond_noise(before, [b * 0.999 for b in before])[0]  # < 1% gain
    noisy = [b * (0.95 if i % 2 else 1.05) for i, b in enumerate(before)]
    assert not faster_beyond_noise(before, noisy)[0]


def test_block_verdict_needs_a_gain_that_holds_over_the_blocks():
    before = [1.0, 1.01, 0.99, 1.0, 1.02]
    assert compare_blocks(before, [b / 1.05 for b in before]) == "faster"
    assert compare_blocks(before, [b * 1.05 * (1 + 0.002 * i) for i, b in enumerate(before)]) == "slower"
    assert compare_blocks(before, [b / 1.005 for b in before]) == "within noise"  # below 1%
    assert compare_blocks(before, [b * f for b, f in zip(before, (0.9, 1.12, 0.95, 1.1, 0.97))]) == "within noise"
    assert compare_blocks([1.0], [0.5]) == "within noise"  # one block is no evidence


def test_a_rewritten_model_the_backend_cannot_run_keeps_the_original_and_an_unrunnable_model_is_a_usage_error():
    """The end-to-end check on a fake backend whose numeric check fails on any model but the original: the
    original is kept with the failure in the report; when the original itself does not run, exit status 2
    naming the backend, not a traceback."""
    from dataclasses import replace

    from autotune.drivers.graph import finalize

    model = model_zoo.build("resnet50", small=True)
    graph = onnx_io.from_onnx(model)

    def only_the_original(ref, new, trials=3):
        if new is not ref:
            raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH : fake failure\nmore lines")
        return {"max_abs_error": 0.0, "max_rel_error": 0.0}

    backend = replace(fake_backend(), max_errors=only_the_original)
    kept, report = finalize(model, graph, True, backend, rounds=3)
    assert kept is model and not report["kept"] and report["reason"] == "numeric check failed"
    assert "does not run: [ONNXRuntimeError]" in report["check"]["error"] and "more lines" not in report["check"]["error"]

    def nothing_runs(ref, new, trials=3):
        raise RuntimeError("fake: unsupported op")

    with pytest.raises(UsageError, match="fake cannot run the model: fake: unsupported op"):
        finalize(model, graph, True, replace(fake_backend(), max_errors=nothing_runs), rounds=3)


def test_a_search_can_start_from_a_peer_optimizers_output(tmp_path):
    """--start-from onnxruntime: onnxruntime's offline optimizer writes fused contrib ops (FusedConv), which
    the search imports as opaque nodes; the search starts from that model when it is faster than the input,
    and the model kept passes the numeric check against the input either way."""
    from autotune.drivers.graph_peers import ort_offline

    model = model_zoo.build("resnet50", small=True)
    peer = ort_offline(model)
    assert any(n.domain == "com.microsoft" for n in peer.graph.node)
    g = onnx_io.from_onnx(peer)
    assert any(n.domain == "com.microsoft" for n in g.nodes) and onnx_io.to_onnx(g).graph.node
    r = optimize_graph(model, str(tmp_path / "o.onnx"), trials=5, rounds=5, start_from="onnxruntime", db=None)
    assert r["started_from"] in ("onnxruntime", "original") and r["check"]["passed"]
    assert (r["start_speedup"] > 1.0) == (r["started_from"] == "onnxruntime")
    with pytest.raises(UsageError, match="start from one of onnxruntime, ort-transformers, onnxsim or best"):
        optimize_graph(model, trials=1, start_from="tvm", db=None)


def test_a_peer_is_a_start_only_when_faster_beyond_noise(monkeypatch):
    """Of the peers' outputs, the search starts from the fastest of those faster than the model over the
    blocks of fresh sessions; one within noise of the model (0.5% here) is not a start."""
    from autotune.drivers import graph_peers
    from autotune.runners import onnx_ops

    model = model_zoo.build("resnet50", small=True)
    outs = {"onnxruntime": "slightly", "onnxsim": "clearly"}
    factor = {"model": 1.0, "slightly": 1 / 1.005, "clearly": 1 / 1.05}
    monkeypatch.setattr(graph_peers, "peer_outputs", lambda m, which: {k: outs[k] for k in outs if which in (k, "best")})

    def blocks(models, rounds, threads):
        wobble = (1.0, 1.01, 0.99, 1.0, 1.02)  # shared by every model within a block
        return [{"median_s": factor[m if isinstance(m, str) else "model"],
                 "block_medians": [w * factor[m if isinstance(m, str) else "model"] for w in wobble]} for m in models]

    monkeypatch.setattr(onnx_ops, "blocked_latency", blocks)
    name, out, gain = graph_peers.fastest(model, "best")
    assert (name, out) == ("onnxsim", "clearly") and gain == pytest.approx(1.05)
    assert graph_peers.fastest(model, "onnxruntime")[:2] == ("original", model)


def test_the_transformer_optimizer_peer_applies_to_transformers_only_and_chains_with_ours():
    """onnxruntime's transformer optimizer fuses LayerNorm and GELU into contrib ops on a transformer (not on a
    CNN, where it does not apply), leaves the model it was given alone, computes the same; our attention
    fusion still applies to its output, as a user chaining the two would expect."""
    pytest.importorskip("onnxruntime.transformers.optimizer")
    pytest.importorskip("sympy", reason="onnxruntime's transformer optimizer needs sympy")
    from autotune.drivers.graph_peers import ort_transformers
    from autotune.runners.onnx_ops import max_errors
    from autotune.search_spaces.graphs.attention import FuseAttention

    assert ort_transformers(model_zoo.build("resnet50", small=True)) is None
    model = model_zoo.build("bert_base", small=True)
    before = model.SerializeToString()
    peer = ort_transformers(model)
    assert model.SerializeToString() == before
    assert {n.op_type for n in peer.graph.node if n.domain == "com.microsoft"} >= {"SkipLayerNormalization"}
    assert max_errors(model, peer, trials=2)["max_rel_error"] < 1e-5
    g = onnx_io.from_onnx(peer)
    assert len(list(FuseAttention().matches(g))) == len(g.by_op["Softmax"]) > 0
