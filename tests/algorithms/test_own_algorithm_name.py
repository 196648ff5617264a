"""An algorithm of one's own that sets no ``name`` is named by its class: its campaigns store that name, and the
default campaign name carries it."""

import sys

from sqlalchemy import select

from autotune.algorithms.base import SearchAlgorithm
from autotune.db import open_database
from autotune.db.models import CampaignRow
from autotune.drivers.replay import tune_replay

ALGO = '''
from autotune.algorithms.base import SearchAlgorithm


class FirstFew(SearchAlgorithm):
    """Asks for points sampled from the space; no name set."""

    def ask(self, n):
        return [self.space.sample(self.rng) for _ in range(n)]

    def tell(self, results):
        pass
'''


def stored(url: str) -> dict[str, str]:
    db = open_database(url)
    try:
        with db.session() as s:
            return {c.name: c.algorithm for c in s.scalars(select(CampaignRow))}
    finally:
        db.close()


def test_a_subclass_without_a_name_takes_its_class_name():
    class Mine(SearchAlgorithm):
        def ask(self, n):
            return []

        def tell(self, results):
            pass

    class Named(Mine):
        name = "named"

    assert Mine.name == "Mine" and Mine().name == "Mine" and Named.name == "named"


def test_a_subclass_of_a_built_in_algorithm_without_a_name_takes_its_class_name():
    """It does not pass for the built-in one: its campaigns are its own, named after it."""
    from autotune.algorithms.evolutionary import Evolutionary

    class TweakedEvolution(Evolutionary):
        pass

    class Renamed(TweakedEvolution):
        name = "renamed"

    class AfterRenamed(Renamed):
        pass

    assert Evolutionary.name == "evolutionary" and TweakedEvolution.name == "TweakedEvolution"
    assert Renamed.name == "renamed" and AfterRenamed.name == "AfterRenamed"


def test_an_own_algorithm_names_its_campaign_and_the_stored_algorithm(tmp_path, monkeypatch):
    (tmp_path / "own_algo_mod.py").write_text(ALGO)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "own_algo_mod", raising=False)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    tune_replay("example:pnpoly-rtx3090", algorithm="own_algo_mod:FirstFew", cost_model=None, trials=4, db=url,
                progress=False)
    assert stored(url) == {"replay-pnpoly-rtx3090-FirstFew-seed0": "FirstFew"}
