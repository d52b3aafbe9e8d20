"""The ``trainforge`` command line.

Subcommands of the hardware flow (``list``, ``verilog``, ``synth``, ``fpga``,
``bench``, ``report``) live here; the system models add their own
subcommands through a ``register(subparsers)`` function in the modules named
in :data:`SUBCOMMAND_MODULES`. Every handler returns the process exit code:
0 on success, 2 on a usage or parameter error (nothing partial is written).
"""
import argparse
import importlib
import sys

from .errors import UsageError
from .hw.params import ParamError

__all__ = ["UsageError", "main"]

#: Modules that add subcommands. Each defines ``register(subparsers)``, which
#: calls ``subparsers.add_parser(...)`` and sets ``func`` to a handler taking
#: the parsed arguments and returning an exit code.
SUBCOMMAND_MODULES = [
    "trainforge.hwflow",
    "trainforge.sim.dsm.cli",
    "trainforge.sim.hypar.cli",
    "trainforge.sim.tensordash.cli",
]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="trainforge",
        description="RTL generators, golden models and models for DNN training accelerators.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
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
