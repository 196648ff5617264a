"""The dashboard's web application (Starlette): a single page (static/index.html, app.js) that reads
JSON endpoints under /api/, and Plotly.js served from the installed ``plotly`` package.

Read-only: every endpoint is a GET over :class:`~autotune.dashboard.data.DashboardData`. The
endpoints are plain functions, which Starlette runs in its thread pool, so a slow query never
blocks the server. Campaign and task names travel as query parameters (``?campaign=NAME``): a
name may hold any character, ``/`` included.
"""

from __future__ import annotations

import contextlib
import threading
from importlib import resources
from pathlib import Path

import orjson
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from autotune.dashboard.data import DashboardData, open_dashboard_db
from autotune.dashboard.rows import NotFound
from autotune.db.names import Ambiguous
from autotune.db import Database
from autotune.errors import DatabaseError, UsageError

STATIC = Path(__file__).resolve().parent / "static"


def plotly_js() -> Path:
    """plotly.min.js as the installed ``plotly`` Python package ships it (no CDN, no network)."""
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.is_file():
        raise UsageError(f"plotly.min.js is missing from the installed plotly package ({path}); "
                         "reinstall it: pip install --force-reinstall plotly")
    return path


class JSONResponse(Response):
    """JSON through orjson: datetimes as ISO text, NaN and infinities as null, numpy values as numbers."""

    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _error(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status, headers={"Cache-Control": "no-store"})


def _arg(request: Request, name: str, default: str | None = None) -> str:
    value = request.query_params.get(name, default)
    if value is None:
        raise UsageError(f"missing query parameter {name!r}")
    return value


def _int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    try:
        return default if text in (None, "") else int(text)
    except ValueError:
        raise UsageError(f"query parameter {name!r} must be an integer, not {text[:40]!r}") from None


def create_app(db_url_or_database: str | Database, warm: bool = True) -> Starlette:
    """The dashboard application over a database URL (opened here, closed at shutdown; UsageError for
    a bad URL or a database without the schema) or an open :class:`Database` (left open). ``warm``
    brings every campaign's figures up to date in a background thread at start-up."""
    if isinstance(db_url_or_database, Database):
        db, owned = db_url_or_database, False
    else:
        db, owned = open_dashboard_db(db_url_or_database), True
    data = DashboardData(db)
    plotly = plotly_js()

    def api(fn):
        """An endpoint answering fn(request) as JSON, never cached by the browser (the data is live)."""

        def endpoint(request: Request) -> Response:
            return JSONResponse(fn(request), headers={"Cache-Control": "no-store"})

        endpoint.__name__ = fn.__name__
        return endpoint

    @api
    def info(request: Request) -> dict:
        return {"database": db.safe_url, "dialect": db.dialect}

    @api
    def campaigns(request: Request) -> dict:
        return data.campaigns(request.query_params.get("q", ""), _int(request, "limit", 100),
                              _int(request, "offset", 0))

    @api
    def campaign(request: Request) -> dict:
        return data.campaign(_arg(request, "campaign"))

    @api
    def convergence(request: Request) -> dict:
        return data.convergence(_arg(request, "campaign"))

    @api
    def trials(request: Request) -> dict:
        p = request.query_params
        return data.trials(_arg(request, "campaign"), sort=p.get("sort", "id"), status=p.get("status", ""),
                           q=p.get("q", ""), after=p.get("after") or None, limit=_int(request, "limit", 50))

    @api
    def sample(request: Request) -> dict:
        return data.sample(_arg(request, "campaign"))

    @api
    def importance(request: Request) -> dict:
        return data.importance(_arg(request, "campaign"))

    @api
    def cost_models(request: Request) -> dict:
        return data.cost_models(request.query_params.get("campaign") or None)

    @api
    def graph(request: Request) -> dict:
        return data.graph(_arg(request, "campaign"))

    @api
    def parallel(request: Request) -> dict:
        return data.parallel(_arg(request, "campaign"))

    @api
    def tasks(request: Request) -> dict:
        return data.tasks(request.query_params.get("q", ""), _int(request, "limit", 100), _int(request, "offset", 0))

    @api
    def task(request: Request) -> dict:
        return data.task(_arg(request, "task"))

    def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    def vendor_plotly(request: Request) -> Response:
        return FileResponse(plotly, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})

    async def not_found(request: Request, exc: NotFound) -> Response:
        return _error(404, str(exc), suggestions=exc.suggestions)

    async def bad_request(request: Request, exc: UsageError) -> Response:
        return _error(400, str(exc))

    async def ambiguous(request: Request, exc: Ambiguous) -> Response:
        return _error(400, str(exc), candidates=exc.candidates)

    async def database_error(request: Request, exc: DatabaseError) -> Response:
        return _error(503, str(exc))

    async def sql_error(request: Request, exc: SQLAlchemyError) -> Response:
        text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        return _error(503, f"database error on {db.safe_url}: {text[0] if text else exc.__class__.__name__}")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        stop = threading.Event()
        if warm:
            threading.Thread(target=_warm, args=(data, stop), name="dashboard-warm", daemon=True).start()
        try:
            yield
        finally:
            stop.set()
            if owned:
                db.close()

    routes = [
        Route("/", index),
        Route("/vendor/plotly.min.js", vendor_plotly),
        Route("/api/info", info),
        Route("/api/campaigns", campaigns),
        Route("/api/campaign", campaign),
        Route("/api/convergence", convergence),
        Route("/api/trials", trials),
        Route("/api/sample", sample),
        Route("/api/importance", importance),
        Route("/api/cost-models", cost_models),
        Route("/api/graph", graph),
        Route("/api/parallel", parallel),
        Route("/api/tasks", tasks),
        Route("/api/task", task),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(GZipMiddleware, minimum_size=2048)],
                    exception_handlers={NotFound: not_found, Ambiguous: ambiguous, UsageError: bad_request,
                                        DatabaseError: database_error, SQLAlchemyError: sql_error})
    app.state.data = data
    return app


def _warm(data: DashboardData, stop: threading.Event) -> None:
    """The start-up warm-up; a failure there is left for the requests to report."""
    with contextlib.suppress(Exception):
        data.warm(stop)
