"""Amaranth generators of trainforge: one component per file, registered in :mod:`trainforge.hw.registry`."""
