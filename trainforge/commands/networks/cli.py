"""``trainforge networks ...``: list the built-in networks, dump one as a file, check a file.

``show`` prints a built-in in the one network format (YAML or JSON,
:mod:`trainforge.spec.network`): a file to edit and give back to any model
that takes it (``trainforge hypar simulate FILE``, ``trainforge dsm explore
FILE``). ``check`` validates a file and says which models take it.
"""
import json

from trainforge.outputs import write_text


def _list(args):
    from .builtins import builtin_networks, models_taking

    rows = []
    for name, build in builtin_networks().items():
        network = build()
        taking = [model for model, reason in models_taking(network).items() if reason is None]
        rows.append({"name": name, "layers": len(network.layers), "kinds": list(network.kinds), "models": taking})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        kinds = ", ".join(row["kinds"])
        print(f"{row['name']:<{width}}  {row['layers']:>3} layers  {kinds:<13}  models: {', '.join(row['models'])}")
    return 0


def _show(args):
    from trainforge.spec.network import dumps

    from .builtins import resolve

    text = dumps(resolve(args.name), args.format)
    if args.out is None:
        print(text, end="")
    else:
        write_text(args.out, text)
        print(f"wrote {args.out}")
    return 0


def _check(args):
    from trainforge.spec.network import load

    from .builtins import models_taking

    network = load(args.file)
    taking = models_taking(network, args.file)
    report = {"name": network.name, "layers": len(network.layers), "kinds": list(network.kinds),
              "models": {model: reason is None for model, reason in taking.items()},
              "reasons": {model: reason for model, reason in taking.items() if reason is not None}}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{args.file}: network {network.name!r}, {len(network.layers)} layers ({', '.join(network.kinds)})")
    for model, reason in taking.items():
        print(f"  {model}: {'takes it' if reason is None else reason}")
    return 0


def register(subparsers):
    """Add ``networks list``, ``networks show`` and ``networks check``."""
    parser = subparsers.add_parser("networks", help="built-in networks in the one network file format")
    commands = parser.add_subparsers(dest="networks_command", metavar="NETWORKS_COMMAND", required=True)
    listing = commands.add_parser("list", help="every model's built-in networks")
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    listing.set_defaults(func=_list)
    show = commands.add_parser("show", help="print a built-in network as a file to edit and load back")
    show.add_argument("name", help="MODEL/NAME as 'networks list' prints it, or a NAME only one model has")
    show.add_argument("--format", choices=("yaml", "json"), default="yaml", help="file format (default yaml)")
    show.add_argument("--out", help="write the file here instead of printing it")
    show.set_defaults(func=_show)
    check = commands.add_parser("check", help="validate a network file and say which models take it")
    check.add_argument("file", help="a .yaml, .yml or .json network file")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(func=_check)
