"""Subcommands of the hardware flow: ``list``, ``verilog``, ``synth``, ``fpga``, ``bench``, ``report``."""
import json
import pathlib
import sys

from .hw.registry import BLOCKS
from .outputs import write_text

BUILD = pathlib.Path("build")
REPORTS = BUILD / "reports"


def _add_block_arguments(parser):
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="blocks to process (default: all)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the one named block (repeatable)")


def register(subparsers):
    parser = subparsers.add_parser("list", help="list the blocks and their parameters")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=cmd_list)

    parser = subparsers.add_parser("verilog", help="emit Verilog, instantiation templates and build/verilog/manifest.json")
    _add_block_arguments(parser)
    parser.add_argument("--name", metavar="MODULE",
                        help="name of the top module (default: the block's name; one block only); "
                             "submodules take it as their prefix")
    parser.add_argument("--out", default=str(BUILD / "verilog"), help="output folder (default: build/verilog)")
    parser.set_defaults(out_kind="dir")
    parser.set_defaults(func=cmd_verilog)

    parser = subparsers.add_parser("synth", help="Yosys generic synthesis: cell counts per block (JSON)")
    _add_block_arguments(parser)
    parser.add_argument("--out", default=str(REPORTS / "synth.json"), help="JSON report path")
    parser.set_defaults(func=cmd_synth)

    parser = subparsers.add_parser("fpga", help="ULX3S ECP5-85F place and route: LUT4, FF, DSP, BRAM, Fmax")
    _add_block_arguments(parser)
    parser.add_argument("--out", default=str(REPORTS / "qor.json"), help="JSON report path (a .md table is written beside it)")
    parser.set_defaults(func=cmd_fpga)

    parser = subparsers.add_parser("bench", help="run the registered benchmarks (median of several runs)")
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per benchmark (default 5)")
    parser.add_argument("--out", default=str(REPORTS / "bench.json"), help="JSON report path")
    parser.set_defaults(func=cmd_bench)

    parser = subparsers.add_parser("report", help="gather build/reports/ into build/reports/index.md")
    parser.add_argument("--reports", default=str(REPORTS), help="reports folder")
    parser.set_defaults(func=cmd_report)


def _schema_rows(block):
    return [{"name": p.name, "type": p.kind.__name__, "default": p.default, "allowed": p.allowed,
             "minimum": p.minimum, "maximum": p.maximum, "choices": list(p.choices) if p.choices else None,
             "doc": p.doc} for p in block.schema]


def cmd_list(args):
    if args.json:
        print(json.dumps({name: {"summary": block.summary, "params": _schema_rows(block)}
                          for name, block in BLOCKS.items()}, indent=2))
        return 0
    for name, block in BLOCKS.items():
        print(f"{name}: {block.summary}")
        for row in _schema_rows(block):
            print(f"    {row['name']:<12} {row['type']:<5} default {row['default']!s:<6} {row['allowed']:<26} {row['doc']}")
    return 0


def cmd_verilog(args):
    from .emit import elaborate_all, write_outputs

    emitted = elaborate_all(args.blocks, args.param, module=args.name)
    manifest = write_outputs(emitted, args.out)
    for item in emitted:
        print(f"{pathlib.Path(args.out) / (item.module + '.v')}  {item.params}")
    print(f"{manifest}")
    return 0


def _write_json(path, payload):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(payload, indent=2) + "\n")
    return path


def cmd_synth(args):
    from .emit import elaborate_all
    from .synth import synthesize

    emitted = elaborate_all(args.blocks, args.param)
    results = [synthesize(item, BUILD / "synth") for item in emitted]
    for result in results:
        cells = ", ".join(f"{k} {v}" for k, v in sorted(result["cells_by_type"].items()))
        print(f"{result['block']}: {result['cells']} cells ({cells})")
    print(_write_json(args.out, {"tool": results[0]["tool"] if results else None, "blocks": results}))
    return 0


def cmd_fpga(args):
    from .emit import elaborate_all
    from .fpga import markdown_table, place_and_route

    emitted = elaborate_all(args.blocks, args.param)
    results = [place_and_route(item, BUILD / "fpga") for item in emitted]
    table = markdown_table(results)
    print(table)
    path = _write_json(args.out, {"board": "ULX3S ECP5-85F", "blocks": results})
    write_text(path.with_suffix(".md"), table + "\n")
    print(path)
    return 0


def cmd_bench(args):
    from .bench import run_benchmarks

    report = run_benchmarks(args.names, args.repeat)
    print(_write_json(args.out, report))
    return 0


def cmd_report(args):
    from .report import write_index

    print(write_index(pathlib.Path(args.reports)))
    return 0


if __name__ == "__main__":
    sys.exit("use the 'trainforge' command")
