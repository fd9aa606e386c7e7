"""What the managed database servers (PostgreSQL, MariaDB) share as processes: the account they run as, a closed
socket directory and a free loopback port, the page-cache bound's cgroup, the password made for the run, the
watchdog that stops them when refbench dies, and their stop. Each server's module says how to initialise, launch and
shut it down."""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from refbench.children import die_with_parent, owned_temp_dir, watchdog
from refbench.errors import UserError
from refbench.fileio import read_private, write_private


def as_account(account: pwd.struct_passwd | None) -> dict[str, Any]:
    """subprocess arguments that run a command as ``account`` with its own groups only (none of root's)."""
    if account is None:
        return {}
    return {"user": account.pw_uid, "group": account.pw_gid,
            "extra_groups": os.getgrouplist(account.pw_name, account.pw_gid)}


def join_then_become(join, account: pwd.struct_passwd | None, then) -> None:
    """A server's preexec_fn: join its cgroup as root, then become its account, as as_account would have."""
    join()
    if account is not None:
        os.setgroups(os.getgrouplist(account.pw_name, account.pw_gid))
        os.setregid(account.pw_gid, account.pw_gid)
        os.setreuid(account.pw_uid, account.pw_uid)
    if then is not None:
        then()


def account_can(account: pwd.struct_passwd | None, test_flag: str, path: Path) -> bool:
    """``test FLAG PATH`` as the server's account: can it enter (-x), read (-r) or write (-w) there?"""
    return account is None or subprocess.run(["test", test_flag, str(path)], **as_account(account)).returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The managed servers that ended while refbench used them, in words (ManagedProcess._note_if_ended).
_ENDED: list[str] = []


def ended_server() -> str | None:
    """The last managed server of this process that ended while the run used it, in a sentence; None if none did."""
    return _ENDED[-1] if _ENDED else None


def _continue(pid: int) -> None:
    """SIGCONT to a process and its children."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            children += [int(child) for child in (task / "children").read_text().split()]
    for each in [pid, *children]:
        with contextlib.suppress(OSError):
            os.kill(each, signal.SIGCONT)


class ServerDidNotStart(UserError):
    """A managed server that could not be set up (its data directory), or that ended, or never became ready, while it
    started. A start with the same plan fails the same way, so the runner does not suggest resume, and removes a run
    that measured nothing yet."""


def setting_at_fault(settings: dict[str, str], said: str) -> str | None:
    """The name=value among ``settings`` whose name or value the server's own words name ("could not access file
    "nonexistent"" for shared_preload_libraries=nonexistent), if one is."""
    for name, value in settings.items():
        for word in {name, name.replace("_", "-"), value.strip("'\"")}:
            if len(word) >= 3 and re.search(rf"(?<![\w./-]){re.escape(word)}(?![\w./-])", said):
                return f"{name}={value}"
    return None


class ManagedProcess:
    """The process side of a managed server. A subclass sets ``socket_prefix`` and the attributes __init__ of its
    own sets (data_dir, account, password_file, log_file, bound), and implements _launch() (which calls _spawn) and
    _stop_own() (which calls _shut_down) and stop_stale()."""

    socket_prefix: str
    title: str
    error_line: re.Pattern  # the part of a log line that says what went wrong
    settings: dict[str, str]
    account: pwd.struct_passwd | None
    password_file: Path | None
    log_file: Path
    bound: Any

    def _init_process(self) -> None:
        self.port = 0
        self.socket_dir: Path | None = None
        self.process: subprocess.Popen | None = None
        self._password: str | None = None
        self._socket_guard = self._server_guard = self._bound_guard = None

    def _own(self, path: Path) -> None:
        if self.account is not None:
            os.chown(path, self.account.pw_uid, self.account.pw_gid)

    def _open(self) -> None:
        """A free port, and a short socket path (unix socket paths are limited to about 100 bytes, run directories are
        long) made mode 0700 by mkdtemp: the socket trusts whoever reaches it. Then the bound's cgroup, if any. A later
        start removes the socket directory if refbench and its watchdog were both killed (owned_temp_dir)."""
        self.stop_stale()
        self.port = free_port()
        self.socket_dir = owned_temp_dir(self.socket_prefix, self.account.pw_uid if self.account is not None else None)
        self._socket_guard = watchdog().register(remove=[self.socket_dir])
        self._own(self.socket_dir)
        if self.bound is not None:
            self.bound.create()
            if self.bound.cgroup is not None:  # removed after the server is stopped: registered before it
                self._bound_guard = watchdog().register(remove=[self.bound.cgroup.path])

    def restart(self) -> None:
        """Stops and starts the server on the same port and socket: its buffer cache starts empty."""
        self._stop_own()
        self.stop_stale()
        self._launch()

    def _spawn(self, argv: list[str], on_death: signal.Signals, guard_grace_s: float,
               guard_signals: tuple[signal.Signals, ...]) -> None:
        """Starts the server as refbench's own child, in its cgroup and account, logging to log_file; ``on_death`` is
        what the kernel sends it when refbench's main thread ends, ``guard_signals`` what the watchdog sends after a
        kill -9 of refbench."""
        # Only the main thread lives as long as refbench: the kernel's signal follows the thread that started it.
        then = functools.partial(die_with_parent, on_death) if threading.current_thread() is threading.main_thread() else None
        account, preexec = as_account(self.account), then
        if self.bound is not None and self.bound.cgroup is not None:
            # The server joins its cgroup before exec, so every process it forks is bounded from the start. Joining
            # takes root, so here the switch to the server's account is done after it, not by subprocess.
            account, preexec = {}, functools.partial(join_then_become, self.bound.join, self.account, then)
        with open(self.log_file, "ab") as log:
            self._log_start = log.tell()
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                            start_new_session=True, preexec_fn=preexec, **account)
        self._server_guard = watchdog().register(pid=self.process.pid, grace_s=guard_grace_s, signals=guard_signals)

    def _did_not_start(self, what: str = "did not start") -> ServerDidNotStart:
        """The failed start in one sentence, for a log that goes when its run directory does: the setting the server
        names (else every setting of the plan it had), then the lines it logged since this start, the cause first."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(getattr(self, "_log_start", 0))
                logged = f.read().decode(errors="replace").splitlines()
        except OSError:
            logged = []
        said = [" ".join(m.group(0).split()) for line in logged if (m := self.error_line.search(line))]
        said = said[:3] or [" ".join(line.split()) for line in logged if line.strip()][-3:] or ["it logged nothing"]
        fault = setting_at_fault(self.settings, "\n".join(said))
        given = (f" with the setting {fault}" if fault else
                 f" with the settings {', '.join(f'{k}={v}' for k, v in self.settings.items())}" if self.settings else "")
        return ServerDidNotStart(f"{self.title} {what}{given}: {'; '.join(said).rstrip('.')}.")

    def _note_if_ended(self) -> None:
        """A server that ended before refbench stopped it (killed, crashed) is noted for last_server_failure: its
        clients saw only their connections drop."""
        if self.process is not None and (code := self.process.poll()) is not None:
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            _ENDED.append(f"the managed {self.title} ended while the run used it ({how}; its log: {self.log_file})")

    def _shut_down(self, steps: list[tuple[signal.Signals, float | None]]) -> None:
        """Sends the server this object started each signal in turn, waiting up to its time for it to end. A server
        stopped with SIGSTOP (a debugger, a test) is continued, processes and children, so that it can act on them."""
        if self.process is not None:
            for signum, wait_s in steps:
                if self.process.poll() is not None:
                    break
                self.process.send_signal(signum)
                _continue(self.process.pid)
                try:
                    self.process.wait(wait_s)
                except subprocess.TimeoutExpired:
                    continue
            self.process = None
        if self._server_guard is not None:
            self._server_guard.release()
            self._server_guard = None

    @property
    def password(self) -> str:
        """The password of refbench's TCP account on this server: the run's, once generated."""
        if self._password is None:
            kept = read_private(self.password_file) if self.password_file else None
            self._password = kept.strip() if kept else secrets.token_urlsafe(24)
            if self.password_file and not kept:
                write_private(self.password_file, self._password + "\n")
        return self._password

    def stop(self) -> None:
        self._note_if_ended()
        self._stop_own()
        self.stop_stale()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
        if self.bound is not None:
            self.bound.close()
        for guard in ("_bound_guard", "_socket_guard"):
            if getattr(self, guard) is not None:
                getattr(self, guard).release()
                setattr(self, guard, None)
