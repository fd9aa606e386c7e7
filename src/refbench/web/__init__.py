"""``refbench serve``: the runs, their reports, trends, comparisons and live progress as a local web dashboard
(Starlette on uvicorn). Everything it shows comes from the runs catalog and the run directories; every asset is
served from this package, so the pages work with no network.

Bound to a loopback address it answers anyone on this host, as the files themselves do; bound to any other address
it asks every request for a token it prints once (see gate.Gate)."""

from __future__ import annotations

import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from refbench.catalog import CATALOG_FILE, Catalog, rebuilt, run_filters, since_utc
from refbench.web import pages
from refbench.web.gate import Gate, Outside, is_loopback, run_dir, run_file, tune_dir
from refbench.children import owned_temp_directory
from refbench.errors import UserError
from refbench.runstore import Run, parse_tags

# A page reads the catalog as it is and, when it was last brought up to date longer ago than this, has that done in
# the background for the next page: a page costs a query, not a look into every run directory (0.2 s with 1,000
# runs). A run directory that came or went (the runs directory's own time changed) is caught up before the page.
UPDATE_AFTER_S = 1.0
T = TypeVar("T")
# Each run of a comparison is read whole and compared figure by figure with the baseline, and the page links every
# other run as a baseline: the cap keeps a page within 2 s of CPU with runs of hundreds of figures.
MAX_COMPARED_RUNS = 10
COMPARED_KEPT = 2 * MAX_COMPARED_RUNS


class Dashboard:
    def __init__(self, runs_dir: Path, scratch: Path, say: Callable[[str], None] = lambda sentence: None):
        """``scratch``: a directory of the server's own, where it keeps a catalog when the runs directory's cannot
        be used; ``say`` hears, once, that it had to."""
        self.root = runs_dir.resolve()
        self.fallback = scratch / CATALOG_FILE
        self.database: Path | None = None  # None: the runs directory's own catalog
        self.say = say
        self._updating = threading.Lock()
        self._healing = threading.Lock()
        self._updated_at, self._root_mtime_ns = 0.0, 0
        self._generation = 0  # how many times the catalog was made again after an SQLite error
        self.warnings: list[str] = []
        self.notice: str | None = None  # why the pages come from a catalog other than the runs directory's
        self._runs: dict[Path, Run] = {}  # the runs compared lately, the newest last (_run)
        self._runs_lock = threading.Lock()

    def read(self, query: Callable[[Catalog], T]) -> T:
        """``query(catalog)``; when SQLite fails in it, once more over a catalog made again from the run directories."""
        generation = self._generation
        try:
            with self.catalog() as catalog:
                return query(catalog)
        except sqlite3.Error as exc:
            self._heal(generation, exc)
        with self.catalog() as catalog:
            return query(catalog)

    @contextmanager
    def catalog(self) -> Iterator[Catalog]:
        generation = self._generation
        try:
            catalog = Catalog(self.root, self.database)
        except sqlite3.Error as exc:
            self._heal(generation, exc)
            generation, catalog = self._generation, Catalog(self.root, self.database)
        try:
            root_mtime_ns = self.root.stat().st_mtime_ns
            if root_mtime_ns != self._root_mtime_ns:
                with self._updating:
                    if root_mtime_ns != self._root_mtime_ns:  # not done meanwhile by another request
                        self._update(catalog, generation, root_mtime_ns)
                if self._generation != generation:  # the update made the catalog again elsewhere: read that one
                    catalog.close()
                    catalog = Catalog(self.root, self.database)
            elif time.monotonic() - self._updated_at >= UPDATE_AFTER_S and self._updating.acquire(blocking=False):
                threading.Thread(target=self._update_in_background, args=(root_mtime_ns,), daemon=True).start()
            yield catalog
        finally:
            catalog.close()

    def _update(self, catalog: Catalog, generation: int, root_mtime_ns: int) -> None:
        warnings: list[str] = []
        try:
            catalog.update(warnings.append)
        except sqlite3.Error as exc:
            self._heal(generation, exc)  # made again from the run directories, so up to date
        except (OSError, UserError) as exc:
            warnings.append(f"The runs catalog could not be brought up to date ({exc}); the pages show it as it was.")
        self.warnings, self._updated_at, self._root_mtime_ns = warnings, time.monotonic(), root_mtime_ns

    def _update_in_background(self, root_mtime_ns: int) -> None:
        generation = self._generation
        try:
            with Catalog(self.root, self.database) as catalog:
                self._update(catalog, generation, root_mtime_ns)
        except sqlite3.Error as exc:
            self._heal(generation, exc)
        finally:
            self._updating.release()

    def _heal(self, generation: int, problem: sqlite3.Error) -> None:
        """The catalog the pages read, made again from the run directories after ``problem``: in its place when it
        was damaged, else in the server's own file for as long as it serves. ``generation``: of the catalog that
        failed; a newer one was made meanwhile by another request."""
        with self._healing:
            if self._generation != generation:
                return
            catalog, sentence = rebuilt(self.root, self.database or self.root / CATALOG_FILE, problem, self.fallback)
            catalog.close()
            self.database = None if catalog.path == self.root / CATALOG_FILE else catalog.path
            self._generation += 1
            self.notice = sentence[0].upper() + sentence[1:]
            self.say(f"refbench serve: {sentence}")

    def runs(self, request: Request) -> Response:
        filters = _filters(request)
        show_all = bool(request.query_params.get("all"))
        tags, since = parse_tags(filters["tag"]), since_utc(filters["since"])
        # One more than a page: whether there are more to show is all the page says of them.
        runs = self.read(lambda catalog: catalog.runs(filters["suite"], filters["host"], tags, since,
                                                      None if show_all else pages.PAGE_RUNS + 1))
        notes = self.warnings + ([self.notice] if self.notice else [])
        return HTMLResponse(pages.runs_page(runs, filters, show_all, notes))

    def history(self, request: Request) -> Response:
        from refbench.catalog.history import history, latest_figures

        filters = _filters(request)
        figure = (request.query_params.get("figure") or "").strip()
        tags, since = parse_tags(filters["tag"]), since_utc(filters["since"])
        run_filters(None, filters["host"], tags, since)  # filters it refuses: a bad request (400), not a figure not found

        def query(catalog: Catalog) -> tuple[list[dict], list[dict], str | None]:
            figures = latest_figures(catalog, filters["host"], tags, since)
            try:
                return figures, history(catalog, figure, filters["host"], tags, since) if figure else [], None
            except UserError as exc:  # no such figure: said on the page, with the list of those there are
                return figures, [], str(exc)

        figures, points, problem = self.read(query)
        return HTMLResponse(pages.history_page(figure, filters, points, figures, problem), 404 if problem else 200)

    def compare(self, request: Request) -> Response:
        from refbench.report.sides import distinct_sides

        # A side named twice is compared once: each run costs the reading of all its figures. A side is RUN or
        # RUN,RUN,… (several runs of one configuration), as on the command line.
        names = list(dict.fromkeys(request.query_params.getlist("run")))
        if not names:
            return HTMLResponse(pages.compare_chooser(self.read(lambda catalog: catalog.runs(limit=pages.PAGE_RUNS))))
        if len(names) < 2:
            raise UserError("compare needs at least two different runs: the baseline, then the runs compared with it.")
        sides = [list(dict.fromkeys(n for n in name.split(",") if n)) for name in names]
        if not all(sides):
            raise UserError("a side of the comparison names no run (RUN or RUN,RUN,…).")
        if (count := sum(len(side) for side in sides)) > MAX_COMPARED_RUNS:
            raise UserError(f"a comparison takes at most {MAX_COMPARED_RUNS} runs; {count:,} were named "
                            "(compare them a few at a time against the same baseline).")
        if request.query_params.get("order") == "oldest":  # from the runs page's ticks: the oldest is the baseline
            sides = sorted(sides)  # a run directory's name starts with its start time
        runs, _ = distinct_sides([[self._run(run_dir(self.root, name)) for name in side] for side in sides])
        for run in (run for side in runs for run in side):
            run.check_readable()
        return HTMLResponse(pages.compare_page(runs, bool(request.query_params.get("all")),
                                               request.query_params.get("metric") or None))

    def _run(self, path: Path) -> Run:
        """The run at ``path``, the same object from request to request while it stays among the newest
        COMPARED_KEPT: a Run reads each of its files once until the file changes, so a comparison made again, or with
        another baseline, does not parse the runs' records again."""
        with self._runs_lock:
            run = self._runs.pop(path, None) or Run(path)
            self._runs[path] = run
            while len(self._runs) > COMPARED_KEPT:
                self._runs.pop(next(iter(self._runs)))
            return run

    def progress(self, request: Request) -> Response:
        return HTMLResponse(pages.progress_page(Run(run_dir(self.root, request.path_params["run"]))))

    def tunes(self, request: Request) -> Response:
        """Every `refbench tune` in the runs directory, newest first, with its answer; a damaged one is one entry."""
        journeys = []
        for path in sorted((self.root / "tune").glob("*/tune.json"), reverse=True):
            try:
                journeys.append({**read_journey(path), "name": path.parent.name})
            except ValueError as exc:
                journeys.append({"name": path.parent.name, "damaged": str(exc)})
        return HTMLResponse(pages.tunes_page(journeys))

    def tune_report(self, request: Request) -> Response:
        from refbench.tune.profile import page as tune_page

        name = request.path_params["name"]
        try:
            return HTMLResponse(pages.framed(tune_page(read_journey(tune_dir(self.root, name) / "tune.json"))))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return HTMLResponse(pages.message("Cannot show this tune", f"{name}: its tune.json is damaged ({exc})."),
                                422)

    def run_file(self, request: Request) -> Response:
        name, relative = request.path_params["run"], request.path_params["path"] or "report.html"
        if relative == "report.html":
            report = run_dir(self.root, name) / relative
            if not report.is_file():
                return HTMLResponse(pages.no_report(name), 404)
            # The report as the run wrote it, with the dashboard's way back and a comparison at its top.
            others = self.read(lambda catalog: catalog.runs(limit=pages.PAGE_RUNS))
            text = run_file(self.root, name, relative).read_text(errors="replace")
            bar = pages.report_bar(run_dir(self.root, name).name, others)
            return HTMLResponse(pages.framed(text, bar))
        return FileResponse(run_file(self.root, name, relative), content_disposition_type="inline")


TUNE_FILE_LIMIT = 64 << 20  # a journey of hundreds of trials is a few megabytes


def read_journey(path: Path) -> dict:
    """A tune's tune.json as the pages show it; ValueError saying why when it is not one a tune wrote (cut short, not
    an object, nested past reading, too large, not a file)."""
    import json

    from refbench.fileio import read_user_file

    try:
        journey = json.loads(read_user_file(path, "tune.json", TUNE_FILE_LIMIT))
    except UserError as exc:
        raise ValueError(str(exc).removeprefix(f"tune.json {path} ").rstrip(".")) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(journey, dict) or not isinstance(journey.get("suite"), str) or \
            not isinstance(journey.get("steps", []), list) or not all(isinstance(s, dict) for s in journey.get("steps", [])):
        raise ValueError("not the journey of a tune (an object with its suite and steps)")
    return journey


def _filters(request: Request) -> dict:
    q = request.query_params
    return {"suite": q.get("suite") or None, "host": q.get("host") or None,
            "tag": list(dict.fromkeys(t for t in q.getlist("tag") if t.strip())), "since": q.get("since") or None}


def _user_error(request: Request, exc: Exception) -> Response:
    return HTMLResponse(pages.message("Cannot show this", str(exc)), 400)


def _not_found(request: Request, exc: Exception) -> Response:
    return HTMLResponse(pages.message("Not found", "No such run or file in the runs directory."), 404)


def create_app(dashboard: Dashboard, token: str | None) -> Starlette:
    return Starlette(
        routes=[
            Route("/", dashboard.runs),
            Route("/history", dashboard.history),
            Route("/compare", dashboard.compare),
            Route("/progress/{run}", dashboard.progress),
            Route("/runs/{run}/{path:path}", dashboard.run_file),
            Route("/tune", dashboard.tunes),
            Route("/tune/{name}", dashboard.tune_report),
            Mount("/static", app=StaticFiles(packages=[("refbench.web", "static")]), name="static"),
        ],
        middleware=[Middleware(Gate, token=token)],
        exception_handlers={UserError: _user_error, Outside: _not_found},
    )


def serve(runs_dir: str, host: str, port: int, console: Console) -> None:
    import uvicorn

    import scipy.special  # noqa: F401  compare's statistics (0.7 s of CPU to load), now rather than in the first comparison
    import refbench.report.charts  # noqa: F401  matplotlib, loaded now (0.6 s here) rather than by the first trend page
    from refbench.web.slow_clients import HeadersInTime

    def say(text: str) -> None:
        console.print(text, soft_wrap=True, markup=False, highlight=False)

    root = Path(runs_dir)
    if not root.is_dir():
        raise UserError(f"there is no runs directory {runs_dir} (give the one your runs went to with --runs-dir).")
    token = None if is_loopback(host) else secrets.token_urlsafe(32)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen()  # before the URL is printed: a browser opening it at once waits in the backlog, not refused
    except OSError as exc:
        raise UserError(f"cannot listen on {host} port {port}: {exc.strerror or exc}.") from None
    with owned_temp_directory("refbench-serve-") as scratch:
        dashboard = Dashboard(root, scratch, say)
        dashboard.read(lambda catalog: None)  # brought up to date now, so that the first page does not wait for it
        shown = f"[{host}]" if ":" in host else host
        say(f"dashboard: http://{shown}:{sock.getsockname()[1]}/" + (f"?token={token}" if token else ""))
        if token:
            say("The token is needed from any address, shown only now: keep it to the people who may see the runs."
                + (" Open it with this host's name or address." if host in ("0.0.0.0", "::") else ""))
        say("Stop it with Ctrl-C.")
        # No access log: with a token, the first request's line holds it.
        config = uvicorn.Config(create_app(dashboard, token), log_level="warning", access_log=False, lifespan="off",
                                server_header=False, http=HeadersInTime)
        uvicorn.Server(config).run(sockets=[sock])
