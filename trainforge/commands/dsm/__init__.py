"""``trainforge dsm ...``: the command line of the dsm family."""
