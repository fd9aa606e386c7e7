"""Several hosts at once on Dask distributed: a local cluster, hosts in network namespaces, a worker that dies,
and TLS between the ends."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from process_tree import descendants

SLEEPY = ["--suite", "sleepy"]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


class Service:
    """A long-running refbench process (scheduler or worker) that the test stops."""

    def __init__(self, argv: list[str], cwd: Path, log: Path):
        self.log = log
        self.process = subprocess.Popen(argv, cwd=cwd, env=cli_env(), stdout=subprocess.PIPE, stderr=open(log, "wb"),
                                        text=True, start_new_session=True)

    def first_line(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline().strip()
        assert line and time.monotonic() < deadline, self.log.read_text()
        return line

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def services(tmp_path):
    started: list[Service] = []

    def start(*args: str, prefix: list[str] | None = None) -> Service:
        service = Service([*(prefix or []), *refbench_command(*args)], tmp_path, tmp_path / f"service-{len(started)}.log")
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for_workers(tmp_path: Path, count: int, log_paths: list[Path], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum("connected to" in p.read_text(errors="replace") for p in log_paths if p.exists()) < count:
        assert time.monotonic() < deadline, "\n".join(p.read_text() for p in log_paths)
        time.sleep(0.2)


def test_nodes_use_their_own_directories_and_clean_up_after_dead_workers(tmp_path):
    import fcntl

    from refbench.cluster.node import own_paths, remove_stale_node_dirs

    shared = tmp_path / "shared"
    shared.mkdir()
    plan = {"work_dir": "/mnt/work", "targets": [str(shared), "/dev/nvme1n1"],
            "options": {"analytics": {"data_dir": "/mnt/data", "util_dir": "", "rows": 1000}}}
    mine = own_paths(plan, "db1")
    assert mine["work_dir"] == "/mnt/work/db1" and mine["options"]["analytics"]["data_dir"] == "/mnt/data/db1"
    assert mine["options"]["analytics"]["util_dir"] == "" and mine["targets"] == [str(shared / "db1"), "/dev/nvme1n1"]
    assert (shared / "db1").is_dir() and plan["options"]["analytics"]["data_dir"] == "/mnt/data"  # the plan is unchanged

    dead, live = tmp_path / "refbench-node-dead", tmp_path / "refbench-node-live"
    for d in (dead, live):
        d.mkdir()
        (d / "node.lock").touch()
    held = os.open(live / "node.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert remove_stale_node_dirs(tmp_path) == [dead]
        assert live.is_dir() and not dead.exists()
    finally:
        os.close(held)


@pytest.mark.slow
def test_a_local_cluster_runs_a_scaling_series_with_totals_and_uniformity(refbench, tmp_path):
    result = refbench("run", *SLEEPY, "--hosts", "1,2", "--runs-dir", "runs", timeout=240)
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    nodes = _rows(run / "tables" / "cluster" / "cluster_nodes.csv")
    assert [(r["nodes"], r["node"], r["status"]) for r in nodes] == [("1", "node1", "ok"), ("2", "node1", "ok"), ("2", "node2", "ok")]
    assert all(float(r["started after the first node (s)"]) < 1.0 for r in nodes)  # started together
    for step, node in (("1", "node1"), ("2", "node1"), ("2", "node2")):
        assert len(list((run / "nodes" / f"{step}-nodes" / node / "records" / "sleepy").glob("[!.]*.json"))) == 4
    totals = {(r["nodes"], r["case"], r["figure"]): r for r in _rows(run / "tables" / "cluster" / "cluster_totals.csv")}
    two = totals[("2", "case-001", "ops_per_s")]
    assert float(two["total (sum or mean)"]) == pytest.approx(2 * float(totals[("1", "case-001", "ops_per_s")]["total (sum or mean)"]))
    assert two["nodes reporting"] == "2" and float(two["spread %"]) == 0  # the test suite's figure is the same everywhere
    assert totals[("2", "case-001", "lat_ms")]["how"] == "mean"
    for chart in ("scaling_sleepy", "uniformity_sleepy"):
        assert (run / "charts" / "cluster" / f"{chart}.png").stat().st_size > 5_000
    report = (run / "report.html").read_text()
    assert "Totals and uniformity across nodes" in report and "nodes/2-nodes/node2/report.html" in report
    assert (run / "nodes" / "2-nodes" / "node2" / "report.html").is_file()
    # It ends with the verdict, as a single-host run does: the total on each node count, then each node's own.
    for scope in ("total, 2 node(s)", "total, 1 node(s)", "node1, 2 node(s)", "node2, 2 node(s)", "node1, 1 node(s)"):
        assert f"sleepy ({scope})" in result.stdout, result.stdout
    verdict = json.loads((run / "verdict.json").read_text())
    total = verdict[0]["headlines"][0]
    assert verdict[0]["scope"] == "total, 2 node(s)" and total["case"] == "case-003@2n"
    assert total["value"] == pytest.approx(sum(v["headlines"][0]["value"] for v in verdict if v["scope"].endswith(", 2 node(s)")
                                               and not v["scope"].startswith("total")))

    # Two cluster runs compare by their totals, per node count.
    faster = refbench("run", *SLEEPY, "--hosts", "1,2", "--set", "sleepy.speed=2", "--runs-dir", "runs", timeout=240)
    assert faster.code == 0, faster.stderr
    compared = refbench("compare", result.last_line, faster.last_line, "--json", "--all")  # totals: measured once
    assert compared.code == 0, compared.stderr
    factors = {(f["case"], f["metric"]): f["factor"] for f in compared.json()["figures"]}
    assert factors[("case-001@2n", "ops_per_s")] == pytest.approx(2) and factors[("case-001@1n", "lat_ms")] == pytest.approx(2)
    # The answers lead with the headline totals, as any comparison's do.
    answered = {a["figure"]: a for a in compared.json()["answers"] if a["kind"] == "headline"}
    assert answered["ops/s, case-003 @ 2 nodes"]["ratio"] == pytest.approx(2), answered
    # Totals are measured once a side, and this host has no measured spread of them: nothing to test with.
    assert answered["ops/s, case-003 @ 1 node"]["answer"] == "cannot tell"


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_a_failed_node_and_the_others_are_kept(services, tmp_path):
    scheduler = services("scheduler", "--port", "0")
    address = scheduler.first_line()
    a = services("worker", "--scheduler", address, "--name", "node-a")
    b = services("worker", "--scheduler", address, "--name", "node-b")
    _wait_for_workers(tmp_path, 2, [a.log, b.log])
    coordinator = subprocess.Popen(
        refbench_command("run", *SLEEPY, "--set", "sleepy.sleep_s=1", "--set", "sleepy.cases=6", "--hosts", "2",
                         "--scheduler", address, "--runs-dir", "runs"),
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        err = ""
        while "started together" not in err:
            line = coordinator.stderr.readline()
            assert line, "the coordinator ended before the nodes started"
            err += line
        time.sleep(2)
        node_b = [pid for pid, cmdline in descendants(b.process.pid).items()
                  if any(arg.endswith("-node-b") for arg in cmdline.split())]
        assert node_b  # node-b's refbench is measuring
        os.kill(b.process.pid, signal.SIGKILL)  # the worker dies mid-run
        started = time.monotonic()
        time.sleep(1)
        assert not [pid for pid in node_b if _alive(pid)]  # and its node's refbench with it
        out, rest = coordinator.communicate(timeout=120)
    finally:
        coordinator.kill()
    assert time.monotonic() - started < 60  # the run ends instead of waiting for the dead node
    assert coordinator.returncode == 1, err + rest
    run = tmp_path / out.strip().splitlines()[-1]
    steps = json.loads((run / "run.json").read_text())["cluster"]["steps"]["2"]
    assert steps["node-b"]["status"] == "failed" and "died" in steps["node-b"]["error"]
    assert steps["node-a"]["status"] == "ok"
    assert len(list((run / "nodes" / "2-nodes" / "node-a" / "records" / "sleepy").glob("[!.]*.json"))) == 6
    assert not (run / "nodes" / "2-nodes" / "node-b").exists()
    findings = _rows(run / "tables" / "cluster" / "cluster_nodes.csv")
    assert {r["node"]: r["status"] for r in findings} == {"node-a": "ok", "node-b": "failed"}
    assert "the worker died mid-run" in (run / "report.html").read_text()


@pytest.fixture
def namespaces():
    """Hosts of our own: network namespaces on a bridge, 10.231.0.0/24, each with its own address."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
        pytest.skip("network namespaces need root, ip and unshare")
    tag = f"rb{os.getpid() % 100000}"
    bridge = f"{tag}br"
    names = [f"{tag}-{i}" for i in range(2)]

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", "10.231.0.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for i, ns in enumerate(names):
            ip("netns", "add", ns)
            ip("link", "add", f"{tag}h{i}", "type", "veth", "peer", "name", f"{tag}n{i}")
            ip("link", "set", f"{tag}h{i}", "master", bridge)
            ip("link", "set", f"{tag}h{i}", "up")
            ip("link", "set", f"{tag}n{i}", "netns", ns)
            ip("-n", ns, "addr", "add", f"10.231.0.{i + 2}/24", "dev", f"{tag}n{i}")
            ip("-n", ns, "link", "set", f"{tag}n{i}", "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield names
    finally:
        for ns in names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


@pytest.mark.slow
def test_hosts_in_network_namespaces_run_a_suite_together_under_their_host_names(namespaces, services, refbench, tmp_path):
    scheduler = services("scheduler", "--host", "10.231.0.1", "--port", "0")
    address = scheduler.first_line()
    workers = [services("worker", "--scheduler", address,
                        prefix=["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", f'hostname host-{i} && exec "$0" "$@"'])
               for i, ns in enumerate(namespaces)]
    _wait_for_workers(tmp_path, len(workers), [w.log for w in workers])
    result = refbench("run", "--suite", "analytics", "--hosts", "2", "--scheduler", address, "--runs-dir", "runs",
                      "--set", 'analytics.tests=["correlation_matrix", "random_reads"]', "--set", "analytics.jobs=2",
                      "--set", "analytics.rows=100000", "--set", "analytics.iotest=false", timeout=300)
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    nodes = _rows(run / "tables" / "cluster" / "cluster_nodes.csv")
    assert {(r["node"], r["host"], r["address"].rsplit(":", 1)[0]) for r in nodes} == {
        (f"host-{i}", f"host-{i}", f"tcp://10.231.0.{i + 2}") for i in range(2)}
    for i in range(2):
        record = json.loads((run / "nodes" / "2-nodes" / f"host-{i}" / "records" / "analytics" / "workload.json").read_text())
        assert record["host"] == f"host-{i}" and {j["status"] for j in record["extra"]["jobs"]} == {"ok"}
    ratio = [r for r in _rows(run / "tables" / "cluster" / "cluster_totals.csv") if r["figure"] == "mean_cpu_real_ratio"]
    assert ratio and ratio[0]["nodes reporting"] == "2" and ratio[0]["spread %"] != ""


@pytest.fixture
def certificates(tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make test certificates")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=node")
    (tmp_path / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "node.pem",
            "-days", "2", "-extfile", "san.cnf")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.pem", "-days", "2",
            "-subj", "/CN=other", "-addext", "subjectAltName=IP:127.0.0.1")
    return {name: str(tmp_path / name) for name in ("ca.pem", "node.pem", "node.key", "other.pem", "other.key")}


@pytest.mark.slow
def test_tls_between_the_ends_with_the_users_certificates(certificates, services, refbench, tmp_path):
    tls = ["--tls-ca-file", certificates["ca.pem"], "--tls-cert", certificates["node.pem"], "--tls-key", certificates["node.key"]]
    scheduler = services("scheduler", "--port", "0", *tls)
    address = scheduler.first_line()
    assert address.startswith("tls://127.0.0.1:")
    worker = services("worker", "--scheduler", address, "--name", "secure", *tls)
    _wait_for_workers(tmp_path, 1, [worker.log])
    result = refbench("run", *SLEEPY, "--hosts", "1", "--scheduler", address, *tls, "--runs-dir", "runs", timeout=120)
    assert result.code == 0, result.stderr
    assert _rows(tmp_path / result.last_line / "tables" / "cluster" / "cluster_nodes.csv")[0]["address"].startswith("tls://")
    assert "TLS, every end&#x27;s certificate checked" in (tmp_path / result.last_line / "report.html").read_text()

    plain = refbench("run", *SLEEPY, "--hosts", "1", "--scheduler", address, "--runs-dir", "refused")
    assert plain.code != 0 and "TLS address" in plain.stderr and "Traceback" not in plain.stderr
    stranger = refbench("run", *SLEEPY, "--hosts", "1", "--scheduler", address, "--tls-ca-file", certificates["other.pem"],
                        "--tls-cert", certificates["other.pem"], "--tls-key", certificates["other.key"], "--runs-dir", "refused",
                        timeout=120)
    assert stranger.code != 0 and "cannot reach the Dask scheduler" in stranger.stderr
    assert not (tmp_path / "refused").exists()  # refused before anything was written


@pytest.mark.slow
def test_a_cluster_run_killed_mid_step_leaves_no_worker_and_resumes_keeping_finished_steps(refbench, process_tree, tmp_path):
    from conftest import wait_for

    runs = tmp_path / "runs"
    tree = process_tree("run", "--suite", "sleepy", "--set", "sleepy.cases=6", "--set", "sleepy.sleep_s=1", "--hosts", "1,2",
                        "--runs-dir", str(runs), linger_s=10)
    run = wait_for(lambda: next(runs.glob("*/run.json"), None), 60, "the run directory").parent
    wait_for(lambda: "2" not in json.loads((run / "run.json").read_text()).get("cluster", {}).get("steps", {"2": 0})
             and (run / "nodes" / "1-nodes" / "node1" / "records").is_dir(), 180, "the first step", every_s=0.2)
    time.sleep(3)  # into the second step
    tree.signal(signal.SIGKILL)
    assert tree.finish()["survivors"] == []  # the local Dask cluster and the nodes' refbench went with it
    first = {p.name: p.read_bytes() for p in (run / "nodes" / "1-nodes" / "node1" / "records" / "sleepy").glob("[!.]*.json")}
    assert len(first) == 6

    resumed = refbench("resume", str(run), timeout=300)
    assert resumed.code == 0, resumed.stderr
    assert "step 1 node(s): already measured" in resumed.stderr
    assert {p.name: p.read_bytes() for p in (run / "nodes" / "1-nodes" / "node1" / "records" / "sleepy").glob("[!.]*.json")} == first
    for node in ("node1", "node2"):
        assert len(list((run / "nodes" / "2-nodes" / node / "records" / "sleepy").glob("[!.]*.json"))) == 6
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    # And it ends as an uninterrupted run does: the verdict in total and per node, both steps in it.
    assert "sleepy (total, 2 node(s))" in resumed.stdout and "sleepy (total, 1 node(s))" in resumed.stdout
    assert "sleepy (node2, 2 node(s))" in resumed.stdout
