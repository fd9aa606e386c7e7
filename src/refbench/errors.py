"""Errors a user can cause and fix: shown as one sentence and a non-zero exit, never a traceback."""


class UserError(Exception):
    """A problem with the user's input or environment (bad plan, missing tool, unsafe target...)."""

    exit_code = 2


class ServerGone(UserError):
    """A database server that died or stopped answering while a run used it: not the user's input, and nothing a
    change to the plan fixes; once the server answers again, ``refbench resume`` continues the run."""

    exit_code = 69  # EX_UNAVAILABLE: a service is unavailable
