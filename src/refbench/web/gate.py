"""Who may ask and what they may read: the token on a non-loopback bind, the Host check on a loopback one, and paths
from the URL kept inside the runs directory."""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "refbench_token"
# The pages carry no scripts and load nothing from elsewhere; this says so to the browser, so that a run name
# that slipped past escaping still could not run or fetch anything.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
# What a browser may read in a run directory: the report and the charts and tables beside it. Not run.json (argv),
# raw/ (tool output), secrets/ (passwords for resume) nor the lock and work files.
READABLE = ("report.html", "charts/", "tables/")
READABLE_SUFFIXES = (".html", ".svg", ".png", ".csv", ".parquet")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and the name localhost; any other address or name may be reached from elsewhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class Gate:
    """ASGI middleware in front of every route. With a token (a non-loopback bind), a request carries it as
    ?token= (which sets an HttpOnly, SameSite=Strict cookie for the pages after), as that cookie, or as
    ``Authorization: Bearer``; none → 401, a wrong one → 403. Without a token (loopback), the Host header must name
    a loopback host, so that a web page whose name was rebound to 127.0.0.1 cannot read the dashboard."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        set_cookie = False
        if self.token is None:
            host = request.headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if not is_loopback(name):
                await _refuse(400, "This dashboard answers only to a loopback host name (127.0.0.1, localhost).", scope, receive, send)
                return
        else:
            query = request.query_params.get("token")
            bearer = request.headers.get("authorization", "")
            bearer = bearer[7:].strip() if bearer[:7].lower() == "bearer " else None
            cookie = request.cookies.get(COOKIE)
            set_cookie = _same(query, self.token)
            if not (set_cookie or _same(cookie, self.token) or _same(bearer, self.token)):
                given = query is not None or bearer is not None or cookie is not None
                await _refuse(403 if given else 401, "A wrong token." if given else
                              "This dashboard needs the token refbench serve printed: open the URL it printed "
                              "(?token=…) or send Authorization: Bearer TOKEN.", scope, receive, send)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    headers.setdefault(key, value)
                if set_cookie:
                    headers.append("set-cookie", f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/")
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _refuse(status: int, sentence: str, scope: Scope, receive: Receive, send: Send) -> None:
    headers = {"www-authenticate": "Bearer"} if status == 401 else {}
    await PlainTextResponse(sentence, status, headers={**headers, **SECURITY_HEADERS})(scope, receive, send)


class Outside(Exception):
    """A path from the URL that names nothing the dashboard serves (answered 404)."""


def run_dir(runs_root: Path, name: str) -> Path:
    """The run directory called ``name``: one plain path segment naming a directory with run.json directly in the
    runs directory (a symlink to a run elsewhere is refused too)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise Outside(name)
    path = runs_root / name
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise Outside(name) from None
    if real.parent != runs_root or not (real / "run.json").is_file():
        raise Outside(name)
    return real


def tune_dir(runs_root: Path, name: str) -> Path:
    """The tune directory called ``name`` (RUNS_DIR/tune/NAME, with its tune.json), by the same rules as run_dir."""
    tunes = runs_root / "tune"
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise Outside(name)
    try:
        real = (tunes / name).resolve(strict=True)
    except (OSError, RuntimeError):
        raise Outside(name) from None
    if real.parent != tunes.resolve() or not (real / "tune.json").is_file():
        raise Outside(name)
    return real


def run_file(runs_root: Path, name: str, relative: str) -> Path:
    """A file the report may show from a run directory: report.html, or a file under charts/ or tables/. Every part
    is checked before the path is resolved, and the resolved path must still be inside the run directory."""
    directory = run_dir(runs_root, name)
    parts = relative.split("/")
    if (not relative or relative.startswith("/") or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts)
            or not (relative == READABLE[0] or relative.startswith(READABLE[1:])) or not relative.endswith(READABLE_SUFFIXES)):
        raise Outside(relative)
    try:
        real = (directory / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        raise Outside(relative) from None
    if not real.is_relative_to(directory) or not real.is_file():
        raise Outside(relative)
    return real
