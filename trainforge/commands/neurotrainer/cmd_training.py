"""``trainforge neurotrainer training``: Fig. 10 analogue, digits MLP and RNN in 32-bit fixed point per MAC rounding."""
import time

from trainforge.errors import UsageError

from trainforge.commands.neurotrainer.reports import REPORTS, int_list, save_report
from trainforge.outputs import save_figure

#: ``--quick``: a smoke run (the suite uses it), not a measurement.
QUICK = {"epochs": 1, "seeds": 1}


def _choices(text, option, allowed):
    values = [part.strip() for part in text.split(",") if part.strip()]
    bad = [value for value in values if value not in allowed]
    if bad or not values:
        raise UsageError(f"{option} = {text!r} is invalid; allowed: comma-separated {', '.join(allowed)}")
    return values


def _plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    networks = report["settings"]["networks"]
    figure, axes = plt.subplots(1, len(networks), figsize=(6 * len(networks), 4.2), squeeze=False)
    styles = {"float": "-", "truncate": ":", "nearest": "-.", "sr_full": "--", "sr_lo": "-"}
    bits_list = report["settings"]["frac_bits"]
    colours = {bits: colour for bits, colour in zip(bits_list, ("tab:blue", "tab:red", "tab:green", "tab:purple"))}
    for axis, network in zip(axes[0], networks):
        for row in report["results"]:
            if row["network"] != network:
                continue
            curves = np.array(row["curves"]) * 100
            epochs = np.arange(curves.shape[1])
            label = "float64" if row["frac_bits"] is None else f"Q{31 - row['frac_bits']}.{row['frac_bits']} {row['rounding']}"
            colour = "black" if row["frac_bits"] is None else colours[row["frac_bits"]]
            width = 2.2 if row["rounding"] == "sr_lo" else 1.3
            axis.plot(epochs, curves.mean(axis=0), styles[row["rounding"]], color=colour, linewidth=width, label=label)
            if curves.shape[0] > 1:
                axis.fill_between(epochs, curves.min(axis=0), curves.max(axis=0), color=colour, alpha=0.06)
        axis.set_title(f"{network.upper()} on digits (mean of {report['settings']['seeds']} seed(s), band = min..max)",
                       fontsize=9)
        axis.set_xlabel("epoch")
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.set_ylabel("test accuracy (%)")
        axis.set_ylim(0, 100)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="lower right")
    figure.suptitle("NeuroTrainer Fig. 10 analogue: test accuracy of training in Fixed 32/16 by MAC rounding "
                    "(paper: MNIST; ours: scikit-learn's digits)", fontsize=10)
    figure.text(0.01, 0.005, "The paper gives no accuracy numbers for Fig. 10, only that SR-LO loses no accuracy "
                "against SR and that truncation fails to train the RNN; hw/neurotrainer/README.md compares them.",
                fontsize=7)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    save_figure(figure, path, dpi=110)
    plt.close(figure)


def _training(args):
    from trainforge.sim.neurotrainer.fixed_training import LATE_EPOCHS, NETWORKS, ROUNDINGS, run_experiment
    frac_bits = int_list(args.frac_bits, "--frac-bits", 1, 30)
    roundings = _choices(args.roundings, "--roundings", ROUNDINGS)
    networks = _choices(args.networks, "--networks", tuple(NETWORKS))
    if args.quick and (args.epochs is not None or args.seeds is not None):
        given = [option for option, value in (("--epochs", args.epochs), ("--seeds", args.seeds)) if value is not None]
        raise UsageError(f"--quick sets {' and '.join(given)} itself ({QUICK}); give either --quick or {' '.join(given)}")
    epochs, seeds = ((QUICK["epochs"], QUICK["seeds"]) if args.quick
                     else (8 if args.epochs is None else args.epochs, 3 if args.seeds is None else args.seeds))
    if epochs < 1 or seeds < 1:
        raise UsageError(f"--epochs = {epochs} and --seeds = {seeds} must be at least 1")
    if not 1 <= args.lanes <= 64:
        raise UsageError(f"--lanes = {args.lanes} is invalid; allowed: integers in 1..64 (nt_mac's lanes range)")
    if not args.learning_rate > 0:
        raise UsageError(f"--learning-rate = {args.learning_rate} must be positive")
    started = time.monotonic()

    def progress(row):
        if not args.json:
            bits = "float64" if row["frac_bits"] is None else f"Q{31 - row['frac_bits']}.{row['frac_bits']}"
            print(f"  {row['network']:<4}{bits:>8} {row['rounding']:<9}{100 * row['final_accuracy_mean']:7.2f} %"
                  f" +- {100 * row['final_accuracy_std']:5.2f}   last epochs {100 * row['late_accuracy_mean']:6.2f} %"
                  f" +- {100 * row['late_accuracy_std']:5.2f}  ({time.monotonic() - started:5.0f} s)", flush=True)

    report = run_experiment(networks=networks, roundings=roundings, frac_bits=frac_bits, epochs=epochs,
                            seeds=seeds, learning_rate=args.learning_rate, lanes=args.lanes, progress=progress)
    report["settings"]["seconds"] = round(time.monotonic() - started, 1)
    path, plot = save_report(args, "training", report, _plot)
    if args.json:
        return 0
    print(f"test accuracy after epoch {epochs} and mean of the last {min(LATE_EPOCHS, epochs + 1)} evaluations,"
          f" {seeds} seed(s): mean +- std (ddof 0)")
    print(f"wrote {path} and {plot} in {report['settings']['seconds']} s")
    return 0


def add_commands(commands):
    """Add ``trainforge neurotrainer training``."""
    parser = commands.add_parser("training", help="Fig. 10 analogue: digits MLP and RNN trained through the MAC roundings")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs (default 8)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per configuration (init, batch order, RNG seed; default 3)")
    parser.add_argument("--frac-bits", default="16,8", help="comma-separated fraction bits F of the Q(31-F).F format")
    parser.add_argument("--roundings", default="float,truncate,sr_full,sr_lo",
                        help="comma-separated: float, truncate, nearest, sr_full, sr_lo")
    parser.add_argument("--networks", default="mlp,rnn", help="comma-separated: mlp, rnn")
    parser.add_argument("--learning-rate", type=float, default=0.25, help="SGD learning rate (per-sample mean loss)")
    parser.add_argument("--lanes", type=int, default=32, help="MAC lanes of the array all MACs run on")
    parser.add_argument("--quick", action="store_true", help="1 epoch, 1 seed (a smoke run)")
    parser.add_argument("--out", default=str(REPORTS), help="output directory")
    parser.set_defaults(out_kind="dir")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.set_defaults(func=_training)
