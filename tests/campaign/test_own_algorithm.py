"""A search algorithm and a cost model of the user's own: usable by "module:Class" wherever a registered name is
taken (make_algorithm, make_search, the drivers, the command line), or as objects in make_search and minimize;
and what the campaign says of one that breaks the SearchAlgorithm promise, keeping what was measured."""

from __future__ import annotations

import json
import sys
import uuid

import numpy as np
import pytest
from typer.testing import CliRunner

import autotune
from autotune.algorithms.model_guided import ModelGuided
from autotune.cli.main import app
from autotune.errors import UsageError

EXAMPLE = "example:pnpoly-rtx3090"

MODULE = '''
import json

import numpy as np

from autotune import Candidate, CostModel, Option, SearchAlgorithm


class Walk(SearchAlgorithm):
    """The space's points in order, ``step`` apart."""

    name = "walk"
    options = {"step": Option(1, "points skipped between two proposals, plus one", low=1)}

    def setup(self):
        self.points, self.pos = list(self.space.enumerate()), 0

    def ask(self, n):
        out = self.points[self.pos:self.pos + n * self.config["step"]:self.config["step"]]
        self.pos += len(out) * self.config["step"]
        return out

    def state_dict(self):
        return {**super().state_dict(), "pos": self.pos}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.pos = state["pos"]


class Linear(CostModel):
    name = "linear"

    def fit(self, X, y, groups=None):
        ok = np.isfinite(y)
        y = np.where(ok, y, y[ok].max() * 2 if ok.any() else 1.0)
        self.w = np.linalg.lstsq(np.c_[X, np.ones(len(X))], -np.log(y + 1e-12), rcond=None)[0]
        return self

    def predict(self, X):
        return np.c_[X, np.ones(len(X))] @ self.w

    def save(self):
        return json.dumps(self.w.tolist()).encode()

    @classmethod
    def load(cls, data):
        model = cls()
        model.w = np.array(json.loads(data))
        return model
'''


@pytest.fixture
def own(tmp_path):
    """The name of a fresh module in tmp_path holding ``Walk`` and ``Linear`` (not yet on sys.path)."""
    name = f"own_search_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    yield name
    sys.modules.pop(name, None)


def test_module_class_names_an_algorithm_and_a_cost_model_of_ones_own(tmp_path, monkeypatch, own):
    monkeypatch.syspath_prepend(str(tmp_path))
    walk = autotune.make_algorithm(f"{own}:Walk", {"step": 2})
    assert walk.name == "walk" and walk.config["step"] == 2
    guided = autotune.make_search(f"{own}:Walk", f"{own}:Linear", step=3, init=4)
    assert isinstance(guided, ModelGuided) and guided.inner.config["step"] == 3 and guided.config["init"] == 4
    assert guided.cost_model.name == "linear"
    url = f"sqlite:///{tmp_path / 'own.db'}"
    first = autotune.tune_replay(EXAMPLE, algorithm=f"{own}:Walk", cost_model=None, trials=6, db=url,
                                 campaign="walk", progress=False)
    again = autotune.tune_replay(EXAMPLE, algorithm=f"{own}:Walk", cost_model=None, trials=10, db=url,
                                 campaign="walk", progress=False)  # resumed: its own state says where it was
    assert first.trials == 6 and again.resumed and again.trials == 10 and again.measured_here == 4
    space = autotune.ReplaySpace(EXAMPLE)
    expected = [c.payload for c in list(space.enumerate())[:10]]
    assert list(autotune.queries.trials(url, campaign="walk").sort_values("id").config) == expected
    assert autotune.queries.campaigns(url).algorithm.tolist() == ["walk"]
    guided = autotune.tune_replay(EXAMPLE, algorithm=f"{own}:Walk", cost_model=f"{own}:Linear", trials=12, db=url,
                                  campaign="walk-linear", options={"init": 4}, progress=False)
    assert guided.trials + guided.reused == 12 and set(autotune.queries.cost_models(url).model) == {"linear"}
    r = CliRunner().invoke(app, ["predict", "--campaign", "walk-linear", "--db", url])  # loaded by its module:Class
    assert r.exit_code == 0 and "(linear, " in r.stdout, r.output
    sys.path.remove(str(tmp_path))  # monkeypatch puts sys.path back
    sys.modules.pop(own)  # its module is not found here: the message says where it loads; its weights are intact
    r = CliRunner().invoke(app, ["predict", "--campaign", "walk-linear", "--db", url])
    assert r.exit_code == 2 and "the latest model of campaign 'walk-linear' is a 'linear' model, not one autotune " \
        "can load" in r.output and f"it loads where '{own}:Linear' imports" in r.output, r.output
    assert "damaged" not in r.output


def test_the_command_line_takes_an_algorithm_from_the_working_directory(tmp_path, monkeypatch, own):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    r = CliRunner().invoke(app, ["tune", "replay", "--cache", EXAMPLE, "--algorithm", f"{own}:Walk", "--option",
                                 "step=2", "--cost-model", "none", "--trials", "4", "--db", url, "--json",
                                 "--no-progress"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["trials"] == 4


@pytest.mark.parametrize("spec,needle", [
    ("no_such_module_of_mine:Walk", "cannot import 'no_such_module_of_mine'"),
    ("json:Nope", "json.Nope is no such name"),
    ("json:JSONDecoder", "json.JSONDecoder is a type, not a SearchAlgorithm subclass"),
    (":Walk", "is not MODULE:CLASS"),
])
def test_a_wrong_module_class_name_is_one_sentence(tmp_path, spec, needle):
    with pytest.raises(UsageError, match=needle):
        autotune.make_search(spec, None)
    r = CliRunner().invoke(app, ["tune", "replay", "--cache", EXAMPLE, "--algorithm", spec, "--trials", "2",
                                 "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x.db").exists()


def test_make_search_and_minimize_take_ones_own_objects(tmp_path, monkeypatch, own):
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(own)
    walk, model = mod.Walk(step=2), mod.Linear()
    guided = autotune.make_search(walk, "xgb")
    assert isinstance(guided, ModelGuided) and guided.inner is walk
    assert autotune.make_search("random", model).cost_model is model
    assert autotune.make_search(walk) is walk
    with pytest.raises(UsageError, match="already made: give its options when making it"):
        autotune.make_search(walk, None, step=3)
    result = autotune.minimize(lambda c: abs(c["x"] - 3) + 1.0, {"x": list(range(8))}, algorithm=mod.Walk(),
                               cost_model=None, trials=5, db=f"sqlite:///{tmp_path / 'f.db'}", progress=False)
    assert result.trials == 5 and result.best_config == {"x": 3}
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(UsageError, match=r"algorithm <.*Walk object .*> cannot be stored in the campaign's recipe"):
        autotune.tune_replay(EXAMPLE, algorithm=mod.Walk(), cost_model=None, trials=3, db=url)  # a worker remakes it
    assert autotune.queries.campaigns(url).empty


# -- an algorithm that breaks the promise: one sentence, and what was measured stays ---------------------------

KNOBS = {"x": list(range(40))}


class Fine(autotune.SearchAlgorithm):
    """Random points without repeats; the subclasses below break one promise from the second ask on."""

    name = "fine"

    def setup(self):
        self.asks, self.order = 0, [int(i) for i in self.rng.permutation(40)]

    def ask(self, n):
        self.asks += 1
        out, self.order = self.order[:n], self.order[n:]
        return [self.space.candidate({"x": x}) for x in out]

    def state_dict(self):
        return {**super().state_dict(), "order": self.order}


class ReturnsOne(Fine):
    def ask(self, n):
        out = super().ask(n)
        return out if self.asks < 2 else out[0]


class ReturnsConfigs(Fine):
    def ask(self, n):
        out = super().ask(n)
        return out if self.asks < 2 else [c.payload for c in out]


class Outside(Fine):
    def ask(self, n):
        out = super().ask(n)
        return out if self.asks < 2 else [*out[:-1], autotune.Candidate({"x": 99})]


class TooMany(Fine):
    def ask(self, n):
        out = super().ask(n)
        return out if self.asks < 2 else out + super().ask(n)


class NumpyState(Fine):
    def state_dict(self):
        return {**super().state_dict(), "asks": np.int64(self.asks), "seen": set()}


class TellRaises(Fine):
    def tell(self, results):
        if self.asks >= 2:
            raise RuntimeError("a bug in tell")


class Cost(autotune.Runner):
    device = autotune.Device("my-box", "cpu", {})

    def measure(self, task, candidates):
        return [autotune.Measurement(c, autotune.Status.OK, times=[1.0 + c.payload["x"]]) for c in candidates]


@pytest.mark.parametrize("cls,error,needle,stored", [
    (ReturnsOne, UsageError, "algorithm 'ReturnsOne': ask(4) returned a Candidate; ask returns a list of "
                             "autotune.Candidate", 4),
    (ReturnsConfigs, UsageError, "ask(4) returned a list holding a dict", 4),
    (Outside, UsageError, "ask(4) returned {'x': 99}, which is not a point of the space (KnobSpace.contains is "
                          "False)", 4),
    (TooMany, UsageError, "ask(4) returned 8 candidates; ask(n) returns at most n", 4),
    (NumpyState, UsageError, "algorithm 'NumpyState': state_dict() returned what JSON cannot hold", 4),
    (TellRaises, RuntimeError, "a bug in tell", 8),
])
def test_an_algorithm_that_breaks_the_promise_is_named_and_the_measurements_stay(tmp_path, cls, error, needle,
                                                                                   stored):
    db = autotune.open_database(f"sqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(error) as caught:
        autotune.Campaign("c", autotune.KnobSpace(KNOBS), cls(), Cost(), db, trials=20, batch=4, progress=False).run()
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    row = autotune.queries.campaigns(db).iloc[0]
    assert row.status == "failed" and row.trials == stored  # the batches measured before it stopped
