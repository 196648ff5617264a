"""What the plot test files share: the convergence figure of some campaigns of a database, drawn as
`autotune plot convergence` draws it."""

from autotune.cli.plot import convergence_figure, convergence_series
from autotune.db import open_database


def figure(url, *names):
    db = open_database(url)
    try:
        return convergence_figure(convergence_series(db, list(names)))
    finally:
        db.close()
