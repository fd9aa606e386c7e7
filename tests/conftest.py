from __future__ import annotations

import hashlib
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
TEST_SUITES = "sleepy=suite_for_tests:SleepySuite"
# One measurement of each case unless a test asks for repeats (--repeats, a plan's repeats): the profiles' three
# would triple the headline cases of every test run. tests/test_repeats.py runs the profile's default without it.
os.environ.setdefault("REFBENCH_REPEATS", "1")
# The tests run beside each other (xdist): a run's neighbours are the other tests, and a test that is not about them
# does not have its figures marked disturbed by them. tests/test_contention.py judges disturbance with it unset.
os.environ.setdefault("REFBENCH_DISTURBED", "off")


# The files whose slow tests take longest, longest first: a module that goes whole to one worker by its summed
# time, any other by its longest test (wall times in one `make test` on the 2-core VM, 2026-11-29). `make test` hands
# tests to workers one at a time in collection order (--dist loadgroup): these go first, in this order, so they run
# beside the many short ones instead of after them, where one of them alone would set the suite's end.
LONGEST_FILES = ["test_redaction.py", "test_mariadb_oltp.py", "test_dashboard.py", "test_report_browser.py",
                 "test_tune.py", "test_advice.py", "test_catalog.py", "test_device_sweep.py", "test_dss.py",
                 "test_cluster.py", "test_dw.py", "test_consistency.py", "test_analytics.py", "test_cachebound.py",
                 "test_device.py", "test_kills.py", "test_least_privilege.py", "test_compare.py", "test_oltp.py",
                 "test_exhaustion.py", "test_contention.py", "test_verdict.py", "test_progress.py", "test_targets.py",
                 "test_resume.py"]
# Fixtures that start a server, a browser, a cluster or a measured run: a test that uses one is `live`, and so is a
# test of a module with a fixture of its own shared by its tests (a loaded server, a run made once).
LIVE_FIXTURES = {"data_dir", "reachable_dir", "process_tree", "browser", "tpch_sf1", "small_reachable_fs",
                 "three_file_systems", "services", "namespaces", "certificates"}


def _module_fixture(item) -> bool:
    """Whether the test uses a fixture made once for its module (a loaded server, runs made once)."""
    return any(d.scope in ("module", "package") for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks into the tests' ids
def pytest_collection_modifyitems(items):
    """Marks `live` what make check leaves out; keeps a module that shares a fixture among its tests on one worker
    (xdist_group: it is made once); puts the slow tests first, longest files first."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    for item in items:
        shared = _module_fixture(item)
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
        if shared or item.get_closest_marker("slow") or LIVE_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.live)

    def order(item):
        slow = item.get_closest_marker("slow") is not None or item.get_closest_marker("xdist_group") is not None
        return (not slow, rank.get(item.path.name, len(rank)))

    items.sort(key=order)  # stable: a file's own order is kept


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["REFBENCH_SUITES"] = TEST_SUITES
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH", "")]))
    env.pop("REFBENCH_DEBUG", None)
    for size in ("COLUMNS", "LINES"):  # pytest-xdist's workers set 80 × 24; a test that wants a width says so
        env.pop(size, None)
    env.update(extra)
    return env


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        return self.stdout.strip().splitlines()[-1]

    def json(self):
        return json.loads(self.stdout)


def refbench_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "refbench", *args]


@pytest.fixture(scope="session")
def _forkserver(tmp_path_factory):
    """This worker's fork server (tests/forkserver.py): its socket's path."""
    import forkserver

    process, path = forkserver.start(tmp_path_factory.mktemp("forkserver"), cli_env())
    yield path
    process.kill()
    process.wait()


@pytest.fixture
def refbench(tmp_path, _forkserver):
    """Runs the real CLI in a process of its own (forked from one that has imported refbench: tests/forkserver.py),
    in tmp_path, with the test suite registered."""
    import forkserver

    def run(*args: str, timeout: float = 600, cwd: Path | None = None) -> Result:  # a hang guard, not a speed test
        # Its own state directory: what a tune journals (the settings it changed) is this test's alone.
        p = forkserver.run(_forkserver, list(args), cwd or tmp_path, cli_env(REFBENCH_STATE_DIR=str(tmp_path / "state")),
                           timeout)
        return Result(p.returncode, p.stdout, p.stderr)

    return run


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 0.05):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")


class ProcessTree:
    """A refbench command run under tests/process_tree.py: the test can signal it and then learn which of the
    processes it started outlived it, looking at nothing but that command's own descendants."""

    def __init__(self, args: list[str], cwd: Path, linger_s: float = 10.0, env: dict[str, str] | None = None):
        self.out, self.err = cwd / f"tree-{time.monotonic_ns()}.out", cwd / f"tree-{time.monotonic_ns()}.err"
        self.harness = subprocess.Popen(
            [sys.executable, str(TESTS / "process_tree.py"), "--linger-s", str(linger_s), "--stdout", str(self.out),
             "--stderr", str(self.err), "--", *refbench_command(*args)],
            cwd=cwd, env=cli_env(**(env or {})), stdout=subprocess.PIPE, text=True)
        self.pid = json.loads(self.harness.stdout.readline())["pid"]
        self.result: dict | None = None

    def children(self) -> dict[int, str]:
        """The live descendants of the refbench process (pid -> command line)."""
        from process_tree import descendants

        return descendants(self.pid)

    def forked_workers(self) -> list[int]:
        """Processes refbench forked (loaders, virtual users): they carry its own command line."""
        own = Path(f"/proc/{self.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        return [pid for pid, cmd in self.children().items() if cmd == own]

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def finish(self, timeout_s: float = 300) -> dict:
        """Waits for refbench to end and its descendants to go: {code, gone_after_s, survivors, stdout, stderr}."""
        if self.result is None:
            line = self.harness.communicate(timeout=timeout_s)[0].strip().splitlines()[-1]
            self.result = {**json.loads(line), "stdout": self.out.read_text(), "stderr": self.err.read_text()}
        return self.result

    def stop(self) -> None:
        if self.result is None and self.harness.poll() is None:
            try:
                self.signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.finish()


@pytest.fixture
def process_tree(tmp_path):
    """Starts refbench commands under the harness; whatever a failing test left running is killed at the end."""
    trees: list[ProcessTree] = []

    def start(*args: str, linger_s: float = 10.0, env: dict[str, str] | None = None) -> ProcessTree:
        trees.append(ProcessTree(list(args), tmp_path, linger_s, env))
        return trees[-1]

    yield start
    for tree in trees:
        tree.stop()


@pytest.fixture(autouse=True)
def _no_scratch_left_behind(tmp_path):
    """A run interrupted on purpose keeps its scratch directory for a resume (/var/tmp/refbench/<run>-<hash of its
    path>: a managed server's data when the run directory is closed to the server's account); once the test is over
    no resume will come, so the scratch directories of the runs in this test's own temporary directory go. Another
    test's, or another refbench's, are never touched: the name holds the hash of the run's path."""
    yield
    from refbench.suites.context import SCRATCH_ROOT, scratch_dir
    from refbench.runstore import Run

    if not SCRATCH_ROOT.is_dir():
        return
    for run in tmp_path.glob("**/run.json"):
        shutil.rmtree(scratch_dir(Run(run.parent)), ignore_errors=True)


@pytest.fixture
def reachable_dir():
    """A directory of the test's own that the postgres system user can reach (pytest's tmp_path is closed to other
    users); a server a failing test left in its pgdata is stopped."""
    from refbench.engines.postgres import ManagedPostgres

    base = Path(tempfile.mkdtemp(prefix="refbench-test-"))
    base.chmod(0o755)
    yield base
    ManagedPostgres(base / "pgdata", {}).stop_stale()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def tpch_sf1(tmp_path_factory):
    """tpchgen-cli's SF 1 CSVs, generated once for every engine's reference-answer test: (directory, what the first
    generation reported). Under xdist the workers share one set (15 s of CPU each time)."""
    from refbench.suites.dss import datagen

    directory = _shared_dir(tmp_path_factory) / "tpch-sf1"
    return directory, _made_once(directory.parent, "tpch-sf1", lambda: datagen.generate(directory, 1.0))


def _shared_dir(tmp_path_factory) -> Path:
    """The directory of this pytest run that all its xdist workers share (the one above each worker's own); without
    xdist (-p no:xdist), the run's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def _made_once(shared: Path, name: str, make):
    """What ``make`` returned (JSON), made once for the whole pytest run: the first worker to ask makes it while it
    holds a lock in ``shared``, the others wait and read what it said."""
    import fcntl

    said = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not said.exists():
            said.write_text(json.dumps(make(), default=str))
    return json.loads(said.read_text())


def _template_root(shared: Path) -> Path:
    """Where this pytest run keeps its loaded server templates: under /var/tmp, which the postgres system user can
    reach (pytest's directories are closed to it), named after the run's own directory."""
    return Path("/var/tmp") / f"refbench-test-templates-{hashlib.sha256(str(shared).encode()).hexdigest()[:12]}"


@pytest.fixture(scope="session")
def tpcc_template(tmp_path_factory) -> Path:
    """A stopped managed PostgreSQL whose database "refbench" holds one TPC-C warehouse as database.build loads it
    (two loaders): made once for the whole run, by the first worker to ask while it holds a lock, and copied by each
    test that needs it (loaded_postgres) instead of an initdb and a load of its own. pytest_sessionfinish removes it."""
    from refbench.engines.postgres import ManagedPostgres
    from refbench.suites.oltp import database, transactions_at

    root = _template_root(_shared_dir(tmp_path_factory))
    root.mkdir(mode=0o755, exist_ok=True)
    template = root / "tpcc-1"

    def load() -> dict:
        shutil.rmtree(template, ignore_errors=True)
        template.mkdir(mode=0o755)
        server = ManagedPostgres(template / "pgdata", {})
        server.start()
        try:
            return database.build(transactions_at(server.database("refbench")), 1, 2, False, lambda *_: None)
        finally:
            server.stop()

    _made_once(root, "tpcc-1", load)
    return template / "pgdata"


@pytest.fixture
def loaded_postgres(tpcc_template, reachable_dir):
    """A managed PostgreSQL (not started) on a copy of the one-warehouse template, in ``reachable_dir``/pgdata."""
    from refbench.engines.postgres import ManagedPostgres

    def make(settings: dict[str, str] | None = None) -> ManagedPostgres:
        subprocess.run(["cp", "-a", str(tpcc_template), str(reachable_dir / "pgdata")], check=True)
        return ManagedPostgres(reachable_dir / "pgdata", settings or {})

    return make


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the controller, once every worker is done
        shutil.rmtree(_template_root(session.config._tmp_path_factory.getbasetemp()), ignore_errors=True)


@pytest.fixture
def data_dir(reachable_dir):
    """A managed server's data directory the postgres system user can reach."""
    return reachable_dir / "pgdata"


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium: Debian's chromium package (scripts/setup.sh installs it) driven by Playwright, whose own
    browser download is not needed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium")
        yield b
        b.close()


def hovered_tip(page) -> str:
    """Hovers the first chart point on a page and returns the value it shows, hidden until then."""
    point = page.locator("figure .pt").first
    tip = point.locator("text")
    assert not tip.is_visible()
    point.locator("circle").hover()
    assert tip.is_visible()
    return tip.text_content()
