"""The ``trainforge`` command line.

Subcommands of the hardware flow (``list``, ``verilog``, ``synth``, ``fpga``,
``bench``, ``report``) live here; the system models add their own
subcommands through a ``register(subparsers)`` function in the modules found by
:func:`subcommand_modules`. Every handler returns the process exit code:
0 on success, 2 on a usage or parameter error (nothing partial is written).
"""
import argparse
import sys

from .errors import UsageError
from .hw.params import ParamError

__all__ = ["UsageError", "main"]


def subcommand_modules():
    """Modules that add subcommands: the hardware flow, then every ``trainforge.sim.<model>.cli``.

    Each defines ``register(subparsers)``, which calls ``subparsers.add_parser(...)``
    and sets ``func`` to a handler taking the parsed arguments and returning an
    exit code.
    """
    from . import hwflow
    from .discover import family_modules

    return [hwflow, *family_modules("trainforge.sim", "cli")]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="trainforge",
        description="RTL generators, golden models and models for DNN training accelerators.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in subcommand_modules():
        module.register(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ParamError) as error:
        print(f"trainforge {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
