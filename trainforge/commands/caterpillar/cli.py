"""``trainforge caterpillar``: Table 2, GEMV utilization against n_r, and the training-method study.

* ``trainforge caterpillar table2`` - GFLOPS/W, utilization and area of the paper's three cases, and
  Fig. 10 (GFLOPS/mm^2, ``fig10`` in the JSON and ``fig10.png``).
* ``trainforge caterpillar utilization`` - GEMV utilization against ``n_r``, bus and neighbour-link reduction.
* ``trainforge caterpillar study`` - train the networks by every method over several seeds, then energy and
  time to accuracy (Figs. 5-9 of the paper, mean and spread) beside the paper's Section 4.3 findings, and
  which of the paper's orderings hold in how many seeds.
* ``trainforge caterpillar rates`` - the learning-rate sweep behind :data:`training.LEARNING_RATES`.

``--json`` prints the result on stdout; every subcommand also writes its JSON
and a PNG under ``build/reports/caterpillar/``.
"""
import json
import pathlib

import numpy as np

from trainforge.errors import ConfigError, UsageError
from trainforge.golden.caterpillar import core
from trainforge.outputs import save_figure, write_json
from trainforge.sim.caterpillar import arch, curves, training
from trainforge.progress import progress

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
#: Utilizations the paper's text states, the only way to put numbers on its Fig. 10 (whose bar heights
#: the text does not give): (network, configuration, method) -> (utilization, where it is stated).
PAPER_STATED_UTILIZATION = {
    ("500-500-500-10", "2x16-cores-4x4", "SGD"): (0.80, "abstract: over 80% for SGD on small networks"),
    ("2500-2000-1500-1000-500-10", "2x4-cores-16x16", "CP"): (0.99, "Sec. 4.3: drops from 99% (fits)"),
    ("2500-2000-1500-1000-500-10", "2x4-cores-16x16", "SGD"): (0.81, "Sec. 4.3: drops from 81% (fits)"),
    ("2500-2000-1500-1000-500-10", "2x16-cores-4x4", "CP"): (0.75, "Sec. 4.3: to 75% (no fit)"),
    ("2500-2000-1500-1000-500-10", "2x16-cores-4x4", "SGD"): (0.47, "Sec. 4.3: to 47% (no fit)"),
    ("2500-2000-1500-1000-500-10", "2x16-cores-4x4", "MBGD"): (0.94, "Sec. 4.3: MBGD 187 GFLOPS/W at 94% (no fit)"),
}
#: The methods of our Fig. 10.
FIG10_METHODS = ("SGD", "CP", "MBGD", "DFA")


def table2(batch=50, samples=1797):
    """Our Table 2 (and utilizations, areas) beside the paper's.

    GFLOPS/W from the counted events of the microprograms (:func:`arch.epoch_energy`), their energy per
    useful MAC by event kind, the paper's energy per MAC (1000 / its GFLOPS/W, pJ), the counterfactual
    chain (:data:`arch.COUNTERFACTUALS`, cumulative) and the former Section 3.4 count model.
    """
    rows = []
    for (network, config_name), paper in PAPER_TABLE2.items():
        widths, config = arch.NETWORKS[network], arch.CONFIGS[config_name]
        for method, paper_value in paper.items():
            size = batch if method == "MBGD" else 1
            energy = arch.epoch_energy(widths, method, samples, config, size)
            timing = arch.epoch_cycles(widths, method, samples, config, size)
            chain = []
            for upto, (name, why) in enumerate(arch.COUNTERFACTUALS, start=1):
                value = arch.counterfactual_energy(widths, method, samples, config, size, upto)["gflops_per_w"]
                chain.append({"without": name, "why": why, "gflops_per_w": round(value, 1),
                              "deviation": round(value / paper_value - 1, 3)})
            section34 = arch.section34_energy(widths, method, samples, config, size)["gflops_per_w"]
            hypotheses = {}
            if arch.fits(widths, config) and size == 1:
                hypotheses["update_write"] = arch.section34_energy(
                    widths, method, samples, config, size, update_write=True)["gflops_per_w"]
            if not arch.fits(widths, config) and size == 1:
                hypotheses["partly_resident"] = arch.section34_energy(
                    widths, method, samples, config, size, partly_resident=True,
                    offcore_when_no_fit=True)["gflops_per_w"]
            if size > 1:
                hypotheses["gradient_in_sram"] = arch.section34_energy(
                    widths, method, samples, config, size, gradient_in_sram=True,
                    offcore_when_no_fit=True)["gflops_per_w"]
            rows.append({"network": network, "config": config_name, "fits": arch.fits(widths, config),
                         "method": method, "batch": size, "paper_gflops_per_w": paper_value,
                         "gflops_per_w": round(energy["gflops_per_w"], 1),
                         "gflops_per_w_2_per_mac": round(energy["gflops_per_w_2"], 1),
                         "deviation": round(energy["gflops_per_w"] / paper_value - 1, 3),
                         "utilization": round(timing["utilization"], 3),
                         "pj_per_useful_mac": {event: round(value, 3) for event, value in energy["pj_per_mac"].items()},
                         "paper_pj_per_mac": round(1e3 / paper_value, 3),
                         "events_per_epoch": energy["events"],
                         "counterfactuals": chain,
                         "section34_gflops_per_w": round(section34, 1),
                         "section34_hypotheses": {name: {"gflops_per_w": round(value, 1),
                                                         "deviation": round(value / paper_value - 1, 3)}
                                                  for name, value in hypotheses.items()}})
    areas = {name: {"ours_mm2": round(arch.area_mm2(config), 1), "paper_mm2": PAPER_AREA[name]}
             for name, config in arch.CONFIGS.items()}
    return {"rows": rows, "areas": areas, "paper_utilization_fit_to_nofit": PAPER_UTILIZATION,
            "fig10": fig10(batch, samples),
            "memory_per_pe_words": {f"{net} on {cfg}": {
                "ours": round(arch.memory_per_pe(arch.NETWORKS[net], arch.CONFIGS[cfg])),
                "paper_formula_literal": round(arch.memory_per_pe(arch.NETWORKS[net], arch.CONFIGS[cfg], literal=True)),
                "capacity": arch.CONFIGS[cfg].local_words} for net, cfg in PAPER_TABLE2}}


def fig10(batch=50, samples=1797):
    """Fig. 10: GFLOPS/mm^2 of SGD, CP, MBGD and DFA on every network and array of the study.

    Ours: our utilization (:func:`arch.epoch_cycles`) x PEs x 1 GHz over the area
    from Table 1's components (:func:`arch.area_mm2`), and over the paper's
    stated area. The paper's figure gives no numbers in its text; where its text
    states a utilization (:data:`PAPER_STATED_UTILIZATION`), the paper's value is
    that utilization x PEs x 1 GHz over its stated area. One operation per MAC
    (Table 2's unit); ``*_2_per_mac`` count 2 FLOPs.
    """
    rows = []
    for network, configs in STUDY_CONFIGS.items():
        widths = arch.NETWORKS[network]
        for config_name in configs:
            config = arch.CONFIGS[config_name]
            for method in FIG10_METHODS:
                size = batch if method == "MBGD" else 1
                timing = arch.epoch_cycles(widths, method, samples, config, size)
                ours = arch.gflops_per_mm2(timing["utilization"], config)
                stated = PAPER_STATED_UTILIZATION.get((network, config_name, method))
                paper = None if stated is None else arch.gflops_per_mm2(stated[0], config, PAPER_AREA[config_name])
                rows.append({
                    "network": network, "config": config_name, "fits": arch.fits(widths, config), "method": method,
                    "batch": size, "utilization": round(timing["utilization"], 3),
                    "gflops_per_mm2": round(ours, 3), "gflops_per_mm2_2_per_mac": round(2 * ours, 3),
                    "gflops_per_mm2_paper_area": round(arch.gflops_per_mm2(timing["utilization"], config,
                                                                           PAPER_AREA[config_name]), 3),
                    "paper_utilization": None if stated is None else stated[0],
                    "paper_utilization_source": None if stated is None else stated[1],
                    "paper_gflops_per_mm2": None if paper is None else round(paper, 3)})
    return {"rows": rows, "frequency_hz": 1e9,
            "note": "the paper's Fig. 10 bar heights are not in its text: 'paper' is the utilization its text "
                    "states x PEs x 1 GHz / its stated area, where it states one"}


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


#: Which array each network is priced on: the small networks fit on 2x16 cores of 4x4 PEs; the large
#: one is priced there (it does not fit: Fig. 7) and on 2x4 cores of 16x16 PEs (it fits: Fig. 8).
STUDY_CONFIGS = {
    "500-500-500-10": ("2x16-cores-4x4",),
    "500x4-10": ("2x16-cores-4x4",),
    "500x5-10": ("2x16-cores-4x4",),
    "2500-2000-1500-1000-500-10": ("2x16-cores-4x4", "2x4-cores-16x16"),
}
#: The paper's energy figures: (figure, network, configuration).
ENERGY_FIGURES = (
    ("Fig. 6", "500-500-500-10", "2x16-cores-4x4"),
    ("Fig. 7", "2500-2000-1500-1000-500-10", "2x16-cores-4x4"),
    ("Fig. 8", "2500-2000-1500-1000-500-10", "2x4-cores-16x16"),
)
#: Section 4.3 in words, the findings our study is compared with.
PAPER_FINDINGS = {
    "fig6_energy_at_90": "500-500-500-10 (fits): at 90% SGD needs 0.7x and CP 0.3x the energy of MBGD with "
                         "large minibatches",
    "fig6_breakdown": "minibatch energy dominated by the FPU; SGD memory energy 1.5x its FPU energy; CP about 1:1",
    "fig7_no_fit": "large network, no fit: minibatch methods need less energy than SGD and CP",
    "fig8_fits": "large network, fits: MBGD b=50 below SGD, CP lowest of all",
    "dfa": "DFA: fewer FPU operations per epoch but more energy to an accuracy (slower convergence)",
    "fig9_time": "CP reaches an accuracy faster than SGD; with no fit, minibatch methods are the fastest",
}


def _run_plan(methods, batches, feedback_batches):
    """(method, batch) pairs of a study: SGD and CP per sample, MBGD per ``batches``, FA/DFA per ``feedback_batches``."""
    plan = []
    for method in methods:
        sizes = batches if method == "MBGD" else feedback_batches if method in ("FA", "DFA") else (1,)
        plan.extend((method, size) for size in sizes)
    return plan


def _scaled_widths(widths, hidden_scale):
    return (widths[0], *(max(1, round(w * hidden_scale)) for w in widths[1:-1]), widths[-1])


def _to_accuracy(samples, samples_per_epoch, energy, timing):
    """Energy and time of ``samples`` consumed training samples (a crossing), or None."""
    if samples is None:
        return None
    epochs = samples / samples_per_epoch
    return {"samples": samples, "epochs": epochs, "energy_j": epochs * energy["total_j"],
            "fpu_j": epochs * energy["fpu_j"], "memory_j": epochs * energy["memory_j"],
            "seconds": epochs * timing["seconds"]}


#: The figures of a study summarised over seeds.
_SPREAD_KEYS = ("samples", "epochs", "energy_j", "fpu_j", "memory_j", "seconds")


def _over_seeds(per_seed):
    """Mean and spread of the per-seed crossings of one target; None unless every seed reaches it."""
    if any(reached is None for reached in per_seed):
        return None
    summary = {}
    for key in _SPREAD_KEYS:
        stats = curves.spread([reached[key] for reached in per_seed])
        summary[key] = round(stats["mean"], 9)
        summary[f"{key}_std"] = round(stats["std"], 9)
        summary[f"{key}_min"] = round(stats["min"], 9)
        summary[f"{key}_max"] = round(stats["max"], 9)
    return summary


def _study_configs(network):
    """The configurations ``network`` is priced on: :data:`STUDY_CONFIGS`, every configuration for a network file."""
    return STUDY_CONFIGS.get(network, tuple(arch.CONFIGS))


def network_widths(names):
    """``{name: widths}`` of built-in network names and network files (:mod:`trainforge.spec.network`).

    A file must describe a chain of fc layers from the 784 pixels of an image to the 10 classes.

    Raises
    ------
    trainforge.errors.UsageError
        For a name that is neither a built-in nor a file.
    trainforge.errors.ConfigError
        For a bad file, or a network CATERPILLAR cannot train (one line naming the file and the field).
    """
    from trainforge.spec import network as network_format

    result = {}
    for name in names:
        if name in arch.NETWORKS:
            result[name] = arch.NETWORKS[name]
            continue
        path = pathlib.Path(name)
        if not path.exists() and path.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise UsageError(f"unknown network {name!r}; known: {', '.join(arch.NETWORKS)}, or a .json/.yaml "
                             "network file")
        description = network_format.load(path)
        widths = arch.widths_from_network(description, name)
        last = len(description.layers) - 1
        for index, field, expected, got in ((0, "in_channels", 784, widths[0]),
                                            (last, "out_channels", 10, widths[-1])):
            if got != expected:
                raise ConfigError(f"{name}: layers[{index}].{field}: expected {expected} (the study trains on "
                                  f"28x28 images of 10 classes), got {got}")
        result[name] = widths
    return result


def study(networks, plan, epochs, hidden_scale, targets, seeds, evaluations_per_epoch=4, idx=None, widths=None):
    """Train every (method, batch) of ``plan`` on every network with every seed, then price it.

    ``seeds`` is a list of seeds (an int is one seed); the run of the ``k``-th
    seed holds out fold ``k % 5`` of the data and is evaluated on all of it
    (:func:`curves.fold_split`). ``widths`` maps a network name to its layer
    widths (default :data:`arch.NETWORKS`; see :func:`network_widths` for
    network files).

    Energy and time to an accuracy: the consumed samples at the crossing of the
    smoothed accuracy curve (:func:`curves.crossing`) in epochs, times one
    epoch's energy and time on the array (:func:`arch.epoch_energy`,
    :func:`arch.epoch_cycles`) of the full-size network even when the trained
    one is scaled down by ``hidden_scale``; per seed, then the mean and spread
    over the seeds (None for a target that a seed does not reach; the count of
    seeds that do is ``reached_seeds``).
    """
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    x, labels, source = training.load_dataset(idx=idx)
    splits = [curves.fold_split(len(x), index) for index in range(len(seeds))]
    results = {"dataset": source, "train_samples": len(splits[0][0]), "test_samples": len(splits[0][1]),
               "epochs": epochs, "hidden_scale": hidden_scale, "seed": seeds[0], "seeds": seeds,
               "folds": curves.FOLDS, "held_out": "run k holds out fold k % 5 of a fixed shuffle, evaluated whole",
               "smoothing": f"centred moving average over {curves.SMOOTHING_WINDOW} evaluations; crossing "
                            "interpolated linearly between evaluations",
               "evaluations_per_epoch": evaluations_per_epoch, "targets": list(targets), "runs": []}
    known = widths or arch.NETWORKS
    for network in networks:
        widths = known[network]
        scaled = _scaled_widths(widths, hidden_scale)
        for method, batch in progress(list(plan), f"study {network}", unit="run"):
            per_seed = []
            for seed, (train, test) in zip(seeds, splits):
                curve = training.train(scaled, method, x[train], labels[train], x[test], labels[test],
                                       epochs=epochs, batch=batch, seed=seed,
                                       evaluations_per_epoch=evaluations_per_epoch)
                per_seed.append((curve, len(train)))
            accuracy = np.array([curve["accuracy"] for curve, _ in per_seed])
            priced = {}
            for config_name in _study_configs(network):
                config = arch.CONFIGS[config_name]
                reached_by_target = {}
                for target in targets:
                    reached = []
                    for curve, count in per_seed:
                        energy = arch.epoch_energy(widths, method, count, config, batch)
                        timing = arch.epoch_cycles(widths, method, count, config, batch)
                        crossed = curves.crossing(curve["samples"], curve["accuracy"], target)
                        reached.append(_to_accuracy(crossed, count, energy, timing))
                    reached_by_target[str(target)] = reached
                count = per_seed[0][1]
                energy = arch.epoch_energy(widths, method, count, config, batch)
                timing = arch.epoch_cycles(widths, method, count, config, batch)
                priced[config_name] = {
                    "fits": arch.fits(widths, config), "epoch_energy_j": energy["total_j"],
                    "epoch_fpu_j": energy["fpu_j"], "epoch_memory_j": energy["memory_j"],
                    "epoch_seconds": timing["seconds"], "utilization": round(timing["utilization"], 4),
                    "to_accuracy": {key: _over_seeds(reached) for key, reached in reached_by_target.items()},
                    "reached_seeds": {key: sum(r is not None for r in reached)
                                      for key, reached in reached_by_target.items()},
                    "to_accuracy_per_seed": reached_by_target}
            results["runs"].append({
                "network": network, "trained_widths": list(scaled), "method": method, "batch": batch,
                "rate": per_seed[0][0]["rate"],
                "samples": [round(float(v), 1) for v in np.mean([c["samples"] for c, _ in per_seed], axis=0)],
                "accuracy": [round(float(v), 5) for v in accuracy.mean(axis=0)],
                "accuracy_std": [round(float(v), 5) for v in accuracy.std(axis=0)],
                "accuracy_min": [round(float(v), 5) for v in accuracy.min(axis=0)],
                "accuracy_max": [round(float(v), 5) for v in accuracy.max(axis=0)],
                "samples_per_seed": [c["samples"] for c, _ in per_seed],
                "accuracy_per_seed": [c["accuracy"] for c, _ in per_seed],
                "train_samples_per_seed": [count for _, count in per_seed],
                "priced": priced})
    results["comparison"] = compare_with_paper(results)
    results["orderings"] = orderings(results)
    return results


#: The paper's orderings (Section 4.3), each checked seed by seed: (figure, network, configuration,
#: quantity, the labels claimed lower, the labels claimed higher, the paper's words). With several
#: labels on a side the side's lowest value counts.
PAPER_ORDERINGS = (
    ("Fig. 6", "500-500-500-10", "2x16-cores-4x4", "energy_j", ("CP",), ("SGD",), "CP below SGD"),
    ("Fig. 6", "500-500-500-10", "2x16-cores-4x4", "energy_j", ("SGD",), ("MBGD b=50", "MBGD b=100"),
     "SGD below large-minibatch MBGD (0.7x)"),
    ("Fig. 6", "500-500-500-10", "2x16-cores-4x4", "energy_j", ("CP",), ("MBGD b=50", "MBGD b=100"),
     "CP below large-minibatch MBGD (0.3x)"),
    ("Fig. 6", "500-500-500-10", "2x16-cores-4x4", "energy_j", ("SGD",), ("DFA b=1",),
     "DFA needs more energy to an accuracy than SGD"),
    ("Fig. 7", "2500-2000-1500-1000-500-10", "2x16-cores-4x4", "energy_j", ("MBGD b=50",), ("SGD", "CP"),
     "no fit: MBGD b=50 below SGD and CP"),
    ("Fig. 8", "2500-2000-1500-1000-500-10", "2x4-cores-16x16", "energy_j", ("MBGD b=50",), ("SGD",),
     "fits: MBGD b=50 below SGD"),
    ("Fig. 8", "2500-2000-1500-1000-500-10", "2x4-cores-16x16", "energy_j", ("CP",), ("MBGD b=50",),
     "fits: CP below MBGD b=50 ('still not as well as CP')"),
    ("Fig. 8", "2500-2000-1500-1000-500-10", "2x4-cores-16x16", "energy_j", ("CP",), "others",
     "fits: CP lowest of all"),
    ("Fig. 9", "500-500-500-10", "2x16-cores-4x4", "seconds", ("CP",), ("SGD",), "CP faster than SGD"),
    ("Fig. 9", "500x4-10", "2x16-cores-4x4", "seconds", ("CP",), ("SGD",), "CP faster than SGD"),
    ("Fig. 9", "500x5-10", "2x16-cores-4x4", "seconds", ("CP",), ("SGD",), "CP faster than SGD"),
    ("Fig. 9", "2500-2000-1500-1000-500-10", "2x4-cores-16x16", "seconds", ("CP",), ("SGD",),
     "CP faster than SGD"),
    ("Fig. 9", "2500-2000-1500-1000-500-10", "2x16-cores-4x4", "seconds", "minibatch", ("SGD", "CP"),
     "no fit: minibatch methods fastest"),
)


def orderings(results, reference=0.9):
    """Each of :data:`PAPER_ORDERINGS` at ``reference`` accuracy, seed by seed.

    In a seed the claim holds when the lower side reaches the accuracy and the
    higher side does not or needs more; it fails when the higher side gets
    there first or alone; it is undecided when neither reaches it.

    Returns
    -------
    list of dict
        ``figure``, ``claim``, ``holds`` / ``fails`` / ``undecided`` (seed counts), ``seeds``,
        ``holds_in_every_seed``; claims whose runs are not in the study are left out.
    """
    found = []
    seeds = len(results.get("seeds", [results.get("seed")]))
    if "targets" in results and reference not in results["targets"]:
        return found
    for figure, network, config, key, lows, highs, claim in PAPER_ORDERINGS:
        runs = {_label(run): run for run in results["runs"]
                if run["network"] == network and config in run["priced"]}
        if lows == "minibatch":
            lows = tuple(label for label in runs if label.startswith("MBGD"))
        if highs == "others":
            highs = tuple(label for label in runs if label not in lows)
        if not any(label in runs for label in lows) or not any(label in runs for label in highs):
            continue

        def best(labels, seed):
            values = [runs[label]["priced"][config]["to_accuracy_per_seed"][str(reference)][seed]
                      for label in labels if label in runs]
            values = [value[key] for value in values if value is not None]
            return min(values) if values else None

        holds = fails = undecided = 0
        for seed in range(seeds):
            low, high = best(lows, seed), best(highs, seed)
            if low is None and high is None:
                undecided += 1
            elif low is not None and (high is None or low < high):
                holds += 1
            else:
                fails += 1
        found.append({"figure": figure, "network": network, "config": config, "quantity": key,
                      "claim": claim, "lower": list(lows), "higher": list(highs), "holds": holds,
                      "fails": fails, "undecided": undecided, "seeds": seeds,
                      "holds_in_every_seed": holds == seeds})
    return found


def _label(run):
    return run["method"] if run["method"] in ("SGD", "CP") and run["batch"] == 1 else \
        f"{run['method']} b={run['batch']}"


def _at(results, network, config, target, key):
    """``{label: value}`` of ``key`` at ``target`` for the runs of ``network`` priced on ``config`` that reach it."""
    values = {}
    for run in results["runs"]:
        if run["network"] == network and config in run["priced"]:
            reached = run["priced"][config]["to_accuracy"].get(str(target))
            if reached is not None:
                values[_label(run)] = reached[key]
    return values


def compare_with_paper(results, reference=0.9):
    """Our numbers for each of the paper's Section 4.3 findings, at the ``reference`` accuracy.

    Returns
    -------
    dict
        Per finding: the paper's statement and our measured quantities (None where a
        run did not reach the reference accuracy or was not part of the study).
    """
    comparison = {"reference_accuracy": reference, "paper": PAPER_FINDINGS}
    for figure, network, config in ENERGY_FIGURES:
        energy = _at(results, network, config, reference, "energy_j")
        if not energy:
            continue
        fpu = _at(results, network, config, reference, "fpu_j")
        memory = _at(results, network, config, reference, "memory_j")
        large_batches = [label for label in energy if label in ("MBGD b=50", "MBGD b=100")]
        mbgd = min((energy[label] for label in large_batches), default=None)
        comparison[figure] = {
            "network": network, "config": config,
            "energy_j": {label: round(value, 6) for label, value in sorted(energy.items(), key=lambda kv: kv[1])},
            "memory_over_fpu": {label: round(memory[label] / fpu[label], 3) for label in energy},
            "lowest_energy": min(energy, key=energy.get),
            "sgd_over_large_batch_mbgd": None if mbgd is None or "SGD" not in energy else round(energy["SGD"] / mbgd, 3),
            "cp_over_large_batch_mbgd": None if mbgd is None or "CP" not in energy else round(energy["CP"] / mbgd, 3),
            "cp_over_sgd": None if not {"CP", "SGD"} <= set(energy) else round(energy["CP"] / energy["SGD"], 3),
        }
    times = {}
    for network, configs in STUDY_CONFIGS.items():
        for config in configs:
            seconds = _at(results, network, config, reference, "seconds")
            if seconds:
                times[f"{network} on {config}"] = {
                    "fastest": min(seconds, key=seconds.get),
                    "cp_over_sgd": None if not {"CP", "SGD"} <= set(seconds) else
                    round(seconds["CP"] / seconds["SGD"], 3),
                    "seconds": {label: round(value, 6) for label, value in sorted(seconds.items(),
                                                                                  key=lambda kv: kv[1])}}
    comparison["Fig. 9"] = times
    epochs = {}
    for run in results["runs"]:
        reached = next(iter(run["priced"].values()))["to_accuracy"].get(str(reference))
        epochs.setdefault(run["network"], {})[_label(run)] = None if reached is None else reached["epochs"]
    comparison["epochs_to_reference"] = epochs
    return comparison


def rate_sweep(network, plan, rates, epochs, hidden_scale, seed, evaluations_per_epoch=4, widths=None):
    """Learning-rate sweep: every (method, batch) of ``plan`` at every rate; the best by mean test accuracy.

    The mean over all evaluations (not the last one) rewards a rate that converges
    fast and stays stable; a diverging run (NaN weights) scores its chance-level
    accuracy.
    """
    x, labels, source = training.load_dataset()
    split = int(0.8 * len(x))
    widths = _scaled_widths((widths or arch.NETWORKS)[network], hidden_scale)
    rows, best = [], {}
    for method, batch in progress(list(plan), "learning-rate sweep", unit="method"):
        for rate in rates:
            with np.errstate(all="ignore"):
                curve = training.train(widths, method, x[:split], labels[:split], x[split:], labels[split:],
                                       epochs=epochs, batch=batch, rate=rate, seed=seed,
                                       evaluations_per_epoch=evaluations_per_epoch)
            score = float(np.mean(curve["accuracy"]))
            rows.append({"method": method, "batch": batch, "rate": rate, "mean_accuracy": round(score, 4),
                         "final_accuracy": curve["accuracy"][-1], "accuracy": curve["accuracy"]})
            key = f"{method} b={batch}"
            if key not in best or score > best[key]["mean_accuracy"]:
                best[key] = {"rate": rate, "mean_accuracy": round(score, 4)}
    return {"dataset": source, "network": network, "trained_widths": list(widths), "epochs": epochs,
            "seed": seed, "evaluations_per_epoch": evaluations_per_epoch, "rates": list(rates),
            "best": best, "rows": rows,
            "current_defaults": {f"{m} b={b}": training.default_rate(m, b) for m, b in plan}}

def _write(name, result, plot):
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    write_json(REPORT_DIR / f"{name}.json", result)
    _write_figure(name, plot)


def _write_figure(name, plot):
    """``plot(plt)``'s figure as ``REPORT_DIR/name.png``, written atomically."""
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure = plot(plt)
    save_figure(figure, REPORT_DIR / f"{name}.png", dpi=120, bbox_inches="tight")
    plt.close(figure)


#: Section 4.3: "MBGD can achieve 187 GFLOPS/W at 94% utilization" (the large network that does not fit).
PAPER_MBGD_NO_FIT_UTILIZATION = 0.94


def _table2_cases(rows):
    """Table 2's cases (a), (b), (c) in order of appearance: ``{(network, config): letter}``."""
    cases = dict.fromkeys((row["network"], row["config"]) for row in rows)
    return {case: "abcdefgh"[index] for index, case in enumerate(cases)}


def _table2_legend(rows):
    lines = []
    for (network, config), letter in _table2_cases(rows).items():
        cores, pes = config.split("-cores-")
        fits = next(row["fits"] for row in rows if (row["network"], row["config"]) == (network, config))
        lines.append(f"({letter}) {network} on {cores} cores of {pes} PEs ({'fits' if fits else 'does not fit'})")
    return "cases of Table 2:  " + ";  ".join(lines)


def _paper_utilization(row):
    """The utilization the paper's text gives for a Table 2 row, or None."""
    if row["network"] != "2500-2000-1500-1000-500-10":
        return None
    if row["method"] == "MBGD":
        return None if row["fits"] else PAPER_MBGD_NO_FIT_UTILIZATION
    fits, no_fit = PAPER_UTILIZATION[row["method"]]
    return fits if row["fits"] else no_fit


def _plot_table2(result):
    def plot(plt):
        figure, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8.5), sharex=True)
        rows = result["rows"]
        positions = np.arange(len(rows))
        top.bar(positions - 0.2, [row["paper_gflops_per_w"] for row in rows], 0.4, label="paper Table 2")
        top.bar(positions + 0.2, [row["gflops_per_w"] for row in rows], 0.4, label="ours")
        top.set_ylabel("energy efficiency (GFLOPS/W)")
        batch = next(row["batch"] for row in rows if row["method"] == "MBGD")
        top.set_title(f"CATERPILLAR Table 2: GFLOPS/W of SGD, CP and MBGD (b={batch}), 45 nm", fontsize=10)
        top.legend(fontsize=8)
        top.grid(axis="y", alpha=0.3)
        bottom.bar(positions, [row["utilization"] for row in rows], 0.4, color="tab:orange", label="ours")
        paper = [(p, _paper_utilization(row)) for p, row in zip(positions, rows) if _paper_utilization(row) is not None]
        bottom.plot([p for p, _ in paper], [u for _, u in paper], "k*", markersize=11,
                    label="paper (Sec. 4.3 text; none given for the other cases)")
        bottom.set_ylabel("FPU utilization (fraction of peak)")
        bottom.set_ylim(0, 1.05)
        bottom.set_title("Utilization of the same cases (the paper gives it in its text only for some)", fontsize=10)
        bottom.legend(fontsize=8, loc="upper left")
        bottom.grid(axis="y", alpha=0.3)
        cases = _table2_cases(rows)
        bottom.set_xticks(positions, [f"{row['method']}\n({cases[row['network'], row['config']]})" for row in rows])
        bottom.set_xlabel("training method (case)")
        figure.text(0.01, 0.01, _table2_legend(rows), fontsize=7)
        figure.tight_layout(rect=(0, 0.03, 1, 1))
        return figure
    return plot


def _plot_fig10(result):
    def plot(plt):
        rows = result["rows"]
        cases = list(dict.fromkeys((row["network"], row["config"]) for row in rows))
        figure, axis = plt.subplots(figsize=(12, 5))
        width = 0.8 / len(FIG10_METHODS)
        for index, method in enumerate(FIG10_METHODS):
            mine = [next(row for row in rows if (row["network"], row["config"]) == case and row["method"] == method)
                    for case in cases]
            positions = np.arange(len(cases)) + (index - (len(FIG10_METHODS) - 1) / 2) * width
            label = method if method != "MBGD" else f"MBGD b={mine[0]['batch']}"
            bars = axis.bar(positions, [row["gflops_per_mm2"] for row in mine], width, label=f"ours {label}")
            paper = [(p, row["paper_gflops_per_mm2"]) for p, row in zip(positions, mine)
                     if row["paper_gflops_per_mm2"] is not None]
            if paper:
                axis.plot(*zip(*paper), "*", color=bars.patches[0].get_facecolor(), markeredgecolor="k",
                          markersize=13, label=f"paper {label} (stated utilization)")
        axis.set_xticks(np.arange(len(cases)), [f"{network}\n{config} ({'fits' if fits else 'no fit'})"
                                                for (network, config), fits in
                                                ((case, next(r["fits"] for r in rows
                                                             if (r["network"], r["config"]) == case))
                                                 for case in cases)], fontsize=7)
        axis.set_ylabel("GFLOPS/mm^2 (one op per MAC, 1 GHz)")
        axis.set_title("CATERPILLAR Fig. 10: performance per area; bars ours (Table 1 areas), stars the paper "
                       "(its stated utilization and area)", fontsize=9)
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=7, ncol=2)
        figure.text(0.01, 0.01, result["note"], fontsize=7)
        figure.tight_layout(rect=(0, 0.03, 1, 1))
        return figure
    return plot


def _plot_utilization(result):
    def plot(plt):
        figure, axis = plt.subplots(figsize=(7, 5))
        for reduction, links in (("bus", "broadcast bus"), ("tree", "neighbour links (tree)")):
            for overlap in (False, True):
                rows = [row for row in result["rows"] if row["reduction"] == reduction and row["overlap"] == overlap]
                axis.plot([row["n_r"] for row in rows], [row["utilization"] for row in rows], marker="o",
                          label=f"ours: reduction over the {links}{', overlapped (CP)' if overlap else ''}")
        sizes = sorted({row["n_r"] for row in result["rows"]})
        axis.set_xscale("log", base=2)
        axis.set_xticks(sizes, [str(size) for size in sizes])
        axis.set_xlabel("n_r (core of n_r x n_r PEs)")
        axis.set_ylabel("FPU utilization (fraction of peak)")
        axis.set_title(f"CATERPILLAR Sec. 3.3: GEMV utilization against n_r, {result['m']}x{result['n']},"
                       " forward + backward", fontsize=10)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
        figure.text(0.01, 0.01, "the paper gives no figure or numbers for this: its text gives only the reduction"
                    " cost (n_r - 1 cycles on the bus,\nlog(n_r) - 1 with neighbour links) and that the reduction"
                    " overhead can halve utilization", fontsize=7)
        figure.tight_layout(rect=(0, 0.06, 1, 1))
        return figure
    return plot


def _plot_study(result):
    """Figs. 5-9 over the seeds: accuracy per epoch (mean, band min..max, smoothed mean dashed), energy to
    accuracy with +-1 standard deviation, its FPU/memory split at the reference accuracy, time to accuracy."""
    def plot(plt):
        panels = [(network, config) for network in dict.fromkeys(run["network"] for run in result["runs"])
                  for config in _study_configs(network)]
        targets = result["targets"]
        reference = result["comparison"]["reference_accuracy"]
        seeds = len(result.get("seeds", [result["seed"]]))
        figure, axes = plt.subplots(4, len(panels), figsize=(5.5 * len(panels), 17), squeeze=False)
        for column, (network, config) in enumerate(panels):
            runs = [run for run in result["runs"] if run["network"] == network]
            fits = runs[0]["priced"][config]["fits"]
            title = f"{network}\n{config} ({'fits' if fits else 'does not fit'}), {seeds} seeds"
            axis = axes[0][column]
            for run in runs:
                epochs = [s / result["train_samples"] for s in run["samples"]]
                line, = axis.plot(epochs, run["accuracy"], label=_label(run))
                axis.fill_between(epochs, run.get("accuracy_min", run["accuracy"]),
                                  run.get("accuracy_max", run["accuracy"]), color=line.get_color(), alpha=0.15)
                axis.plot(epochs, curves.smooth(run["accuracy"]), "--", color=line.get_color(), linewidth=0.8)
            axis.set_xlabel("epochs (band: min..max over seeds; dashed: smoothed mean)")
            axis.set_ylabel("test accuracy (held-out fold)")
            axis.set_ylim(0, 1)
            for row, key, unit in ((1, "energy_j", "energy to accuracy (J)"), (3, "seconds", "time to accuracy (s)")):
                axis = axes[row][column]
                for run in runs:
                    points = [(t, run["priced"][config]["to_accuracy"][str(t)]) for t in targets
                              if run["priced"][config]["to_accuracy"][str(t)] is not None]
                    if points:
                        axis.errorbar([t for t, _ in points], [v[key] for _, v in points],
                                      yerr=[v.get(f"{key}_std", 0) for _, v in points], marker="o", capsize=3,
                                      label=_label(run))
                axis.set_xlabel("accuracy (smoothed crossing, reached in every seed; bars +-1 std)")
                axis.set_ylabel(unit)
                axis.set_yscale("log")
            axis = axes[2][column]
            labels, fpu, memory, spread = [], [], [], []
            for run in runs:
                reached = run["priced"][config]["to_accuracy"].get(str(reference))
                if reached is not None:
                    labels.append(_label(run))
                    fpu.append(reached["fpu_j"])
                    memory.append(reached["memory_j"])
                    spread.append(reached.get("energy_j_std", 0))
            axis.bar(labels, fpu, label="FPU")
            axis.bar(labels, memory, bottom=fpu, label="memory", yerr=spread, capsize=3)
            axis.set_ylabel(f"energy to {reference:.0%} (J), mean; bar +-1 std")
            axis.tick_params(axis="x", labelrotation=60, labelsize=7)
            for row in range(4):
                axes[row][column].set_title(title, fontsize=8)
                if axes[row][column].get_legend_handles_labels()[0]:
                    axes[row][column].legend(fontsize=6)
        figure.tight_layout()
        return figure
    return plot


def _plot_rates(result):
    def plot(plt):
        figure, axis = plt.subplots(figsize=(7, 4))
        for key in result["best"]:
            rows = [row for row in result["rows"] if f"{row['method']} b={row['batch']}" == key]
            axis.plot([row["rate"] for row in rows], [row["mean_accuracy"] for row in rows], marker="o", label=key)
        axis.set_xscale("log")
        axis.set_xlabel("learning rate")
        axis.set_ylabel(f"mean test accuracy over {result['epochs']} epochs")
        axis.set_title(f"{'-'.join(map(str, result['trained_widths']))}, {result['dataset']}", fontsize=9)
        axis.legend(fontsize=7)
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
    _write_figure("fig10", _plot_fig10(result["fig10"]))
    return _finish(args, "table2", result, _plot_table2(result))


def utilization_handler(args):
    if args.m < 1 or args.n < 1:
        raise UsageError("--m and --n must be at least 1")
    result = utilization(args.m, args.n)
    return _finish(args, "gemv_utilization", result, _plot_utilization(result))


def _check_networks_and_methods(args):
    args.widths = network_widths(args.network)
    args.method = [name.upper() for name in args.method]
    for name in args.method:
        if name not in arch.METHODS:
            raise UsageError(f"unknown method {name!r}; known: {', '.join(arch.METHODS)} (any case)")
    if args.epochs < 1 or not 0 < args.hidden_scale <= 1 or args.evaluations < 1:
        raise UsageError("--epochs and --evaluations must be at least 1, --hidden-scale in (0, 1]")
    if any(b < 1 for b in (*args.batch, *args.feedback_batch)):
        raise UsageError("--batch and --feedback-batch sizes must be at least 1")


def study_handler(args):
    import re

    if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", args.name):
        raise UsageError(f"--name {args.name!r} is not a report name; allowed: letters, digits, '.', '_' and '-', "
                         f"not starting with '.' (the report goes to {REPORT_DIR}/NAME.json)")
    _check_networks_and_methods(args)
    if any(not 0 < target <= 1 for target in args.target):
        raise UsageError(f"--target accuracies must be in (0, 1]: {args.target}")
    idx = None
    if args.idx:
        missing = [path for path in args.idx if not pathlib.Path(path).exists()]
        if missing:
            raise UsageError(f"--idx files not found: {missing}")
        idx = tuple(args.idx)
    plan = _run_plan(args.method, tuple(args.batch), tuple(args.feedback_batch))
    if args.seeds < 1:
        raise UsageError(f"--seeds {args.seeds} must be at least 1")
    seeds = list(range(args.seed, args.seed + args.seeds))
    result = study(args.network, plan, args.epochs, args.hidden_scale, tuple(sorted(args.target)), seeds,
                   args.evaluations, idx, args.widths)
    return _finish(args, args.name, result, _plot_study(result))


def rates_handler(args):
    _check_networks_and_methods(args)
    if len(args.network) != 1:
        raise UsageError("rates sweeps one --network")
    if any(rate <= 0 for rate in args.rate):
        raise UsageError(f"--rate values must be positive: {args.rate}")
    plan = _run_plan(args.method, tuple(args.batch), tuple(args.feedback_batch))
    result = rate_sweep(args.network[0], plan, tuple(args.rate), args.epochs, args.hidden_scale, args.seed,
                        args.evaluations, args.widths)
    return _finish(args, "rates", result, _plot_rates(result))

def _training_arguments(command, epochs, networks, hidden_scale=1.0):
    command.add_argument("--network", nargs="+", default=networks,
                         help="built-in networks or .json/.yaml network files of fc layers from 784 inputs to "
                              "10 outputs (default: %(default)s)")
    command.add_argument("--method", nargs="+", default=list(arch.METHODS),
                         help="training methods, any case (default: %(default)s)")
    command.add_argument("--batch", nargs="+", type=int, default=[2, 4, 8, 50, 100],
                         help="MBGD minibatch sizes (default: %(default)s)")
    command.add_argument("--feedback-batch", nargs="+", type=int, default=[1],
                         help="FA and DFA minibatch sizes (default: %(default)s)")
    command.add_argument("--epochs", type=int, default=epochs, help="training epochs (default: %(default)s)")
    command.add_argument("--hidden-scale", type=float, default=hidden_scale,
                         help="scale the hidden widths of the trained network (the energy and time model "
                              "always prices the full-size network; default %(default)s)")
    command.add_argument("--evaluations", type=int, default=4, help="test-set evaluations per epoch")
    command.add_argument("--seed", type=int, default=0, help="seed of the weights and the data order (default 0)")
    command.add_argument("--json", action="store_true", help="print the whole report as JSON")


def register(subparsers):
    parser = subparsers.add_parser("caterpillar", help="CATERPILLAR: Table 2, GEMV utilization, training study")
    commands = parser.add_subparsers(dest="caterpillar_command", metavar="SUBCOMMAND", required=True)
    table = commands.add_parser("table2", help="GFLOPS/W and utilization of the paper's Table 2 cases")
    table.add_argument("--batch", type=int, default=50, help="MBGD minibatch size (default 50)")
    table.add_argument("--json", action="store_true", help="print the whole report as JSON")
    table.set_defaults(func=table2_handler)
    util = commands.add_parser("utilization", help="GEMV utilization against n_r, bus vs neighbour links")
    util.add_argument("--m", type=int, default=512, help="GEMV rows, the output length (default 512)")
    util.add_argument("--n", type=int, default=512, help="GEMV columns, the input length (default 512)")
    util.add_argument("--json", action="store_true", help="print the whole report as JSON")
    util.set_defaults(func=utilization_handler)
    run = commands.add_parser("study", help="train by every method; energy and time to accuracy (Figs. 5-9)")
    # 0.2x hidden widths by default: the 5-seed study of every network and method then takes about
    # 12 min on one core; the full widths (--hidden-scale 1) take hours (hw/caterpillar/README.md).
    _training_arguments(run, 5, list(arch.NETWORKS), hidden_scale=0.2)
    run.add_argument("--target", nargs="+", type=float, default=[0.85, 0.9, 0.93, 0.95],
                     help="accuracies to reach (default: %(default)s)")
    run.add_argument("--seeds", type=int, default=5,
                     help="train every run with this many seeds, --seed, --seed + 1, ...; the k-th holds out "
                          "fold k %% 5 of the data (default %(default)s)")
    run.add_argument("--idx", nargs=2, metavar=("IMAGES", "LABELS"), help="MNIST IDX files instead of the digits")
    run.add_argument("--name", default="study",
                     help="report name: build/reports/caterpillar/NAME.json and .png (letters, digits, . _ -)")
    run.set_defaults(func=study_handler)
    rates = commands.add_parser("rates", help="learning-rate sweep per method and minibatch size")
    _training_arguments(rates, 1, ["500-500-500-10"])
    rates.add_argument("--rate", nargs="+", type=float, default=list(training.RATE_GRID),
                       help="learning rates to try (default: %(default)s)")
    rates.set_defaults(func=rates_handler)
