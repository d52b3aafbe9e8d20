"""What every ``trainforge neurotrainer`` command shares: argument parsing and report writing."""
import json
import pathlib

from trainforge.errors import UsageError
from trainforge.outputs import write_json

__all__ = ["REPORTS", "int_list", "save_report"]

#: Default output directory of the family's reports.
REPORTS = pathlib.Path("build/reports/neurotrainer")


def int_list(text, option, low, high):
    """Parse a comma-separated list of integers in ``low..high`` given to ``option``.

    Raises
    ------
    UsageError
        Naming the option, the bad value and the allowed range.
    """
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"{option} = {text!r} is not a comma-separated list of integers") from None
    bad = [value for value in values if not low <= value <= high]
    if bad:
        raise UsageError(f"{option} = {bad[0]} is invalid; allowed: integers in {low}..{high}")
    return values


def save_report(args, name, report, plot=None):
    """Write ``<name>.json`` (and ``<name>.png`` drawn by ``plot(report, path)``) under ``args.out``.

    With ``args.json`` the report is also printed. Returns the paths written.
    """
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json"]
    write_json(paths[0], report, indent=1)
    if plot is not None:
        paths.append(out / f"{name}.png")
        plot(report, paths[1])
    if args.json:
        print(json.dumps(report, indent=1))
    return paths
