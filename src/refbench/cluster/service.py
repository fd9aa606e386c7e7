"""``refbench scheduler`` and ``refbench worker``: a Dask scheduler and a Dask worker, as long-running services.
A worker runs one node's work at a time (one thread), with no nanny, so a worker that dies stays dead and the
coordinator reports its node as failed instead of quietly starting it again."""

from __future__ import annotations

import asyncio
import socket

from rich.console import Console

from refbench.cluster.security import check_address, security
from refbench.errors import UserError

LOCAL_HTTP = "127.0.0.1:0"  # Dask's HTTP endpoints (metrics, health) stay on loopback, whatever the cluster listens on


def serve_scheduler(host: str, port: int, ca_file: str, cert: str, key: str, console: Console) -> None:
    from distributed import Scheduler

    tls = security(ca_file, cert, key, "scheduler")

    async def main() -> None:
        async with Scheduler(host=host, port=port, protocol="tls" if tls else "tcp", security=tls,
                             dashboard=False, dashboard_address=LOCAL_HTTP) as scheduler:
            console.print(f"scheduler: listening at {scheduler.address}; start workers with: "
                          f"refbench worker --scheduler {scheduler.address}")
            print(scheduler.address, flush=True)
            await scheduler.finished()

    try:
        asyncio.run(main())
    except (OSError, RuntimeError) as exc:  # Dask wraps a failed start in RuntimeError("… failed to start")
        raise UserError(f"the scheduler cannot listen on {host}:{port}: {_cause(exc)}.") from None


def serve_worker(address: str, name: str | None, ca_file: str, cert: str, key: str, console: Console) -> None:
    from distributed import Worker
    from distributed.comm import get_address_host
    from distributed.utils import get_ip

    tls = security(ca_file, cert, key, "worker")
    check_address(address, tls is not None)
    name = name or socket.gethostname()
    # Listen only on the interface that reaches the scheduler (loopback for a loopback scheduler), not on all.
    host = get_ip(get_address_host(address))

    async def main() -> None:
        async with Worker(address, name=name, host=host, nthreads=1, security=tls, memory_limit=0, dashboard=False,
                          dashboard_address=LOCAL_HTTP, death_timeout=60) as worker:
            console.print(f"worker {name}: connected to {address}, listening at {worker.address}")
            await worker.finished()

    try:
        asyncio.run(main())
    except (OSError, TimeoutError, RuntimeError) as exc:
        raise UserError(f"worker {name} cannot join the scheduler at {address}: {_cause(exc)} (another worker "
                        "with this name? --name gives it another)" if "name" in _cause(exc).lower() else
                        f"worker {name} cannot join the scheduler at {address}: {_cause(exc)}") from None


def _cause(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).strip()
    return text.splitlines()[0].rstrip(".")
