"""The telemetry sampler's arithmetic, its file format, and a live sampling of this machine."""

from __future__ import annotations

import json
import os
import time

from refbench.host.telemetry import Sampler, Telemetry, cpu_rates, disk_rates, read_disks


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
