"""A warm start resumed or joined continues the campaign it started: under the same default name, from the
sources chosen then (none included), and with the same search as a campaign run straight through."""

from __future__ import annotations

import pytest

from autotune.db import open_database, queries
from autotune.drivers.replay import tune_replay
from autotune.drivers.scale import join_campaign
from autotune.errors import UsageError
from autotune.testing.caches import NAMES, ampere_time, import_two_gpus, turing_time, write_cache


def _warm_from(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("warm start from: "))


def test_auto_that_found_no_source_is_resumed_by_the_same_command_after_an_import(tmp_path, capsys):
    """`auto` with nothing similar stored runs the ordinary search; after another GPU's import the same command
    resumes that campaign, still without sources, as a worker joining it does; --fresh chooses again."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    cache = write_cache(tmp_path / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    run = dict(batch=2, db=url, transfer_from="auto", progress=False)
    first = tune_replay(cache, trials=4, **run)
    assert _warm_from(capsys.readouterr().err).endswith("ordinary search")
    db = open_database(url)
    (tmp_path / "gpus").mkdir()
    import_two_gpus(db, tmp_path / "gpus")
    again = tune_replay(cache, trials=6, **run)
    assert again.resumed and again.campaign == first.campaign and again.trials == 6
    assert _warm_from(capsys.readouterr().err).endswith("ordinary search")
    out = join_campaign(first.campaign, url)
    assert out["trials"] == 6 and _warm_from(capsys.readouterr().err).endswith("ordinary search")
    fresh = tune_replay(cache, trials=4, fresh=True, **run)
    assert fresh.campaign == first.campaign and not fresh.resumed
    assert _warm_from(capsys.readouterr().err).startswith(f"warm start from: {NAMES['turing']}")
    assert db.campaign(first.campaign).algorithm.startswith("warm-start")
    db.close()


def test_a_name_taken_by_another_tasks_warm_start_is_refused_as_taken_not_as_a_resume_to_start_afresh(recorded):
    """The sources kept by a campaign of another task are not this campaign's: the name is refused as every
    driver refuses a name taken, where the advice to start "it" afresh would delete the other campaign."""
    db, url, _, tmp = recorded
    toy = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    other = write_cache(tmp / "o.json.gz", NAMES["turing2"], turing_time, kernel="other_kernel")
    run = dict(batch=2, db=url, campaign="warm", progress=False)
    tune_replay(toy, trials=4, transfer_from="auto", **run)
    with pytest.raises(UsageError, match="'warm' already exists for another task or device") as refused:
        tune_replay(other, trials=4, transfer_from="auto", **run)
    assert "fresh" not in str(refused.value) and len(queries.trials(db, campaign="warm")) == 4


def _history(tmp_path, folder: str, runs: list[int]) -> list[str]:
    """The configurations a campaign evaluated, in order, run to each budget of ``runs`` in turn (a resume
    each), warm-started from the TITAN RTX and the RTX 3090 on a target that ranks as the RTX 3090 does."""
    (tmp_path / folder).mkdir()
    url = f"sqlite:///{tmp_path / folder / 'a.db'}"
    db = open_database(url)
    import_two_gpus(db, tmp_path / folder)
    cache = write_cache(tmp_path / folder / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * ampere_time(a, b, c))
    for trials in runs:
        tune_replay(cache, trials=trials, batch=2, db=url, transfer_from="auto", transfer_top=3, campaign="c",
                    progress=False)
    history = [m.candidate.key for m, _ in db.campaign_history(db.campaign("c").id)]
    db.close()
    return history


def test_a_resumed_warm_start_continues_the_search_it_would_have_run_straight_through(tmp_path):
    """The sources' weights are their similarity to the target, which a resume computes again from the target's
    results since (here the RTX 3090 overtakes the TITAN RTX, the more similar GPU on paper): the probes chosen
    when the campaign started stay the probes."""
    straight = _history(tmp_path, "straight", [24])
    assert _history(tmp_path, "resumed", [8, 24]) == straight


def test_a_resume_asking_the_same_sources_in_other_words_resumes_and_another_transfer_top_is_refused(recorded,
                                                                                                      capsys):
    """`AUTO` and `auto`, `A,B` and `A , B` ask for the same sources: the campaign resumes from those it kept. A
    different --transfer-top would not be used (the first probes were chosen from the top k) and is refused."""
    db, url, _, tmp = recorded
    toy = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    run = dict(batch=2, db=url, campaign="warm", progress=False)
    tune_replay(toy, trials=4, transfer_from="auto", **run)
    chosen = _warm_from(capsys.readouterr().err)
    again = tune_replay(toy, trials=6, transfer_from=" AUTO ", **run)
    assert again.resumed and again.trials == 6 and _warm_from(capsys.readouterr().err) == chosen
    with pytest.raises(UsageError, match="warm-started with transfer_top 8, not 3"):
        tune_replay(toy, trials=8, transfer_from="auto", transfer_top=3, **run)
    assert len(queries.trials(db, campaign="warm")) == 6
