"""--dry-run writes nothing and says where each value came from; every command's --help fits 80 columns (issue 17,
points 5 and 8)."""

from __future__ import annotations

import io
import itertools
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import typer

from conftest import TEST_SUITES
from refbench.cli import app, main
from refbench.dryrun import shown_value
from refbench.host.inventory import postgres_binary
from refbench.suites import get_suite, suite_names
from refbench.suites.device.targets import free_bytes
from refbench.suites.oltp import WAREHOUSE_BYTES

needs_postgres = pytest.mark.skipif(not postgres_binary("postgres"), reason="PostgreSQL server binaries not installed")


def _tree(directory: Path) -> dict[str, float]:
    return {str(p.relative_to(directory)): p.stat().st_mtime for p in directory.rglob("*")}


def _option_line(stdout: str, key: str) -> str:
    return next(line for line in stdout.splitlines() if line.split()[:1] == [key])


@needs_postgres
def test_a_dry_run_writes_nothing_and_says_where_each_value_came_from(tmp_path, refbench, reachable_dir):
    disk = reachable_dir  # the postgres account must reach a target of oltp's
    (tmp_path / "lab.toml").write_text('name = "lab"\nsuites = ["device", "oltp"]\n\n[oltp]\nduration_s = 20\n')
    before = _tree(tmp_path), _tree(disk)
    result = refbench("run", "--plan", "lab.toml", str(disk), "--runs-dir", "runs", "--set", "oltp.rampup_s=5",
                      "--set", "device.iodepths=[1, 4]", "--dry-run")
    assert result.code == 0, result.stderr
    assert (_tree(tmp_path), _tree(disk)) == before  # no runs directory, no run, no test file, no database
    out = result.stdout
    assert "plan file lab.toml:1" in _option_line(out, "name")
    assert "flag --runs-dir" in _option_line(out, "runs_dir")
    assert "argument TARGET" in _option_line(out, "targets") and str(disk) in _option_line(out, "targets")
    assert _option_line(out, "profile").split()[1:] == ["default", "quick"]
    assert "plan file lab.toml:5" in _option_line(out, "duration_s")
    assert "--set oltp.rampup_s" in _option_line(out, "rampup_s")
    assert "profile default (quick)" in _option_line(out, "warehouses")
    assert _option_line(out, "iodepths").split()[-1] == "1,4"
    assert re.search(r"^oltp: 2 cases\n  estimate for this plan, each case once: about ", out, re.M), out
    assert "2 case(s) × (5 s ramp-up + 20 s measured)" in " ".join(out.split())
    assert re.search(r"^  u1-r1\s+1 user$", out, re.M) and re.search(r"^  t0-rand-w0-qd4-bs4k\s", out, re.M)
    assert re.search(r"^device: \d+ cases\n  estimate for this plan, each case once: about ", out, re.M)
    assert re.search(rf"^  {re.escape(str(disk))}: needs [\d.]+ GB of [\d,.]+ GB free — fits$", out, re.M), out

    assert _option_line(out, "repeats").split()[1:] == ["environment", "$REFBENCH_REPEATS", "1"]  # conftest's
    flags = refbench("oltp", "--plan", "lab.toml", "--users", "2,4", "--runs-dir", "runs", "--repeats", "3", "--dry-run")
    assert flags.code == 0, flags.stderr
    assert "flag --users" in _option_line(flags.stdout, "users") and "u4-r1" in flags.stdout
    assert "flag --repeats" in _option_line(flags.stdout, "repeats")  # the best level twice more, in the time:
    assert "2 case(s) × (3 s ramp-up + 20 s measured) + the best level 2 more times" in " ".join(flags.stdout.split())
    assert "estimate for this plan, with its 3 repeats: about " in flags.stdout
    assert (_tree(tmp_path), _tree(disk)) == before


@needs_postgres
def test_a_dry_run_refuses_suites_that_fit_one_by_one_but_not_together(tmp_path, refbench, reachable_dir):
    """Each suite's own check passes; their data together is more than the file system holds: one sentence, exit 2,
    after the dry run's lines say which directory does not fit. 60% of the free space each leaves room for a
    neighbour's writes meanwhile."""
    disk = reachable_dir  # the postgres account must reach a target of oltp's
    share = int(free_bytes(disk) * 0.6)
    warehouses = max(1, (share - 2 * 2**30) // WAREHOUSE_BYTES)
    before = _tree(tmp_path), _tree(disk)
    result = refbench("run", "--suite", "device", "--suite", "oltp", str(disk), "--runs-dir", "runs", "--dry-run",
                      "--set", f"device.size={share // 2**20 * 2**20}", "--set", f"oltp.warehouses={warehouses}")
    assert result.code == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        f"refbench: the plan does not fit: the file system of {disk} has "), result.stderr
    assert f"{disk}: needs" in result.stdout and "DOES NOT FIT" in result.stdout
    assert (_tree(tmp_path), _tree(disk)) == before


# ---- help at 80 columns -------------------------------------------------------------------------------------

PAPERS = {"device": "the SSD characterization paper", "oltp": "the OLTP orders-per-minute paper", "dss": "the DSS paper",
          "dw": "the DWFT rating paper", "analytics": "the mixed analytics paper"}


def _help(monkeypatch, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()), pytest.raises(SystemExit) as exit_:
        main([*args, "--help"])
    assert exit_.value.code == 0
    return out.getvalue()


def _commands(monkeypatch) -> dict:
    monkeypatch.setenv("REFBENCH_SUITES", TEST_SUITES)
    _help(monkeypatch)  # registers the suite commands
    return typer.main.get_command(app).commands


def test_every_commands_help_fits_80_columns_whole_flags_and_plain_types(monkeypatch):
    commands = _commands(monkeypatch)
    assert {"run", "resume", "runs", "report", "compare", "host", "scheduler", "worker", *suite_names()} <= set(commands)
    for name, command in commands.items():
        text = _help(monkeypatch, name)
        wide = [line for line in text.splitlines() if len(line) > 80]
        assert not wide, (name, wide)
        for param in command.params:
            for flag in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
                if flag.startswith("-") and not param.hidden:
                    assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), (name, flag, text)
        assert "<list" not in text and not re.search(r"<\w+>", text), (name, text)
        assert "\\[" not in text, (name, text)  # Rich markup shown as typed
        assert not re.search(r"\(default: [^)]*\)\.?\s+\[default:", text), (name, text)  # said twice


@pytest.mark.parametrize("name", list(PAPERS))
def test_a_suites_help_shows_its_paper_its_measured_times_and_every_default_per_profile(monkeypatch, name):
    text = " ".join(_help(monkeypatch, name).split())
    suite = get_suite(name)
    assert PAPERS[name] in text
    assert re.search(r"--profile PROFILE quick: [\d ]+(min|s)\b.* \| standard: .* \| full: .*\(on a 2-core VM", text), text
    for key, option in suite.options.items():
        if option.per_profile:
            shown = " · ".join(f"{p} {shown_value(option.default[p], key)}".replace(",", ", ") for p in option.default)
            assert shown in text, (key, shown)


# ---- every suite's dry run at every profile: two figures said as what they are, one unit to a line ---------------

BINARY = re.compile(r"\b[KMGTP]iB\b")  # sizes of blocks and memory
DECIMAL = re.compile(r"\b[kKMGTP]B\b|\b[kKMGTP]B/s\b")  # capacity, space and throughput
HOURS = re.compile(r"\bhrs?\b|/hours?\b")  # hours are "h" ("an hour" in words is words)


def _seconds(said: str) -> float:
    """ "1 h 10 min" → 4200, "2 min 58 s" → 178, "33 s" → 33."""
    return sum(int(n) * {"h": 3600, "min": 60, "s": 1}[unit] for n, unit in re.findall(r"(\d+) (h|min|s)\b", said))


def _said(lines: list[str], start: str) -> str:
    """The wrapped line that begins with ``start``, whole ("" if none): its continuation lines are indented deeper."""
    at = next((i for i, line in enumerate(lines) if line.startswith(start)), None)
    if at is None:
        return ""
    deeper = " " * (len(start) - len(start.lstrip()) + 2)
    return " ".join(" ".join([lines[at], *itertools.takewhile(lambda line: line.startswith(deeper), lines[at + 1:])]).split())


def _one_unit_to_a_line(lines: list[str], where: str) -> None:
    for line in lines:
        assert not (BINARY.search(line) and DECIMAL.search(line)), (where, line)
        assert not HOURS.search(line), (where, line)


@needs_postgres
@pytest.mark.parametrize("profile", ["quick", "standard", "full"])
def test_each_suites_dry_run_says_what_its_two_times_are_with_one_unit_to_a_line(profile, monkeypatch, tmp_path):
    """The estimate (this plan, on this host, with its repeats) and the table's time (the profile's defaults on the
    2-core VM, each case once) are labelled; where they differ by more than a quarter, a line says why; every option's
    value is said once (analytics' concurrency, not the host's CPUs, is "at a time"). In-process, the free space made
    ample, so that the full profiles' terabytes are planned rather than refused."""
    from refbench import dryrun
    from refbench.plan import load_plan
    from refbench.suites import dss, oltp
    from refbench.suites.device import targets
    from refbench.timings import HOST, TIMES

    ample = lambda directory: 5 * 10**12  # noqa: E731 - 5 TB: dw full's SF 1,000 needs 3.8
    for module in (targets, dss, oltp, dryrun):
        monkeypatch.setattr(module, "free_bytes", ample)
    monkeypatch.delenv("REFBENCH_REPEATS", raising=False)  # the profile's 3 (conftest sets 1)
    for name in PAPERS:
        plan = load_plan(flags={"profile": profile, "runs_dir": str(tmp_path / "runs")}, suites=[name],
                         defaults={"name": name})
        lines = dryrun.dry_run(plan)
        text = "\n".join(lines)
        _one_unit_to_a_line(lines, f"{name} {profile}")
        estimate = re.search(rf"^{name}: \d+ cases?\n  estimate for this plan, with its 3 repeats: about (.+)$", text, re.M)
        assert estimate, text
        timing = TIMES.get((name, profile))
        flat = " ".join(text.split())
        said = re.search(rf"\b(measured|measured in part|estimated): the {profile} profile's defaults (took|take) (.+?) on "
                         rf"{HOST}", flat)
        if timing is None:
            assert f"  measured: not yet at the {profile} profile (the table of times has none)" in lines, text
            continue
        assert said and said.group(1) == timing.basis and said.group(3) == timing.said(basis=False), text
        assert ("(each case measured once, before repeats became the default)" in flat or timing.basis == "estimated"
                or timing.repeats > 1)
        low, high = timing.lo_hi()
        shown = _seconds(estimate.group(1))
        why = re.match(r"why the estimate is (.+?): (.+)", _said(lines, "  why the estimate is "))
        off = 0 if low <= shown <= high else shown / high - 1 if shown > high else shown / low - 1
        if abs(off) > 0.3:
            assert why, (name, profile, text)
        elif abs(off) < 0.2:
            assert not why, (name, profile, text)
        if why and "repeats" in why.group(2):  # said only where they add time: the estimate without them
            without = _seconds(re.search(r"without them about (.+?)\)", why.group(2)).group(1))
            assert off > 0 and without < shown, text
        if name == "analytics":
            assert set(re.findall(r"(\d+) at a time", text)) == {str(plan.options[name]["concurrency"])}, text
