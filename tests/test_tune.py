"""refbench tune: trials as A B B A runs judged with the comparisons' one estimator, kept trials that an adjustment
for every trial tried would not keep said so, a kept set confirmed over independent loads, any budget ending with an
answer, host settings put back whatever happens to tune."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command, wait_for
from test_least_privilege import other_user  # noqa: F401 (a fixture)
from test_dashboard import Server
from refbench.children import die_with_parent
from refbench.tune import knobs as K
from refbench.tune.host import HostChanges, host_knobs, restore_journal
from refbench.tune.trials import RUN_STOP_S, Judgement, SideRun, adjusted_for_trials, interleaved, judge
from refbench.tune.tuner import first_guess
from refbench.host.sysfs import SysRoot, bracketed

# The test suite's noise: each run's figure moves by about 0.2% (1% per-second samples, ten a case), far under the
# 1% a kept change needs, and its speed option doubles it.
SLEEPY = ("--suite", "sleepy", "--set", "sleepy.noise_pct=1", "--set", "sleepy.seed=0", "--set", "sleepy.cases=2",
          "--set", "sleepy.sleep_s=0.02", "--repeats", "2")


def _journey(result) -> dict:
    assert result.code == 0, result.stderr
    return json.loads(result.stdout[:result.stdout.rindex("}") + 1])


@pytest.mark.slow
def test_a_change_with_a_large_effect_is_kept_and_one_with_none_is_dropped(refbench, tmp_path):
    result = refbench("tune", *SLEEPY, "--budget", "20m", "--json")
    journey = _journey(result)
    steps = {next(iter(s["change"])): s for s in journey["steps"]}
    assert steps["speed"]["kept"] and 90 < steps["speed"]["gain_pct"] < 110, steps["speed"]
    assert steps["speed"]["ci_low_pct"] > 0 and steps["speed"]["p"] < 0.05
    assert not steps["sleep_s"]["kept"] and steps["sleep_s"]["why"].startswith(
        ("no significant change", "no change worth keeping")), steps["sleep_s"]
    # A B B A: two runs a side (--repeats 2), in turns, each a run of its own kept in the tune directory.
    sides = [r["side"] for r in steps["speed"]["runs"]]
    assert sides == ["A", "B", "B", "A"] and len({r["run"] for r in steps["speed"]["runs"]}) == 4
    assert all(Path(tmp_path / r["run"], "verdict.json").exists() for r in steps["speed"]["runs"])
    # The kept set is confirmed by fresh runs against the baseline's configuration.
    assert journey["confirmed"] is True and journey["kept"] == {"speed": "2"}
    assert journey["confirmation"]["gain_pct"] > 90 and journey["answer"].startswith("speed=2")
    assert journey["answer"].endswith("; 3 runs a side"), journey["answer"]  # sleepy loads no database, has no window
    assert [r["side"] for r in journey["confirmation"]["runs"]] == ["A", "B", "B", "A", "A", "B"]  # three a side
    # Two trials tried, the kept one far below p 0.025: it holds after adjusting for both.
    assert steps["speed"]["p_all_trials"] < 0.05 and not steps["speed"]["multiple_comparisons"]
    assert journey["multiple_comparisons"].startswith("the 1 kept trial(s) hold after adjusting for the 2 trials")
    tune_dir = tmp_path / journey["dir"]
    assert result.stdout.strip().splitlines()[-1] == journey["dir"]
    plan = (tune_dir / "tuned-plan.toml").read_text()
    assert "speed = 2" in plan and "sleep_s" not in plan and not (tune_dir / "tuned-host.sh").exists()
    # It keeps what it was judged at: the confirmation's three runs a side, as the plan's repeats.
    assert "repeats = 3" in plan and "# Judged at 3 runs a side (repeats = 3)" in plan, plan
    # The tuned plan is a plan refbench runs.
    check = refbench("run", "--plan", str(tune_dir / "tuned-plan.toml"), "--dry-run")
    assert check.code == 0 and "speed" in check.stdout, check.stderr
    page = (tune_dir / "report.html").read_text()
    assert "speed=2" in page and "sleep_s=0.1" in page and "dropped" in page and "<svg" in page
    # The dashboard lists the tune and shows its journey.
    server = Server(tmp_path)
    try:
        listed = urllib.request.urlopen(server.base + "tune", timeout=30).read().decode()
        assert tune_dir.name in listed and "speed=2" in listed
        shown = urllib.request.urlopen(f"{server.base}tune/{tune_dir.name}", timeout=30).read().decode()
        assert "dropped" in shown and 'href="/tune"' in shown
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{server.base}tune/..%2Fruns", timeout=30)
    finally:
        server.stop()


@pytest.mark.live
def test_a_trials_runs_go_a_b_b_a(refbench, tmp_path):
    """The order of the runs as they ran (their start times), not only as the journey lists them: with A always
    first, a host that slows down as the trial goes would favour A."""
    journey = _journey(refbench("tune", *SLEEPY, "--only", "sleep_s", "--trials", "1", "--budget", "20m", "--json"))
    step, = journey["steps"]
    runs = step["runs"]
    assert [r["side"] for r in runs] == ["A", "B", "B", "A"] and [Path(r["run"]).name[-2:] for r in runs] == \
        ["A1", "B1", "B2", "A2"]
    numbers = [int(Path(r["run"]).name.split("-")[1]) for r in runs]  # tune numbers its runs as it starts them
    started = [json.loads((tmp_path / r["run"] / "run.json").read_text())["started_utc"] for r in runs]
    assert numbers == sorted(numbers) and started == sorted(started), (numbers, started)
    # Dropped: not significant, or (one time in twenty at 2 a side with no effect) significant but under the 1% kept.
    assert not step["kept"] and step["why"].startswith(("no significant change", "no change worth keeping")), step
    assert step["p_all_trials"] == step["p"] and not step["multiple_comparisons"]  # one trial: nothing to adjust
    assert "multiple_comparisons" not in journey and journey["confirmed"] is None


@pytest.mark.live
def test_a_run_whose_check_fails_is_an_error_that_names_the_check(tmp_path, monkeypatch):
    """A trial or load run that fails a correctness check is not judged, and its error says which check failed."""
    from refbench.tune.trials import run_side

    for name, value in cli_env().items():
        monkeypatch.setenv(name, value)
    plan = tmp_path / "plan.toml"
    plan.write_text('profile = "quick"\n[sleepy]\ncases = 1\nsleep_s = 0.0\nfail_check = true\n')
    side = run_side(plan, tmp_path / "runs", "failing", tmp_path / "tune.log", None, "A")
    assert side.value is None and side.run
    assert side.error == "a correctness check failed: the test's own check (the run's report says why)", side.error


def test_pairs_alternate_their_order_and_the_judgement_is_the_estimators():
    calls = []
    runs = interleaved(3, lambda side, i: calls.append(f"{side}{i}") or SideRun(side, "", 100.0, 1.0))
    assert calls == ["A1", "B1", "B2", "A2", "A3", "B3"] and len(runs) == 6
    failing = interleaved(3, lambda side, i: SideRun(side, "", None, 1.0, "boom" if f"{side}{i}" == "B2" else ""))
    assert [r.side for r in failing] == ["A", "B", "B"]  # stops at the first failure
    a, b = [100.0, 102.0, 98.0], [110.0, 113.0, 108.0]
    sides = [SideRun(s, "", v, 1.0) for s, v in zip("ABBAAB", [a[0], b[0], b[1], a[1], a[2], b[2]])]
    alone, among = judge("ops_per_s", sides), judge("ops_per_s", sides, family=20)
    assert alone.kept and alone.why.startswith("better by +10.3% (95% CI +") and alone.family == 1
    assert alone.p == among.p and abs(among.p_adjusted - alone.p * 20) < 0.001
    # Adjusted for 20, the interval widens with the p: it includes 0, and the change is not kept.
    assert not among.kept and among.ci_low_pct < 0 < among.ci_high_pct and "CI, Bonferroni over 20" in among.why
    # Lower is better: B's shorter latency is the gain.
    latency = judge("lat_ms", [SideRun(r.side, "", 1000 / r.value, 1.0) for r in sides])
    assert latency.kept and abs(latency.gain_pct - alone.gain_pct) < 0.01


def test_kept_trials_that_an_adjustment_for_every_trial_would_not_keep_are_said_so():
    def trial(p: float | None, kept: bool) -> Judgement:
        return Judgement(kept, 5.0 if kept else 0.2, None, None, p, "")

    judgements = [trial(0.03, True), trial(0.001, True), trial(0.6, False), trial(None, False), trial(0.2, False),
                  trial(0.04, True)]
    said = adjusted_for_trials(judgements)
    assert said[0] == (0.18, "kept at p 0.03, but not after adjusting for the 6 trials tried (Bonferroni: p 0.18)")
    assert said[1] == (0.006, "")  # holds
    assert said[2] == (1.0, "") and said[3] == (None, "") and said[4] == (1.0, "")  # not kept: nothing to say
    assert said[5][1].endswith("(Bonferroni: p 0.24)")
    # Of a numeric setting's values only the best stays kept: the others are not reported as kept.
    assert adjusted_for_trials(judgements, [False, True, False, False, False, False])[0] == (0.18, "")
    assert adjusted_for_trials(judgements[:1]) == [(0.03, "")]  # one trial: nothing to adjust for
    from refbench.tune.tuner import summary_lines

    journey = {"dir": "runs/tune/x", "answer": "…", "multiple_comparisons": "1 of the 2 kept …", "steps": [
        {"change": {"commit_delay": "100"}, "kept": True, "why": "better by +5.0%",
         "multiple_comparisons": said[0][1]}]}
    lines = summary_lines(journey)
    assert lines[0].endswith("better by +5.0%; kept at p 0.03, but not after adjusting for the 6 trials tried "
                             "(Bonferroni: p 0.18)") and lines[1] == "multiple comparisons: 1 of the 2 kept …"


@pytest.mark.live
def test_a_budget_that_cannot_hold_the_baseline_and_one_trial_is_refused_before_anything_runs(refbench, tmp_path):
    """… with the smallest budget that would; at that budget the tune runs, and the plan's own keys (here its
    work_dir) go with every run it makes and into the tuned plan."""
    work = tmp_path / "elsewhere"
    (tmp_path / "mine.toml").write_text(f'work_dir = "{work}"\n')
    refused = refbench("tune", *SLEEPY, "--plan", str(tmp_path / "mine.toml"), "--budget", "5s", "--json")
    assert refused.code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    said = re.search(r"--budget 5 s cannot hold the baseline \(about .+\), one trial \(about .+\) and its "
                     r"confirmation \(about .+\): give --budget (\d+)m or more", refused.stderr)
    assert said, refused.stderr
    assert not (tmp_path / "runs").exists() and not work.exists()  # nothing ran, nothing was written
    only = refbench("tune", *SLEEPY, "--only", "sleep_s", "--budget", "5s")
    assert only.code == 2 and "cannot hold" in only.stderr
    journey = _journey(refbench("tune", *SLEEPY, "--plan", str(tmp_path / "mine.toml"), "--budget", f"{said[1]}m",
                                "--json"))
    tune_dir = tmp_path / journey["dir"]
    for plan in (tune_dir / "runs" / "001-baseline.toml", tune_dir / "tuned-plan.toml"):
        assert f'work_dir = "{work}"' in plan.read_text(), plan
    if not journey["steps"]:  # the baseline took longer than its estimate here: what was left held no trial
        assert journey["answer"] == f"keep the defaults: nothing was tried ({len(journey['untried'])} settings untried: " \
            "the budget or --trials ran out before the first trial)"


def test_no_change_kept_says_whether_any_was_tried():
    from refbench.tune.tuner import nothing_kept

    assert nothing_kept(2, []) == "keep the defaults: no change tried made it significantly better"
    assert nothing_kept(0, ["speed", "sleep_s"]).startswith("keep the defaults: nothing was tried (2 settings untried")


@pytest.mark.live
def test_bad_input_is_one_sentence_and_writes_nothing(refbench, tmp_path):
    for args, words in [((*SLEEPY, "--budget", "soon"), "is not a duration"), (("--suite", "nope"), "is not a suite"),
                        ((*SLEEPY, "--set", "sleepy.nope=1"), "nope"),
                        ((*SLEEPY, "--only", "speed,nope"), "--only nope: not a setting tune tries for sleepy"),
                        (("--suite", "oltp", "--set", "oltp.dsn=host=db1 dbname=x"), "--allow-server-changes")]:
        result = refbench("tune", *args)
        assert result.code == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()


def test_an_engine_setting_joins_the_suites_defaults_instead_of_replacing_them():
    options = {"pg_settings": ["max_wal_size=1GB", "work_mem=4MB"], "shared_buffers": "128MB"}
    out = K.with_settings("oltp", "postgres", options, {"commit_delay": "100", "max_wal_size": "4096MB",
                                                          "shared_buffers": "512MB"})
    assert out["pg_settings"] == ["work_mem=4MB", "commit_delay=100", "max_wal_size=4096MB"]
    assert out["shared_buffers"] == "512MB" and options["pg_settings"][0] == "max_wal_size=1GB"
    assert K.engine_settings("oltp", "postgres", out)["shared_buffers"] == "512MB"
    mariadb = K.with_settings("oltp", "mariadb", {"mariadb_settings": ["thread_handling=pool-of-threads"],
                                                  "shared_buffers": "128MB"}, {"innodb_buffer_pool_size": "1024M"})
    assert mariadb["shared_buffers"] == "1024M" and mariadb["mariadb_settings"] == ["thread_handling=pool-of-threads"]
    assert K.same_value(K.ENGINE_KNOBS[0], "512MB", "0.5GB") and not K.same_value(K.ENGINE_KNOBS[0], "512MB", "1GB")
    duckdb = K.with_settings("dss", "duckdb", {"duckdb_threads": 0}, {"threads": "1", "memory_limit": "512MB"})
    assert duckdb == {"duckdb_threads": 1, "duckdb_memory_limit": "512MB"}


def test_every_engine_setting_tune_tries_is_one_its_suites_take(refbench):
    """Each knob's option or settings list exists in each suite it is offered for: a trial's plan is a valid plan."""
    from refbench.suites import get_suite

    for knob in K.ENGINE_KNOBS:
        for suite in knob.suites:
            option = K.OWN_OPTION.get((suite, knob.name)) or K.SETTINGS_LIST[knob.engine]
            assert option in get_suite(suite).options, (suite, knob.name, option)
    result = refbench("dss", "--set", "dss.duckdb_threads=1", "--set", "dss.modes=[\"power\"]", "--dry-run")
    assert result.code == 0 and "duckdb_threads" in result.stdout, result.stderr


def test_the_knobs_that_address_the_bottleneck_come_first():
    postgres = [k for k in K.ENGINE_KNOBS if k.engine == "postgres" and "oltp" in k.suites]
    flush_first = K.ranked(postgres, ["flush", "cpu"])
    assert all("flush" in k.addresses for k in flush_first[:4]) and flush_first[0].name == "commit_delay"
    read_first = K.ranked(postgres, ["read"])
    assert read_first[0].name == "shared_buffers"
    # The baseline's own counters put a knob first when it addresses a named limit: checkpoints that the WAL's
    # volume requested (max_wal_size), full-page images (wal_compression); not a knob for a limit not named.
    storage = {"interval_s": 300.0, "io_latency": {"checkpoints_requested": 2, "wal_mb_per_s": 9.5,
                                                   "full_page_image_pct": 31.0}}
    evidence = K.evidence(storage)
    assert evidence["max_wal_size"].startswith("2 checkpoint(s) requested by WAL volume in the measured 300 s")
    assert [k.name for k in K.ranked(postgres, ["read", "flush"], evidence)][:3] == \
        ["max_wal_size", "wal_compression", "shared_buffers"]
    assert K.ranked(postgres, ["cpu"], evidence)[0].name not in evidence
    assert K.evidence({"io_latency": {"checkpoints_requested": 0, "full_page_image_pct": 2.0}}) == {}
    wal_sized = next(k for k in postgres if k.name == "max_wal_size")
    assert first_guess(wal_sized, 1024, 16384, storage) == 2 * 300 * 9.5
    # No setting that gives up durability is ever proposed: not as a knob, nor as a value of one.
    from refbench.engines.settings import DURABILITY_TRADED, durability_traded

    assert not {k.name for k in K.ENGINE_KNOBS} & (set(DURABILITY_TRADED) - {"innodb_flush_method"})
    assert not [(k.name, c) for k in K.ENGINE_KNOBS for c in k.choices if durability_traded({k.name: c})]


def _fake_host(root: Path) -> SysRoot:
    (root / "proc/sys/vm").mkdir(parents=True)
    (root / "proc/sys/vm/dirty_ratio").write_text("20\n")
    (root / "proc/sys/vm/dirty_background_ratio").write_text("10\n")
    (root / "sys/kernel/mm/transparent_hugepage").mkdir(parents=True)
    (root / "sys/kernel/mm/transparent_hugepage/enabled").write_text("[always] madvise never\n")
    return SysRoot(root)


def test_host_changes_are_journaled_and_put_back(tmp_path):
    root = _fake_host(tmp_path / "root")
    offered = {k.name: k for k in host_knobs("oltp", None, root)}
    assert set(offered) == {"vm.dirty_ratio", "vm.dirty_background_ratio", "Transparent huge pages"}
    assert offered["vm.dirty_background_ratio"].choices == ("5",)  # 10 is what it has
    # What the tuning audit flags (dirty_ratio 20 against its 40, transparent huge pages on) comes first, saying so.
    assert list(offered)[-1] == "vm.dirty_background_ratio" and "tuning audit flags it (now 20, recommended 40)" in \
        offered["vm.dirty_ratio"].why
    changes = HostChanges(root, tmp_path / "state/host-changes.json")
    changes.apply(offered["Transparent huge pages"], "never")
    changes.apply(offered["vm.dirty_ratio"], "10")
    journal = json.loads((tmp_path / "state/host-changes.json").read_text())
    assert [e["original"] for e in journal["changes"]] == ["always", "20"] and journal["owner"]["pid"] == os.getpid()
    # Another refbench start leaves the journal of a tune that still runs alone.
    assert restore_journal(tmp_path / "state/host-changes.json", root) == []
    assert root.read("/proc/sys/vm/dirty_ratio") == "10"
    assert changes.restore() == ["vm.dirty_ratio: 20", "Transparent huge pages: always"]
    assert root.read("/proc/sys/vm/dirty_ratio") == "20" and root.read("/sys/kernel/mm/transparent_hugepage/enabled") == "always"
    assert not (tmp_path / "state/host-changes.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="--apply-host needs root")
def test_a_tune_killed_with_sigkill_leaves_no_host_setting_changed(tmp_path):
    """kill -9 while a B run has a host setting changed: refbench's watchdog puts it back; a journal left with its
    owner dead (the watchdog killed too) is put back by the next refbench command."""
    root = _fake_host(tmp_path / "root")
    env = cli_env(REFBENCH_SYSROOT=str(tmp_path / "root"), REFBENCH_STATE_DIR=str(tmp_path / "state"))
    journal = tmp_path / "state/host-changes.json"
    # speed and sleep_s at the values the suite's own knobs would try: the first trial is a host setting's.
    tune = subprocess.Popen(refbench_command("tune", *SLEEPY, "--set", "sleepy.speed=2", "--set", "sleepy.sleep_s=0.1",
                                             "--apply-host", "--budget", "20m"),
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
    try:
        defaults = {"/proc/sys/vm/dirty_ratio": "20", "/proc/sys/vm/dirty_background_ratio": "10",
                    "/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never"}

        def changed() -> bool:
            # The journal is written before the setting it names is changed: on a busy machine a reading between
            # the two saw the defaults (CI beside two CPU-bound processes).
            return journal.exists() and {p: root.read(p) for p in defaults} != defaults

        wait_for(changed, 300, "a host setting changed by a trial, with its journal")
        tune.kill()
        tune.wait()
        # The watchdog undoes the newest registration first: the B run, which it gives up to RUN_STOP_S to stop,
        # then the journal's command (10 s). Waiting less than that failed twice beside two CPU-bound processes.
        wait_for(lambda: not journal.exists(), RUN_STOP_S + 30, "the watchdog putting the host settings back")
    finally:
        tune.kill()
        tune.wait()
    assert root.read("/proc/sys/vm/dirty_ratio") == "20" and root.read("/proc/sys/vm/dirty_background_ratio") == "10"
    assert bracketed(root.read("/sys/kernel/mm/transparent_hugepage/enabled")) == "always"
    # A journal whose owner is gone, as when tune and its watchdog were both killed: the next command puts it back.
    (root.path("/proc/sys/vm/dirty_ratio")).write_text("10")
    journal.write_text(json.dumps({"owner": {"pid": tune.pid, "start": 1}, "root": str(root.root),
                                   "changes": [{"path": "/proc/sys/vm/dirty_ratio", "original": "20",
                                                "setting": "vm.dirty_ratio"}]}))
    listed = subprocess.run(refbench_command("runs", "--runs-dir", str(tmp_path / "none")), env=env, capture_output=True,
                            text=True, timeout=60)
    assert "now put back: vm.dirty_ratio: 20" in listed.stderr and root.read("/proc/sys/vm/dirty_ratio") == "20"
    assert not journal.exists()


HOLDER = """
import sys, time
from pathlib import Path
from refbench.host.sysfs import SysRoot
from refbench.tune.host import HostChanges, host_knobs
root = SysRoot(sys.argv[1])
changes = HostChanges(root, Path(sys.argv[2]))
changes.claim()
changes.apply({k.name: k for k in host_knobs("oltp", None, root)}["vm.dirty_ratio"], "10")
print("changed", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="--apply-host needs root")
@pytest.mark.live
def test_two_tunes_at_once_never_put_back_each_others_host_settings(tmp_path):
    """A tune in the middle of a host trial (here a process holding the host as tune does, its dirty_ratio changed):
    another tune that ends meanwhile leaves its setting and journal alone, and a second --apply-host tune is refused
    while the first holds the host. Once the first is killed, its watchdog puts the setting back."""
    root = _fake_host(tmp_path / "root")
    journal = tmp_path / "state/host-changes.json"
    env = cli_env(REFBENCH_SYSROOT=str(tmp_path / "root"), REFBENCH_STATE_DIR=str(tmp_path / "state"))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root.root), str(journal)], env=env,
                              stdout=subprocess.PIPE, text=True,
                              preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
    try:
        assert holder.stdout.readline().strip() == "changed"
        plain = subprocess.run(refbench_command("tune", *SLEEPY, "--budget", "1m"), cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=300)
        assert plain.returncode == 0, plain.stderr
        assert "host settings put back" not in plain.stderr
        assert root.read("/proc/sys/vm/dirty_ratio") == "10" and journal.exists()  # the holder's, still out
        second = subprocess.run(refbench_command("tune", *SLEEPY, "--apply-host", "--budget", "5s"), cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 2 and f"another refbench tune (pid {holder.pid}) is changing this host's " \
            "settings" in second.stderr, second.stderr
        assert root.read("/proc/sys/vm/dirty_ratio") == "10" and journal.exists()
        holder.kill()
        holder.wait()
        wait_for(lambda: not journal.exists(), 60, "the holder's watchdog putting its setting back")
        assert root.read("/proc/sys/vm/dirty_ratio") == "20"
    finally:
        holder.kill()
        holder.wait()


def test_a_non_root_user_is_never_stopped_by_roots_tune_state(reachable_dir, other_user):
    """Root's state directory closed (0700, as an older refbench made it), or open with a journal a killed root tune
    left: another user's refbench command still works, with one warning saying what it cannot do."""
    from refbench.cli import main

    tmp_path = reachable_dir  # a directory the other user can reach (pytest's own is closed to them)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "host-changes.json").write_text(json.dumps({"owner": {"pid": 1, "start": -1}, "root": "/", "changes": [
        {"path": "/proc/sys/vm/dirty_ratio", "original": "20", "setting": "vm.dirty_ratio"}]}))
    (state / "server-changes-1.json").write_text("{}")
    os.chmod(state / "server-changes-1.json", 0o600)

    def as_other_user(*args: str) -> tuple[int, str]:
        """refbench ARGS in a child that has become the other user (its modules loaded by root first: the other user
        cannot read this Python's own files)."""
        err = tmp_path / f"err-{len(list(tmp_path.glob('err-*')))}"
        err.touch(mode=0o666)
        err.chmod(0o666)
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setresgid(other_user.pw_gid, other_user.pw_gid, other_user.pw_gid)
                os.setresuid(other_user.pw_uid, other_user.pw_uid, other_user.pw_uid)
                sys.stderr, sys.stdout = open(err, "w"), open(os.devnull, "w")
                os.environ.update(REFBENCH_STATE_DIR=str(state), HOME=str(tmp_path))
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                code = 99
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status), err.read_text()

    with pytest.raises(SystemExit):  # loads what --help needs while root can read it
        main(["--help"])
    code, said = as_other_user("--help")
    assert code == 0 and said.strip().splitlines() == [
        f"refbench: warning: the host-changes journal {state / 'host-changes.json'} cannot be read (Permission "
        "denied); skipped"], said
    state.chmod(0o755)
    (state / "host-changes.json").chmod(0o644)
    code, said = as_other_user("--help")
    assert code == 0 and said.strip().splitlines() == [
        f"refbench: warning: a tune that was killed left host settings changed ({state / 'host-changes.json'}); run "
        "any refbench command as root to put them back"], said
    assert json.loads((state / "host-changes.json").read_text())["changes"]  # left for root


@pytest.mark.live
def test_a_tune_stopped_with_sigterm_stops_its_run_and_exits_130(tmp_path):
    """A signal sent to tune alone (kill PID, not Ctrl-C in a terminal, which reaches the run too) stops the run it
    waits for, which stops cleanly; tune never resumes a trial, so that run's work data goes (its records stay)."""
    tune = subprocess.Popen(refbench_command("tune", *SLEEPY, "--set", "sleepy.sleep_s=3", "--budget", "20m"),
                            cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
    try:
        def running_run() -> list[int]:
            children = Path(f"/proc/{tune.pid}/task/{tune.pid}/children").read_text().split()
            return [int(c) for c in children if b"run" in Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")]
        run_pids = wait_for(running_run, 120, "tune's first run")
        wait_for(lambda: list(tmp_path.glob("runs/tune/*/runs/*/records/*")) or None, 120, "a record of that run")
        tune.send_signal(signal.SIGTERM)
        _, stderr = tune.communicate(timeout=120)
    finally:
        tune.kill()
        tune.wait()
    assert tune.returncode == 130, stderr
    assert all(not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
               for pid in run_pids)
    status = [json.loads(p.read_text())["status"] for p in tmp_path.glob("runs/tune/*/runs/*/run.json")]
    assert status == ["interrupted"], status
    assert list(tmp_path.glob("runs/tune/*/runs/*/records/*")) and not list(tmp_path.glob("runs/tune/*/runs/*/work"))
    assert "interrupted" in json.loads(next(tmp_path.glob("runs/tune/*/tune.json")).read_text())["answer"]


@pytest.fixture
def postgres(data_dir):
    """A managed PostgreSQL the test hands over as "your server"."""
    from refbench.engines.postgres import ManagedPostgres

    server = ManagedPostgres(data_dir, {})
    server.start()
    yield server
    server.stop()


def test_a_users_server_gets_its_settings_back_even_after_a_kill(postgres, tmp_path):
    """--allow-server-changes on a DSN: only settings the server takes without a restart are offered; ALTER SYSTEM
    values the user had are put back as they were, the others reset; a journal whose tune was killed is put back by
    the next refbench start."""
    from refbench.engines.postgres import connect
    from refbench.tune.server import ServerChanges, restore_journal as restore_server

    with connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET commit_delay = 7")
        conn.execute("SELECT pg_reload_conf()")
    journal = tmp_path / "state/server-changes.json"
    changes = ServerChanges("postgres", postgres.dsn, journal)
    offered = changes.changeable(["commit_delay", "wal_compression", "shared_buffers", "wal_buffers"])
    assert set(offered) == {"commit_delay", "wal_compression"}  # the others need a restart
    changes.apply("commit_delay", "300")
    changes.apply("wal_compression", "on")
    assert oct(journal.stat().st_mode & 0o777) == "0o600"  # it holds the DSN

    def setting(name: str) -> str:
        with connect(postgres.dsn) as conn:
            return conn.execute(f"SHOW {name}").fetchone()[0]
    assert setting("commit_delay") == "300" and setting("wal_compression") in ("on", "pglz")
    assert changes.restore() == ["wal_compression: its default", "commit_delay: 7"]
    assert setting("commit_delay") == "7" and setting("wal_compression") == "off" and not journal.exists()
    # Killed mid-trial: the journal's owner is gone; the next start (here, the function it calls) puts it back.
    changes.apply("commit_delay", "500")
    data = json.loads(journal.read_text())
    data["owner"] = {"pid": 1, "start": -1}
    journal.write_text(json.dumps(data))
    assert restore_server(journal) == ["commit_delay: 7"] and setting("commit_delay") == "7"


def test_the_wal_goes_where_wal_dir_says(reachable_dir, refbench):
    """The placement trial's mechanism: the managed PostgreSQL's WAL in a directory of its own (initdb --waldir), and
    the managed MariaDB's redo log (innodb_log_group_home_dir)."""
    from refbench.engines.mariadb import ManagedMariaDB
    from refbench.engines.postgres import ManagedPostgres, connect

    wal = reachable_dir / "wal" / "oltp-pgwal"
    server = ManagedPostgres(reachable_dir / "pgdata", {}, log_dir=wal)
    server.start()
    try:
        with connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t AS SELECT generate_series(1, 1000) AS i")
            conn.execute("SELECT pg_switch_wal()")
        assert (reachable_dir / "pgdata/pg_wal").resolve() == wal.resolve()
        assert any(p.name.startswith("0000") for p in wal.iterdir())
    finally:
        server.stop()
    redo = reachable_dir / "wal" / "oltp-redo"
    server = ManagedMariaDB(reachable_dir / "mariadb-data", {}, log_dir=redo)
    server.start()
    try:
        assert (redo / "ib_logfile0").is_file() and not (reachable_dir / "mariadb-data/ib_logfile0").exists()
    finally:
        server.stop()
    for args, words in [(("--set", "oltp.wal_dir=/nonexistent-refbench"), "is not an existing directory"),
                        (("--set", "oltp.dsn=postgresql://nobody@127.0.0.1:1/x", "--set", f"oltp.wal_dir={reachable_dir}"),
                         "with dsn the server is yours")]:
        result = refbench("oltp", *args, "--dry-run")
        assert result.code == 2 and words in result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.reference
def test_an_oltp_tune_of_a_users_server_tries_what_it_takes_live_and_leaves_it_as_it_was(postgres, refbench, tmp_path):
    """The real thing end to end, on a PostgreSQL the test starts and hands over as "your server" (a DSN): the
    baseline's bottleneck picks the order, only settings a reload applies are tried, each A B A B trial is judged,
    the budget is kept, and the server's settings are as they were afterwards."""
    from refbench.engines.postgres import connect

    dsn = postgres.database("tpcc")
    result = refbench("tune", "--suite", "oltp", "--set", f"oltp.dsn={dsn}", "--allow-server-changes",
                      "--budget", "30m", "--trials", "1", "--repeats", "2", "--json", timeout=900)
    journey = _journey(result)
    assert journey["limits"] and journey["bottleneck"] and journey["server"]
    assert len(journey["steps"]) == 1 and journey["untried"]
    tried = [name for step in journey["steps"] for name in step["change"]]
    assert not set(tried) & {"shared_buffers", "wal_buffers"}  # they need a restart
    first = next(k for k in K.ENGINE_KNOBS if k.engine == "postgres" and k.name == tried[0])
    assert set(first.addresses) & set(journey["limits"]), (tried, journey["limits"])
    assert all(not r["error"] and r["value"] > 0 for s in journey["steps"] for r in s["runs"])
    assert journey["answer"]
    with connect(dsn) as conn:
        assert conn.execute("SHOW commit_delay").fetchone()[0] == "0"
        assert conn.execute("SELECT count(*) FROM pg_file_settings WHERE sourcefile LIKE '%auto.conf'").fetchone()[0] == 0
    assert not list((tmp_path / "state").glob("*.json"))  # nothing left to put back


@pytest.mark.slow
@pytest.mark.reference
def test_oltp_trial_runs_start_from_copies_of_one_loaded_database(reachable_dir, refbench):
    """A managed server's trial runs do not load their own: each starts from a copy of the database the baseline
    loaded (or, from a given baseline, a load run), and no copy is left afterwards."""
    runs = reachable_dir / "runs"
    tiny = ("--suite", "oltp", "--set", "oltp.warehouses=1", "--set", "oltp.users=[2]", "--set", "oltp.rampup_s=1",
            "--set", "oltp.duration_s=4", "--budget", "30m", "--trials", "1", "--runs-dir", str(runs), "--json")
    journey = _journey(refbench("tune", *tiny, "--repeats", "2", timeout=900))
    assert journey["data"].startswith("each trial run started from a copy of the database the baseline loaded")

    def reused(run: str) -> bool:
        return "reused an existing load" in (Path(run) / "report.html").read_text()

    trial_runs = [r["run"] for r in journey["steps"][0]["runs"]]
    assert len(trial_runs) == 4 and all(map(reused, trial_runs)) and not reused(journey["baseline"])
    again = _journey(refbench("tune", *tiny, "--repeats", "2", "--baseline", journey["baseline"], timeout=900))
    assert again["data"].startswith("each trial run started from a copy of the database a load run loaded")
    assert all(reused(r["run"]) for r in again["steps"][0]["runs"])
    for tune in (journey, again):
        assert not list(Path(tune["dir"]).glob("oltp-data*")), list(Path(tune["dir"]).iterdir())


def _tail(log: Path, lines: int = 40) -> str:
    """The end of a tune's log, for a failure's message."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else f"{log}: none"


@pytest.mark.slow
@pytest.mark.reference
def test_the_confirmation_runs_on_two_independent_loads_at_the_window_the_answer_is_for(reachable_dir):
    """oltp on a managed server: the confirmation loads the database a second time, alone, and spreads its A B B A
    runs over both loads, each load with both sides; it runs the baseline's window where that fits the budget (here
    the trials are made to measure less), and its answer says both. The second load goes at the end like the first,
    and the budget counted it."""
    from refbench.tune.tuner import Request, Tuner

    said: list[str] = []
    request = Request("oltp", "quick", 1800, repeats=2, runs_dir=str(reachable_dir / "runs"),
                      sets=["oltp.warehouses=1", "oltp.users=[2]", "oltp.rampup_s=1", "oltp.duration_s=3"])
    tuner = Tuner(request, said.append)
    knob = next(k for k in K.ENGINE_KNOBS if k.engine == "postgres" and k.name == "commit_delay")

    def only_the_confirmation() -> dict:
        tuner.baseline()
        assert tuner.confirm_cost_s() >= tuner.trial_cost_s(tuner.confirm_repeats) + tuner.load_cost_s() > \
            tuner.trial_cost_s(tuner.confirm_repeats)
        tuner.shape["duration_s"], tuner.full_window = 2, {"duration_s": 3}  # trials measure 2 s, the baseline 3
        tuner.confirm({"commit_delay": (knob, "10")})
        tuner.save()
        return tuner.journey
    tuner._tune = only_the_confirmation
    journey = tuner.tune()
    tune_dir = Path(journey["dir"])
    confirmation = journey["confirmation"]
    runs = confirmation["runs"]
    assert [r["side"] for r in runs] == ["A", "B", "B", "A", "A", "B"] and all(not r["error"] for r in runs), runs
    assert journey["loads"] == [str(tune_dir / "oltp-data"), str(tune_dir / "oltp-data-2")], \
        (journey["answer"], _tail(tune_dir / "tune.log"))
    by_load = {load: {r["side"] for r in runs if r["load"] == load} for load in journey["loads"]}
    assert by_load == {load: {"A", "B"} for load in journey["loads"]}, runs  # each load with both sides
    assert [r["load"] for r in runs] == [journey["loads"][0]] * 4 + [journey["loads"][1]] * 2

    def report(run: str) -> str:
        return (Path(run) / "report.html").read_text()
    loaded = [p for p in (tune_dir / "runs").iterdir() if p.is_dir() and p.name.endswith("load-2")]
    assert len(loaded) == 1 and "reused an existing load" not in report(str(loaded[0]))
    assert all("reused an existing load" in report(r["run"]) for r in runs)
    assert confirmation["window"] == {"rampup_s": 1, "duration_s": 3} and confirmation["profile_window"]
    assert all('duration_s = 3' in (tune_dir / "runs" / f"{Path(r['run']).name.split('-', 1)[1]}.toml").read_text()
               for r in runs)
    assert confirmation["design"] == ("over 2 independent loads, 3 runs a side, measured over 1 s warm-up + 3 s as "
                                      "the baseline was (the trials measured 1 s warm-up + 2 s)")
    assert journey["answer"].endswith(confirmation["design"] + ("" if journey["confirmed"] else ")")), journey["answer"]
    assert "loading the database again, independently, for the confirmation (oltp-data-2)" in said
    assert not list(tune_dir.glob("oltp-data*")), list(tune_dir.iterdir())


def test_a_users_mariadb_gets_its_global_variables_back(reachable_dir, tmp_path):
    """MariaDB's side of --allow-server-changes: only variables that are not read-only are offered, SET GLOBAL
    changes them, and the values before come back."""
    from refbench.engines.mariadb import ManagedMariaDB, connect
    from refbench.tune.server import ServerChanges

    server = ManagedMariaDB(reachable_dir / "mariadb", {"innodb_buffer_pool_size": "64M"})
    server.start()
    try:
        changes = ServerChanges("mariadb", server.dsn, tmp_path / "state/server-changes.json")
        offered = changes.changeable(["innodb_io_capacity", "innodb_flush_method", "innodb_log_buffer_size"])
        assert set(offered) == {"innodb_io_capacity"}, offered  # the others are read-only while it runs
        before = offered["innodb_io_capacity"]

        def value() -> str:
            with connect(server.dsn) as conn:
                cursor = conn.cursor()
                cursor.execute("SELECT @@GLOBAL.innodb_io_capacity")
                return str(cursor.fetchone()[0])
        changes.apply("innodb_io_capacity", "4000")
        assert value() == "4000"
        assert changes.restore() == [f"innodb_io_capacity: {before}"] and value() == before
    finally:
        server.stop()


@pytest.mark.live
def test_the_data_a_killed_tune_left_goes_at_the_next_tune_or_clean(refbench, tmp_path):
    """A tune killed with its watchdog leaves its loaded database and its copy (hundreds of MB at the quick profile):
    `clean --all-work` removes them — never those of a tune that still runs (it holds its directory's lock) — and
    keeps the journey and the runs."""
    import fcntl

    tunes = tmp_path / "runs" / "tune"
    for name in ("20261127T000000Z-oltp", "20261127T000100Z-oltp"):
        (tunes / name / "oltp-data" / "base").mkdir(parents=True)
        (tunes / name / "oltp-data-run").mkdir()
        (tunes / name / "oltp-data.log").write_text("")
        (tunes / name / "tune.json").write_text("{}")
        (tunes / name / "tune.lock").write_text("")
    running = os.open(tunes / "20261127T000100Z-oltp" / "tune.lock", os.O_RDWR)
    fcntl.flock(running, fcntl.LOCK_EX)
    try:
        cleaned = refbench("clean", "--all-work", "--runs-dir", "runs")
        assert cleaned.code == 0, cleaned.stderr
        killed = tunes / "20261127T000000Z-oltp"
        assert sorted(p.name for p in killed.iterdir()) == ["tune.json", "tune.lock"]
        said = " ".join(cleaned.stderr.split())
        assert "removed runs/tune/20261127T000000Z-oltp/oltp-data, the data of a tune that was killed" in said
        assert said.endswith("(the data of 1 killed tune(s) removed)"), said
        assert (tunes / "20261127T000100Z-oltp" / "oltp-data" / "base").is_dir()  # still running: left alone
    finally:
        os.close(running)
    again = refbench("tune", *SLEEPY, "--budget", "1m")  # the next tune removes them too
    assert again.code == 0, again.stderr
    assert not (tunes / "20261127T000100Z-oltp" / "oltp-data").exists()


def test_tune_refuses_a_host_setting_without_apply_host_and_an_unwritable_runs_dir_in_one_sentence(refbench, tmp_path):
    only_host = refbench("tune", *SLEEPY, "--only", "vm.dirty_ratio", "--budget", "5m")
    assert only_host.code == 2 and "--only vm.dirty_ratio: a host setting, which tune tries only with --apply-host" \
        in only_host.stderr and not (tmp_path / "runs").exists(), only_host.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    unwritable = refbench("tune", *SLEEPY, "--runs-dir", str(blocker / "runs"), "--budget", "5m")
    assert unwritable.code == 2 and "internal error" not in unwritable.stderr, unwritable.stderr
    assert len(unwritable.stderr.strip().splitlines()) == 1 and "cannot create the tunes directory" in unwritable.stderr


def test_the_answer_says_which_trial_did_not_fit_and_how_many_runs_neighbours_disturbed():
    from refbench.tune.tuner import summary_lines

    def run(disturbed="", again=False):
        return {"side": "A", "value": 1.0, "disturbed": disturbed, "run_again": again}

    journey = {"dir": "runs/tune/x", "answer": "keep the defaults", "untried": ["wal_buffers", "max_wal_size"],
               "stopped": "wal_buffers's trial and the confirmation needed about 9 min, 4 min 10 s of the budget was left",
               "steps": [{"change": {"commit_delay": "100"}, "kept": False, "why": "no change",
                          "runs": [run("other processes used 40% of the CPU", True), run(), run(), run()]}],
               "confirmation": None}
    lines = summary_lines(journey)
    assert "not tried: wal_buffers, max_wal_size (wal_buffers's trial and the confirmation needed about 9 min, " \
           "4 min 10 s of the budget was left)" in lines
    assert "disturbed: 1 of 4 runs measured neighbours as much as the change; 1 of them run again, the disturbed " \
           "ones not judged" in lines


def test_tune_shows_the_newest_whole_line_of_the_run_it_waits_for(tmp_path):
    from refbench.tune.trials import _newest_line

    log = tmp_path / "tune.log"
    log.write_bytes(b"oltp: 2 users: NOPM 7,000 so far (5 s measured)\noltp: 2 users: NOPM 7,4")
    said, offset = _newest_line(log, 0)
    assert said == "oltp: 2 users: NOPM 7,000 so far (5 s measured)"  # the line still being written waits
    with open(log, "ab") as f:
        f.write(b"00 so far (10 s measured)\n")
    assert _newest_line(log, offset) == ("oltp: 2 users: NOPM 7,400 so far (10 s measured)", log.stat().st_size)
