"""``trainforge neurotrainer ...``: reports of the NeuroTrainer family (LUT interpolation error)."""
import importlib
import pkgutil

from trainforge.errors import UsageError

from trainforge.commands.neurotrainer.reports import REPORTS, int_list, save_report

def _lut_error(args):
    from trainforge.golden.neurotrainer.lut import FUNCTIONS, interpolation_error
    sizes = int_list(args.table_bits, "--table-bits", 1, 12)
    if not (0 <= args.frac_bits <= 15 and 0 <= args.out_frac_bits <= 15):
        raise UsageError("--frac-bits and --out-frac-bits must be in 0..15")
    rows = [interpolation_error(function, bits, args.frac_bits, args.out_frac_bits)
            for function in FUNCTIONS for bits in sizes]
    report = {"frac_bits": args.frac_bits, "out_frac_bits": args.out_frac_bits,
              "reference": "numpy float64 of the same function at the same 16-bit inputs", "rows": rows}
    path, = save_report(args, "lut_error", report)
    if args.json:
        return 0
    print(f"LUT error against numpy, input Q.{args.frac_bits}, output Q.{args.out_frac_bits} (LSB = 2^-{args.out_frac_bits})")
    print(f"{'function':<13}{'entries':>8}{'max LSB':>10}{'rms LSB':>10}{'usage max':>11}{'usage rms':>11}")
    for row in rows:
        print(f"{row['function']:<13}{row['entries']:>8}{row['max_error_lsb']:>10.2f}{row['rms_error_lsb']:>10.3f}"
              f"{row['usage_max_error_lsb']:>11.2f}{row['usage_rms_error_lsb']:>11.3f}")
    print(f"wrote {path}")
    return 0


def register(subparsers):
    """Add ``trainforge neurotrainer`` and its subcommands."""
    parser = subparsers.add_parser("neurotrainer", help="NeuroTrainer family reports")
    commands = parser.add_subparsers(dest="neurotrainer_command", required=True)
    lut = commands.add_parser("lut-error", help="interpolation error of the f(x)/f'(x) LUTs against numpy")
    lut.add_argument("--table-bits", default="4,6,8,10", help="comma-separated log2 segment counts (1..12)")
    lut.add_argument("--frac-bits", type=int, default=12, help="input fraction bits")
    lut.add_argument("--out-frac-bits", type=int, default=12, help="output fraction bits")
    lut.add_argument("--out", default=str(REPORTS), help="output directory")
    lut.set_defaults(out_kind="dir")
    lut.add_argument("--json", action="store_true", help="print the JSON report")
    lut.set_defaults(func=_lut_error)
    for module in _command_modules():
        module.add_commands(commands)


def _command_modules():
    """The modules ``trainforge/commands/neurotrainer/cmd_*.py``; each adds its subcommands with ``add_commands(commands)``."""
    package = importlib.import_module(__package__)
    names = sorted(info.name for info in pkgutil.iter_modules(package.__path__) if info.name.startswith("cmd_"))
    return [importlib.import_module(f"{__package__}.{name}") for name in names]
