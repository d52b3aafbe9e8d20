"""Area overhead of the TensorDash PE over the dense PE of the same width (paper, Table IV: 1.14x).

Runs the foundation's generic Yosys synthesis (:func:`trainforge.synth.synthesize`,
cell counts) and, optionally, its ECP5 place and route
(:func:`trainforge.fpga.place_and_route`, LUT4/FF/MULT18) on ``td_pe`` and
``dense_pe`` with matching ``lanes``, ``width``, ``acc_width`` and ``signed``,
and reports the ratios. Same work folders as ``trainforge synth``/``fpga``.
"""
import pathlib

from trainforge.emit import emit
from trainforge.progress import progress

__all__ = ["PAPER_AREA_RATIO", "area_overhead"]

#: Table IV: TensorDash compute area (cores, transposers, schedulers, muxes, staging buffers) / baseline.
PAPER_AREA_RATIO = 1.14

BUILD = pathlib.Path("build")


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else None


def area_overhead(lanes=4, width=8, acc_width=32, mode="both", fpga=False, tile=None):
    """Synthesis (and optionally FPGA) figures of ``td_pe`` and ``dense_pe`` and their ratios (JSON-able dict).

    With ``tile=(rows, cols)``, also the ``td_tile`` of that shape against ``rows * cols`` dense PEs
    (separate dense PEs, each with its own operand registers: a shared-operand dense tile would be
    smaller, so this ratio is a lower bound of the tile's overhead).
    """
    from trainforge.synth import synthesize
    common = {"lanes": lanes, "width": width, "acc_width": acc_width}
    td = emit("td_pe", mode=mode, **common)
    dense = emit("dense_pe", **common)
    report = {"params": {**common, "mode": mode}, "paper_ratio": PAPER_AREA_RATIO}
    synth = {item.block.name: synthesize(item, BUILD / "synth")
             for item in progress([td, dense], "synthesis", unit="block")}
    report["synth"] = {"td_pe_cells": synth["td_pe"]["cells"], "dense_pe_cells": synth["dense_pe"]["cells"],
                       "cell_ratio": _ratio(synth["td_pe"]["cells"], synth["dense_pe"]["cells"]),
                       "td_pe_flip_flops": _flip_flops(synth["td_pe"]),
                       "dense_pe_flip_flops": _flip_flops(synth["dense_pe"]),
                       "tool": synth["td_pe"]["tool"]}
    if tile is not None:
        rows, cols = tile
        cells = synthesize(emit("td_tile", rows=rows, cols=cols, **common), BUILD / "synth")["cells"]
        dense_cells = rows * cols * synth["dense_pe"]["cells"]
        report["tile"] = {"rows": rows, "cols": cols, "td_tile_cells": cells, "dense_pe_cells_times_pes": dense_cells,
                          "cell_ratio": _ratio(cells, dense_cells)}
    if fpga:
        from trainforge.fpga import place_and_route
        placed = {item.block.name: place_and_route(item, BUILD / "fpga") for item in (td, dense)}
        report["fpga"] = {
            **{f"{name}_{key}": placed[name][key] for name in placed for key in ("lut4", "ff_block", "mult18",
                                                                                 "fmax_mhz")},
            "lut4_ratio": _ratio(placed["td_pe"]["lut4"], placed["dense_pe"]["lut4"]),
            "ff_ratio": _ratio(placed["td_pe"]["ff_block"], placed["dense_pe"]["ff_block"]),
        }
    return report


def _flip_flops(result):
    return sum(count for cell, count in result["cells_by_type"].items() if "DFF" in cell)
