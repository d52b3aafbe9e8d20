"""``trainforge coverage [BLOCK ...]``: merge the kept coverage runs per block; lcov info, HTML and a summary."""
import pathlib

from trainforge.outputs import write_json, write_text

DEFAULT_OUT = "build/reports/coverage"


def register(subparsers):
    parser = subparsers.add_parser(
        "coverage", help="merge the Verilator coverage runs per block: lcov info, HTML, summary (make coverage)",
        description="Merge the coverage.dat files that the coverage mode of the simulations kept "
                    "(TRAINFORGE_COVERAGE=1 or pytest --coverage-rtl, under build/coverage/runs/) per block with "
                    "verilator_coverage, write each block's lcov info and genhtml HTML under OUT/<block>/, and "
                    "OUT/summary.json and OUT/coverage.md: line and toggle percentages and the uncovered lines. "
                    "One line per block.")
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="blocks to merge (default: every block with runs)")
    parser.add_argument("--runs", default=None, help="folder of the kept runs (default build/coverage/runs)")
    parser.add_argument("--no-html", dest="html", action="store_false", help="write no HTML (genhtml)")
    parser.add_argument("--goal", type=float, default=95.0, help="line coverage goal in percent (default 95)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    parser.set_defaults(func=run, out_kind="dir", writes_as_it_goes=True)


def run(args):
    from trainforge import coverage, simulation
    from trainforge.errors import UsageError

    runs_root = pathlib.Path(args.runs) if args.runs else simulation.COVERAGE_RUNS
    found = coverage.runs_by_block(runs_root)
    names = args.blocks or sorted(found)
    missing = [name for name in names if name not in found]
    if missing or not names:
        raise UsageError(f"no coverage runs of {', '.join(missing) or 'any block'} under {runs_root}: run the "
                         f"simulations in coverage mode first (make coverage, or TRAINFORGE_COVERAGE=1 pytest ...)")
    out = pathlib.Path(args.out)
    summaries = []
    for name in names:
        summary = coverage.merge_block(name, found[name], out / name, html=args.html)
        summaries.append(summary)
        print(f"{name:<20} {summary['runs']:>3} runs  lines {summary['lines_hit']}/{summary['lines']} "
              f"({coverage.number(summary['line_percent'])} %)  toggles {summary['toggles_hit']}/"
              f"{summary['toggles']} ({coverage.number(summary['toggle_percent'])} %)  "
              f"{len(summary['uncovered'])} uncovered lines", flush=True)
    write_json(out / "summary.json", {"kind": "coverage", "goal_line_percent": args.goal, "blocks": summaries})
    write_text(out / "coverage.md", coverage.markdown(summaries, goal=args.goal))
    below = [s["block"] for s in summaries if s["line_percent"] is not None and s["line_percent"] < args.goal]
    print(f"{len(summaries) - len(below)} of {len(summaries)} blocks at or above {args.goal:g} % lines"
          + (f" (below: {', '.join(below)})" if below else "") + f"; {out / 'summary.json'}, {out / 'coverage.md'}")
    return 0
