"""The Python queries (autotune.queries) take task, device and campaign names as the command line does: a name
differing only in case, or a unique key prefix, stands for the stored one; an unknown name is refused naming the
closest stored names, with the command line's message, never answered with an empty frame."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import queries
from autotune.db.names import UnknownName
from autotune.testing.caches import NAMES


def test_queries_resolve_names_as_the_command_line_does(recorded):
    db, url, task, _ = recorded
    device = NAMES["ampere"]
    exact = queries.trials(db, device=device)
    assert len(exact) > 0
    for given in (device.lower(), device.upper()):
        assert queries.trials(db, device=given)["id"].tolist() == exact["id"].tolist(), given
        assert queries.count_trials(db, device=given) == len(exact)
        assert set(queries.best(db, device=given)["device"]) == {device}
        assert sum(len(p) for p in queries.trial_pages(db, device=given)) == len(exact)
    assert len(queries.trials(db, task=task.name.upper(), device=device.lower())) == len(exact)
    assert len(queries.trials(url, task=task.key[:8], device=device)) == len(exact)  # by URL, a key prefix
    assert queries.cost_models(db, device=device.lower()).empty  # a known device with no model: no rows


def test_an_unknown_name_is_refused_with_the_command_lines_message(recorded):
    db, url, _, _ = recorded
    cli = CliRunner().invoke(app, ["trials", "--device", "nvidia geforce rtx 3099", "--db", url])
    assert cli.exit_code == 2
    for call in (lambda: queries.trials(db, device="nvidia geforce rtx 3099"),
                 lambda: queries.count_trials(db, device="nvidia geforce rtx 3099"),
                 lambda: queries.best(url, device="nvidia geforce rtx 3099"),
                 lambda: next(queries.trial_pages(db, device="nvidia geforce rtx 3099")),
                 lambda: queries.cost_models(db, device="nvidia geforce rtx 3099")):
        with pytest.raises(UnknownName) as err:
            call()
        assert f"error: {err.value}\n" == cli.stderr and NAMES["ampere"] in err.value.closest
    with pytest.raises(UnknownName, match="unknown task 'toy_kernal'; closest: toy_kernel"):
        queries.trials(db, task="toy_kernal")
    with pytest.raises(UnknownName, match="unknown campaign 'nope'"):
        queries.convergence(db, "nope")
