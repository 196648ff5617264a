"""`autotune dashboard`: serve the read-only web dashboard of a database until Ctrl-C."""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors
from autotune.errors import UsageError


def check_port(host: str, port: int) -> None:
    """UsageError, before anything starts, when ``host``:``port`` cannot be listened on."""
    if not 0 < port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host[:80]!r} is not an address of this machine ({exc.strerror})") from None
    except (UnicodeError, ValueError) as exc:  # a name no resolver takes (a label over 63 characters, a NUL)
        raise UsageError(f"--host {host[:80]!r} is not a valid host name ({str(exc)[:80]})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(f"port {port} on {host} is in use; choose another --port") from None
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("dashboard")
    @handle_errors
    def dashboard_cmd(
        db: DbOption = DEFAULT_DB,
        host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface; "
                                                          "the dashboard has no login, so mind who can reach it)")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="TCP port to listen on")] = 8080,
    ) -> None:
        """Serve a read-only web dashboard of the database: campaigns, convergence, trials, parameter
        importance, cost-model quality, devices per task, graph rewrites and parallel strategies.
        It reads the database live, so it can watch campaigns while they run. Stop it with Ctrl-C."""
        import uvicorn

        from autotune.dashboard.app import create_app

        check_port(host, port)
        web = create_app(db)
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"autotune dashboard of {web.state.data.db.safe_url} at http://{shown}:{port}/ (Ctrl-C to stop)")
        server = uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning", access_log=False,
                                               lifespan="on"))
        interrupted = False
        try:
            server.run()  # returns after Ctrl-C: uvicorn handles the signal and shuts down cleanly
        except KeyboardInterrupt:
            interrupted = True
        if not (server.started or interrupted):
            raise UsageError(f"the dashboard could not start on {host}:{port}")
        typer.echo("dashboard stopped")
