"""`refbench serve` as a person uses it: the real command on a free loopback port, driven by headless Chromium
(Debian's chromium through Playwright), over runs of the fast test suite made here."""

from __future__ import annotations

import functools
import json
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import cli_env, hovered_tip, refbench_command, wait_for
from refbench.children import die_with_parent

# A tag value a browser would run if the page did not escape it.
TAG = '<img src=x onerror="document.title=1">'


def _refbench(*args: str, cwd: Path, **popen) -> subprocess.Popen:
    # SIGTERM when the test process dies: nothing outlives a stopped pytest.
    return subprocess.Popen(refbench_command(*args), cwd=cwd, env=cli_env(), text=True,
                            preexec_fn=functools.partial(die_with_parent, signal.SIGTERM), **popen)


def _sleepy_runs(work: Path, *runs: tuple[str, ...]) -> list[str]:
    """Runs of the test suite, side by side (seconds each, most of it starting up); their directory names."""
    started = [_refbench("sleepy", "--runs-dir", "runs", "--name", *args, "--set", "sleepy.sleep_s=0", cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args in runs]
    names = []
    for p in started:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        names.append(Path(stdout.strip().splitlines()[-1]).name)
    return names


class Server:
    """`refbench serve` on a port it picks (--port 0), its URL read from what it prints."""

    def __init__(self, work: Path, *args: str):
        self.err = work / f"serve-{len(list(work.glob('serve-*')))}.err"
        self.process = _refbench("serve", "--runs-dir", "runs", "--port", "0", *args, cwd=work,
                                 stdout=subprocess.DEVNULL, stderr=self.err.open("w"))
        self.url = wait_for(lambda: self._printed() or self._ended(), 30, "refbench serve to print its URL")
        self.port = int(re.search(r":(\d+)/", self.url).group(1))
        self.token = (re.search(r"token=([\w-]+)", self.url) or [None, None])[1]
        self.base = f"http://127.0.0.1:{self.port}/"  # whatever the bind, the test connects over loopback

    def _printed(self) -> str | None:
        found = re.search(r"dashboard: (http://\S+)", self.err.read_text())
        return found.group(1) if found else None

    def _ended(self) -> None:
        assert self.process.poll() is None, self.err.read_text()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail("refbench serve did not stop on SIGTERM")
        assert "Traceback" not in self.err.read_text(), self.err.read_text()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> tuple[Path, list[str]]:
    """Two finished runs, the second twice as fast and tagged."""
    work = tmp_path_factory.mktemp("dashboard")
    runs = _sleepy_runs(work, ("base",), ("faster", "--speed", "2"))
    (work / "runs" / runs[1] / "tags.json").write_text(json.dumps({"firmware": "2.1", "note": TAG}))
    return work, runs


@pytest.fixture(scope="module")
def server(work):
    s = Server(work[0])
    yield s
    s.stop()


def test_the_runs_list_shows_the_runs_with_their_figures_and_tags(browser, server, work):
    page = browser.new_page()
    page.goto(server.base)
    rows = page.locator("tbody tr")
    assert rows.count() == 2
    faster = page.locator("tbody tr", has_text=work[1][1])
    assert "complete" in faster.inner_text() and "firmware=2.1" in faster.inner_text()
    assert re.search(r"peak throughput: 8,000 ops/s", faster.inner_text()), faster.inner_text()
    assert TAG in faster.locator("td.tags").inner_text() and page.title() == "refbench runs"  # shown, not run
    page.goto(server.base + "?tag=firmware%3D2.1")
    assert page.locator("tbody tr").count() == 1
    # A run's report, from its link.
    page.goto(server.base)
    page.locator(f'a:text-is("{work[1][1]}")').click()
    assert page.locator("table.verdict").is_visible() and "faster" in page.title()
    assert not page.locator('[src^="http"], [href^="http"], script').count()  # nothing from the network


def test_the_compare_page_lists_the_figures_of_the_ticked_runs(browser, server, work):
    page = browser.new_page()
    page.goto(server.base)
    for run in work[1]:
        page.get_by_label(f"compare {run}").check()
    page.get_by_role("button", name="Compare ticked runs").click()
    oldest, newer = sorted(work[1])  # the oldest is the baseline
    text = page.locator("main").inner_text()
    assert f"A = {oldest}" in text and f"B = {newer}" in text
    figures = page.locator("table", has_text="B vs A")
    assert "ops_per_s" in figures.inner_text() and re.search(r"2\.00× (faster|slower)", figures.inner_text())
    page.get_by_role("link", name="Every figure the runs share").click()
    assert "lat_ms" in page.locator("table", has_text="B vs A").inner_text()


def test_a_trend_chart_shows_a_value_on_hover(browser, server, work):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(server.base)
    page.locator("tbody tr", has_text=work[1][1]).get_by_role("link", name="8,000 ops/s").click()
    assert "sleepy.ops_per_s" in page.locator("h1").inner_text()
    assert page.locator("tbody tr").count() == 2  # one point per run
    tip = hovered_tip(page)
    assert re.search(r"^\S+-(base|faster): [\d,]+ ops/s", tip), tip
    box, chart = page.locator("figure .pt text").first.bounding_box(), page.locator("figure svg").bounding_box()
    assert chart["x"] <= box["x"] and box["x"] + box["width"] <= chart["x"] + chart["width"], (box, chart)  # not cut
    # A figure no run has: said on the page, with the names the runs do have.
    response = page.goto(server.base + "history?figure=sleepy.ops_per_min")
    assert response.status == 404 and "did you mean sleepy.ops_per_s" in page.locator("main").inner_text()


def _raw_status(port: int, target: str, host: str = "127.0.0.1") -> int:
    """The status of a request sent as written, without the browser's or urllib's normalising of the path."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head and (chunk := s.recv(4096)):
            head += chunk
    return int(head.split()[1])


def test_paths_never_leave_the_runs_directory(browser, server, work):
    base, run = work[0], work[1][0]
    (base / "runs" / run / "charts" / "out.svg").symlink_to("/etc/passwd")
    page = browser.new_page()
    for path in ("runs/..%2F..%2Fetc%2Fpasswd", f"runs/{run}/..%2F..%2F..%2Fetc%2Fpasswd", f"runs/{run}/charts/out.svg",
                 f"runs/{run}/run.json", f"runs/{run}/secrets/plan.json", "runs/%2Fetc%2Fpasswd/report.html"):
        response = page.goto(server.base + path)
        assert 400 <= response.status < 500, (path, response.status)
        assert "root:" not in page.content()
    for target in ("/runs/../../etc/passwd", f"/runs/{run}/../../../etc/passwd", "/runs//etc/passwd",
                   "/static/../../../../etc/passwd", "/progress/..", f"/compare?run=..&run={run}"):
        assert 400 <= _raw_status(server.port, target) < 500, target
    assert _raw_status(server.port, f"/runs/{run}/report.html") == 200


def test_a_loopback_bind_answers_only_to_loopback_host_names(server):
    """A web page whose name its owner rebinds to 127.0.0.1 reaches the port, but with its own name as the Host."""
    assert _raw_status(server.port, "/", host="rebound.example") == 400
    assert _raw_status(server.port, "/", host="localhost") == 200 and _raw_status(server.port, "/", host="[::1]") == 200


def test_the_progress_page_follows_a_running_run(browser, server, work):
    base = work[0]
    before = set((base / "runs").iterdir())
    running = _refbench("sleepy", "--runs-dir", "runs", "--name", "live", "--set", "sleepy.sleep_s=1", "--set",
                        "sleepy.cases=4", cwd=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = wait_for(lambda: [p for p in (base / "runs").iterdir() if p not in before and p.is_dir()
                                and list(p.glob("records/sleepy/*.json"))], 60, "the run's first record")[0]
        page = browser.new_page()
        page.goto(server.base)
        page.locator("tbody tr", has_text=run.name).get_by_role("link", name="running — progress").click()
        text = page.locator("main").inner_text()
        assert "status running" in text and re.search(r"\b[1-3] of 4 cases", text), text
        assert re.search(r"about \d+ s left", text) and "ops (per s)" in text, text  # the ETA and the last figures
        assert page.locator('meta[http-equiv="refresh"]').count() == 1
        assert running.wait(timeout=120) == 0
        page.reload()
        text = page.locator("main").inner_text()
        assert "status complete" in text and "4 of 4 cases" in text, text
        assert page.locator('meta[http-equiv="refresh"]').count() == 0
    finally:
        running.kill()
        running.wait()


def _status(url: str, **headers: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_non_loopback_bind_requires_the_token(browser, work):
    server = Server(work[0], "--host", "0.0.0.0")
    try:
        assert server.token and len(server.token) >= 32
        assert _status(server.base) == 401
        assert _status(server.base + "?token=" + "x" * len(server.token)) == 403
        assert _status(server.base + f"runs/{work[1][0]}/report.html") == 401
        assert _status(server.base, Authorization=f"Bearer {server.token}") == 200
        context = browser.new_context()
        page = context.new_page()
        assert page.goto(server.base + f"?token={server.token}").status == 200
        assert page.locator("tbody tr", has_text=work[1][1]).count() == 1
        cookie = next(c for c in context.cookies() if c["name"] == "refbench_token")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert page.goto(server.base + f"runs/{work[1][0]}/").status == 200  # the cookie carries it on
        assert browser.new_page().goto(server.base).status == 401  # another browser, without the cookie
    finally:
        server.stop()
