"""Specifications shared by the hardware generators (``trainforge.hw``) and the golden models (``trainforge.golden``).

A spec module holds everything both sides must agree on: the parameter
schemas, the opcodes and modes (``amaranth.lib.enum`` enums with shapes), the
``lib.data`` payload layouts, latencies, derived widths and connectivity
patterns. It imports only :mod:`trainforge.errors`, :mod:`trainforge.checks`,
other spec modules, Amaranth's ``hdl``/``lib`` and numpy: never a generator,
a golden model or a system model (``verif/test_layering.py`` checks this).
"""
