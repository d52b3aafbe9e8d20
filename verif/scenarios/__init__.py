"""Scenario tables, one module per registered block (see ``verif/scenario.py``)."""
