"""``trainforge neurotrainer area``: Table 1, the MAC variants' area against the plain fixed MAC."""

from trainforge.errors import UsageError
from trainforge.hw.neurotrainer.mac import NTMAC
from trainforge.errors import ParameterError

from trainforge.commands.neurotrainer.reports import REPORTS, save_report

def _area(args):
    from trainforge.commands.neurotrainer.area import mac_area
    try:
        NTMAC.PARAMS.resolve(lanes=args.lanes)
    except ParameterError as error:
        raise UsageError(f"--lanes: {error}") from None
    report = mac_area(lanes=args.lanes, fpga=args.fpga)
    path, = save_report(args, f"area_l{args.lanes}{'_fpga' if args.fpga else ''}", report)
    if args.json:
        return 0
    print(f"nt_mac, {args.lanes} lane(s), ratios against truncate (plain Fixed 32/16):")
    header = f"{'rounding':<10}{'cells':>8}{'ratio':>8}{'paper':>8}"
    if args.fpga:
        header += f"{'LUT4':>7}{'ratio':>7}{'FF':>6}{'MULT18':>8}{'Fmax':>8}"
    print(header)
    for row in report["variants"]:
        paper = f"{row['paper_ratio']:.2f}" if "paper_ratio" in row else "-"
        line = f"{row['rounding']:<10}{row['cells']:>8}{row['cell_ratio']:>8.2f}{paper:>8}"
        if args.fpga:
            line += (f"{row['lut4']:>7}{row['lut4_ratio']:>7.2f}{row['ff_block']:>6}{row['mult18']:>8}"
                     f"{row['fmax_mhz'] or 0:>8.1f}")
        print(line)
    print(f"wrote {path}")
    return 0


def add_commands(commands):
    """Add ``trainforge neurotrainer area``."""
    area = commands.add_parser("area", help="Table 1: synthesis (and ECP5) area of the MAC rounding variants")
    area.add_argument("--lanes", type=int, default=1, help="MAC lanes per variant (nt_mac's lanes range)")
    area.add_argument("--fpga", action="store_true", help="also place and route on the ULX3S ECP5-85F")
    area.add_argument("--out", default=str(REPORTS), help="output directory")
    area.set_defaults(out_kind="dir")
    area.add_argument("--json", action="store_true", help="print the JSON report")
    area.set_defaults(func=_area)
