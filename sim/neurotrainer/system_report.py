"""NeuroTrainer system reports: per-layer AlexNet time (Fig. 13) and multi-module scaling (Fig. 17).

Every layer time comes from the compiled programs
(:func:`trainforge.sim.neurotrainer.module_from_programs.program_pass_time`: the compiler's
programs for the module's PEs and buffers, timed by ``program_time``); the paper's figures
(``PAPER``) are only printed beside ours, never used by the model.
"""
import hashlib
import json
import pathlib
from dataclasses import dataclass, replace

from trainforge.errors import ParameterError, ProgramError
from trainforge.sim.neurotrainer.module import ModuleConfig, paper_precision
from trainforge.sim.neurotrainer.module_from_programs import program_pass_time
from trainforge.sim.neurotrainer.networks import BUILTIN_NETWORKS, NETWORKS, network_passes, parameter_count
from trainforge.sim.neurotrainer.program import ProgramError as LayerDoesNotFit

__all__ = ["PAPER", "CentralUnit", "CENTRAL_UNITS", "network_report", "buffer_sweep", "scaling_report",
           "with_buffers", "TimingCache"]

#: The paper's stated numbers (Sec. 5.1 text, Fig. 13 labels, Sec. 5.3), for the tables only.
PAPER = {
    "ff_tops_range": (4.2, 4.7),
    "bp_tops": {"FC3": 1.61, "C1": 1.19},
    "conv_up_tops": 1.98,
    "fc_up_tops": 1.02,
    "inference_ms_per_image": 0.31,
    "training_ms_per_image": 1.97,
    "alexnet_k1_update_ms": 42.4,
    "alexnet_link_ms": 4.61,
    "alexnet_4nt_k1_total_ms": 269.58,
    "alexnet_parameters": 138e6,
    "p100_images_per_s": 150,
    "fig17_images_per_s_64_modules": 1900,
}

#: Fig. 17's stated point: 64 modules.
FIG17_MODULES = 64


@dataclass(frozen=True)
class CentralUnit:
    """The unit that averages the N modules' dW and updates W (Fig. 17 a).

    Parameters
    ----------
    name : str
    ops_per_s : float
        Peak arithmetic rate on 32-bit words.
    memory_bytes_per_s : float
        Its memory bandwidth: the update streams every dW and W through it.
    """
    name: str
    ops_per_s: float
    memory_bytes_per_s: float

    def update_seconds(self, parameters, modules):
        """W' = W + eta * average(dW_1..dW_N): N - 1 adds, one multiply and one add per weight; reads
        N dW and W and writes W (4 B each). The slower of arithmetic and memory."""
        ops = parameters * (modules + 1)
        memory = parameters * 4 * (modules + 2)
        return max(ops / self.ops_per_s, memory / self.memory_bytes_per_s)


def _module_central(config):
    """Another NeuroTrainer module as the central unit: its MACs in 32-bit mode, all its vaults."""
    wide = paper_precision(config, "up")
    return CentralUnit("NeuroTrainer", wide.peak_ops, (config.pes + 1) * config.vault_bytes_per_s)


#: Central units of Fig. 17: another module, or a Tegra K1 (326 GFLOPS, 64-bit LPDDR3-1866: 14.9 GB/s).
CENTRAL_UNITS = {
    "nt": _module_central,
    "k1": lambda config: CentralUnit("Tegra K1", 326e9, 14.9e9),
}


def with_buffers(config, kib):
    """``config`` with each of the three PE buffers ``kib`` KiB."""
    size = int(kib) * 1024
    return replace(config, input1_buffer_bytes=size, input2_buffer_bytes=size, output_buffer_bytes=size)


#: Where the layer timings of the default figures are kept in the source tree (compiling VGG16 takes
#: minutes): entries are keyed by the model's source text, so a change of the compiler or the model
#: makes them miss and be recomputed, never used stale.
SHIPPED_CACHE = pathlib.Path(__file__).with_name("program_time_cache.json")

#: The modules whose source text the cache key includes: everything a layer's time depends on.
_MODEL_SOURCES = ("sim/neurotrainer/compiler.py", "sim/neurotrainer/program.py", "sim/neurotrainer/program_time.py",
                  "sim/neurotrainer/module_from_programs.py", "sim/neurotrainer/module.py",
                  "golden/neurotrainer/pe.py", "golden/neurotrainer/pmag.py", "spec/neurotrainer/pe.py",
                  "spec/neurotrainer/pe_program.py", "spec/neurotrainer/pmag.py", "spec/neurotrainer/bus.py",
                  "spec/neurotrainer/mac.py", "spec/neurotrainer/packing.py")


def model_version():
    """A hash of the source text of every module a layer's time depends on."""
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    digest = hashlib.sha256()
    for name in _MODEL_SOURCES:
        path = root / name
        digest.update(path.read_bytes() if path.exists() else name.encode())
    return digest.hexdigest()[:16]


class TimingCache:
    """Layer pass times by (model version, module, layer) key, kept in JSON files between runs.

    Parameters
    ----------
    path : str or pathlib.Path, optional
        The file new entries are written to; without it they live in memory only.
    shipped : str or pathlib.Path, optional
        A file read as well (default :data:`SHIPPED_CACHE`), never written.
    """

    def __init__(self, path=None, shipped=SHIPPED_CACHE):
        self.path = pathlib.Path(path) if path else None
        self.version = model_version()
        self.entries = {}
        for source in (shipped, self.path):
            if source and pathlib.Path(source).exists():
                self.entries.update(json.loads(pathlib.Path(source).read_text()))
        self.added = {}

    def get(self, config, kind, dims, groups, counterfactual):
        key = json.dumps([self.version, config.__dict__, kind, dims, groups, counterfactual], sort_keys=True)
        if key not in self.entries:
            try:
                result = program_pass_time(config, kind, dims, groups, **counterfactual)
                detail = {name: result.detail[name] for name in ("lowering", "passes_per_pe", "mac_rows_per_pe",
                                                                 "words", "programs")}
                entry = {"seconds": result.seconds, "cycles": result.cycles, "prep_seconds": result.prep_seconds,
                         "macs": result.macs, "tops": result.tops, "peak_tops": result.peak_tops,
                         "bits": result.bits, "losses": result.losses, "bound": result.bound, "detail": detail}
            except (ProgramError, LayerDoesNotFit) as error:
                entry = {"error": str(error)}
            self.entries[key] = self.added[key] = entry
            if self.path:
                self.save(self.path)
        return self.entries[key]

    def save(self, path):
        """Write the entries of this version to ``path`` (merged with what it holds)."""
        path = pathlib.Path(path)
        held = json.loads(path.read_text()) if path.exists() else {}
        held.update(self.entries)
        current = {key: value for key, value in held.items() if json.loads(key)[0] == self.version}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(current, sort_keys=True, indent=0))


def network_report(network, batch=32, config=None, cache=None, counterfactual=None):
    """Per-layer FF, BP and UP on one module from the compiled programs.

    Parameters
    ----------
    network : str
        A key of :data:`~trainforge.sim.neurotrainer.networks.NETWORKS`.
    batch : int
        Minibatch size.
    config : ModuleConfig, optional
    cache : TimingCache, optional
    counterfactual : dict, optional
        ``ModuleTiming`` counterfactual fields (``elements_per_request``, ``preload_rows``,
        ``common_interval``) for every pass.

    Returns
    -------
    dict
        ``rows`` (one per layer and pass, in execution order: FF forward, BP backward, UP),
        ``not_compiled`` (the passes that do not compile for the module, with the error; not in
        the totals), ``totals`` (per-image inference
        and training time; data preparation apart), ``config``.
    """
    if network not in NETWORKS:
        raise ParameterError(f"parameter 'network' = {network!r} is invalid; allowed: one of {', '.join(NETWORKS)}")
    config = config or ModuleConfig()
    cache = cache or TimingCache()
    counterfactual = counterfactual or {}
    passes = network_passes(BUILTIN_NETWORKS[network], batch)
    forward = [p for p in passes if p[1] == "ff"]
    order = forward + [p for p in reversed(passes) if p[1] == "bp"] + [p for p in passes if p[1] == "up"]
    rows, not_compiled = [], []
    for name, pass_name, kind, dims, groups in order:
        entry = cache.get(config, kind, dims, groups, counterfactual)
        row = {"layer": name, "kind": kind, "pass": pass_name, "dims": dims, "groups": groups,
               "paper_tops": _paper_tops(name, kind.split("_")[0], pass_name)}
        if "error" in entry:
            not_compiled.append({**row, "error": entry["error"]})
            continue
        else:
            row.update({
                "bits": entry["bits"], "seconds": entry["seconds"], "seconds_per_image": entry["seconds"] / batch,
                "prep_seconds_per_image": entry["prep_seconds"] / batch, "ops": 2 * entry["macs"],
                "tops": entry["tops"], "peak_tops": entry["peak_tops"],
                "utilization": entry["tops"] / entry["peak_tops"], "bound": entry["bound"],
                "loss_fractions": {k: v / entry["seconds"] for k, v in entry["losses"].items() if v > 0},
                "detail": entry["detail"]})
        rows.append(row)
    timed = rows
    inference = sum(r["seconds"] for r in timed if r["pass"] == "ff")
    training = sum(r["seconds"] for r in timed)
    prep = sum(r["prep_seconds_per_image"] for r in timed) * batch
    totals = {
        "inference_s_per_image": inference / batch, "training_s_per_image": training / batch,
        "training_s_per_batch": training, "inference_images_per_s": batch / inference,
        "training_images_per_s": batch / training,
        "training_tops": sum(r["ops"] for r in timed) / training / 1e12,
        "prep_s_per_image": prep / batch, "training_with_prep_s_per_image": (training + prep) / batch,
        "not_compiled": [f"{r['layer']} {r['pass'].upper()}: {r['error']}" for r in not_compiled],
    }
    return {"network": network, "batch": batch, "config": config.__dict__, "rows": rows,
            "not_compiled": not_compiled, "totals": totals,
            "parameters": parameter_count(network), "counterfactual": counterfactual}


def buffer_sweep(network, batch=32, kibs=(4, 8, 16), config=None, cache=None, counterfactual=None):
    """:func:`network_report` for each buffer size in ``kibs`` (KiB per buffer), by size."""
    config = config or ModuleConfig()
    return {int(kib): network_report(network, batch, with_buffers(config, kib), cache, counterfactual)
            for kib in kibs}


def _paper_tops(layer, kind, pass_name):
    """The paper's stated figure for this layer and pass (a number, a range, or None)."""
    if pass_name == "ff":
        return list(PAPER["ff_tops_range"])
    if pass_name == "bp":
        return PAPER["bp_tops"].get(layer)
    return PAPER["conv_up_tops"] if kind == "conv" else PAPER["fc_up_tops"]


def scaling_report(network="vgg16", batch=32, module_counts=(1, 2, 4, 8, 16, 32, 64, 128), config=None,
                   link_bytes_per_s=120e9, cache=None):
    """Fig. 17: synchronous training on N modules with a central unit that updates W.

    T1: one module trains its minibatch (:func:`network_report`). T2: every module sends dW to
    the central unit and receives W', one after the other over the central unit's link
    (``2 N x 4 B x weights / link``). T3: the central unit averages the N dW and updates W
    (:meth:`CentralUnit.update_seconds`). Throughput: ``N batch / (T1 + T2 + T3)``.

    Parameters
    ----------
    link_bytes_per_s : float
        One direction of a module's external links: the paper's 240 GB/s HMC link,
        half each way.
    """
    if not (isinstance(link_bytes_per_s, (int, float)) and link_bytes_per_s > 0):
        raise ParameterError(f"parameter 'link_bytes_per_s' = {link_bytes_per_s!r} is invalid; allowed: a number > 0")
    bad = [n for n in module_counts if not (isinstance(n, int) and 1 <= n <= 4096)]
    if bad:
        raise ParameterError(f"parameter 'module_counts' = {bad[0]!r} is invalid; allowed: integers in 1..4096")
    config = config or ModuleConfig()
    single = network_report(network, batch, config, cache)
    parameters = single["parameters"]
    t1 = single["totals"]["training_s_per_batch"]
    transfer = parameters * 4 / link_bytes_per_s
    curves = {}
    for key, make in CENTRAL_UNITS.items():
        unit = make(config)
        points = []
        for n in module_counts:
            t2 = 2 * n * transfer
            t3 = unit.update_seconds(parameters, n)
            points.append({"modules": n, "t1_s": t1, "t2_s": t2, "t3_s": t3,
                           "images_per_s": n * batch / (t1 + t2 + t3)})
        curves[key] = {"central_unit": unit.name, "ops_per_s": unit.ops_per_s,
                       "memory_bytes_per_s": unit.memory_bytes_per_s, "points": points}
    # Fig. 17's claim (64 modules, 1,900 images/s), ours beside it, and the counterfactual T1 of a module
    # at its peak on every pass (the paper's curves are "computed based on peak FLOPS").
    t1_peak = sum(row["ops"] / (row["peak_tops"] * 1e12) for row in single["rows"])
    fig17 = {"modules": FIG17_MODULES, "paper_images_per_s": PAPER["fig17_images_per_s_64_modules"],
             "t1_s": t1, "t1_at_peak_s": t1_peak, "ours": {}, "t1_at_peak": {},
             "t1_at_peak_parallel_links": {}}
    for key, make in CENTRAL_UNITS.items():
        unit = make(config)
        t2, t3 = 2 * FIG17_MODULES * transfer, unit.update_seconds(parameters, FIG17_MODULES)
        fig17["ours"][key] = FIG17_MODULES * batch / (t1 + t2 + t3)
        fig17["t1_at_peak"][key] = FIG17_MODULES * batch / (t1_peak + t2 + t3)
        # and the modules' dW and W' moving over links of their own at the same time: T2 of one module
        fig17["t1_at_peak_parallel_links"][key] = FIG17_MODULES * batch / (t1_peak + 2 * transfer + t3)
    report = {"network": network, "batch": batch, "parameters": parameters, "link_bytes_per_s": link_bytes_per_s,
              "t1_s": t1, "transfer_one_way_s": transfer, "curves": curves, "fig17": fig17,
              "not_compiled": single["totals"]["not_compiled"],
              "paper_reference": {"p100_images_per_s": PAPER["p100_images_per_s"]}}
    if network != "alexnet":
        alex = network_report("alexnet", batch, config, cache)
        alex_params = alex["parameters"]
        alex_t1 = alex["totals"]["training_s_per_batch"]
    else:
        alex_params, alex_t1 = parameters, t1
    k1 = CENTRAL_UNITS["k1"](config)
    alex_transfer = alex_params * 4 / link_bytes_per_s
    report["alexnet_4_modules_k1"] = {
        "ours": {"t1_s": alex_t1, "update_per_dw_s": k1.update_seconds(alex_params, 1),
                 "link_s": alex_transfer, "parameters": alex_params,
                 "total_s": alex_t1 + k1.update_seconds(alex_params, 4) + 2 * 4 * alex_transfer},
        "paper": {"t1_s": 63.1e-3, "update_per_dw_s": PAPER["alexnet_k1_update_ms"] * 1e-3,
                  "link_s": PAPER["alexnet_link_ms"] * 1e-3, "parameters": PAPER["alexnet_parameters"],
                  "total_s": PAPER["alexnet_4nt_k1_total_ms"] * 1e-3},
    }
    return report
