"""Errors that the command line reports as one line with exit status 2."""

__all__ = ["UsageError"]


class UsageError(Exception):
    """A user error (bad argument, bad input file): printed as one line, exit status 2."""
