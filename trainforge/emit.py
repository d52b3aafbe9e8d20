"""Verilog emission and the manifest of emitted files."""
import hashlib
import json
import pathlib

from amaranth.back import verilog
from amaranth.hdl import Value
from amaranth.lib import wiring

from .hw.registry import BLOCKS, get_block
from .outputs import write_text

__all__ = ["Emitted", "ports", "emit", "elaborate_all", "write_outputs"]


class Emitted:
    """The Verilog text of one block with its resolved parameters and ports.

    Attributes
    ----------
    block : Block
    params : dict
    text : str
    ports : list of dict
    """
    def __init__(self, block, params, text, port_list):
        self.block = block
        self.params = params
        self.text = text
        self.ports = port_list

    @property
    def sha256(self):
        return hashlib.sha256(self.text.encode()).hexdigest()

    def manifest_entry(self, path):
        return {
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
    for path, member, value in component.signature.flatten(component):
        result.append({
            "name": "__".join(map(str, path)),
            "direction": "input" if member.flow == wiring.In else "output",
            "width": len(Value.cast(value)),
        })
    return result


def emit(block_name, **overrides):
    """Elaborate one block (parameters validated first) and return its :class:`Emitted`."""
    block = get_block(block_name)
    params = block.resolve(**overrides)
    component = block.component(**params)
    port_list = ports(component)
    text = verilog.convert(component, name=block.name, emit_src=False)
    return Emitted(block, params, text, port_list)


def elaborate_all(block_names, param_assignments):
    """Emit every named block (all registered blocks when none is named).

    ``param_assignments`` (``["name=value", ...]``) apply to the one named
    block; they are refused when no block or several blocks are named. All
    validation and elaboration happen before anything is written.
    """
    from .errors import UsageError

    names = list(block_names) or list(BLOCKS)
    if param_assignments and len(block_names) != 1:
        raise UsageError("--param needs exactly one block name, e.g. 'trainforge verilog dense_pe --param lanes=8'")
    emitted = []
    for name in names:
        block = get_block(name)
        overrides = block.schema.parse(param_assignments) if param_assignments else {}
        emitted.append(emit(name, **overrides))
    return emitted


def write_outputs(emitted, out_dir):
    """Write ``<block>.v`` files and merge their entries into ``manifest.json``."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    manifest = {}
    if manifest_path.exists():
        manifest = {entry["block"]: entry for entry in json.loads(manifest_path.read_text())["blocks"]}
    for item in emitted:
        path = out_dir / f"{item.block.name}.v"
        write_text(path, item.text)
        manifest[item.block.name] = item.manifest_entry(path)
    ordered = [manifest[name] for name in sorted(manifest)]
    write_text(manifest_path, json.dumps({"blocks": ordered}, indent=2) + "\n")
    return manifest_path
