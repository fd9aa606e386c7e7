"""refbench scheduler and worker: the Dask services a cluster run (refbench run --hosts) runs on."""

from __future__ import annotations

from typing import Optional

import typer

from refbench.cli.console import epilog, err, tls_options

commands = typer.Typer()


@commands.command(short_help="Start a Dask scheduler for refbench workers.",
                  epilog=epilog("refbench scheduler  # loopback only: 127.0.0.1:8786",
                                "refbench scheduler --host 10.0.0.1 --tls-ca-file ca.pem --tls-cert sched.pem --tls-key sched.key"))
def scheduler(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8786, "--port", help="Port to listen on (0: any free port).", min=0, max=65535),
    tls_ca_file: Optional[str] = tls_options()[0], tls_cert: Optional[str] = tls_options()[1],
    tls_key: Optional[str] = tls_options()[2],
) -> None:
    """Start a Dask scheduler for refbench workers; prints its address."""
    from refbench.cluster.service import serve_scheduler

    serve_scheduler(host, port, tls_ca_file or "", tls_cert or "", tls_key or "", err)


@commands.command(short_help="Start a Dask worker that runs plans on this host.",
                  epilog=epilog("refbench worker --scheduler tcp://127.0.0.1:8786",
                                "refbench worker --scheduler tls://10.0.0.1:8786 --tls-ca-file ca.pem --tls-cert db1.pem --tls-key db1.key"))
def worker(
    scheduler: str = typer.Option(..., "--scheduler", help="The scheduler's address (tcp:// or tls://)."),
    name: Optional[str] = typer.Option(None, "--name", help="This node's name in the results (default: the host name)."),
    tls_ca_file: Optional[str] = tls_options()[0], tls_cert: Optional[str] = tls_options()[1],
    tls_key: Optional[str] = tls_options()[2],
) -> None:
    """Start a Dask worker that runs refbench plans on this host for a cluster run."""
    from refbench.cluster.service import serve_worker

    serve_worker(scheduler, name, tls_ca_file or "", tls_cert or "", tls_key or "", err)
