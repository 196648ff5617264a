"""A campaign resumed with another seed goes on with its own search, and says so: the seed given is not used."""

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.testing.fakes import FakeRunner, small_knob_space


def test_a_resume_with_another_seed_says_the_campaigns_search_goes_on(tmp_path, capsys):
    space = small_knob_space()
    db = open_database(f"sqlite:///{tmp_path / 's.db'}")
    Campaign("c", space, "random", FakeRunner(space), db, trials=4, seed=0, progress=False).run()
    capsys.readouterr()
    Campaign("c", space, "random", FakeRunner(space), db, trials=8, seed=0, progress=False).run()
    assert "seed" not in capsys.readouterr().err  # the same seed: nothing to say
    Campaign("c", space, "random", FakeRunner(space), db, trials=12, seed=3, progress=False).run()
    err = capsys.readouterr().err
    assert "campaign 'c': resumes its search (seed 0); the seed 3 given is not used: to search with it, start " \
           "afresh (fresh=True) or choose another campaign name" in err
    db.close()
