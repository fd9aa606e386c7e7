"""The verdict in one screen (refbench.report.brief): no line wider than the terminal, a command never folded in the
middle of an argument, and one next step per suite."""

from __future__ import annotations

import shlex

import pytest

from refbench.report.brief import brief_lines, figure_items

LONG = "refbench tune --suite dss --profile quick --set 'dss.engines=[\"mariadb\"]' --apply-host"


def _verdict(suite="dss", command=LONG, failed=0, passed=9, **more):
    return {"suite": suite, "checks_passed": passed, "checks_failed": failed, "limit": "CPU, 97% busy",
            "headlines": [{"label": "duckdb: throughput", "value": 3961.0, "unit": "queries/h × SF", "of": "duckdb",
                           "low": 3900.0, "high": 5280.0, "figure": ""},
                          {"label": "duckdb: power", "value": 360.0, "unit": "queries/h × SF", "of": "duckdb",
                           "unrated": "24 of 24 times under TPC-H's 0.1 s floor", "figure": ""}],
            "next": {"short": "try the host's CPU settings (as root)", "command": command}, **more}


@pytest.mark.parametrize("width", [60, 80, 120])
def test_no_line_is_wider_than_the_terminal_and_a_long_command_runs_as_pasted(width):
    lines = brief_lines([_verdict(), _verdict("oltp", "refbench oltp --users 4,8,16")], "R", "runs/R", width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    pasted = text.replace(" \\\n  ", " ")  # the shell joins a line ending in a backslash with the next
    assert LONG in pasted and shlex.split(LONG) == shlex.split(pasted[pasted.index("refbench tune"):].splitlines()[0])
    assert "next: more" not in text and "refbench oltp --users 4,8,16" in text


def test_a_pipe_takes_a_long_command_whole_and_figures_say_their_range_and_what_is_not_rated():
    lines = brief_lines([_verdict()], "R", "runs/R", 60, fold_commands=False)
    assert LONG in lines
    assert figure_items(_verdict()["headlines"]) == ["duckdb throughput: 4,000 queries/h × SF (3,900–5,300)",
                                                     "power: not rated at this size (duckdb)"]


def test_the_checks_stand_under_the_suite_and_a_failure_says_so():
    lines = brief_lines([_verdict(failed=2, passed=7)], "R", "runs/R", 80)
    assert lines[1].startswith("dss        ") and lines[2].startswith("2 FAILED   ")


def test_a_disturbed_suite_is_marked_under_its_checks_and_what_disturbed_it_is_said_once():
    steal = "the hypervisor took 6% of the CPU (steal)"
    lines = brief_lines([_verdict(disturbed=f"{steal} (duckdb-throughput, 1 of its 3 repeats)"), _verdict("oltp"),
                         _verdict("dw", disturbed="the hypervisor took 5% of the CPU (steal) (postgres, 2 of its 3 "
                                                  "repeats)")], "R", "runs/R", 80)
    assert [line[:11].strip() for line in lines].count("disturbed") == 2
    assert lines[-2] == f"disturbed: {steal}, 3 of 6 repeats" and "duckdb-throughput" not in "\n".join(lines)
    mixed = brief_lines([_verdict(disturbed=f"{steal}; other processes wrote 58 of the 61 MB/s written to vda (q, 1 "
                                            "of its 3 repeats)")], "R", "runs/R", 80)
    assert mixed[-2] == f"disturbed: {steal} and more, 1 of 3 repeats"


def test_the_figures_rule_is_said_once_and_a_figure_of_another_says_its_own():
    oltp = {**_verdict("oltp", "refbench oltp --users 4,8,16"), "headlines": [
        {"label": "NOPM at the best load level (2 users)", "value": 42000.0, "unit": "NOPM", "case": "u2", "low": 38000.0,
         "high": 49000.0, "repeats": 3, "figure": "NOPM, 2 users"},
        {"label": "TPM at the best load level (2 users)", "value": 97000.0, "unit": "TPM", "case": "u2", "low": 89000.0,
         "high": 110000.0, "repeats": 2, "figure": "TPM, 2 users"}]}
    device = {**_verdict("device", "refbench device --iodepths 32"), "headlines": [
        {"label": "peak IOPS, random read, 4 KiB, QD 16", "value": 80600.0, "unit": "IOPS", "case": "t0", "repeats": 0,
         "figure": "IOPS, random read, 4 KiB, QD 16"}]}
    lines = brief_lines([oltp, {**_verdict(), "headlines": [{**oltp["headlines"][0], "repeats": 3}]}, device], "R",
                        "runs/R", 80)
    text = " ".join(" ".join(line[11:].split()) for line in lines[1:])  # the rows beside the margin, unwrapped
    assert lines[0] == "verdict — R · figures: median of 3 repeats (lowest–highest)" and text.count("median of") == 1
    assert "97,000 TPM (89,000–110,000; median of 2 repeats)" in text and "80,600 IOPS (measured once)" in text
