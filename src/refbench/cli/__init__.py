"""The refbench command line: one Typer app, its commands in a module per group (run: run, resume and one command
per suite; cluster: scheduler, worker; catalog: runs, tag, history; results: report, check, compare; dashboard: serve;
host: host, clean; tune: tune), all printing through console."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

import typer
from typer.core import TyperArgument, TyperOption

from refbench import __version__, fileio
from refbench.cli import catalog, cluster, console, dashboard, host, results, run, tune
from refbench.cli.console import epilog, plain, say
from refbench.errors import UserError
from refbench.exhaustion import explain
from refbench.suites import suite_names

# Click's own help layout (rich_markup_mode=None): Rich's option table cuts long flag names short at 80 columns
# ("--no-reload-each-…"), where click puts a long flag on a line of its own and its help below it.
app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
    help="Validate and rate a server + storage stack for database and analytics workloads.\n\n"
    "Every command that measures ends with its verdict (headline figures, checks and bottleneck per suite) and "
    "the run directory as the last line, which 'refbench report', 'compare' and 'check' take.\n\n"
    "Exit status: 0 all passed; 1 a correctness check failed; 2 bad input; 3 an acceptance threshold failed; "
    "70 internal error; 75 a resource ran out; 130 interrupted.",
    epilog=epilog("refbench host", "refbench run --plan lab.toml --dry-run  # what it would run, how long, what space",
                  "refbench run --plan lab.toml", "refbench compare RUN_A RUN_B",
                  "refbench oltp --help  # add --debug to any command for a traceback"),
)


def _version(value: bool) -> None:
    if value:
        plain(f"refbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    pass


def _name(command: typer.models.CommandInfo) -> str:
    return command.name or command.callback.__name__.replace("_", "-")


# refbench --help lists the commands in the order they are added, and that order crosses the groups (a run, the cluster
# it may use, resuming and cleaning it up, then its results), so a new command takes its place here.
ORDER = ("run", "scheduler", "worker", "resume", "clean", "runs", "tag", "history", "verdict", "why", "report", "check",
         "compare", "serve", "host", "tune")
app.registered_commands += sorted((command for group in (run, cluster, catalog, results, dashboard, host, tune)
                                   for command in group.commands.registered_commands),
                                  key=lambda command: ORDER.index(_name(command)))


class _Argument(TyperArgument):
    """An argument that takes several values says so in the usage line ({RUN}...), as click's own do."""

    def make_metavar(self, ctx: Any, *, usage: bool = False) -> str:
        metavar = super().make_metavar(ctx, usage=usage)
        return metavar + "..." if self.nargs != 1 and self.metavar is not None and usage else metavar


# Plain type names for every command's options, new ones included: Typer shows the Python type (<str>, <path>).
PLAIN_TYPES = {"int": "N", "float": "NUMBER", "path": "PATH", "str": "TEXT"}


def _plain_types(group: Any) -> None:
    for command in group.commands.values():
        for param in command.params:
            if isinstance(param, TyperArgument):
                param.__class__ = _Argument
            elif isinstance(param, TyperOption) and not param.is_flag and param.metavar is None:
                param.metavar = PLAIN_TYPES.get(param.type.name, "VALUE")


def _interrupt(signum: int, frame: Any) -> None:
    """The first Ctrl-C or kill (SIGTERM) stops the run cleanly: servers stopped, the run resumable. Another one
    while that cleanup runs would cut it short, so it only says what is happening."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupted_again)
    raise KeyboardInterrupt


def _interrupted_again(signum: int, frame: Any) -> None:
    say("still stopping what the run started (servers, workers); kill -9 leaves that to its watchdog.")


def _restore_host_settings() -> None:
    """Host and server settings a tune changed and could not put back (it, and for the host its watchdog, were
    killed) go back now; what this user cannot put back or read is said, and the command goes on."""
    from refbench.tune import host as tuned_host, server as tuned_server

    for line in tuned_host.left_by_a_killed_tune() + tuned_server.left_by_a_killed_tune():
        say(line)


def main(argv: list[str] | None = None) -> None:
    console.guard_streams()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or bool(os.environ.get("REFBENCH_DEBUG"))
    args = [a for a in args if a != "--debug"]
    # What a run writes for people (report, tables, charts, raw output) and the directories holding it are readable
    # by others whatever the umask (077 made the report 0600); what must stay private sets its own mode (secrets/
    # 0700, the managed server's socket and data directories). Write permission stays as the umask says.
    os.umask(os.umask(0) & ~0o055)
    fileio.on_odd_file(console.warn)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    try:
        _restore_host_settings()
        registered = {_name(c) for c in app.registered_commands}
        # A suite's command is built from its options, which imports the suite (0.2 s for all five): a command that
        # is not a suite's (runs, history…) goes without them.
        if not (args and args[0] in registered):
            for name in suite_names():
                if name not in registered:  # main() may run again in one process (tests call it in-process)
                    run.add_suite_command(app, name)
        command = typer.main.get_command(app)
        _plain_types(command)
        code = command.main(args=args, prog_name="refbench", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt) as exc:
        # click turns an EOFError into Abort, as if the user had pressed Ctrl-D at a prompt; refbench asks for nothing
        # at a prompt, so an EOFError is a file that ended too soon, never an interruption.
        if isinstance(exc.__cause__, EOFError):
            if debug:
                raise exc.__cause__ from None
            say(f"internal error: EOFError: {exc.__cause__} (a file ended too soon; run again with --debug for the "
                "traceback).")
            code = 70
        else:
            say("interrupted.")
            code = 130
    except UserError as exc:
        if debug:
            traceback.print_exc()
        say(str(exc))
        code = exc.exit_code
    except typer.TyperException as exc:  # usage errors: unknown option, bad choice, missing argument
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "refbench"
        say(f"{exc.format_message().rstrip('.')} (see '{where} --help').")
        code = getattr(exc, "exit_code", 2)
    except Exception as exc:  # a bug: one line unless --debug; or a resource that ran out outside a run
        if debug:
            raise
        if explained := explain(exc):
            say(str(explained))
            code = explained.exit_code
        else:
            say(f"internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback).")
            code = 70
    console.drain()
    sys.exit(code if isinstance(code, int) else 0)
