"""Reproductions of the paper's Figs. 5 to 13, as JSON-ready dicts, and their plots.

Each ``figN`` function returns a dict with ``"ours"`` and, where the paper
gives numbers, ``"paper"``. Paper numbers come from the prose and from the
figure labels of the text extraction (garbled; the assignment of labels to
bars is reconstructed in ``PAPER_FIG8`` and explained in README.md).
"""
import numpy as np

from .builtins import BUILTIN_NETWORKS, builtin_network
from .comm import LayerTensors
from .config import ArrayConfig, TrainingSetup
from .network import Network
from .partition import enumerate_partitions, format_choices, strategy_choices, traffic_of
from .simulator import simulate_step

STRATEGIES = ("MP", "DP", "HyPar")

#: Fig. 8, GB per step: (MP, DP, HyPar). VGG-B..E labels are assigned by their DP value (= weights).
PAPER_FIG8 = {
    "SFC": (0.723, 16.9, 0.681), "SCONV": (0.480, 0.0121, 0.0121), "Lenet-c": (0.112, 0.0517, 0.0161),
    "Cifar-c": (0.206, 0.0174, 0.0135), "AlexNet": (13.0, 2.00, 0.289), "VGG-A": (50.1, 15.9, 1.47),
    "VGG-B": (134, 16.0, 1.47), "VGG-C": (157, 16.0, 1.58), "VGG-D": (157, 16.6, 2.13),
    "VGG-E": (180, 17.2, 2.76), "Gmean": (8.88, 1.83, 0.318),
}
#: Numbers the paper states in its prose (Sections 6.2 to 6.5).
PAPER_PROSE = {
    "fig6_hypar_gmean": 3.39, "fig6_sfc_hypar": 23.48, "fig6_sfc_mp": 22.19, "fig6_lenet_c_hypar": 3.05,
    "fig6_vgg_a_hypar": 4.97, "fig6_other_range": (1.23, 4.97),
    "fig7_hypar_gmean": 1.51, "fig7_sfc_hypar": 10.27, "fig7_sfc_mp": 9.96, "fig7_other_range": (1.03, 1.81),
    "fig9_peak": {"H1": "0011", "H4": "0011", "performance": 3.05},
    "fig10_peak": {"conv5_2": "1000", "fc1": "1111", "performance": 5.05},
    "fig10_hypar": {"conv5_2": "0001", "fc1": "1111", "performance": 4.97},
    "fig12_gmean": {"torus": 2.23, "htree": 3.39},
    "fig13": {"hypar_over_trick_performance_mean": 1.62, "hypar_over_trick_energy_mean": 1.22,
              "hypar_over_trick_performance_max": 2.40},
}


def geometric_mean(values):
    """Geometric mean of positive values."""
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=np.float64)))))


def _networks():
    return {name: build() for name, build in BUILTIN_NETWORKS.items()}


def fig5(setup, array):
    """Per-level, per-layer parallelism of HyPar for the ten networks."""
    return {"ours": {name: {"layers": network.names,
                            "levels": format_choices(strategy_choices("HyPar", network, setup, array.levels))}
                     for name, network in _networks().items()}}


def fig8(setup, array):
    """Communication per step, GB, for MP, DP and HyPar."""
    ours = {}
    for name, network in _networks().items():
        ours[name] = [float(traffic_of(network, setup, strategy_choices(strategy, network, setup,
                                                                        array.levels)).total_bytes / 1e9)
                      for strategy in STRATEGIES]
    ours["Gmean"] = [geometric_mean([row[index] for row in ours.values()]) for index in range(3)]
    return {"columns": list(STRATEGIES), "unit": "GB per step", "ours": ours,
            "paper": {name: list(values) for name, values in PAPER_FIG8.items()}}


def fig6_7(setup, array):
    """Performance and energy efficiency of MP, DP, HyPar (and the trick), normalised to DP."""
    strategies = ("MP", "DP", "HyPar", "Trick")
    performance, efficiency = {}, {}
    for name, network in _networks().items():
        results = {strategy: simulate_step(network, setup, strategy_choices(strategy, network, setup, array.levels),
                                           array) for strategy in strategies}
        performance[name] = [results["DP"].seconds / results[strategy].seconds for strategy in strategies]
        efficiency[name] = [results["DP"].energy_joules / results[strategy].energy_joules for strategy in strategies]
    for table in (performance, efficiency):
        table["Gmean"] = [geometric_mean([row[index] for row in table.values()]) for index in range(len(strategies))]
    return {"columns": list(strategies), "performance": performance, "energy_efficiency": efficiency,
            "paper": {key: value for key, value in PAPER_PROSE.items() if key.startswith(("fig6", "fig7"))}}


def _explore(network, setup, array, base, cells):
    """Simulated performance (vs DP) of every setting of the (level, layer) ``cells`` on top of ``base``."""
    dp_seconds = simulate_step(network, setup, strategy_choices("DP", network, setup, array.levels), array).seconds
    every = enumerate_partitions(1, len(cells)).reshape(-1, len(cells))
    points = []
    for setting in every:
        choices = base.copy()
        for (level, layer), bit in zip(cells, setting):
            choices[level, layer] = bit
        points.append((choices, dp_seconds / simulate_step(network, setup, choices, array).seconds))
    return points


def fig9(setup, array):
    """Lenet-c: H1 and H4 explored (H2, H3 fixed to HyPar's), plus the proxy over all 2^(4x4) partitions."""
    network = builtin_network("Lenet-c")
    hypar = strategy_choices("HyPar", network, setup, array.levels)
    cells = [(level, layer) for level in (0, array.levels - 1) for layer in range(len(network))]
    points = _explore(network, setup, array, hypar, cells)
    best_choices, best = max(points, key=lambda point: point[1])
    hypar_performance = next(value for choices, value in points if (choices == hypar).all())
    every = enumerate_partitions(len(network), array.levels)
    proxy = traffic_of(network, setup, every).total_bytes
    return {
        "ours": {
            "grid": [{"H1": format_choices(c)[0], "H4": format_choices(c)[-1], "performance": v} for c, v in points],
            "peak": {"H1": format_choices(best_choices)[0], "H4": format_choices(best_choices)[-1],
                     "performance": best},
            "hypar": {"levels": format_choices(hypar), "performance": hypar_performance},
            "full_enumeration_proxy": {
                "partitions": int(len(proxy)), "min_GB": float(proxy.min() / 1e9),
                "argmin_levels": format_choices(every[int(np.argmin(proxy))]),
                "hypar_GB": float(traffic_of(network, setup, hypar).total_bytes / 1e9)},
        },
        "paper": PAPER_PROSE["fig9_peak"],
    }


def fig10(setup, array):
    """VGG-A: conv5_2 and fc1 explored at every level, the rest fixed to HyPar's choice."""
    network = builtin_network("VGG-A")
    hypar = strategy_choices("HyPar", network, setup, array.levels)
    layers = [network.names.index("conv5_2"), network.names.index("fc1")]
    cells = [(level, layer) for layer in layers for level in range(array.levels)]
    points = _explore(network, setup, array, hypar, cells)

    def describe(choices, value):
        bits = np.asarray(choices)
        return {"conv5_2": "".join("1" if b else "0" for b in bits[:, layers[0]]),
                "fc1": "".join("1" if b else "0" for b in bits[:, layers[1]]), "performance": value}
    best_choices, best = max(points, key=lambda point: point[1])
    hypar_value = next(value for choices, value in points if (choices == hypar).all())
    return {"ours": {"grid": [describe(c, v) for c, v in points], "peak": describe(best_choices, best),
                     "hypar": describe(hypar, hypar_value)},
            "paper": {"peak": PAPER_PROSE["fig10_peak"], "hypar": PAPER_PROSE["fig10_hypar"]}}


def fig11(setup, array):
    """VGG-A from 1 to 64 accelerators: performance vs one accelerator, and traffic."""
    network = builtin_network("VGG-A")
    single = simulate_step(network, setup, np.zeros((0, len(network)), dtype=bool),
                           ArrayConfig(levels=0, topology=array.topology,
                                       link_bits_per_second=array.link_bits_per_second)).seconds
    rows = []
    for levels in range(7):
        scaled = ArrayConfig(levels=levels, topology=array.topology, link_bits_per_second=array.link_bits_per_second)
        row = {"accelerators": 2 ** levels}
        for strategy in ("DP", "HyPar"):
            result = simulate_step(network, setup, strategy_choices(strategy, network, setup, levels), scaled)
            row[strategy] = {"performance_gain": single / result.seconds,
                             "communication_GB": result.communication_bytes / 1e9}
        rows.append(row)
    return {"ours": rows, "paper": "HyPar gains until 32 accelerators; DP's gain falls beyond 8 (prose only)"}


def fig12(setup, array):
    """HyPar on H-tree and torus, normalised to DP on the H-tree."""
    htree = ArrayConfig(levels=array.levels, topology="htree", link_bits_per_second=array.link_bits_per_second)
    torus = ArrayConfig(levels=array.levels, topology="torus", link_bits_per_second=array.link_bits_per_second)
    ours = {}
    for name, network in _networks().items():
        hypar = strategy_choices("HyPar", network, setup, array.levels)
        dp_seconds = simulate_step(network, setup, strategy_choices("DP", network, setup, array.levels),
                                   htree).seconds
        ours[name] = {"torus": dp_seconds / simulate_step(network, setup, hypar, torus).seconds,
                      "htree": dp_seconds / simulate_step(network, setup, hypar, htree).seconds}
    ours["Gmean"] = {key: geometric_mean([row[key] for row in ours.values()]) for key in ("torus", "htree")}
    return {"ours": ours, "paper": {"Gmean": PAPER_PROSE["fig12_gmean"]}}


def fig13(setup, array):
    """HyPar against the trick on VGG-E's conv5_4 and fc3 alone, batch 32 and 4096, H = 2, 3, 4."""
    vgg_e = builtin_network("VGG-E")
    ours = []
    for layer_name in ("conv5_4", "fc3"):
        layer = vgg_e.layers[vgg_e.names.index(layer_name)]
        network = Network(f"VGG-E {layer_name}", (layer,))
        for batch in (32, 4096):
            batch_setup = TrainingSetup(batch=batch, bytes_per_element=setup.bytes_per_element)
            tensors = LayerTensors.of(network, batch_setup)
            for levels in (2, 3, 4):
                level_array = ArrayConfig(levels=levels, topology=array.topology,
                                          link_bits_per_second=array.link_bits_per_second)
                hypar = simulate_step(network, batch_setup, strategy_choices("HyPar", network, batch_setup, levels),
                                      level_array)
                trick = simulate_step(network, batch_setup, strategy_choices("Trick", network, batch_setup, levels),
                                      level_array)
                ours.append({"layer": layer_name, "batch": batch, "levels": levels,
                             "A_dW": float(tensors.weights[0]), "A_F_next": float(tensors.partial_sums[0]),
                             "performance": trick.seconds / hypar.seconds,
                             "energy_efficiency": trick.energy_joules / hypar.energy_joules})
    summary = {"performance_mean": geometric_mean([row["performance"] for row in ours]),
               "energy_mean": geometric_mean([row["energy_efficiency"] for row in ours]),
               "performance_max": max(row["performance"] for row in ours)}
    return {"ours": ours, "ours_summary": summary, "paper": PAPER_PROSE["fig13"]}


#: Figure name -> builder(setup, array).
FIGURES = {"fig5": fig5, "fig6_7": fig6_7, "fig8": fig8, "fig9": fig9, "fig10": fig10, "fig11": fig11,
           "fig12": fig12, "fig13": fig13}


def plot(name, data, path):
    """Write the PNG of figure ``name`` from its data dict to ``path`` (Agg backend)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(10, 4.5))
    if name == "fig5":
        maps = data["ours"]
        width = max(len(entry["layers"]) for entry in maps.values())
        grid = np.full((len(maps) * 5, width), np.nan)
        for row, entry in enumerate(maps.values()):
            for level, bits in enumerate(entry["levels"]):
                grid[row * 5 + level, :len(bits)] = [int(bit) for bit in bits]
        axis.imshow(grid, aspect="auto", cmap="coolwarm", interpolation="nearest")
        axis.set_yticks([row * 5 + 1.5 for row in range(len(maps))], list(maps))
        axis.set_xlabel("weighted layer (blue dp, red mp; rows H1..H4 per network)")
    elif name in ("fig8", "fig6_7", "fig12"):
        if name == "fig8":
            tables = [("ours", data["ours"], data["columns"]),
                      ("paper", data["paper"], [f"paper {c}" for c in data["columns"]])]
            axis.set_ylabel("GB per step")
        elif name == "fig6_7":
            tables = [("perf", data["performance"], [f"perf {c}" for c in data["columns"]]),
                      ("energy", data["energy_efficiency"], [f"energy {c}" for c in data["columns"]])]
            axis.set_ylabel("normalised to DP")
        else:
            tables = [("ours", {k: [v["torus"], v["htree"]] for k, v in data["ours"].items()}, ["torus", "H tree"])]
            axis.set_ylabel("performance vs DP (H tree)")
        names = list(tables[0][1])
        series = [(label, [table[n][i] for n in names]) for _, table, labels in tables for i, label in
                  enumerate(labels)]
        step = 0.8 / len(series)
        for index, (label, values) in enumerate(series):
            axis.bar(np.arange(len(names)) + index * step, values, step, label=label)
        axis.set_xticks(np.arange(len(names)) + 0.4 - step / 2, names, rotation=30)
        axis.set_yscale("log")
        axis.legend(fontsize=7, ncol=2)
    elif name in ("fig9", "fig10"):
        grid = data["ours"]["grid"]
        keys = ("H1", "H4") if name == "fig9" else ("conv5_2", "fc1")
        rows = sorted({entry[keys[0]] for entry in grid})
        columns = sorted({entry[keys[1]] for entry in grid})
        image = np.zeros((len(rows), len(columns)))
        for entry in grid:
            image[rows.index(entry[keys[0]]), columns.index(entry[keys[1]])] = entry["performance"]
        shown = axis.imshow(image, cmap="viridis")
        figure.colorbar(shown, label="performance vs DP")
        axis.set_yticks(range(len(rows)), rows, fontsize=6)
        axis.set_xticks(range(len(columns)), columns, fontsize=6, rotation=90)
        axis.set_ylabel(keys[0])
        axis.set_xlabel(keys[1])
    elif name == "fig11":
        counts = [row["accelerators"] for row in data["ours"]]
        for strategy in ("DP", "HyPar"):
            axis.plot(counts, [row[strategy]["performance_gain"] for row in data["ours"]], "o-",
                      label=f"{strategy} gain")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("accelerators")
        axis.set_ylabel("gain vs one accelerator")
        twin = axis.twinx()
        for strategy in ("DP", "HyPar"):
            twin.plot(counts, [row[strategy]["communication_GB"] for row in data["ours"]], "x--",
                      label=f"{strategy} GB")
        twin.set_yscale("log")
        twin.set_ylabel("GB per step")
        axis.legend(loc="upper left")
        twin.legend(loc="upper right")
    elif name == "fig13":
        labels = [f"{r['layer']} b{r['batch']} h{r['levels']}" for r in data["ours"]]
        axis.bar(np.arange(len(labels)) - 0.2, [r["performance"] for r in data["ours"]], 0.4, label="performance")
        axis.bar(np.arange(len(labels)) + 0.2, [r["energy_efficiency"] for r in data["ours"]], 0.4, label="energy")
        axis.set_xticks(range(len(labels)), labels, rotation=45, fontsize=7)
        axis.set_ylabel("HyPar / trick")
        axis.legend()
    axis.set_title(f"HyPar {name} (ours)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
