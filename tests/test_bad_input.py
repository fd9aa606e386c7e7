"""Bad input never half-writes (issue 15, point 3; the corrupt-record part of point 7).

Every option and plan key is checked before a run directory exists; a corrupt run file is named, with the line at
fault, by resume, report, compare and runs, and is never an internal error. The CLI runs in-process here
(refbench.cli.main, SystemExit caught): the input checks are what is under test, and nothing of what is fed in
measures anything.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import string
import tempfile
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis.errors import InvalidArgument
from hypothesis import strategies as st

from conftest import TEST_SUITES, Result
from refbench.cli import main
from refbench.errors import UserError
from refbench.host.inventory import postgres_binary
from refbench.plan import TOP_LEVEL, load_plan
from refbench.suites import get_suite
from refbench.suites.dss.datagen import tpchgen

needs_postgres = pytest.mark.skipif(not postgres_binary("postgres"), reason="PostgreSQL server binaries not installed")


@contextmanager
def _inside(directory: Path):
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def run_in_process(cwd: Path, *args: str) -> Result:
    """refbench ARGS as a user would type it, in this process: exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    sigterm = signal.getsignal(signal.SIGTERM)
    with _inside(cwd), redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code
        finally:
            signal.signal(signal.SIGTERM, sigterm)  # main() installs its own; pytest keeps the default
    return Result(code, out.getvalue(), err.getvalue())


def _tree(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


def _assert_refused(result: Result, expected: list[str]) -> None:
    assert result.code == 2, (result.code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    for part in expected:
        assert part in lines[0], (part, lines[0])


class WouldRun(BaseException):
    """Raised where refbench would write the run directory: every check passed. A BaseException, so that the CLI's
    own handlers (which turn an Exception into 'internal error') let it through to the test."""

    def __init__(self, plan):
        super().__init__("the checks passed")
        self.plan = plan


def _stop(cls, plan, meta):
    raise WouldRun(plan)


@pytest.fixture
def stop_before_writing(monkeypatch):
    """Run.create is a run's first write (of its directory): input that gets there passed every check, and stops."""
    from refbench import runner
    from refbench.runstore import Run

    monkeypatch.setenv("REFBENCH_SUITES", TEST_SUITES)
    monkeypatch.delenv("REFBENCH_DEBUG", raising=False)
    monkeypatch.setattr(Run, "create", classmethod(_stop))
    monkeypatch.setattr(runner, "run_metadata", lambda: {})  # the host inventory: slow, and it only reads


@pytest.fixture
def cli(tmp_path, stop_before_writing):
    """The CLI in tmp_path; input that passes every check stops where the run directory would be written."""

    def run(*args: str) -> Result:
        try:
            return run_in_process(tmp_path, *args)
        except WouldRun:
            return Result("accepted: passed every check", "", "")

    return run


# ---- options and plan keys, each refused with one sentence before anything is written ---------------------

BAD_OPTIONS = [
    (["oltp", "--warehouses", "-1"], ["--warehouses must be at least 0, not -1."]),
    (["oltp", "--warehouses", "0", "--dsn", "host=db1"], ["warehouses 0 sizes the load to the free space", "set warehouses"]),
    (["device", "--size", "-4k"], ["--size must be at least 0 bytes, not -4096."]),
    (["oltp", "--users", "1,,2"], ["--users has an empty item", "'1,,2'"]),
    (["oltp", "--users", "1,"], ["--users has an empty item", "'1,'"]),
    (["oltp", "--users", "2,2"], ["--users lists 2 twice"]),
    (["run", "--hosts", "1,,2"], ["--hosts has an empty item"]),
    (["run", "--hosts", "-1"], ["--hosts item -1 must be at least 1, not -1."]),
    (["oltp", "--shared-buffers", "lots"], ["--shared-buffers must be a size such as 128MB", "'lots'"]),
    (["oltp", "--shared-buffers", "-1MB"], ["--shared-buffers must be a size", "'-1MB'"]),
    (["oltp", "--shared-buffers", "0"], ["--shared-buffers must be more than zero, not '0'."]),
    (["dss", "--shared-buffers", "4gb"], ["--shared-buffers must be a size", "case as shown", "'4gb'"]),
    (["dw", "--pg-settings", "work_mem=4gb"], ["--pg-settings item 'work_mem=4gb'", "unit 'gb'"]),
    (["oltp", "--pg-settings", "work_mem = 4MB"], ["--pg-settings item 'work_mem = 4MB' must look like name=value"]),
    (["oltp", "--pg-settings", "listen_addresses=*"], ["listen_addresses", "refbench sets itself"]),
    (["dss", "--duckdb-memory-limit", "lots"], ["--duckdb-memory-limit must be a size such as 512MB", "'lots'"]),
    (["dss", "--duckdb-memory-limit", "0"], ["--duckdb-memory-limit must be a size", "'0'"]),
    (["dw", "--duckdb-memory-limit", "-1MB"], ["--duckdb-memory-limit must be a size", "'-1MB'"]),
    (["dw", "--duckdb-memory-limit", "100KB"], ["--duckdb-memory-limit must be at least 1MB", "'100KB'"]),
    (["dss", "--sf", "nan"], ["--sf must be a finite number, not nan."]),
    (["dss", "--sf", "inf"], ["--sf must be a finite number, not inf."]),
    (["oltp", "--dsn", "host"], ["--dsn must be a libpq connection string", 'missing "=" after "host"']),
    (["oltp", "--set", "oltp.warehouse=3"], ["--set oltp.warehouse is not a known key (did you mean 'warehouses'?)."]),
    (["run", "--set", "olpt.users=1"], ["names 'olpt', which is not a known suite (did you mean 'oltp'?)."]),
    (["run", "--suite", "devce"], ["names 'devce', which is not a known suite (did you mean 'device'?)."]),
    (["run", "--profile", "quik"], ["--profile must be one of quick, standard, full, not 'quik' (did you mean 'quick'?)."]),
    (["device", "--block-sizes", "4k,1000"], ["--block-sizes item 1000 must be a multiple of 512 bytes."]),
    (["device", "--patterns", "random,sequental"], ["not 'sequental' (did you mean 'sequential'?)."]),
    (["oltp", "--repeats", "1000000000000"], ["--repeats must be at most 100"]),
    (["sleepy", "--runs-dir", " "], ["--runs-dir must not be empty."]),
    (["sleepy", "--warehouses", "3"], ["No such option: --warehouses"]),
    (["dss", "--engines", "duckdb,oracle"], ["--engines item 'oracle' must be one of duckdb, postgres, mariadb"]),
    (["dw", "--engines", "mysql"], ["--engines item 'mysql' must be one of duckdb, postgres, mariadb, not 'mysql'."]),
    (["dss", "--dsn", "mysql://bench@db1:port/tpch"], ["--dsn must be a MariaDB DSN", "is not a number from 1 to 65535"]),
    (["dss", "--engines", "duckdb", "--dsn", "mysql://bench@db1/tpch"],
     ["[dss] dsn is a MariaDB DSN, and the engines ['duckdb'] do not include mariadb."]),
    (["dss", "--mariadb-buffer-pool", "lots"], ["--mariadb-buffer-pool must be a size such as 256M", "'lots'"]),
    (["dw", "--mariadb-settings", "innodb_buffer_pool_size=1G"], ["has its own option (mariadb_buffer_pool)"]),
]


@pytest.mark.parametrize("args,expected", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_a_bad_option_is_refused_with_one_sentence_before_anything_is_written(tmp_path, cli, args, expected):
    result = cli(*args, *([] if "--runs-dir" in args else ["--runs-dir", "runs"]))
    _assert_refused(result, expected)
    assert _tree(tmp_path) == set()


BAD_PLANS = [
    ('[oltp]\nwarehouse = 3\n', ["plan.toml:2: [oltp] warehouse is not a known key (did you mean 'warehouses'?)."]),
    ('profil = "quick"\n', ["plan.toml:1: profil is not a known key (did you mean 'profile'?)."]),
    ('[oltp]\nusers = [1, 0]\n', ["plan.toml:2: [oltp] users item 0 must be at least 1, not 0."]),
    ('[oltp]\nusers = [4, 4]\n', ["plan.toml:2: [oltp] users lists 4 twice."]),
    ('[oltp]\nshared_buffers = "lots"\n', ["plan.toml:2: [oltp] shared_buffers must be a size"]),
    ('[oltp]\nshared_buffers = 128\n', ["plan.toml:2: [oltp] shared_buffers must be a string, not 128."]),
    ('[dss]\nsf = nan\n', ["plan.toml:2: [dss] sf must be a finite number, not nan."]),
    ('[dss]\npg_settings = ["work_mem=64MB", ""]\n', ["plan.toml:2: [dss] pg_settings must not have an empty item."]),
    ('name = "a\\nb"\n', ["plan.toml:1: name must not contain control characters"]),
    ('"a\\nb" = 1\n', ['"a\\nb" is not a known key']),
    ('[oltp]\n"warehouses\\u0000" = 1\n', ['[oltp] "warehouses\\u0000" is not a known key (did you mean \'warehouses\'?)']),
    ('runs_dir = ""\n', ["plan.toml:1: runs_dir must not be empty."]),
    ('[device]\nblock_sizes = [4096, 4097]\n', ["plan.toml:2: [device] block_sizes item 4097 must be a multiple of 512"]),
]


@pytest.mark.parametrize("text,expected", BAD_PLANS, ids=[t for t, _ in BAD_PLANS])
def test_a_bad_plan_is_refused_with_one_sentence_before_anything_is_written(tmp_path, cli, text, expected):
    (tmp_path / "plan.toml").write_text(text)
    result = cli("run", "--plan", "plan.toml", "--runs-dir", "runs")
    _assert_refused(result, expected)
    assert _tree(tmp_path) == {"plan.toml"}


@needs_postgres
@pytest.mark.parametrize("args,expected", [
    # Syntax that only the server knows is wrong: its own words, before the run directory (and the 39 MB of an
    # initdb) is written, where the server used to refuse it at start.
    (["oltp", "--shared-buffers", "64kB"], ["[oltp] shared_buffers '64kB' is refused by PostgreSQL",
                                            'outside the valid range for parameter "shared_buffers"']),
    (["oltp", "--pg-settings", "work_mem=lots"], ["[oltp] pg_settings item 'work_mem=lots' is refused by PostgreSQL",
                                                 'invalid value for parameter "work_mem": "lots"']),
    (["dss", "--pg-settings", "max_wal_size=-1MB", "--engines", "postgres"],
     ["[dss] pg_settings item 'max_wal_size=-1MB' is refused by PostgreSQL", "outside the valid range"]),
    (["dw", "--pg-settings", "enable_seqscan=maybe"], ['parameter "enable_seqscan" requires a Boolean value']),
    (["oltp", "--pg-settings", "wrk_mem=4MB"], ["names 'wrk_mem', which is not a parameter of the PostgreSQL server",
                                               "(did you mean 'work_mem'?)"]),
], ids=["shared_buffers", "work_mem", "max_wal_size", "boolean", "unknown name"])
def test_the_postgres_binary_judges_managed_server_settings_before_anything_is_written(tmp_path, cli, args, expected):
    if args[0] in ("dss", "dw"):
        try:
            tpchgen()
        except UserError:
            pytest.skip("tpchgen-cli not installed")
    result = cli(*args, "--runs-dir", "runs")
    _assert_refused(result, expected)
    assert _tree(tmp_path) == set()


@pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                    reason="mariadb-server is not installed")
@pytest.mark.parametrize("args,expected", [
    (["dss", "--engines", "mariadb", "--dsn", "mysql://bench@127.0.0.1:1/tpch"],
     ["cannot connect to MariaDB at 'mysql://bench@127.0.0.1:1/tpch'"]),
    (["dw", "--engines", "mariadb", "--mariadb-settings", "join_buffer_size=lots"],
     ["[dw] mariadb_settings item 'join_buffer_size=lots' is refused by MariaDB", "Unknown suffix"]),
], ids=["unreachable dsn", "bad setting"])
@pytest.mark.live
def test_a_mariadb_that_cannot_serve_dss_is_refused_before_anything_is_written(tmp_path, cli, args, expected):
    try:
        tpchgen()
    except UserError:
        pytest.skip("tpchgen-cli not installed")
    _assert_refused(cli(*args, "--runs-dir", "runs"), expected)
    assert _tree(tmp_path) == set()


@needs_postgres
def test_good_server_settings_pass_the_server_check():
    plan = load_plan(suites=["oltp"], sets=["oltp.shared_buffers='1.5GB'", "oltp.pg_settings=['work_mem=64MB', "
                                             "'max_wal_size=2GB', 'checkpoint_timeout=5min', 'auto_explain.log_min_duration=1s']"])
    assert [c.id for c in get_suite("oltp").cases(plan)] == ["u1-r1", "u2-r1"]


# ---- settings that pass every check and fail only when the server starts -----------------------------------

needs_mariadb = pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                                   reason="mariadb-server is not installed")


def _run_directory(result: Result, cwd: Path) -> tuple[Path, str]:
    """The run directory the run said it made: (where it is, as it was shown)."""
    shown = re.search(r"^run directory: (.+)$", result.stderr, re.MULTILINE).group(1)
    return cwd / shown, shown


def _no_huge_pages() -> bool:
    meminfo = Path("/proc/meminfo").read_text()
    return re.search(r"^HugePages_Total:\s+0$", meminfo, re.MULTILINE) is not None


@pytest.mark.parametrize("args, code, says", [
    pytest.param(["--pg-settings", "shared_preload_libraries=nonexistent"], 2,
                 re.escape('PostgreSQL did not start with the setting shared_preload_libraries=nonexistent: FATAL: could '
                           'not access file "nonexistent": No such file or directory; '), marks=needs_postgres, id="postgres"),
    pytest.param(["--engine", "mariadb", "--mariadb-settings", "init_file=/nonexistent"], 2,
                 re.escape("MariaDB did not start with the setting init_file=/nonexistent: [ERROR] mariadbd: Can't "
                           "create/write to file '/nonexistent' (Errcode: 2 \"No such file or directory\"); "),
                 marks=needs_mariadb, id="mariadb"),
    # Memory the server asks for and cannot have: exit 75 as for any resource, and still nothing left. The log names
    # no setting, so every one the server had is named.
    pytest.param(["--pg-settings", "huge_pages=on"], 75,
                 r"PostgreSQL did not start with the settings (\S+=\S+, )*huge_pages=on: FATAL: could not map anonymous "
                 r"shared memory: Cannot allocate memory; ",
                 marks=[needs_postgres, pytest.mark.skipif(not _no_huge_pages(), reason="this host has huge pages")],
                 id="postgres, memory"),
])
def test_a_server_that_does_not_start_leaves_no_run_and_says_why_in_one_sentence(refbench, reachable_dir, tmp_path,
                                                                                  args, code, says):
    result = refbench("oltp", str(reachable_dir), *args, "--runs-dir", "runs")
    run, shown = _run_directory(result, tmp_path)
    assert result.code == code, result.stderr
    assert re.fullmatch(f"refbench: {says}nothing was measured, so its run directory {re.escape(shown)} was removed\\.",
                        result.stderr.strip().splitlines()[-1]), result.stderr
    assert "resume" not in result.stderr and "Traceback" not in result.stderr
    assert not run.exists() and list((tmp_path / "runs").iterdir()) == []
    assert list(reachable_dir.iterdir()) == []  # the server's data directory on the target went too
    listed = refbench("runs", "--runs-dir", "runs", "--json")
    assert listed.code == 0 and json.loads(listed.stdout) == [], listed.stdout


@pytest.mark.parametrize("engine, title", [pytest.param("postgres", "PostgreSQL", marks=needs_postgres),
                                           pytest.param("mariadb", "MariaDB", marks=needs_mariadb)])
def test_a_data_directory_a_server_cannot_use_leaves_no_run_and_none_of_the_users_files_go(refbench, reachable_dir,
                                                                                            tmp_path, engine, title):
    (reachable_dir / "notes.txt").write_text("the user's")
    result = refbench("oltp", "--engine", engine, "--data-dir", str(reachable_dir), "--runs-dir", "runs")
    run, shown = _run_directory(result, tmp_path)
    assert result.code == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"refbench: {reachable_dir} is not empty and is not a {title} data directory; choose another --data-dir; "
        f"nothing was measured, so its run directory {shown} was removed."), result.stderr
    assert not run.exists() and [p.name for p in reachable_dir.iterdir()] == ["notes.txt"]


@needs_postgres
@pytest.mark.live
def test_a_server_that_does_not_start_after_a_suite_measured_keeps_those_records_and_does_not_say_resume(refbench,
                                                                                                         tmp_path):
    (tmp_path / "plan.toml").write_text('suites = ["sleepy", "oltp"]\n[sleepy]\ncases = 2\nsleep_s = 0\n'
                                        '[oltp]\npg_settings = ["ssl=on"]\n')
    result = refbench("run", "--plan", "plan.toml", "--runs-dir", "runs")
    run, shown = _run_directory(result, tmp_path)
    assert result.code == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    # ssl=on names no file: every setting the server had is named, and its FATAL line says what is missing.
    assert re.fullmatch(r'refbench: PostgreSQL did not start with the settings (\S+=\S+, )*ssl=on: FATAL: could not load '
                        r'server certificate file "server.crt": No such file or directory; the 2 case\(s\) measured '
                        rf"before stay in {re.escape(shown)} \(resuming would start the server with the same settings, "
                        r"so start a new run with them changed\)\.", message), message
    assert "refbench resume" not in result.stderr
    assert sorted(p.name for p in (run / "records" / "sleepy").glob("*.json")) == ["case-000.json", "case-001.json"]
    assert json.loads((run / "run.json").read_text())["status"] == "failed"


# ---- corrupt run files -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two finished runs of the test suite (made once; each test works on a copy)."""
    from conftest import cli_env, refbench_command
    import subprocess

    base = tmp_path_factory.mktemp("made")
    for name in ("base", "other"):
        p = subprocess.run(refbench_command("sleepy", "--runs-dir", "runs", "--name", name, "--set", "sleepy.cases=3",
                                            "--set", "sleepy.sleep_s=0"),
                           cwd=base, env=cli_env(), capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
    return base / "runs"


@pytest.fixture
def runs(two_runs, tmp_path):
    shutil.copytree(two_runs, tmp_path / "runs")
    return tmp_path / "runs"


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


CORRUPTIONS = {
    # name: (file in the run, how it is damaged, what the status and the sentence say about it)
    "truncated record": ("records/sleepy/case-001.json", _truncate, "records/sleepy/case-001.json line 6",
                         "is not valid JSON at line 6 column"),
    "empty record": ("records/sleepy/case-001.json", lambda p: p.write_bytes(b""), "records/sleepy/case-001.json",
                     "is empty"),
    "binary record": ("records/sleepy/case-001.json", lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
                      "records/sleepy/case-001.json", "is not text (not UTF-8)"),
    "record of the wrong shape": ("records/sleepy/case-001.json", lambda p: p.write_text('{"metrics": "fast"}'),
                                  "records/sleepy/case-001.json", "has a record whose 'metrics' is a string"),
    "record that is a list": ("records/sleepy/case-001.json", lambda p: p.write_text("[1, 2]"),
                              "records/sleepy/case-001.json", "holds a list where a record (a JSON object) belongs"),
    "record nested 100,000 deep": ("records/sleepy/case-001.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
                                   "records/sleepy/case-001.json", "nests JSON arrays or objects too deeply"),
    "truncated findings": ("findings/sleepy.json", _truncate, "findings/sleepy.json line", "is not valid JSON"),
    "truncated run.json": ("run.json", _truncate, "run.json line", "is not valid JSON"),
    "run.json without a plan": ("run.json", lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "plan": 3})),
                                "run.json", "holds a number where a plan (a JSON object) belongs"),
}


def _damage(runs: Path, kind: str) -> tuple[Path, Path, str, str]:
    relative, damage, status, problem = CORRUPTIONS[kind]
    run = next(runs.glob("*-base"))
    damage(run / relative)
    return run, run / relative, status, problem


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_runs_lists_every_run_and_marks_the_corrupt_one_with_one_warning(runs, cli, kind):
    run, path, status, problem = _damage(runs, kind)
    result = cli("runs", "--runs-dir", str(runs), "--json")
    assert result.code == 0, result.stderr
    listed = {r["run"]: r for r in result.json()}
    assert listed[run.name]["status"] == f"corrupt: {status}" or listed[run.name]["status"].startswith(f"corrupt: {status}")
    assert [r["status"] for name, r in listed.items() if name != run.name] == ["complete"]
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 1 and str(path) in warnings[0] and problem in warnings[0], result.stderr

    table = cli("runs", "--runs-dir", str(runs))
    assert table.code == 0 and "corrupt" in table.stdout and "complete" in table.stdout


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_report_and_compare_name_the_corrupt_file_and_write_nothing(runs, cli, kind):
    run, path, status, problem = _damage(runs, kind)
    other = next(runs.glob("*-other"))
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}

    report = cli("report", str(run))
    _assert_refused(report, [str(path), problem])
    compare = cli("compare", str(other), str(run))
    _assert_refused(compare, [str(path), problem])
    assert {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()} == before  # no table, chart or page rewritten


def test_a_corrupt_run_json_cannot_be_resumed_and_is_left_as_it_is(runs, cli):
    run, path, _, _ = _damage(runs, "truncated run.json")
    damaged = path.read_bytes()
    result = cli("resume", str(run))
    _assert_refused(result, [str(path), "is not valid JSON at line", "restore the file from a backup or delete the run"])
    assert path.read_bytes() == damaged


# ---- random plans and flags: never a traceback, exit 2 for bad input, nothing written ----------------------

def _refused_or_would_run(cwd: Path, *args: str) -> Result | None:
    """The real CLI on ARGS: its refusal, or None when every check passed and it would write the run directory.
    Either way nothing was written, and nothing crashed."""
    try:
        result = run_in_process(cwd, *args)
    except WouldRun as stopped:
        for name in stopped.plan.suites:  # what the runner would refuse with an internal error later
            ids = [case.id for case in get_suite(name).cases(stopped.plan)]
            assert len(set(ids)) == len(ids), f"{name} makes duplicate case ids from {stopped.plan.options[name]}"
        _event("passed every check")
        return None
    _event("refused: " + re.sub(r"^refbench: (plan\.toml:\d+: )?", "", result.stderr).split(" ")[0])
    assert result.code == 2, (args, result.code, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result


def _event(what: str) -> None:
    try:
        event(what)  # shown by pytest --hypothesis-show-statistics: how often each outcome came up
    except InvalidArgument:  # not inside a Hypothesis test
        pass


KEYS = ["sleepy", "device", "oltp", "dss", "dw", "analytics"]
WORDS = ["", " ", "0", "-1", "1", "128MB", "1GB", "8kB", "4gb", "lots", "-1MB", "quick", "standard", "duckdb",
         "postgres", "random", "work_mem=64MB", "wrk_mem=1MB", "work_mem=lots", "listen_addresses=*", "host", "a=b",
         "host=/nonexistent-refbench-socket-dir port=1", "4k", "1,,2", "1,", "nan", "\n", "x\x00y", "device", "."]


def _mostly_known(words: list[str]) -> st.SearchStrategy[str]:
    """A known word nine times in ten, else a typo of one (so that most examples get past the first key)."""
    return st.sampled_from(range(10)).flatmap(lambda n: _near_misses(words) if n == 9 else st.sampled_from(words))


def _near_misses(words: list[str]) -> st.SearchStrategy[str]:
    """Typos of known words: a letter dropped, doubled or changed."""
    def typo(word: str, at: int, how: int, letter: str) -> str:
        at = at % max(len(word), 1)
        return [word[:at] + word[at + 1:], word[:at + 1] + word[at:], word[:at] + letter + word[at + 1:]][how]
    return st.builds(typo, st.sampled_from(words), st.integers(0, 30), st.integers(0, 2), st.sampled_from("aeiosx_"))


scalars = st.one_of(
    st.integers(-2, 5), st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans(), st.sampled_from(WORDS),
    st.text(max_size=12),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.lists(st.sampled_from(WORDS), max_size=3))


def _suite_section(name: str) -> st.SearchStrategy[dict]:
    options = get_suite(name).options
    good = {key: option.default_for("quick") for key, option in options.items()}
    keys = st.one_of(_mostly_known(sorted(options)), st.text(max_size=8))
    # The suite's own defaults (a valid section), with a few keys changed or added at random.
    return st.builds(lambda picked, changes: {**{k: good[k] for k in picked}, **changes},
                     st.lists(st.sampled_from(sorted(good)), max_size=4, unique=True),
                     st.dictionaries(keys, values, max_size=3))


def _plans() -> st.SearchStrategy[dict]:
    # No scheduler: a well-formed address would be dialled (10 s); the cluster's own tests cover it.
    top_keys = st.one_of(_mostly_known(sorted(set(TOP_LEVEL) - {"scheduler"})), st.text(max_size=8))
    sections = st.lists(st.sampled_from(KEYS), max_size=2, unique=True).flatmap(
        lambda names: st.fixed_dictionaries({n: _suite_section(n) for n in names}))
    top = st.dictionaries(top_keys.filter(lambda k: k != "scheduler"), values, max_size=2)
    return st.builds(lambda top, tables: {**top, **tables}, st.one_of(st.just({}), top), sections)


def _toml(data: dict) -> str:
    """TOML for scalars, lists and one level of tables (tomllib only reads)."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if v != v else "inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v)
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return quoted(v)
        return "[" + ", ".join(value(x) for x in v) + "]"

    def quoted(text: str) -> str:  # a TOML basic string: JSON's escapes, and DEL escaped too
        return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")

    lines = [f"{quoted(k)} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for table, section in data.items():
        if isinstance(section, dict):
            lines.append(f"[{quoted(table)}]")
            lines += [f"{quoted(k)} = {value(v)}" for k, v in section.items()]
    return "\n".join(lines) + "\n"


PROPERTY = settings(max_examples=100, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@PROPERTY
@given(plan=_plans())
@example(plan={"oltp": {"shared_buffers": "lots"}})
@example(plan={"oltp": {"users": [1, 1]}})
@example(plan={"sleepy": {"cases": 2}})
@pytest.mark.live
def test_a_random_plan_is_refused_with_exit_2_or_passes_every_check_and_nothing_is_written(plan, tmp_path,
                                                                                          stop_before_writing):
    cwd = Path(tempfile.mkdtemp(dir=tmp_path))
    (cwd / "plan.toml").write_text(_toml(plan))
    _refused_or_would_run(cwd, "run", "--plan", "plan.toml")
    assert _tree(cwd) == {"plan.toml"}


def _flags() -> st.SearchStrategy[list[str]]:
    text = st.one_of(st.sampled_from([w for w in WORDS if "\x00" not in w]), st.integers(-3, 70000).map(str),
                     st.text(string.printable, max_size=10))

    def for_suite(name: str) -> st.SearchStrategy[list[str]]:
        options = get_suite(name).options
        flags = sorted(f"--{k.replace('_', '-')}" for k in options)
        pairs = st.lists(st.tuples(_mostly_known(flags), text), max_size=3)
        sets = st.lists(st.builds(lambda k, v: f"{name}.{k}={v}", st.sampled_from(sorted(options)), text), max_size=1)
        profile = st.lists(st.tuples(st.just("--profile"), st.sampled_from(["quick", "quik", "full", ""])), max_size=1)
        return st.builds(lambda p, s, q: [name] + [a for pair in p + q for a in pair] + [a for x in s for a in ("--set", x)],
                         pairs, sets, profile)
    return st.sampled_from(KEYS).flatmap(for_suite)


@PROPERTY
@given(args=_flags())
@example(args=["oltp", "--users", "1,,2"])
@example(args=["oltp", "--shared-buffers", "-1MB"])
@example(args=["device", "--iodepths", "1,1"])
@pytest.mark.live
def test_random_flags_are_refused_with_exit_2_or_pass_every_check_and_nothing_is_written(args, tmp_path,
                                                                                       stop_before_writing):
    cwd = Path(tempfile.mkdtemp(dir=tmp_path))
    _refused_or_would_run(cwd, *args, "--runs-dir", "runs")
    assert _tree(cwd) == set()


def _violations(option) -> list:
    """Values that break what ``option`` declares: its type, range, choices, list shape."""
    default = option.default_for("quick")
    wrong_type = {int: "many", float: "much", str: 7, bool: "maybe", list: 7}[option.kind]
    out = [wrong_type]
    kind = option.item if option.kind is list else option.kind
    scalar_bad = []
    if option.minimum is not None:
        scalar_bad.append(option.minimum - (1 if kind is int else 0.5))
    if option.maximum is not None:
        scalar_bad.append(option.maximum + 1)
    if option.choices is not None:
        scalar_bad.append("no-such-choice")
    if option.kind is list:
        out += [[]] + ([[*default, default[0]]] if default else []) + [[b] for b in scalar_bad]
    else:
        out += scalar_bad
    return out


@pytest.mark.parametrize("suite", KEYS)
@pytest.mark.live
def test_every_declared_constraint_of_every_option_is_enforced_before_anything_is_written(suite, tmp_path,
                                                                                        stop_before_writing):
    """Each option's type, minimum, maximum, choices and list shape, broken one at a time in a plan file: refused
    with exit 2, naming the key and line, and nothing written."""
    for key, option in get_suite(suite).options.items():
        for bad in _violations(option):
            cwd = Path(tempfile.mkdtemp(dir=tmp_path))
            (cwd / "plan.toml").write_text(_toml({suite: {key: bad}}))
            result = _refused_or_would_run(cwd, "run", "--plan", "plan.toml")
            assert result is not None, f"[{suite}] {key} = {bad!r} was accepted"
            assert f"plan.toml:2: [{suite}] {key}" in result.stderr, result.stderr
            assert _tree(cwd) == {"plan.toml"}


def test_every_number_a_plan_or_a_flag_takes_has_both_bounds(cli):
    """Declared beside each option (refbench.options.Option refuses one without them); a Click flag outside a plan
    declares its own range, or is the flag of a plan key (--repeats)."""
    import typer

    from refbench.cli import app
    from refbench.suites import suite_names

    options = [(f"[{name}] {key}", option) for name in suite_names() for key, option in get_suite(name).options.items()]
    numeric = [(where, o) for where, o in options + list(TOP_LEVEL.items())
               if (o.item if o.kind is list else o.kind) in (int, float)]
    assert len(numeric) > 40 and all(None not in (o.minimum, o.maximum) for _, o in numeric)
    with pytest.raises(TypeError, match="needs a minimum and a maximum"):
        type(TOP_LEVEL["repeats"])(float, 1.0, "unbounded")
    cli("--help")  # registers the suites' commands
    flags = [(f"{name} {param.opts[0]}", param) for name, command in typer.main.get_command(app).commands.items()
             for param in command.params if param.type.name.split()[0] in ("int", "float")]
    assert len(flags) > 5
    for flag, param in flags:
        assert param.name in TOP_LEVEL or None not in (getattr(param.type, "min", None), getattr(param.type, "max", None)), flag


PAST_A_BOUND = [
    (["dss", "--query-timeout-s", "1e300", "--dry-run"], "--query-timeout-s must be at most 86,400 s (1 day), not 1e+300."),
    (["oltp", "--duration-s", "1000000000", "--dry-run"], "--duration-s must be at most 604,800 s (7 days), not 1000000000."),
    (["dw", "--set", "dw.duration_s=1000000000"], "--set dw.duration_s must be at most 604,800 s (7 days)"),
    (["device", "--size", "2048t", "--dry-run"], "--size must be at most 1,125,899,906,842,624 bytes (1 PiB)"),
    (["analytics", "--seed", "-1"], "--seed must be at least 0, not -1."),
    (["tune", "--suite", "sleepy", "--budget", "1000h", "--dry-run"], "--budget '1000h' must be at most 604,800 s"),
    (["tune", "--suite", "sleepy", "--trials", "1000000"], "1000000 is not in the range 0<=x<=1000"),
    (["runs", "--limit", "10000000000000000000000"], "is not in the range 0<=x<=1000000"),
    (["scheduler", "--port", "70000"], "70000 is not in the range 0<=x<=65535"),
]


@pytest.mark.parametrize("args,expected", PAST_A_BOUND, ids=[" ".join(a[:2]) for a, _ in PAST_A_BOUND])
def test_a_number_past_its_bound_is_one_sentence_before_anything_is_written(tmp_path, cli, args, expected):
    result = cli(*args, *([] if args[0] == "scheduler" else ["--runs-dir", "runs"]))
    _assert_refused(result, [expected])
    assert _tree(tmp_path) == set()


# ---- hostile files handed to refbench: plans, acceptance files --------------------------------------------------------

HOSTILE_FILES = {
    # name: (how the file is made, what the one sentence says)
    "arrays nested 5,000 deep": (lambda p: p.write_text("[accept]\nx = " + "[" * 5000 + "]" * 5000 + "\n"),
                                 "nested more than 32 deep"),
    "inline tables nested 3,000 deep": (lambda p: p.write_text("a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n"),
                                        "nested more than 32 deep"),
    "a dotted key of 200,000 parts": (lambda p: p.write_text("[accept]\n" + "a" + ".a" * 200_000 + ' = ">= 1"\n'),
                                      "more than 64 dots"),
    "a table header of 100,000 parts": (lambda p: p.write_text("[" + "a." * 100_000 + "a]\n"), "more than 64 dots"),
    "a file of 2 MB": (lambda p: p.write_text("# comment\n" * 200_000), "larger than 1,024 KiB"),
    "a binary file": (lambda p: p.write_bytes(b"\xff\xfe\x00[accept]"), "is not text (not UTF-8)"),
    "a directory": (lambda p: p.mkdir(), "is a directory, not a file"),
    "the zero device": (lambda p: p.symlink_to("/dev/zero"), "is a device, not a file"),
    "a FIFO": (lambda p: os.mkfifo(p), "is a FIFO, not a file"),
    "an empty [accept] table": (lambda p: p.write_text("[accept]\n"), "is empty: nothing to check"),
}


@pytest.mark.parametrize("kind", HOSTILE_FILES)
def test_a_hostile_acceptance_or_plan_file_costs_one_sentence(runs, cli, tmp_path, kind):
    """`check --accept FILE` and `run --plan FILE` with a file made to hurt: one sentence, exit 2, nothing written,
    and no hang (a FIFO is not waited on; the zero device not read until memory runs out)."""
    make, said = HOSTILE_FILES[kind]
    hostile = tmp_path / "hostile.toml"
    make(hostile)
    run = next(runs.glob("*-base"))
    before = sorted(p.name for p in runs.iterdir())
    for args in (("check", str(run), "--accept", str(hostile)), ("run", "--plan", str(hostile), "--runs-dir", str(runs))):
        result = cli(*args)
        assert result.code == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        if kind == "an empty [accept] table" and args[0] == "run":
            said_here = "[accept] must be a table" if "must be a table" in result.stderr else said
        else:
            said_here = said
        assert len(lines) == 1 and said_here in lines[0] and "internal error" not in lines[0], (args, result.stderr)
    assert sorted(p.name for p in runs.iterdir()) == before


def test_a_set_value_nested_too_deeply_is_one_sentence(cli):
    result = cli("sleepy", "--set", "sleepy.sleep_s=" + "[" * 5000 + "]" * 5000)
    assert result.code == 2 and "nested more than 32 deep" in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_file_that_ends_too_soon_is_an_internal_error_not_an_interruption(tmp_path, monkeypatch):
    """click takes an EOFError for Ctrl-D at a prompt and aborts; refbench prompts for nothing."""
    import refbench.catalog

    def ended(*args, **kwargs):
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr(refbench.catalog, "read_catalog", ended)
    result = run_in_process(tmp_path, "runs", "--runs-dir", str(tmp_path))
    assert result.code == 70 and "interrupted" not in result.stderr, result
    assert result.stderr.strip().splitlines() == [
        "refbench: internal error: EOFError: Compressed file ended before the end-of-stream marker was reached (a file "
        "ended too soon; run again with --debug for the traceback)."]
