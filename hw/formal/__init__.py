"""Formal wrappers of shared blocks: each puts Amaranth ``Assert``/``Assume``/``Cover`` around one block.

``trainforge formal`` (:mod:`trainforge.formal`) elaborates them, writes a
SymbiYosys job and runs it.
"""
