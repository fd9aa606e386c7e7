"""The coordinator: the ``refbench run`` that drives a cluster. For each step of ``hosts`` (e.g. 1, 2, 4 nodes)
it sends the plan to that many workers, starts them together once all are ready, and collects each node's run
directory into this run under nodes/<step>/<node>/. A worker that disappears mid-run is a failed node: the
others' results are kept and the step ends instead of waiting for it.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import time
import uuid
from typing import Any

from rich.console import Console

from refbench.cluster.node import run_node
from refbench.cluster.security import check_address, security
from refbench.figures.cluster import node_dir
from refbench.errors import UserError
from refbench.plan import Plan
from refbench.runstore import Run, iso, utc_now

WORKER_WAIT_S = 60.0
# A worker the scheduler does not list for this long is dead; a busy machine can hide one for a moment (a missed
# heartbeat, a reconnect), which must not fail a node that is still measuring.
WORKER_GONE_S = 10.0
# How long nodes wait at the start barrier for each other: getting ready takes a node a second or two, so a node
# missing after this is busy with another run or stuck, and the step ends instead of waiting for it.
START_TIMEOUT_S = 120.0


def _checked(plan: Plan):
    """The client's TLS settings, after checking they go with the scheduler address (and the hosts)."""
    if len(set(plan.hosts)) != len(plan.hosts):
        raise UserError(f"hosts {plan.hosts} names a node count twice; each step needs its own count.")
    tls = security(plan.tls_ca_file, plan.tls_cert, plan.tls_key, "client")
    if plan.scheduler:
        check_address(plan.scheduler, tls is not None)
    elif tls:
        raise UserError("TLS settings need a scheduler (--scheduler tls://…); the local cluster stays on loopback.")
    return tls


def _client(plan: Plan, tls):
    from distributed import Client

    try:
        return Client(plan.scheduler, security=tls, timeout=10)
    except (OSError, TimeoutError) as exc:
        raise UserError(f"cannot reach the Dask scheduler at {plan.scheduler}: {str(exc).splitlines()[0]}") from None


def preflight(plan: Plan) -> None:
    """Everything that can be wrong with the cluster settings, found before the run directory is written."""
    tls = _checked(plan)
    if plan.scheduler:
        _client(plan, tls).close()


def connect(plan: Plan, console: Console):
    """(client, local cluster or None): the plan's scheduler, or a local cluster on loopback when it names none."""
    from distributed import Client, LocalCluster

    tls = _checked(plan)
    if plan.scheduler:
        return _client(plan, tls), None
    from distributed.security import Security

    console.print(f"cluster: a local Dask cluster of {max(plan.hosts)} worker processes on 127.0.0.1, TLS with a "
                  "certificate made for this run")
    # A scheduler runs whatever its clients submit, as refbench's user: on loopback without TLS any user of the host
    # could connect to it. A certificate of its own, which only this process and its workers hold, shuts them out.
    cluster = LocalCluster(n_workers=max(plan.hosts), threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", memory_limit=0, security=Security.temporary())
    try:
        return Client(cluster), cluster
    except BaseException:
        cluster.close()
        raise


def _workers(client) -> dict[str, str]:
    """node name -> worker address; a worker's name is its host name (refbench worker) or its number (local)."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    return {(w["name"] if isinstance(w["name"], str) else f"node{int(w['name']) + 1}"): address for address, w in info.items()}


def execute(run: Run, console: Console) -> bool:
    """Runs every step; returns True when every node completed and every correctness check passed."""
    from refbench.cluster.summary import build_cluster_report

    plan = run.plan
    with run.running():
        client, cluster = connect(plan, console)
        try:
            needed = max(plan.hosts)
            try:
                client.wait_for_workers(needed, timeout=WORKER_WAIT_S)
            except TimeoutError:
                have = len(_workers(client))
                raise UserError(f"the scheduler has {have} worker(s) after {WORKER_WAIT_S:g} s and the plan needs {needed}; "
                                f"start more with: refbench worker --scheduler {plan.scheduler or '…'}") from None
            nodes = dict(sorted(_workers(client).items()))
            steps: dict[str, Any] = dict(run.meta.get("cluster", {}).get("steps", {}))
            for step in plan.hosts:
                if finished(steps.get(str(step))):
                    console.print(f"cluster: step {step} node(s): already measured")
                    continue
                # A step is measured whole: its nodes run at the same time, so one cut short runs again with all of them.
                shutil.rmtree(run.path / "nodes" / f"{step}-nodes", ignore_errors=True)
                chosen = dict(list(nodes.items())[:step])
                console.print(f"cluster: step {step} node(s): {', '.join(chosen)}")
                steps[str(step)] = _run_step(client, run, plan, step, chosen, console)
                run.update(cluster={"scheduler": plan.scheduler or "local", "steps": steps})
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    return build_cluster_report(run)


def finished(outcome: dict[str, Any] | None) -> bool:
    """Whether a step of an earlier attempt ended with every node's results collected."""
    return bool(outcome) and all(node.get("status") == "ok" for node in outcome.values())


def _run_step(client, run: Run, plan: Plan, step: int, chosen: dict[str, str], console: Console) -> dict[str, Any]:
    from distributed import Event, Queue

    key = f"refbench-{run.path.name}-{step}-{uuid.uuid4().hex[:8]}"
    ready, go, stop = Queue(f"{key}-ready", client=client), Event(f"{key}-go", client=client), Event(f"{key}-stop", client=client)
    plan_dict = plan.to_dict()
    futures = {node: client.submit(run_node, plan_dict, node, key, START_TIMEOUT_S, workers=[address],
                                   allow_other_workers=False, pure=False, key=f"{key}-{node}")
               for node, address in chosen.items()}
    outcome: dict[str, dict[str, Any]] = {node: {"status": "running", "address": chosen[node]} for node in chosen}
    waiting, started, barrier = set(chosen), False, time.monotonic()
    missing_since: dict[str, float] = {}  # node -> when the scheduler stopped listing its worker
    try:
        while any(o["status"] == "running" for o in outcome.values()):
            alive = set(client.scheduler_info(n_workers=-1)["workers"])
            now = time.monotonic()
            for node, address in chosen.items():
                if address in alive:
                    missing_since.pop(node, None)
                else:
                    missing_since.setdefault(node, now)
            for node, future in futures.items():
                if outcome[node]["status"] != "running":
                    continue
                if future.status in ("finished", "error", "cancelled"):
                    outcome[node].update(_collect(run, step, node, future))
                elif now - missing_since.get(node, now) > WORKER_GONE_S:
                    future.cancel()
                    outcome[node].update(status="failed", error="the worker died mid-run; its results are lost")
                elif not started and node in waiting and time.monotonic() - barrier > START_TIMEOUT_S + 10:
                    future.cancel()
                    outcome[node].update(status="failed", error=f"not ready within {START_TIMEOUT_S:g} s (a worker busy "
                                                                 "with another run?)")
                else:
                    continue
                waiting.discard(node)
                failed = outcome[node]["status"] != "ok"
                console.print(f"{'[bold red]' if failed else ''}cluster: {node}: {outcome[node]['status']}"
                              f"{'[/bold red]' if failed else ''}" + (f" — {outcome[node]['error']}" if outcome[node]["error"] else ""))
            if not started:
                for _ in range(ready.qsize()):
                    waiting.discard(ready.get())
                if not waiting:
                    go.set()
                    started = True
                    console.print(f"cluster: {step} node(s) started together at {iso(utc_now())}")
            time.sleep(0.2 if not started else 0.5)
    finally:
        if any(o["status"] == "running" for o in outcome.values()):
            stop.set()  # interrupted or failed here: the nodes stop too instead of running on unwatched
        ready.close()
        go.clear()
    return outcome


def _collect(run: Run, step: int, node: str, future) -> dict[str, Any]:
    if future.status != "finished":
        error = future.exception() if future.status == "error" else "cancelled"
        return {"status": "failed", "error": f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)}
    result = future.result()
    out: dict[str, Any] = {"host": result["host"], "error": result["error"], "exit_code": result["code"],
                           "started_epoch_s": result.get("started_epoch_s"), "ended_epoch_s": result.get("ended_epoch_s")}
    if "archive" in result:
        target = node_dir(run, step, node)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(result["archive"]), mode="r:gz") as tar:
            tar.extractall(target, filter="data")
    out["status"] = "failed" if result["error"] else "ok"
    return out
