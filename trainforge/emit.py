"""Verilog emission, the manifest of emitted files, and the instantiation template.

A block is emitted under its registered name, or under ``--name`` (``emit(...,
module=NAME)``): Amaranth writes the block and its submodules into one file and
prefixes every submodule with the top module's name (``NAME.core_0``), so two
variants of one block emitted under two names live side by side in one design.
"""
import functools
import hashlib
import json
import keyword
import os
import pathlib
import re
import sys

import amaranth

from amaranth.back import verilog
from amaranth.hdl import Shape, ShapeCastable, Value
from amaranth.lib import data, stream, wiring

from .hw.registry import BLOCKS, get_block
from .outputs import write_json, write_text

__all__ = ["Emitted", "ports", "payload_fields", "check_module_name", "emit", "emit_cached", "source_fingerprint",
           "elaborate_all", "write_outputs", "instantiation_template", "testbench_skeleton"]

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Where :func:`emit_cached` keeps emitted Verilog, one JSON file per block and parameter set.
EMIT_CACHE = ROOT / "build" / "emit"

#: Environment variable that turns :func:`emit_cached`'s cache off (value ``0``).
EMIT_CACHE_ENV = "TRAINFORGE_EMIT_CACHE"

#: The sources a block's Verilog depends on: the generators (``hw/``), the spec they read, and this module.
#: Layering keeps ``hw/`` from importing ``golden/`` or ``sim/`` (``verif/test_layering.py``), so nothing else
#: enters the elaboration but Amaranth itself, whose version is part of the fingerprint.
FINGERPRINT_SOURCES = (ROOT / "hw", ROOT / "spec", pathlib.Path(__file__).resolve())

#: Verilog-2005 keywords a module may not be named (the common ones a user could pick).
_VERILOG_KEYWORDS = frozenset("""always and assign begin buf case casex casez cmos deassign default defparam disable
edge else end endcase endfunction endmodule endprimitive endspecify endtable endtask event for force forever fork
function generate genvar highz0 highz1 if initial inout input integer join large localparam macromodule medium
module nand negedge nmos nor not notif0 notif1 or output parameter pmos posedge primitive pull0 pull1 pulldown
pullup rcmos real realtime reg release repeat rnmos rpmos rtran rtranif0 rtranif1 scalared signed small specify
specparam strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1 tri tri0 tri1 triand trior trireg
unsigned vectored wait wand weak0 weak1 while wire wor xnor xor""".split())


def check_module_name(name):
    """Return ``name`` if it can name a Verilog module, else raise :class:`~trainforge.errors.UsageError`."""
    from .errors import UsageError

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or "") or name in _VERILOG_KEYWORDS:
        raise UsageError(f"--name {name!r} is not a Verilog module name; allowed: a letter or _, then letters, "
                         f"digits or _, and not a Verilog keyword")
    return name


class Emitted:
    """The Verilog text of one block with its resolved parameters and ports.

    Attributes
    ----------
    block : Block
    params : dict
    text : str
    ports : list of dict
    """
    def __init__(self, block, params, text, port_list, module=None):
        self.block = block
        self.params = params
        self.text = text
        self.ports = port_list
        self.module = module or block.name

    @property
    def sha256(self):
        return hashlib.sha256(self.text.encode()).hexdigest()

    def manifest_entry(self, path):
        return {
            "module": self.module,
            "block": self.block.name,
            "file": path.name,
            "params": self.params,
            "ports": self.ports,
            "sha256": self.sha256,
        }


def ports(component):
    """Top-level ports of ``component`` as Amaranth's Verilog back end names them.

    The clock and reset come first; the signature's members follow, flattened
    as ``<member>__<field>``.
    """
    result = [
        {"name": "clk", "direction": "input", "width": 1},
        {"name": "rst", "direction": "input", "width": 1},
    ]
    payloads = {}
    for name, member in component.signature.members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            payloads[f"{name}__payload"] = member.signature.members["payload"].shape
    for path, member, value in component.signature.flatten(component):
        name = "__".join(map(str, path))
        entry = {
            "name": name,
            "direction": "input" if member.flow == wiring.In else "output",
            "width": len(Value.cast(value)),
        }
        if name in payloads:
            entry["fields"] = payload_fields(payloads[name])
        result.append(entry)
    return result


def payload_fields(shape, prefix="", offset=0):
    """The leaf fields of a payload shape, flattened: ``name`` (``a[0]``, ``flags.read``), bit ``offset``, ``width``, ``signed``.

    A plain shape is one field named ``""``; a ``lib.data`` struct, union or
    array layout is walked down to its plain-shaped members.
    """
    if isinstance(shape, data.Layout):
        fields = []
        for key, field in shape:
            name = f"{prefix}[{key}]" if isinstance(key, int) else (f"{prefix}.{key}" if prefix else str(key))
            fields.extend(payload_fields(field.shape, name, offset + field.offset))
        return fields
    if isinstance(shape, ShapeCastable) and not isinstance(shape, Shape):
        plain = Shape.cast(shape)
        return [{"name": prefix, "offset": offset, "width": plain.width, "signed": plain.signed,
                 "type": type(shape).__name__}]
    plain = Shape.cast(shape)
    return [{"name": prefix, "offset": offset, "width": plain.width, "signed": plain.signed}]


def emit(block_name, module=None, **overrides):
    """Elaborate one block (parameters validated first) and return its :class:`Emitted`.

    Parameters
    ----------
    block_name : str
        The registered block.
    module : str, optional
        Name of the top module (default: the block's name); submodules take it as their prefix.
    **overrides :
        Parameters of the block.
    """
    block = get_block(block_name)
    module = check_module_name(module) if module is not None else block.name
    params = block.resolve(**overrides)
    component = block.component(**params)
    port_list = ports(component)
    text = verilog.convert(component, name=module, emit_src=False)
    return Emitted(block, params, text, port_list, module)


@functools.lru_cache(maxsize=None)
def source_fingerprint(sources=FINGERPRINT_SOURCES):
    """A SHA-256 over Amaranth's and Python's versions and the text of every file of ``sources``.

    Directories are walked recursively (``__pycache__`` and Markdown skipped); each file enters with its
    path relative to the repository, so a renamed or added file changes the fingerprint too.
    """
    digest = hashlib.sha256(f"amaranth {amaranth.__version__}; python {sys.version}".encode())
    for source in sources:
        files = sorted(source.rglob("*")) if source.is_dir() else [source]
        for path in files:
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".md":
                continue
            digest.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def emit_cached(block_name, **overrides):
    """:func:`emit`, with the Verilog kept under ``build/emit/`` and reused while the sources are unchanged.

    The key is the block, its resolved parameters and :func:`source_fingerprint`, so an edit of any
    generator or spec file, or another Amaranth, makes every entry miss. Parameters are validated
    before the cache is looked at. The simulation runs and the lint of ``make test`` use it (each
    parameter set is elaborated once, not once per simulator and check) and ``trainforge verilog``;
    synthesis and the formal flow always elaborate. ``TRAINFORGE_EMIT_CACHE=0`` turns it off.
    """
    from .outputs import write_text

    block = get_block(block_name)
    params = block.resolve(**overrides)
    if os.environ.get(EMIT_CACHE_ENV, "1") == "0":
        return emit(block_name, **overrides)
    key = hashlib.sha256(json.dumps([block.name, params, source_fingerprint()], sort_keys=True,
                                    default=repr).encode()).hexdigest()
    path = EMIT_CACHE / f"{block.name}-{key[:20]}.json"
    if path.exists():
        try:
            entry = json.loads(path.read_text())
            return Emitted(block, params, entry["text"], entry["ports"])
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is elaborated again and rewritten
    emitted = emit(block.name, **overrides)
    write_text(path, json.dumps({"block": block.name, "text": emitted.text, "ports": emitted.ports}))
    return emitted


def elaborate_all(block_names, param_assignments, module=None, cached=False):
    """Emit every named block (all registered blocks when none is named).

    ``param_assignments`` (``["name=value", ...]``) apply to the one named
    block; they are refused when no block or several blocks are named. All
    validation and elaboration happen before anything is written. With
    ``cached`` (``trainforge verilog``), a block under its own module name comes
    from :func:`emit_cached`: the same text while ``hw/``, ``spec/`` and the tools
    are unchanged.
    """
    from .errors import UsageError

    names = list(block_names) or list(BLOCKS)
    if param_assignments and len(block_names) != 1:
        raise UsageError("--param needs exactly one block name, e.g. 'trainforge verilog dense_pe --param lanes=8'")
    if module is not None and len(block_names) != 1:
        raise UsageError("--name needs exactly one block name, e.g. 'trainforge verilog dense_pe --name pe_a'")
    from .progress import progress

    emitted = []
    for name in progress(names, "elaborating", unit="block"):
        block = get_block(name)
        overrides = block.schema.parse(param_assignments) if param_assignments else {}
        if cached and module is None:
            emitted.append(emit_cached(name, **overrides))
        else:
            emitted.append(emit(name, module=module, **overrides))
    return emitted


def instantiation_template(item):
    """Verilog text instantiating ``item``'s module, one port per line with its direction, width and payload fields."""
    lines = [f"// Instantiation template of module {item.module}: block {item.block.name}, "
             f"parameters {json.dumps(item.params, sort_keys=True)}.",
             "// Stream ports follow amaranth.lib.stream: a transfer happens in a cycle where valid and ready are both high.",
             f"{item.module} u_{item.module} ("]
    for index, port in enumerate(item.ports):
        comma = "," if index < len(item.ports) - 1 else ""
        width = f"[{port['width'] - 1}:0] " if port["width"] > 1 else ""
        lines.append(f"    .{port['name']}({port['name']}){comma}  // {port['direction']} {width}".rstrip())
        for field in port.get("fields", ()):
            if field["name"]:
                high = field["offset"] + field["width"] - 1
                kind = "signed" if field["signed"] else "unsigned"
                lines.append(f"    //   [{high}:{field['offset']}] {field['name']} ({kind} {field['width']})")
    lines.append(");")
    return "\n".join(lines) + "\n"


_SKELETON = '''"""cocotb testbench skeleton for module {module} (block {block}), written by 'trainforge verilog'.

It drives every input stream and takes every output stream with trainforge's stream drivers
(random valid gaps and ready backpressure), and packs payloads through the block's own layouts.
Run it with:  python {test_file}     (Icarus; or SIM=verilator python {test_file})
Fill in the stimulus and the checks marked TODO.
"""
import os
import pathlib
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from trainforge.cocotb_streams import Cycle, StreamSink, StreamSource
from trainforge.hw.registry import get_block

PARAMS = {params}
COMPONENT = get_block("{block}").build(**PARAMS)  # for the payload layouts


@cocotb.test()
async def smoke(dut):
    cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())
    rng = random.Random(cocotb.RANDOM_SEED)
    cycle = Cycle(dut.clk)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
{drivers}
    # TODO: queue stimulus, e.g. source.send([layout.const({{...}}).as_bits(), ...]), then wait and check.
    await ClockCycles(dut.clk, 100)


if __name__ == "__main__":
    from cocotb.runner import get_runner

    here = pathlib.Path(__file__).resolve().parent
    runner = get_runner(os.environ.get("SIM", "icarus"))
    runner.build(verilog_sources=[here / "{module}.v"], hdl_toplevel="{module}", build_dir=here / "sim_build_{module}",
                 timescale=("1ns", "1ps"))
    runner.test(hdl_toplevel="{module}", test_module=pathlib.Path(__file__).stem, build_dir=here / "sim_build_{module}",
                test_dir=here)
'''


def testbench_skeleton(item):
    """A cocotb test module for ``item``'s module: clock, reset, a driver on every stream port, a runner."""
    streams = {}
    for port in item.ports:
        name, _, field = port["name"].rpartition("__")
        if field == "payload":
            streams[name] = port["direction"]
    drivers = []
    for name, direction in streams.items():
        if direction == "input":
            drivers.append(f"    {name} = StreamSource(dut, \"{name}\", cycle, rng, valid_probability=0.8)"
                           f"  # payload layout: COMPONENT.signature.members[\"{name}\"].signature.members[\"payload\"].shape")
        else:
            drivers.append(f"    {name} = StreamSink(dut, \"{name}\", cycle, rng, ready_probability=0.8)"
                           f"  # {name}.received: (cycle, payload bits) of every transfer")
    return _SKELETON.format(module=item.module, block=item.block.name, params=repr(item.params),
                            test_file=f"test_{item.module}.py", drivers="\n".join(drivers) or "    pass")


def _read_manifest(manifest_path):
    from .errors import UsageError

    if not manifest_path.exists():
        return {}
    try:
        entries = json.loads(manifest_path.read_text())["blocks"]
        return {entry.get("module", entry["block"]): entry for entry in entries}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"{manifest_path} is not a trainforge manifest ({error}); move it away or pick another --out") \
            from None


def write_outputs(emitted, out_dir):
    """Write ``<module>.v``, ``<module>_inst.v`` and ``test_<module>.py`` and merge their entries into ``manifest.json``."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    manifest = _read_manifest(manifest_path)
    for item in emitted:
        path = out_dir / f"{item.module}.v"
        write_text(path, item.text)
        write_text(out_dir / f"{item.module}_inst.v", instantiation_template(item))
        write_text(out_dir / f"test_{item.module}.py", testbench_skeleton(item))
        manifest[item.module] = item.manifest_entry(path)
    ordered = [manifest[name] for name in sorted(manifest)]
    write_json(manifest_path, {"blocks": ordered})  # + the provenance of the trainforge command writing it
    return manifest_path
