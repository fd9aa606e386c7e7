"""Errors a user can cause and fix: shown as one sentence and a non-zero exit, never a traceback."""


class UserError(Exception):
    """A problem with the user's input or environment (bad plan, missing tool, unsafe target...)."""

    exit_code = 2
