"""Area of the NeuroTrainer MAC variants against the plain fixed-point MAC (paper, Table 1).

Synthesises ``nt_mac`` once per rounding variant with the foundation's generic
Yosys flow (:func:`trainforge.synth.synthesize`, cell counts) and, optionally,
places and routes it on the ECP5-85F (:func:`trainforge.fpga.place_and_route`,
LUT4 / FF / MULT18 / Fmax). The ratios are taken against ``truncate``, the
paper's plain "Fixed 32/16" MAC; ``nearest`` is the round-to-nearest variant
of the same MAC. The paper's areas are 15 nm standard-cell areas in um^2; only
their ratios are comparable with ours.
"""
import pathlib

from trainforge.emit import emit
from trainforge.hw.neurotrainer.mac import NTMAC
from trainforge.progress import progress

__all__ = ["PAPER_AREA_UM2", "VARIANTS", "mac_area"]

#: Table 1 of the paper (um^2, 15 nm FinFET, 2.5 GHz), keyed by our ``rounding`` names.
PAPER_AREA_UM2 = {"float32": 2093.88, "truncate": 986.23, "sr_full": 2072.44, "sr_lo": 1578.71}

#: The ``rounding`` choices of ``nt_mac``, plain fixed first (the reference of the ratios).
VARIANTS = ("truncate", "nearest", "sr_full", "sr_lo")

BUILD = pathlib.Path("build")


def mac_area(lanes=1, fpga=False):
    """Synthesis (and optionally ECP5) figures of every ``nt_mac`` rounding variant, as a JSON-able dict.

    Parameters
    ----------
    lanes : int
        MAC lanes k of every variant (``nt_mac``'s ``lanes`` parameter and range).
    fpga : bool
        Also place and route each variant on the ULX3S ECP5-85F.
    """
    from trainforge.synth import synthesize
    NTMAC.PARAMS.resolve(lanes=lanes)
    emitted = {variant: emit("nt_mac", lanes=lanes, rounding=variant) for variant in VARIANTS}
    rows = []
    for variant in progress(VARIANTS, "synthesis of the MAC variants", unit="variant"):
        synth = synthesize(emitted[variant], BUILD / "synth")
        rows.append({"rounding": variant, "cells": synth["cells"],
                     "flip_flops": sum(count for cell, count in synth["cells_by_type"].items() if "DFF" in cell),
                     "paper_um2": PAPER_AREA_UM2.get(variant)})
    if fpga:
        from trainforge.fpga import place_and_route
        for row in rows:
            placed = place_and_route(emitted[row["rounding"]], BUILD / "fpga")
            row.update({key: placed[key] for key in ("lut4", "ff_block", "mult18", "fmax_mhz")})
    reference = rows[0]
    for row in rows:
        row["cell_ratio"] = row["cells"] / reference["cells"]
        if fpga:
            row["lut4_ratio"] = row["lut4"] / reference["lut4"]
        if row["paper_um2"] is not None:
            row["paper_ratio"] = row["paper_um2"] / PAPER_AREA_UM2["truncate"]
    return {"lanes": lanes, "reference": "truncate (the paper's plain Fixed 32/16)",
            "paper_float32_um2": PAPER_AREA_UM2["float32"], "tool": "generic Yosys synth (cells)"
            + (" + nextpnr-ecp5 (ULX3S 85F)" if fpga else ""), "variants": rows}
