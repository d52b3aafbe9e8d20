"""The one error hierarchy of trainforge.

Every error that a user can cause through a parameter, an input file, a
program or the command line is a :class:`TrainforgeError`. The command line
catches the base class once and prints the message as one line with exit
status 2; Python callers can catch the specific subclass. Each subclass that
describes a bad *value* is also a :class:`ValueError`, so code written against
the standard exceptions keeps working. A wrong *type* passed through the
Python API stays a plain :class:`TypeError`.

This module imports nothing from trainforge: every layer may use it.
"""

__all__ = ["TrainforgeError", "ParameterError", "ParameterTypeError", "ConfigError", "ProgramError", "UsageError"]


class TrainforgeError(Exception):
    """Base class of every error trainforge reports to a user as one line (exit status 2)."""


class ParameterError(TrainforgeError, ValueError):
    """A parameter outside its allowed range or set: the message names the parameter, the value and what is allowed."""


class ParameterTypeError(ParameterError, TypeError):
    """A parameter of the wrong type (``lanes=4.0``, ``signed=1``): a :class:`ParameterError` and a :class:`TypeError`."""


class ConfigError(TrainforgeError, ValueError):
    """A bad network, architecture, workload or other description (file or in-memory): names the field and what was expected."""


class ProgramError(TrainforgeError, ValueError):
    """A program, command or microprogram that the hardware cannot run (does not fit, bad opcode, bad order)."""


class UsageError(TrainforgeError):
    """A bad command-line usage: conflicting options, a bad path, an unknown name."""
