"""What a run shows while it works: elapsed time and time left whole at 80 columns, a case's figures so far live
(one line every few seconds when stderr is not a terminal, as pgbench -P), and nothing of either with --quiet."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import cli_env, refbench_command
from refbench.children import die_with_parent

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
CLOCKS = re.compile(r" (\d+:\d\d:\d\d) (eta|late) (\d+:\d\d:\d\d)$")


def _on_a_terminal(tmp_path, *args: str, columns: int = 80) -> str:
    """The run's stderr and stdout as an 80-column terminal shows them, every redraw kept."""
    main, child = pty.openpty()
    process = subprocess.Popen(refbench_command(*args), cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=child,
                               stderr=child, env=cli_env(COLUMNS=str(columns), LINES="40", TERM="xterm"),
                               preexec_fn=lambda: die_with_parent(signal.SIGTERM))
    os.close(child)
    seen, deadline = bytearray(), time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the terminal's other end closed: the run has ended
                    break
                if not chunk:
                    break
                seen += chunk
            elif process.poll() is not None:
                break
        assert process.wait(timeout=60) == 0, seen.decode(errors="replace")[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)
    return ANSI.sub("", seen.decode(errors="replace"))


@pytest.mark.live
def test_elapsed_and_eta_stay_whole_at_80_columns_and_the_figures_so_far_show_under_them(tmp_path):
    shown = _on_a_terminal(tmp_path, "run", "--suite", "sleepy", "--set", "sleepy.sleep_s=1.5", "--set", "sleepy.cases=3",
                           "--repeats", "1", "--runs-dir", "runs")
    lines = [line.rstrip() for line in re.split(r"[\r\n]+", shown) if line.strip()]
    bars = [line for line in lines if re.match(r"sleepy: (preparing|case \d|cases) .* \d+/\d+ ", line)]
    assert len(bars) >= 5, lines  # redrawn while it ran
    for line in bars:
        assert len(line) <= 80, line
        found = CLOCKS.search(line)
        assert found, f"no whole elapsed and eta at the end of: {line!r}"  # the estimate gives eta from the first second
    assert not any("…" in CLOCKS.search(line).group(0) for line in bars)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]  # the verdict's too
    # The time left only falls while the suite is within its estimate; past it, the bar says "late".
    left = [_seconds(CLOCKS.search(line).group(3)) for line in bars if CLOCKS.search(line).group(2) == "eta"]
    assert left and all(b <= a for a, b in zip(left, left[1:])), left
    assert any(re.fullmatch(r"sleepy: case \d: \d s slept so far", line) for line in lines), lines


def _seconds(clock: str) -> int:
    hours, minutes, seconds = map(int, clock.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def test_figures_so_far_fold_to_the_terminal_width_and_a_suite_past_its_estimate_says_late():
    from rich.console import Console

    from refbench.progress import RunProgress, time_left

    console = Console(width=40, force_terminal=True, color_system=None)
    progress = RunProgress(console)
    task = progress.add_task("oltp: 4 users", total=4, expected_s=100.0)
    said = "oltp: 4 users: 12,345 NOPM so far (8 s measured), New-Order p99 4.1 ms, 0 errors"
    progress.show_live(said)
    with console.capture() as captured:
        console.print(*progress.get_renderables())
    assert all(len(line) <= 40 for line in captured.get().splitlines()), captured.get()
    assert said in " ".join(captured.get().split())  # folded, not cut
    record = progress._tasks[task]
    record.start_time = record.get_time() - 50.0  # half the estimate spent
    assert time_left(record) == (pytest.approx(50.0, abs=1), False)
    record.start_time = record.get_time() - 150.0  # past it, one case of four done: the pace's 450 s
    progress.advance(task)
    assert time_left(record) == (pytest.approx(450.0, abs=1), True)


@pytest.mark.live
def test_without_a_terminal_figures_so_far_are_lines_every_few_seconds_and_quiet_has_none(tmp_path, refbench):
    args = ("run", "--suite", "sleepy", "--set", "sleepy.sleep_s=11", "--set", "sleepy.cases=1", "--repeats", "1",
            "--runs-dir", "runs")
    piped = refbench(*args)
    assert piped.code == 0, piped.stderr
    live = [line for line in piped.stderr.splitlines() if "slept so far" in line]
    # 11 s measured, a line every 5 s from 5 s after the case starts: two (three when a tick lands late)
    assert 2 <= len(live) <= 3, piped.stderr
    assert all(re.fullmatch(r"sleepy: case 0: \d+ s slept so far", line) for line in live), live
    quiet = refbench(*args, "--quiet")
    assert quiet.code == 0, quiet.stderr
    assert "slept so far" not in quiet.stderr and "eta" not in quiet.stderr, quiet.stderr
    assert "verdict" in quiet.stdout  # the answer, as always


def test_a_suites_log_line_folds_to_the_terminal_width():
    import io

    from rich.console import Console

    from refbench.suites.context import SuiteContext

    written = io.StringIO()
    console = Console(file=written, width=80, soft_wrap=True, highlight=False)  # as refbench's stderr console
    ctx = SuiteContext(run=None, plan=None, suite="sleepy", options={}, console=console)  # type: ignore[arg-type]
    ctx.log("the host changed while case-001 was measured: direct read 1.83 → 0.09 ms, " * 2)
    lines = written.getvalue().splitlines()
    assert len(lines) == 2 and all(len(line) <= 80 for line in lines), lines
