"""``trainforge caterpillar``: Table 2, GEMV utilization against n_r, and the training-method study.

* ``trainforge caterpillar table2`` - GFLOPS/W, utilization and area of the paper's three cases.
* ``trainforge caterpillar utilization`` - GEMV utilization against ``n_r``, bus and neighbour-link reduction.
* ``trainforge caterpillar study`` - train the networks by every method, then energy and time to accuracy.

``--json`` prints the result on stdout; every subcommand also writes its JSON
and a PNG under ``build/reports/caterpillar/``.
"""
import json
import pathlib

from trainforge.cli import UsageError
from trainforge.golden.caterpillar import core

from . import arch, training

REPORT_DIR = pathlib.Path("build/reports/caterpillar")

#: Table 2 of the paper: (network, configuration) -> method -> GFLOPS/W.
PAPER_TABLE2 = {
    ("500-500-500-10", "2x16-cores-4x4"): {"SGD": 177, "CP": 204, "MBGD": 195},
    ("2500-2000-1500-1000-500-10", "2x16-cores-4x4"): {"SGD": 98, "CP": 127, "MBGD": 187},
    ("2500-2000-1500-1000-500-10", "2x4-cores-16x16"): {"SGD": 185, "CP": 211, "MBGD": 195},
}
#: Section 4.3: utilization of the large network on the small array (fits -> does not fit).
PAPER_UTILIZATION = {"CP": (0.99, 0.75), "SGD": (0.81, 0.47)}
PAPER_AREA = {"2x16-cores-4x4": 103.2, "2x4-cores-16x16": 178.9}


def table2(batch=50, samples=1797):
    """Our Table 2 (and utilizations, areas) beside the paper's."""
    rows = []
    for (network, config_name), paper in PAPER_TABLE2.items():
        widths, config = arch.NETWORKS[network], arch.CONFIGS[config_name]
        for method, paper_value in paper.items():
            size = batch if method == "MBGD" else 1
            energy = arch.epoch_energy(widths, method, samples, config, size)
            timing = arch.epoch_cycles(widths, method, samples, config, size)
            rows.append({"network": network, "config": config_name, "fits": arch.fits(widths, config),
                         "method": method, "batch": size, "paper_gflops_per_w": paper_value,
                         "gflops_per_w": round(energy["gflops_per_w"], 1),
                         "gflops_per_w_2_per_mac": round(energy["gflops_per_w_2"], 1),
                         "deviation": round(energy["gflops_per_w"] / paper_value - 1, 3),
                         "utilization": round(timing["utilization"], 3)})
    areas = {name: {"ours_mm2": round(arch.area_mm2(config), 1), "paper_mm2": PAPER_AREA[name]}
             for name, config in arch.CONFIGS.items()}
    return {"rows": rows, "areas": areas, "paper_utilization_fit_to_nofit": PAPER_UTILIZATION,
            "memory_per_pe_words": {f"{net} on {cfg}": {
                "ours": round(arch.memory_per_pe(arch.NETWORKS[net], arch.CONFIGS[cfg])),
                "paper_formula_literal": round(arch.memory_per_pe(arch.NETWORKS[net], arch.CONFIGS[cfg], literal=True)),
                "capacity": arch.CONFIGS[cfg].local_words} for net, cfg in PAPER_TABLE2}}


def utilization(m=512, n=512, sizes=(2, 4, 8, 16)):
    """GEMV forward+backward utilization on one core against ``n_r``, bus vs tree, with and without overlap."""
    rows = []
    for n_r in sizes:
        for reduction in ("bus", "tree"):
            for overlap in (False, True):
                rows.append({"n_r": n_r, "reduction": reduction, "overlap": overlap,
                             "reduction_cycles": core.reduction_cycles(n_r, reduction),
                             "utilization": round(core.gemv_utilization(m, n, n_r, reduction, overlap,
                                                                        ("forward", "backward")), 4)})
    return {"m": m, "n": n, "rows": rows}


def study(networks, methods, batches, epochs, hidden_scale, targets, seed, idx=None):
    """Train, then energy and time to each target accuracy on the architecture."""
    x, labels, source = training.load_dataset(idx=idx, seed=seed)
    split = int(0.8 * len(x))
    results = {"dataset": source, "train_samples": split, "test_samples": len(x) - split, "runs": []}
    for network in networks:
        widths = arch.NETWORKS[network]
        scaled = (widths[0], *(max(1, round(w * hidden_scale)) for w in widths[1:-1]), widths[-1])
        config = arch.CONFIGS["2x16-cores-4x4" if network != "2500-2000-1500-1000-500-10" else "2x4-cores-16x16"]
        for method in methods:
            for batch in (batches if method in ("MBGD", "FA", "DFA") else (1,)):
                accuracy = training.train(scaled, method, x[:split], labels[:split], x[split:], labels[split:],
                                          epochs=epochs, batch=batch, seed=seed)
                energy = arch.epoch_energy(widths, method, split, config, batch)
                timing = arch.epoch_cycles(widths, method, split, config, batch)
                to_target = {}
                for target in targets:
                    reached = next((epoch + 1 for epoch, value in enumerate(accuracy) if value >= target), None)
                    to_target[str(target)] = None if reached is None else {
                        "epochs": reached, "energy_j": reached * energy["total_j"],
                        "fpu_j": reached * energy["fpu_j"], "memory_j": reached * energy["memory_j"],
                        "seconds": reached * timing["seconds"]}
                results["runs"].append({"network": network, "trained_widths": scaled, "config": config.name,
                                        "method": method, "batch": batch, "accuracy": accuracy,
                                        "epoch_energy_j": energy["total_j"], "epoch_seconds": timing["seconds"],
                                        "utilization": timing["utilization"], "to_accuracy": to_target})
    return results


def _write(name, result, plot):
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / f"{name}.json").write_text(json.dumps(result, indent=2))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure = plot(plt)
    figure.savefig(REPORT_DIR / f"{name}.png", dpi=120, bbox_inches="tight")
    plt.close(figure)


def _plot_table2(result):
    def plot(plt):
        figure, axis = plt.subplots(figsize=(8, 4))
        labels = [f"{row['method']}\n{'fits' if row['fits'] else 'no fit'}\n{row['config'][:8]}"
                  for row in result["rows"]]
        positions = range(len(labels))
        axis.bar([p - 0.2 for p in positions], [row["paper_gflops_per_w"] for row in result["rows"]], 0.4,
                 label="paper")
        axis.bar([p + 0.2 for p in positions], [row["gflops_per_w"] for row in result["rows"]], 0.4, label="ours")
        axis.set_xticks(list(positions), labels, fontsize=7)
        axis.set_ylabel("GFLOPS/W")
        axis.legend()
        return figure
    return plot


def _plot_utilization(result):
    def plot(plt):
        figure, axis = plt.subplots(figsize=(6, 4))
        for reduction in ("bus", "tree"):
            for overlap in (False, True):
                rows = [row for row in result["rows"] if row["reduction"] == reduction and row["overlap"] == overlap]
                axis.plot([row["n_r"] for row in rows], [row["utilization"] for row in rows], marker="o",
                          label=f"{reduction}{' + overlap' if overlap else ''}")
        axis.set_xlabel("n_r")
        axis.set_ylabel(f"GEMV utilization ({result['m']}x{result['n']})")
        axis.legend()
        return figure
    return plot


def _plot_study(result, targets):
    def plot(plt):
        networks = sorted({run["network"] for run in result["runs"]})
        figure, axes = plt.subplots(2, len(networks), figsize=(6 * len(networks), 8), squeeze=False)
        for column, network in enumerate(networks):
            runs = [run for run in result["runs"] if run["network"] == network]
            for row, key, unit in ((0, "energy_j", "energy to accuracy (J)"), (1, "seconds", "time to accuracy (s)")):
                axis = axes[row][column]
                for run in runs:
                    points = [(float(t), run["to_accuracy"][str(t)][key]) for t in targets
                              if run["to_accuracy"][str(t)] is not None]
                    if points:
                        axis.plot(*zip(*points), marker="o", label=f"{run['method']} b={run['batch']}")
                axis.set_xlabel("accuracy")
                axis.set_ylabel(unit)
                axis.set_yscale("log")
                axis.set_title(network, fontsize=9)
                axis.legend(fontsize=6)
        return figure
    return plot


def _finish(args, name, result, plot):
    _write(name, result, plot)
    print(json.dumps(result, indent=2) if args.json else f"wrote {REPORT_DIR / name}.json and .png")
    return 0


def table2_handler(args):
    if args.batch < 1:
        raise UsageError(f"--batch {args.batch} must be at least 1")
    result = table2(batch=args.batch)
    return _finish(args, "table2", result, _plot_table2(result))


def utilization_handler(args):
    if args.m < 1 or args.n < 1:
        raise UsageError("--m and --n must be at least 1")
    result = utilization(args.m, args.n)
    return _finish(args, "gemv_utilization", result, _plot_utilization(result))


def study_handler(args):
    unknown = [name for name in args.network if name not in arch.NETWORKS]
    if unknown:
        raise UsageError(f"unknown network {unknown[0]!r}; known: {', '.join(arch.NETWORKS)}")
    unknown = [name for name in args.method if name not in arch.METHODS]
    if unknown:
        raise UsageError(f"unknown method {unknown[0]!r}; known: {', '.join(arch.METHODS)}")
    if args.epochs < 1 or not 0 < args.hidden_scale <= 1 or any(b < 1 for b in args.batch):
        raise UsageError("--epochs and --batch must be at least 1, --hidden-scale in (0, 1]")
    idx = None
    if args.idx:
        if not all(pathlib.Path(path).exists() for path in args.idx):
            raise UsageError(f"--idx files not found: {args.idx}")
        idx = tuple(args.idx)
    targets = tuple(args.target)
    result = study(args.network, args.method, tuple(args.batch), args.epochs, args.hidden_scale, targets,
                   args.seed, idx)
    return _finish(args, "study", result, _plot_study(result, targets))


def register(subparsers):
    parser = subparsers.add_parser("caterpillar", help="CATERPILLAR: Table 2, GEMV utilization, training study")
    commands = parser.add_subparsers(dest="caterpillar_command", metavar="SUBCOMMAND", required=True)
    table = commands.add_parser("table2", help="GFLOPS/W and utilization of the paper's Table 2 cases")
    table.add_argument("--batch", type=int, default=50, help="MBGD minibatch size (default 50)")
    table.add_argument("--json", action="store_true")
    table.set_defaults(func=table2_handler)
    util = commands.add_parser("utilization", help="GEMV utilization against n_r, bus vs neighbour links")
    util.add_argument("--m", type=int, default=512)
    util.add_argument("--n", type=int, default=512)
    util.add_argument("--json", action="store_true")
    util.set_defaults(func=utilization_handler)
    run = commands.add_parser("study", help="train by every method; energy and time to accuracy")
    run.add_argument("--network", nargs="+", default=["500-500-500-10"])
    run.add_argument("--method", nargs="+", default=list(arch.METHODS))
    run.add_argument("--batch", nargs="+", type=int, default=[8, 50])
    run.add_argument("--epochs", type=int, default=5)
    run.add_argument("--hidden-scale", type=float, default=1.0,
                     help="scale the hidden widths for quick runs (the energy model keeps the full sizes)")
    run.add_argument("--target", nargs="+", type=float, default=[0.8, 0.85, 0.9])
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--idx", nargs=2, metavar=("IMAGES", "LABELS"), help="MNIST IDX files instead of the digits")
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=study_handler)
