"""``trainforge neurotrainer compile``: a layer's PMAG and PE program words (hex) and sizes."""
import json

from trainforge.errors import UsageError
from trainforge.errors import ParameterError


def _assignments(text, option):
    """``"a=1,b=2"`` -> dict; values are ints unless the value is not a number (kept as str)."""
    result = {}
    for part in filter(None, (text or "").split(",")):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise UsageError(f"{option} = {text!r}: expected name=value[,name=value...]")
        try:
            result[name.strip()] = int(value, 0)
        except ValueError:
            result[name.strip()] = value.strip()
    return result


#: Elements one tensor of a compiled layer may hold: the compiler and the reference executor keep
#: every tensor in memory (int64, a few copies), so this bounds a run to a few GiB.
MAX_TENSOR_ELEMENTS = 1 << 26

#: The tensors of each layer kind, as products of its dimensions (upper bounds where padding adds a little).
_TENSORS = {
    "conv": (("input", ("n", "d", "h", "w")), ("weights", ("o", "d", "hk", "wk")), ("output", ("n", "o", "h", "w"))),
    "fc": (("weights", ("h", "k")), ("input", ("k", "n")), ("output", ("h", "n"))),
    "maxpool": (("input", ("n", "c", "h", "w")),),
    "data": (("tensor", ("d", "h", "w")),),
}


def check_tensor_sizes(kind, dims):
    """Refuse, before anything is allocated, a layer whose tensors would not fit in memory."""
    family = kind.split("_")[0] if kind.startswith(("conv", "fc")) else ("maxpool" if kind == "maxpool" else "data")
    for name, axes in _TENSORS[family]:
        elements = 1
        for axis in axes:
            elements *= max(1, dims.get(axis, 1))
        if elements > MAX_TENSOR_ELEMENTS:
            shape = " x ".join(f"{axis}={dims.get(axis, 1)}" for axis in axes)
            raise UsageError(f"--dims: the {name} tensor ({shape}) would hold {elements:,} elements; allowed: at "
                             f"most {MAX_TENSOR_ELEMENTS:,} (the compiler and reference executor keep it in memory)")


def _network_layer(args):
    """``(kind, dims)`` of ``--network-layer`` of ``--network`` (a built-in or a network file)."""
    import pathlib

    from trainforge.sim.neurotrainer.networks import BUILTIN_NETWORKS, compiler_layer
    from trainforge.spec import network as network_format
    if args.layer is not None:
        raise UsageError("--layer: give either --layer and --dims, or --network with --network-layer")
    if args.network in BUILTIN_NETWORKS:
        description, source = BUILTIN_NETWORKS[args.network], f"network {args.network!r}"
    elif pathlib.Path(args.network).exists() or args.network.lower().endswith((".json", ".yaml", ".yml")):
        description, source = network_format.load(args.network), args.network
    else:
        from trainforge.commands.networks.builtins import resolve

        description, source = resolve(args.network), f"network {args.network!r}"
    batch = _assignments(args.dims, "--dims")
    if set(batch) - {"n"} or not isinstance(batch.get("n", 1), int):
        raise UsageError(f"--dims = {args.dims!r}: with --network give only the batch, n=N")
    if not args.network_layer:
        return description, batch.get("n", 1)
    return compiler_layer(description, args.network_layer, args.training_pass or "ff", batch.get("n", 1), source)


def _compile(args):
    from trainforge.sim.neurotrainer.compiler import LAYERS, compile_layer
    from trainforge.sim.neurotrainer.program import ProgramError
    if args.network is not None and not args.network_layer:
        return _compile_network(args, *_network_layer(args))
    if args.network is not None:
        args.layer, dims = _network_layer(args)
    else:
        if args.layer is None or args.dims is None:
            raise UsageError("give --layer and --dims, or --network with --network-layer")
        if args.layer not in LAYERS:
            raise UsageError(f"--layer = {args.layer!r} is unknown; allowed: {', '.join(LAYERS)}")
        dims = _assignments(args.dims, "--dims")
        if any(not isinstance(value, int) for value in dims.values()):
            raise UsageError(f"--dims = {args.dims!r}: every dimension must be an integer")
    if any(value < (0 if name == "p" else 1) for name, value in dims.items()):
        raise UsageError(f"--dims = {args.dims!r}: every dimension must be at least 1 (the padding p at least 0)")
    check_tensor_sizes(args.layer, dims)
    try:
        layer = compile_layer(args.layer, dims, pes=args.pes, pe=_assignments(args.pe, "--pe"), sr=args.sr,
                              ibuffer_limit=args.ibuffer_bytes)
    except ProgramError as error:
        raise UsageError(f"the layer does not fit: {error}") from None
    except (ValueError, ParameterError) as error:
        raise UsageError(str(error)) from None
    summary = layer.summary()
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"{layer.kind} {' '.join(f'{k}={v}' for k, v in layer.dims.items())}, {layer.pes} PE(s), "
          f"lanes {layer.pe['lanes']}")
    print(f"PMAG programs: {summary['pmag_programs']} x (18 B word + 32 B descriptor); PE pass words: "
          f"{summary['pe_words']} x 4 B; iBuffer image {summary['ibuffer_bytes']} B")
    if summary["merged_writes"]:
        print(f"  of which {summary['merged_writes']} merged write programs, one per result block, run by the common "
              "PMAG in the bus's order: block 0 of PE 0, 1, ..., then block 1, ...")
    for entry in summary["pmag"]:
        owner = "" if entry["owner"] is None else f" {entry['owner']}"
        print(f"  PMAG {entry['role']}{owner} (vault {entry['vault']}): word {entry['word']} "
              f"descriptor {entry['descriptor']}  ranges {entry['ranges']}")
    for entry in summary["pe"]:
        print(f"  PE {entry['pe']}: {entry['passes']} passes, words {' '.join(entry['words'])}, "
              f"BUF1 {entry['in1_words']} words, BUF2 {entry['in2_rows']} rows")
    return 0


def _compile_network(args, description, batch):
    """Compile every conv and fc layer of a network, FF, BP and UP (or ``--pass``), and print one line each."""
    from trainforge.sim.neurotrainer.compiler import compile_layer
    from trainforge.sim.neurotrainer.networks import network_passes
    from trainforge.sim.neurotrainer.program import ProgramError
    passes = (args.training_pass,) if args.training_pass else ("ff", "bp", "up")
    rows = []
    for name, training_pass, kind, dims, groups in network_passes(description, batch, passes):
        row = {"layer": name, "pass": training_pass, "kind": kind, "dims": dims, "groups": groups}
        try:
            layer = compile_layer(kind, dims, pes=args.pes, pe=_assignments(args.pe, "--pe"), sr=args.sr,
                                  ibuffer_limit=args.ibuffer_bytes)
        except ProgramError as error:
            row["error"] = str(error)
        except (ValueError, ParameterError) as error:
            raise UsageError(str(error)) from None
        else:
            summary = layer.summary()
            row.update(lowering="tiled" if layer.copy_jobs else "direct", bits=layer.bits,
                       pe_passes=summary["pe_words"], pmag_programs=summary["pmag_programs"],
                       copy_programs=sum(len(job.source.programs) + len(job.dest.programs)
                                         for job in layer.copy_jobs),
                       ibuffer_bytes=summary["ibuffer_bytes"],
                       vault_words={str(k): v for k, v in layer.vault_words.items()})
        rows.append(row)
    if args.json:
        print(json.dumps({"network": description.name, "n": batch, "pes": args.pes, "layers": rows}, indent=1))
    else:
        print(f"{description.name}: n={batch}, {args.pes} PE(s); a grouped layer runs once per group")
        print(f"{'layer':8} {'pass':4} {'kind':8} {'lowering':8} {'bits':>4} {'groups':>6} {'PE passes':>10} "
              f"{'PMAG progs':>10} {'iBuffer B':>9}  dims")
        for row in rows:
            dims = " ".join(f"{k}={v}" for k, v in row["dims"].items())
            if "error" in row:
                print(f"{row['layer']:8} {row['pass']:4} {row['kind']:8} does not fit: {row['error']}  {dims}")
                continue
            print(f"{row['layer']:8} {row['pass']:4} {row['kind']:8} {row['lowering']:8} {row['bits']:>4} "
                  f"{row['groups']:>6} {row['pe_passes']:>10} {row['pmag_programs']:>10} {row['ibuffer_bytes']:>9}  "
                  f"{dims}")
    return 1 if any("error" in row for row in rows) else 0


def add_commands(commands):
    """Add ``trainforge neurotrainer compile``."""
    from trainforge.sim.neurotrainer.compiler import LAYERS
    parser = commands.add_parser("compile", help="compile a layer to PMAG (18 B) and PE (4 B) program words")
    parser.add_argument("--layer", help=f"layer kind: {', '.join(LAYERS)}")
    parser.add_argument("--dims", help="dimensions, e.g. n=4,d=2,h=8,w=8,o=3,hk=3,wk=3 (see the layer kind's "
                                       "list); with --network only the batch, n=N (default 1)")
    parser.add_argument("--network", help="instead of --layer: alexnet, vgg16, another model's MODEL/NAME "
                                           "(trainforge networks list) or a .json/.yaml network file")
    parser.add_argument("--network-layer", help="with --network: the name of the conv or fc layer to compile "
                                                 "(stride 1, the input padded by add_pad); without it every conv "
                                                 "and fc layer is compiled (stride and padding included) and "
                                                 "summarised, one line per layer and pass")
    parser.add_argument("--pass", dest="training_pass", choices=("ff", "bp", "up"), default=None,
                        help="with --network: forward (ff), backward (bp) or weight update (up); default ff "
                             "with --network-layer, all three without")
    parser.add_argument("--pes", type=int, default=1, help="processing elements / independent vaults")
    parser.add_argument("--pe", default="", help="NTPE parameters, e.g. lanes=4,in1_depth=512")
    parser.add_argument("--sr", action="store_true", help="stochastic rounding in the 32-bit MAC passes")
    parser.add_argument("--ibuffer-bytes", type=int, default=16 * 1024, help="iBuffer size limit")
    parser.add_argument("--json", action="store_true", help="print the JSON summary")
    parser.set_defaults(func=_compile)
