"""The ``trainforge`` command line.

Subcommands of the hardware flow (``list``, ``verilog``, ``synth``, ``fpga``,
``bench``, ``report``) live here; the system models add their own
subcommands through a ``register(subparsers)`` function in the modules found by
:func:`subcommand_modules`. Every handler returns the process exit code: 0 on success.

:func:`main` turns every :class:`~trainforge.errors.TrainforgeError` and
every ``OSError`` (an unwritable path, a full disk) into one line on stderr
and exit status 2, exits quietly when its output pipe closes
(``trainforge list --json | head -1``), and prints one line and exits with
130 on Ctrl-C. A subcommand's ``--out`` is checked before its handler starts
(:func:`trainforge.outputs.check_output`); a parser that writes a folder
rather than a file sets ``out_kind="dir"`` in its defaults. A command's files
are written when it returns (:func:`trainforge.outputs.staged`), so a failed
or interrupted command writes none; a parser whose command must write as it
goes sets ``writes_as_it_goes=True``.
"""
import argparse
import os
import sys

from .errors import TrainforgeError

__all__ = ["main"]


def subcommand_modules():
    """Modules that add subcommands: the hardware flow, then every ``trainforge.commands.<family>.cli``.

    Each defines ``register(subparsers)``, which calls ``subparsers.add_parser(...)``
    and sets ``func`` to a handler taking the parsed arguments and returning an
    exit code.
    """
    from . import hwflow
    from .discover import family_modules

    return [hwflow, *family_modules("trainforge.commands", "cli")]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="trainforge",
        description="RTL generators, golden models and models for DNN training accelerators.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"trainforge {__version__}")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (they are off anyway when stderr "
                                                             "is not a terminal)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in subcommand_modules():
        module.register(subparsers)
    return parser


def _run(args, argv):
    from . import progress, provenance
    from .outputs import check_output, staged

    progress.set_quiet(args.quiet)
    provenance.begin(argv, vars(args))
    if getattr(args, "out", None) is not None:
        check_output(args.out, getattr(args, "out_kind", "file"))
    if getattr(args, "writes_as_it_goes", False):
        return args.func(args)
    with staged():
        return args.func(args)


def _quiet_stdout():
    """After a closed pipe: send what is still buffered for stdout nowhere, so exit prints no second error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def main(argv=None):
    command = "trainforge"
    try:
        parser = build_parser()
        argv = sys.argv[1:] if argv is None else list(argv)
        args = parser.parse_args(argv)
        command = f"trainforge {args.command}"
        return _run(args, argv)
    except TrainforgeError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        print(f"{command}: {where}{error.strerror or error}", file=sys.stderr)
        return 2
    finally:
        from . import provenance

        provenance.end()


if __name__ == "__main__":
    sys.exit(main())
