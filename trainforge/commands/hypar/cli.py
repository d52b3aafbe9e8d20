"""``trainforge hypar``: partition, simulate and reproduce the paper's figures.

* ``trainforge hypar partition NET`` - Algorithm 2's choices and traffic.
* ``trainforge hypar simulate NET`` - one step on the array, per strategy
  (``--third-type`` adds AccPar's three-type partition).
* ``trainforge hypar figures`` (alias ``sweep``) - Figs. 5 to 13, ``nodes``
  (the node models compared) and ``third_type`` (HyPar's two partition types
  against AccPar's three, simulated) as JSON and PNG under ``build/reports/hypar/``.

``simulate`` and ``figures`` take ``--node roofline|tensordash|caterpillar|neurotrainer``
(:mod:`trainforge.sim.hypar.nodes`) and, for ``tensordash``, ``--sparsity S`` or ``A,G``.

``NET`` is a built-in name (``SFC``, ``VGG-A``, ...) or a ``.json``/``.yaml``
file. ``--json`` prints the result as JSON on stdout. User errors raise a
:class:`trainforge.errors.TrainforgeError` (``trainforge.cli.main`` prints it
as one line and exits with status 2); nothing is written before all inputs are
checked and all results are computed.
"""
import json
import pathlib

from trainforge.errors import ParameterError, UsageError
from trainforge.outputs import write_json

from trainforge.sim.hypar.builtins import BUILTIN_NETWORKS, DAG_NETWORKS, builtin_network
from trainforge.sim.hypar.config import (INTER_LAYER_CONVENTIONS, PARTIAL_SUM_SIZES, TOPOLOGIES, ArrayConfig,
                                        TrainingSetup)
from trainforge.sim.hypar.network import from_spec, load_network
from trainforge.sim.hypar.partition import BASELINES, format_choices, strategy_choices, traffic_of
from trainforge.progress import progress

REPORT_DIR = pathlib.Path("build/reports/hypar")


def _network(name):
    """A HyPar built-in, a network file, or another model's built-in (``MODEL/NAME``, converted)."""
    if name.lower().endswith((".json", ".yaml", ".yml")) or pathlib.Path(name).is_file():
        return load_network(name)
    from trainforge.commands.networks.builtins import MODELS, resolve

    if name.split("/", 1)[0].lower() in MODELS:
        return from_spec(resolve(name), f"network {name!r}")
    try:
        return builtin_network(name)
    except KeyError as error:
        raise UsageError(f"{error.args[0]}, MODEL/NAME of 'trainforge networks list', "
                         "or a .json/.yaml network file") from error


def _configs(args):
    return (TrainingSetup(batch=args.batch, bytes_per_element=args.bytes_per_element,
                          inter_layer=args.inter_layer, mp_partial_sums=args.mp_partial_sums),
            ArrayConfig(levels=args.levels, topology=args.topology, link_bits_per_second=args.link_mbps * 1e6))


def _node(args):
    """The node model of ``--node`` / ``--sparsity``; a bad value is a UsageError."""
    from trainforge.sim.hypar.nodes import make_node
    sparsity = None
    if args.sparsity is not None:
        try:
            values = tuple(float(part) for part in args.sparsity.split(","))
        except ValueError as error:
            raise UsageError(f"--sparsity {args.sparsity!r}: expected S or A,G (numbers 0..1)") from error
        if len(values) not in (1, 2):
            raise UsageError(f"--sparsity {args.sparsity!r}: expected S or A,G (numbers 0..1)")
        sparsity = (values[0], values[-1])
    try:
        return make_node(args.node, sparsity, args.units_per_hmc)
    except ParameterError as error:
        raise UsageError(f"--node/--sparsity/--units-per-hmc: {error}") from error
    except ImportError as error:
        raise UsageError(f"--node {args.node}: its block model is not available ({error})") from error


def _emit(args, result, text):
    print(json.dumps(result, indent=2) if args.json else text)
    return 0


def partition_handler(args):
    """Print HyPar's per-level choices and the traffic of HyPar and the baselines."""
    network = _network(args.network)
    setup, array = _configs(args)
    result = {"network": network.name, "layers": network.names, "levels": array.levels, "batch": setup.batch,
              "strategies": {}}
    for strategy in ("HyPar", *BASELINES):
        choices = strategy_choices(strategy, network, setup, array.levels)
        result["strategies"][strategy] = {"choices": format_choices(choices),
                                          "GB_per_step": traffic_of(network, setup, choices).total_bytes / 1e9}
    if args.third_type:
        from trainforge.sim.hypar import third_type
        total, types = third_type.hierarchical_partition(network, setup, array.levels)
        result["strategies"]["AccPar"] = {"choices": third_type.format_types(types), "GB_per_step": total / 1e9}
    lines = [f"{network.name}: layers {' '.join(network.names)}"]
    lines += [f"  {name:6s} {result['strategies'][name]['GB_per_step']:.4g} GB/step  "
              f"{' '.join(row['choices']) if (row := result['strategies'][name]) else ''}"
              for name in result["strategies"]]
    return _emit(args, result, "\n".join(lines))


def simulate_handler(args):
    """Simulate one training step for HyPar and the baselines."""
    from trainforge.sim.hypar.simulator import simulate_step
    network = _network(args.network)
    setup, array = _configs(args)
    node = _node(args)
    result = {"network": network.name, "topology": array.topology, "accelerators": array.accelerators,
              "node": args.node, "strategies": {}}
    partitions = {strategy: strategy_choices(strategy, network, setup, array.levels)
                  for strategy in ("HyPar", *BASELINES)}
    if args.third_type:
        from trainforge.sim.hypar import third_type
        partitions["AccPar"] = third_type.hierarchical_partition(network, setup, array.levels)[1]
    for strategy, choices in partitions.items():
        step = simulate_step(network, setup, choices, array, node_model=node)
        result["strategies"][strategy] = {"seconds": step.seconds, "energy_joules": step.energy_joules,
                                          "compute_seconds": step.compute_seconds,
                                          "network_seconds": step.network_seconds,
                                          "GB_per_step": step.communication_bytes / 1e9}
    dp = result["strategies"]["DP"]
    lines = [f"{network.name} on {array.accelerators} accelerators ({array.topology}), node {args.node}"]
    lines += [f"  {name:6s} {row['seconds']:.4g} s ({dp['seconds'] / row['seconds']:.3g}x DP), "
              f"{row['energy_joules']:.4g} J ({dp['energy_joules'] / row['energy_joules']:.3g}x DP)"
              for name, row in result["strategies"].items()]
    return _emit(args, result, "\n".join(lines))


def figures_handler(args):
    """Compute the selected figures, then write their JSON and PNG files."""
    from trainforge.sim.hypar.figures import FIGURES, PlotSetting, check_figure_levels, plot
    selected = args.only.split(",") if args.only else list(FIGURES)
    unknown = [name for name in selected if name not in FIGURES]
    if unknown:
        raise UsageError(f"--only {','.join(unknown)}: unknown figure; allowed: {', '.join(FIGURES)}")
    setup, array = _configs(args)
    check_figure_levels(selected, array.levels)
    node = _node(args)
    results = {name: FIGURES[name](setup, array, node_model=node)
               for name in progress(list(selected), "HyPar figures", unit="figure")}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in results.items():
        write_json(out / f"{name}.json", data)
        plot(name, data, out / f"{name}.png", PlotSetting.of(setup, array))
    return _emit(args, results, "\n".join(f"wrote {out / name}.json and .png" for name in results))


def _common(parser):
    parser.add_argument("--levels", type=int, default=4, help="hierarchy levels H (2**H accelerators), 0..10")
    parser.add_argument("--batch", type=int, default=256, help="mini-batch size")
    parser.add_argument("--bytes-per-element", type=int, default=4, help="bytes per tensor element (fp32: 4)")
    parser.add_argument("--topology", default="htree", help=f"one of {', '.join(TOPOLOGIES)}")
    parser.add_argument("--link-mbps", type=float, default=1600.0, help="leaf link bandwidth, Mb/s")
    parser.add_argument("--inter-layer", default="consumer",
                        help=f"tensors charged at a layer boundary: {', '.join(INTER_LAYER_CONVENTIONS)} "
                             "(default consumer, the paper's Table 2)")
    parser.add_argument("--mp-partial-sums", default="pre_pooling",
                        help=f"size of mp partial sums: {', '.join(PARTIAL_SUM_SIZES)} "
                             "(default pre_pooling; post_pooling is the authors' partitioner)")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _node_options(parser):
    from trainforge.sim.hypar.nodes import NODE_KINDS
    parser.add_argument("--node", default="roofline",
                        help=f"node model: {', '.join(NODE_KINDS)} (sim/hypar/nodes.py; default roofline)")
    parser.add_argument("--sparsity", help="tensordash only: zero fraction of activations and gradients, "
                                           "S or A,G (default 0.62)")
    parser.add_argument("--units-per-hmc", type=int, help="roofline only: processing units per HMC, one per vault "
                                                          "(default 16, see sim/hypar/config.py NodeConfig)")


def register(subparsers):
    """Add ``hypar`` and its sub-subcommands to the ``trainforge`` parser."""
    hypar = subparsers.add_parser("hypar", help="HyPar partitioning and accelerator-array model")
    commands = hypar.add_subparsers(dest="hypar_command", metavar="HYPAR_COMMAND", required=True)
    network_help = (f"built-in ({', '.join([*BUILTIN_NETWORKS, *DAG_NETWORKS])}), another model's MODEL/NAME "
                    "(trainforge networks list) or a .json/.yaml network file")
    partition = commands.add_parser("partition", help="Algorithm 2 choices and traffic per step")
    partition.add_argument("network", help=network_help)
    partition.add_argument("--third-type", action="store_true",
                           help="add AccPar: three partition types per layer (2 = split C_out), see third_type.py")
    _common(partition)
    partition.set_defaults(func=partition_handler)
    simulate = commands.add_parser("simulate", help="simulate one training step")
    simulate.add_argument("network", help=network_help)
    simulate.add_argument("--third-type", action="store_true",
                          help="add AccPar: the three-type partition (2 = split C_out) simulated")
    _common(simulate)
    _node_options(simulate)
    simulate.set_defaults(func=simulate_handler)
    figures = commands.add_parser("figures", aliases=["sweep"], help="reproduce Figs. 5-13 (JSON and PNG)")
    figures.add_argument("--only", help="comma-separated subset, e.g. fig8,fig12")
    figures.add_argument("--out", default=str(REPORT_DIR), help="output folder")
    figures.set_defaults(out_kind="dir")
    _common(figures)
    _node_options(figures)
    figures.set_defaults(func=figures_handler)
