"""Errors a user can cause: they end in one clear line and exit status 2 (bugs end in status 1)."""


class UserError(Exception):
    """Bad input or an unmet precondition; the message says what is wrong and what to do."""
