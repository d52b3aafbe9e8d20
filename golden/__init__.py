"""Vectorised numpy golden models, one next to every hardware block."""
