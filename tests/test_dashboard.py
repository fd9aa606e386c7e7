"""`refbench serve` as a person uses it: the real command on a free loopback port, driven by headless Chromium
(Debian's chromium through Playwright), over runs of the fast test suite made here."""

from __future__ import annotations

import functools
import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import cli_env, hovered_tip, refbench_command, wait_for
from refbench.catalog import CATALOG_FILE, MAX_TAG_FILTERS
from refbench.children import die_with_parent
from refbench.report.why import next_steps
from refbench.web import MAX_COMPARED_RUNS
from test_catalog import overwrite_page_of

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
    # What to try next, in the words the terminal printed (verdict.json's); the evidence in the suite's section.
    verdict = json.loads((work[0] / "runs" / work[1][1] / "verdict.json").read_text())[0]
    assert f"next: {verdict['next']['short']}" in page.locator("table.verdict").inner_text(), verdict["next"]
    why = page.locator("section#suite-sleepy details.why").text_content()  # folded under "Why": evidence, then steps
    assert f"Bottleneck: {verdict['bottleneck']}" in why and all(said in why for said, _ in next_steps(verdict, set()))


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


def test_the_history_page_lists_every_figure_with_its_latest_value_and_a_sparkline(browser, server, work):
    page = browser.new_page()
    page.goto(server.base + "history")
    row = page.locator("tbody tr", has_text="sleepy.ops_per_s")
    assert row.count() == 1
    cells = row.locator("td")
    assert re.fullmatch(r"[\d,]+ ops/s", cells.nth(1).inner_text()), cells.nth(1).inner_text()
    runs = int(cells.nth(3).inner_text())
    assert runs >= 2 and row.locator("svg.spark polyline").get_attribute("points").count(",") == runs  # a point a run
    latest = cells.nth(4).inner_text()
    assert latest in [p.name for p in (work[0] / "runs").iterdir()]
    row.get_by_role("link", name="sleepy.ops_per_s").click()
    assert "sleepy.ops_per_s" in page.locator("h1").inner_text() and page.locator("figure").count() == 1


def test_a_run_page_leads_back_and_to_a_comparison_with_another_run(browser, server, work):
    base, faster = sorted(work[1])[0], sorted(work[1])[1]
    page = browser.new_page()
    page.goto(server.base + f"runs/{faster}/")
    assert page.locator("table.verdict").is_visible()
    page.get_by_label("compare with").select_option(base)
    page.get_by_role("button", name="Compare").click()
    text = page.locator("main").inner_text()
    assert f"A = {base}" in text and f"B = {faster}" in text  # the older run is the baseline
    configurations = page.locator("table", has_text="cores / threads").inner_text()
    assert "firmware=2.1" in configurations  # the tags tell the configurations apart
    page.get_by_role("link", name=f"A: {base}").click()  # and back to a run's report
    assert base in page.locator("p.sub").first.inner_text()
    page.locator("nav.top").get_by_role("link", name="Runs").click()
    assert page.title() == "refbench runs"


def test_the_compare_page_alone_offers_the_runs_to_choose(browser, server, work):
    base, faster = sorted(work[1])
    page = browser.new_page()
    page.goto(server.base + "compare")
    page.get_by_label("baseline (A)").select_option(base)
    page.get_by_label("compared with it (B)").select_option(faster)
    page.get_by_role("button", name="Compare").click()
    text = page.locator("main").inner_text()
    assert f"A = {base}" in text and f"B = {faster}" in text and "Answers" in text


def test_every_page_fits_a_phone(browser, server, work):
    base, faster = sorted(work[1])
    page = browser.new_page(viewport={"width": 400, "height": 800})
    for path in ("", "history", "history?figure=sleepy.ops_per_s", "compare", f"compare?run={base}&run={faster}",
                 f"runs/{faster}/", f"progress/{faster}"):
        page.goto(server.base + path)
        assert page.evaluate("document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"), path
        # The runs and figures lists are cards on a phone: every column readable without scrolling sideways.
        for table in page.locator("table.runs").all():
            assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth"), path
    page.goto(server.base)
    figures = page.locator("table.runs tbody tr").first.locator("td.figures").bounding_box()
    assert figures["x"] >= 0 and figures["x"] + figures["width"] <= 400  # the run's figures, on the screen


def test_a_figure_not_rated_at_its_size_is_not_shown_as_a_figure(work, tmp_path):
    """DSS power at the specification's 0.1 s floor, a DW rating of far too little data: the lists say so, in
    words, instead of a bold number."""
    from refbench.catalog import Catalog
    from refbench.web.pages import runs_page

    run = tmp_path / "runs" / work[1][1]  # the tagged run: its long tag narrows the other columns
    shutil.copytree(work[0] / "runs" / run.name, run)
    verdict = json.loads((run / "verdict.json").read_text())
    verdict[0]["headlines"][0]["unrated"] = "too small to rate"
    figure = f'{verdict[0]["headlines"][0]["value"]:,.0f}'
    (run / "verdict.json").write_text(json.dumps(verdict))
    with Catalog(tmp_path / "runs") as catalog:
        catalog.update()
        html = runs_page(catalog.runs(), {"tag": []}, False, [])
    assert "not rated at this size" in html and f"{figure} ops/s" not in html
    listed = subprocess.run(refbench_command("runs", "--runs-dir", str(tmp_path / "runs")), capture_output=True, text=True,
                            env=cli_env(COLUMNS="300"), timeout=120)  # the tag column must not wrap the words
    assert listed.returncode == 0 and "not rated at this size" in listed.stdout and figure not in listed.stdout


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


@pytest.mark.slow
def test_a_request_whose_headers_do_not_arrive_in_time_is_closed_and_others_are_answered(tmp_path):
    """A request line sent in half, a connection that sends nothing, and half a second request on a kept-alive
    connection: each closed by the server within its bound on the headers, while a whole request is answered."""
    import http.client

    from refbench.web.slow_clients import HEADERS_S

    (tmp_path / "runs").mkdir()
    server = Server(tmp_path)
    opened = []
    try:
        half, silent = (socket.create_connection(("127.0.0.1", server.port), timeout=HEADERS_S * 3) for _ in range(2))
        kept = http.client.HTTPConnection("127.0.0.1", server.port, timeout=HEADERS_S * 3)
        opened += [half, silent, kept]
        half.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
        kept.request("GET", "/")
        assert kept.getresponse().read() and kept.sock is not None  # kept alive for the next request
        kept.sock.sendall(b"GET /history HTTP/1.1\r\nHo")
        started = time.monotonic()
        assert _get(server.base)[0] == 200  # beside them, a whole request is answered
        for connection in (half, silent, kept.sock):
            assert connection.recv(1024) == b""  # closed: recv waits for it, up to the socket's timeout
        assert time.monotonic() - started < HEADERS_S + 10
    finally:
        for connection in opened:
            connection.close()
        server.stop()


def test_the_progress_page_follows_a_running_run(browser, server, work):
    base = work[0]
    before = set((base / "runs").iterdir())
    running = _refbench("sleepy", "--runs-dir", "runs", "--name", "live", "--set", "sleepy.sleep_s=1", "--set",
                        "sleepy.cases=5", cwd=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = wait_for(lambda: [p for p in (base / "runs").iterdir() if p not in before and p.is_dir()
                                and list(p.glob("records/sleepy/*.json"))], 60, "the run's first record")[0]
        page = browser.new_page()
        page.goto(server.base)
        page.locator("tbody tr", has_text=run.name).get_by_role("link", name="running — progress").click()
        text = page.locator("main").inner_text()
        assert "status running" in text and re.search(r"\b[1-4] of 5 cases", text), text
        assert re.search(r"about \d+ s left", text) and "ops (per s)" in text, text  # the ETA and the last figures
        assert page.locator('meta[http-equiv="refresh"]').count() == 1
        assert running.wait(timeout=120) == 0
        page.reload()
        text = page.locator("main").inner_text()
        assert "status complete" in text and "5 of 5 cases" in text, text
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


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_damaged_or_unwritable_catalog_gives_way_to_the_run_directories_while_serving(work, tmp_path):
    shutil.copytree(work[0] / "runs", tmp_path / "runs", symlinks=True)
    catalog_file, made = tmp_path / "runs" / CATALOG_FILE, work[1]
    server = Server(tmp_path)
    try:
        status, page = _get(server.base)
        assert status == 200 and all(run in page for run in made)
        # Between requests the server holds no connection: the catalog is all in its file, as a copy would leave it.
        wait_for(lambda: not catalog_file.with_name(CATALOG_FILE + "-wal").exists(), 30, "the catalog's WAL checkpointed")
        overwrite_page_of(catalog_file, "runs")
        status, page = _get(server.base)
        assert status == 200 and all(run in page for run in made), page
        assert "was damaged (database disk image is malformed) and has been rebuilt from the run directories" in page

        # Made immutable while serving, with a change to index: the pages come from the run directories.
        (tmp_path / "runs" / made[0] / "tags.json").write_text(json.dumps({"firmware": "9.9"}))
        if subprocess.run(["chattr", "+i", str(catalog_file)], capture_output=True).returncode != 0:
            pytest.skip(f"this file system refuses chattr +i on {catalog_file}")
        try:
            page = wait_for(lambda: (lambda answer: answer[0] == 200 and "firmware=9.9" in answer[1] and answer[1])(
                _get(server.base)), 30, "the new tag on the runs page")
        finally:
            subprocess.run(["chattr", "-i", str(catalog_file)], check=True)
        assert all(run in page for run in made) and "could not be used (attempt to write a readonly database)" in page
        status, page = _get(server.base + "history?figure=sleepy.ops_per_s&tag=firmware%3D9.9")
        assert status == 200 and made[0] in page and made[1] not in page
    finally:
        server.stop()
    said = [line for line in server.err.read_text().splitlines() if "runs catalog" in line]
    assert len(said) == 2 and "was damaged" in said[0] and "could not be used" in said[1], said


def test_the_work_of_a_page_is_bounded(server, work):
    base, made = server.base, work[1]
    status, page = _get(base + "compare?" + "&".join(["run=" + made[0]] * 150 + ["run=" + made[1]]))
    assert status == 200 and f"A = {made[0]}" in page and f"B = {made[1]}" in page and "C = " not in page
    assert _get(base + f"compare?run={made[0]}&run={made[0]}")[0] == 400  # one run, named twice
    status, page = _get(base + "compare?" + "&".join(f"run=r{i}" for i in range(MAX_COMPARED_RUNS + 1)))
    assert status == 400 and f"at most {MAX_COMPARED_RUNS} runs" in page
    too_many = "&".join(f"tag=t{i}%3D1" for i in range(1000))
    for page_and_query in ("?", "history?figure=sleepy.ops_per_s&"):
        status, page = _get(base + page_and_query + too_many)
        assert status == 400 and f"more than the {MAX_TAG_FILTERS} one query takes" in page, (page_and_query, status)
        status, page = _get(base + page_and_query + "&".join(["tag=firmware%3D2.1"] * 1000))  # one filter, repeated
        assert status == 200 and made[1] in page and made[0] not in page, (page_and_query, status)


QUERY_KEYS = ["suite", "host", "tag", "since", "all", "figure", "run", "metric", "order", "token"]
QUERY_VALUES = ["sleepy", "sleepy.ops_per_s", "sleepy.case-001.ops_per_s", "firmware=2.1", "1", "oldest", "30d",
                "2026-11-01", "", "..", "%", "%ff", "\x00", "a=b=c"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(route=st.sampled_from(["/", "/history", "/compare", "/progress/{run}", "/runs/{run}/", "/runs/{run}/charts/x.svg",
                              "/static/dashboard.css"]),
       pairs=st.lists(st.tuples(st.sampled_from(QUERY_KEYS) | st.text(max_size=8),
                                st.sampled_from(QUERY_VALUES + ["{run}"]) | st.text(max_size=40)), max_size=40),
       many=st.tuples(st.sampled_from([0, 2, 30, 1100]), st.sampled_from(QUERY_KEYS), st.sampled_from(QUERY_VALUES)),
       raw=st.none() | st.text(max_size=200))
def test_no_query_string_gives_a_server_error(server, work, route, pairs, many, raw):
    run = work[1][len(pairs) % 2]
    count, key, value = many  # one parameter many times, each a different name (tags, runs)
    query = urlencode([(k, v.replace("{run}", run)) for k, v in pairs] + [(key, f"n{i}={value}") for i in range(count)])
    if raw is not None:  # as typed: stray '%', '&&', '=' anywhere, any character percent-encoded
        query = quote(raw, safe="=&%+;/?")
    status = _raw_status(server.port, route.replace("{run}", run) + "?" + query)
    assert status < 500, (route, query)


def test_a_damaged_tune_json_costs_one_listing_entry_never_a_page(server, work):
    """A tune.json that is a JSON list, cut short, nested 100,000 deep, or of the wrong shape: the tunes page lists it
    as damaged beside the sound one, and its own page says so (not a server error)."""
    tunes = work[0] / "runs" / "tune"
    sound = {"suite": "oltp", "profile": "quick", "steps": [], "answer": "keep the defaults: nothing tried"}
    damaged = {"as-a-list": "[1, 2]", "cut-short": json.dumps(sound)[:30], "deep": "[" * 100_000 + "]" * 100_000,
               "wrong-shape": json.dumps({"suite": "oltp", "steps": "all of them"}),
               "strange-values": json.dumps({"suite": "oltp", "profile": "quick", "steps": [{}], "budget_s": "x"})}
    for name, text in {"20261127T000000Z-oltp": json.dumps(sound), **damaged}.items():
        (tunes / name).mkdir(parents=True)
        (tunes / name / "tune.json").write_text(text)
    listed = urllib.request.urlopen(server.base + "tune", timeout=30).read().decode()
    assert "keep the defaults: nothing tried" in listed
    for name in ("as-a-list", "cut-short", "deep", "wrong-shape"):
        assert f">{name}<" in listed and listed.count("damaged: ") >= 4, listed
        with pytest.raises(urllib.error.HTTPError, match="422"):
            urllib.request.urlopen(f"{server.base}tune/{name}", timeout=30)
    with pytest.raises(urllib.error.HTTPError, match="422"):  # its values are checked as the page draws them
        urllib.request.urlopen(f"{server.base}tune/strange-values", timeout=30)


# A run's name as long as a real one can be: a picker that offered it at its width would widen a phone's page.
LONG_NAME = "fw22-nvme-raid10-after-the-firmware-update-at-night"


@pytest.fixture(scope="module")
def tagged(tmp_path_factory):
    """Runs of three configurations told apart by their tags, each headline measured three times; its own server.
    (work, the runs by name, the server)."""
    work = tmp_path_factory.mktemp("tagged")
    repeats = ("--repeats", "3", "--noise-pct", "5", "--set", "sleepy.cases=2")
    names = ["base", "fw21-a", "fw21-b", LONG_NAME]
    made = _sleepy_runs(work, ("base", *repeats, "--seed", "1"),
                        ("fw21-a", *repeats, "--seed", "2", "--speed", "1.5", "--tag", "firmware=2.1"),
                        ("fw21-b", *repeats, "--seed", "3", "--speed", "1.6", "--tag", "firmware=2.1"),
                        (LONG_NAME, *repeats, "--seed", "4", "--speed", "0.8", "--tag", "firmware=2.2", "--tag", "disk=nvme"))
    server = Server(work)
    yield work, dict(zip(names, made)), server
    server.stop()


def _svg_numbers(svg) -> dict:
    """What a dot plot draws, read from its SVG as the browser has it: the x axis's ticks (position, label), the 1×
    line's position, and per row its dot's and its interval's ends."""
    return svg.evaluate("""svg => {
        const x = (el, a) => el ? parseFloat(el.getAttribute(a)) : null;
        const path = el => el ? el.getAttribute('d').trim().split(/\\s+/).filter(w => !/^[ML]$/.test(w)).map(parseFloat) : null;
        const rows = [];
        for (let i = 0; svg.querySelector(`#ratios-dot-${i}`); i++)
            rows.push({dot: x(svg.querySelector(`#ratios-dot-${i} use`), 'x'), ci: path(svg.querySelector(`#ratios-ci-${i} path`))});
        return {ticks: [...svg.querySelectorAll('g[id^="xtick_"]')].map(g => [x(g.querySelector('use'), 'x'), g.querySelector('text').textContent]),
                one: path(svg.querySelector('#ratios-one path')), rows: rows,
                titles: [...svg.querySelectorAll('g.ratio')].map(g => g.querySelector('title').textContent)};
    }""")


def test_the_compare_page_draws_each_headline_ratio_with_its_interval(browser, tagged):
    import math

    from refbench.report.compare import headline_words

    work, runs, server = tagged
    compared = [runs["base"], runs["fw21-a"], runs[LONG_NAME]]
    said = subprocess.run(refbench_command("compare", *compared, "--runs-dir", "runs", "--json"), cwd=work, env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    heads = [a for a in json.loads(said.stdout)["answers"] if a["kind"] == "headline"]
    assert sorted(a["answer"] for a in heads) == ["faster", "slower"] and all(a["ci_low"] for a in heads)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(server.base + "compare?" + urlencode([("run", r) for r in compared]))
    drawn = _svg_numbers(page.locator("figure.ratios svg"))
    # One row per headline figure, in the answers' order, each titled with its name and its answer in words.
    assert drawn["titles"] == [f"{a['vs']}: {a['suite']} {a['figure']}: {headline_words(a)}" for a in heads]
    assert any(re.fullmatch(r"1\.\d\d× faster \(1\.\d\d–1\.\d\d\)", headline_words(a)) for a in heads)
    # The axis is logarithmic: place every tick from two of them, and 1× where its line is.
    exact = [(x, float(label.rstrip("×").replace(",", ""))) for x, label in drawn["ticks"] if not label.startswith(("0", "1/"))]
    (x0, v0), (x1, v1) = exact[0], exact[-1]
    value = lambda x: math.exp(math.log(v0) + (x - x0) / (x1 - x0) * (math.log(v1) - math.log(v0)))  # noqa: E731
    assert len(drawn["ticks"]) >= 3 and all(value(x) == pytest.approx(v, rel=1e-3) for x, v in exact)
    assert drawn["one"][0] == drawn["one"][2] and value(drawn["one"][0]) == pytest.approx(1, rel=1e-3)
    # Each dot is its B / A and each line's ends are the interval the answer used, as --json gives them.
    assert len(drawn["rows"]) == len(heads)
    for row, a in zip(drawn["rows"], heads):
        assert value(row["dot"]) == pytest.approx(a["ratio"], rel=2e-3)
        low, _, high, _ = row["ci"]
        assert (value(low), value(high)) == pytest.approx((a["ci_low"], a["ci_high"]), rel=2e-3)
        assert (high < drawn["one"][0]) == (a["answer"] == "slower")  # a slower throughput left of 1×
    # Above the answers it draws, on a page that fits a phone.
    text = page.locator("main").inner_text()
    assert text.index("Headline figures: B / A") < text.index("Answers")
    page.set_viewport_size({"width": 400, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 400


def test_a_trend_has_a_line_per_tag_and_each_point_opens_its_run(browser, tagged):
    work, runs, server = tagged
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(server.base + "history?figure=sleepy.ops_per_s")
    svg = page.locator("figure svg")
    points = svg.evaluate("""svg => [...svg.querySelectorAll('a[href]')].map(a => ({href: a.getAttribute('href'),
        line: a.getAttribute('data-line'), x: parseFloat(a.querySelector('circle').getAttribute('cx')),
        y: parseFloat(a.querySelector('circle').getAttribute('cy'))}))""")
    tags = {name: json.loads((work / "runs" / name / "tags.json").read_text()) if (work / "runs" / name / "tags.json").exists() else {}
            for name in runs.values()}
    # A point per run, each a link to its run's page.
    assert sorted(p["href"] for p in points) == sorted(f"/runs/{name}/" for name in runs.values())
    lines: dict[str, list[dict]] = {}
    for p in points:
        lines.setdefault(p["line"], []).append(p)
    # A line per set of tags: the runs on one line carry the same tags, and no two lines share them.
    on_line = [{json.dumps(tags[p["href"].split("/")[2]], sort_keys=True) for p in line} for line in lines.values()]
    assert all(len(t) == 1 for t in on_line) and len({t.pop() for t in on_line}) == len(lines) == 3
    # What is drawn: each line's markers are its own runs' points, and the legend names each line by its tags.
    for i, line in lines.items():
        markers = svg.evaluate(f"""svg => [...svg.querySelectorAll('#trend-line-{i} use')].map(u =>
            [parseFloat(u.getAttribute('x')), parseFloat(u.getAttribute('y'))])""")
        flat = lambda pairs: [c for pair in sorted(pairs) for c in pair]  # noqa: E731
        assert flat(markers) == pytest.approx(flat([p["x"], p["y"]] for p in line), abs=0.1)
    legend = svg.locator('[id^="legend"]').text_content()
    for name in ("no tags", "firmware=2.1", "disk=nvme, firmware=2.2"):
        assert name in legend, legend
    # Every point opens its run's page, and a click on one goes there.
    for p in points:
        assert _get(server.base + p["href"].lstrip("/"))[0] == 200, p["href"]
    page.locator(f'figure a[href="/runs/{runs["fw21-b"]}/"] circle').click()
    page.wait_for_url(f"**/runs/{runs['fw21-b']}/")
    assert page.locator("table.verdict").is_visible() and "fw21-b" in page.title()


def test_the_compare_pickers_fit_a_phone(browser, tagged):
    work, runs, server = tagged
    page = browser.new_page(viewport={"width": 400, "height": 800})
    page.goto(server.base + "compare")
    assert LONG_NAME in page.get_by_label("compared with it (B)").inner_text()  # the longest name is offered
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    for picker in page.locator("form.filters select").all():
        box = picker.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 400, box
    # Still pickers: choose the run of the long name, and the comparison opens (and fits too).
    page.get_by_label("baseline (A)").select_option(runs["base"])
    page.get_by_label("compared with it (B)").select_option(runs[LONG_NAME])
    page.get_by_role("button", name="Compare").click()
    assert f"B = {runs[LONG_NAME]}" in page.locator("main").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
