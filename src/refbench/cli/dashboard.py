"""refbench serve: the runs, trends, comparisons and live progress as a local web dashboard."""

from __future__ import annotations

import typer

from refbench.cli.console import RUNS_DIR_HELP, epilog, err

commands = typer.Typer()


@commands.command(short_help="Serve the runs, trends, comparisons and live progress as a local web dashboard.",
                  epilog=epilog("refbench serve  # then open http://127.0.0.1:8765/",
                                "refbench serve --runs-dir /data/refbench-runs --port 9000",
                                "refbench serve --host 0.0.0.0  # reachable from elsewhere: prints a URL with a token"))
def serve(
    runs_dir: str = typer.Option("runs", "--runs-dir", metavar="PATH", help=RUNS_DIR_HELP),
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDRESS", help="Address to listen on. Any address "
                             "but a loopback one (127.0.0.1, ::1, localhost) requires the token printed at start."),
    port: int = typer.Option(8765, "--port", metavar="N", help="Port to listen on (0: any free port).", min=0, max=65535),
) -> None:
    """Serve the runs list, each run's report, figure trends, N-way comparisons and the progress of running runs
    as web pages, from the runs catalog and the run directories; nothing is loaded from the network."""
    from refbench.web import serve as serve_dashboard

    serve_dashboard(runs_dir, host, port, err)
