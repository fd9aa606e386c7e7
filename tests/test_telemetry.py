"""The telemetry sampler's arithmetic, its file format, and a live sampling of this machine."""

from __future__ import annotations

import json
import os
import time
import tracemalloc

import pyarrow.parquet as pq
import pytest

from refbench.host.telemetry import Sampler, Telemetry, cpu_rates, disk_rates, read_disks, sample_line


def test_disk_rates_from_counter_deltas():
    # reads, sectors read, ms reading, writes, sectors written, ms writing, ms busy, weighted ms
    before = (100, 1000, 50, 10, 80, 5, 100, 200)
    after = (300, 1000 + 2 * 2048, 250, 60, 80 + 4096, 105, 600, 1700)
    r = disk_rates(before, after, 2.0)
    assert r["r_iops"] == 100 and r["w_iops"] == 25
    assert r["read_mb_s"] == 2 * 2048 * 512 / 1e6 / 2 and r["write_mb_s"] == 4096 * 512 / 1e6 / 2
    assert r["busy_pct"] == 25.0 and r["avg_queue"] == 0.75
    assert r["r_await_ms"] == 1.0 and r["w_await_ms"] == 2.0


def test_cpu_rates_sum_to_100():
    before = dict(user=100, nice=0, system=50, idle=800, iowait=50, irq=0, softirq=0, steal=0)
    after = dict(user=160, nice=20, system=70, idle=880, iowait=70, irq=0, softirq=0, steal=0)
    r = cpu_rates(before, after)
    assert r["user_pct"] == 40 and r["system_pct"] == 10 and r["iowait_pct"] == 10 and r["idle_pct"] == 40
    assert abs(sum(r.values()) - 100) < 1e-9


def test_read_disks_skips_unused_devices(tmp_path):
    (tmp_path / "diskstats").write_text(
        "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        " 259       0 nvme0n1 10 0 80 5 20 0 160 7 0 12 12 0 0 0 0 0 0\n"
        "   1       0 ram0 5 0 5 0 0 0 0 0 0 0 0\n"
    )
    assert read_disks(tmp_path) == {"nvme0n1": (10, 80, 5, 20, 160, 7, 12, 12)}


def test_window_tolerates_a_torn_last_line_and_selects_by_time(tmp_path):
    path = tmp_path / "samples.jsonl"
    lines = [
        {"t": 101.0, "dt": 1.0, "cpu": {"user_pct": 10, "system_pct": 5, "iowait_pct": 0, "idle_pct": 85, "steal_pct": 0},
         "disks": {"sdb": {"r_iops": 100, "w_iops": 0, "read_mb_s": 40, "write_mb_s": 0, "busy_pct": 50, "avg_queue": 1,
                           "r_await_ms": 1, "w_await_ms": 0}}},
        {"t": 102.0, "dt": 1.0, "cpu": {"user_pct": 30, "system_pct": 5, "iowait_pct": 0, "idle_pct": 65, "steal_pct": 0},
         "disks": {"sdb": {"r_iops": 300, "w_iops": 0, "read_mb_s": 80, "write_mb_s": 0, "busy_pct": 90, "avg_queue": 3,
                           "r_await_ms": 3, "w_await_ms": 0}}},
        {"t": 103.0, "dt": 1.0, "cpu": {"user_pct": 99, "system_pct": 0, "iowait_pct": 0, "idle_pct": 1, "steal_pct": 0}, "disks": {}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"t": 104.0, "dt"')
    tel = Telemetry(path)
    assert len(list(tel.samples())) == 3
    sdb = tel.device("sdb", 100.0, 102.0)
    assert sdb["read_mb_s"] == 60 and sdb["peak_read_mb_s"] == 80 and sdb["busy_pct"] == 70
    window = tel.window(100.0, 102.0)
    assert window.seconds == 2 and window.cpu["user_pct"] == 20
    assert tel.window(200.0, 300.0) is None


def test_sampler_records_this_machine_once_a_second(tmp_path):
    out = tmp_path / "samples.jsonl"
    t0 = time.time()
    with Sampler(out, interval_s=0.5):
        data = os.urandom(1 << 20)
        deadline = time.time() + 2.2
        while time.time() < deadline:
            with open(tmp_path / "f.bin", "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            time.sleep(0.1)
    samples = list(Telemetry(out).samples())
    assert len(samples) >= 3
    assert all(set(s["cpu"]) >= {"user_pct", "system_pct", "iowait_pct", "idle_pct"} for s in samples)
    assert all(t0 < s["t"] <= time.time() for s in samples)
    window = Telemetry(out).window(t0, time.time())
    assert sum(d["write_mb_s"] for d in window.disks.values()) > 0  # the fsynced writes reached a device


def _synthetic_series(path, seconds, t0=1_700_000_000.0, disks=("vda", "vdb", "loop0"), torn_at=None):
    """A telemetry file as the sampler writes it, one line per second from made-up counters; ``torn_at`` cuts
    that line in half, as a write on a full disk does (the sampler starts the next line on a new line)."""
    def cpu(i):
        return dict(user=100 * i, nice=0, system=40 * i, idle=50 * i, iowait=10 * i, irq=0, softirq=0, steal=0)

    def counters(i, k):
        return tuple(v * i * (k + 1) for v in (200, 1600, 300, 50, 800, 100, 600, 900))

    with open(path, "w") as f:
        for i in range(1, seconds + 1):
            line = sample_line(t0 + i - 1, cpu(i - 1), {d: counters(i - 1, k) for k, d in enumerate(disks)},
                               t0 + i, cpu(i), {d: counters(i, k) for k, d in enumerate(disks)})
            f.write(line[: len(line) // 2] + "\n" if i == torn_at else line)
    return t0


def _bytes_read() -> int:
    return int(dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())["rchar"])


def test_attaching_a_window_to_every_record_of_an_hour_reads_the_file_about_once(tmp_path):
    path = tmp_path / "samples.jsonl"
    t0 = _synthetic_series(path, 3600, torn_at=1800)
    tel = Telemetry(path)
    everything = list(tel.samples())
    assert len(everything) == 3599  # the torn line is skipped, the rest read back
    before = _bytes_read()
    windows = []
    for k in range(360):  # a record every 10 s, as a device sweep of short points makes them
        start, end = t0 + 10 * k, t0 + 10 * k + 10
        tel.wait_for_sample_after(end, timeout_s=0)
        windows.append((start, end, tel.between(start, end)))
    read = _bytes_read() - before
    # The file once, plus a few KiB per record (its tail, one probe); re-reading it per record would be 720 ×.
    assert read < 2 * path.stat().st_size
    for start, end, got in windows:
        assert got == [s for s in everything if start < s["t"] - s["dt"] / 2 <= end]
    assert sum(len(got) for _, _, got in windows) == 3599
    assert tel.last_sample()["t"] == t0 + 3600
    assert tel.window(t0 + 3600, t0 + 7200) is None and tel.between(t0 - 100, t0) == []


@pytest.mark.live
def test_the_report_of_an_hour_of_telemetry_reads_it_once_and_holds_no_more_than_ten_minutes(tmp_path):
    from refbench.report.telemetry import CHART_POINTS, telemetry_charts

    cost = {}
    for minutes in (10, 60):
        path, tables = tmp_path / f"{minutes}.jsonl", tmp_path / f"tables-{minutes}"
        _synthetic_series(path, minutes * 60)
        before = _bytes_read()
        tracemalloc.start()
        charts = telemetry_charts(path, tables)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        cost[minutes] = {"read": _bytes_read() - before, "size": path.stat().st_size, "peak": peak}
        assert all(len(points) <= CHART_POINTS for c in charts for points in c.series.values())
        assert [c.name for c in charts] == ["telemetry_cpu", "telemetry_disk"]
        assert pq.read_metadata(tables / "telemetry_cpu.parquet").num_rows == minutes * 60
        assert pq.read_metadata(tables / "telemetry_disk.parquet").num_rows == minutes * 60 * 3
        with open(tables / "telemetry_disk.csv") as f:
            assert sum(1 for _ in f) == minutes * 60 * 3 + 1
        user = dict(charts[0].series)["user %"]
        assert user[-1][0] > (minutes * 60 - 1) * 0.95  # the chart spans the whole series
    assert cost[60]["read"] < 1.5 * cost[60]["size"]  # one pass
    # Memory: the chart's bounded points and a batch of table rows, whatever the length (6× the samples here).
    assert cost[60]["peak"] < 1.5 * cost[10]["peak"], cost


def test_a_run_of_two_seconds_is_tabled_and_not_charted(tmp_path):
    from refbench.report.telemetry import CHART_MIN_SAMPLES, telemetry_charts

    for seconds in (CHART_MIN_SAMPLES - 1, CHART_MIN_SAMPLES):
        path, tables = tmp_path / f"{seconds}.jsonl", tmp_path / f"tables-{seconds}"
        _synthetic_series(path, seconds)
        charts = telemetry_charts(path, tables)
        assert pq.read_metadata(tables / "telemetry_cpu.parquet").num_rows == seconds
        assert [c.name for c in charts] == ([] if seconds < CHART_MIN_SAMPLES else ["telemetry_cpu", "telemetry_disk"])
        assert all(len(points) == seconds for c in charts for points in c.series.values())
