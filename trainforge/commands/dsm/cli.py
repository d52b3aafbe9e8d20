"""``trainforge dsm ...``: explore one workload, or sweep the paper's figures.

A bad workload, architecture file, parameter or executor raises a
:class:`trainforge.errors.TrainforgeError`, which ``trainforge.cli.main``
prints as one line with exit status 2.
"""
import json

from trainforge.errors import UsageError


def _workload(name, n_mb):
    """A DSM built-in or network file, or another model's built-in (``MODEL/NAME``, converted)."""
    import pathlib

    from trainforge.commands.networks.builtins import MODELS, builtin_networks, resolve
    from trainforge.errors import ConfigError
    from trainforge.sim.dsm.workload import BUILTINS, load_workload, workload_from_network
    path = pathlib.Path(name)
    if name in BUILTINS or path.exists() or path.suffix.lower() in (".json", ".yaml", ".yml"):
        return load_workload(name, n_mb)
    if name.split("/", 1)[0].lower() in MODELS:
        return workload_from_network(resolve(name), n_mb, f"network {name!r}")
    others = [key for key in builtin_networks() if key.split("/", 1)[1].lower() == name.lower()]
    raise ConfigError(f"{name!r} is neither a built-in workload nor a file; built-ins: {', '.join(BUILTINS)}; "
                      f"other models' networks as MODEL/NAME ({', '.join(others) or 'trainforge networks list'}); "
                      "or a .json/.yaml network file")


def _explore(args):
    from trainforge.sim.dsm.arch import load_architecture
    from trainforge.sim.dsm.explore import Optimizations, explore
    arch = load_architecture(args.config)
    workload = _workload(args.workload, args.minibatch)
    options = Optimizations(args.hybrid or args.all, args.memory_reuse or args.all, args.dysm or args.all,
                            args.timestep_pipelining or args.all)
    result = explore(workload, arch, options, training=not args.inference)
    report = {"workload": workload.name, "n_mb": workload.n_mb, **result.to_dict()}
    if args.json:
        print(json.dumps(report, indent=1, default=float))
    else:
        print(f"{workload.name} N_mb={workload.n_mb}: utilization {result.utilization:.3f}, "
              f"{result.cycles / arch.frequency * 1e3:.3f} ms, {result.points} points in {result.seconds:.2f} s "
              f"({result.points / max(result.seconds, 1e-9):.0f} points/s)")
    return 0


def _sweep(args):
    from trainforge.sim.dsm import figures
    from trainforge.sim.dsm.executor import check_executor
    from trainforge.sim.dsm.workload import BUILTINS
    if args.figure == "layers":
        # One exploration: nothing for a process pool to share out, but it can run on a cluster.
        executor = args.executor or "serial"
        if executor != "serial" and not executor.startswith(("dask://", "tcp://")):
            raise UsageError(f"--executor {executor!r}: 'sweep layers' is one exploration of VGG16; it runs in "
                             "this process (serial, the default) or on a Dask cluster (dask://HOST:PORT)")
        args.executor = executor
    args.executor = check_executor(args.executor or "local")
    networks = args.networks.split(",")
    for network in networks:
        if network not in BUILTINS:
            raise UsageError(f"--networks: {network!r} is not one of {', '.join(BUILTINS)}")
    try:
        values = [float(v) for v in args.values.split(",")] if args.values else None
    except ValueError:
        raise UsageError(f"--values={args.values!r} must be a comma-separated list of numbers") from None
    if values is not None and any(v <= 0 for v in values):
        raise UsageError(f"--values={args.values!r}: every value must be > 0")
    if args.figure == "training":
        report = figures.training_sweep(networks, [int(v) for v in values or (256, 512, 1024, 2048)], args.executor)
    elif args.figure == "inference":
        report = figures.inference_sweep(networks, [int(v) for v in values or (1, 2, 4, 8, 16)], args.executor)
    elif args.figure == "layers":
        report = figures.vgg16_layers(int(values[0]) if values else 512, args.executor)
    elif args.figure == "scaling":
        counts = [int(v) for v in values or (16, 32, 64, 128, 256)]
        if any(c % 4 for c in counts):
            raise UsageError(f"--values: chip counts {counts} must be multiples of 4 (X is fixed at 4)")
        report = figures.scaling_sweep(networks, counts, args.executor)
    else:
        report = figures.scratchpad_sweep(networks, values or (0.5, 1, 2, 4), args.executor)
    json_path, png_path = figures.write_report(report, args.out)
    if args.json:
        print(json.dumps(report, indent=1, default=float))
    else:
        print(json.dumps(report.get("summary", {}), indent=1))
        print(f"wrote {json_path} and {png_path}")
    return 0


def register(subparsers):
    """Add ``dsm explore`` and ``dsm sweep``."""
    parser = subparsers.add_parser("dsm", help="DeepSpatialMatrix performance model and exploration")
    commands = parser.add_subparsers(dest="dsm_command", metavar="DSM_COMMAND", required=True)
    explore = commands.add_parser("explore", help="best configuration per layer and pass")
    explore.add_argument("workload", help="vgg16, resnet50, gnmt, another model's MODEL/NAME (trainforge "
                                         "networks list) or a .json/.yaml network file")
    explore.add_argument("--config", help="JSON/YAML architecture file (default: paper Fig. 10)")
    explore.add_argument("--minibatch", type=int, help="override N_mb, the minibatch size")
    explore.add_argument("--inference", action="store_true", help="FWD only")
    optimizations = {
        "hybrid": "hybrid parallelism: a DataXModelY split per layer (Sec. IV-A)",
        "memory-reuse": "feature-memory reuse between layers (Mem-Opt)",
        "dysm": "dynamic spatial minibatching (DySM)",
        "timestep-pipelining": "pipeline the timesteps of recurrent layers over sub-tori",
        "all": "every optimization above",
    }
    for flag, text in optimizations.items():
        explore.add_argument(f"--{flag}", action="store_true", help=text)
    explore.add_argument("--json", action="store_true", help="print the whole result as JSON")
    explore.set_defaults(func=_explore)
    sweep = commands.add_parser("sweep", help="reproduce a paper figure (JSON + PNG)")
    sweep.add_argument("figure", choices=("training", "inference", "layers", "scaling", "scratchpad"),
                       help="the figure: training and inference (Fig. 11), layers (Figs. 12-13), scaling (Fig. 14), "
                            "scratchpad (Fig. 15)")
    sweep.add_argument("--networks", default="vgg16,resnet50,gnmt",
                       help="comma list of built-in workloads (default: %(default)s)")
    sweep.add_argument("--values", help="comma list: minibatches, batches, chip counts or scratchpad MB")
    sweep.add_argument("--executor", default=None,
                       help="serial, local (a process pool; the default) or dask://HOST:PORT; 'layers' is one "
                            "exploration: serial (its default) or dask://HOST:PORT")
    sweep.add_argument("--out", default="build/reports/dsm", help="folder of the JSON and PNG (default: %(default)s)")
    sweep.set_defaults(out_kind="dir")
    sweep.add_argument("--json", action="store_true", help="print the whole report as JSON")
    sweep.set_defaults(func=_sweep)
