"""``trainforge tensordash speedup``: the speedup figures from the golden cycle model."""
import json
import pathlib

from trainforge.cli import UsageError


def _speedup(args):
    from trainforge.sim.tensordash import figures
    if args.samples < 1 or args.stream_rows < 1:
        raise UsageError("--samples and --stream-rows must be >= 1")
    report = figures.all_figures(samples=args.samples, stream_rows=args.stream_rows)
    report["plots"] = figures.plot(report, pathlib.Path(args.out))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for row in report["random_sparsity"]:
            paper = row["paper_tile"]
            print(f"sparsity {row['sparsity']:.4f}: PE {row['pe']:.3f}x  4x4 tile {row['tile_4x4']:.3f}x"
                  f"  ideal {row['ideal']:.3f}x" + (f"  paper {paper}x" if paper else ""))
    return 0


def register(subparsers):
    parser = subparsers.add_parser("tensordash", help="TensorDash speedup studies (golden cycle model)")
    commands = parser.add_subparsers(dest="tensordash_command", metavar="FIGURE", required=True)
    speedup = commands.add_parser("speedup", help="random sparsity, depth, rows and 16-lane sweeps, with plots")
    speedup.add_argument("--samples", type=int, default=64, help="streams per point (default 64)")
    speedup.add_argument("--stream-rows", type=int, default=512, help="rows per dot product (default 512)")
    speedup.add_argument("--out", default="build/reports/tensordash", help="directory of the PNG plots")
    speedup.add_argument("--json", action="store_true", help="print the whole report as JSON")
    speedup.set_defaults(func=_speedup)
