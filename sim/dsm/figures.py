"""Reproductions of the paper's Figs. 11-15 (JSON + PNG under build/reports/dsm/)."""
import json
import pathlib

from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.executor import run_map
from trainforge.sim.dsm.explore import CATEGORIES, Optimizations, explore
from trainforge.sim.dsm.workload import BUILTINS

REPORT_DIR = pathlib.Path("build/reports/dsm")
STACK = ("DSM", "Hybrid", "Mem-Opt", "DySM/TP")
#: Numbers the paper states in its text (figures themselves are missing from the extraction).
PAPER = {
    "training_best_utilization": {"vgg16": 0.79, "resnet50": 0.41, "gnmt": 0.36},
    "training_optimization_gain": {"vgg16": 1.36, "resnet50": 2.6, "gnmt": 32.0},
    "vgg16_base_utilization_mb256": 0.57,
    "inference_gain_batch1": {"vgg16": 1.16, "resnet50": 3.6, "gnmt": 44.0},
    "gnmt_speedup_8_to_32_pf": 22.7,
}


def _optimizations(network, level):
    """Cumulative stack of Fig. 11: DySM for the CNNs, timestep pipelining for GNMT."""
    hybrid, memory, last = level >= 1, level >= 2, level >= 3
    if network == "gnmt":
        return Optimizations(hybrid, memory, False, last)
    return Optimizations(hybrid, memory, last, False)


def _training_point(item):
    network, n_mb, level, changes = item
    arch = default_architecture().with_changes(**changes)
    result = explore(BUILTINS[network](n_mb), arch, _optimizations(network, level))
    return {"network": network, "n_mb": n_mb, "level": level, "cycles": result.cycles,
            "utilization": result.utilization, "points": result.points, "seconds": result.seconds}


def _inference_point(item):
    network, n_mb, memory = item
    arch = default_architecture().with_changes(**{"system.chips_x": 1, "system.chips_y": 1})
    result = explore(BUILTINS[network](n_mb), arch, Optimizations(memory_reuse=memory), training=False)
    return {"network": network, "n_mb": n_mb, "memory_reuse": memory, "cycles": result.cycles,
            "utilization": result.utilization}


def training_sweep(networks, minibatches, executor="local", changes=None):
    """Fig. 11 a-c: speedup vs minibatch normalised to the smallest minibatch's DSM bar."""
    items = [(n, mb, level, dict(changes or {})) for n in networks for mb in minibatches for level in range(4)]
    points = run_map(_training_point, items, executor)
    summary = {}
    for network in networks:
        rows = [p for p in points if p["network"] == network]
        reference = next(p["cycles"] for p in rows if p["n_mb"] == minibatches[0] and p["level"] == 0)
        for p in rows:
            p["speedup"] = reference / p["cycles"] * p["n_mb"] / minibatches[0]
        best = max(p["utilization"] for p in rows)
        gain = max(next(q["cycles"] for q in rows if q["n_mb"] == mb and q["level"] == 0)
                   / next(q["cycles"] for q in rows if q["n_mb"] == mb and q["level"] == 3) for mb in minibatches)
        summary[network] = {"best_utilization": best, "optimization_gain": gain,
                            "paper_best_utilization": PAPER["training_best_utilization"][network],
                            "paper_optimization_gain": PAPER["training_optimization_gain"][network]}
    return {"figure": "fig11_training", "points": points, "summary": summary}


def inference_sweep(networks, batches, executor="local"):
    """Fig. 11 d-f: single 128-TFLOP chip, batch 1 to 16, without and with memory optimizations."""
    items = [(n, b, m) for n in networks for b in batches for m in (False, True)]
    points = run_map(_inference_point, items, executor)
    summary = {}
    for network in networks:
        base = next(p for p in points if p["network"] == network and p["n_mb"] == batches[0] and not p["memory_reuse"])
        opt = next(p for p in points if p["network"] == network and p["n_mb"] == batches[0] and p["memory_reuse"])
        summary[network] = {"gain_at_first_batch": base["cycles"] / opt["cycles"],
                            "paper_gain_batch1": PAPER["inference_gain_batch1"][network]}
    return {"figure": "fig11_inference", "points": points, "summary": summary}


def vgg16_layers(n_mb=512):
    """Figs. 12 and 13: per-layer configurations and utilization-loss categories of VGG16."""
    result = explore(BUILTINS["vgg16"](n_mb), default_architecture(), Optimizations(True, True, True, False))
    return {"figure": "fig12_13_vgg16_layers", "n_mb": n_mb, **result.to_dict()}


def scaling_sweep(networks, chip_counts, executor="local", n_mb=512):
    """Fig. 14: 16-256 chips (X fixed at 4), without and with all optimizations."""
    items = [(n, n_mb, level, {"system.chips_y": chips // 4}) for n in networks for chips in chip_counts for level in (0, 3)]
    points = run_map(_training_point, items, executor)
    for p, (_, _, _, changes) in zip(points, items):
        p["chips"] = changes["system.chips_y"] * 4
    return {"figure": "fig14_scaling", "points": points}


def scratchpad_sweep(networks, sizes_mb, executor="local", n_mb=512):
    """Fig. 15: training utilization against scratchpad size for no opt / Mem-Opt / +DySM."""
    items = [(n, n_mb, level, {"core.scratchpad_bytes": int(size * (1 << 20))})
             for n in networks for size in sizes_mb for level in (1, 2, 3)]
    points = run_map(_training_point, items, executor)
    for p, (_, _, _, changes) in zip(points, items):
        p["scratchpad_mb"] = changes["core.scratchpad_bytes"] / (1 << 20)
    return {"figure": "fig15_scratchpad", "points": points}


def write_report(report, out_dir=REPORT_DIR):
    """Write ``<figure>.json`` and ``<figure>.png``; returns the two paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = report["figure"]
    figure, axis = plt.subplots(figsize=(9, 4.5))
    points = report.get("points", [])
    if name == "fig11_training":
        networks = sorted({p["network"] for p in points})
        minibatches = sorted({p["n_mb"] for p in points})
        width = 0.8 / (len(networks) * 4)
        for i, network in enumerate(networks):
            for level in range(4):
                xs = [k + (i * 4 + level) * width for k in range(len(minibatches))]
                ys = [next(p["speedup"] for p in points if p["network"] == network and p["n_mb"] == mb and p["level"] == level)
                      for mb in minibatches]
                axis.bar(xs, ys, width, label=f"{network} {STACK[level]}")
        axis.set_xticks(range(len(minibatches)), [str(mb) for mb in minibatches])
        axis.set_xlabel("minibatch"), axis.set_ylabel(f"speedup vs N_mb={minibatches[0]} DSM")
    elif name == "fig11_inference":
        for network in sorted({p["network"] for p in points}):
            for memory in (False, True):
                rows = sorted((p for p in points if p["network"] == network and p["memory_reuse"] == memory), key=lambda p: p["n_mb"])
                axis.plot([p["n_mb"] for p in rows], [p["utilization"] for p in rows], marker="o",
                          label=f"{network} {'Mem-Opt+preload' if memory else 'DSM'}")
        axis.set_xlabel("batch"), axis.set_ylabel("utilization"), axis.set_yscale("log")
    elif name == "fig12_13_vgg16_layers":
        layers = report["layers"]
        bottom = [0.0] * len(layers)
        for category in CATEGORIES:
            values = []
            for layer in layers:
                total = sum(v["cycles"] for v in layer["passes"].values())
                values.append(sum(v["categories"][category] for v in layer["passes"].values()) / total)
            axis.bar(range(len(layers)), values, bottom=bottom, label=category)
            bottom = [b + v for b, v in zip(bottom, values)]
        axis.set_xticks(range(len(layers)), [f"{l['name']}\n{l['parallelism']}" for l in layers], rotation=90, fontsize=6)
        axis.set_ylabel("fraction of time")
    else:
        key = "chips" if name == "fig14_scaling" else "scratchpad_mb"
        for network in sorted({p["network"] for p in points}):
            for level in sorted({p["level"] for p in points}):
                rows = sorted((p for p in points if p["network"] == network and p["level"] == level), key=lambda p: p[key])
                axis.plot([p[key] for p in rows], [p["utilization"] for p in rows], marker="o", label=f"{network} {STACK[level]}")
        axis.set_xlabel(key), axis.set_ylabel("utilization")
    axis.legend(fontsize=6, ncol=2)
    figure.tight_layout()
    png = out_dir / f"{name}.png"
    figure.savefig(png, dpi=120)
    plt.close(figure)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(report, indent=1, default=float))
    return path, png
