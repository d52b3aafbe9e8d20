"""NeuroTrainer system reports: per-layer AlexNet throughput (Fig. 13) and multi-module scaling (Fig. 17).

Every number is computed by :mod:`trainforge.sim.neurotrainer.module`; the paper's figures
(``PAPER``) are only printed beside ours, never used by the model.
"""
from dataclasses import dataclass

from trainforge.errors import ParameterError
from trainforge.sim.neurotrainer.module import ModuleConfig, layer_pass_time, paper_precision
from trainforge.sim.neurotrainer.networks import NETWORKS, layers, parameter_count

__all__ = ["PAPER", "CentralUnit", "CENTRAL_UNITS", "network_report", "scaling_report"]

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
}


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


def network_report(network, batch=32, config=None):
    """Per-layer FF, BP and UP on one module, each pass in the paper's precision.

    Parameters
    ----------
    network : str
        A key of :data:`~trainforge.sim.neurotrainer.networks.NETWORKS`.
    batch : int
        Minibatch size.
    config : ModuleConfig, optional

    Returns
    -------
    dict
        ``rows`` (one per layer and pass, in execution order: FF forward, BP backward, UP),
        ``totals`` (per-image inference and training latency), ``config``.
    """
    if network not in NETWORKS:
        raise ParameterError(f"parameter 'network' = {network!r} is invalid; allowed: one of {', '.join(NETWORKS)}")
    config = config or ModuleConfig()
    net = layers(network, batch)
    order = [(layer, "ff") for layer in net] + [(layer, "bp") for layer in reversed(net)] + \
            [(layer, "up") for layer in net]
    rows = []
    for (name, kind, dims), pass_name in order:
        result = layer_pass_time(paper_precision(config, pass_name), kind, dims, pass_name)
        rows.append({
            "layer": name, "kind": kind, "pass": pass_name, "bits": 32 if result.wide else 16,
            "seconds": result.seconds, "seconds_per_image": result.seconds / batch, "ops": result.ops,
            "tops": result.tops, "peak_tops": result.peak_tops, "utilization": result.utilization,
            "bound": result.bound, "loss_fractions": {k: v / result.seconds for k, v in result.losses.items()
                                                      if v > 0}, "mapping": result.mapping,
            "traffic_words": result.traffic,
            "paper_tops": _paper_tops(name, kind, pass_name),
        })
    inference = sum(r["seconds"] for r in rows if r["pass"] == "ff")
    training = sum(r["seconds"] for r in rows)
    totals = {
        "inference_s_per_image": inference / batch, "training_s_per_image": training / batch,
        "training_s_per_batch": training, "inference_images_per_s": batch / inference,
        "training_images_per_s": batch / training,
        "training_tops": sum(r["ops"] for r in rows) / training / 1e12,
    }
    return {"network": network, "batch": batch, "config": config.__dict__, "rows": rows, "totals": totals,
            "parameters": parameter_count(network)}


def _paper_tops(layer, kind, pass_name):
    """The paper's stated figure for this layer and pass (a number, a range, or None)."""
    if pass_name == "ff":
        return list(PAPER["ff_tops_range"])
    if pass_name == "bp":
        return PAPER["bp_tops"].get(layer)
    return PAPER["conv_up_tops"] if kind == "conv" else PAPER["fc_up_tops"]


def scaling_report(network="vgg16", batch=32, module_counts=(1, 2, 4, 8, 16, 32, 64, 128), config=None,
                   link_bytes_per_s=120e9):
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
    single = network_report(network, batch, config)
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
    report = {"network": network, "batch": batch, "parameters": parameters, "link_bytes_per_s": link_bytes_per_s,
              "t1_s": t1, "transfer_one_way_s": transfer, "curves": curves,
              "paper_reference": {"p100_images_per_s": PAPER["p100_images_per_s"]}}
    if network != "alexnet":
        alex = network_report("alexnet", batch, config)
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
