"""``refbench serve``: the runs, their reports, trends, comparisons and live progress as a local web dashboard
(Starlette on uvicorn). Everything it shows comes from the runs catalog and the run directories; every asset is
served from this package, so the pages work with no network.

Bound to a loopback address it answers anyone on this host, as the files themselves do; bound to any other address
it asks every request for a token it prints once (see gate.Gate)."""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from refbench.catalog import Catalog
from refbench.dashboard import pages
from refbench.dashboard.gate import Gate, Outside, is_loopback, run_dir, run_file
from refbench.errors import UserError
from refbench.runstore import Run

# The catalog is brought up to date at most this often: a page of the dashboard then costs a query, not a look at
# every run directory, and a new run or figure shows within the second.
UPDATE_EVERY_S = 1.0


class Dashboard:
    def __init__(self, runs_dir: Path):
        self.root = runs_dir.resolve()
        self._updating = threading.Lock()
        self._updated_at = 0.0
        self.warnings: list[str] = []

    @contextmanager
    def catalog(self) -> Iterator[Catalog]:
        catalog = Catalog(self.root)
        try:
            with self._updating:
                if time.monotonic() - self._updated_at >= UPDATE_EVERY_S:
                    warnings: list[str] = []
                    catalog.update(warnings.append)
                    self.warnings, self._updated_at = warnings, time.monotonic()
            yield catalog
        finally:
            catalog.close()

    def runs(self, request: Request) -> Response:
        filters = _filters(request)
        with self.catalog() as catalog:
            runs = catalog.runs(suite=filters["suite"], host=filters["host"], tags=pages.parse_tags(filters["tag"]),
                                since=filters["since"])
        return HTMLResponse(pages.runs_page(runs, filters, bool(request.query_params.get("all")), self.warnings))

    def history(self, request: Request) -> Response:
        from refbench.history import history

        filters = _filters(request)
        figure = (request.query_params.get("figure") or "").strip()
        with self.catalog() as catalog:
            suggestions = sorted({pages.figure_name(x) for r in catalog.runs() for x in r["headlines"]})
            points = history(catalog, figure, suite=filters["suite"], host=filters["host"],
                             tags=pages.parse_tags(filters["tag"]), since=filters["since"]) if figure else []
        return HTMLResponse(pages.history_page(figure, filters, points, suggestions))

    def compare(self, request: Request) -> Response:
        names = request.query_params.getlist("run")
        if not names:
            return HTMLResponse(pages.message("Compare", "Tick two or more runs on the runs page, then Compare."))
        if len(names) < 2:
            raise UserError("compare needs at least two runs: the baseline, then the runs compared with it.")
        runs = [Run(run_dir(self.root, name)) for name in names]
        for run in runs:
            run.check_readable()
        return HTMLResponse(pages.compare_page(runs, bool(request.query_params.get("all")),
                                               request.query_params.get("metric") or None))

    def progress(self, request: Request) -> Response:
        return HTMLResponse(pages.progress_page(Run(run_dir(self.root, request.path_params["run"]))))

    def run_file(self, request: Request) -> Response:
        relative = request.path_params["path"] or "report.html"
        path = run_file(self.root, request.path_params["run"], relative)
        return FileResponse(path, content_disposition_type="inline")


def _filters(request: Request) -> dict:
    q = request.query_params
    return {"suite": q.get("suite") or None, "host": q.get("host") or None,
            "tag": [t for t in q.getlist("tag") if t.strip()], "since": q.get("since") or None}


def _user_error(request: Request, exc: Exception) -> Response:
    return HTMLResponse(pages.message("Cannot show this", str(exc)), 400)


def _not_found(request: Request, exc: Exception) -> Response:
    return HTMLResponse(pages.message("Not found", "No such run or file in the runs directory."), 404)


def create_app(runs_dir: Path, token: str | None) -> Starlette:
    dashboard = Dashboard(runs_dir)
    return Starlette(
        routes=[
            Route("/", dashboard.runs),
            Route("/history", dashboard.history),
            Route("/compare", dashboard.compare),
            Route("/progress/{run}", dashboard.progress),
            Route("/runs/{run}/{path:path}", dashboard.run_file),
            Mount("/static", app=StaticFiles(packages=[("refbench.dashboard", "static")]), name="static"),
        ],
        middleware=[Middleware(Gate, token=token)],
        exception_handlers={UserError: _user_error, Outside: _not_found},
    )


def serve(runs_dir: str, host: str, port: int, console: Console) -> None:
    import uvicorn

    root = Path(runs_dir)
    if not root.is_dir():
        raise UserError(f"there is no runs directory {runs_dir} (give the one your runs went to with --runs-dir).")
    token = None if is_loopback(host) else secrets.token_urlsafe(32)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise UserError(f"cannot listen on {host} port {port}: {exc.strerror or exc}.") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
    console.print(f"dashboard: {url}", soft_wrap=True, markup=False, highlight=False)
    if token:
        console.print("The token is needed from any address, shown only now: keep it to the people who may see the runs. "
                      + ("Open it with this host's name or address." if host in ("0.0.0.0", "::") else ""),
                      soft_wrap=True, markup=False, highlight=False)
    console.print("Stop it with Ctrl-C.", markup=False, highlight=False)
    # No access log: with a token, the first request's line holds it.
    config = uvicorn.Config(create_app(root, token), log_level="warning", access_log=False, lifespan="off",
                            server_header=False)
    uvicorn.Server(config).run(sockets=[sock])
