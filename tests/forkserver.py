"""Runs the tests' refbench commands in processes forked from one that has already imported refbench.

`make test` starts the CLI several hundred times, and a fresh interpreter spends about a second of CPU importing
refbench and what it uses (Typer, Rich, matplotlib, pyarrow, DuckDB, SciPy) before a command does anything:
a third of the suite's CPU. Each command here is still a process of its own, with its own pid, working directory,
environment, umask, stdout and stderr (pipes, read to their end as subprocess.run reads them) and exit code, running
the real ``refbench.cli.main``; only the imports were done once, before the fork.

The server is one process per pytest worker, started by the worker (``start``) and killed with it. A command's
process gets SIGTERM when the server dies, as a command started by subprocess.run with ``die_with_parent`` gets it
when the test dies.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REQUEST_BYTES = 1 << 20
# What a command may import, imported once in the server: refbench's commands and suites, the report and its charts,
# and the libraries they load. Not Dask (it reads its configuration from the environment when imported) nor Polars
# (its thread pool must not be forked): the commands that need them import them themselves.
PRELOAD = ["refbench.cli", "refbench.cli.run", "refbench.suites.device", "refbench.suites.oltp", "refbench.suites.dss",
           "refbench.suites.dw", "refbench.suites.analytics", "refbench.report", "refbench.report.charts",
           "refbench.report.compare", "refbench.report.telemetry", "refbench.estimate", "refbench.catalog",
           "refbench.dryrun", "refbench.tune.host", "refbench.tune.server", "refbench.tune.leftovers", "suite_for_tests",
           "typer._click.decorators", "rich._emoji_codes",
           "matplotlib.backends.backend_agg", "matplotlib.backends.backend_svg", "PIL.PngImagePlugin",
           "PIL.BmpImagePlugin", "PIL.GifImagePlugin", "PIL.JpegImagePlugin", "PIL.PpmImagePlugin", "pyarrow",
           "pyarrow.parquet", "duckdb", "psycopg", "numpy", "scipy.special"]


def serve(path: str) -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".new")
    listener.listen(16)
    os.rename(path + ".new", path)  # ready: the worker waits for the name
    while True:
        conn, _ = listener.accept()
        try:
            message, fds, _, _ = socket.recv_fds(conn, REQUEST_BYTES, 2)
            request = json.loads(message)
        except (OSError, ValueError):  # a worker that went away mid-request
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            _command(conn, request, fds)  # exits with the command's code; never returns
        for fd in fds:
            os.close(fd)
        conn.send(str(pid).encode())
        threading.Thread(target=_report_exit, args=(conn, pid), daemon=True).start()


def _report_exit(conn: socket.socket, pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    with conn:
        conn.send(str(os.waitstatus_to_exitcode(status)).encode())


def _command(conn: socket.socket, request: dict, fds: list[int]) -> None:
    from refbench.children import die_with_parent

    die_with_parent(signal.SIGTERM)
    conn.close()
    for target, fd in zip((1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    from refbench.cli import console, main

    # The consoles were made when the server imported them; their width follows this command's COLUMNS and streams.
    console.out.width = console._width(sys.stdout) or console.out.width
    console.err.width = console._width(sys.stderr) or console.err.width
    sys.argv = [str(Path(console.__file__).parents[1] / "__main__.py"), *request["args"]]  # as `python -m refbench`
    main(request["args"])


def start(directory: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """Starts a server in ``directory`` and waits until it listens: (its process, its socket's path)."""
    from refbench.children import die_with_parent

    path = str(directory / "forkserver.sock")
    log = open(directory / "forkserver.log", "w")
    process = subprocess.Popen([sys.executable, "-c", f"import forkserver; forkserver.serve({path!r})"],
                               stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=directory,
                               preexec_fn=die_with_parent)
    log.close()
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the fork server did not start: {(directory / 'forkserver.log').read_text()[-2000:]}")
        time.sleep(0.02)
    return process, path


def run(path: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run(capture_output=True, text=True, timeout=timeout) of ``refbench args``, forked by the server."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    umask = os.umask(0)
    os.umask(umask)
    request = json.dumps({"args": list(args), "cwd": str(cwd), "env": env, "umask": umask}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.connect(path)
        try:
            socket.send_fds(conn, [request], [out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
        pid = int(conn.recv(64))
        deadline = time.monotonic() + timeout
        try:
            stdout, stderr = _read_to_end(out_r, err_r, deadline)
            conn.settimeout(max(0.0, deadline - time.monotonic()))
            code = int(conn.recv(64))
        except (TimeoutError, socket.timeout):
            os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired([sys.executable, "-m", "refbench", *args], timeout) from None
    return subprocess.CompletedProcess(args, code, stdout, stderr)


def _read_to_end(out_r: int, err_r: int, deadline: float) -> tuple[str, str]:
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                for key, _ in selector.select(remaining):
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
        finally:
            os.close(out_r)
            os.close(err_r)
    # As text=True reads them: decoded, with universal newlines.
    return tuple(b"".join(chunks[fd]).decode().replace("\r\n", "\n").replace("\r", "\n") for fd in (out_r, err_r))
