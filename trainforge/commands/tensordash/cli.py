"""``trainforge tensordash ...``: speedup figures (golden model, RTL beside it), real-tensor training traces, RTL check,
area."""
import json
import pathlib

from trainforge.errors import UsageError
from trainforge.outputs import write_json

REPORTS = pathlib.Path("build/reports/tensordash")


def _write_json(path, report):
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, report, indent=1)
    return str(path)


#: The options of ``speedup`` that only ``--rtl`` uses: destination -> (flag, default).
RTL_OPTIONS = {
    "simulator": ("--simulator", "verilator"),
    "rtl_figures": ("--rtl-figures", None),
    "rtl_sparsities": ("--rtl-sparsities", None),
    "rtl_samples": ("--rtl-samples", 8),
    "rtl_stream_rows": ("--rtl-stream-rows", 64),
    "rtl_seed": ("--rtl-seed", 0),
}


def _resolve_rtl_options(args):
    """Refuse the ``--rtl-*`` options (and ``--simulator``) without ``--rtl``, then fill in their defaults.

    They default to None in the parser so that an option given explicitly, even with its
    default value, is told apart from one left out.
    """
    from trainforge.commands.tensordash.rtl_speedup import FIGURES, SPARSITIES
    given = [flag for dest, (flag, _) in RTL_OPTIONS.items() if getattr(args, dest) is not None]
    if given and not args.rtl:
        raise UsageError(f"{', '.join(given)} only apply to the RTL points: add --rtl, or leave "
                         f"{'them' if len(given) > 1 else 'it'} out")
    defaults = {dest: default for dest, (_, default) in RTL_OPTIONS.items()}
    defaults.update(rtl_figures=list(FIGURES), rtl_sparsities=list(SPARSITIES))
    for dest, default in defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)


def _check_rtl_args(args):
    from trainforge.commands.tensordash import rtl
    if args.rtl_samples < 1 or args.rtl_stream_rows < 1:
        raise UsageError("--rtl-samples and --rtl-stream-rows must be >= 1")
    bad = [s for s in args.rtl_sparsities if not 0 <= s < 1]
    if bad:
        raise UsageError(f"--rtl-sparsities {bad[0]} is invalid; allowed: 0 <= sparsity < 1")
    rtl.require_simulator(args.simulator)


def _rtl_report(args, full_size):
    """Run the RTL points (:mod:`.rtl_speedup`), each beside the golden model on the same streams and at full size."""
    import sys

    from trainforge.commands.tensordash import rtl_speedup
    from trainforge.sim.tensordash import figures
    points = rtl_speedup.rtl_points(args.rtl_figures, tuple(args.rtl_sparsities))
    rtl_speedup.run_points(points, samples=args.rtl_samples, stream_rows=args.rtl_stream_rows, seed=args.rtl_seed,
                           simulator=args.simulator, progress=lambda line: print(line, file=sys.stderr, flush=True))
    for point in points:
        params = point["params"]
        rows = params["rows"] if point["block"] == "td_tile" else 1
        point["golden_full_size"] = figures.speedup(point["sparsity"], rows=rows, lanes=params["lanes"],
                                                    depth=params["depth"], model=point["model"], **full_size)
    return {"simulator": args.simulator, "samples": args.rtl_samples, "stream_rows": args.rtl_stream_rows,
            "seed": args.rtl_seed, "points": points, "all_agree": all(point["agree"] for point in points)}


def _print_rtl(rtl_report, full_size):
    def number(value):
        return "-" if value is None else f"{value:.3f}"

    print(f"RTL ({rtl_report['simulator']}) beside the golden model on the same streams:"
          f" {rtl_report['samples']} dot products of {rtl_report['stream_rows']} rows per point, seed"
          f" {rtl_report['seed']}; golden full size: {full_size['samples']} x {full_size['stream_rows']} rows")
    print(f"  {'figure':<16}{'series':<15}{'block':<22}{'sparsity':>9}{'golden':>8}{'RTL':>8}{'full':>8}"
          f"{'cycles golden/RTL':>19}{'agree':>7}{'ideal':>7}")
    for point in rtl_report["points"]:
        params = point["params"]
        shape = (f"{params['rows']}x{params['cols']}" if point["block"] == "td_tile" else "PE")
        block = f"{shape} L{params['lanes']} D{params['depth']}"
        rtl_cycles = "-" if point["rtl_cycles"] is None else point["rtl_cycles"]
        print(f"  {point['figure']:<16}{point['series']:<15}{block:<22}{point['sparsity']:>9.2f}"
              f"{number(point['golden_speedup']):>8}{number(point['rtl_speedup']):>8}"
              f"{number(point['golden_full_size']):>8}{str(point['golden_cycles']) + '/' + str(rtl_cycles):>19}"
              f"{'yes' if point['agree'] else 'NO':>7}{point['ideal']:>7.3f}")


def _speedup(args):
    from trainforge.sim.tensordash import figures
    if args.samples < 1 or args.stream_rows < 1:
        raise UsageError("--samples and --stream-rows must be >= 1")
    _resolve_rtl_options(args)
    if args.rtl:
        _check_rtl_args(args)
    full_size = {"samples": args.samples, "stream_rows": args.stream_rows}
    report = figures.all_figures(**full_size)
    if args.rtl:
        report["rtl"] = _rtl_report(args, full_size)
    out = pathlib.Path(args.out)
    report["plots"] = figures.plot(report, out)
    report["json"] = _write_json(out / "speedup.json", report)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for row in report["random_sparsity"]:
            paper = row["paper_tile"]
            print(f"sparsity {row['sparsity']:.4f}: PE {row['pe']:.3f}x  4x4 tile {row['tile_4x4']:.3f}x"
                  f"  ideal {row['ideal']:.3f}x" + (f"  paper {paper}x" if paper else ""))
        if args.rtl:
            _print_rtl(report["rtl"], full_size)
        print(f"wrote {report['json']} and {', '.join(report['plots'])} in {out}")
    if args.rtl and not report["rtl"]["all_agree"]:
        import sys
        for point in report["rtl"]["points"]:
            if not point["agree"]:
                print(f"RTL DISAGREES with the golden model: {point['figure']} {point['series']} {point['block']}"
                      f" {point['params']} sparsity {point['sparsity']}: cycles golden {point['golden_cycles']}"
                      f" RTL {point['rtl_cycles']}, values {'agree' if point['values_agree'] else 'differ'}"
                      + (f" ({point['error']})" if point["error"] else ""), file=sys.stderr)
        return 1
    return 0


def _check_training_args(args):
    if args.epochs < 1 or args.batch < 1:
        raise UsageError("--epochs and --batch must be >= 1")


def _training(args):
    from trainforge.sim.tensordash import training
    _check_training_args(args)
    report = training.training_report(epochs=args.epochs, batch=args.batch, seed=args.seed)
    out = pathlib.Path(args.out)
    report["plots"] = training.plot(report, out)
    report["json"] = _write_json(out / "training.json", report)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{report['network']}; 4x4 tile, 4 lanes, 4 deep; one traced batch of {args.batch} per epoch")
    print("Fig. 8 analogue (cycles summed over the epochs):")
    for row in report["by_layer"]:
        print(f"  {row['layer']:<6} {row['operation']}  targets {'/'.join(row['targeted'])}  sparsity"
              f" {row['sparsity']:.3f}  speedup {row['speedup']:.3f}x  ideal min(4, potential) {row['ideal']:.3f}x"
              f"  potential {row['potential']:.3f}x")
    print("  per operation: " + "  ".join(f"{op} {v:.3f}x" for op, v in report["by_operation"].items())
          + f"  overall {report['overall_speedup']:.3f}x  (paper: 1.95x average over its models)")
    print("Fig. 9 analogue (per epoch):")
    for row in report["by_epoch"]:
        print(f"  epoch {row['epoch']}: test accuracy {row['accuracy']:.3f}  speedup {row['speedup']:.3f}x  "
              + "  ".join(f"{op} {row[op]:.3f}x" for op in ("AxW", "GxW", "GxA")))
    print(f"wrote {report['json']} and {', '.join(report['plots'])} in {out}")
    return 0


def _rtl_check(args):
    from trainforge.commands.tensordash import rtl
    from trainforge.sim.tensordash import training
    _check_training_args(args)
    if args.samples < 1 or args.samples > args.batch:
        raise UsageError(f"--samples = {args.samples} is invalid; allowed: 1..{args.batch} (the traced batch)")
    if args.layer not in [name for name, _, _ in training.LAYERS]:
        raise UsageError(f"--layer = {args.layer!r} is unknown; known: {', '.join(n for n, _, _ in training.LAYERS)}")
    rtl.require_simulator(args.simulator)
    run = training.train_and_trace(epochs=args.epochs, batch=args.batch, seed=args.seed)
    operations = [op for op in ("AxW", "GxW", "GxA") if not (op == "GxW" and args.layer == "conv1")]
    rows = rtl.rtl_layer_check(run["traces"][-1], layer=args.layer, samples=args.samples,
                               simulator=args.simulator, operations=operations)
    report = {"epoch": args.epochs, "tile": "td_tile 4x4, 4 lanes, 4 deep, width 8", "rows": rows,
              "all_agree": all(r["cycles_agree"] and r["values_agree"] for r in rows)}
    path = _write_json(pathlib.Path(args.out) / f"rtl_check_{args.simulator}.json", report)
    if args.json:
        print(json.dumps({**report, "json": path}, indent=1))
        return 0 if report["all_agree"] else 1
    print(f"{args.layer} of the digits CNN after epoch {args.epochs}, {args.samples} sample(s), int8, {args.simulator}:")
    for r in rows:
        print(f"  {r['operation']} (targets {r['targeted']}, {r['stream_rows']} stream rows): dense {r['dense_cycles']}"
              f"  golden {r['golden_cycles']}  RTL {r['rtl_cycles']}  cycles {'agree' if r['cycles_agree'] else 'DIFFER'}"
              f"  values {'agree' if r['values_agree'] else 'DIFFER'}  speedup golden {r['golden_speedup']:.3f}x"
              f" RTL {r['rtl_speedup']:.3f}x")
    print(f"wrote {path}")
    return 0 if report["all_agree"] else 1


def _patterns(args):
    from trainforge.sim.tensordash import patterns
    if min(args.screen_samples, args.screen_rows, args.samples, args.stream_rows, args.finalists, args.keep) < 1:
        raise UsageError("--screen-samples, --screen-rows, --samples, --stream-rows, --finalists and --keep"
                         " must be >= 1")
    if args.epochs < 0 or args.refine_rounds < 0 or (args.max_sets is not None and args.max_sets < 1):
        raise UsageError("--epochs and --refine-rounds must be >= 0, --max-sets >= 1")
    bad = [s for s in args.sparsities if not 0 <= s < 1]
    if bad:
        raise UsageError(f"--sparsities {bad[0]} is invalid; allowed: 0 <= sparsity < 1")
    report = patterns.search_report(
        shapes=args.shapes, sparsities=tuple(args.sparsities), tile_rows=args.tile_rows,
        screen_samples=args.screen_samples, screen_rows=args.screen_rows, samples=args.samples,
        stream_rows=args.stream_rows, epochs=args.epochs, finalists=args.finalists,
        refine_rounds=args.refine_rounds, max_sets=args.max_sets, keep=args.keep, seed=args.seed)
    report["json"] = _write_json(pathlib.Path(args.out) / "patterns.json", report)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for line in patterns.report_lines(report):
        print(line)
    print(f"wrote {report['json']}")
    return 0


def _area(args):
    from trainforge.commands.tensordash import area
    if not 2 <= args.width <= 32 or not 2 <= args.acc_width <= 64:
        raise UsageError("--width must be in 2..32 and --acc-width in 2..64")
    if args.tile is not None and not (1 <= args.tile[0] <= 16 and 1 <= args.tile[1] <= 8):
        raise UsageError(f"--tile {args.tile[0]} {args.tile[1]} is invalid; allowed: rows 1..16, cols 1..8")
    report = area.area_overhead(lanes=args.lanes, width=args.width, acc_width=args.acc_width, mode=args.mode,
                                fpga=args.fpga, tile=args.tile)
    suffix = f"l{args.lanes}_w{args.width}_a{args.acc_width}_{args.mode}"
    path = _write_json(pathlib.Path(args.out) / f"area_{suffix}.json", report)
    if args.json:
        print(json.dumps({**report, "json": path}, indent=1))
        return 0
    synth = report["synth"]
    print(f"td_pe ({args.mode}) / dense_pe, {args.lanes} lanes, width {args.width}, acc {args.acc_width}:"
          f" Yosys cells {synth['td_pe_cells']} / {synth['dense_pe_cells']} = {synth['cell_ratio']:.2f}x"
          f" (flip-flops {synth['td_pe_flip_flops']} / {synth['dense_pe_flip_flops']})")
    if "tile" in report:
        tile = report["tile"]
        print(f"  td_tile {tile['rows']}x{tile['cols']} / {tile['rows'] * tile['cols']} dense_pe: cells"
              f" {tile['td_tile_cells']} / {tile['dense_pe_cells_times_pes']} = {tile['cell_ratio']:.2f}x")
    if "fpga" in report:
        fpga = report["fpga"]
        print(f"  ECP5: LUT4 {fpga['td_pe_lut4']} / {fpga['dense_pe_lut4']} = {fpga['lut4_ratio']:.2f}x,"
              f" FF {fpga['td_pe_ff_block']} / {fpga['dense_pe_ff_block']}, MULT18 {fpga['td_pe_mult18']} /"
              f" {fpga['dense_pe_mult18']}, Fmax {fpga['td_pe_fmax_mhz']} / {fpga['dense_pe_fmax_mhz']} MHz")
    print(f"  paper (Table IV, compute area with FP16 MACs): {report['paper_ratio']}x; wrote {path}")
    return 0


def _training_arguments(parser, epochs):
    parser.add_argument("--epochs", type=int, default=epochs, help=f"training epochs (default {epochs})")
    parser.add_argument("--batch", type=int, default=32, help="mini-batch size, also the traced batch (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="data split, initialisation and batch order (default 0)")
    parser.add_argument("--out", default=str(REPORTS), help=f"report folder (default {REPORTS})")
    parser.set_defaults(out_kind="dir")


def register(subparsers):
    from trainforge.commands.tensordash.rtl_speedup import FIGURES, SPARSITIES, SWEEP_SPARSITY
    parser = subparsers.add_parser("tensordash", help="TensorDash studies: speedup figures, training traces, RTL, area")
    commands = parser.add_subparsers(dest="tensordash_command", metavar="SUBCOMMAND", required=True)
    speedup = commands.add_parser("speedup", help="random sparsity, depth, rows and 16-lane sweeps, with plots")
    speedup.add_argument("--samples", type=int, default=64, help="streams per point (default 64)")
    speedup.add_argument("--stream-rows", type=int, default=512, help="rows per dot product (default 512)")
    speedup.add_argument("--out", default=str(REPORTS),
                         help=f"folder of speedup.json and the PNG plots (default {REPORTS})")
    speedup.set_defaults(out_kind="dir")
    speedup.add_argument("--json", action="store_true", help="print the whole report as JSON")
    speedup.add_argument("--rtl", action="store_true", help="REQUIRES THE SIMULATOR: also run short random streams"
                         " of each figure through the RTL and the golden model; exit 1 if they disagree")
    # the options below only apply with --rtl: default None, so that _speedup can refuse them without it
    speedup.add_argument("--simulator", choices=("verilator", "icarus"), default=None,
                         help="simulator of --rtl (default verilator; needs --rtl)")
    speedup.add_argument("--rtl-figures", nargs="+", choices=FIGURES, default=None, metavar="FIGURE",
                         help=f"figures with RTL points (default all: {' '.join(FIGURES)}; needs --rtl)")
    speedup.add_argument("--rtl-sparsities", nargs="+", type=float, default=None, metavar="S",
                         help="sparsities of the RTL points of random_sparsity and wide_pe"
                         f" (default {' '.join(map(str, SPARSITIES))}; the sweeps use {SWEEP_SPARSITY}; needs --rtl)")
    speedup.add_argument("--rtl-samples", type=int, default=None,
                         help="dot products per RTL point (default 8; needs --rtl)")
    speedup.add_argument("--rtl-stream-rows", type=int, default=None,
                         help="rows per RTL dot product (default 64; needs --rtl)")
    speedup.add_argument("--rtl-seed", type=int, default=None, help="seed of the RTL streams (default 0; needs --rtl)")
    speedup.set_defaults(func=_speedup)
    train = commands.add_parser("training", help="train a ReLU CNN on digits, speedup of the 3 operations per layer"
                                " and per epoch (Figs. 8 and 9 analogues)")
    _training_arguments(train, 8)
    train.add_argument("--json", action="store_true", help="print the whole report as JSON")
    train.set_defaults(func=_training)
    check = commands.add_parser("rtl-check", help="REQUIRES THE SIMULATOR: a traced layer's 3 operations through"
                                " the td_tile RTL, cycles and values against the golden layer model")
    _training_arguments(check, 2)
    check.add_argument("--layer", default="conv2", help="traced layer (default conv2)")
    check.add_argument("--samples", type=int, default=1, help="samples of the traced batch (default 1)")
    check.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                       help="simulator of the td_tile RTL (default verilator)")
    check.add_argument("--json", action="store_true", help="print the whole report as JSON")
    check.set_defaults(func=_rtl_check)
    search = commands.add_parser("patterns", help="search connectivity patterns (8 options) of the 4x4 and 16x3 PEs"
                                 " on random sparsity and the digits-CNN traces, against the paper's")
    search.add_argument("--shapes", nargs="+", choices=("4x4", "4x4-two-level", "16x3"),
                        default=["4x4", "16x3"],
                        help="PE shapes searched: lanes x depth, 4x4-two-level = 4x4 with a 2-level scheduler"
                             " (default 4x4 16x3)")
    search.add_argument("--sparsities", nargs="+", type=float, default=[0.3, 0.5, 0.62, 0.7, 0.9], metavar="S",
                        help="random workloads (default 0.3 0.5 0.62 0.7 0.9)")
    search.add_argument("--tile-rows", type=int, choices=(1, 4), default=4,
                        help="PE rows sharing a schedule: 4 (the paper's tile, default) or 1 (one PE)")
    search.add_argument("--screen-samples", type=int, default=16, help="streams per screening workload (default 16)")
    search.add_argument("--screen-rows", type=int, default=256, help="rows per screening stream (default 256)")
    search.add_argument("--samples", type=int, default=64, help="streams per final random workload (default 64)")
    search.add_argument("--stream-rows", type=int, default=512, help="rows per final stream (default 512)")
    search.add_argument("--epochs", type=int, default=4,
                        help="traced digits-CNN epochs in the final scores, 0 for none (default 4)")
    search.add_argument("--finalists", type=int, default=6, help="sets whose priority order is refined (default 6)")
    search.add_argument("--refine-rounds", type=int, default=2,
                        help="hill-climbing rounds over option swaps, 0 for none (default 2)")
    search.add_argument("--max-sets", type=int, default=None,
                        help="screen only the first N admissible sets of each shape (default all)")
    search.add_argument("--keep", type=int, default=20, help="screened patterns listed per shape (default 20)")
    search.add_argument("--seed", type=int, default=0,
                        help="screening streams (final streams: seed + 1000; digits training: seed); default 0")
    search.add_argument("--out", default=str(REPORTS), help=f"folder of patterns.json (default {REPORTS})")
    search.add_argument("--json", action="store_true", help="print the whole report as JSON")
    search.set_defaults(out_kind="dir")
    search.set_defaults(func=_patterns)
    area = commands.add_parser("area", help="synthesise td_pe and dense_pe of the same width: area ratio as JSON")
    area.add_argument("--lanes", type=int, default=4, help="multiplier lanes of both PEs (default 4)")
    area.add_argument("--width", type=int, default=8, help="operand width in bits, 2..32 (default 8)")
    area.add_argument("--acc-width", type=int, default=32, help="accumulator width in bits, 2..64 (default 32)")
    area.add_argument("--mode", choices=("both", "b_only"), default="both",
                      help="td_pe skipping: a pair is skipped when either operand is zero (both) or when B is"
                      " zero (b_only); default both")
    area.add_argument("--fpga", action="store_true", help="also place and route both on the ECP5 (slow)")
    area.add_argument("--tile", type=int, nargs=2, metavar=("ROWS", "COLS"),
                      help="also synthesise td_tile ROWS x COLS against ROWS*COLS dense PEs (slow)")
    area.add_argument("--out", default=str(REPORTS), help=f"report folder (default {REPORTS})")
    area.add_argument("--json", action="store_true", help="print the whole report as JSON")
    area.set_defaults(out_kind="dir")
    area.set_defaults(func=_area)
